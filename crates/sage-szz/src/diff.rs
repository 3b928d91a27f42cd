//! The diff of one commit against its first parent, parsed into files, hunks and lines, with
//! the old-side line numbers blame needs.

use crate::blame::unquote;
use crate::git::Git;
use crate::SzzError;
use serde::Serialize;

/// How a commit changed a file (PyDriller's `ModificationType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    Added,
    Deleted,
    Modified,
    Renamed,
    Copied,
}

/// One line of a hunk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HunkLine {
    /// ' ' context, '-' deleted, '+' added.
    pub kind: char,
    pub old: Option<usize>,
    pub new: Option<usize>,
    pub text: String,
}

/// One hunk (`@@ -a,b +c,d @@ header`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hunk {
    pub old_start: usize,
    pub new_start: usize,
    /// The function context git prints after the second `@@`.
    pub header: String,
    pub lines: Vec<HunkLine>,
}

impl Hunk {
    pub fn deleted(&self) -> impl Iterator<Item = &HunkLine> {
        self.lines.iter().filter(|l| l.kind == '-')
    }
    pub fn added(&self) -> impl Iterator<Item = &HunkLine> {
        self.lines.iter().filter(|l| l.kind == '+')
    }
}

/// One changed file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileDiff {
    pub old_path: Option<String>,
    pub new_path: Option<String>,
    pub kind: ChangeKind,
    pub binary: bool,
    /// `old mode` / `new mode` lines were present.
    pub mode_change: bool,
    pub hunks: Vec<Hunk>,
}

impl FileDiff {
    /// The path pyszz blames: the new path, but the old one for a deletion or a rename.
    pub fn blame_path(&self) -> &str {
        match self.kind {
            ChangeKind::Deleted | ChangeKind::Renamed => self.old_path.as_deref(),
            _ => self.new_path.as_deref(),
        }
        .or(self.old_path.as_deref())
        .or(self.new_path.as_deref())
        .unwrap_or("")
    }

    /// Deleted lines: (old-side line number, text).
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
}

/// The diff of `commit` against its first parent (the empty tree for a root commit), with
/// rename detection and `context` lines of context.
pub fn commit_diff(git: &Git, commit: &str, context: usize) -> Result<Vec<FileDiff>, SzzError> {
    let info = git.commit_info(commit)?;
    let u = format!("-U{context}");
    let out = match info.parents.first() {
        Some(parent) => git.run_bytes(&[
            "diff",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "-M",
            &u,
            "--end-of-options",
            parent,
            commit,
        ])?,
        None => git.run_bytes(&[
            "diff-tree",
            "-p",
            "--root",
            "--no-commit-id",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "-M",
            &u,
            "--end-of-options",
            commit,
        ])?,
    };
    Ok(parse_diff(&out))
}

/// The files a commit changes against its first parent (no hunks): kind and both paths.
/// Merge commits report nothing (PyDriller's convention); a root commit adds every file.
pub fn name_status(git: &Git, commit: &str) -> Result<Vec<FileDiff>, SzzError> {
    let info = git.commit_info(commit)?;
    if info.is_merge() {
        return Ok(Vec::new());
    }
    let out = git.run_bytes(&[
        "diff-tree",
        "-r",
        "--root",
        "-M",
        "--no-commit-id",
        "--name-status",
        "-z",
        "--end-of-options",
        commit,
    ])?;
    let fields: Vec<String> = out
        .split(|b| *b == 0)
        .map(|f| String::from_utf8_lossy(f).into_owned())
        .collect();
    let mut files = Vec::new();
    let mut i = 0;
    while i < fields.len() {
        let status = fields[i].as_str();
        if status.is_empty() {
            i += 1;
            continue;
        }
        let code = status.chars().next().unwrap_or('M');
        let two = matches!(code, 'R' | 'C');
        let (old, new) = if two {
            (fields.get(i + 1).cloned(), fields.get(i + 2).cloned())
        } else {
            let p = fields.get(i + 1).cloned();
            (p.clone(), p)
        };
        i += if two { 3 } else { 2 };
        let kind = match code {
            'A' => ChangeKind::Added,
            'D' => ChangeKind::Deleted,
            'R' => ChangeKind::Renamed,
            'C' => ChangeKind::Copied,
            _ => ChangeKind::Modified,
        };
        files.push(FileDiff {
            old_path: if kind == ChangeKind::Added { None } else { old },
            new_path: if kind == ChangeKind::Deleted {
                None
            } else {
                new
            },
            kind,
            binary: false,
            mode_change: false,
            hunks: Vec::new(),
        });
    }
    Ok(files)
}

/// The patch of one file of `commit` (old and new path given, so renames keep both sides).
pub fn file_diff(
    git: &Git,
    commit: &str,
    file: &FileDiff,
    context: usize,
) -> Result<Option<FileDiff>, SzzError> {
    let info = git.commit_info(commit)?;
    let Some(parent) = info.parents.first() else {
        return Ok(None);
    };
    let u = format!("-U{context}");
    let mut args = vec![
        "diff",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        "-M",
        &u,
        "--end-of-options",
        parent.as_str(),
        commit,
        "--",
    ];
    if let Some(o) = file.old_path.as_deref() {
        args.push(o);
    }
    if let Some(n) = file.new_path.as_deref() {
        if file.old_path.as_deref() != Some(n) {
            args.push(n);
        }
    }
    let out = git.run_bytes(&args)?;
    Ok(parse_diff(&out)
        .into_iter()
        .find(|f| f.old_path == file.old_path || f.new_path == file.new_path))
}

/// Parse `git diff` output (the patch format with `diff --git` headers).
pub fn parse_diff(bytes: &[u8]) -> Vec<FileDiff> {
    let mut files: Vec<FileDiff> = Vec::new();
    let mut old_no = 0usize;
    let mut new_no = 0usize;
    let mut in_hunk = false;
    for raw in bytes.split(|b| *b == b'\n') {
        let line = String::from_utf8_lossy(raw);
        let line = line.strip_suffix('\r').unwrap_or(&line);
        if let Some(rest) = line.strip_prefix("diff --git ") {
            let (a, b) = split_git_header(rest);
            files.push(FileDiff {
                old_path: a,
                new_path: b,
                kind: ChangeKind::Modified,
                binary: false,
                mode_change: false,
                hunks: Vec::new(),
            });
            in_hunk = false;
            continue;
        }
        let Some(f) = files.last_mut() else { continue };
        if in_hunk {
            let kind = line.chars().next();
            match kind {
                Some(c @ (' ' | '-' | '+')) => {
                    let text = line[1..].to_string();
                    let h = f.hunks.last_mut().expect("in a hunk");
                    let (old, new) = match c {
                        ' ' => {
                            old_no += 1;
                            new_no += 1;
                            (Some(old_no - 1), Some(new_no - 1))
                        }
                        '-' => {
                            old_no += 1;
                            (Some(old_no - 1), None)
                        }
                        _ => {
                            new_no += 1;
                            (None, Some(new_no - 1))
                        }
                    };
                    h.lines.push(HunkLine {
                        kind: c,
                        old,
                        new,
                        text,
                    });
                    continue;
                }
                Some('\\') => continue,
                _ => in_hunk = false,
            }
        }
        if let Some(rest) = line.strip_prefix("@@ ") {
            if let Some((old_start, new_start, header)) = parse_hunk_header(rest) {
                old_no = old_start.max(1);
                new_no = new_start.max(1);
                // a zero-length side starts one line earlier in git's numbering
                f.hunks.push(Hunk {
                    old_start,
                    new_start,
                    header,
                    lines: Vec::new(),
                });
                in_hunk = true;
            }
        } else if line.starts_with("new file mode") {
            f.kind = ChangeKind::Added;
            f.old_path = None;
        } else if line.starts_with("deleted file mode") {
            f.kind = ChangeKind::Deleted;
            f.new_path = None;
        } else if line.starts_with("old mode") || line.starts_with("new mode") {
            f.mode_change = true;
        } else if let Some(p) = line.strip_prefix("rename from ") {
            f.kind = ChangeKind::Renamed;
            f.old_path = Some(header_path(p));
        } else if let Some(p) = line.strip_prefix("rename to ") {
            f.kind = ChangeKind::Renamed;
            f.new_path = Some(header_path(p));
        } else if let Some(p) = line.strip_prefix("copy from ") {
            f.kind = ChangeKind::Copied;
            f.old_path = Some(header_path(p));
        } else if let Some(p) = line.strip_prefix("copy to ") {
            f.kind = ChangeKind::Copied;
            f.new_path = Some(header_path(p));
        } else if line.starts_with("Binary files ") || line == "GIT binary patch" {
            f.binary = true;
        } else if let Some(p) = line.strip_prefix("--- ") {
            if p.trim_end_matches('\t') != "/dev/null" {
                let p = header_path(p);
                f.old_path = Some(p.strip_prefix("a/").unwrap_or(&p).to_string());
            }
        } else if let Some(p) = line.strip_prefix("+++ ") {
            if p.trim_end_matches('\t') != "/dev/null" {
                let p = header_path(p);
                f.new_path = Some(p.strip_prefix("b/").unwrap_or(&p).to_string());
            }
        }
    }
    files
}

/// A path in a `---`/`+++`/`rename`/`copy` line, exactly as git writes it: C-quoted
/// (`"a/caf\303\251.c"`) when the name holds special characters, plain otherwise, and in
/// the `---`/`+++` lines followed by a TAB when the name contains a space (git adds it so
/// `patch` can find where the name ends). An unquoted name never holds a TAB of its own
/// (git would have quoted it), so one trailing TAB is always git's.
pub fn header_path(p: &str) -> String {
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
    p.strip_suffix('\t').unwrap_or(p).to_string()
}

/// `@@ -a[,b] +c[,d] @@ header` → (a, c, header).
fn parse_hunk_header(rest: &str) -> Option<(usize, usize, String)> {
    let (ranges, header) = rest.split_once(" @@").unwrap_or((rest, ""));
    let mut it = ranges.split(' ');
    let old = it.next()?.strip_prefix('-')?;
    let new = it.next()?.strip_prefix('+')?;
    let start = |r: &str| r.split(',').next().and_then(|s| s.parse::<usize>().ok());
    Some((start(old)?, start(new)?, header.trim().to_string()))
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
    // try the midpoint split that makes both names equal
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

#[cfg(test)]
mod tests {
    use super::*;

    const PATCH: &str = "\
diff --git a/src/x.c b/src/x.c
index 1..2 100644
--- a/src/x.c
+++ b/src/x.c
@@ -3,4 +3,4 @@ int f(void)
 a
-b
-c
+B
 d
@@ -20,0 +21,2 @@
+new1
+new2
diff --git a/old.c b/new.c
similarity index 90%
rename from old.c
rename to new.c
--- a/old.c
+++ b/new.c
@@ -1 +1 @@
-x
+y
diff --git a/img.png b/img.png
index 1..2 100644
Binary files a/img.png and b/img.png differ
diff --git a/added.c b/added.c
new file mode 100644
--- /dev/null
+++ b/added.c
@@ -0,0 +1 @@
+hello
diff --git a/gone.c b/gone.c
deleted file mode 100644
--- a/gone.c
+++ /dev/null
@@ -1,2 +0,0 @@
-one
-two
diff --git a/run.sh b/run.sh
old mode 100644
new mode 100755
";

    #[test]
    fn parses_files_kinds_and_line_numbers() {
        let files = parse_diff(PATCH.as_bytes());
        assert_eq!(files.len(), 6);
        let x = &files[0];
        assert_eq!(x.kind, ChangeKind::Modified);
        assert_eq!(x.deleted(), vec![(4, "b".into()), (5, "c".into())]);
        assert_eq!(
            x.added(),
            vec![(4, "B".into()), (21, "new1".into()), (22, "new2".into())]
        );
        assert_eq!(x.hunks[0].header, "int f(void)");
        let r = &files[1];
        assert_eq!(r.kind, ChangeKind::Renamed);
        assert_eq!(r.blame_path(), "old.c");
        assert_eq!(r.new_path.as_deref(), Some("new.c"));
        assert!(files[2].binary);
        assert_eq!(files[2].blame_path(), "img.png");
        assert_eq!(files[3].kind, ChangeKind::Added);
        assert_eq!(files[3].old_path, None);
        assert_eq!(files[4].kind, ChangeKind::Deleted);
        assert_eq!(files[4].blame_path(), "gone.c");
        assert_eq!(files[4].deleted().len(), 2);
        assert!(files[5].mode_change);
    }

    #[test]
    fn attack_path_with_a_space_gets_a_trailing_tab() {
        // what `git diff` prints for a file named "my file.c" (note the TABs)
        let patch = "diff --git a/my file.c b/my file.c\n\
                     index 1..2 100644\n\
                     --- a/my file.c\t\n\
                     +++ b/my file.c\t\n\
                     @@ -1 +1 @@\n\
                     -old\n\
                     +new\n\
                     diff --git \"a/tab\\there.c\" \"b/tab\\there.c\"\n\
                     --- \"a/tab\\there.c\"\n\
                     +++ \"b/tab\\there.c\"\n\
                     @@ -1 +1 @@\n\
                     -x\n\
                     +y\n\
                     diff --git a/sp ace.c b/sp ace.c\n\
                     new file mode 100644\n\
                     --- /dev/null\n\
                     +++ b/sp ace.c\t\n\
                     @@ -0,0 +1 @@\n\
                     +z\n";
        let files = parse_diff(patch.as_bytes());
        assert_eq!(files[0].old_path.as_deref(), Some("my file.c"));
        assert_eq!(files[0].new_path.as_deref(), Some("my file.c"));
        assert_eq!(files[0].blame_path(), "my file.c");
        assert_eq!(files[1].blame_path(), "tab\there.c");
        assert_eq!(files[2].kind, ChangeKind::Added);
        assert_eq!(files[2].new_path.as_deref(), Some("sp ace.c"));
        assert_eq!(header_path("\"a/q\\\"x\"\t"), "a/q\"x");
    }

    #[test]
    fn header_split_with_spaces() {
        assert_eq!(
            split_git_header("a/my file.c b/my file.c"),
            (Some("my file.c".into()), Some("my file.c".into()))
        );
    }
}
