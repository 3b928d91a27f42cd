//! Applying a one-file patch, as `patch` does without fuzz.

use crate::model::{ChangeKind, Hunk, PatchError};
use crate::parse::parse;

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
