//! Output that fits the terminal: the width is `COLUMNS` when set, else the terminal's own
//! when standard output is one; piped output without `COLUMNS` is left as it is (a program
//! reading it wants whole lines). Prose lines longer than the width wrap at word boundaries
//! under their own indent; table lines (box drawing) are never wrapped: tables are laid out
//! to the width instead (`fit_table`).

use std::sync::OnceLock;

static WIDTH: OnceLock<Option<usize>> = OnceLock::new();

/// The width output should fit, if any.
pub fn width() -> Option<usize> {
    *WIDTH.get_or_init(|| {
        if let Some(c) = std::env::var("COLUMNS")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
        {
            return (c >= 20).then_some(c);
        }
        use std::io::IsTerminal;
        if std::io::stdout().is_terminal() {
            terminal_size::terminal_size().map(|(w, _)| usize::from(w.0).max(20))
        } else {
            None
        }
    })
}

/// `text` with each over-long prose line wrapped to `width`.
pub fn fit(text: &str, width: Option<usize>) -> String {
    let Some(w) = width else {
        return text.to_string();
    };
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if textwrap::core::display_width(line) <= w || is_table_line(line) {
            out.push_str(line);
            continue;
        }
        let indent: String = line
            .chars()
            .take_while(|c| c.is_whitespace() || *c == '│')
            .collect();
        let hang = format!("{indent}  ");
        let opts = textwrap::Options::new(w)
            .subsequent_indent(&hang)
            .break_words(true);
        out.push_str(&textwrap::fill(line, opts));
    }
    out
}

fn is_table_line(line: &str) -> bool {
    let frame = |c: char| ('\u{2500}'..='\u{257f}').contains(&c) || c == '|' || c == '+';
    let t = line.trim();
    t.chars().next().is_some_and(frame) && t.chars().last().is_some_and(frame)
}

/// Lay a table out to the output width (columns shrink and wrap their cells).
pub fn fit_table(t: &mut comfy_table::Table) {
    if let Some(w) = width() {
        t.set_content_arrangement(comfy_table::ContentArrangement::Dynamic);
        t.set_width(u16::try_from(w).unwrap_or(u16::MAX));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prose_wraps_under_its_indent_and_tables_do_not() {
        let long = format!("    {}", "word ".repeat(30));
        let f = fit(&long, Some(40));
        assert!(f.lines().all(|l| l.chars().count() <= 40), "{f}");
        assert!(f.lines().skip(1).all(|l| l.starts_with("      ")), "{f}");
        let table = format!("│ {} │", "x".repeat(60));
        assert_eq!(fit(&table, Some(40)), table);
        assert_eq!(fit(&long, None), long);
    }
}
