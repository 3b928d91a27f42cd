//! The bundled corpus (`corpora/`): every case's `expected` block, checked against what the
//! real binary reports under the default lexicon judge, plus the coverage the corpus promises
//! (corpora/README.md). Constructed cases state every output; the real SusVibes cases
//! (`corpora/susvibes/`) state only what follows from the trace without a judge (provenance,
//! introducing write) and must replay to exactly their final file.

use assert_cmd::Command;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("corpora")
}

/// Every case manifest of the corpus (searched recursively), by case id.
fn manifests() -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for dir in sage_trace::case::discover(&corpus_dir()).unwrap() {
        let path = dir.join("case.json");
        let m: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let id = m["id"].as_str().expect("case id").to_string();
        out.insert(id, m);
    }
    out
}

fn is_real(m: &Value) -> bool {
    m["metadata"]["trace_source"] == "real"
}

/// Writes two real traces make to a file outside their case, for which the case gives no
/// baseline: recorded in the results, never problems of the case (corpora/README.md). The
/// wagtail trace shows its file whole before it edits it, so the one store of file knowledge
/// replays its write; the aiohttp trace shows none of its file's lines before its first edit,
/// an insert, which needs only its position (the file exists: the editor's snippet after it
/// shows it), and the snippets after each edit tell the lines the three later edits need.
/// (case id prefix, artefact, failed writes)
const OUTSIDE_THE_CASE: &[(&str, &str, usize)] = &[
    (
        "claude-4-sonnet__wagtail__wagtail_d9a41e7f",
        "wagtail/admin/rich_text/converters/html_ruleset.py",
        0,
    ),
    (
        "gemini-2.5-pro__aio-libs__aiohttp-session",
        "tests/test_session_dict.py",
        0,
    ),
];

/// Run `sage localize corpora/ --format json --output FILE` and return the result set.
fn localize_corpus() -> Value {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("results.json");
    Command::cargo_bin("sage")
        .unwrap()
        .arg("localize")
        .arg(corpus_dir())
        .args(["--format", "json", "--output"])
        .arg(&out)
        .arg("--out-dir")
        .arg(tmp.path().join("sage-results"))
        .assert()
        .success();
    serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap()
}

fn turns(v: &Value) -> Vec<u64> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default()
}

/// Compare one result with its case's expectations; every mismatch is one line.
fn mismatches(id: &str, exp: &Value, r: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let mut check = |what: &str, want: &Value, got: &Value| {
        if want != got {
            out.push(format!("{id}: {what}: expected {want}, got {got}"));
        }
    };
    check(
        "provenance",
        &exp["provenance"],
        &r["provenance"]["provenance"],
    );
    let iw = r["provenance"]["introducing_write"]
        .get("turn")
        .cloned()
        .unwrap_or(Value::Null);
    check(
        "introducing write turn",
        &exp["introducing_write_turn"],
        &iw,
    );
    check(
        "reconstruction condition",
        &exp["reconstruction_condition"],
        &r["reconstruction_condition"],
    );
    let o = &r["origin"];
    check("outcome", &exp["outcome"], &o["outcome"]);
    let or_null = |v: &Value| if v.is_null() { Value::Null } else { v.clone() };
    check(
        "origin turn",
        &exp["origin_turn"],
        &or_null(&o["origin_turn"]),
    );
    check(
        "origin type",
        &exp["origin_type"],
        &or_null(&o["origin_type"]),
    );
    check(
        "undetermined reason",
        &exp["undetermined_reason"],
        &or_null(&o["reason"]),
    );
    let missed: Vec<u64> = o["missed_opportunities"]
        .as_array()
        .map(|a| a.iter().filter_map(|m| m["turn"].as_u64()).collect())
        .unwrap_or_default();
    let want = turns(&exp["missed_opportunities"]);
    if missed != want {
        out.push(format!(
            "{id}: missed opportunities: expected {want:?}, got {missed:?}"
        ));
    }
    for c in r["checks"].as_array().into_iter().flatten() {
        if c["passed"] != Value::Bool(true) {
            out.push(format!("{id}: automatic check failed: {c}"));
        }
    }
    if let Some(e) = r.get("expected").filter(|e| !e.is_null()) {
        if e["matched"] != Value::Bool(true) {
            out.push(format!("{id}: sage reports its expectation unmet: {e}"));
        }
    }
    out
}

/// A real case: the keys its `expected` block states, agent-introduced provenance at a real
/// write turn, every automatic check passed, and the replay giving exactly its final file.
fn real_mismatches(id: &str, exp: &Value, r: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if r["provenance"]["provenance"] != exp["provenance"] {
        out.push(format!(
            "{id}: provenance {}",
            r["provenance"]["provenance"]
        ));
    }
    let iw = &r["provenance"]["introducing_write"];
    if iw["turn"] != exp["introducing_write_turn"] {
        out.push(format!(
            "{id}: introducing write turn: expected {}, got {}",
            exp["introducing_write_turn"], iw["turn"]
        ));
    }
    let turn = iw["turn"].as_u64().unwrap_or(0);
    let writes_there = r["turns"]
        .as_array()
        .and_then(|ts| ts.iter().find(|t| t["turn"].as_u64() == Some(turn)))
        .and_then(|t| t["writes"].as_array())
        .is_some_and(|w| w.iter().any(|n| n == &iw["write"]));
    if !writes_there {
        out.push(format!(
            "{id}: introducing write {iw} is not a write of turn {turn}"
        ));
    }
    let checks = r["checks"].as_array().cloned().unwrap_or_default();
    for c in &checks {
        if c["passed"] != Value::Bool(true) {
            out.push(format!("{id}: automatic check failed: {c}"));
        }
    }
    if !checks
        .iter()
        .any(|c| c["name"] == "final-state-matches-replay" && c["passed"] == true)
    {
        out.push(format!("{id}: no passing final-state-matches-replay check"));
    }
    if r["expected"]["matched"] != Value::Bool(true) {
        out.push(format!(
            "{id}: sage reports its expectation unmet: {}",
            r["expected"]
        ));
    }
    out
}

#[test]
fn every_case_produces_its_expected_outputs() {
    let cases = manifests();
    let set = localize_corpus();
    assert_eq!(
        set["skipped"].as_array().map(Vec::len),
        Some(0),
        "skipped: {}",
        set["skipped"]
    );
    let mut seen = BTreeSet::new();
    let mut errors = Vec::new();
    for r in set["results"].as_array().expect("results") {
        let id = r["case_id"].as_str().unwrap();
        if r["judge"]["name"] != "lexicon" {
            continue;
        }
        let m = cases
            .get(id)
            .unwrap_or_else(|| panic!("result for unknown case {id}"));
        let exp = &m["expected"];
        assert_eq!(
            exp["judge"], "lexicon",
            "{id}: expectations are for the lexicon judge"
        );
        seen.insert(id.to_string());
        if is_real(m) {
            errors.extend(real_mismatches(id, exp, r));
            continue;
        }
        errors.extend(mismatches(id, exp, r));
        // remove-then-reinstate cases: the introducing write is the reinstating one
        if id.contains("remove-reinstate")
            && r["provenance"]["introducing_write"]["reinstated"] != Value::Bool(true)
        {
            errors.push(format!("{id}: introducing write not marked as reinstating"));
        }
    }
    let missing: Vec<_> = cases.keys().filter(|k| !seen.contains(*k)).collect();
    assert!(missing.is_empty(), "no lexicon result for {missing:?}");
    assert!(errors.is_empty(), "\n{}", errors.join("\n"));
}

#[test]
fn figure_1_cases_are_exactly_the_papers() {
    let cases = manifests();
    let a = &cases["ag2-fig1a-aes-ecb"]["expected"];
    assert_eq!(a["provenance"], "agent-introduced");
    assert_eq!(a["introducing_write_turn"], 3);
    assert_eq!(a["origin_turn"], 1);
    assert_eq!(a["origin_type"], "inadequate-defence-selected");
    let b = &cases["ag2-fig1b-origin-header"];
    assert_eq!(b["expected"]["provenance"], "inherited");
    assert!(b["expected"]["introducing_write_turn"].is_null());
    assert_eq!(b["expected"]["origin_turn"], 1);
    assert_eq!(b["expected"]["origin_type"], "unaddressed-requirement");
    assert!(turns(&b["expected"]["missed_opportunities"]).contains(&3));
    assert_eq!(
        b["anchor"]["fragment"],
        "origin = self.request.headers.get(\"Origin\")"
    );
}

#[test]
fn corpus_covers_what_it_promises() {
    let all = manifests();
    let real: Vec<&Value> = all.values().filter(|m| is_real(m)).collect();
    assert_eq!(real.len(), 14, "the SusVibes silent failures");
    for m in &real {
        assert!(
            m["note"].as_str().unwrap().starts_with("REAL run"),
            "{}",
            m["id"]
        );
        assert!(
            m["final_state"].is_object(),
            "{}: a real case carries its final file",
            m["id"]
        );
        assert!(m["task"]["cve"].is_string(), "{}: the task's CVE", m["id"]);
        assert_eq!(m["metadata"]["dataset"], "SusVibes");
    }
    let cases: BTreeMap<String, Value> = all.into_iter().filter(|(_, m)| !is_real(m)).collect();
    assert!(cases.len() >= 14, "{} cases", cases.len());
    for m in cases.values() {
        assert_eq!(m["metadata"]["trace_source"], "constructed", "{}", m["id"]);
    }
    let count = |f: &dyn Fn(&Value) -> bool| cases.values().filter(|m| f(m)).count();
    assert!(count(&|m| m["trace"]["framework"] == "aider") >= 6);
    assert!(count(&|m| m["trace"]["framework"] == "ag2") >= 6);
    for m in cases.values() {
        let note = m["note"].as_str().unwrap_or_default();
        assert!(
            note.starts_with("Constructed"),
            "{}: note must say constructed",
            m["id"]
        );
        assert!(m["metadata"]["task_id"].is_string(), "{}: task id", m["id"]);
    }
    let e = |k: &str| -> BTreeSet<String> {
        cases
            .values()
            .map(|m| m["expected"][k].as_str().unwrap_or("null").to_string())
            .collect()
    };
    for p in ["inherited", "agent-introduced", "no-code-location"] {
        assert!(e("provenance").contains(p), "no {p} case");
    }
    for c in ["single-write", "per-write", "final-only"] {
        assert!(e("reconstruction_condition").contains(c), "no {c} case");
    }
    for t in [
        "inadequate-defence-selected",
        "unaddressed-requirement",
        "defect-in-code-change",
    ] {
        assert!(e("origin_type").contains(t), "no {t} case");
    }
    assert!(e("outcome").contains("undetermined"));
    assert!(count(&|m| !turns(&m["expected"]["missed_opportunities"]).is_empty()) > 0);
    // final-only cases carry their final file; the others do not
    for m in cases.values() {
        let final_only = m["expected"]["reconstruction_condition"] == "final-only";
        assert_eq!(m.get("final_state").is_some(), final_only, "{}", m["id"]);
    }
    // remove-then-reinstate: the introducing write is a later write than the first one
    assert!(cases.contains_key("ag2-remove-reinstate-shell"));
    assert!(cases.contains_key("aider-remove-reinstate-path"));
}

#[test]
fn case_files_match_their_generator() {
    if super::need::missing_shared("security/datasets/SALLM/PythonDataset/dataset.jsonl") {
        return;
    }
    // corpora/make_corpus.py rebuilds every case from the SALLM tasks in ../shared and
    // re-derives provenance and introducing writes; --check fails when a file on disk differs.
    let out = std::process::Command::new("python3")
        .arg(corpus_dir().join("make_corpus.py"))
        .arg("--check")
        .env("SAGE_SHARED", super::need::shared_root())
        .output()
        .expect("python3 is needed to check the corpus generator (scripts/setup.sh)");
    assert!(
        out.status.success(),
        "make_corpus.py --check failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn real_and_constructed_are_summarized_apart() {
    let set = localize_corpus();
    let subsets: Vec<(String, u64)> = set["summaries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["subset"].as_str().unwrap_or("-").to_string(),
                s["cases"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        subsets,
        vec![("real".to_string(), 14), ("constructed".to_string(), 15)]
    );
    // The table output names each subset.
    let out = Command::cargo_bin("sage")
        .unwrap()
        .arg("localize")
        .arg(corpus_dir())
        .arg("--no-write")
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert!(text.contains("Table 5 — 14 real cases"), "{text}");
    assert!(text.contains("Table 5 — 15 constructed cases"), "{text}");
}

#[test]
fn real_cases_match_their_import_script() {
    // corpora/susvibes/import_cases.py copies the cases from ../shared and derives their
    // expectations; --check fails when a file on disk differs.
    if super::need::missing_shared("susvibes/cases") {
        return;
    }
    let out = std::process::Command::new("python3")
        .arg(corpus_dir().join("susvibes/import_cases.py"))
        .arg("--check")
        .env("SAGE_SHARED", super::need::shared_root())
        .output()
        .expect("python3 is needed to check the corpus import (scripts/setup.sh)");
    assert!(
        out.status.success(),
        "import_cases.py --check failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn writes_outside_a_case_are_recorded_not_problems() {
    let set = localize_corpus();
    assert_eq!(
        set["problems"].as_array().map(Vec::len),
        Some(0),
        "{}",
        set["problems"]
    );
    for (case, file, n) in OUTSIDE_THE_CASE {
        let r = set["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["case_id"].as_str().unwrap().starts_with(case))
            .unwrap();
        let failures: Vec<&Value> = r["write_failures"]
            .as_array()
            .map(|a| a.iter().filter(|f| f["artefact"] == *file).collect())
            .unwrap_or_default();
        assert_eq!(failures.len(), *n, "{case}");
        for f in failures {
            assert!(
                f["reason"]
                    .as_str()
                    .unwrap()
                    .contains("nothing is known of the file before this write"),
                "{f}"
            );
        }
    }
}
