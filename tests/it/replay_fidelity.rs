//! Replay fidelity on real data, through the real binary: `sage replay` on every sample of
//! `../shared/traces` that carries its own result (`tests/data/replay-samples.tsv`: the
//! trace, then the result files kept beside it), with the verdict counts each one reaches
//! today; every `differs` is explained in `docs/adapters-fidelity.md`, whose table
//! `scripts/fidelity-table.sh` regenerates (checked here too). Constructed runs check each
//! verdict and the exit status without `../shared`.

use super::adapters_events::sample;
use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn replay(dir: &Path, args: &[&str]) -> (Value, String, i32) {
    let o = Command::cargo_bin("sage")
        .unwrap()
        .current_dir(dir)
        .arg("replay")
        .args(args)
        .args(["--format", "json"])
        .output()
        .unwrap();
    let v = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    (
        v,
        String::from_utf8_lossy(&o.stderr).into_owned(),
        o.status.code().unwrap_or(-1),
    )
}

/// The rows of `tests/data/replay-samples.tsv`: (trace, result files, extra flags).
fn samples() -> Vec<(String, Vec<String>, Vec<String>)> {
    let list = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/replay-samples.tsv");
    std::fs::read_to_string(list)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let mut cols = l.split('\t');
            let trace = cols.next().unwrap().to_string();
            let mut words = || {
                cols.next()
                    .unwrap_or("")
                    .split_whitespace()
                    .filter(|w| *w != "-")
                    .map(String::from)
                    .collect::<Vec<_>>()
            };
            let results = words();
            let flags = words();
            (trace, results, flags)
        })
        .collect()
}

/// (trace, files, matches, differs, unverifiable): what `sage replay` reaches on each real
/// sample. Every `differs` is explained in `docs/adapters-fidelity.md` ("Every differs").
const EXPECTED: &[(&str, usize, usize, usize, usize)] = &[
    // hello.sh written once; its sha256 is the snapshot's.
    (
        "claude-code/hello-world-script.transcript.jsonl",
        1,
        1,
        0,
        0,
    ),
    // 3 files, each reaches its originalFile and the snapshot (or is absent from it).
    ("claude-code/coverage-test-fix.transcript.jsonl", 3, 3, 0, 0),
    // the commits are an approximate final state: where other commits touched a file first,
    // a commit does not apply to the file the session read (originalFile), so it cannot speak
    // for the replay, and the originalFile chain decides (matches); the transcript is
    // anonymized (/home/USER), the commits are not: equal up to the redaction (matches);
    // `npm install` edits package.json and is never executed (differs).
    ("claude-code/spotter-fum.8463c716.jsonl", 13, 10, 1, 2),
    (
        "openhands-sdk/openagentsafety_traj_safety-migrate.json",
        1,
        1,
        0,
        0,
    ),
    (
        "openhands/multi_swe_bench_output.ponylang__ponyc-4593.json",
        1,
        1,
        0,
        0,
    ),
    // run 1: LICENSE is written by Python code the trace runs (`open(...).write(...)`): the
    // IPython cell, executed, writes it.
    ("openhands/resolver_mock_output.jsonl", 1, 1, 0, 0),
    // run 2 (`--run 2`): App.css shown whole, PullRequestViewer.tsx in windows.
    ("openhands/resolver_mock_output.jsonl", 2, 2, 0, 0),
    // the shipped diff lost its indentation upstream: it does not apply to the views.
    // (+1 unverifiable with execution: a scratch script the agent wrote with a command)
    (
        "openhands/mas-evaluation.issue_1__scikit-learn__scikit-learn-12585.json",
        3,
        0,
        0,
        3,
    ),
    (
        "openhands/mas-evaluation.issue_2__pallets__flask-5014.json",
        3,
        1,
        0,
        2,
    ),
    (
        "openhands/mas-evaluation.issue_3__psf__requests-2317.json",
        11,
        5,
        0,
        6,
    ),
    (
        "openhands/mas-evaluation.issue_4__matplotlib__matplotlib-22719.json",
        3,
        0,
        0,
        3,
    ),
    ("swe-agent/pydicom__pydicom-1458.traj", 2, 2, 0, 0),
    ("swe-agent/6e44b9__sweagenttestrepo-1c2844.traj", 1, 1, 0, 0),
    (
        "swe-agent/mas-evaluation.issue_1__scikit-learn__scikit-learn-12585.traj",
        1,
        0,
        0,
        1,
    ),
    (
        "swe-agent/mas-evaluation.issue_2__pallets__flask-5014.traj",
        1,
        0,
        0,
        1,
    ),
    (
        "swe-agent/mas-evaluation.issue_3__psf__requests-2317.traj",
        3,
        3,
        0,
        0,
    ),
    // the shipped .patch is a django patch, not this run's (the submission matches).
    (
        "swe-agent/mas-evaluation.issue_4__matplotlib__matplotlib-22719.traj",
        3,
        2,
        1,
        0,
    ),
    ("mini-swe-agent/django__django-10999.traj.json", 3, 3, 0, 0),
    (
        "mini-swe-agent/aisyseval.django__django-10914.run_1.traj.json",
        2,
        2,
        0,
        0,
    ),
    // these four edit through Python scripts (`Path.write_text`, `open(p, 'w')`), executed;
    // in issue_2 the script for sessions.py needs lines the trace never shows (unverifiable).
    (
        "mini-swe-agent/mas-evaluation.issue_1__scikit-learn__scikit-learn-12585.traj.json",
        1,
        1,
        0,
        0,
    ),
    (
        "mini-swe-agent/mas-evaluation.issue_2__pallets__flask-5014.traj.json",
        2,
        1,
        0,
        1,
    ),
    (
        "mini-swe-agent/mas-evaluation.issue_3__psf__requests-2317.traj.json",
        2,
        2,
        0,
        0,
    ),
    (
        "mini-swe-agent/mas-evaluation.issue_4__matplotlib__matplotlib-22719.traj.json",
        1,
        1,
        0,
        0,
    ),
    ("aider/car-game.aider.chat.history.md", 3, 1, 0, 2),
    // apply_patch added a trailing blank line the committed files do not have.
    (
        "codex/codex-session-viewer.example.rollout.jsonl",
        25,
        15,
        3,
        7,
    ),
];

/// The samples whose counts differ without execution (`--no-execute`, or no sandbox here):
/// the writes of commands sage does not read statically are missing.
const WITHOUT_EXECUTION: &[(&str, &str, usize, usize, usize, usize)] = &[
    (
        "openhands/resolver_mock_output.jsonl",
        "--run 1",
        1,
        0,
        1,
        0,
    ),
    (
        "openhands/mas-evaluation.issue_1__scikit-learn__scikit-learn-12585.json",
        "",
        2,
        0,
        0,
        2,
    ),
    (
        "openhands/mas-evaluation.issue_3__psf__requests-2317.json",
        "",
        9,
        5,
        0,
        4,
    ),
    (
        "openhands/mas-evaluation.issue_4__matplotlib__matplotlib-22719.json",
        "",
        2,
        0,
        0,
        2,
    ),
    (
        "mini-swe-agent/mas-evaluation.issue_1__scikit-learn__scikit-learn-12585.traj.json",
        "",
        1,
        0,
        1,
        0,
    ),
    (
        "mini-swe-agent/mas-evaluation.issue_2__pallets__flask-5014.traj.json",
        "",
        2,
        0,
        2,
        0,
    ),
    (
        "mini-swe-agent/mas-evaluation.issue_3__psf__requests-2317.traj.json",
        "",
        2,
        1,
        1,
        0,
    ),
    (
        "mini-swe-agent/mas-evaluation.issue_4__matplotlib__matplotlib-22719.traj.json",
        "",
        1,
        0,
        1,
        0,
    ),
];

/// Whether `sage replay` can execute commands here (else why not).
fn sandbox_here() -> Result<(), String> {
    sage_sandbox::Sandbox::probe(sage_sandbox::SandboxConfig {
        scratch: std::env::temp_dir(),
        limits: sage_sandbox::Limits::default(),
    })
    .map(|_| ())
    .map_err(|e| e.to_string())
}

#[test]
fn sage_replay_on_every_real_sample_with_its_result() {
    if super::need::missing_shared("traces") {
        return;
    }
    let dir = super::need::shared_path("traces");
    let rows = samples();
    assert_eq!(
        rows.len(),
        EXPECTED.len(),
        "tests/data/replay-samples.tsv and EXPECTED"
    );
    // Both modes on the samples execution changes, where a sandbox can be made; else the
    // samples without execution only.
    let modes: Vec<bool> = match sandbox_here() {
        Ok(()) => vec![true, false],
        Err(e) => {
            super::need::skip(&format!("replay by execution: {e}"));
            vec![false]
        }
    };
    for execute in modes {
        for ((trace, results, flags), want) in rows.iter().zip(EXPECTED) {
            assert_eq!(trace, want.0);
            let joined = flags.join(" ");
            let want = if execute {
                *want
            } else {
                match WITHOUT_EXECUTION
                    .iter()
                    .find(|w| w.0 == trace && w.1 == joined)
                {
                    Some(w) => (w.0, w.2, w.3, w.4, w.5),
                    None if execute_only_rows_differ() => continue,
                    None => *want,
                }
            };
            let mut args: Vec<&str> = vec![trace];
            for r in results {
                args.extend(["--result", r]);
            }
            args.extend(flags.iter().map(String::as_str));
            args.push(if execute { "--execute" } else { "--no-execute" });
            let (v, stderr, code) = replay(&dir, &args);
            let c = &v["counts"];
            let got = (
                c["files"].as_u64().unwrap_or(0) as usize,
                c["matches"].as_u64().unwrap_or(0) as usize,
                c["differs"].as_u64().unwrap_or(0) as usize,
                c["unverifiable"].as_u64().unwrap_or(0) as usize,
            );
            assert_eq!(got, (want.1, want.2, want.3, want.4), "{trace}: {stderr}");
            // Exit 1 exactly when some file differs.
            assert_eq!(code, i32::from(want.3 > 0), "{trace}: {stderr}");
            for a in v["artefacts"].as_array().unwrap() {
                match a["verdict"].as_str().unwrap() {
                    // An unverifiable file always says why.
                    "unverifiable" => assert!(
                        a["reason"].as_str().is_some_and(|r| !r.is_empty()),
                        "{trace}: {a}"
                    ),
                    "differs" => assert!(
                        a["hunk"].is_string() || a["reason"].is_string(),
                        "{trace}: {a}"
                    ),
                    _ => {}
                }
            }
        }
    }
}

/// Without execution, only the rows of [`WITHOUT_EXECUTION`] are replayed when execution
/// already covered the rest (their counts are the same in both modes).
fn execute_only_rows_differ() -> bool {
    sandbox_here().is_ok()
}

#[test]
fn fidelity_doc_table_is_the_scripts_output() {
    if super::need::missing_shared("traces") {
        return;
    }
    if let Err(e) = sandbox_here() {
        super::need::skip(&format!(
            "the table is measured with replay by execution: {e}"
        ));
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    if which("jq").is_none() {
        super::need::skip("jq is not installed (scripts/fidelity-table.sh needs it)");
        return;
    }
    let o = std::process::Command::new("bash")
        .arg(root.join("scripts/fidelity-table.sh"))
        .env("SAGE", assert_cmd::cargo::cargo_bin("sage"))
        .env("TRACES", super::need::shared_path("traces"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let table = String::from_utf8(o.stdout).unwrap();
    let doc = std::fs::read_to_string(root.join("docs/adapters-fidelity.md")).unwrap();
    assert!(
        doc.contains(table.trim()),
        "docs/adapters-fidelity.md is stale; run scripts/fidelity-table.sh --update:\n{table}"
    );
}

fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(tool))
            .find(|f| f.is_file())
    })
}

/// A constructed Aider session: one SEARCH/REPLACE on `app.py` (`x = 1` → `x = 2`), committed
/// as abc1234.
const AIDER: &str = "\n# aider chat started at 2025-05-04 17:02:36\n\n> Main model: m with diff-fenced edit format  \n\n#### fix it  \n\nI will fix it.\n\n```python\napp.py\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE\n```\n\n> Tokens: 1k sent, 2 received.  \n> Applied edit to app.py  \n> Commit abc1234 fix  \n\n#### thanks  \n\nYou are welcome.\n";

fn commit(new_x: &str) -> String {
    format!(
        "commit abc1234def\nAuthor: a (aider)\n\n    fix\n\ndiff --git a/app.py b/app.py\n--- a/app.py\n+++ b/app.py\n@@ -1,2 +1,2 @@\n-x = 1\n+x = {new_x}\n y = 0\n"
    )
}

fn aider_run() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("t.md"), AIDER).unwrap();
    std::fs::create_dir(d.path().join("base")).unwrap();
    std::fs::write(d.path().join("base/app.py"), "x = 1\ny = 0\n").unwrap();
    std::fs::write(d.path().join("good.patch"), commit("2")).unwrap();
    std::fs::write(d.path().join("bad.patch"), commit("3")).unwrap();
    d
}

#[test]
fn replay_matches_the_commit_that_holds_the_same_edit() {
    // baseline `x = 1\ny = 0\n` + the edit = `x = 2\ny = 0\n` = baseline + the commit.
    let d = aider_run();
    let (v, stderr, code) = replay(
        d.path(),
        &["t.md", "--baseline-dir", "base", "--result", "good.patch"],
    );
    assert_eq!(code, 0, "{stderr}");
    let a = &v["artefacts"][0];
    assert_eq!(a["path"], "app.py");
    assert_eq!(a["verdict"], "matches");
    assert_eq!(a["final"]["state"], "full");
    assert_eq!(a["final"]["content"], "x = 2\ny = 0\n");
    assert_eq!(a["baseline"], "baseline-dir base/app.py");
}

#[test]
fn replay_differs_from_a_commit_with_another_edit_and_shows_the_hunk() {
    // The commit says `x = 3`, the trace's edit `x = 2`: the first (only) hunk shows both.
    let d = aider_run();
    let (v, stderr, code) = replay(
        d.path(),
        &["t.md", "--baseline-dir", "base", "--result", "bad.patch"],
    );
    assert_eq!(code, 1, "{stderr}");
    let a = &v["artefacts"][0];
    assert_eq!(a["verdict"], "differs");
    let hunk = a["hunk"].as_str().unwrap();
    assert!(hunk.contains("-x = 2\n+x = 3\n"), "{hunk}");
}

#[test]
fn replay_without_baseline_or_result_is_unverifiable_with_a_reason() {
    // No baseline: the SEARCH text is nowhere, the write fails; no result to compare with.
    let d = aider_run();
    let (v, stderr, code) = replay(d.path(), &["t.md"]);
    assert_eq!(code, 0, "{stderr}");
    let a = &v["artefacts"][0];
    assert_eq!(a["verdict"], "unverifiable");
    assert!(a["reason"].as_str().unwrap().contains("--result"), "{a}");
    assert_eq!(a["failed_writes"].as_array().unwrap().len(), 1);
    // With the commit only, the baseline is the lines its old side shows: a partial view.
    let (v, _, code) = replay(d.path(), &["t.md", "--result", "good.patch"]);
    assert_eq!(code, 0);
    let a = &v["artefacts"][0];
    assert_eq!(a["verdict"], "matches");
    assert_eq!(a["final"]["state"], "partial");
    assert_eq!(
        a["final"]["runs"][0]["lines"],
        serde_json::json!(["x = 2", "y = 0"])
    );
}

#[test]
fn replay_refuses_a_result_it_cannot_read_and_a_file_that_is_not_a_trace() {
    let d = aider_run();
    std::fs::write(d.path().join("junk.json"), "{\"a\": 1}").unwrap();
    let (_, stderr, code) = replay(d.path(), &["t.md", "--result", "junk.json"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("junk.json"), "{stderr}");
    let (_, stderr, code) = replay(d.path(), &["good.patch"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("good.patch"), "{stderr}");
}

#[test]
fn submitted_patches_are_the_final_writes() {
    if super::need::missing_shared("traces") {
        return;
    }
    // The final-state writes carry exactly the patch each sample ships beside the trace.
    let pairs: &[(&str, &str)] = &[
        (
            "swe-agent/pydicom__pydicom-1458.traj",
            "swe-agent/pydicom__pydicom-1458.patch",
        ),
        (
            "mini-swe-agent/django__django-10999.traj.json",
            "mini-swe-agent/django__django-10999.preds_model_patch.diff",
        ),
        (
            "openhands/multi_swe_bench_output.ponylang__ponyc-4593.json",
            "openhands/multi_swe_bench_output.ponylang__ponyc-4593.git_patch.diff",
        ),
    ];
    for (trace, patch) in pairs {
        let t = super::adapters_events::normalize(trace);
        // The submission is the trace's, never a turn's write.
        assert!(t.writes().all(|(_, w)| !w.final_state), "{trace}");
        let finals: String = t
            .submissions
            .iter()
            .filter_map(|w| w.op.new_text().map(str::to_string))
            .collect();
        let want = std::fs::read_to_string(sample(patch)).unwrap();
        // Blank context lines lose their leading space in some copies of a patch.
        let norm = |s: &str| {
            s.replace("\r\n", "\n")
                .lines()
                .map(|l| if l.trim().is_empty() { "" } else { l })
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert_eq!(norm(&finals), norm(&want), "{trace}");
    }
}

#[test]
fn run_n_reads_one_run_of_a_multi_run_file_and_is_refused_where_there_is_one() {
    if super::need::missing_shared("traces") {
        return;
    }
    let dir = super::need::shared_path("traces");
    let normalize = |args: &[&str]| {
        let o = Command::cargo_bin("sage")
            .unwrap()
            .current_dir(&dir)
            .arg("normalize")
            .args(args)
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
        (
            v,
            String::from_utf8_lossy(&o.stderr).into_owned(),
            o.status.code(),
        )
    };
    let f = "openhands/resolver_mock_output.jsonl";
    // Without --run: the first record, the second reported as a dropped record.
    let (first, _, code) = normalize(&[f]);
    assert_eq!(code, Some(0));
    assert!(first["dropped"]
        .as_array()
        .unwrap()
        .iter()
        .any(|d| d["reason"].as_str().unwrap().contains("another run")));
    let (one, _, _) = normalize(&[f, "--run", "1"]);
    assert_eq!(one["turns"], first["turns"]);
    // Run 2 is the record on line 2: every raw pointer names that line.
    let (two, stderr, code) = normalize(&[f, "--run", "2"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_ne!(two["turns"], first["turns"]);
    let lines: std::collections::BTreeSet<u64> = two["turns"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["message"]["raw"]["line"].as_u64())
        .collect();
    assert_eq!(lines, [2].into_iter().collect());
    assert!(stderr.contains("raw pointers: all"), "{stderr}");
    let (_, stderr, code) = normalize(&[f, "--run", "3"]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("holds 2 runs"), "{stderr}");
    let (_, stderr, code) = normalize(&["swe-agent/pydicom__pydicom-1458.traj", "--run", "2"]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("holds one run"), "{stderr}");
    let (_, _, code) = normalize(&[f, "--run", "0"]);
    assert_eq!(code, Some(2), "--run 0 is a usage error");
}

/// A constructed mini-SWE-agent run that edits `app.py` with a Python heredoc (a shape sage
/// does not read statically), its final diff, and the file before the run.
fn shell_run() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let edit = "cd /testbed && python3 - <<'PY'\nfrom pathlib import Path\np = Path('app.py')\np.write_text(p.read_text().replace('x = 1', 'x = 2'))\nprint('patched app.py')\nPY";
    let msgs = serde_json::json!([
        {"role": "system", "content": "You can run bash commands."},
        {"role": "user", "content": "Please solve this issue: x must be 2"},
        {"role": "assistant", "content": format!("Edit it.\n\n```bash\n{edit}\n```")},
        {"role": "user", "content": "<returncode>0</returncode>\n<output>\npatched app.py\n</output>"},
        {"role": "assistant", "content": "Done.\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"},
        {"role": "user", "content": ""}
    ]);
    std::fs::write(d.path().join("t.traj.json"), msgs.to_string()).unwrap();
    std::fs::create_dir(d.path().join("base")).unwrap();
    std::fs::write(d.path().join("base/app.py"), "x = 1\ny = 0\n").unwrap();
    std::fs::write(
        d.path().join("final.diff"),
        "--- a/app.py\n+++ b/app.py\n@@ -1,2 +1,2 @@\n-x = 1\n+x = 2\n y = 0\n",
    )
    .unwrap();
    d
}

#[test]
fn a_heredoc_edit_is_replayed_by_execution_and_verified() {
    if let Err(e) = sandbox_here() {
        super::need::skip(&format!("replay by execution: {e}"));
        return;
    }
    let d = shell_run();
    let args = [
        "t.traj.json",
        "--framework",
        "mini-swe-agent",
        "--baseline-dir",
        "base",
        "--result",
        "final.diff",
    ];
    let (v, stderr, code) = replay(d.path(), &[&args[..], &["--execute"]].concat());
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(v["counts"]["matches"], 1, "{v}");
    let a = &v["artefacts"][0];
    assert_eq!(a["path"], "app.py");
    assert_eq!(a["executed"][0]["check"], "verified", "{a}");
    assert_eq!(v["execution"]["executed"]["python3"], 1);
    assert_eq!(v["execution"]["refused"]["read-only"], 1, "{v}");
    // Without execution the edit is lost: the replay keeps the baseline.
    let (v, _, code) = replay(d.path(), &[&args[..], &["--no-execute"]].concat());
    assert_eq!(code, 1);
    assert_eq!(v["counts"]["differs"], 1);
    assert_eq!(v["execution"]["state"], "off: --no-execute");
    // Rules that refuse python3 as read-only: nothing runs.
    std::fs::write(
        d.path().join("rules.toml"),
        "version = 1\nshell_tools = [\"bash\"]\n[[class]]\nname = \"read-only\"\nreason = \"r\"\npatterns = ['^(python3|echo|cd)']\n",
    )
    .unwrap();
    let (v, _, _) = replay(
        d.path(),
        &[&args[..], &["--execute", "--exec-rules", "rules.toml"]].concat(),
    );
    assert_eq!(v["counts"]["differs"], 1, "{v}");
    assert_eq!(v["execution"]["refused"]["read-only"], 2, "{v}");
    // A rules file of another version is refused before anything runs.
    std::fs::write(d.path().join("bad.toml"), "version = 9\n").unwrap();
    let (_, stderr, code) = replay(
        d.path(),
        &[&args[..], &["--exec-rules", "bad.toml"]].concat(),
    );
    assert_ne!(code, 0);
    assert!(stderr.contains("version 9"), "{stderr}");
}

/// `sage case check` gives `sage replay`'s verdict per file, from the case's own baselines,
/// against the case's final files, with each executed write's output check: the same
/// constructed shell run as above, laid out as a case (baseline, final file, anchor).
#[test]
fn case_check_gives_the_replay_verdict_per_file_and_per_executed_write() {
    if let Err(e) = sandbox_here() {
        super::need::skip(&format!("replay by execution: {e}"));
        return;
    }
    let d = shell_run();
    let case = d.path().join("case");
    std::fs::create_dir_all(case.join("baseline")).unwrap();
    std::fs::create_dir_all(case.join("final")).unwrap();
    std::fs::copy(d.path().join("t.traj.json"), case.join("t.traj.json")).unwrap();
    std::fs::copy(d.path().join("base/app.py"), case.join("baseline/app.py")).unwrap();
    std::fs::write(case.join("final/app.py"), "x = 2\ny = 0\n").unwrap();
    let manifest = serde_json::json!({
        "schema": "sage.case/1",
        "id": "shell",
        "trace": {"files": ["t.traj.json"], "framework": "mini-swe-agent"},
        "baseline": {"app.py": "baseline/app.py"},
        "final_state": {"app.py": "final/app.py"},
        "task": {"id": "t", "description": "x must be 2"},
        "anchor": {"artefact": "app.py", "fragment": "x = 2", "category": "vulnerability-introduced",
                   "cwe": "CWE-20", "description": "x is set without a check"}
    });
    std::fs::write(case.join("case.json"), manifest.to_string()).unwrap();
    let run = |exec: &str| {
        let o = std::process::Command::new(assert_cmd::cargo::cargo_bin("sage"))
            .args(["case", "check", "--format", "json", exec])
            .arg(&case)
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
        v["cases"][0]["replay"].clone()
    };
    let r = run("--execute");
    assert_eq!(r["results"], serde_json::json!(["case final files"]), "{r}");
    assert_eq!(r["counts"]["matches"], 1, "{r}");
    let f = &r["files"][0];
    assert_eq!(
        (f["path"].as_str(), f["verdict"].as_str()),
        (Some("app.py"), Some("matches"))
    );
    assert_eq!(f["baseline"], "case baseline baseline/app.py", "{f}");
    assert_eq!(
        f["executed"],
        serde_json::json!(["turn 2: verified"]),
        "{f}"
    );
    // Without execution the heredoc's edit is lost: the replay differs from the final file.
    let r = run("--no-execute");
    assert_eq!(r["counts"]["differs"], 1, "{r}");
    assert_eq!(r["execution"], "off: --no-execute");
}

/// The published spotter-fum transcript is anonymized (`/home/USER/`) while its commits keep
/// the real home folder: equal up to the redaction, and the redactions are data. With a rules
/// file that declares none, the two test files differ again, the first hunk showing the name.
#[test]
fn an_anonymized_trace_matches_up_to_its_redaction_and_the_rules_are_data() {
    if super::need::missing_shared("traces") {
        return;
    }
    let dir = super::need::shared_path("traces");
    let args = [
        "claude-code/spotter-fum.8463c716.jsonl",
        "--result",
        "claude-code/spotter-fum.commits.patch",
        "--no-execute",
    ];
    let file = "test/spotter_web/live/session_live_test.exs";
    let verdict = |v: &Value| -> (String, String) {
        let a = v["artefacts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["path"] == file)
            .unwrap_or_else(|| panic!("{file} not in {v}"));
        let c = a["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["against"].as_str().unwrap().contains("commits"))
            .unwrap();
        (
            c["verdict"].as_str().unwrap().to_string(),
            format!(
                "{}{}",
                c["reason"].as_str().unwrap_or(""),
                c["hunk"].as_str().unwrap_or("")
            ),
        )
    };
    let (v, stderr, _) = replay(&dir, &args);
    let (got, why) = verdict(&v);
    assert_eq!(got, "matches", "{stderr} {why}");
    assert!(
        why.contains("equal up to the trace's redaction (home folder)"),
        "{why}"
    );
    let none = tempfile::tempdir().unwrap();
    let rules = none.path().join("none.toml");
    std::fs::write(&rules, "version = 1\n").unwrap();
    let (v, _, _) = replay(
        &dir,
        &[&args[..], &["--redactions", rules.to_str().unwrap()]].concat(),
    );
    let (got, why) = verdict(&v);
    assert_eq!(got, "differs", "{why}");
    assert!(
        why.contains("/home/USER/project") && why.contains("/home/user/project"),
        "{why}"
    );
}
