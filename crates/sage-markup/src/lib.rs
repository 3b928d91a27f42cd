//! Escaping for what sage writes into documents others open: the HTML view, the SVG figures
//! of the reliability report, the JSON a page embeds, and annotation sheets opened in a
//! spreadsheet. Trace text is hostile (`docs/security.md`): one helper per kind of document,
//! so a fix lands in every writer at once. This crate knows nothing else of sage and depends
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

#[cfg(test)]
mod tests {
    use super::*;

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
