//! Escaping for what sage writes into documents others open: the HTML view, the SVG figures
//! of the reliability report, the JSON a page embeds, and annotation sheets opened in a
//! spreadsheet, and trace text shown as a terminal would show it. Trace text is hostile
//! (`docs/security.md`): one helper per kind of document, so a fix lands in every writer at
//! once. This crate knows nothing else of sage and depends
//! on no other sage crate, so every stage that writes markup can use it.

#![warn(missing_docs)]

use std::borrow::Cow;

/// Escape text for HTML or SVG element content and quoted attribute values.
pub fn html(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + s.len() / 8);
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// JSON text that can sit inside a `<script type="application/json">` element: `<`, `>`
/// and `&` are written as `\u003c`, `\u003e`, `\u0026` (and U+2028/2029 escaped), so no
/// text in the data can close the element or open a comment (`<!--<script>`) that would
/// swallow the rest of the page. `JSON.parse` reads it back unchanged.
pub fn json_in_html<T: serde::Serialize + ?Sized>(v: &T) -> String {
    let s = serde_json::to_string(v).unwrap_or_else(|_| "null".into());
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => o.push_str("\\u003c"),
            '>' => o.push_str("\\u003e"),
            '&' => o.push_str("\\u0026"),
            '\u{2028}' => o.push_str("\\u2028"),
            '\u{2029}' => o.push_str("\\u2029"),
            c => o.push(c),
        }
    }
    o
}

/// A cell a spreadsheet shows as text: a value starting with `=`, `+`, `-`, `@`, a tab or a
/// carriage return would be run as a formula (`=HYPERLINK(...)`), so it gets a leading `'`
/// (what spreadsheets themselves use to mark text). [`csv_uncell`] undoes it on import.
pub fn csv_cell(s: &str) -> Cow<'_, str> {
    match s.chars().next() {
        Some('=' | '+' | '-' | '@' | '\t' | '\r') => Cow::Owned(format!("'{s}")),
        // a value that already starts with the marker keeps it, so import is exact
        Some('\'') if s[1..].starts_with(['=', '+', '-', '@', '\t', '\r', '\'']) => {
            Cow::Owned(format!("'{s}"))
        }
        _ => Cow::Borrowed(s),
    }
}

/// The value of a cell written by [`csv_cell`].
pub fn csv_uncell(s: &str) -> &str {
    match s.strip_prefix('\'') {
        Some(rest) if rest.starts_with(['=', '+', '-', '@', '\t', '\r', '\'']) => rest,
        _ => s,
    }
}

// ------------------------------------------------------------------ terminal text

/// Terminal output (a tool result, a shell transcript) as the text a terminal would show,
/// with nothing left that can act on a terminal or a page: ANSI escape sequences (CSI such
/// as colours and `ESC[?2004l`, OSC such as window titles, DCS/PM/APC strings and
/// two-character escapes) are removed; a carriage return not followed by a newline returns
/// to the start of the line and later text overwrites it (progress bars); a backspace steps
/// back one character; every other control character except newline and tab, and the
/// bidirectional overrides that reorder displayed text, is shown as a visible escape
/// (`\u{7}`), so it is still there to read but inert.
pub fn terminal_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    // the current line and the cursor's column in it
    let mut line: Vec<char> = Vec::new();
    let mut col = 0usize;
    let put = |line: &mut Vec<char>, col: &mut usize, c: char| {
        if *col < line.len() {
            line[*col] = c;
        } else {
            line.push(c);
        }
        *col += 1;
    };
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        match c {
            '\n' => {
                out.extend(line.drain(..));
                out.push('\n');
                col = 0;
            }
            '\r' => {
                if it.peek() != Some(&'\n') {
                    col = 0;
                }
            }
            '\u{8}' => col = col.saturating_sub(1),
            '\t' => put(&mut line, &mut col, '\t'),
            '\u{1b}' | '\u{9b}' => {
                let kind = if c == '\u{9b}' { Some('[') } else { it.next() };
                match kind {
                    // CSI: parameters and intermediates, then one final byte
                    Some('[') => {
                        for n in it.by_ref() {
                            if ('\u{40}'..='\u{7e}').contains(&n) {
                                break;
                            }
                        }
                    }
                    // strings ended by BEL or ST (ESC \\)
                    Some(']' | 'P' | 'X' | '^' | '_') => {
                        while let Some(n) = it.next() {
                            if n == '\u{7}' || n == '\u{9c}' {
                                break;
                            }
                            if n == '\u{1b}' && it.peek() == Some(&'\\') {
                                it.next();
                                break;
                            }
                        }
                    }
                    // ESC, intermediates (` ` to `/`), one final character
                    Some(n) if ('\u{20}'..='\u{2f}').contains(&n) => {
                        while it.peek().is_some_and(|x| ('\u{20}'..='\u{2f}').contains(x)) {
                            it.next();
                        }
                        it.next();
                    }
                    _ => {}
                }
            }
            c if c.is_control() || is_bidi_control(c) => {
                for v in format!("\\u{{{:x}}}", c as u32).chars() {
                    put(&mut line, &mut col, v);
                }
            }
            c => put(&mut line, &mut col, c),
        }
    }
    out.extend(line);
    out
}

/// Unicode's explicit bidirectional formatting characters (embeddings, overrides,
/// isolates): they reorder how text around them is displayed.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{61c}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_text_is_what_a_terminal_shows_and_nothing_acts() {
        // OpenHands' bash observations open with bracketed-paste mode off and end with it on
        assert_eq!(
            terminal_text("\u{1b}[?2004lOld token: t1\n\u{1b}[?2004h"),
            "Old token: t1\n"
        );
        // colours (vitest's banner), CRLF
        assert_eq!(
            terminal_text("\u{1b}[1m\u{1b}[46m RUN \u{1b}[49m\u{1b}[22m ok\r\n"),
            " RUN  ok\n"
        );
        // a progress bar redrawn with carriage returns; a backspace
        assert_eq!(terminal_text("10%\r55%\r100%\ndone"), "100%\ndone");
        assert_eq!(terminal_text("ab\u{8}c"), "ac");
        // OSC window title (BEL or ST), charset selection, reset, C1 CSI
        assert_eq!(
            terminal_text("\u{1b}]0;owned\u{7}a\u{1b}]2;x\u{1b}\\b\u{1b}(Bc\u{1b}cd\u{9b}31me"),
            "abcde"
        );
        // other controls and bidi overrides stay visible as text, inert
        assert_eq!(terminal_text("a\u{7}b\u{0}"), "a\\u{7}b\\u{0}");
        assert_eq!(terminal_text("x\u{202e}y"), "x\\u{202e}y");
        // an unterminated sequence swallows only itself
        assert_eq!(terminal_text("ok\u{1b}["), "ok");
        for s in ["\u{1b}", "\u{1b}]", "\r", "\u{8}\u{8}x"] {
            assert!(!terminal_text(s).chars().any(|c| c.is_control()), "{s:?}");
        }
    }

    #[test]
    fn html_escapes_every_character_that_can_end_content_or_an_attribute() {
        assert_eq!(
            html(r#"<img src=x onerror="a('&')">"#),
            "&lt;img src=x onerror=&quot;a(&#39;&amp;&#39;)&quot;&gt;"
        );
    }

    #[test]
    fn embedded_json_cannot_end_its_element() {
        let v = serde_json::json!({"t": "<!--<script></script>&\u{2028}"});
        let s = json_in_html(&v);
        assert!(!s.contains('<') && !s.contains('>') && !s.contains('&'));
        let back: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn csv_cells_round_trip_and_never_start_a_formula() {
        for v in [
            "=1+1", "+x", "-2", "@SUM(A1)", "'=x", "''", "plain", "", "'plain",
        ] {
            let c = csv_cell(v);
            assert!(!c.starts_with(['=', '+', '-', '@']), "{v} -> {c}");
            assert_eq!(csv_uncell(&c), v, "{v}");
        }
    }
}
