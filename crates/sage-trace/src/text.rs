//! Text matching shared by the judges and the linking step of the origin rule: word-boundary
//! term matching and CWE identifiers.

/// `cwe-022`, `CWE 22`, `22` → `CWE-22`.
pub fn normalize_cwe(s: &str) -> Option<String> {
    let digits: String = s.chars().filter(|c| c.is_ascii_digit()).collect();
    let n: u32 = digits.parse().ok()?;
    Some(format!("CWE-{n}"))
}

/// True when `term` occurs in `text` at word boundaries, case-insensitively. A trailing `*`
/// makes the term a prefix. Both sides must already be lowercased and whitespace-normalized.
pub fn term_matches(text_lc: &str, term: &str) -> bool {
    let (term, prefix) = match term.strip_suffix('*') {
        Some(t) => (t, true),
        None => (term, false),
    };
    let term = crate::normalize_ws(&term.to_lowercase());
    if term.is_empty() {
        return false;
    }
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let starts_word = term.chars().next().is_some_and(is_word);
    let ends_word = term.chars().last().is_some_and(is_word);
    let mut from = 0;
    while let Some(pos) = text_lc[from..].find(&term) {
        let start = from + pos;
        let end = start + term.len();
        let before_ok = !starts_word || text_lc[..start].chars().last().is_none_or(|c| !is_word(c));
        let after_ok =
            prefix || !ends_word || text_lc[end..].chars().next().is_none_or(|c| !is_word(c));
        if before_ok && after_ok {
            return true;
        }
        from = start + text_lc[start..].chars().next().map_or(1, char::len_utf8);
    }
    false
}
