//! `sage reliability` through the binary, on result sets in the `sage.results/1` format (built
//! here as JSON so a change of the format shows up as a failing read) and annotation CSVs.

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

fn sage() -> Command {
    Command::cargo_bin("sage").expect("binary")
}

/// One case result as `sage localize` writes it.
fn case_result(
    i: usize,
    judge: &str,
    run: u32,
    origin: Option<(u64, &str)>,
    scores: [u8; 4],
) -> Value {
    let agent = i.is_multiple_of(3);
    let framework = if i.is_multiple_of(2) { "ag2" } else { "aider" };
    let condition = if i < 20 { "single-write" } else { "final-only" };
    let dim = |s: u8| json!({"score": s});
    let scored = json!({
        "status": "scored", "turn": origin.map_or(1, |o| o.0),
        "judge": {"name": judge, "model": "-", "rubric_version": "1"}, "run": run,
        "applicable": true, "security_opportunity": true,
        "TR": dim(scores[0]), "DI": dim(scores[1]), "VR": dim(scores[2]), "SA": dim(scores[3]),
        "prompt_hash": "0", "attempts": 1
    });
    let outcome = match origin {
        Some((t, ty)) => json!({"outcome": "localized", "origin_turn": t, "origin_type": ty}),
        None => json!({"outcome": "undetermined", "reason": "no-linked-candidate"}),
    };
    let mut origin_v = outcome;
    origin_v["candidates"] = json!({"inadequate_defence_selected": null,
        "unaddressed_requirement": null, "defect_in_code_change": null});
    origin_v["links"] = json!([]);
    origin_v["missed_opportunities"] = json!([]);
    json!({
        "case_id": format!("case-{i:02}"), "case_dir": format!("cases/case-{i:02}"),
        "task_id": format!("task-{}", i % 6),
        "metadata": {"framework": framework, "base_model": if i.is_multiple_of(4) { "model-a" } else { "model-b" }},
        "anchor": {"artefact": "app.py", "category": if agent { "vulnerability-introduced" } else { "defence-absent" },
                   "cwe": "CWE-79", "description": "d"},
        "framework": framework,
        "counts": {"turns": 5, "administrative": 0, "tool_calls": 0, "tool_results": 0, "writes": 1, "dropped": 0},
        "turns": [],
        "reconstruction_condition": condition,
        "provenance": {"provenance": if agent { "agent-introduced" } else { "inherited" },
                       "introducing_write": if agent { json!({"write": 1, "turn": 4}) } else { Value::Null },
                       "presence": [], "matching": "python-tokens", "reason": "r"},
        "judge": {"name": judge, "model": "-", "rubric_version": "1"},
        "run": run,
        "scores": [scored],
        "origin": origin_v,
        "checks": []
    })
}

/// A result set of one judge and run over 24 cases; `shift` moves some origin turns.
fn result_set(judge: &str, run: u32, shift: impl Fn(usize) -> u64) -> Value {
    let results: Vec<Value> = (0..24)
        .map(|i| {
            let origin = (i % 11 != 5).then(|| (3 + shift(i), "unaddressed-requirement"));
            case_result(i, judge, run, origin, [(i % 4) as u8, 1, 2, (i % 3) as u8])
        })
        .collect();
    json!({"version": "sage.results/1", "sage_version": "0.1.0",
           "judges": [{"name": judge, "model": "-", "rubric_version": "1"}], "runs": 1,
           "results": results, "skipped": [], "problems": [], "summaries": []})
}

fn write_json(path: &Path, v: &Value) {
    std::fs::write(path, serde_json::to_string_pretty(v).expect("json")).expect("write");
}

/// Two runs of one judge, a second judge and two annotators' labels, written into `dir`: the
/// result sets, then the annotation CSV (also the input of the golden report, `golden.rs`).
pub(crate) fn two_runs_two_annotators(dir: &Path) -> ([PathBuf; 3], PathBuf) {
    let run1 = dir.join("run1.json");
    let run2 = dir.join("run2.json");
    let other = dir.join("other.json");
    let set = result_set("llm-a", 0, |_| 0);
    write_json(&run1, &set);
    // Separate invocation, same judge and run index: counted as run 1. It differs from the
    // first in case 0 (one turn later); identical sets are refused (test below).
    write_json(&run2, &result_set("llm-a", 0, |i| u64::from(i == 0)));
    // Another judge moves the origin by one turn in every fourth case.
    write_json(&other, &result_set("other", 0, |i| u64::from(i % 4 == 0)));
    let results = set["results"].as_array().expect("results");

    // Annotations: R1 agrees with SAGE except on the first case; R2 labels half the cases.
    let mut csv = String::from("case_id,annotator,provenance,introducing_write\n");
    for (i, r) in results.iter().enumerate() {
        let id = r["case_id"].as_str().expect("id");
        let prov = r["provenance"]["provenance"].as_str().expect("prov");
        let iw = match r["provenance"]["introducing_write"]["turn"].as_u64() {
            Some(t) => t.to_string(),
            None => "none".into(),
        };
        let p1 = if i == 0 { "cannot-determine" } else { prov };
        csv.push_str(&format!("{id},R1,{p1},{iw}\n"));
        if i % 2 == 0 {
            csv.push_str(&format!("{id},R2,{prov},cannot-determine\n"));
        }
    }
    let ann = dir.join("ann.csv");
    std::fs::write(&ann, csv).expect("write");
    ([run1, run2, other], ann)
}

#[test]
fn report_from_two_runs_and_two_annotators() {
    let dir = tempfile::tempdir().expect("tmp");
    let (sets, ann) = two_runs_two_annotators(dir.path());
    let set = result_set("llm-a", 0, |_| 0);
    let results = set["results"].as_array().expect("results");
    let out = dir.path().join("report");
    sage()
        .arg("reliability")
        .args(&sets)
        .arg("--annotations")
        .arg(&ann)
        .arg("--out")
        .arg(&out)
        .args(["--partitions", "50"])
        .assert()
        .success()
        .stdout(predicate::str::contains("2 judge(s), 2 annotator(s)"));

    for f in [
        "reliability.md",
        "reliability.json",
        "figure5.svg",
        "figure6.svg",
    ] {
        assert!(out.join(f).is_file(), "{f}");
    }
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("reliability.json")).expect("r"))
            .expect("json");
    assert_eq!(r["version"], "sage.reliability/1");
    assert_eq!(r["cases"].as_u64(), Some(results.len() as u64));
    // The second set repeats run 0 of the same judge: counted as run 1.
    assert_eq!(r["runs_of_primary"], serde_json::json!([0, 1]));
    // 22 jointly localized cases (5 and 16 are undetermined); case 0 is a turn apart.
    let rep = &r["consistency"]["repeated"];
    assert_eq!(rep["joint_localization"]["count"], 22);
    assert_eq!(rep["exact_turn_agreement"]["count"], 21);
    // SAGE vs R1 on all cases: one disagreement on provenance.
    let all_r1 = r["human"]
        .as_array()
        .expect("human")
        .iter()
        .find(|h| h["comparison"] == "SAGE vs R1" && h["cases"] == "all")
        .expect("SAGE vs R1");
    let n = results.len() as u64;
    assert_eq!(
        all_r1["provenance"]["agreement"]["count"].as_u64(),
        Some(n - 1)
    );
    assert_eq!(
        all_r1["introducing_write"]["agreement"]["count"].as_u64(),
        Some(n)
    );
    assert!(r["resampling"]["provenance"]["partitions"]["median"].is_number());
    let md = std::fs::read_to_string(out.join("reliability.md")).expect("md");
    assert!(md.contains("Table 6(a)") && md.contains("Table 6(c)") && md.contains("By framework"));
    assert!(md.contains('∗'), "small groups are marked");
    // Cross judge: 22 jointly localized cases, 5 of them one turn apart.
    let cross = &r["consistency"]["cross_judge"];
    assert_eq!(cross["joint_localization"]["count"], 22);
    assert_eq!(cross["exact_turn_agreement"]["count"], 17);
    assert_eq!(cross["within_one_turn"]["count"], 22);
    assert_eq!(cross["type_agreement"]["count"], 22);
}

#[test]
fn unreadable_inputs_are_named_and_the_rest_still_reported() {
    let dir = tempfile::tempdir().expect("tmp");
    let run1 = dir.path().join("run1.json");
    write_json(&run1, &result_set("lexicon", 0, |_| 0));
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"not\": \"results\"}").expect("write");
    let ann = dir.path().join("ann.csv");
    std::fs::write(
        &ann,
        "case_id,annotator,provenance,introducing_write\nx,R1,maybe,none\nnowhere,R1,inherited,none\n",
    )
    .expect("write");
    let out = dir.path().join("report");
    sage()
        .arg("reliability")
        .args([&run1, &bad])
        .arg("--annotations")
        .arg(&ann)
        .arg("--out")
        .arg(&out)
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("bad.json")
                .and(predicate::str::contains("ann.csv line 2"))
                // a readable label of a case the results lack is counted, not dropped silently
                .and(predicate::str::contains(
                    "1 case(s) annotated by R1 are not in the results",
                )),
        );
    assert!(out.join("reliability.md").is_file());

    sage()
        .arg("reliability")
        .arg(&bad)
        .arg("--out")
        .arg(&out)
        .assert()
        .code(2);
}

#[test]
fn identical_sets_are_not_repeated_runs_and_the_lexicon_is_deterministic() {
    let dir = tempfile::tempdir().expect("tmp");
    let run1 = dir.path().join("run1.json");
    let copy = dir.path().join("copy.json");
    write_json(&run1, &result_set("lexicon", 0, |_| 0));
    std::fs::copy(&run1, &copy).expect("copy");
    let out = dir.path().join("report");
    // The same results twice: agreement 1 by construction, refused before anything is written.
    sage()
        .arg("reliability")
        .args([&run1, &copy])
        .arg("--out")
        .arg(&out)
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("identical results")
                .and(predicate::str::contains("copy.json")),
        );
    assert!(!out.exists());
    // Two lexicon runs (here made to differ, as no real lexicon run would): a warning.
    let run2 = dir.path().join("run2.json");
    write_json(&run2, &result_set("lexicon", 1, |i| u64::from(i == 0)));
    sage()
        .arg("reliability")
        .args([&run1, &run2])
        .arg("--out")
        .arg(&out)
        .args(["--partitions", "10"])
        .assert()
        .code(0)
        .stderr(predicate::str::contains(
            "judge lexicon:- (rubric 1) is deterministic",
        ));
}
