//! The one unified-diff model of sage.
//!
//! Patches reach sage from three places: writes in agent traces (Aider `udiff`, `git diff`
//! output pasted into a message, `str_replace_editor` diffs), the submissions traces carry
//! (`git_patch`, SWE-bench predictions, a case's `patch.diff`), and git itself (`sage szz`).
//! They are all read here, by one parser with one set of rules, so a fix to how a hunk or a
//! path is read reaches every stage at once:
//!
//! - [`parse`] reads a (multi-file) patch into [`FilePatch`]es with numbered [`Hunk`]s. It
//!   reads git's output exactly (extended headers, C-quoted names, the TAB after a name with
//!   a space) and LLM-written diffs tolerantly (hunks without line numbers, miscounted hunks,
//!   bare empty context lines, prose between hunks). It never fails: a malformed hunk header is
//!   recorded on its hunk and reported by whoever needs the hunk ([`apply`], blame).
//! - [`find_in_text`] locates the diffs inside a chat message (they end where the message's
//!   prose or a code fence resumes).
//! - [`apply`] applies a one-file patch to a file's content, as `patch` does without fuzz.
//! - [`make`] writes the unified diff of two states (for reports and views).
//!
//! This crate knows no trace format, judge or repository: it depends on no other sage crate.

#![warn(missing_docs)]

use serde::Serialize;
use std::ops::Range;

/// How a patch changes a file (PyDriller's `ModificationType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    /// The file is created (`--- /dev/null` or `new file mode`).
    Added,
    /// The file is deleted (`+++ /dev/null` or `deleted file mode`).
    Deleted,
    /// The file is changed in place.
    Modified,
    /// The file is renamed (`rename from` / `rename to`).
    Renamed,
    /// The file is copied (`copy from` / `copy to`).
    Copied,
}

/// One line of a hunk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HunkLine {
    /// `' '` context, `'-'` removed, `'+'` added.
    pub kind: char,
    /// Old-side line number (1-based), for context and removed lines of a numbered hunk.
    pub old: Option<usize>,
    /// New-side line number (1-based), for context and added lines of a numbered hunk.
    pub new: Option<usize>,
    /// The line without its marker (a trailing `\r` is kept: CRLF files stay CRLF).
    pub text: String,
    /// An empty line with no marker at all, read as empty context (LLM diffs drop the space).
    #[serde(skip)]
    pub bare: bool,
}

/// One hunk (`@@ -a,b +c,d @@ context`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hunk {
    /// Old-side start line as stated (None for a hunk without numbers, `@@ ... @@`).
    pub old_start: Option<usize>,
    /// New-side start line as stated.
    pub new_start: Option<usize>,
    /// The function context git prints after the second `@@`.
    pub header: String,
    /// The lines of the hunk in order.
    pub lines: Vec<HunkLine>,
    /// The `@@` line as written (for messages).
    #[serde(skip)]
    pub raw_header: String,
    /// Stated (old, new) line counts, when the header has numbers.
    #[serde(skip)]
    pub counts: Option<(usize, usize)>,
    /// The old side ends without a newline (`\ No newline at end of file` after it).
    #[serde(skip)]
    pub old_no_newline: bool,
    /// The new side ends without a newline.
    #[serde(skip)]
    pub new_no_newline: bool,
    /// Why the `@@` line could not be read, if it could not (the hunk is then unnumbered).
    #[serde(skip)]
    pub malformed: Option<String>,
}

impl Hunk {
    /// The removed lines.
    pub fn deleted(&self) -> impl Iterator<Item = &HunkLine> {
        self.lines.iter().filter(|l| l.kind == '-')
    }
    /// The added lines.
    pub fn added(&self) -> impl Iterator<Item = &HunkLine> {
        self.lines.iter().filter(|l| l.kind == '+')
    }
    /// The old side: context and removed lines.
    pub fn old_lines(&self) -> impl Iterator<Item = &str> {
        self.lines
            .iter()
            .filter(|l| l.kind != '+')
            .map(|l| l.text.as_str())
    }
    /// The new side: context and added lines.
    pub fn new_lines(&self) -> impl Iterator<Item = &str> {
        self.lines
            .iter()
            .filter(|l| l.kind != '-')
            .map(|l| l.text.as_str())
    }

    fn seen(&self) -> (usize, usize) {
        let old = self.lines.iter().filter(|l| l.kind != '+').count();
        let new = self.lines.iter().filter(|l| l.kind != '-').count();
        (old, new)
    }

    fn wants_more(&self) -> bool {
        match self.counts {
            None => true,
            Some((o, n)) => {
                let (so, sn) = self.seen();
                so < o || sn < n
            }
        }
    }

    fn finish(mut self) -> Hunk {
        if self.counts.is_none() {
            // A bare empty line at the end of a number-less hunk is the diff's own layout.
            while self.lines.last().is_some_and(|l| l.bare) {
                self.lines.pop();
            }
        }
        self
    }
}

/// One file's part of a patch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FilePatch {
    /// The path before the change, without git's `a/` (None for an added file, or when the
    /// patch names no file).
    pub old_path: Option<String>,
    /// The path after the change, without git's `b/` (None for a deleted file).
    pub new_path: Option<String>,
    /// How the file changes.
    pub kind: ChangeKind,
    /// `Binary files … differ` or `GIT binary patch`: no text hunks.
    pub binary: bool,
    /// `old mode` / `new mode` lines were present.
    pub mode_change: bool,
    /// The hunks in order.
    pub hunks: Vec<Hunk>,
    /// Byte range of this file's section in the parsed text, from its first header line (or
    /// first hunk) to where the next file begins.
    #[serde(skip)]
    pub span: Range<usize>,
    /// The section had a `---`/`+++` header pair.
    #[serde(skip)]
    pub has_file_header: bool,
    /// The abbreviated pre- and post-image blob ids of git's `index OLD..NEW` line, as
    /// written.
    #[serde(skip)]
    pub index: Option<(String, String)>,
}

impl FilePatch {
    fn new(start: usize) -> Self {
        FilePatch {
            old_path: None,
            new_path: None,
            kind: ChangeKind::Modified,
            binary: false,
            mode_change: false,
            hunks: Vec::new(),
            span: start..start,
            has_file_header: false,
            index: None,
        }
    }

    /// A file change without hunks (e.g. from `git diff --name-status`).
    pub fn named(kind: ChangeKind, old_path: Option<String>, new_path: Option<String>) -> Self {
        FilePatch {
            old_path,
            new_path,
            kind,
            ..FilePatch::new(0)
        }
    }

    /// The pre-image lines the hunks show (context and removed lines) by old line number,
    /// and whether the pre-image ends without a newline.
    pub fn old_side(&self) -> (std::collections::BTreeMap<usize, String>, bool) {
        let mut out = std::collections::BTreeMap::new();
        for h in &self.hunks {
            for l in h.lines.iter().filter(|l| l.kind != '+') {
                if let Some(n) = l.old {
                    out.insert(n, l.text.clone());
                }
            }
        }
        (out, self.hunks.iter().any(|h| h.old_no_newline))
    }

    /// The path a change is about: the new one, or the old one for a deletion.
    pub fn path(&self) -> Option<&str> {
        match self.kind {
            ChangeKind::Deleted => self.old_path.as_deref().or(self.new_path.as_deref()),
            _ => self.new_path.as_deref().or(self.old_path.as_deref()),
        }
    }

    /// The path blame reads (pyszz): the new path, but the old one for a deletion or a rename.
    pub fn blame_path(&self) -> &str {
        match self.kind {
            ChangeKind::Deleted | ChangeKind::Renamed => self.old_path.as_deref(),
            _ => self.new_path.as_deref(),
        }
        .or(self.old_path.as_deref())
        .or(self.new_path.as_deref())
        .unwrap_or("")
    }

    /// Removed lines: (old-side line number, text).
    pub fn deleted(&self) -> Vec<(usize, String)> {
        self.hunks
            .iter()
            .flat_map(|h| h.deleted())
            .filter_map(|l| l.old.map(|n| (n, l.text.clone())))
            .collect()
    }

    /// Added lines: (new-side line number, text).
    pub fn added(&self) -> Vec<(usize, String)> {
        self.hunks
            .iter()
            .flat_map(|h| h.added())
            .filter_map(|l| l.new.map(|n| (n, l.text.clone())))
            .collect()
    }

    /// True when `path` names this file on either side.
    pub fn touches(&self, path: &str) -> bool {
        self.old_path.as_deref() == Some(path) || self.new_path.as_deref() == Some(path)
    }

    /// The first malformed hunk header, if any.
    pub fn malformed(&self) -> Option<&str> {
        self.hunks.iter().find_map(|h| h.malformed.as_deref())
    }
}

/// Why a patch does not apply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// An `@@` line that is neither numbered nor the number-less `@@ ... @@`.
    #[error("unified diff: malformed hunk header `{0}`")]
    MalformedHunkHeader(String),
    /// A patch for one file names several.
    #[error("unified diff: holds more than one file")]
    SeveralFiles,
    /// No `@@` hunk at all.
    #[error("unified diff: no hunk found")]
    NoHunk,
    /// An empty patch for a file that does not exist.
    #[error("unified diff: empty diff for an artefact that does not exist")]
    EmptyForMissing,
    /// A creation patch (`--- /dev/null`) for a file that exists.
    #[error("unified diff: creates the file (from /dev/null) but it already exists")]
    CreatesExisting,
    /// A patch with old lines for a file that does not exist.
    #[error("unified diff: artefact does not exist")]
    Missing,
    /// A hunk whose old side is nowhere in the file.
    #[error(
        "unified diff: hunk {n} ({header}) does not apply: its context and removed lines are \
         not in the file at any offset{detail}"
    )]
    HunkMismatch {
        /// 1-based hunk number.
        n: usize,
        /// The hunk's `@@` line.
        header: String,
        /// Where it first differs from the expected place.
        detail: String,
    },
}

// ---------------------------------------------------------------------------------------------
// Paths

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
fn side_path(rest: &str, prefix: &str) -> Option<String> {
    let p = header_path(rest);
    if p == "/dev/null" {
        return None;
    }
    Some(p.strip_prefix(prefix).unwrap_or(&p).to_string())
}

/// Split `a/X b/Y` from a `diff --git` line. Exact for quoted names and for X == Y; the
/// `---`/`+++`/`rename` lines that follow override it when present.
fn split_git_header(rest: &str) -> (Option<String>, Option<String>) {
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

// ---------------------------------------------------------------------------------------------
// Parsing

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
            let more = h.wants_more();
            let counted = h.counts.is_some() && more;
            let mut chars = line.chars();
            let take = match chars.next() {
                Some(' ' | '-' | '+') => counted || !is_file_header,
                None => more,
                _ => false,
            };
            if take {
                let kind = line.chars().next().unwrap_or(' ');
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

// ---------------------------------------------------------------------------------------------
// Applying

/// Apply a one-file unified diff to `current` (None: the file does not exist): exact context,
/// hunks in order, each placed at its stated line or at the nearest offset where its old lines
/// match (as `patch` does without fuzz). Returns the new content (None: deleted).
pub fn apply(current: Option<&str>, diff: &str) -> Result<Option<String>, PatchError> {
    // An empty diff (e.g. `git diff` with nothing to report) changes nothing.
    if diff.trim().is_empty() {
        return match current {
            Some(c) => Ok(Some(c.to_string())),
            None => Err(PatchError::EmptyForMissing),
        };
    }
    let files = parse(diff);
    if files.len() > 1 {
        return Err(PatchError::SeveralFiles);
    }
    let Some(file_patch) = files.into_iter().next() else {
        return Err(PatchError::NoHunk);
    };
    if let Some(bad) = file_patch.malformed() {
        return Err(PatchError::MalformedHunkHeader(bad.to_string()));
    }
    let header_says = |k| file_patch.has_file_header && file_patch.kind == k;
    let creates = header_says(ChangeKind::Added);
    let deletes = header_says(ChangeKind::Deleted);
    let hunks = &file_patch.hunks;
    if hunks.is_empty() && !deletes {
        return Err(PatchError::NoHunk);
    }
    if creates && current.is_some_and(|c| !c.is_empty()) {
        return Err(PatchError::CreatesExisting);
    }
    let cur = match current {
        Some(c) => c,
        None if hunks.iter().all(|h| h.lines.iter().all(|l| l.kind == '+')) => "",
        None => return Err(PatchError::Missing),
    };
    let mut final_newline = cur.is_empty() || cur.ends_with('\n');
    let file: Vec<&str> = if cur.is_empty() {
        Vec::new()
    } else {
        cur.strip_suffix('\n').unwrap_or(cur).split('\n').collect()
    };
    let mut out: Vec<&str> = Vec::with_capacity(file.len());
    let mut cursor = 0usize; // next unconsumed line of `file`
    let mut offset: isize = 0;
    for (n, h) in hunks.iter().enumerate() {
        let old: Vec<&str> = h.old_lines().collect();
        let stated = h.old_start.map(|s| {
            if old.is_empty() {
                s
            } else {
                s.saturating_sub(1)
            }
        });
        let expected = stated
            .map(|s| (s as isize + offset).clamp(cursor as isize, file.len() as isize) as usize)
            .unwrap_or(cursor);
        let fits = |p: usize| p + old.len() <= file.len() && file[p..p + old.len()] == old[..];
        let pos = if old.is_empty() {
            Some(expected)
        } else {
            // Nearest match to the expected line, searching both ways, never before `cursor`.
            let span = file.len().saturating_sub(old.len());
            (0..=file.len()).find_map(|d| {
                let after = expected + d;
                if after <= span && fits(after) {
                    return Some(after);
                }
                let before = expected.checked_sub(d).filter(|b| *b >= cursor)?;
                fits(before).then_some(before)
            })
        };
        let Some(p) = pos else {
            return Err(hunk_mismatch(n + 1, h, &file, &old, expected));
        };
        if let Some(s) = stated {
            offset = p as isize - s as isize;
        }
        out.extend_from_slice(&file[cursor..p]);
        out.extend(h.new_lines());
        cursor = p + old.len();
        if cursor == file.len() {
            final_newline = !h.new_no_newline;
        }
    }
    if deletes {
        return Ok(None);
    }
    out.extend_from_slice(&file[cursor..]);
    let mut text = out.join("\n");
    if final_newline && !out.is_empty() {
        text.push('\n');
    }
    Ok(Some(text))
}

fn hunk_mismatch(n: usize, h: &Hunk, file: &[&str], old: &[&str], expected: usize) -> PatchError {
    let first_diff = old
        .iter()
        .enumerate()
        .find(|(j, l)| file.get(expected + j) != Some(*l));
    let detail = match first_diff {
        Some((j, want)) => match file.get(expected + j) {
            Some(got) => format!(
                "; at line {} expected `{}`, found `{}`",
                expected + j + 1,
                want.trim(),
                got.trim()
            ),
            None => format!("; expected `{}` past the end of the file", want.trim()),
        },
        None => String::new(),
    };
    PatchError::HunkMismatch {
        n,
        header: h.raw_header.clone(),
        detail,
    }
}

// ---------------------------------------------------------------------------------------------
// Making

/// The unified diff of two states of a file (3 lines of context), for reports and views.
pub fn make(old: &str, new: &str, old_name: &str, new_name: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(old_name, new_name)
        .to_string()
}

/// The line ranges of `new` (0-based, end exclusive) that a line diff from `old` inserts or
/// replaces, in order: what a change wrote, for anything that marks lines of the new version
/// (screening's proposals). Patience diff, so a moved block reads as the move it is rather
/// than as scattered one-line matches.
pub fn changed_lines(old: &str, new: &str) -> Vec<std::ops::Range<usize>> {
    use similar::{Algorithm, DiffTag, TextDiff};
    TextDiff::configure()
        .algorithm(Algorithm::Patience)
        .diff_lines(old, new)
        .ops()
        .iter()
        .filter(|op| matches!(op.tag(), DiffTag::Insert | DiffTag::Replace))
        .map(|op| op.new_range())
        .collect()
}

#[cfg(test)]
mod tests;
