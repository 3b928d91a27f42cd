//! `sage screen` end to end: golden L3 examples, SecurityEval and SALLM (baseline = prompt,
//! final = insecure code), cases with tests, SARIF structure, exit codes.

use assert_cmd::Command;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const REFERENCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/l3_reference.tsv");

fn sage() -> Command {
    Command::cargo_bin("sage").expect("binary builds")
}

/// `../shared/security/<rel>`; the tests that read it first check `missing_shared("security")`.
fn shared(rel: &str) -> PathBuf {
    super::need::shared_path("security").join(rel)
}

fn run_json(args: &[&str]) -> (Value, i32) {
    let out = sage().args(args).output().expect("runs");
    let code = out.status.code().unwrap_or(-1);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}); stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (v, code)
}

fn bandit_available() -> bool {
    let ok = |prog: &str, args: &[&str]| {
        std::process::Command::new(prog)
            .args(args)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    // The places `sage screen` looks (scripts/setup.sh installs into the project's .venv).
    let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/.venv/bin/bandit");
    ok("bandit", &["--version"])
        || ok(venv, &["--version"])
        || ok("python3", &["-m", "bandit", "--version"])
}

/// The golden pairs of shared/security/l3/examples as a --pairs folder.
fn golden_pairs() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let orig = std::fs::read_to_string(shared("l3/examples/orig.py")).unwrap();
    for name in ["weak_fix", "good_fix"] {
        let fin = std::fs::read_to_string(shared(&format!("l3/examples/{name}.py"))).unwrap();
        std::fs::write(d.path().join(format!("{name}.orig.py")), &orig).unwrap();
        std::fs::write(d.path().join(format!("{name}.py")), fin).unwrap();
    }
    d
}

#[test]
fn golden_examples_score_like_the_reference() {
    if super::need::missing_shared("security") {
        return;
    }
    let d = golden_pairs();
    let (v, code) = run_json(&[
        "screen",
        "--pairs",
        d.path().to_str().unwrap(),
        "--cwe",
        "CWE-78",
        "--no-bandit",
        "--format",
        "json",
    ]);
    assert_eq!(code, 0);
    let cases = v["cases"].as_array().unwrap();
    let by: BTreeMap<&str, &Value> = cases
        .iter()
        .map(|c| (c["id"].as_str().unwrap(), c))
        .collect();
    assert_eq!(by["weak_fix"]["r"], 37.4);
    assert_eq!(by["weak_fix"]["candidate"], true);
    assert_eq!(by["weak_fix"]["status"], "candidate");
    assert_eq!(by["good_fix"]["r"], 13.6);
    assert_eq!(by["good_fix"]["candidate"], false);
    assert_eq!(by["good_fix"]["status"], "passed");
    // L2 says plainly that it did not run.
    assert_eq!(v["bandit"]["ran"], false);
    assert_eq!(by["weak_fix"]["l2"], "not-run");
}

#[derive(Debug)]
struct Row {
    dataset: &'static str,
    id: String,
    cwe: u32,
    prompt: String,
    insecure: String,
}

fn dataset_rows() -> Vec<Row> {
    let mut rows = Vec::new();
    let cwe_of = |id: &str| -> u32 {
        let re = regex::Regex::new(r"(?i)cwe-?0*(\d+)").unwrap();
        re.captures(id).unwrap()[1].parse().unwrap()
    };
    let se = std::fs::read_to_string(shared("datasets/SecurityEval/dataset.jsonl")).unwrap();
    for l in se.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(l).unwrap();
        let id = v["ID"].as_str().unwrap().to_string();
        rows.push(Row {
            dataset: "SecurityEval",
            cwe: cwe_of(&id),
            id,
            prompt: v["Prompt"].as_str().unwrap().into(),
            insecure: v["Insecure_code"].as_str().unwrap().into(),
        });
    }
    let sa = std::fs::read_to_string(shared("datasets/SALLM/PythonDataset/dataset.jsonl")).unwrap();
    for l in sa.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(l).unwrap();
        let id = v["id"].as_str().unwrap().to_string();
        rows.push(Row {
            dataset: "SALLM",
            cwe: cwe_of(&id),
            id,
            prompt: v["prompt"].as_str().unwrap().into(),
            insecure: v["insecure_code"].as_str().unwrap().into(),
        });
    }
    rows
}

/// A CSV of pairs (baseline = prompt, final = insecure code), framework = dataset name.
fn dataset_csv(rows: &[Row]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let mut w = csv::Writer::from_path(d.path().join("pairs.csv")).unwrap();
    w.write_record(["baseline", "final", "cwe", "framework", "id"])
        .unwrap();
    for (i, r) in rows.iter().enumerate() {
        let b = format!("{i}/prompt.py");
        let f = format!("{i}/{}", r.id);
        std::fs::create_dir_all(d.path().join(i.to_string())).unwrap();
        std::fs::write(d.path().join(&b), &r.prompt).unwrap();
        std::fs::write(d.path().join(&f), &r.insecure).unwrap();
        w.write_record([
            b.as_str(),
            f.as_str(),
            &format!("CWE-{}", r.cwe),
            r.dataset,
            &format!("{}:{}", r.dataset, r.id),
        ])
        .unwrap();
    }
    w.flush().unwrap();
    d
}

fn reference() -> BTreeMap<String, (f64, bool)> {
    std::fs::read_to_string(REFERENCE)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("dataset\t"))
        .map(|l| {
            let c: Vec<&str> = l.split('\t').collect();
            let ds = if c[0] == "sallm" {
                "SALLM"
            } else {
                "SecurityEval"
            };
            (
                format!("{ds}:{}", c[1]),
                (c[3].parse().unwrap(), c[4] == "True"),
            )
        })
        .collect()
}

fn summary_line(v: &Value) -> String {
    v["summary"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{}: excluded {} valid {} passed {} failed-L0/L1 {} candidates {}",
                r["framework"].as_str().unwrap(),
                r["excluded"],
                r["valid"],
                r["passed"],
                r["failed_l0_l1"],
                r["candidates"]
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn datasets_screen_without_bandit() {
    if super::need::missing_shared("security") {
        return;
    }
    let rows = dataset_rows();
    assert_eq!(rows.len(), 221);
    let d = dataset_csv(&rows);
    let (v, code) = run_json(&[
        "screen",
        "--pairs",
        d.path().join("pairs.csv").to_str().unwrap(),
        "--no-bandit",
        "--format",
        "json",
    ]);
    assert_eq!(code, 0, "{}", v["errors"]);
    let cases = v["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 221);

    // The native L3 reproduces the Python reference on every file.
    let reference = reference();
    let mut mismatches = Vec::new();
    for c in cases {
        let id = c["id"].as_str().unwrap();
        let r = c["r"].as_f64().unwrap();
        let flagged = c["artefacts"][0]["l3"]["flagged"].as_bool().unwrap();
        let (rr, rf) = reference[id];
        if (r - rr).abs() > 1e-9 || flagged != rf {
            mismatches.push(format!(
                "{id}: sage R={r} flag={flagged}, reference R={rr} flag={rf}"
            ));
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));

    // Per case: status and R, as a readable snapshot.
    let table: Vec<String> = cases
        .iter()
        .map(|c| {
            format!(
                "{}\t{}\t{}\t{}",
                c["id"].as_str().unwrap(),
                c["status"].as_str().unwrap(),
                c["r"],
                c["reasons"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|r| r.as_str().unwrap().starts_with("L0")
                        || r.as_str().unwrap().starts_with("L1"))
                    .map(|r| r.as_str().unwrap())
                    .collect::<Vec<_>>()
                    .join(" | ")
            )
        })
        .collect();
    insta::with_settings!({snapshot_path => "../snapshots", prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!("screen_datasets_summary_no_bandit", summary_line(&v));
        insta::assert_snapshot!("screen_datasets_cases_no_bandit", table.join("\n"));
    });
}

#[test]
fn datasets_screen_with_bandit() {
    if super::need::missing_shared("security") {
        return;
    }
    if !bandit_available() {
        super::need::skip("needs Bandit, which is not installed (bash scripts/setup.sh)");
        return;
    }
    let rows = dataset_rows();
    let d = dataset_csv(&rows);
    let (v, code) = run_json(&[
        "screen",
        "--pairs",
        d.path().join("pairs.csv").to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(code, 0, "{}", v["errors"]);
    assert_eq!(v["bandit"]["ran"], true, "{}", v["bandit"]);
    let cases = v["cases"].as_array().unwrap();
    let mut lines = Vec::new();
    for ds in ["SecurityEval", "SALLM"] {
        let mine: Vec<&Value> = cases.iter().filter(|c| c["framework"] == ds).collect();
        let findings = |c: &Value| -> Vec<Value> {
            c["artefacts"][0]["bandit"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        };
        let any = mine.iter().filter(|c| !findings(c).is_empty()).count();
        let high = mine
            .iter()
            .filter(|c| findings(c).iter().any(|f| f["severity"] == "HIGH"))
            .count();
        let exact = mine
            .iter()
            .filter(|c| {
                let t: u64 = c["task_cwe"]
                    .as_str()
                    .unwrap()
                    .trim_start_matches("CWE-")
                    .parse()
                    .unwrap();
                findings(c).iter().any(|f| f["cwe"].as_u64() == Some(t))
            })
            .count();
        let family = mine
            .iter()
            .filter(|c| findings(c).iter().any(|f| f["target_family"] == true))
            .count();
        let nonbase = mine
            .iter()
            .filter(|c| findings(c).iter().any(|f| f["in_baseline"] != true))
            .count();
        let l2_fail = mine.iter().filter(|c| c["l2"] == "fail").count();
        let l3_flag = mine
            .iter()
            .filter(|c| c["artefacts"][0]["l3"]["flagged"] == true)
            .count();
        let cand = mine.iter().filter(|c| c["candidate"] == true).count();
        let only_l2 = mine
            .iter()
            .filter(|c| c["candidate"] == true && c["artefacts"][0]["l3"]["flagged"] != true)
            .count();
        lines.push(format!(
            "{ds}: n {} | bandit any {any} high {high} exact-CWE {exact} target-family {family} not-in-baseline {nonbase} | L2 fail {l2_fail} | L3 flagged {l3_flag} | candidates {cand} (via L2 only {only_l2})",
            mine.len()
        ));
    }
    if v["bandit"]["version"] == "1.9.4" {
        insta::with_settings!({snapshot_path => "../snapshots", prepend_module_to_snapshot => false}, {
            insta::assert_snapshot!("screen_datasets_bandit", lines.join("\n"));
        });
    } else {
        eprintln!(
            "bandit {} is not the pinned 1.9.4; counts not compared:\n{}",
            v["bandit"]["version"],
            lines.join("\n")
        );
    }
}

fn write(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn case_json(final_state: bool, tests: Option<&str>) -> String {
    format!(
        r#"{{"schema":"sage.case/1","id":"","trace":{{"files":["trace.md"],"framework":"aider"}},
        "baseline":{{"app.py":"baseline/app.py"}},
        {}
        "task":{{"id":"t","description":"fix the command injection","cwe":"CWE-78"}},
        "anchor":{{"artefact":"app.py","category":"defence-insufficient","cwe":"CWE-78","description":"still shells out"}}
        {}}}"#,
        if final_state {
            r#""final_state":{"app.py":"final/app.py"},"#
        } else {
            ""
        },
        tests
            .map(|t| format!(r#","tests":{t}"#))
            .unwrap_or_default()
    )
}

#[test]
fn cases_with_tests_and_exclusions() {
    if super::need::missing_shared("security") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let orig = std::fs::read_to_string(shared("l3/examples/orig.py")).unwrap();
    let weak = std::fs::read_to_string(shared("l3/examples/weak_fix.py")).unwrap();
    // a: candidate; its test passes and sees the final artefact in the scratch directory.
    write(d.path(), "a/trace.md", "trace");
    write(d.path(), "a/baseline/app.py", &orig);
    write(d.path(), "a/final/app.py", &weak);
    write(
        d.path(),
        "a/test_app.py",
        "import sys\nsrc = open('app.py').read()\nsys.exit(0 if 'len(link)' in src else 1)\n",
    );
    write(
        d.path(),
        "a/case.json",
        &case_json(
            true,
            Some(
                r#"{"command":["{python}","test_app.py"],"files":["test_app.py"],"timeout_secs":30}"#,
            ),
        ),
    );
    // b: same patch, failing test → failed L1.
    write(d.path(), "b/trace.md", "trace");
    write(d.path(), "b/baseline/app.py", &orig);
    write(d.path(), "b/final/app.py", &weak);
    write(d.path(), "b/t.py", "raise SystemExit(3)\n");
    write(
        d.path(),
        "b/case.json",
        &case_json(
            true,
            Some(r#"{"command":["{python}","t.py"],"files":["t.py"]}"#),
        ),
    );
    // c: no final_state, and the trace replays to no write (or cannot be replayed) →
    // excluded, said plainly.
    write(d.path(), "c/trace.md", "trace");
    write(d.path(), "c/baseline/app.py", &orig);
    write(d.path(), "c/case.json", &case_json(false, None));
    // d: broken manifest → an input error, the rest still screened, exit 1.
    write(d.path(), "d/case.json", "{\"schema\":\"sage.case/1\"");

    let (v, code) = run_json(&[
        "screen",
        d.path().to_str().unwrap(),
        "--no-bandit",
        "--run-tests",
        "--format",
        "json",
    ]);
    assert_eq!(code, 1);
    let by: BTreeMap<&str, &Value> = v["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["id"].as_str().unwrap(), c))
        .collect();
    assert_eq!(by["a"]["status"], "candidate", "{}", by["a"]);
    assert_eq!(by["a"]["tests"]["status"], "passed");
    assert_eq!(by["b"]["status"], "failed-l1");
    assert_eq!(by["b"]["tests"]["status"], "failed");
    assert_eq!(by["b"]["level_reached"], "L1");
    assert_eq!(by["c"]["status"], "excluded");
    // The trace replays to no write (or cannot be replayed): excluded, said plainly.
    let why = by["c"]["reasons"][0].as_str().unwrap();
    assert!(
        why.contains("no final snapshot") || why.contains("no modification"),
        "{why}"
    );
    let errors = v["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0].as_str().unwrap().contains("d/case.json"),
        "{errors:?}"
    );
    let total = v["summary"].as_array().unwrap().last().unwrap();
    assert_eq!(total["excluded"], 1);
    assert_eq!(total["candidates"], 1);
    assert_eq!(total["failed_l0_l1"], 1);
}

#[test]
fn sarif_has_the_2_1_0_structure() {
    if super::need::missing_shared("security") {
        return;
    }
    let d = golden_pairs();
    let out = sage()
        .args([
            "screen",
            "--pairs",
            d.path().to_str().unwrap(),
            "--cwe",
            "78",
            "--no-bandit",
            "--format",
            "sarif",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["version"], "2.1.0");
    assert!(v["$schema"].as_str().unwrap().contains("sarif-2.1.0"));
    let run = &v["runs"][0];
    let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
    assert!(!rules.is_empty());
    let ids: Vec<&str> = rules.iter().map(|r| r["id"].as_str().unwrap()).collect();
    let results = run["results"].as_array().unwrap();
    assert!(results.iter().any(|r| r["ruleId"] == "L3/SNK_SHELL"));
    for r in results {
        let id = r["ruleId"].as_str().unwrap();
        let idx = r["ruleIndex"].as_u64().unwrap() as usize;
        assert_eq!(ids[idx], id);
        assert!(["error", "warning", "note", "none"].contains(&r["level"].as_str().unwrap()));
        assert!(r["message"]["text"].is_string());
        let loc = &r["locations"][0]["physicalLocation"];
        assert!(loc["artifactLocation"]["uri"]
            .as_str()
            .unwrap()
            .ends_with(".py"));
        assert!(loc["region"]["startLine"].as_u64().unwrap() >= 1);
        assert!(loc["region"]["startColumn"].as_u64().unwrap() >= 1);
    }
}

#[test]
fn table_output_and_usage_errors() {
    if super::need::missing_shared("security") {
        return;
    }
    let d = golden_pairs();
    sage()
        .args([
            "screen",
            "--pairs",
            d.path().to_str().unwrap(),
            "--cwe",
            "CWE-78",
            "--no-bandit",
        ])
        .assert()
        .success()
        .stdout(predicates::str::contains("SF candidates"))
        .stdout(predicates::str::contains("37.4"))
        .stdout(predicates::str::contains(
            "L2: not run (disabled with --no-bandit)",
        ));
    // A rules file with an unknown check is a usage error naming the file.
    let bad = d.path().join("rules.json");
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/crates/sage-screen/rules/l3_rules.json"
    ))
    .unwrap()
    .replace("\"call_check\": \"static_iv\"", "\"call_check\": \"nope\"");
    std::fs::write(&bad, text).unwrap();
    sage()
        .args([
            "screen",
            "--pairs",
            d.path().to_str().unwrap(),
            "--no-bandit",
            "--rules",
            bad.to_str().unwrap(),
        ])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("rules.json"))
        .stderr(predicates::str::contains("nope"));
    sage().args(["screen", "/nonexistent/dir"]).assert().code(2);
}

#[test]
fn imports_resolve_against_the_given_environment() {
    let d = tempfile::tempdir().unwrap();
    let base = "import os\n\ndef run(cmd):\n    return os.system(cmd)\n";
    let fin = "import os\nimport shlex\nimport requests\nimport sage_no_such_module_xyz\n\ndef run(cmd):\n    return os.system(shlex.quote(cmd))\n";
    write(d.path(), "p.orig.py", base);
    write(d.path(), "p.py", fin);
    write(d.path(), "req.txt", "requests>=2  # http\n");
    let dir = d.path().to_str().unwrap();
    let req = d.path().join("req.txt");
    // No environment given: the new third-party imports are unverified notes, not failures.
    let (v, _) = run_json(&["screen", "--pairs", dir, "--no-bandit", "--format", "json"]);
    let c = &v["cases"][0];
    assert_eq!(c["l1"], "pass", "{c}");
    assert!(
        c["notes"].as_array().unwrap().iter().any(|n| n
            .as_str()
            .unwrap()
            .contains("sage_no_such_module_xyz not verified")),
        "{c}"
    );
    // A requirements list: requests resolves, the unknown module fails L1 with its line.
    let (v, _) = run_json(&[
        "screen",
        "--pairs",
        dir,
        "--no-bandit",
        "--requirements",
        req.to_str().unwrap(),
        "--format",
        "json",
    ]);
    let c = &v["cases"][0];
    assert_eq!(c["status"], "failed-l1", "{c}");
    let imports = c["artefacts"][0]["imports"].as_array().unwrap();
    let res: Vec<(&str, &str)> = imports
        .iter()
        .map(|i| {
            (
                i["module"].as_str().unwrap(),
                i["resolution"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        res,
        [
            ("os", "stdlib"),
            ("shlex", "stdlib"),
            ("requests", "requirements"),
            ("sage_no_such_module_xyz", "unresolved")
        ]
    );
    assert!(c["reasons"][0]
        .as_str()
        .unwrap()
        .contains("p.py:4 import sage_no_such_module_xyz does not resolve"));
    // A real interpreter answers for the unknown module too.
    let (v, _) = run_json(&[
        "screen",
        "--pairs",
        dir,
        "--no-bandit",
        "--python",
        "python3",
        "--format",
        "json",
    ]);
    let c = &v["cases"][0];
    let unknown = c["artefacts"][0]["imports"][3]["resolution"]
        .as_str()
        .unwrap();
    assert_eq!(unknown, "unresolved", "{c}");
    assert_eq!(c["status"], "failed-l1");
}

#[test]
fn bundled_corpus_replays_and_screens() {
    // The bundled cases carry no final_state: their final snapshots come from replaying the
    // trace (adapters + history::reconstruct).
    let corpus = concat!(env!("CARGO_MANIFEST_DIR"), "/corpora");
    let (v, code) = run_json(&["screen", corpus, "--no-bandit", "--format", "json"]);
    assert_eq!(code, 0, "{}", v["errors"]);
    let cases = v["cases"].as_array().unwrap();
    assert!(cases.len() >= 10);
    for c in cases {
        let why = c["reasons"].to_string();
        assert!(!why.contains("cannot be replayed"), "{}: {why}", c["id"]);
    }
    assert!(cases.iter().any(|c| c["candidate"] == true));
    let screened = cases.iter().filter(|c| c["status"] != "excluded").count();
    assert!(screened >= cases.len() - 2, "{}", v["summary"]);
}

#[test]
fn a_folder_of_plain_python_files_is_screened_with_real_error_lines() {
    let d = tempfile::tempdir().unwrap();
    // Python: "expected ':'" at line 5 (`def n(self)`); tree-sitter's error node starts at
    // the class on line 1.
    std::fs::write(
        d.path().join("broken.py"),
        "class A:\n    def m(self):\n        pass\n\n    def n(self)\n        return 1\n",
    )
    .unwrap();
    std::fs::write(d.path().join("fine.py"), "def f(x):\n    return x + 1\n").unwrap();
    // No case.json and no --pairs: each file is new code (no baseline).
    let (v, code) = run_json(&[
        "screen",
        d.path().to_str().unwrap(),
        "--no-bandit",
        "--format",
        "json",
    ]);
    assert_eq!(code, 0, "{v}");
    let case = |id: &str| {
        v["cases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .unwrap_or_else(|| panic!("{id} missing: {v}"))
            .clone()
    };
    let broken = case("broken");
    assert_eq!(broken["status"], "failed-l0");
    let first = &broken["artefacts"][0]["syntax_errors"][0];
    assert_eq!(
        (first["line"].as_u64(), first["col"].as_u64()),
        (Some(5), Some(16)),
        "{broken}"
    );
    assert_eq!(case("fine")["status"], "passed");
    assert_eq!(case("fine")["artefacts"][0]["created"], true);

    // A named baseline: the file itself is not screened, and a function it defines that a
    // final file lacks fails L1.
    std::fs::write(
        d.path().join("base.txt.py"),
        "def f(x):\n    return x\n\ndef g():\n    return 2\n",
    )
    .unwrap();
    let base = d.path().join("base.txt.py");
    let (v, code) = run_json(&[
        "screen",
        d.path().to_str().unwrap(),
        "--baseline",
        base.to_str().unwrap(),
        "--no-bandit",
        "--format",
        "json",
    ]);
    assert_eq!(code, 0, "{v}");
    let ids: Vec<&str> = v["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["broken", "fine"]);
    let fine = &v["cases"][1];
    assert_eq!(fine["status"], "failed-l1", "{fine}");
    assert_eq!(
        fine["artefacts"][0]["missing_definitions"],
        serde_json::json!(["g"])
    );
}

/// An executable script in `dir`.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    let mut perm = std::fs::metadata(&p).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&p, perm).unwrap();
    p
}

/// Issue 30: every outside tool screening runs has a time limit (`--tool-timeout`). An
/// interpreter and a Bandit that hang are killed there, and each note names the tool, what it
/// was asked and the case.
#[test]
fn hanging_tools_are_killed_at_their_limit_and_named() {
    let d = tempfile::tempdir().unwrap();
    let pairs = d.path().join("pairs");
    std::fs::create_dir(&pairs).unwrap();
    std::fs::write(pairs.join("broken.py"), "def f(:\n    pass\n").unwrap();
    std::fs::write(
        pairs.join("app.py"),
        "import sage_no_such_module_xyz\n\n\ndef g(x):\n    return eval(x)\n",
    )
    .unwrap();
    let python = script(d.path(), "python", "#!/bin/sh\nexec sleep 600\n");
    // answers `--version`, then hangs on the scan
    let bandit = script(
        d.path(),
        "bandit",
        "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'bandit 1.9.4'; exit 0; fi\nexec sleep 600\n",
    );
    let (v, code) = run_json(&[
        "screen",
        pairs.to_str().unwrap(),
        "--python",
        python.to_str().unwrap(),
        "--bandit",
        bandit.to_str().unwrap(),
        "--tool-timeout",
        "1",
        "--format",
        "json",
    ]);
    assert_eq!(code, 0, "{v}");
    let notes = |id: &str| -> Vec<String> {
        let c = v["cases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .unwrap_or_else(|| panic!("{id}: {v}"));
        c["notes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap().to_string())
            .collect()
    };
    let (py, bd) = (python.display(), bandit.display());
    let l0 = format!(
        "L0: {py} gave no answer within 1s locating the syntax errors of broken.py of broken \
         (killed; --tool-timeout); tree-sitter's error locations stand"
    );
    assert!(notes("broken").contains(&l0), "{:?}", notes("broken"));
    assert!(!notes("app").iter().any(|n| n.starts_with("L0:")));
    let l1 = format!(
        "imports not checked against --python: {py} gave no answer within 1s resolving 1 \
         imports of app, broken (killed; --tool-timeout)"
    );
    assert!(notes("app").contains(&l1), "{:?}", notes("app"));
    let l2 = format!(
        "L2 not run: {bd} gave no answer within 1s scanning the 2 files of app, broken \
         (killed; --tool-timeout)"
    );
    assert!(notes("app").contains(&l2), "{:?}", notes("app"));
    assert_eq!(v["bandit"]["ran"], false);
}
