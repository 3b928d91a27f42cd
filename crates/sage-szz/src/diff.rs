//! The diff of one commit against its first parent, parsed into files, hunks and lines, with
//! the old-side line numbers blame needs, in the one patch model of `sage-patch`.

use crate::git::Git;
use crate::SzzError;

// The one unified-diff model (`sage-patch`): what a commit changed, file by file.
pub use sage_patch::{header_path, ChangeKind, FilePatch as FileDiff, Hunk, HunkLine};

/// The diff of `commit` against its first parent (the empty tree for a root commit), with
/// rename detection and `context` lines of context.
pub(crate) fn commit_diff(
    git: &Git,
    commit: &str,
    context: usize,
) -> Result<Vec<FileDiff>, SzzError> {
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
    parse_diff(&out)
}

/// The files a commit changes against its first parent (no hunks): kind and both paths.
/// Merge commits report nothing (PyDriller's convention); a root commit adds every file.
pub(crate) fn name_status(git: &Git, commit: &str) -> Result<Vec<FileDiff>, SzzError> {
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
        files.push(FileDiff::named(
            kind,
            if kind == ChangeKind::Added { None } else { old },
            if kind == ChangeKind::Deleted {
                None
            } else {
                new
            },
        ));
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
    Ok(parse_diff(&out)?
        .into_iter()
        .find(|f| f.old_path == file.old_path || f.new_path == file.new_path))
}

/// Parse `git diff` output (the patch format with `diff --git` headers). Lines are read as
/// git writes them; a CR before the LF is not part of a line's text (blame prints none). A
/// hunk header git did not write is an error, not a hunk skipped.
pub(crate) fn parse_diff(bytes: &[u8]) -> Result<Vec<FileDiff>, SzzError> {
    let text = String::from_utf8_lossy(bytes);
    let mut files = sage_patch::parse(&text);
    for f in &mut files {
        if let Some(bad) = f.malformed() {
            return Err(SzzError::Other(format!(
                "git diff: malformed hunk header `{bad}`"
            )));
        }
        for l in f.hunks.iter_mut().flat_map(|h| h.lines.iter_mut()) {
            if l.text.ends_with('\r') {
                l.text.pop();
            }
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    // The model itself (kinds, renames, quoting, numbering) is tested in `sage-patch`; here,
    // what blame needs on top of it.
    #[test]
    fn crlf_files_read_as_blame_prints_them() {
        let d = "diff --git a/x.c b/x.c\r\n--- a/x.c\r\n+++ b/x.c\r\n@@ -1,2 +1,2 @@\r\n a\r\n-b\r\n+B\r\n";
        let f = parse_diff(d.as_bytes()).unwrap();
        assert_eq!(f[0].deleted(), vec![(2, "b".to_string())]);
        assert_eq!(f[0].blame_path(), "x.c");
    }

    #[test]
    fn a_malformed_hunk_header_is_an_error_not_a_skipped_hunk() {
        let d = "diff --git a/x.c b/x.c\n--- a/x.c\n+++ b/x.c\n@@ -1,2 +1,2\n a\n-b\n";
        let e = parse_diff(d.as_bytes()).unwrap_err().to_string();
        assert!(e.contains("malformed hunk header"), "{e}");
    }
}
