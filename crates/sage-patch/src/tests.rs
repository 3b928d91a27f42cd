use super::*;
use crate::paths::split_git_header;
use proptest::prelude::*;

const GIT: &str = "\
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
fn git_output_files_kinds_and_line_numbers() {
    let files = parse(GIT);
    assert_eq!(files.len(), 6);
    let x = &files[0];
    assert_eq!(x.kind, ChangeKind::Modified);
    assert_eq!(x.index, Some(("1".into(), "2".into())));
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
    assert_eq!(files[3].path(), Some("added.c"));
    assert_eq!(files[4].kind, ChangeKind::Deleted);
    assert_eq!(files[4].path(), Some("gone.c"));
    assert_eq!(files[4].deleted().len(), 2);
    assert!(files[5].mode_change);
    // The spans tile the text: each file's section is verbatim and nothing is lost.
    let joined: String = files.iter().map(|f| &GIT[f.span.clone()]).collect();
    assert_eq!(joined, GIT);
    assert!(GIT[files[1].span.clone()].starts_with("diff --git a/old.c"));
}

#[test]
fn paths_as_git_writes_them() {
    // what `git diff` prints for a file named "my file.c" (note the TABs), a C-quoted name
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
    let files = parse(patch);
    assert_eq!(files[0].old_path.as_deref(), Some("my file.c"));
    assert_eq!(files[0].new_path.as_deref(), Some("my file.c"));
    assert_eq!(files[1].blame_path(), "tab\there.c");
    assert_eq!(files[2].kind, ChangeKind::Added);
    assert_eq!(files[2].new_path.as_deref(), Some("sp ace.c"));
    assert_eq!(header_path("\"a/q\\\"x\"\t"), "a/q\"x");
    // `diff -u` puts a timestamp after the TAB
    assert_eq!(header_path("a/x.py\t2024-01-01 10:00:00"), "a/x.py");
    assert_eq!(
        split_git_header("a/my file.c b/my file.c"),
        (Some("my file.c".into()), Some("my file.c".into()))
    );
}

#[test]
fn a_header_after_hunks_begins_the_next_file_and_counts_decide_inside_a_hunk() {
    // CRLF lines, and in y.py a counted hunk whose removed and added lines look like headers.
    let p = "diff --git a/x.py b/x.py\nnew file mode 100644\n--- /dev/null\n+++ b/x.py\n@@ -0,0 +1 @@\n+a\n--- a/y.py\n+++ b/y.py\n@@ -1 +1 @@\n--- old\n+++ new\n";
    let f = parse(p);
    assert_eq!(f.len(), 2);
    assert_eq!(f[0].kind, ChangeKind::Added);
    assert_eq!(f[1].path(), Some("y.py"));
    assert_eq!(f[1].deleted(), vec![(1, "-- old".into())]);
    assert_eq!(f[1].added(), vec![(1, "++ new".into())]);
}

#[test]
fn llm_diffs_without_numbers_miscounted_and_with_bare_lines() {
    let d = "--- app.py\n+++ app.py\n@@ ... @@\n l4\n-l5\n+L5\n\n";
    let f = parse(d);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].hunks[0].old_start, None);
    assert_eq!(
        f[0].hunks[0].lines.len(),
        3,
        "the trailing bare line is layout"
    );
    // Past its counts, a hunk still takes hunk-looking lines until a file header.
    let d = "@@ -1,2 +1,2 @@\n l1\n-l2\n+L2\n l3\n-l4\n+L4\n";
    assert_eq!(parse(d)[0].hunks[0].lines.len(), 6);
    // prose between hunks belongs to no hunk
    let d = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\nthen:\n@@ -5 +5 @@\n-c\n+d\n";
    let f = parse(d);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].hunks.len(), 2);
    assert!(parse("@@ -x +y @@\n")[0].malformed().is_some());
}

#[test]
fn old_side_of_a_file() {
    // The real gemini-3-pro bc96 patch: the masked file was one empty line.
    let d = "diff --git a/u.py b/u.py\nindex 8b13789179..c7f5249aed 100644\n--- a/u.py\n+++ b/u.py\n@@ -1 +1,3 @@\n+from x import y\n \n+class A: pass\n";
    let (lines, nn) = parse(d)[0].old_side();
    assert_eq!(lines, [(1, String::new())].into());
    assert!(!nn);
    let d2 = "@@ -3,2 +3,2 @@\n a\n-b\n+c\n\\ No newline at end of file\n";
    let (lines, nn) = parse(d2)[0].old_side();
    assert_eq!(lines.keys().copied().collect::<Vec<_>>(), vec![3, 4]);
    assert!(!nn, "the marker follows an added line");
}

#[test]
fn diffs_inside_a_message_end_where_the_prose_resumes() {
    let t = "I will change it:\n```diff\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n```\nand remove y:\n--- a/y.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-y\nDone.\n";
    let l = find_in_text(t);
    assert_eq!(l.len(), 2);
    assert_eq!(
        &t[l[0].span.clone()],
        "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"
    );
    assert_eq!(l[0].new_path.as_deref(), Some("x.py"));
    assert_eq!(l[1].new_path, None);
    assert_eq!(l[1].old_path.as_deref(), Some("y.py"));
    assert!(t[l[1].span.clone()].ends_with("-y\n"));
}

const TEN: &str = "l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\nl10\n";

#[test]
fn apply_exact_offset_and_numberless() {
    let d = "--- a/app.py\n+++ b/app.py\n@@ -1,3 +1,3 @@\n l1\n-l2\n+L2\n l3\n@@ -8,3 +8,4 @@\n l8\n l9\n+l9b\n l10\n";
    assert_eq!(
        apply(Some(TEN), d).unwrap().unwrap(),
        "l1\nL2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\nl9b\nl10\n"
    );
    // Line numbers off by 3 (as after an unrecorded edit above): applies at the offset.
    let d = "@@ -2,2 +2,2 @@\n l5\n-l6\n+L6\n";
    assert_eq!(
        apply(Some(TEN), d).unwrap().unwrap(),
        "l1\nl2\nl3\nl4\nl5\nL6\nl7\nl8\nl9\nl10\n"
    );
    let d = "--- app.py\n+++ app.py\n@@ ... @@\n l4\n-l5\n+L5\n\n";
    assert_eq!(
        apply(Some(TEN), d).unwrap().unwrap(),
        "l1\nl2\nl3\nl4\nL5\nl6\nl7\nl8\nl9\nl10\n"
    );
}

#[test]
fn apply_fails_clearly() {
    let e = apply(Some(TEN), "@@ -1,2 +1,2 @@\n l1\n-nope\n+x\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("hunk 1 (@@ -1,2 +1,2 @@) does not apply"), "{e}");
    assert!(e.contains("expected `nope`, found `l2`"), "{e}");
    assert_eq!(apply(Some(TEN), "just prose\n"), Err(PatchError::NoHunk));
    assert_eq!(apply(Some(TEN), "\n"), Ok(Some(TEN.to_string())));
    assert!(apply(None, "").is_err());
    assert!(matches!(
        apply(Some(TEN), "@@ -x +y @@\n"),
        Err(PatchError::MalformedHunkHeader(_))
    ));
    assert_eq!(
        apply(None, "@@ -1 +1 @@\n-l1\n+x\n"),
        Err(PatchError::Missing)
    );
    let two = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n--- a/y\n+++ b/y\n@@ -1 +1 @@\n-a\n+b\n";
    assert_eq!(apply(Some("a\n"), two), Err(PatchError::SeveralFiles));
}

#[test]
fn apply_no_newline_new_and_deleted_files() {
    let d = "@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n";
    assert_eq!(apply(Some("a\nb"), d).unwrap().unwrap(), "a\nc\n");
    let d = "@@ -1,2 +1,2 @@\n a\n-b\n+c\n\\ No newline at end of file\n";
    assert_eq!(apply(Some("a\nb\n"), d).unwrap().unwrap(), "a\nc");
    let d = "diff --git a/new.py b/new.py\nnew file mode 100644\n--- /dev/null\n+++ b/new.py\n@@ -0,0 +1,2 @@\n+import os\n+x = 1\n";
    assert_eq!(apply(None, d).unwrap().unwrap(), "import os\nx = 1\n");
    assert_eq!(apply(Some("exists\n"), d), Err(PatchError::CreatesExisting));
    let del = "--- a/x.py\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\n-b\n";
    assert_eq!(apply(Some("a\nb\n"), del), Ok(None));
    // `--- x` inside a counted hunk is a removed line `-- x`, not a file header.
    assert_eq!(
        apply(Some("a\n-- x\n"), "@@ -1,2 +1,1 @@\n a\n--- x\n")
            .unwrap()
            .unwrap(),
        "a\n"
    );
}

proptest! {
    #[test]
    fn made_diffs_apply_and_parse_back(
        a in prop::collection::vec(0u8..4, 0..12),
        b in prop::collection::vec(0u8..4, 0..12),
        a_nl in any::<bool>(),
        b_nl in any::<bool>(),
        radius in 0usize..4,
    ) {
        // Few distinct lines, so hunks have repeated context to confuse a sloppy placer.
        let text = |v: &[u8], nl: bool| {
            let mut s = v.iter().map(|x| format!("line {x}")).collect::<Vec<_>>().join("\n");
            if nl && !s.is_empty() {
                s.push('\n');
            }
            s
        };
        let (old, new) = (text(&a, a_nl), text(&b, b_nl));
        prop_assume!(old != new);
        let diff = similar::TextDiff::from_lines(&old, &new)
            .unified_diff()
            .context_radius(radius)
            .header("a/app.py", "b/app.py")
            .to_string();
        prop_assert_eq!(apply(Some(&old), &diff), Ok(Some(new.clone())), "diff:\n{}", diff);
        let files = parse(&diff);
        prop_assert_eq!(files.len(), 1);
        // Every old-side line the hunks number is that line of the old file.
        let old_lines: Vec<&str> = old.lines().collect();
        for (n, l) in files[0].old_side().0 {
            prop_assert_eq!(Some(&l.as_str()), old_lines.get(n - 1));
        }
    }

    #[test]
    fn parse_never_panics_and_spans_stay_in_bounds(s in "(diff --git a/x b/y\n|--- a/x\n|\\+\\+\\+ b/x\n|@@ -1,2 \\+1 @@\n|@@ @@\n| ctx\n|-old\n|\\+new\n|\\\\ No newline\n|\n|prose\n|index 1..2\n){0,40}") {
        let files = parse(&s);
        for f in &files {
            prop_assert!(f.span.start <= f.span.end && f.span.end <= s.len());
        }
        let _ = apply(Some("ctx\nold\n"), &s);
        for l in find_in_text(&s) {
            prop_assert!(l.span.end <= s.len());
        }
    }
}
