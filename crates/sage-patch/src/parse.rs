//! Reading patches: git's output exactly, LLM-written diffs tolerantly, diffs inside a message.

use crate::model::{ChangeKind, FilePatch, Hunk, HunkLine};
use crate::paths::{header_path, side_path, split_git_header};
use std::ops::Range;

fn parse_hunk_header(line: &str) -> Hunk {
    let mut hunk = Hunk {
        old_start: None,
        new_start: None,
        header: String::new(),
        lines: Vec::new(),
        raw_header: line.trim_end().to_string(),
        counts: None,
        old_no_newline: false,
        new_no_newline: false,
        malformed: None,
    };
    let Some((inner, section)) = line
        .strip_prefix("@@")
        .and_then(|r| r.find("@@").map(|e| (r[..e].trim(), r[e + 2..].trim())))
    else {
        hunk.malformed = Some(hunk.raw_header.clone());
        return hunk;
    };
    hunk.header = section.to_string();
    if inner.is_empty() || inner == "..." {
        return hunk;
    }
    let range = |s: &str, sign: char| -> Option<(usize, usize)> {
        let s = s.strip_prefix(sign)?;
        match s.split_once(',') {
            Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
            None => Some((s.parse().ok()?, 1)),
        }
    };
    let mut parts = inner.split_whitespace();
    let parsed = match (parts.next(), parts.next(), parts.next()) {
        (Some(o), Some(n), None) => range(o, '-').zip(range(n, '+')),
        _ => None,
    };
    match parsed {
        Some(((os, oc), (ns, nc))) => {
            hunk.old_start = Some(os);
            hunk.new_start = Some(ns);
            hunk.counts = Some((oc, nc));
        }
        None => hunk.malformed = Some(hunk.raw_header.clone()),
    }
    hunk
}

/// Lines of `text` with their byte offsets; each line without its `\n`.
fn lines_with_offsets(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut at = 0;
    for l in text.split_inclusive('\n') {
        out.push((at, l.strip_suffix('\n').unwrap_or(l)));
        at += l.len();
    }
    out
}

/// Parse a patch of one or more files. Never fails; see the crate docs for the rules.
///
/// A file begins at a `diff --git` line, at a `---`/`+++` header pair (unless it is the
/// header of a file begun by `diff --git` and still without hunks), or at a first hunk with
/// no header before it. Inside a hunk whose stated counts still want lines, the counts decide
/// (a removed `-- x` line is not a header); past them (LLM diffs often miscount) or in a hunk
/// without counts, hunk-looking lines still extend the hunk until a file header.
pub fn parse(text: &str) -> Vec<FilePatch> {
    let lines = lines_with_offsets(text);
    let mut files: Vec<FilePatch> = Vec::new();
    let mut cur: Option<FilePatch> = None;
    let mut hunk: Option<Hunk> = None;
    let (mut old_no, mut new_no) = (0usize, 0usize);
    // lines of the open hunk on each side so far (counted here: recounting them at every
    // line made a 40,000-line hunk quadratic)
    let mut seen = (0usize, 0usize);
    let close_hunk = |cur: &mut Option<FilePatch>, hunk: &mut Option<Hunk>| {
        if let (Some(c), Some(h)) = (cur.as_mut(), hunk.take()) {
            c.hunks.push(h.finish());
        }
    };
    let close_file = |files: &mut Vec<FilePatch>, cur: &mut Option<FilePatch>, end: usize| {
        if let Some(mut c) = cur.take() {
            c.span.end = end;
            files.push(c);
        }
    };
    let mut i = 0;
    while i < lines.len() {
        let (at, line) = lines[i];
        let t = line.strip_suffix('\r').unwrap_or(line);
        let next_is_new_header = lines.get(i + 1).is_some_and(|n| n.1.starts_with("+++ "));
        let is_file_header = t.starts_with("--- ") && next_is_new_header;

        if let Some(h) = hunk.as_mut() {
            if line.starts_with('\\') {
                match h.lines.last().map(|l| l.kind) {
                    Some('-') => h.old_no_newline = true,
                    Some('+') => h.new_no_newline = true,
                    _ => {
                        h.old_no_newline = true;
                        h.new_no_newline = true;
                    }
                }
                i += 1;
                continue;
            }
            let more = h.wants_more(seen);
            let counted = h.counts.is_some() && more;
            let mut chars = line.chars();
            let take = match chars.next() {
                Some(' ' | '-' | '+') => counted || !is_file_header,
                None => more,
                _ => false,
            };
            if take {
                let kind = line.chars().next().unwrap_or(' ');
                seen.0 += usize::from(kind != '+');
                seen.1 += usize::from(kind != '-');
                let numbered = h.old_start.is_some();
                let (old, new) = match (numbered, kind) {
                    (false, _) => (None, None),
                    (true, '-') => {
                        old_no += 1;
                        (Some(old_no - 1), None)
                    }
                    (true, '+') => {
                        new_no += 1;
                        (None, Some(new_no - 1))
                    }
                    (true, _) => {
                        old_no += 1;
                        new_no += 1;
                        (Some(old_no - 1), Some(new_no - 1))
                    }
                };
                h.lines.push(HunkLine {
                    kind,
                    old,
                    new,
                    text: chars.as_str().to_string(),
                    bare: line.is_empty(),
                });
                i += 1;
                continue;
            }
            close_hunk(&mut cur, &mut hunk);
        }

        if let Some(rest) = t.strip_prefix("diff --git ") {
            close_file(&mut files, &mut cur, at);
            let mut f = FilePatch::new(at);
            let (a, b) = split_git_header(rest);
            f.old_path = a;
            f.new_path = b;
            cur = Some(f);
            i += 1;
            continue;
        }
        if t.starts_with("@@") {
            if cur.is_none() {
                cur = Some(FilePatch::new(at));
            }
            let h = parse_hunk_header(t);
            // git numbers a zero-length side from the line before it
            old_no = h.old_start.unwrap_or(0).max(1);
            new_no = h.new_start.unwrap_or(0).max(1);
            seen = (h.old_lines().count(), h.new_lines().count());
            hunk = Some(h);
            i += 1;
            continue;
        }
        if is_file_header {
            let starts_new = match &cur {
                None => true,
                Some(c) => !c.hunks.is_empty() || c.has_file_header,
            };
            if starts_new {
                close_file(&mut files, &mut cur, at);
                cur = Some(FilePatch::new(at));
            }
            let c = cur.as_mut().expect("a file was just begun");
            let new_line = lines[i + 1].1;
            let new_line = new_line.strip_suffix('\r').unwrap_or(new_line);
            c.has_file_header = true;
            match side_path(&t[4..], "a/") {
                Some(p) => c.old_path = Some(p),
                None => {
                    c.old_path = None;
                    c.kind = ChangeKind::Added;
                }
            }
            match side_path(&new_line[4..], "b/") {
                Some(p) => c.new_path = Some(p),
                None => {
                    c.new_path = None;
                    c.kind = ChangeKind::Deleted;
                }
            }
            i += 2;
            continue;
        }
        // Extended header lines of a file begun by `diff --git`, before its hunks.
        if let Some(c) = cur.as_mut().filter(|c| c.hunks.is_empty()) {
            if t.starts_with("new file mode") {
                c.kind = ChangeKind::Added;
                c.old_path = None;
            } else if t.starts_with("deleted file mode") {
                c.kind = ChangeKind::Deleted;
                c.new_path = None;
            } else if t.starts_with("old mode") || t.starts_with("new mode") {
                c.mode_change = true;
            } else if let Some(p) = t.strip_prefix("rename from ") {
                c.kind = ChangeKind::Renamed;
                c.old_path = Some(header_path(p));
            } else if let Some(p) = t.strip_prefix("rename to ") {
                c.kind = ChangeKind::Renamed;
                c.new_path = Some(header_path(p));
            } else if let Some(p) = t.strip_prefix("copy from ") {
                c.kind = ChangeKind::Copied;
                c.old_path = Some(header_path(p));
            } else if let Some(p) = t.strip_prefix("copy to ") {
                c.kind = ChangeKind::Copied;
                c.new_path = Some(header_path(p));
            } else if t.starts_with("Binary files ") || t == "GIT binary patch" {
                c.binary = true;
            } else if let Some(rest) = t.strip_prefix("index ") {
                let ids = rest.split_whitespace().next().unwrap_or("");
                if let Some((a, b)) = ids.split_once("..") {
                    c.index = Some((a.to_string(), b.to_string()));
                }
            }
        }
        // Anything else (`index`, prose between hunks) belongs to no hunk.
        i += 1;
    }
    close_hunk(&mut cur, &mut hunk);
    close_file(&mut files, &mut cur, text.len());
    files
}

/// A diff located inside free text (a chat message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// Byte range of the diff, from its `---` line to where it ends.
    pub span: Range<usize>,
    /// The `---` side's path (`a/` dropped; None for `/dev/null`).
    pub old_path: Option<String>,
    /// The `+++` side's path (`b/` dropped; None for `/dev/null`).
    pub new_path: Option<String>,
}

/// The unified diffs inside `text` (aider `udiff`, `git diff` output in a message): one per
/// `---`/`+++` header pair, each ending at the next header pair, a `diff --git` line, a code
/// fence or the first line that is not part of a diff.
pub fn find_in_text(text: &str) -> Vec<Located> {
    let lines = lines_with_offsets(text);
    let mut out = Vec::new();
    let mut i = 0;
    while i + 1 < lines.len() {
        let (a, b) = (lines[i].1, lines[i + 1].1);
        if !(a.starts_with("--- ") && b.starts_with("+++ ")) {
            i += 1;
            continue;
        }
        let start = lines[i].0;
        let mut j = i + 2;
        while j < lines.len() {
            let l = lines[j].1;
            if l.starts_with("--- ") && lines.get(j + 1).is_some_and(|n| n.1.starts_with("+++ ")) {
                break;
            }
            if l.starts_with("diff --git") || l.starts_with("```") {
                break;
            }
            let diff_like =
                l.is_empty() || l.starts_with([' ', '+', '-', '\\']) || l.starts_with("@@");
            if !diff_like {
                break;
            }
            j += 1;
        }
        let end = lines.get(j).map(|l| l.0).unwrap_or(text.len());
        out.push(Located {
            span: start..end,
            old_path: side_path(&a[4..], "a/"),
            new_path: side_path(&b[4..], "b/"),
        });
        i = j;
    }
    out
}
