//! Comment lines, as pyszz's comment filter finds them (AG-SZZ and up, and V-SZZ).
//!
//! pyszz parses the blamed commit's version of the file and drops a blamed line when it
//! falls inside a comment range:
//! - C, C++, C#, Java (srcML in pyszz): every line a comment token spans, including a line
//!   with code followed by a trailing comment (srcML reports the comment's line range);
//! - Python: lines starting with `#`, and `'''`/`"""` blocks that start a line;
//! - JavaScript: lines starting with `//`, and `/* ... */` blocks that start a line;
//! - PHP: as JavaScript plus `#`; Ruby: `#`, `//` and `=begin ... =end`;
//! - anything else: no comments.
//!
//! Here the C family is handled by a small lexer that skips string and character literals
//! instead of srcML.

/// Line numbers (1-based) that pyszz's comment filter would treat as comments.
pub(crate) fn comment_lines(content: &str, file_name: &str) -> Vec<bool> {
    let n = content.lines().count();
    let mut mask = vec![false; n + 1];
    let name = file_name.rsplit('/').next().unwrap_or(file_name);
    let lower = name.to_ascii_lowercase();
    let ranges = if name.ends_with(".py") {
        line_start_blocks(
            content,
            &["#"],
            &[("'''", "'''"), ("\"\"\"", "\"\"\"")],
            true,
        )
    } else if name.ends_with(".js") {
        line_start_blocks(content, &["//"], &[("/*", "*/")], false)
    } else if name.ends_with(".php") {
        line_start_blocks(content, &["//", "#"], &[("/*", "*/")], false)
    } else if name.ends_with(".rb") {
        line_start_blocks(content, &["//", "#"], &[("=begin", "=end")], false)
    } else if C_FAMILY.iter().any(|e| lower.ends_with(e)) {
        c_family(content)
    } else {
        Vec::new()
    };
    for (a, b) in ranges {
        for m in mask.iter_mut().take(b.min(n) + 1).skip(a) {
            *m = true;
        }
    }
    mask
}

/// Extensions srcML parses in pyszz.
const C_FAMILY: &[&str] = &[
    ".c", ".h", ".hh", ".hpp", ".hxx", ".cxx", ".cpp", ".cc", ".cs", ".java",
];

/// True when the language of `file_name` has a comment parser.
pub fn supported(file_name: &str) -> bool {
    let lower = file_name.to_ascii_lowercase();
    [".py", ".js", ".php", ".rb"]
        .iter()
        .any(|e| file_name.ends_with(e))
        || C_FAMILY.iter().any(|e| lower.ends_with(e))
}

/// pyszz's hand-written parsers: a comment is a line whose stripped text starts with a line
/// marker, or a block that starts a line and ends at the first later line ending with the
/// closer. `py_closer` adds Python's rule that a line starting with the quotes also closes.
fn line_start_blocks(
    content: &str,
    line_markers: &[&str],
    blocks: &[(&str, &str)],
    py_closer: bool,
) -> Vec<(usize, usize)> {
    let lines: Vec<&str> = content.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim();
        if let Some((open, _)) = blocks.iter().find(|(o, _)| line.starts_with(o)) {
            for (j, l) in lines.iter().enumerate().skip(i) {
                let mut t = l.trim();
                if j == i {
                    t = &t[open.len()..];
                }
                let closes = blocks.iter().any(|(_, c)| t.ends_with(c))
                    || (py_closer && blocks.iter().any(|(_, c)| t.starts_with(c)));
                if !t.is_empty() && closes {
                    out.push((i + 1, j + 1));
                    i = j;
                    break;
                }
            }
        } else if line_markers.iter().any(|m| line.starts_with(m)) {
            out.push((i + 1, i + 1));
        }
        i += 1;
    }
    out
}

/// Comment ranges of C-family source: `//` to end of line, `/* */` spanning lines; string
/// and character literals are skipped so `"http://x"` is not a comment.
fn c_family(content: &str) -> Vec<(usize, usize)> {
    let b = content.as_bytes();
    let mut out = Vec::new();
    let mut line = 1usize;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\n' => {
                line += 1;
                i += 1;
            }
            b'"' | b'\'' => {
                let q = b[i];
                i += 1;
                while i < b.len() && b[i] != q {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    if i < b.len() && b[i] == b'\n' {
                        // unterminated literal: stop at the line end
                        break;
                    }
                    i += 1;
                }
                i += 1;
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                out.push((line, line));
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let start = line;
                i += 2;
                while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                    if b[i] == b'\n' {
                        line += 1;
                    }
                    i += 1;
                }
                i += 2;
                out.push((start, line));
            }
            _ => i += 1,
        }
    }
    out
}

/// True for a line that is empty after trimming whitespace.
pub(crate) fn is_blank(line: &str) -> bool {
    line.trim().is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(mask: &[bool]) -> Vec<usize> {
        mask.iter()
            .enumerate()
            .filter(|(_, m)| **m)
            .map(|(i, _)| i)
            .collect()
    }

    #[test]
    fn c_comments_include_trailing_and_block_lines() {
        let src = "int a; // trailing\nchar *u = \"http://x\";\n/* one\n two */\nint b;\n";
        assert_eq!(lines(&comment_lines(src, "x.c")), vec![1, 3, 4]);
    }

    #[test]
    fn python_comments_and_docstrings() {
        let src = "# c\nx = 1  # not a line comment\n\"\"\"doc\nmore\n\"\"\"\ny = 2\n";
        assert_eq!(lines(&comment_lines(src, "a.py")), vec![1, 3, 4, 5]);
    }

    #[test]
    fn js_and_unknown() {
        let src = "// c\nlet a = 1;\n/* x\n y */\n";
        assert_eq!(lines(&comment_lines(src, "a.js")), vec![1, 3, 4]);
        assert!(lines(&comment_lines(src, "a.txt")).is_empty());
        assert!(supported("A.JAVA"));
        assert!(!supported("a.txt"));
    }
}
