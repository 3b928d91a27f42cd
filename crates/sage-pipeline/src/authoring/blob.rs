//! Git blob ids and the `index OLD..NEW` lines of a submitted patch: the independent evidence
//! that a baseline (the patch's pre-image) or a final file (its post-image) is exactly the file
//! the run saw or left.

use sha1::{Digest, Sha1};

/// The git blob id of `content` (`git hash-object`): SHA-1 of `blob <len>\0<content>`.
pub(crate) fn blob_id(content: &str) -> String {
    let mut h = Sha1::new();
    h.update(format!("blob {}\0", content.len()).as_bytes());
    h.update(content.as_bytes());
    hex::encode(h.finalize())
}

/// The abbreviated pre- and post-image blob ids of one file's diff (`index f36ac54..0a9beca
/// 100644`); `None` when the diff carries no index line. An all-zero id (a new or deleted
/// file) is `None` on that side.
pub(crate) fn index_ids(file_diff: &str) -> Option<(Option<String>, Option<String>)> {
    let (a, b) = sage_patch::parse(file_diff).into_iter().next()?.index?;
    let side = |x: &str| -> Option<String> {
        let x = x.trim().to_ascii_lowercase();
        let hex = !x.is_empty() && x.bytes().all(|c| c.is_ascii_hexdigit());
        (hex && x.bytes().any(|c| c != b'0')).then_some(x)
    };
    Some((side(&a), side(&b)))
}

/// Whether `content`'s blob id starts with the abbreviated id `short` (at least 7 digits).
pub fn matches(content: &str, short: &str) -> bool {
    short.len() >= 7 && blob_id(content).starts_with(&short.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_blob_ids() {
        // `printf '' | git hash-object --stdin` and `echo | git hash-object --stdin`.
        assert_eq!(blob_id(""), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
        assert_eq!(blob_id("\n"), "8b137891791fe96927ad78e64b0aad7bded08bdc");
        assert!(matches("\n", "8b13789179"));
        assert!(!matches("\n", "8b1378"), "too short to trust");
        let d =
            "diff --git a/x b/x\nindex f36ac54..0a9beca 100644\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n";
        assert_eq!(
            index_ids(d),
            Some((Some("f36ac54".into()), Some("0a9beca".into())))
        );
        let n = "diff --git a/y b/y\nnew file mode 100644\nindex 0000000000..e69de29bb2\n";
        assert_eq!(index_ids(n), Some((None, Some("e69de29bb2".into()))));
        assert_eq!(index_ids("--- a/z\n+++ b/z\n@@ -1 +1 @@\n"), None);
    }
}
