//! Escaping for what sage writes into documents others open: the HTML view, the SVG figures
//! of the reliability report, the JSON a page embeds, and annotation sheets opened in a
//! spreadsheet, and trace text shown as a terminal would show it. Trace text is hostile
//! (`docs/security.md`): one helper per kind of document, so a fix lands in every writer at
//! once. This crate knows nothing else of sage and depends
//! on no other sage crate, so every stage that writes markup can use it.

#![warn(missing_docs)]

use std::borrow::Cow;

/// Escape text for HTML or SVG element content and quoted attribute values. Control
/// characters other than tab, newline and carriage return, and the bidirectional overrides,
/// are shown as inert text (`\u{0}`): they are parse errors in HTML and SVG, and a NUL or an
/// override can hide or reorder what the page shows.
pub fn html(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + s.len() / 8);
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            '\t' | '\n' | '\r' => o.push(c),
            c if is_unsafe_char(c) => push_visible(&mut o, c),
            c => o.push(c),
        }
    }
    o
}

/// A character that must not reach a document or a terminal as itself: every control
/// character (C0, DEL, C1) and Unicode's bidirectional formatting characters. Tab and
/// newline are controls too; each writer decides whether it keeps them.
pub fn is_unsafe_char(c: char) -> bool {
    c.is_control() || is_bidi_control(c)
}

/// `c` as inert visible text, `\u{1b}` (the form [`terminal_text`] uses).
fn push_visible(o: &mut String, c: char) {
    use std::fmt::Write as _;
    let _ = write!(o, "\\u{{{:x}}}", c as u32);
}

/// Text about to be printed on a terminal, or written to a file a person reads with `cat`:
/// sage's own output with trace, case, judge or sheet text in it. Every control character
/// but newline and tab, and every bidirectional override, is written as a JSON escape
/// (`ESC` becomes `\u001b`), so no escape sequence can clear, retitle or recolour the
/// terminal, a carriage return cannot hide the start of a line, and the text says what was
/// there. The form is a JSON string escape because the same output may be JSON: serde_json
/// writes C0 controls escaped already and the rest (DEL, C1, overrides) only inside strings,
/// so applying this to a JSON document leaves it valid and equal in value.
pub fn terminal(s: &str) -> Cow<'_, str> {
    if !has_unsafe(s) {
        return Cow::Borrowed(s);
    }
    let mut o = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if c != '\n' && c != '\t' && is_unsafe_char(c) {
            push_json_escape(&mut o, c);
        } else {
            o.push(c);
        }
    }
    Cow::Owned(o)
}

/// Whether [`terminal`] would change `s`: eight bytes at a time while they are all
/// printable ASCII, newline or tab (megabytes of pretty JSON are almost all such), then byte
/// by byte; only other characters are decoded.
fn has_unsafe(s: &str) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    const LOW7: u64 = !HIGH;
    // per byte, exactly (no carry leaves a byte): the high bit set where the byte is zero
    let zero = |x: u64| !(((x & LOW7).wrapping_add(LOW7)) | x) & HIGH;
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if let Some(word) = b.get(i..i + 8) {
            let w = u64::from_le_bytes(word.try_into().unwrap_or_default());
            // a byte below 0x20 (its low seven bits plus 0x60 do not reach 0x80, its high
            // bit clear) that is neither a newline nor a tab …
            let low = !((w & LOW7).wrapping_add(0x60 * ONES)) & !w & HIGH;
            let low =
                low & !zero(w ^ (u64::from(b'\n') * ONES)) & !zero(w ^ (u64::from(b'\t') * ONES));
            // … or of 0x7f and above: its high bit, or its low seven bits all ones
            let high = (w | (w & LOW7).wrapping_add(ONES)) & HIGH;
            if low | high == 0 {
                i += 8;
                continue;
            }
            // these eight bytes one by one, up to a non-ASCII one (decoded below)
            let ascii = word.iter().take_while(|c| c.is_ascii()).count();
            if word[..ascii]
                .iter()
                .any(|&c| c != b'\n' && c != b'\t' && c.is_ascii_control())
            {
                return true;
            }
            if ascii > 0 {
                i += ascii;
                continue;
            }
        }
        if b[i].is_ascii() {
            if b[i] != b'\n' && b[i] != b'\t' && b[i].is_ascii_control() {
                return true;
            }
            i += 1;
        } else {
            // `i` is at a character boundary: ASCII bytes never sit inside a character
            let Some(c) = s[i..].chars().next() else {
                break;
            };
            if is_unsafe_char(c) {
                return true;
            }
            i += c.len_utf8();
        }
    }
    false
}

/// `c` (a BMP character) as a JSON string escape, `\u001b`.
fn push_json_escape(o: &mut String, c: char) {
    use std::fmt::Write as _;
    let _ = write!(o, "\\u{:04x}", c as u32);
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
            // DEL, C1 and the overrides are valid raw in JSON strings but not in a page
            c if is_unsafe_char(c) => push_json_escape(&mut o, c),
            c => o.push(c),
        }
    }
    o
}

/// A cell a spreadsheet shows as text: a value starting with `=`, `+`, `-`, `@`, a tab or a
/// carriage return would be run as a formula (`=HYPERLINK(...)`), so it gets a leading `'`
/// (what spreadsheets themselves use to mark text). [`csv_uncell`] undoes it on import.
///
/// Control characters other than tab, newline and carriage return (which CSV quotes), and
/// the bidirectional overrides, are shown as inert text (`\u{0}`): a NUL ends a cell in
/// some programs and an override reorders what the cell shows. Import does not undo that
/// (no value sage imports may hold them: ids and labels refuse control characters).
pub fn csv_cell(s: &str) -> Cow<'_, str> {
    let s: Cow<'_, str> = if s
        .chars()
        .any(|c| !matches!(c, '\t' | '\n' | '\r') && is_unsafe_char(c))
    {
        let mut o = String::with_capacity(s.len() + 8);
        for c in s.chars() {
            if !matches!(c, '\t' | '\n' | '\r') && is_unsafe_char(c) {
                push_visible(&mut o, c);
            } else {
                o.push(c);
            }
        }
        Cow::Owned(o)
    } else {
        Cow::Borrowed(s)
    };
    match formula_marked(&s) {
        Some(m) => Cow::Owned(m),
        None => s,
    }
}

/// `s` with the text marker when it would start a formula (or starts with the marker).
fn formula_marked(s: &str) -> Option<String> {
    match s.chars().next() {
        Some('=' | '+' | '-' | '@' | '\t' | '\r') => Some(format!("'{s}")),
        // a value that already starts with the marker keeps it, so import is exact
        Some('\'') if s[1..].starts_with(['=', '+', '-', '@', '\t', '\r', '\'']) => {
            Some(format!("'{s}"))
        }
        _ => None,
    }
}

/// The value of a cell written by [`csv_cell`].
pub fn csv_uncell(s: &str) -> &str {
    match s.strip_prefix('\'') {
        Some(rest) if rest.starts_with(['=', '+', '-', '@', '\t', '\r', '\'']) => rest,
        _ => s,
    }
}

// ------------------------------------------------------------------ Markdown

/// Text inside a Markdown line (a packet, a report): every ASCII punctuation character is
/// backslash-escaped (CommonMark lets any of them be), so a name cannot open a link, an
/// image, a heading, a table cell, emphasis or raw HTML; a line break becomes a space, so it
/// cannot start a block; control characters and overrides are shown as inert `\u{..}` text.
pub fn markdown(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + s.len() / 4);
    for c in s.chars() {
        match c {
            '\n' | '\r' => o.push(' '),
            c if c.is_ascii_punctuation() => {
                o.push('\\');
                o.push(c);
            }
            c if is_unsafe_char(c) && c != '\t' => push_visible(&mut o, c),
            c => o.push(c),
        }
    }
    o
}

/// `s` as one Markdown code span: fenced by more backticks than any run inside it, padded
/// when it starts or ends with a backtick, on one line, control characters and overrides
/// shown as inert `\u{..}` text.
pub fn markdown_code(s: &str) -> String {
    let mut body = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' | '\r' => body.push(' '),
            c if is_unsafe_char(c) && c != '\t' => push_visible(&mut body, c),
            c => body.push(c),
        }
    }
    let longest = body.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest + 1);
    let pad = if body.starts_with('`') || body.ends_with('`') || body.is_empty() {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{body}{pad}{fence}")
}

/// `s` as a fenced Markdown code block with info string `info`: the fence is longer than any
/// run of backticks in `s`, so no line of it can close the block; control characters other
/// than newline and tab, a carriage return not ending a line and the overrides are shown as
/// inert `\u{..}` text. Ends with a newline.
pub fn markdown_block(info: &str, s: &str) -> String {
    let s = s.replace("\r\n", "\n");
    let mut body = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c != '\n' && c != '\t' && is_unsafe_char(c) {
            push_visible(&mut body, c);
        } else {
            body.push(c);
        }
    }
    let longest = body.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    let info: String = markdown(info).chars().filter(|c| *c != ' ').collect();
    let nl = if body.ends_with('\n') || body.is_empty() {
        ""
    } else {
        "\n"
    };
    format!("{fence}{info}\n{body}{nl}{fence}\n")
}

// ------------------------------------------------------------------ SARIF URIs

/// What may stand for itself in a path segment of a URI reference: RFC 3986's unreserved
/// characters and the sub-delimiters. Everything else is percent-encoded, `:` included
/// (so a first segment cannot read as a scheme), `%` included (so an input's own `%2E%2E`
/// stays text), and `@`, `?`, `#`, `[`, `]`, spaces and every non-ASCII byte.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'!')
    .remove(b'$')
    .remove(b'&')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')')
    .remove(b'*')
    .remove(b'+')
    .remove(b',')
    .remove(b';')
    .remove(b'=');

/// Why a name cannot be a URI relative to a base.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotRelative {
    /// Empty, or only separators and `.`.
    Empty,
    /// Starts at a root: `/`, a drive (`C:`), a UNC share (`\\\\host`).
    Absolute,
    /// A `..` segment: it could climb out of the base.
    Climbs,
}

impl std::fmt::Display for NotRelative {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NotRelative::Empty => "an empty path",
            NotRelative::Absolute => "an absolute path",
            NotRelative::Climbs => "a path with a `..` segment",
        })
    }
}

impl std::error::Error for NotRelative {}

/// A file name from a trace or a case (a relative path) as the `uri` of a SARIF
/// `artifactLocation` that has a `uriBaseId`: a relative-path reference (RFC 3986 §4.2),
/// each segment percent-encoded, `\` read as a separator and `.` segments dropped. It can
/// never be a scheme (`javascript:x` is the file `javascript%3Ax`), an absolute path or a
/// path that climbs out of its base: those names are refused, and the caller keeps the
/// name as text instead of a location.
pub fn sarif_uri(name: &str) -> Result<String, NotRelative> {
    let unified = name.replace('\\', "/");
    if unified.starts_with('/') {
        return Err(NotRelative::Absolute);
    }
    let mut segs = Vec::new();
    for (i, seg) in unified.split('/').enumerate() {
        match seg {
            "" | "." => continue,
            ".." => return Err(NotRelative::Climbs),
            s if i == 0
                && s.len() >= 2
                && s.as_bytes()[1] == b':'
                && s.as_bytes()[0].is_ascii_alphabetic() =>
            {
                return Err(NotRelative::Absolute)
            }
            s => segs.push(percent_encoding::utf8_percent_encode(s, SEGMENT).to_string()),
        }
    }
    if segs.is_empty() {
        return Err(NotRelative::Empty);
    }
    Ok(segs.join("/"))
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
    fn the_byte_scan_finds_what_the_character_scan_finds() {
        for s in [
            "",
            "plain\n\ttext",
            "a\u{1b}[31m",
            "\r",
            "é\u{7f}",
            "caf\u{e9}",
            "x\u{85}y",
            "\u{202e}evil",
            "日本\n",
            "\u{9b}",
            "tab\tend\u{0}",
        ] {
            let by_char = s
                .chars()
                .any(|c| c != '\n' && c != '\t' && is_unsafe_char(c));
            assert_eq!(has_unsafe(s), by_char, "{s:?}");
        }
        // every special character at every offset of the eight-byte words
        let specials: Vec<char> = (0u32..0x21)
            .chain([0x7e, 0x7f, 0x80, 0x85, 0x9b, 0xe9, 0x202e, 0x65e5])
            .filter_map(char::from_u32)
            .collect();
        for at in 0..20 {
            for &c in &specials {
                let mut s: String = "abcdefghij klmnopqrst{}".chars().collect();
                s.insert(at, c);
                let by_char = s
                    .chars()
                    .any(|c| c != '\n' && c != '\t' && is_unsafe_char(c));
                assert_eq!(has_unsafe(&s), by_char, "{s:?}");
            }
        }
        // two of them in one word, at every pair of offsets (a newline or a tab beside a
        // control character is the case the word test must not wave through)
        let ascii: Vec<char> = specials.iter().copied().filter(char::is_ascii).collect();
        for at in 0..9 {
            for gap in 1..9 {
                for &c in &ascii {
                    for &d in &ascii {
                        let mut s: Vec<char> = "abcdefghijklmnopq".chars().collect();
                        s[at] = c;
                        s[at + gap] = d;
                        let s: String = s.into_iter().collect();
                        let by_char = s
                            .chars()
                            .any(|c| c != '\n' && c != '\t' && is_unsafe_char(c));
                        assert_eq!(has_unsafe(&s), by_char, "{s:?}");
                    }
                }
            }
        }
    }

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

    /// Every character that must not reach a medium raw.
    fn hostile() -> String {
        let mut s: String = (0u32..0x20)
            .chain(0x7f..0xa0)
            .filter_map(char::from_u32)
            .collect();
        s.push_str("\u{202e}\u{2066}\u{200f}<>&\"'`|*_[]()#!\\ ");
        s
    }

    #[test]
    fn attack_every_control_character_is_inert_in_every_medium() {
        let h = hostile();
        let term = terminal(&h);
        assert!(
            !term
                .chars()
                .any(|c| c != '\n' && c != '\t' && is_unsafe_char(c)),
            "{term:?}"
        );
        assert!(term.contains("\\u001b") && term.contains("\\u009b") && term.contains("\\u202e"));
        // the escape form keeps a JSON document valid and equal in value
        let v = serde_json::json!({"t": h});
        let doc = serde_json::to_string_pretty(&v).unwrap();
        let back: serde_json::Value = serde_json::from_str(&terminal(&doc)).unwrap();
        assert_eq!(back, v);
        assert!(matches!(terminal("plain\n\ttext"), Cow::Borrowed(_)));
        let page = html(&h);
        assert!(!page
            .chars()
            .any(|c| !matches!(c, '\t' | '\n' | '\r') && is_unsafe_char(c)));
        assert!(!page.contains('<') && page.contains("\\u{0}"));
        let js = json_in_html(&v);
        assert!(!js.chars().any(is_unsafe_char), "{js:?}");
        assert_eq!(serde_json::from_str::<serde_json::Value>(&js).unwrap(), v);
        let cell = csv_cell(&h);
        assert!(!cell
            .chars()
            .any(|c| !matches!(c, '\t' | '\n' | '\r') && is_unsafe_char(c)));
        let md = markdown(&h);
        assert!(
            !md.chars().any(|c| c != '\t' && is_unsafe_char(c)),
            "{md:?}"
        );
        assert!(md.contains("\\<") && md.contains("\\|") && md.contains("\\["));
        let block = markdown_block("diff", &format!("````\n{h}\r\n"));
        assert!(
            block.starts_with("`````diff\n") && block.ends_with("\n`````\n"),
            "{block}"
        );
        assert!(!block
            .chars()
            .any(|c| c != '\n' && c != '\t' && is_unsafe_char(c)));
        let code = markdown_code(&format!("a``b{h}"));
        assert!(code.starts_with("```") && !code.contains('\n'), "{code}");
    }

    #[test]
    fn attack_sarif_uris_are_relative_encoded_and_stay_under_their_base() {
        let base = url::Url::parse("file:///work/repo/").unwrap();
        for (name, want) in [
            ("javascript:alert(1)", Ok("javascript%3Aalert(1)")),
            ("a b%20#?x.py", Ok("a%20b%2520%23%3Fx.py")),
            ("src/./app.py", Ok("src/app.py")),
            ("./src\\win.py", Ok("src/win.py")),
            ("dir/ünï.py", Ok("dir/%C3%BCn%C3%AF.py")),
            ("/etc/passwd", Err(NotRelative::Absolute)),
            ("../../../etc/passwd", Err(NotRelative::Climbs)),
            ("a/../../b", Err(NotRelative::Climbs)),
            ("C:\\evil\\x.py", Err(NotRelative::Absolute)),
            ("\\\\host\\share\\x.py", Err(NotRelative::Absolute)),
            ("", Err(NotRelative::Empty)),
            ("./", Err(NotRelative::Empty)),
        ] {
            let got = sarif_uri(name);
            assert_eq!(got.as_deref().map_err(|e| *e), want, "{name:?}");
            if let Ok(u) = got {
                let joined = base.join(&u).unwrap();
                assert!(
                    joined.as_str().starts_with(base.as_str()),
                    "{name:?} -> {joined}"
                );
                assert_eq!(joined.scheme(), "file");
            }
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
