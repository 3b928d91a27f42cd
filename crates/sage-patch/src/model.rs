//! The patch model: files, hunks, lines, and why a patch did not apply.

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

    /// Whether the hunk takes more lines, `seen` (old, new) lines on each side so far.
    pub(crate) fn wants_more(&self, seen: (usize, usize)) -> bool {
        match self.counts {
            None => true,
            Some((o, n)) => seen.0 < o || seen.1 < n,
        }
    }

    pub(crate) fn finish(mut self) -> Hunk {
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
    pub(crate) fn new(start: usize) -> Self {
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
