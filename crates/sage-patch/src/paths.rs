//! Paths in patch headers, as git writes them.

/// A path in a `---`/`+++`/`rename`/`copy` line, exactly as git writes it: C-quoted
/// (`"a/caf\303\251.c"`) when the name holds special characters, plain otherwise, and in the
/// `---`/`+++` lines followed by a TAB when the name contains a space (git adds it so `patch`
/// can find where the name ends; `diff -u` puts a timestamp after it). An unquoted name never
/// holds a TAB of its own (git would have quoted it), so everything from the first TAB on is
/// not the name. Without a TAB, surrounding blanks are not the name either (LLM diffs).
pub fn header_path(p: &str) -> String {
    let p = p.trim_end_matches(['\n', '\r']);
    if p.starts_with('"') {
        let b = p.as_bytes();
        let mut i = 1;
        while i < b.len() {
            match b[i] {
                b'\\' => i += 2,
                b'"' => break,
                _ => i += 1,
            }
        }
        return unquote(&p[..(i + 1).min(p.len())]);
    }
    match p.split_once('\t') {
        Some((name, _)) => name.to_string(),
        None => p.trim().to_string(),
    }
}

/// Undo git's C-style path quoting (`"a\tb"`), used for names with special characters.
pub fn unquote(s: &str) -> String {
    let Some(inner) = s.strip_prefix('"').and_then(|t| t.strip_suffix('"')) else {
        return s.to_string();
    };
    let bytes = inner.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 1 < bytes.len() {
            let c = bytes[i + 1];
            match c {
                b'n' => out.push(b'\n'),
                b't' => out.push(b'\t'),
                b'"' => out.push(b'"'),
                b'\\' => out.push(b'\\'),
                b'a' => out.push(7),
                b'b' => out.push(8),
                b'f' => out.push(12),
                b'r' => out.push(b'\r'),
                b'v' => out.push(11),
                b'0'..=b'7' if i + 4 <= bytes.len() => {
                    let oct = std::str::from_utf8(&bytes[i + 1..i + 4]).unwrap_or("");
                    if let Ok(v) = u8::from_str_radix(oct, 8) {
                        out.push(v);
                        i += 4;
                        continue;
                    }
                    out.push(c);
                }
                _ => out.push(c),
            }
            i += 2;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The path of a `---` (old side, `a/` dropped) or `+++` (new side, `b/` dropped) line's
/// name; None for `/dev/null`.
pub(crate) fn side_path(rest: &str, prefix: &str) -> Option<String> {
    let p = header_path(rest);
    if p == "/dev/null" {
        return None;
    }
    Some(p.strip_prefix(prefix).unwrap_or(&p).to_string())
}

/// Split `a/X b/Y` from a `diff --git` line. Exact for quoted names and for X == Y; the
/// `---`/`+++`/`rename` lines that follow override it when present.
pub(crate) fn split_git_header(rest: &str) -> (Option<String>, Option<String>) {
    if let Some(tail) = rest.strip_prefix('"') {
        // "a/x y" "b/x y" or "a/x" b/y
        if let Some(end) = tail.find("\" ") {
            let a = unquote(&rest[..end + 2]);
            let b = unquote(rest[end + 3..].trim());
            return (
                Some(a.strip_prefix("a/").unwrap_or(&a).to_string()),
                Some(b.strip_prefix("b/").unwrap_or(&b).to_string()),
            );
        }
    }
    let body = rest.strip_prefix("a/").unwrap_or(rest);
    // the midpoint split that makes both names equal
    let bytes = body.len();
    if bytes >= 3 && (bytes - 3).is_multiple_of(2) {
        let half = (bytes - 3) / 2;
        if body.is_char_boundary(half)
            && body[half..].starts_with(" b/")
            && body[..half] == body[half + 3..]
        {
            let p = body[..half].to_string();
            return (Some(p.clone()), Some(p));
        }
    }
    match body.split_once(" b/") {
        Some((a, b)) => (Some(a.to_string()), Some(unquote(b))),
        None => (None, None),
    }
}
