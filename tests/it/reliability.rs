//! `sage reliability` through the binary: localize the bundled corpus, then build the report.

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;
use std::path::Path;

const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/corpora");

fn sage() -> Command {
    Command::cargo_bin("sage").expect("binary")
}

/// Runs `sage localize` on the bundled corpus into `out`.
fn localize(out: &Path) -> Value {
    sage()
        .args(["localize", CORPUS, "--no-write", "--output"])
        .arg(out)
        .assert()
        .code(predicate::in_iter([0, 1]));
    serde_json::from_str(&std::fs::read_to_string(out).expect("results")).expect("json")
}

#[test]
fn report_from_two_runs_and_two_annotators() {
    let dir = tempfile::tempdir().expect("tmp");
    let run1 = dir.path().join("run1.json");
    let run2 = dir.path().join("run2.json");
    let set = localize(&run1);
    std::fs::copy(&run1, &run2).expect("copy");
    let results = set["results"].as_array().expect("results");
    assert!(!results.is_empty());

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
    let ann = dir.path().join("ann.csv");
    std::fs::write(&ann, csv).expect("write");
    let out = dir.path().join("report");
    sage()
        .arg("reliability")
        .args([&run1, &run2])
        .arg("--annotations")
        .arg(&ann)
        .arg("--out")
        .arg(&out)
        .args(["--partitions", "50"])
        .assert()
        .success()
        .stdout(predicate::str::contains("2 annotator(s)"));

    for f in ["reliability.md", "reliability.json", "figure5.svg", "figure6.svg"] {
        assert!(out.join(f).is_file(), "{f}");
    }
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("reliability.json")).expect("r"))
            .expect("json");
    assert_eq!(r["version"], "sage.reliability/1");
    assert_eq!(r["cases"].as_u64(), Some(results.len() as u64));
    // The second set repeats run 0 of the same judge: counted as run 1.
    assert_eq!(r["runs_of_primary"], serde_json::json!([0, 1]));
    // Identical runs: perfect consistency among jointly localized cases.
    let rep = &r["consistency"]["repeated"];
    assert_eq!(rep["exact_turn_agreement"]["count"], rep["joint_localization"]["count"]);
    // SAGE vs R1 on all cases: one disagreement on provenance.
    let all_r1 = r["human"]
        .as_array()
        .expect("human")
        .iter()
        .find(|h| h["comparison"] == "SAGE vs R1" && h["cases"] == "all")
        .expect("SAGE vs R1");
    let n = results.len() as u64;
    assert_eq!(all_r1["provenance"]["agreement"]["count"].as_u64(), Some(n - 1));
    assert_eq!(all_r1["introducing_write"]["agreement"]["count"].as_u64(), Some(n));
    assert!(r["resampling"]["provenance"]["partitions"]["median"].is_number());
    let md = std::fs::read_to_string(out.join("reliability.md")).expect("md");
    assert!(md.contains("Table 6(a)") && md.contains("Table 6(c)") && md.contains("By framework"));
    assert!(md.contains('∗'), "small groups are marked");
}

#[test]
fn unreadable_inputs_are_named_and_the_rest_still_reported() {
    let dir = tempfile::tempdir().expect("tmp");
    let run1 = dir.path().join("run1.json");
    localize(&run1);
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"not\": \"results\"}").expect("write");
    let ann = dir.path().join("ann.csv");
    std::fs::write(
        &ann,
        "case_id,annotator,provenance,introducing_write\nx,R1,maybe,none\n",
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
                .and(predicate::str::contains("ann.csv line 2")),
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
