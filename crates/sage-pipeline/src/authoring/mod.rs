//! Building and checking cases: `sage case init` (a case folder from a trace, a submitted
//! patch and a baseline source), `sage case check` (every problem that would make a result
//! silently wrong, with a fix), `sage case show` (the snapshot after a write, or its diff).
//! Formats and decisions: `docs/case.md`.

pub mod blob;
pub mod check;
pub mod init;
pub mod show;

use std::collections::BTreeMap;

/// The names in `known` closest to `name`, best first (same file name, shared path suffix,
/// then edit distance), at most `n`.
pub fn closest<'a>(
    name: &str,
    known: impl IntoIterator<Item = &'a String>,
    n: usize,
) -> Vec<String> {
    let file = |p: &str| p.rsplit('/').next().unwrap_or(p).to_string();
    let mut scored: Vec<(usize, String)> = known
        .into_iter()
        .filter(|k| k.as_str() != name)
        .map(|k| {
            let same_file = file(k) == file(name);
            let suffix = k.ends_with(name) || name.ends_with(k.as_str());
            let d = edit_distance(k, name);
            let score = if suffix {
                0
            } else if same_file {
                1 + d
            } else {
                1000 + d
            };
            (score, k.clone())
        })
        .collect();
    scored.sort();
    scored
        .into_iter()
        .filter(|(s, k)| *s < 1000 || *s - 1000 <= k.len().max(name.len()) / 2)
        .take(n)
        .map(|(_, k)| k)
        .collect()
}

fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The pre-image lines a file's diff shows (context and removed lines), by old line number,
/// and whether the last of them has no final newline.
pub(crate) fn patch_old_lines(file_diff: &str) -> (BTreeMap<usize, String>, bool) {
    sage_patch::parse(file_diff)
        .first()
        .map(|f| f.old_side())
        .unwrap_or_default()
}

/// `lines` as a file when they are exactly lines 1..=N: joined, with a final newline unless
/// `no_final_newline`.
pub(crate) fn contiguous_text(
    lines: &BTreeMap<usize, String>,
    no_final_newline: bool,
) -> Option<String> {
    let (&last, _) = lines.last_key_value()?;
    if lines.len() != last || lines.first_key_value().map(|x| *x.0) != Some(1) {
        return None;
    }
    let mut s = lines.values().cloned().collect::<Vec<_>>().join("\n");
    if !no_final_newline {
        s.push('\n');
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closest_names() {
        let known: Vec<String> = ["src/app.py", "tests/test_app.py", "README.md"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(closest("app.py", &known, 2)[0], "src/app.py");
        assert_eq!(
            closest("src/ap.py", &known, 1),
            vec!["src/app.py".to_string()]
        );
        assert!(closest("zzzzzzzz.c", &known, 3).is_empty());
    }

    #[test]
    fn pre_image_of_a_patch() {
        // The real gemini-3-pro bc96 patch: the masked file was one empty line.
        let d = "diff --git a/u.py b/u.py\nindex 8b13789179..c7f5249aed 100644\n--- a/u.py\n+++ b/u.py\n@@ -1 +1,3 @@\n+from x import y\n \n+class A: pass\n";
        let (lines, nn) = patch_old_lines(d);
        assert_eq!(lines, [(1, String::new())].into());
        assert!(!nn);
        assert_eq!(contiguous_text(&lines, nn).as_deref(), Some("\n"));
        let d2 = "@@ -3,2 +3,2 @@\n a\n-b\n+c\n\\ No newline at end of file\n";
        let (lines, nn) = patch_old_lines(d2);
        assert_eq!(lines.keys().copied().collect::<Vec<_>>(), vec![3, 4]);
        assert!(!nn, "the marker follows an added line");
        assert_eq!(
            contiguous_text(&lines, false),
            None,
            "does not start at line 1"
        );
    }
}
