//! Method fidelity (issue 12): the golden cases of `tests/data/fidelity/`, each with its
//! expected provenance, introducing write, condition, origin, missed turns, turn kinds, links
//! and checks derived by hand in its README, run through the real binary; an anchor the trace
//! never touches; and a scripted LLM judge (the local fake server) that shows no later-turn
//! text and no submission reaching any prompt, a scoring failure that the rule does not need,
//! a quote taken from a tool result, and the turn counters.

use crate::support::copy_dir;
use assert_cmd::Command;
use sage_llm::fake::{scored_turn, FakeServer, Fault};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

fn fidelity_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fidelity")
}

fn localize_json(dir: &Path, extra: &[&str]) -> (Value, String, i32) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("results.json");
    let o = Command::cargo_bin("sage")
        .unwrap()
        .arg("localize")
        .arg(dir)
        .args(["--format", "json", "--output"])
        .arg(&out)
        .arg("--out-dir")
        .arg(tmp.path().join("r"))
        .args(extra)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    let v = std::fs::read_to_string(&out)
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap_or(Value::Null);
    (v, stderr, o.status.code().unwrap_or(-1))
}

#[test]
fn every_golden_case_meets_its_hand_derived_expectations() {
    let (set, stderr, code) = localize_json(&fidelity_dir(), &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(set["skipped"], json!([]), "{stderr}");
    assert_eq!(set["problems"], json!([]), "{stderr}");
    let results = set["results"].as_array().unwrap();
    let mut formats = BTreeSet::new();
    let mut errors = Vec::new();
    for r in results {
        let id = r["case_id"].as_str().unwrap();
        formats.insert(r["framework"].as_str().unwrap().to_string());
        let e = &r["expected"];
        if e["matched"] != json!(true) {
            errors.push(format!("{id}: {}", e["mismatches"]));
        }
        // A submission is never a turn's write: no write sits in a turn after the last one
        // the trace's own edits made, and the finishing turn of a submitted run writes
        // nothing.
        let dir = Path::new(r["case_dir"].as_str().unwrap());
        let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
        assert!(
            readme.contains("## Derivation"),
            "{id}: README without derivation"
        );
    }
    assert!(errors.is_empty(), "\n{}", errors.join("\n"));
    assert_eq!(results.len(), 8);
    assert!(formats.len() >= 4, "{formats:?}");
    for f in ["ag2", "aider", "claude-code", "openhands", "swe-agent"] {
        assert!(formats.contains(f), "no {f} case");
    }
}

#[test]
fn submissions_are_no_turns_write_and_final_only_is_recorded_as_uncertain() {
    let (set, stderr, _) = localize_json(&fidelity_dir(), &[]);
    let by_id = |id: &str| -> Value {
        set["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["case_id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("{id}: no result ({stderr})"))
    };
    for id in [
        "openhands-submission-not-a-write",
        "swe-agent-submission-not-a-write",
        "openhands-crlf-edit",
    ] {
        let r = by_id(id);
        assert_eq!(r["counts"]["writes"], 1, "{id}: the edit is the only write");
        assert_eq!(r["counts"]["submissions"], 1, "{id}");
        let last = r["turns"].as_array().unwrap().last().unwrap().clone();
        assert!(
            last.get("writes").is_none(),
            "{id}: the finishing turn writes nothing"
        );
        assert_ne!(last["kind"], "implementation", "{id}");
    }
    let e = by_id("ag2-final-only-cannot-determine");
    assert!(e["provenance"]["introducing_write"].is_null());
    assert_eq!(e["provenance"]["introducing_write_cannot_determine"], true);
    assert!(e["origin"]["uncertainty"]
        .as_str()
        .unwrap()
        .contains("cannot be determined"));
    let f = by_id("ag2-final-file-differs");
    let failed: Vec<&Value> = f["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["passed"] == false)
        .collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(failed[0]["detail"]
        .as_str()
        .unwrap()
        .contains("final/app.py"));
    let h = by_id("swe-agent-workspace-paths");
    assert!(h["notes"][0]
        .as_str()
        .unwrap()
        .contains("/testbed/src/app.py taken as the case's artefact src/app.py"));
    // The failed check is shown in the table output and counted in the summary.
    let o = Command::cargo_bin("sage")
        .unwrap()
        .arg("localize")
        .arg(fidelity_dir().join("ag2-final-file-differs"))
        .arg("--no-write")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("final-state-matches-replay 1"), "{out}");
    assert!(
        out.contains("check failed: ag2-final-file-differs"),
        "{out}"
    );
}

#[test]
fn an_anchor_the_trace_never_touches_is_an_error_naming_the_closest_artefacts() {
    let tmp = tempfile::tempdir().unwrap();
    let case = tmp.path().join("untouched");
    copy_dir(&fidelity_dir().join("swe-agent-workspace-paths"), &case);
    std::fs::write(case.join("baseline/other.py"), "x = 1\n").unwrap();
    let mut m: Value =
        serde_json::from_str(&std::fs::read_to_string(case.join("case.json")).unwrap()).unwrap();
    m["baseline"]["src/other.py"] = json!("baseline/other.py");
    m["anchor"]["artefact"] = json!("src/other.py");
    m["anchor"]["fragment"] = json!("x = 1");
    m.as_object_mut().unwrap().remove("expected");
    std::fs::write(case.join("case.json"), m.to_string()).unwrap();
    let (set, stderr, code) = localize_json(&case, &[]);
    assert_eq!(code, 1, "{stderr}");
    let s = &set["skipped"][0];
    assert_eq!(s["stage"], "case");
    let msg = s["message"].as_str().unwrap();
    assert!(msg.contains("never touches"), "{msg}");
    assert!(
        msg.contains("closest artefacts the trace writes: src/app.py"),
        "{msg}"
    );
    assert!(set["results"].as_array().unwrap().is_empty());
}

#[test]
fn make_cases_reproduces_the_files_on_disk() {
    let ok = std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        super::need::skip("python3 is not available");
        return;
    }
    let o = std::process::Command::new("python3")
        .arg(fidelity_dir().join("make_cases.py"))
        .arg("--check")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

const KEY: &str = "sk-test-FIDELITY-KEY-1c9e";

/// The scores the scripted judge gives each turn of `openhands-submission-not-a-write`
/// (1 system, 2 `cat` with a defence, 3 the edit, 4 the tests, 5 `finish`). Turn 3's quote is
/// copied from its tool result: not the agent's words.
fn scripted(turn: usize) -> Value {
    let zero = json!({"score": 0, "quote": null});
    let base = |opp: bool| {
        json!({"applicable": true, "security_opportunity": opp,
               "TR": zero, "DI": zero, "VR": zero, "SA": zero})
    };
    match turn {
        2 => {
            let mut j = base(true);
            j["DI"] = json!({"score": 2, "quote": "I will check that the redirect target is a relative path before redirecting."});
            j
        }
        3 => {
            let mut j = base(true);
            j["DI"] = json!({"score": 1, "quote": "The file /workspace/app.py has been edited."});
            j
        }
        4 => base(false),
        _ => base(true),
    }
}

/// `sage localize` with an LLM judge against the fake server: every prompt holds turns 1..=k
/// only and never the submitted patch; the quote from a tool result fails turn 3 after its
/// retries; the case is still localized because that failure comes after the origin; the
/// turn counters count.
#[test]
fn a_scripted_judge_sees_no_later_turn_and_no_submission() {
    let work = tempfile::tempdir().unwrap();
    let case = work.path().join("cases/oh");
    copy_dir(
        &fidelity_dir().join("openhands-submission-not-a-write"),
        &case,
    );
    let mut m: Value =
        serde_json::from_str(&std::fs::read_to_string(case.join("case.json")).unwrap()).unwrap();
    m.as_object_mut().unwrap().remove("expected");
    std::fs::write(case.join("case.json"), m.to_string()).unwrap();
    let server = FakeServer::with_faults(
        Duration::ZERO,
        Arc::new(|c, _, _| match scored_turn(&c.body) {
            Some(k) => Fault::Answer(scripted(k)),
            None => Fault::None,
        }),
    );
    let out = Command::cargo_bin("sage")
        .unwrap()
        .current_dir(work.path())
        .env("OPENAI_BASE_URL", server.openai_base())
        .env("OPENAI_API_KEY", KEY)
        .args([
            "localize",
            "cases",
            "--judge",
            "openai:gpt-4.1-mini",
            "--no-progress",
        ])
        .args(["--ledger", "ledger", "--out-dir", "out", "--timeout", "5"])
        .args(["--format", "json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    // turn 3 fails scoring (below): the run says so in its status (issue 29)
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("1 turn(s) failed scoring"), "{stderr}");
    let set: Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &set["results"][0];
    assert_eq!(r["judge"]["name"], "openai");

    // Prefix-only, and no submission in any prompt.
    let reqs = server.requests();
    let trace = std::fs::read_to_string(case.join("output.json")).unwrap();
    let rec: Value = serde_json::from_str(&trace).unwrap();
    let patch = rec["test_result"]["git_patch"].as_str().unwrap();
    assert!(patch.contains("index 1a2b3c4..5d6e7f8"));
    let later: [(usize, &str); 3] = [
        (3, "if target.startswith('/'):"),
        (4, "python -m pytest -q"),
        (5, "redirects only to relative paths"),
    ];
    let mut turns_seen = BTreeSet::new();
    for q in &reqs {
        let k = scored_turn(&q.body).expect("a scoring request");
        turns_seen.insert(k);
        assert!(q.body.contains(&format!("## Turn {k} (")));
        assert!(
            !q.body.contains(&format!("## Turn {} (", k + 1)),
            "turn {k}: a later turn"
        );
        for (t, text) in later {
            if t > k {
                assert!(
                    !q.body.contains(text),
                    "turn {k}'s prompt holds turn {t}'s {text:?}"
                );
            }
        }
        for piece in [
            "index 1a2b3c4..5d6e7f8",
            "diff --git a/app.py",
            "+++ b/app.py",
        ] {
            assert!(
                !q.body.contains(piece),
                "turn {k}'s prompt holds the submission"
            );
        }
    }
    assert_eq!(turns_seen, BTreeSet::from([2, 3, 4, 5]));
    // Turn 3: three attempts, each with the tool-result quote, then a scoring failure.
    assert_eq!(
        reqs.iter()
            .filter(|q| scored_turn(&q.body) == Some(3))
            .count(),
        3
    );
    let t3 = r["scores"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["turn"] == 3)
        .unwrap();
    assert_eq!(t3["status"], "failed");
    assert!(
        t3["reason"]
            .as_str()
            .unwrap()
            .contains("only in a tool result"),
        "{t3}"
    );
    // The failure comes after the origin (turn 2, settled): localized, not scoring-failed.
    assert_eq!(r["origin"]["outcome"], "localized");
    assert_eq!(r["origin"]["origin_turn"], 2);
    assert_eq!(r["origin"]["origin_type"], "inadequate-defence-selected");
    assert_eq!(r["origin"]["scoring_failures"], json!([3]));
    assert_eq!(r["origin"]["missed_unassessed"], json!([3]));
    // Turn 4 is not a security opportunity (the judge says so) and is verification anyway;
    // turn 5 is planning: no missed opportunity.
    assert_eq!(r["origin"]["missed_opportunities"], json!([]));
    // Counters on the LLM path: 3 scored, 1 failure (turn 1 is administrative).
    assert!(
        stderr.contains("turns: 3 scored, 1 scoring failures"),
        "{stderr}"
    );
    assert_eq!(set["summaries"][0]["turns_scored"], 3);
    assert_eq!(set["summaries"][0]["turns_failed"], 1);
    assert_eq!(set["summaries"][0]["turns_administrative"], 1);
}
