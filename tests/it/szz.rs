//! `sage szz` on small git repositories built in temp dirs with the git binary: each scenario
//! is one where variants differ, and the exact inducing commit is asserted per variant.

use assert_cmd::Command;
use sage_szz::{oracle::LexiconOracle, Options, Variant};
use std::path::{Path, PathBuf};
use std::process::Command as Proc;
use std::time::Duration;

/// A scratch repository with deterministic dates (one day per commit).
pub struct Repo {
    pub dir: tempfile::TempDir,
    day: i64,
}

impl Repo {
    pub fn new() -> Repo {
        let r = Repo {
            dir: tempfile::tempdir().unwrap(),
            day: 0,
        };
        r.git(&["init", "-q", "-b", "main"]);
        r
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn git(&self, args: &[&str]) -> String {
        let date = format!("{} +0000", 1_600_000_000 + self.day * 86_400);
        let out = Proc::new("git")
            .current_dir(self.path())
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.org")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.org")
            .env("GIT_AUTHOR_DATE", &date)
            .env("GIT_COMMITTER_DATE", &date)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    pub fn write(&self, path: &str, content: &str) {
        let p = self.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }

    /// Stage everything and commit; returns the full hash.
    pub fn commit(&mut self, msg: &str) -> String {
        self.day += 1;
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", msg]);
        self.git(&["rev-parse", "HEAD"])
    }
}

fn run(repo: &Path, fix: &str, v: Variant) -> Vec<String> {
    let git = sage_szz::open(repo, Some(Duration::from_secs(60))).unwrap();
    let r = sage_szz::find_inducing(
        &git,
        fix,
        v,
        &Options::default(),
        Some(&LexiconOracle::default()),
    )
    .unwrap();
    r.candidates.into_iter().map(|c| c.commit).collect()
}

fn selected(repo: &Path, fix: &str, v: Variant) -> Option<String> {
    let git = sage_szz::open(repo, None).unwrap();
    sage_szz::find_inducing(
        &git,
        fix,
        v,
        &Options::default(),
        Some(&LexiconOracle::default()),
    )
    .unwrap()
    .selected
}

const BODY: &str = "int main(void) {\n    int n = read_len();\n    char buf[16];\n    copy(buf, src, n);\n    return 0;\n}\n";

#[test]
fn plain_blame_finds_the_commit_that_wrote_the_deleted_line() {
    let mut r = Repo::new();
    let a = r.commit_file("m.c", BODY, "add main");
    r.write("other.c", "int x;\n");
    r.commit("unrelated");
    r.write(
        "m.c",
        &BODY.replace("copy(buf, src, n);", "copy(buf, src, n < 16 ? n : 16);"),
    );
    let fix = r.commit("fix overflow");
    for v in [
        Variant::B,
        Variant::Ag,
        Variant::Ma,
        Variant::R,
        Variant::L,
        Variant::V,
    ] {
        assert_eq!(run(r.path(), &fix, v), vec![a.clone()], "{v}");
    }
}

#[test]
fn whitespace_only_change_is_skipped_from_ag_on() {
    let mut r = Repo::new();
    let a = r.commit_file("m.c", BODY, "add main");
    let w = {
        r.write(
            "m.c",
            &BODY.replace("    copy(buf, src, n);", "\tcopy(buf,  src, n);"),
        );
        r.commit("reindent")
    };
    r.write(
        "m.c",
        &BODY.replace(
            "    copy(buf, src, n);",
            "\tcopy(buf, src, n < 16 ? n : 16);",
        ),
    );
    let fix = r.commit("fix");
    assert_eq!(run(r.path(), &fix, Variant::B), vec![w.clone()]);
    assert_eq!(run(r.path(), &fix, Variant::Ag), vec![a.clone()]);
    assert_eq!(run(r.path(), &fix, Variant::Ma), vec![a.clone()]);
}

#[test]
fn comment_only_lines_are_dropped_from_ag_on() {
    let mut r = Repo::new();
    let a = r.commit_file("m.c", BODY, "add main");
    r.write(
        "m.c",
        &BODY.replace("    copy(buf", "    /* copy the input */\n    copy(buf"),
    );
    let c = r.commit("document");
    // the fix rewrites the comment and the call
    r.write(
        "m.c",
        &BODY.replace(
            "    copy(buf, src, n);",
            "    /* bounded copy */\n    copy(buf, src, n < 16 ? n : 16);",
        ),
    );
    let fix = r.commit("fix");
    let mut b = run(r.path(), &fix, Variant::B);
    b.sort();
    let mut expect = vec![a.clone(), c.clone()];
    expect.sort();
    assert_eq!(b, expect);
    assert_eq!(run(r.path(), &fix, Variant::Ag), vec![a.clone()]);
    assert_eq!(run(r.path(), &fix, Variant::Ma), vec![a]);
}

#[test]
fn rename_commit_is_a_meta_change_for_ma() {
    let mut r = Repo::new();
    let a = r.commit_file("old.c", BODY, "add");
    // rename and edit the line in the same commit
    r.git(&["mv", "old.c", "new.c"]);
    r.write(
        "new.c",
        &BODY.replace("copy(buf, src, n);", "copy(buf, src, (size_t)n);"),
    );
    let ren = r.commit("rename and cast");
    r.write(
        "new.c",
        &BODY.replace("copy(buf, src, n);", "copy(buf, src, n < 16 ? n : 16);"),
    );
    let fix = r.commit("fix");
    assert_eq!(run(r.path(), &fix, Variant::B), vec![ren.clone()]);
    assert_eq!(run(r.path(), &fix, Variant::Ag), vec![ren]);
    assert_eq!(run(r.path(), &fix, Variant::Ma), vec![a]);
}

#[test]
fn large_refactoring_commit_is_passed_through_by_ag_and_ma() {
    let mut r = Repo::new();
    let a = r.commit_file("m.c", BODY, "add main");
    // one commit touching 25 files that also renames the identifier on the line
    for i in 0..24 {
        r.write(&format!("gen/f{i}.c"), &format!("int f{i};\n"));
    }
    r.write(
        "m.c",
        &BODY.replace("copy(buf, src, n)", "copy_bytes(buf, src, n)"),
    );
    let big = r.commit("rename copy to copy_bytes everywhere");
    r.write(
        "m.c",
        &BODY.replace(
            "copy(buf, src, n);",
            "copy_bytes(buf, src, n < 16 ? n : 16);",
        ),
    );
    let fix = r.commit("fix");
    assert_eq!(run(r.path(), &fix, Variant::B), vec![big.clone()]);
    assert_eq!(run(r.path(), &fix, Variant::Ag), vec![a.clone()]);
    assert_eq!(run(r.path(), &fix, Variant::Ma), vec![a]);
}

#[test]
fn large_root_import_is_never_output_by_ag() {
    let mut r = Repo::new();
    for i in 0..22 {
        r.write(&format!("src/f{i}.c"), &format!("int f{i};\n"));
    }
    r.write("m.c", BODY);
    let root = r.commit("import from svn");
    r.write(
        "m.c",
        &BODY.replace("copy(buf, src, n);", "copy(buf, src, n < 16 ? n : 16);"),
    );
    let fix = r.commit("fix");
    assert_eq!(run(r.path(), &fix, Variant::B), vec![root]);
    assert!(run(r.path(), &fix, Variant::Ag).is_empty());
    assert!(run(r.path(), &fix, Variant::Ma).is_empty());
    assert_eq!(selected(r.path(), &fix, Variant::R), None);
}

#[test]
fn r_takes_the_latest_and_l_the_largest() {
    let mut r = Repo::new();
    let mut big = String::new();
    for i in 0..40 {
        big.push_str(&format!("int filler_{i} = {i};\n"));
    }
    big.push_str("int limit = 16;\n");
    let a = r.commit_file("a.c", &big, "big old commit");
    r.write("b.c", "int size = 8;\n");
    let b = r.commit("small newer commit");
    r.write("a.c", &big.replace("int limit = 16;", "int limit = 15;"));
    r.write("b.c", "int size = 7;\n");
    let fix = r.commit("fix both");
    let mut ma = run(r.path(), &fix, Variant::Ma);
    ma.sort();
    let mut both = vec![a.clone(), b.clone()];
    both.sort();
    assert_eq!(ma, both);
    assert_eq!(run(r.path(), &fix, Variant::R), vec![b.clone()]);
    assert_eq!(selected(r.path(), &fix, Variant::R), Some(b));
    assert_eq!(run(r.path(), &fix, Variant::L), vec![a.clone()]);
}

#[test]
fn v_szz_walks_back_through_similar_lines() {
    let mut r = Repo::new();
    let a = r.commit_file("m.c", BODY, "add main");
    r.write(
        "m.c",
        &BODY.replace("copy(buf, src, n);", "copy(buf, src, n + 1);"),
    );
    let tweak = r.commit("off by one");
    r.write(
        "m.c",
        &BODY.replace("copy(buf, src, n);", "copy(buf, src, n < 16 ? n : 16);"),
    );
    let fix = r.commit("fix");
    assert_eq!(run(r.path(), &fix, Variant::B), vec![tweak.clone()]);
    assert_eq!(run(r.path(), &fix, Variant::V), vec![a.clone()]);
    assert_eq!(selected(r.path(), &fix, Variant::V), Some(a));
}

#[test]
fn v_szz_stops_at_a_dissimilar_line() {
    let mut r = Repo::new();
    r.commit_file("m.c", BODY, "add main");
    r.write(
        "m.c",
        &BODY.replace(
            "copy(buf, src, n);",
            "memmove_s(dst_buffer, sizeof dst_buffer);",
        ),
    );
    let rewrite = r.commit("rewrite");
    r.write(
        "m.c",
        &BODY.replace("copy(buf, src, n);", "memmove_s(dst_buffer, 16);"),
    );
    let fix = r.commit("fix");
    assert_eq!(run(r.path(), &fix, Variant::V), vec![rewrite]);
}

#[test]
fn moved_lines_are_traced_by_ma_only() {
    let mut r = Repo::new();
    let f = "void first_function_with_a_long_name(void) {\n    do_something_important_with_the_buffer(buf, len);\n}\n";
    let g = "void second_function(void) {\n    other();\n}\n";
    let a = r.commit_file("m.c", &format!("{f}{g}"), "add");
    r.write("m.c", &format!("{g}{f}"));
    let mv = r.commit("move first below second");
    r.write(
        "m.c",
        &format!("{g}{}", f.replace("buf, len", "buf, len - 1")),
    );
    let fix = r.commit("fix");
    assert_eq!(run(r.path(), &fix, Variant::B), vec![mv]);
    assert_eq!(run(r.path(), &fix, Variant::Ma), vec![a]);
}

#[test]
fn added_files_and_pure_additions_give_no_candidates() {
    let mut r = Repo::new();
    r.commit_file("m.c", BODY, "add main");
    r.write(
        "m.c",
        &BODY.replace("    return 0;", "    check(n);\n    return 0;"),
    );
    r.write("new.c", "int added;\n");
    let fix = r.commit("pure addition");
    assert!(run(r.path(), &fix, Variant::B).is_empty());
    let git = sage_szz::open(r.path(), None).unwrap();
    let res = sage_szz::find_inducing(&git, &fix, Variant::B, &Options::default(), None).unwrap();
    assert!(
        res.notes.iter().any(|n| n.contains("deletes no lines")),
        "{:?}",
        res.notes
    );
}

#[test]
fn binary_files_are_skipped_with_a_note() {
    let mut r = Repo::new();
    let a = r.commit_file("m.c", BODY, "add main");
    std::fs::write(r.path().join("blob.bin"), [0u8, 1, 2, 0, 255, 0]).unwrap();
    r.commit("add blob");
    std::fs::write(r.path().join("blob.bin"), [0u8, 9, 9, 0, 255, 0]).unwrap();
    r.write(
        "m.c",
        &BODY.replace("copy(buf, src, n);", "copy(buf, src, 16);"),
    );
    let fix = r.commit("fix");
    let git = sage_szz::open(r.path(), None).unwrap();
    let res = sage_szz::find_inducing(&git, &fix, Variant::B, &Options::default(), None).unwrap();
    assert_eq!(res.commits(), vec![a.as_str()]);
    assert!(
        res.notes
            .iter()
            .any(|n| n.contains("blob.bin: binary file, skipped")),
        "{:?}",
        res.notes
    );
}

#[test]
fn works_on_a_bare_repository_and_with_a_prefix() {
    let mut r = Repo::new();
    let a = r.commit_file("m.c", BODY, "add main");
    r.write(
        "m.c",
        &BODY.replace("copy(buf, src, n);", "copy(buf, src, 16);"),
    );
    let fix = r.commit("fix");
    let bare = tempfile::tempdir().unwrap();
    let bare_path = bare.path().join("r.git");
    r.git(&["clone", "-q", "--bare", ".", bare_path.to_str().unwrap()]);
    assert_eq!(run(&bare_path, &fix[..10], Variant::B), vec![a]);
}

#[test]
fn unknown_commit_and_shallow_clone_are_clear_errors() {
    let mut r = Repo::new();
    r.commit_file("m.c", BODY, "add main");
    r.write(
        "m.c",
        &BODY.replace("copy(buf, src, n);", "copy(buf, src, 16);"),
    );
    let fix = r.commit("fix");
    Command::cargo_bin("sage")
        .unwrap()
        .args(["szz", "--repo"])
        .arg(r.path())
        .args(["--fix", "deadbeefdeadbeef"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "unknown commit \"deadbeefdeadbeef\"",
        ));
    let shallow = tempfile::tempdir().unwrap();
    let dst = shallow.path().join("s");
    let url = format!("file://{}", r.path().display());
    r.git(&["clone", "-q", "--depth", "1", &url, dst.to_str().unwrap()]);
    Command::cargo_bin("sage")
        .unwrap()
        .args(["szz", "--repo"])
        .arg(&dst)
        .args(["--fix", &fix])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("shallow clone"));
    Command::cargo_bin("sage")
        .unwrap()
        .args(["szz", "--repo", "/nonexistent/repo", "--fix", "HEAD"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "/nonexistent/repo: no such file or directory",
        ));
}

#[test]
fn cli_prints_json_and_table() {
    let mut r = Repo::new();
    let a = r.commit_file("m.c", BODY, "add main");
    r.write(
        "m.c",
        &BODY.replace("copy(buf, src, n);", "copy(buf, src, 16);"),
    );
    let fix = r.commit("fix");
    let out = Command::cargo_bin("sage")
        .unwrap()
        .args(["szz", "--repo"])
        .arg(r.path())
        .args(["--fix", &fix, "--variant", "b,r,v", "--format", "json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    for res in results {
        assert_eq!(res["candidates"][0]["commit"], a.as_str());
    }
    assert_eq!(results[1]["selected"], a.as_str());
    Command::cargo_bin("sage")
        .unwrap()
        .args(["szz", "--repo"])
        .arg(r.path())
        .args(["--fix", &fix[..8]])
        .assert()
        .success()
        .stdout(predicates::str::contains(&a[..12]))
        .stdout(predicates::str::contains("B-SZZ"));
}

impl Repo {
    /// Write one file and commit it.
    pub fn commit_file(&mut self, path: &str, content: &str, msg: &str) -> String {
        self.write(path, content);
        self.commit(msg)
    }
}

/// Where the shared SZZ datasets live.
pub fn datasets() -> PathBuf {
    super::need::shared_path("szz/datasets")
}

#[test]
fn loaders_read_the_four_real_dataset_formats() {
    if super::need::missing_shared("szz/datasets") {
        return;
    }
    use sage_szz::dataset::{load, DatasetFormat};
    let d = datasets();
    let v = load(&d.join("vszz/verified_cve_with_versions_C.json"), None).unwrap();
    assert_eq!(v.format, DatasetFormat::Vszz);
    assert_eq!(v.fixes.len(), 100);
    assert!(v.problems.is_empty(), "{:?}", v.problems);
    assert_eq!(
        v.fixes
            .iter()
            .filter(|f| f.repo == "ImageMagick/ImageMagick")
            .count(),
        20
    );
    // only is_true_inducing commits are labels: 100 true VICs over 100 fixes
    assert_eq!(v.fixes.iter().map(|f| f.inducing.len()).sum::<usize>(), 100);
    let vj = load(&d.join("vszz/verified_cve_with_versions_Java.json"), None).unwrap();
    assert_eq!(vj.fixes.len(), 88);
    assert_eq!(vj.fixes.iter().map(|f| f.inducing.len()).sum::<usize>(), 86);
    assert!(
        vj.fixes.iter().all(|f| f.repo.contains('/')),
        "every V-SZZ Java project maps to owner/name"
    );

    let r = load(&d.join("rosa_dsgithub/bugfix_commits_all.json"), None).unwrap();
    assert_eq!(r.format, DatasetFormat::Rosa);
    assert_eq!(r.fixes.len(), 1115);
    assert!(
        r.problems.is_empty(),
        "{:?}",
        &r.problems[..r.problems.len().min(3)]
    );
    let ri = load(
        &d.join("rosa_dsgithub/bugfix_commits_issues_only.json"),
        None,
    )
    .unwrap();
    assert_eq!(ri.fixes.len(), 129);

    let m = load(&d.join("mas-szz/DS_VSZZ_per_fix.json"), None).unwrap();
    assert_eq!(m.format, DatasetFormat::MasSzz);
    assert_eq!(m.fixes.len(), 177);
    let mj = load(&d.join("mas-szz/DS_JAVA_per_fix.json"), None).unwrap();
    assert_eq!(mj.fixes.len(), 181);
    // truncated fix hashes are kept as given, for prefix resolution
    assert_eq!(mj.fixes.iter().filter(|f| f.fix.len() == 39).count(), 82);
    assert_eq!(mj.fixes.iter().filter(|f| f.fix.len() == 6).count(), 8);

    let h = load(
        &d.join("hinrichs_java/tool_assisted_manual_dataset.json"),
        None,
    )
    .unwrap();
    assert_eq!(h.format, DatasetFormat::Hinrichs);
    assert_eq!(h.fixes.len(), 189);
    assert!(h.fixes.iter().any(|f| f.repo == "apache/camel"));
    assert!(h.fixes.iter().any(|f| f.repo == "apache/tapestry-5"));
    assert!(h
        .fixes
        .iter()
        .all(|f| !f.repo.contains("://") && !f.repo.ends_with(".git")));
    assert_eq!(h.fixes.iter().filter(|f| f.fix.len() == 39).count(), 86);
}

#[test]
fn eval_scores_a_synthetic_dataset_on_a_built_repo() {
    // two fixes in one repo; a missing repo is skipped, not an error
    let mut r = Repo::new();
    let a = r.commit_file("m.c", BODY, "add main");
    let w = {
        r.write(
            "m.c",
            &BODY.replace("    copy(buf, src, n);", "\tcopy(buf,  src, n);"),
        );
        r.commit("reindent")
    };
    r.write(
        "m.c",
        &BODY.replace(
            "    copy(buf, src, n);",
            "\tcopy(buf, src, n < 16 ? n : 16);",
        ),
    );
    let fix1 = r.commit("fix 1");
    r.write(
        "m.c",
        &BODY
            .replace(
                "    copy(buf, src, n);",
                "\tcopy(buf, src, n < 16 ? n : 16);",
            )
            .replace("char buf[16];", "char buf[32];"),
    );
    let fix2 = r.commit("fix 2");
    let repos = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(repos.path().join("acme")).unwrap();
    r.git(&[
        "clone",
        "-q",
        "--bare",
        ".",
        repos.path().join("acme/widget.git").to_str().unwrap(),
    ]);
    let ds = serde_json::json!([
        {"id": 1, "repo_name": "https://github.com/acme/widget.git", "fix_commit_hash": &fix1[..39], "bug_commit_hash": [a], "language": ["c"]},
        {"id": 2, "repo_name": "acme/widget", "fix_commit_hash": fix2, "bug_commit_hash": [a[..12].to_string()], "language": ["c"]},
        {"id": 3, "repo_name": "acme/absent", "fix_commit_hash": "abcdef1234", "bug_commit_hash": ["1234567"], "language": ["c"]}
    ]);
    let file = repos.path().join("ds.json");
    std::fs::write(&file, serde_json::to_string(&ds).unwrap()).unwrap();
    let out = Command::cargo_bin("sage")
        .unwrap()
        .args(["szz", "eval"])
        .arg(&file)
        .arg("--repos")
        .arg(repos.path())
        .args(["--variant", "b,ag", "--format", "json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["fixes_run"], 2);
    assert_eq!(v["fixes_skipped"], 1);
    assert_eq!(v["missing_repos"][0], "acme/absent");
    let scores = v["scores"].as_array().unwrap();
    // B-SZZ blames the reindent commit for fix 1, the original commit for fix 2
    let b = &scores[0];
    assert_eq!(b["variant"], "b");
    assert_eq!(
        (
            b["oracle_pairs"].as_u64(),
            b["predicted_pairs"].as_u64(),
            b["true_pairs"].as_u64()
        ),
        (Some(2), Some(2), Some(1))
    );
    assert_eq!(b["precision"], 0.5);
    assert_eq!(b["recall"], 0.5);
    let ag = &scores[1];
    assert_eq!(ag["true_pairs"], 2);
    assert_eq!(ag["f1"], 1.0);
    let cases = v["cases"].as_array().unwrap();
    assert_eq!(
        cases[0]["fix"],
        fix1.as_str(),
        "the 39-character prefix is resolved"
    );
    assert_eq!(cases[0]["predicted"][0], w.as_str());
    assert_eq!(
        cases[2]["labels"][0],
        a.as_str(),
        "the 12-character label is resolved"
    );
    // the table names the skipped repository
    Command::cargo_bin("sage")
        .unwrap()
        .args(["szz", "eval"])
        .arg(&file)
        .arg("--repos")
        .arg(repos.path())
        .assert()
        .success()
        .stdout(predicates::str::contains("skipped (repository not under"))
        .stdout(predicates::str::contains("acme/absent"));
}

#[test]
fn agent_traces_back_to_the_commit_that_introduced_the_statement() {
    let mut r = Repo::new();
    r.commit_file("m.c", "int main(void) {\n    return 0;\n}\n", "skeleton");
    let intro = {
        r.write("m.c", BODY);
        r.commit("read input into a buffer")
    };
    // a later cosmetic edit of the vulnerable statement
    r.write(
        "m.c",
        &BODY.replace("copy(buf, src, n);", "copy(buf, src, n); /* copy */"),
    );
    let cosmetic = r.commit("annotate");
    r.write(
        "m.c",
        &BODY.replace(
            "copy(buf, src, n);",
            "if (n > 16) return -1;\n    copy(buf, src, n);",
        ),
    );
    let fix = r.commit("check n before copy");
    let git = sage_szz::open(r.path(), None).unwrap();
    let opts = Options {
        cve: Some("Buffer overflow: copy into buf with an unchecked length n".into()),
        ..Options::default()
    };
    let res = sage_szz::find_inducing(
        &git,
        &fix,
        Variant::Agent,
        &opts,
        Some(&LexiconOracle::default()),
    )
    .unwrap();
    let rep = res.agent.as_ref().unwrap();
    assert!(rep.review.as_ref().unwrap().pass, "{:?}", rep.review);
    assert!(!rep.anchors.is_empty());
    assert!(rep.tool_calls > 0);
    // B-SZZ stops at the cosmetic edit; the agent walks through it
    assert_eq!(run(r.path(), &fix, Variant::B), vec![cosmetic.clone()]);
    assert_eq!(
        res.selected.as_deref(),
        Some(intro.as_str()),
        "{:#?}",
        rep.traces
    );
}

#[test]
fn pyszz_compat_reproduces_the_blame_dedup_of_pyszz() {
    // C's line and B's line both sit at line 1 of their own commit's file: pyszz keys blamed
    // lines by (path, line in the blamed commit), so it keeps only the first git emits (C)
    let mut r = Repo::new();
    r.commit_file("f.c", "int a1;\nint a2;\nint a3;\n", "a");
    let b = {
        r.write("f.c", "int b1;\nint a2;\nint a3;\n");
        r.commit("b")
    };
    let c = {
        r.write("f.c", "int c0;\nint b1;\nint a2;\nint a3;\n");
        r.commit("c")
    };
    r.write("f.c", "int a2;\nint a3;\n");
    let fix = r.commit("fix");
    let mut plain = run(r.path(), &fix, Variant::B);
    plain.sort();
    let mut both = vec![b, c.clone()];
    both.sort();
    assert_eq!(plain, both);
    let git = sage_szz::open(r.path(), None).unwrap();
    let opts = Options {
        pyszz_compat: true,
        ..Options::default()
    };
    let res = sage_szz::find_inducing(&git, &fix, Variant::B, &opts, None).unwrap();
    assert_eq!(res.commits(), vec![c.as_str()]);
}

#[test]
fn oracle_data_replaces_the_embedded_words_and_a_bad_file_is_named() {
    let mut r = Repo::new();
    r.commit_file("m.c", BODY, "add main");
    r.write(
        "m.c",
        &BODY.replace(
            "copy(buf, src, n);",
            "if (!check_len(n)) return -1;\n    copy(buf, src, n);",
        ),
    );
    let fix = r.commit("check n before copy");
    let dir = tempfile::tempdir().unwrap();
    // A file that drops a placeholder is refused with its name, exit 2.
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        sage_szz::oracle_data::EMBEDDED_ORACLE_DATA.replace("{{max}}", "five"),
    )
    .unwrap();
    Command::cargo_bin("sage")
        .unwrap()
        .args(["szz", "--repo"])
        .arg(r.path())
        .args(["--fix", &fix, "--variant", "agent", "--oracle-data"])
        .arg(&bad)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("bad.toml"))
        .stderr(predicates::str::contains("{{max}}"));
    // A valid replacement whose guard hints are empty changes what the offline oracle sees:
    // the fix's added check no longer counts as a guard.
    let good = dir.path().join("good.toml");
    let text = sage_szz::oracle_data::EMBEDDED_ORACLE_DATA;
    let start = text.find("guard_hints = [").unwrap();
    let end = start + text[start..].find(']').unwrap() + 1;
    std::fs::write(
        &good,
        format!("{}guard_hints = []{}", &text[..start], &text[end..]),
    )
    .unwrap();
    let guards = |extra: &[&std::ffi::OsStr]| -> serde_json::Value {
        let out = Command::cargo_bin("sage")
            .unwrap()
            .args(["szz", "--repo"])
            .arg(r.path())
            .args(["--fix", &fix, "--variant", "agent", "--format", "json"])
            .args(extra)
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        v["results"][0]["agent"]["root_cause"]["guards"].clone()
    };
    assert_ne!(
        guards(&[]),
        serde_json::json!([]),
        "the embedded hints find the added check"
    );
    assert_eq!(
        guards(&["--oracle-data".as_ref(), good.as_os_str()]),
        serde_json::json!([])
    );
}

/// The toy history of issue 17 item 6. Five commits of `s.c`:
///
/// 1. `skeleton`: `main` only.
/// 2. `store`: adds `store`, whose copy is bounded: `memcpy(buf, src, min_size(len, sizeof(buf)));`
/// 3. `usage`: an unrelated edit of `main`.
/// 4. `simplify`: rewrites that line to `memcpy(buf, src, len);` — this commit introduced the
///    overflow.
/// 5. the fix: `memcpy(buf, src, checked_len(len, BUF_LEN));`
///
/// Derivation of the expected answer, per variant: the fix deletes one line, `memcpy(buf, src,
/// len);`, which blame at the fix's parent attributes to commit 4, so B, AG (not cosmetic), MA
/// (commit 4 is no merge, rename or large commit), R and L (one candidate) give commit 4. V-SZZ
/// compares the line with what commit 4 deleted: whitespace-stripped, `memcpy(buf,src,len);` (20
/// characters) is a subsequence of `memcpy(buf,src,min_size(len,sizeof(buf)));` (42), ratio
/// 2·20/62 = 0.645 ≤ 0.75, so it stops at commit 4 too. The agent maps by content at 0.6, so
/// it reaches commit 2's safe line, which shares every keyword of the anchor (memcpy, buf, src,
/// len): a keyword share alone calls it "present" and the walk ends at commit 2. That line
/// carries a bound (`min_size`, `sizeof`) the vulnerable statement lacks, so the vulnerability
/// is absent there and the answer is commit 4. The unchanged lines around the fix (`char
/// buf[BUF_LEN];`, `return keep(buf);`, all from commit 2) share keywords as well; they are no
/// anchors because the hunk deletes a statement.
#[test]
fn agent_does_not_walk_past_the_commit_that_introduced_the_vulnerable_line() {
    let head = "#include <string.h>\n#include \"keep.h\"\n\n#define BUF_LEN 16\n\n";
    let main0 = "int main(void) {\n    return 0;\n}\n";
    let main1 = "int main(void) {\n    puts(\"usage: store NAME\");\n    return 0;\n}\n";
    let store = |copy: &str| {
        format!(
            "/* Keep a copy of the caller's name. */\nint store(const char *src, size_t len) {{\n    char buf[BUF_LEN];\n\n    {copy}\n    return keep(buf);\n}}\n\n"
        )
    };
    let safe = "memcpy(buf, src, min_size(len, sizeof(buf)));";
    let vuln = "memcpy(buf, src, len);";
    let fixed = "memcpy(buf, src, checked_len(len, BUF_LEN));";
    let mut r = Repo::new();
    r.commit_file("s.c", &format!("{head}{main0}"), "skeleton");
    let c2 = r.commit_file("s.c", &format!("{head}{}{main0}", store(safe)), "store");
    r.commit_file("s.c", &format!("{head}{}{main1}", store(safe)), "usage");
    let c4 = r.commit_file("s.c", &format!("{head}{}{main1}", store(vuln)), "simplify");
    let fix = r.commit_file(
        "s.c",
        &format!("{head}{}{main1}", store(fixed)),
        "reject names longer than the buffer",
    );
    for v in [
        Variant::B,
        Variant::Ag,
        Variant::Ma,
        Variant::R,
        Variant::L,
        Variant::V,
    ] {
        assert_eq!(run(r.path(), &fix, v), vec![c4.clone()], "{}", v.label());
    }
    let git = sage_szz::open(r.path(), None).unwrap();
    let opts = Options {
        cve: Some("Buffer overflow in store: memcpy copies len bytes of src into buf".into()),
        ..Options::default()
    };
    let res = sage_szz::find_inducing(
        &git,
        &fix,
        Variant::Agent,
        &opts,
        Some(&LexiconOracle::default()),
    )
    .unwrap();
    let rep = res.agent.as_ref().unwrap();
    assert_eq!(
        res.selected.as_deref(),
        Some(c4.as_str()),
        "commit 2 is {c2}; {:#?}",
        rep.traces
    );
    // one anchor, the deleted statement, and its walk stops at commit 2's bounded copy
    assert_eq!(rep.anchors.len(), 1, "{:#?}", rep.anchors);
    assert_eq!(rep.anchors[0].text.trim(), vuln);
    let steps = &rep.traces[0].steps;
    assert_eq!(steps.len(), 2, "{steps:#?}");
    assert!(steps[0].present && steps[0].commit == c4);
    assert!(!steps[1].present && steps[1].commit == c2, "{steps:#?}");
    assert!(steps[1].reason.contains("min_size"), "{}", steps[1].reason);

    // the CLI shows the root cause it used, in the table and in JSON
    let cli = |format: &str| {
        let out = Command::cargo_bin("sage")
            .unwrap()
            .args(["szz", "--repo"])
            .arg(r.path())
            .args(["--fix", &fix, "--variant", "agent", "--format", format])
            .args(["--cve", opts.cve.as_deref().unwrap()])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        String::from_utf8(out).unwrap()
    };
    let table = cli("table");
    let summary = &rep.root_cause.as_ref().unwrap().summary;
    assert!(
        table.contains(&format!("root cause [agent]: {summary}")),
        "{table}"
    );
    assert!(table.contains("keywords:"), "{table}");
    assert!(table.contains(&c4[..12]), "{table}");
    let v: serde_json::Value = serde_json::from_str(&cli("json")).unwrap();
    let agent = &v["results"][0]["agent"];
    assert_eq!(agent["root_cause"]["summary"], summary.as_str());
    assert!(agent["root_cause"]["keywords"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!("memcpy")));
    assert_eq!(v["results"][0]["selected"], c4.as_str());
}

/// V-SZZ on a rewrite of every line: from 2,048 walks through one change, the parent is
/// blamed ahead (on a thread, every deleted line at once) while the lines are mapped. The
/// answer is derived by hand and is the same at 100 lines (blamed line by line after the
/// mapping): every rewritten line walks back to the root commit, except where the root has
/// it commented out (the comment filter drops it there, with a mask read ahead); each added
/// header line stops at the commit that added it; and the git calls are as many.
#[test]
fn v_szz_blaming_ahead_on_a_large_rewrite_answers_as_line_by_line() {
    let shape = |n: usize| {
        let mut r = Repo::new();
        let body = |suffix: &str| -> String {
            (0..n)
                .map(|i| format!("value_{i} = compute({i}{suffix})\n"))
                .collect()
        };
        // in the root, every tenth line is commented out
        let root_body: String = (0..n)
            .map(|i| {
                let hash = if i % 10 == 0 { "# " } else { "" };
                format!("{hash}value_{i} = compute({i})\n")
            })
            .collect();
        let root = r.commit_file("m.py", &root_body, "root");
        // the rewrite also adds three header lines above the body
        let headers: String = (0..3).map(|k| format!("HEADER_{k} = {k}\n")).collect();
        r.write("m.py", &format!("{headers}{}", body(", x")));
        let rewrite = r.commit("rewrite");
        let headers2: String = (0..3).map(|k| format!("HEADER_{k} = {k} + 1\n")).collect();
        r.write("m.py", &format!("{headers2}{}", body(", y")));
        let fix = r.commit("fix");
        let git = sage_szz::open(r.path(), Some(Duration::from_secs(60))).unwrap();
        let res = sage_szz::find_inducing(
            &git,
            &fix,
            Variant::V,
            &Options::default(),
            Some(&LexiconOracle::default()),
        )
        .unwrap();
        // line k (1-based) of `fix^`: 1..=3 the headers, then value_(k-4)
        assert_eq!(res.chains.len(), n + 3);
        for c in &res.chains {
            let want = if c.line <= 3 || (c.line - 4) % 10 == 0 {
                vec![rewrite.clone()]
            } else {
                vec![rewrite.clone(), root.clone()]
            };
            assert_eq!(c.commits, want, "line {}", c.line);
        }
        let commented = n.div_ceil(10);
        let by: Vec<(String, usize)> = res
            .candidates
            .iter()
            .map(|c| (c.commit.clone(), c.lines.len()))
            .collect();
        assert_eq!(
            by,
            vec![(rewrite, 3 + commented), (root.clone(), n - commented)]
        );
        // the root's lines are the body's uncommented lines, blamed where each was written
        let root_lines = &res.candidates[1].lines;
        assert!(root_lines
            .iter()
            .all(|l| l.orig_line % 10 != 1 && l.line == l.orig_line + 3));
        assert_eq!(res.selected, Some(root));
        res.git_calls
    };
    assert_eq!(shape(2100), shape(100));
}
