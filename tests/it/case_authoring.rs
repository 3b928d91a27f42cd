//! `sage case init`, `sage case check` and `sage case show` end to end on the constructed
//! Claude-stream fixture (`tests/fixtures/claude-stream`, written by its make_fixture.py with
//! the editor's own rules), so these run without ../shared. The real SusVibes traces are
//! exercised in `susvibes.rs`.
//!
//! Hand derivation for the fixture (run.json): turns 1 system, 2 environment (the workspace
//! context result names no call), 3 view, 4 str_replace (write 1: the normpath line), 5 insert
//! without insert_line (write 2, after line 1 by the snippet, which starts at line 1 and shows
//! the inserted comment after one line of context), 6 failed str_replace (ERROR: no write), 7
//! heredoc creating test_app.py (write 3), 8 finish, 9 result. The patch's post-image is
//! final_app.py; the baseline is the view at turn 3 (its blob f2c6b58326 is the patch's index).

use assert_cmd::Command;
use std::path::{Path, PathBuf};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/claude-stream")
        .join(rel)
}

fn sage() -> Command {
    Command::cargo_bin("sage").unwrap()
}

const FRAGMENT: &str = "path = os.path.normpath(os.path.join(\"data\", name))";

/// `case init` with the anchor given: a complete, checkable case.
fn init_full(out: &Path) -> assert_cmd::assert::Assert {
    sage()
        .args(["case", "init"])
        .arg(fixture("run.json"))
        .arg("--patch")
        .arg(fixture("model_patch.diff"))
        .args([
            "--cwe",
            "CWE-22",
            "--cve",
            "CVE-0000-0000",
            "--dataset",
            "constructed",
        ])
        .args(["--artefact", "app.py", "--fragment", FRAGMENT])
        .args(["--category", "defence-insufficient"])
        .args([
            "--description",
            "normpath does not keep the path inside data/",
        ])
        .args(["--trace-source", "constructed"])
        .arg("--out")
        .arg(out)
        .assert()
}

#[test]
fn init_writes_a_case_from_trace_and_patch() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("case");
    let a = init_full(&out).success();
    let stdout = String::from_utf8_lossy(&a.get_output().stdout).to_string();
    assert!(
        stdout.contains("framework claude-stream (agent openhands)"),
        "{stdout}"
    );
    // Artefacts by canonical name: the repository root /project/ is stripped.
    assert!(stdout.contains("  app.py  2 write(s)"), "{stdout}");
    assert!(
        stdout.contains("  test_app.py  1 write(s); baseline: none"),
        "{stdout}"
    );
    assert!(
        stdout.contains("git blob f2c6b58326 matches the patch's index f2c6b58326"),
        "{stdout}"
    );
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("case.json")).unwrap()).unwrap();
    assert_eq!(m["trace"]["files"][0], "run.json");
    assert_eq!(m["trace"]["framework"], "claude-stream");
    assert_eq!(m["baseline"]["app.py"], "baseline/app.py");
    assert!(
        m["baseline"].get("test_app.py").is_none(),
        "created by the agent"
    );
    assert_eq!(m["final_state"]["app.py"], "final/app.py");
    assert_eq!(m["task"]["id"], "run");
    assert_eq!(m["task"]["cve"], "CVE-0000-0000");
    assert!(m["task"]["description"]
        .as_str()
        .unwrap()
        .starts_with("<uploaded_files>"));
    assert_eq!(m["metadata"]["framework"], "openhands");
    assert_eq!(m["metadata"]["base_model"], "constructed-model");
    assert_eq!(m["metadata"]["trace_source"], "constructed");
    assert_eq!(m["anchor"]["category"], "defence-insufficient");
    assert_eq!(m["anchor"]["cwe"], "CWE-22");
    assert_eq!(
        std::fs::read(out.join("run.json")).unwrap(),
        std::fs::read(fixture("run.json")).unwrap(),
        "the trace is copied byte for byte"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("final/app.py")).unwrap(),
        std::fs::read_to_string(fixture("final_app.py")).unwrap()
    );
    // The case is clean and localizes to the hand-derived introducing write.
    sage()
        .args(["case", "check"])
        .arg(&out)
        .assert()
        .success()
        .stdout(predicates::str::contains("app.py: replay = final file"));
    let res = sage()
        .args(["explain", "--json"])
        .arg(&out)
        .assert()
        .success();
    let r: serde_json::Value = serde_json::from_slice(&res.get_output().stdout).unwrap();
    assert_eq!(r[0]["provenance"]["provenance"], "agent-introduced");
    assert_eq!(r[0]["provenance"]["introducing_write"]["turn"], 4);
    assert_eq!(r[0]["task_cve"], "CVE-0000-0000");
    let checks = r[0]["checks"].as_array().unwrap();
    assert!(checks
        .iter()
        .any(|c| c["name"] == "final-state-matches-replay" && c["passed"] == true));
}

#[test]
fn init_leaves_the_anchor_to_fill_and_check_says_so() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("case");
    sage()
        .args(["case", "init"])
        .arg(fixture("run.json"))
        .arg("--patch")
        .arg(fixture("model_patch.diff"))
        .arg("--out")
        .arg(&out)
        .assert()
        .success()
        .stdout(predicates::str::contains("fill in the failure anchor"));
    let text = std::fs::read_to_string(out.join("case.json")).unwrap();
    assert!(text.contains("\"category\": \"TODO\""), "{text}");
    sage()
        .args(["case", "check"])
        .arg(&out)
        .assert()
        .code(1)
        .stdout(predicates::str::contains(
            "the failure anchor is not filled in",
        ));
    // Refuses to overwrite without --force.
    sage()
        .args(["case", "init"])
        .arg(fixture("run.json"))
        .arg("--out")
        .arg(&out)
        .assert()
        .code(1)
        .stderr(predicates::str::contains("--force"));
}

#[test]
fn init_without_patch_takes_the_final_state_from_the_replay() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("case");
    sage()
        .args(["case", "init"])
        .arg(fixture("run.json"))
        .arg("--out")
        .arg(&out)
        .assert()
        .success();
    assert_eq!(
        std::fs::read_to_string(out.join("final/app.py")).unwrap(),
        std::fs::read_to_string(fixture("final_app.py")).unwrap()
    );
    let text = std::fs::read_to_string(out.join("case.json")).unwrap();
    assert!(text.contains("cannot confirm the replay"), "{text}");
    assert!(
        text.contains("not verified (no blob id names it)"),
        "{text}"
    );
}

#[test]
fn init_bad_input_names_the_file_and_record() {
    let d = tempfile::tempdir().unwrap();
    // A trace of an unknown shape.
    let junk = d.path().join("junk.txt");
    std::fs::write(&junk, "just some words\n").unwrap();
    sage()
        .args(["case", "init"])
        .arg(&junk)
        .arg("--out")
        .arg(d.path().join("a"))
        .assert()
        .code(1)
        .stderr(
            predicates::str::contains("junk.txt").and(predicates::str::contains("not recognized")),
        );
    assert!(!d.path().join("a").exists(), "nothing written");
    // An anchor artefact named otherwise than the trace names it.
    sage()
        .args(["case", "init"])
        .arg(fixture("run.json"))
        .args(["--artefact", "src/app.py"])
        .arg("--out")
        .arg(d.path().join("a2"))
        .assert()
        .code(1)
        .stderr(predicates::str::contains(
            "--artefact src/app.py: the trace never writes or views it (did you mean app.py",
        ));
    // A baseline that does not match the patch's blob id.
    let base = d.path().join("base");
    std::fs::create_dir_all(&base).unwrap();
    std::fs::write(base.join("app.py"), "import os\n").unwrap();
    sage()
        .args(["case", "init"])
        .arg(fixture("run.json"))
        .arg("--patch")
        .arg(fixture("model_patch.diff"))
        .arg("--baseline-dir")
        .arg(&base)
        .arg("--out")
        .arg(d.path().join("b"))
        .assert()
        .code(1)
        .stderr(
            predicates::str::contains("(app.py): blob").and(predicates::str::contains(
                "does not match the patch's index line (f2c6b58326)",
            )),
        );
    // A patch that does not apply (its context is not in the baseline).
    let bad = d.path().join("bad.diff");
    std::fs::write(
        &bad,
        "--- a/app.py\n+++ b/app.py\n@@ -1,2 +1,2 @@\n-import sys\n+import os\n \n",
    )
    .unwrap();
    sage()
        .args(["case", "init"])
        .arg(fixture("run.json"))
        .arg("--patch")
        .arg(&bad)
        .arg("--out")
        .arg(d.path().join("c"))
        .assert()
        .code(1)
        .stderr(predicates::str::contains(
            "bad.diff (app.py): the patch does not apply",
        ));
}

/// A good case made by `init_full`, then broken in one way at a time.
fn broken(what: &str, d: &Path) -> PathBuf {
    let out = d.join(what);
    init_full(&out).success();
    let edit = |rel: &str, f: &dyn Fn(String) -> String| {
        let p = out.join(rel);
        let t = std::fs::read_to_string(&p).unwrap();
        std::fs::write(&p, f(t)).unwrap();
    };
    match what {
        "anchor-name" => {
            // The artefact named as a path the trace does not use; its baseline key too.
            edit("case.json", &|t| t.replace("\"app.py\"", "\"src/app.py\""));
            std::fs::create_dir_all(out.join("baseline/src")).unwrap();
            std::fs::copy(out.join("baseline/app.py"), out.join("baseline/src/app.py")).unwrap();
            edit("case.json", &|t| {
                t.replace("baseline/app.py", "baseline/src/app.py")
            });
        }
        "fragment" => edit("case.json", &|t| {
            t.replace("os.path.normpath(", "os.path.realpath(")
        }),
        "baseline" => edit("baseline/app.py", &|t| {
            t.replace("import os", "import os, sys")
        }),
        "final" => edit("final/app.py", &|t| t.replace("# reads", "# reads all")),
        "missing-file" => std::fs::remove_file(out.join("final/app.py")).unwrap(),
        _ => unreachable!(),
    }
    out
}

#[test]
fn check_reports_each_silent_wrong_with_a_fix() {
    let d = tempfile::tempdir().unwrap();
    let cases = [
        ("anchor-name", "anchor.artefact \"src/app.py\" is never touched by the trace", "did you mean \"app.py\""),
        ("fragment", "anchor.fragment is found neither in the baseline of app.py nor in any snapshot", "copy the fragment verbatim"),
        ("baseline", "app.py line 1: the trace's view at run.json#/4/message/content/0/content shows \"import os\", the baseline has \"import os, sys\"", "the baseline is not the file the run started from"),
        ("final", "app.py: the replay differs from the final file at line 2", "a write was misread or"),
        ("missing-file", "final_state of \"app.py\": file", "must exist"),
    ];
    for (what, problem, fix) in cases {
        let dir = broken(what, d.path());
        let a = sage().args(["case", "check"]).arg(&dir).assert().code(1);
        let out = String::from_utf8_lossy(&a.get_output().stdout).to_string();
        assert!(out.contains(problem), "{what}: {out}");
        assert!(out.contains(fix), "{what}: {out}");
    }
    // Several cases at once: each is reported, the good one too.
    let good = d.path().join("good");
    init_full(&good).success();
    let a = sage()
        .args(["case", "check"])
        .arg(d.path())
        .assert()
        .code(1);
    let out = String::from_utf8_lossy(&a.get_output().stdout).to_string();
    assert!(out.contains(&format!("{}: ok", good.display())), "{out}");
    assert_eq!(out.matches("problem(s)").count(), 5, "{out}");
}

#[test]
fn show_prints_snapshots_and_diffs() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("case");
    init_full(&out).success();
    // Write 1 (turn 4) is the normpath edit.
    let a = sage()
        .args(["case", "show"])
        .arg(&out)
        .args(["--write", "1", "--diff"])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&a.get_output().stdout).to_string();
    assert!(
        text.starts_with(
            "# write 1 at turn 4 → app.py (str-replace, via str_replace_editor str_replace"
        ),
        "{text}"
    );
    assert!(text.contains(&format!("+    {FRAGMENT}")), "{text}");
    assert!(
        text.contains("-    return open(os.path.join(\"data\", name)).read()"),
        "{text}"
    );
    // After turn 3 (a view) the file is the baseline; after turn 5 it is the final file.
    let at = |t: &str| -> String {
        let a = sage()
            .args(["case", "show"])
            .arg(&out)
            .args(["--at", t])
            .assert()
            .success();
        String::from_utf8_lossy(&a.get_output().stdout).to_string()
    };
    assert!(at("3").contains("the turn does not write it"));
    assert!(!at("3").contains("normpath"));
    let t5 = at("5");
    assert!(
        t5.ends_with(&std::fs::read_to_string(fixture("final_app.py")).unwrap()),
        "{t5}"
    );
    // Write 3 is test_app.py; asking for it under app.py is refused.
    sage()
        .args(["case", "show"])
        .arg(&out)
        .args(["--write", "3", "--artefact", "app.py"])
        .assert()
        .code(1)
        .stderr(predicates::str::contains(
            "write 3 changes test_app.py, not app.py",
        ));
    sage()
        .args(["case", "show"])
        .arg(&out)
        .args(["--at", "5", "--artefact", "ap.py"])
        .assert()
        .code(1)
        .stderr(predicates::str::contains("did you mean app.py?"));
}

use predicates::prelude::*;

/// The task's CVE and statement reach the results, `sage explain` and the view: a reader can
/// see when the task itself asked for the risky behaviour.
#[test]
fn task_context_is_kept_and_shown() {
    let d = tempfile::tempdir().unwrap();
    let case = d.path().join("cases/c1");
    init_full(&case).success();
    let a = sage()
        .args(["explain", "--full"])
        .arg(&case)
        .assert()
        .success();
    let text = String::from_utf8_lossy(&a.get_output().stdout).to_string();
    assert!(text.contains("(CWE-22, CVE-0000-0000)"), "{text}");
    assert!(
        text.contains("description: <uploaded_files>\n             /project\n"),
        "{text}"
    );
    assert!(
        text.contains("must only read files inside the data folder"),
        "{text}"
    );
    let results = d.path().join("results");
    sage()
        .arg("localize")
        .arg(d.path().join("cases"))
        .arg("--out-dir")
        .arg(&results)
        .assert()
        .success();
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(results.join("cases/c1.json")).unwrap())
            .unwrap();
    assert_eq!(r[0]["task_cve"], "CVE-0000-0000");
    assert!(r[0]["task_description"]
        .as_str()
        .unwrap()
        .contains("must only read files inside the data folder"));
    let site = d.path().join("site");
    sage()
        .arg("view")
        .arg(&results)
        .arg("--out")
        .arg(&site)
        .assert()
        .success();
    let html = std::fs::read_to_string(site.join("cases/c1.html")).unwrap();
    // a statement this short is shown open
    assert!(html.contains("<details id=task-statement open>"), "{html}");
    assert!(
        html.contains("<th>CVE</th><td>CVE-0000-0000</td>"),
        "{html}"
    );
    assert!(html.contains("must only read files inside the data folder"));
}

/// `--baseline-from REPO@REV` reads the baseline from git and checks it by blob id.
#[test]
fn init_takes_baselines_from_a_git_revision() {
    let d = tempfile::tempdir().unwrap();
    let repo = d.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git")
            .arg("-C")
            .arg(&repo)
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .output()
            .expect("git is needed (scripts/setup.sh)");
        assert!(
            ok.status.success(),
            "{}",
            String::from_utf8_lossy(&ok.stderr)
        );
    };
    git(&["init", "-q"]);
    // The baseline the view shows (make_fixture.py's BASE).
    let view = std::fs::read_to_string(fixture("run.json")).unwrap();
    assert!(view.contains("def read(name)"));
    std::fs::write(
        repo.join("app.py"),
        "import os\n\n\ndef read(name):\n    return open(os.path.join(\"data\", name)).read()\n",
    )
    .unwrap();
    git(&["add", "app.py"]);
    git(&["commit", "-qm", "base"]);
    let out = d.path().join("case");
    sage()
        .args(["case", "init"])
        .arg(fixture("run.json"))
        .arg("--patch")
        .arg(fixture("model_patch.diff"))
        .arg("--baseline-from")
        .arg(format!("{}@HEAD", repo.display()))
        .arg("--out")
        .arg(&out)
        .assert()
        .success()
        .stdout(
            predicates::str::contains("baseline: git ").and(predicates::str::contains(
                "matches the patch's index f2c6b58326",
            )),
        );
    // A revision whose file differs from the run's start is refused.
    std::fs::write(repo.join("app.py"), "import os\n").unwrap();
    git(&["commit", "-qam", "other"]);
    sage()
        .args(["case", "init"])
        .arg(fixture("run.json"))
        .arg("--patch")
        .arg(fixture("model_patch.diff"))
        .arg("--baseline-from")
        .arg(format!("{}@HEAD", repo.display()))
        .arg("--out")
        .arg(d.path().join("case2"))
        .assert()
        .code(1)
        .stderr(predicates::str::contains(
            "does not match the patch's index line",
        ));
}

/// Issue 30: `git show` of a baseline has a time limit. A `git` that hangs (a script first on
/// `PATH` that sleeps) is killed at `--git-timeout`, and the error names the command and the
/// file.
#[test]
fn a_hanging_git_show_is_killed_at_its_limit() {
    let d = tempfile::tempdir().unwrap();
    let bin = d.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let git = bin.join("git");
    std::fs::write(&git, "#!/bin/sh\nexec sleep 600\n").unwrap();
    let mut perm = std::fs::metadata(&git).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&git, perm).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let a = sage()
        .env("PATH", path)
        .args(["case", "init"])
        .arg(fixture("run.json"))
        .arg("--patch")
        .arg(fixture("model_patch.diff"))
        .arg("--baseline-from")
        .arg(format!("{}@HEAD", d.path().join("repo").display()))
        .args(["--git-timeout", "1", "--out"])
        .arg(d.path().join("case"))
        .assert()
        .code(1);
    let (_, err) = stdout_stderr(&a);
    assert!(
        err.contains("show HEAD:app.py: no answer within 1 s (killed; --git-timeout)"),
        "{err}"
    );
}

// ---- issue 28: real traces whose names, patches and anchors a first-day user brings ----

fn stdout_stderr(a: &assert_cmd::assert::Assert) -> (String, String) {
    let o = a.get_output();
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The OpenHands run writes `/workspace/requests/requests/sessions.py`; its `git diff` names
/// `requests/sessions.py`. Before: two artefacts per file (`requests/requests/...` and
/// `requests/...`), and a warning about the near-match. After: the checkout folder is learnt
/// from the patch and the case uses the patch's names only.
#[test]
fn init_learns_the_checkout_folder_from_the_patch() {
    let rel = "traces/openhands/mas-evaluation.issue_3__psf__requests-2317";
    if super::need::missing_shared(&format!("{rel}.json")) {
        return;
    }
    let t = |ext: &str| super::need::shared_path(&format!("{rel}.{ext}"));
    let d = tempfile::tempdir().unwrap();
    let a = sage()
        .args(["case", "init"])
        .arg(t("json"))
        .arg("--out")
        .arg(d.path().join("c"))
        .arg("--patch")
        .arg(t("diff"))
        .assert();
    let (out, err) = stdout_stderr(&a);
    assert!(
        out.contains("the trace names its files under requests/ (the checkout folder)"),
        "{out}"
    );
    assert!(!err.contains("requests/requests/"), "{err}");
    assert!(
        err.contains("no baseline for requests/sessions.py"),
        "{err}"
    );
}

/// SWE-agent records its submitted patch in `info.submission` and SWE-bench keeps it in a
/// `.pred` file. Before: `--patch x.pred` was "not a unified diff (no file header)" and the
/// submission was ignored. After: both are the patch.
#[test]
fn init_takes_a_swebench_pred_and_the_trace_own_submission() {
    let rel = "traces/swe-agent/mas-evaluation.issue_3__psf__requests-2317";
    if super::need::missing_shared(&format!("{rel}.traj")) {
        return;
    }
    let t = |ext: &str| super::need::shared_path(&format!("{rel}.{ext}"));
    for patch in [Some("pred"), None] {
        let d = tempfile::tempdir().unwrap();
        let mut cmd = sage();
        cmd.args(["case", "init"])
            .arg(t("traj"))
            .arg("--out")
            .arg(d.path().join("c"));
        if let Some(ext) = patch {
            cmd.arg("--patch").arg(t(ext));
        }
        let (out, err) = stdout_stderr(&cmd.assert());
        assert!(!err.contains("not a unified diff"), "{err}");
        // the patch names requests/sessions.py: it is wanted, so its missing baseline is named
        assert!(
            err.contains("no baseline for requests/sessions.py"),
            "{err}"
        );
        if patch.is_none() {
            assert!(
                out.contains("patch: the trace's own submission (2 file(s))"),
                "{out}"
            );
        }
    }
}

/// The anchor is in a file the agent created (`reproduce_bug.py`). Before: "no baseline for
/// reproduce_bug.py: the trace never shows it before its first write", nothing written.
/// After: the file gets the empty baseline of a file that did not exist, and the case checks.
#[test]
fn an_anchor_in_a_file_the_agent_created_is_a_case() {
    let rel = "traces/swe-agent/pydicom__pydicom-1458";
    if super::need::missing_shared(&format!("{rel}.traj")) {
        return;
    }
    let t = |ext: &str| super::need::shared_path(&format!("{rel}.{ext}"));
    let d = tempfile::tempdir().unwrap();
    let case = d.path().join("c");
    let a = sage()
        .args(["case", "init"])
        .arg(t("traj"))
        .arg("--out")
        .arg(&case)
        .arg("--patch")
        .arg(t("patch"))
        .args([
            "--artefact",
            "reproduce_bug.py",
            "--fragment",
            "import numpy as np",
            "--category",
            "vulnerability-introduced",
            "--cwe",
            "CWE-20",
            "--description",
            "a scratch script as the anchor",
        ])
        .assert();
    let (out, _) = stdout_stderr(&a);
    assert!(out.contains("created by the agent"), "{out}");
    // (exit 1: the other file the run edits has no baseline, as the warning says)
    assert!(case.join("case.json").is_file(), "{out}");
    assert_eq!(
        std::fs::read_to_string(case.join("baseline/reproduce_bug.py")).unwrap(),
        ""
    );
    sage()
        .args(["case", "check"])
        .arg(&case)
        .assert()
        .success()
        .stdout(predicates::str::contains("ok (fragment located)"));
}

/// The fixture's trace is named `run.json`, as a run's manifest is: the SARIF view of its
/// case reads the case (`case.json`), so the anchor keeps its lines and the origin turn and
/// the introducing write their places in the trace (before, the trace was read as a run
/// manifest, failed, and the log lost all three).
#[test]
fn sarif_of_a_case_whose_trace_is_named_run_json_keeps_its_locations() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("case");
    init_full(&out).success();
    assert!(out.join("run.json").is_file() && out.join("case.json").is_file());
    let sarif = d.path().join("s.sarif");
    sage()
        .args(["localize", "--no-write", "--sarif"])
        .arg(&sarif)
        .arg(&out)
        .assert()
        .success();
    let log: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&sarif).unwrap()).unwrap();
    let r = &log["runs"][0]["results"][0];
    let region = &r["locations"][0]["physicalLocation"]["region"];
    assert!(region["startLine"].as_u64().is_some(), "{r:#}");
    let related = r["relatedLocations"].as_array().unwrap();
    assert_eq!(related.len(), 2, "{r:#}");
    for l in related {
        assert_eq!(l["physicalLocation"]["artifactLocation"]["uri"], "run.json");
    }
}
