//! Issue 12, cause 1 and the checks of cause 9: a submission or a case's final file is
//! the record the replay is checked against, never a turn's write.
use crate::checks::*;
use crate::provenance::*;
use crate::reconstruct::*;
use sage_trace::case::DeficiencyCategory;
use sage_trace::case::FailureAnchor;
use sage_trace::{Actor, ToolCall, Turn, TurnKind, Write};
use sage_trace::{CanonicalTrace, RawRef, WriteOp};
use std::collections::BTreeMap;

/// [`crate::reconstruct`] with the embedded workspace roots.
fn reconstruct(b: &BTreeMap<String, String>, t: &CanonicalTrace) -> ArtefactHistory {
    crate::reconstruct(b, t, &Default::default())
}

/// [`crate::reconstruct_with_final`] with the embedded workspace roots.
fn reconstruct_with_final(
    b: &BTreeMap<String, String>,
    t: &CanonicalTrace,
    f: &[SuppliedFinal],
) -> ArtefactHistory {
    crate::reconstruct_with_final(b, t, f, &Default::default())
}

/// [`crate::match_key`] with the embedded workspace roots.
fn match_key(p: &str, keys: &[String]) -> Option<String> {
    crate::match_key(p, keys, &Default::default())
}

const ECB: &str = "cipher = AES.new(key, AES.MODE_ECB)";

fn w(artefact: &str, op: WriteOp, final_state: bool) -> Write {
    Write {
        artefact: artefact.into(),
        op,
        via: if final_state {
            "git_patch"
        } else {
            "str_replace"
        }
        .into(),
        final_state,
        raw: RawRef::lines("t", 1, 1),
    }
}

fn turn(writes: Vec<Write>, calls: Vec<&str>) -> Turn {
    let mut t = Turn::new(Actor::new("agent", None), TurnKind::Implementation);
    t.writes = writes;
    t.tool_calls = calls
        .into_iter()
        .map(|a| ToolCall {
            id: None,
            name: "bash".into(),
            arguments: a.into(),
            raw: RawRef::lines("t", 1, 1),
        })
        .collect();
    // What the adapters' classifier marks: here every `sed`/`perl` call is an edit.
    t.edit_calls = (0..t.tool_calls.len())
        .filter(|&i| {
            let a = &t.tool_calls[i].arguments;
            a.starts_with("sed ") || a.starts_with("perl ")
        })
        .collect();
    t
}

fn anchor() -> FailureAnchor {
    FailureAnchor {
        artefact: "app.py".into(),
        fragment: Some(ECB.into()),
        category: DeficiencyCategory::VulnerabilityIntroduced,
        cwe: "CWE-327".into(),
        description: "ECB".into(),
    }
}

fn base() -> BTreeMap<String, String> {
    [("app.py".to_string(), "import os\nx = 1\n".to_string())].into()
}

fn patch_to(content: &str) -> WriteOp {
    WriteOp::UnifiedDiff {
        diff: unified_diff("import os\nx = 1\n", content, "a/app.py", "b/app.py"),
    }
}

fn named<'c>(c: &'c [Check], name: &str) -> Vec<&'c Check> {
    c.iter().filter(|c| c.name == name).collect()
}

#[test]
fn the_introducing_write_is_the_step_not_the_submission() {
    // Turn 1 writes the fragment; turn 2 only finishes; the submitted patch is attached
    // to turn 2 by the adapter. Before the fix the patch was write 2 at turn 2, the
    // condition per-write and the final turn an implementation turn.
    let after = format!("import os\n{ECB}\n");
    let mut t = CanonicalTrace::new("t", vec!["t".into()]);
    t.push_turn(turn(
        vec![w(
            "app.py",
            WriteOp::StrReplace {
                old: "x = 1".into(),
                new: ECB.into(),
                all: false,
                tolerance: sage_trace::Tolerance::TrimmedRetry,
            },
            false,
        )],
        vec![],
    ));
    t.push_turn(turn(vec![w("app.py", patch_to(&after), true)], vec![]));
    let h = reconstruct(&base(), &t);
    assert_eq!(h.condition, ReconstructionCondition::SingleWrite);
    assert_eq!(h.snapshots.len(), 1);
    let p = provenance_in(&anchor(), &h, Some(&t));
    let iw = p.introducing_write.unwrap();
    assert_eq!((iw.write, iw.turn, iw.deduced), (1, 1, false));
    let c = independent_checks(&anchor(), &h, &t, &p);
    let f = named(&c, "final-state-matches-replay");
    assert_eq!(f.len(), 1);
    assert!(f[0].passed, "{f:?}");
    assert!(c.iter().all(|c| c.passed), "{c:#?}");
}

#[test]
fn a_replay_that_misses_an_edit_fails_the_final_state_check() {
    // The trace's own edit is unreplayable (a regex sed), the submission shows the result.
    let after = format!("import os\n{ECB}\n");
    let mut t = CanonicalTrace::new("t", vec!["t".into()]);
    t.push_turn(turn(
        vec![w(
            "app.py",
            WriteOp::StrReplace {
                old: "import os".into(),
                new: "import os".into(),
                all: false,
                tolerance: sage_trace::Tolerance::TrimmedRetry,
            },
            false,
        )],
        vec![],
    ));
    t.push_turn(turn(
        vec![],
        vec![r#"sed -i 's/x = [0-9]/cipher = .../' app.py"#],
    ));
    t.submissions.push(w("app.py", patch_to(&after), true));
    let h = reconstruct(&base(), &t);
    let p = provenance_in(&anchor(), &h, Some(&t));
    // Only the final state holds the fragment; turn 2 is the only turn after the last
    // replayed write that changes app.py: the deduced introducing write.
    assert_eq!(p.provenance, Provenance::AgentIntroduced);
    let iw = p.introducing_write.unwrap();
    assert_eq!((iw.turn, iw.deduced), (2, true));
    let c = independent_checks(&anchor(), &h, &t, &p);
    let f = named(&c, "final-state-matches-replay");
    assert!(!f[0].passed && f[0].detail.contains("line 2"), "{f:?}");
    let wa = named(&c, "every-write-applied");
    assert!(wa[0].passed && wa[0].detail.contains("covered"), "{wa:?}");
    assert!(named(&c, "introducing-write-is-a-write-of-the-trace")[0].passed);
    assert!(checks(&anchor(), &h, &p).iter().all(|c| c.passed));
}

#[test]
fn a_final_only_trace_has_no_introducing_write_unless_one_turn_shows_it() {
    let after = format!("import os\n{ECB}\n");
    let supplied = [SuppliedFinal {
        artefact: "app.py".into(),
        file: "final/app.py".into(),
        content: after.clone(),
    }];
    // No turn writes or edits app.py: cannot-determine.
    let mut t = CanonicalTrace::new("t", vec!["t".into()]);
    t.push_turn(turn(vec![], vec!["ls"]));
    t.push_turn(turn(vec![], vec![]));
    let h = reconstruct_with_final(&base(), &t, &supplied);
    assert_eq!(h.condition, ReconstructionCondition::FinalOnly);
    let p = provenance_in(&anchor(), &h, Some(&t));
    assert_eq!(p.provenance, Provenance::AgentIntroduced);
    assert_eq!(p.introducing_write, None);
    assert!(p.introducing_write_cannot_determine);
    assert_eq!(p.introducing_write_label(), "cannot-determine");
    assert!(p
        .introducing_write_basis
        .as_deref()
        .unwrap()
        .starts_with("cannot determine"));
    assert!(checks(&anchor(), &h, &p).iter().all(|c| c.passed));
    // Two turns edit it by commands sage cannot replay: still cannot-determine.
    let mut t2 = CanonicalTrace::new("t", vec!["t".into()]);
    t2.push_turn(turn(vec![], vec!["perl -pi -e 's/x/y/' app.py"]));
    t2.push_turn(turn(vec![], vec!["sed -i 's/y = 1/z/' app.py"]));
    let p = provenance_in(
        &anchor(),
        &reconstruct_with_final(&base(), &t2, &supplied),
        Some(&t2),
    );
    assert!(p.introducing_write_cannot_determine);
    assert!(p.introducing_write_basis.unwrap().contains("turns 1, 2"));
    // One turn does: it is the introducing write, marked deduced.
    let mut t3 = CanonicalTrace::new("t", vec!["t".into()]);
    t3.push_turn(turn(vec![], vec!["cat app.py"]));
    t3.push_turn(turn(vec![], vec!["sed -i 's/x = 1/.../' app.py"]));
    let p = provenance_in(
        &anchor(),
        &reconstruct_with_final(&base(), &t3, &supplied),
        Some(&t3),
    );
    assert_eq!(
        p.introducing_write.map(|w| (w.turn, w.deduced)),
        Some((2, true))
    );
    assert_eq!(p.introducing_write_label(), "turn:2");
}

#[test]
fn a_case_final_file_is_checked_even_when_the_trace_writes_the_artefact() {
    // Before the fix a case's final_state was silently ignored when the trace had any
    // write to that file.
    let mut t = CanonicalTrace::new("t", vec!["t".into()]);
    t.push_turn(turn(
        vec![w(
            "app.py",
            WriteOp::FullContent {
                content: "import os\nx = 2\n".into(),
            },
            false,
        )],
        vec![],
    ));
    let supplied = [SuppliedFinal {
        artefact: "app.py".into(),
        file: "final/app.py".into(),
        content: format!("import os\n{ECB}\n"),
    }];
    let h = reconstruct_with_final(&base(), &t, &supplied);
    let p = provenance_in(&anchor(), &h, Some(&t));
    let c = independent_checks(&anchor(), &h, &t, &p);
    let f = named(&c, "final-state-matches-replay");
    assert_eq!(f.len(), 1);
    assert!(!f[0].passed);
    assert!(
        f[0].detail.contains("case final file final/app.py"),
        "{}",
        f[0].detail
    );
}

#[test]
fn a_patch_that_does_not_apply_to_the_baseline_is_reported() {
    let mut t = CanonicalTrace::new("t", vec!["t".into()]);
    t.push_turn(turn(
        vec![w(
            "app.py",
            WriteOp::FullContent {
                content: "import os\nx = 2\n".into(),
            },
            false,
        )],
        vec![],
    ));
    t.submissions.push(w(
        "app.py",
        WriteOp::UnifiedDiff {
            diff: "@@ -1,2 +1,2 @@\n import sys\n-y = 1\n+y = 2\n".into(),
        },
        true,
    ));
    let h = reconstruct(&base(), &t);
    assert!(h.final_states[0].error.is_some());
    let p = provenance_in(&anchor(), &h, Some(&t));
    let c = independent_checks(&anchor(), &h, &t, &p);
    let f = named(&c, "final-state-matches-replay");
    assert!(!f[0].passed && f[0].detail.contains("does not apply to the baseline"));
}

#[test]
fn no_code_location_is_checked_literally_and_an_introducing_write_by_the_trace() {
    let mut t = CanonicalTrace::new("t", vec!["t".into()]);
    t.push_turn(turn(
        vec![w(
            "app.py",
            WriteOp::FullContent {
                content: "import os\nx = 2\n".into(),
            },
            false,
        )],
        vec![],
    ));
    let h = reconstruct(&base(), &t);
    let a = anchor();
    let p = provenance_in(&a, &h, Some(&t));
    assert_eq!(p.provenance, Provenance::NoCodeLocation);
    let c = independent_checks(&a, &h, &t, &p);
    assert!(named(&c, "fragment-literally-absent")[0].passed);
    // A result claiming no-code-location while the text is in a state fails the check.
    let mut wrong = p.clone();
    let mut a2 = a.clone();
    a2.fragment = Some("x = 2".into());
    wrong.provenance = Provenance::NoCodeLocation;
    let c = independent_checks(&a2, &h, &t, &wrong);
    let f = named(&c, "fragment-literally-absent");
    assert!(!f[0].passed && f[0].detail.contains("write 1"), "{f:?}");
    // An introducing write the trace does not hold fails, even when the history agrees.
    let mut bogus = provenance_in(&a2, &h, Some(&t));
    bogus.introducing_write = Some(IntroducingWrite {
        write: 1,
        turn: 2,
        reinstated: false,
        deduced: false,
    });
    let c = independent_checks(&a2, &h, &t, &bogus);
    assert!(!named(&c, "introducing-write-is-a-write-of-the-trace")[0].passed);
}

#[test]
fn a_literal_occurrence_the_tokens_miss_fails() {
    let t = CanonicalTrace::new("t", vec![]);
    let run = |baseline: &str| {
        let b: BTreeMap<String, String> = [("app.py".to_string(), baseline.to_string())].into();
        let h = reconstruct(&b, &t);
        let p = provenance_in(&anchor(), &h, Some(&t));
        let c = independent_checks(&anchor(), &h, &t, &p);
        (
            p,
            named(&c, "fragment-in-baseline-literal-and-tokens")[0].clone(),
        )
    };
    // Present as code: both agree.
    let (p, c) = run(&format!("import os\n{ECB}\n"));
    assert_eq!(p.provenance, Provenance::Inherited);
    assert!(c.passed && c.detail.contains("literally present"), "{c:?}");
    // Kept in a comment: neither counts it.
    let (_, c) = run(&format!("import os\n# {ECB}\n"));
    assert!(c.passed && c.detail.contains("literally absent"), "{c:?}");
    // Verbatim inside a string: the tokens say absent, the text is there: reported.
    let (p, c) = run(&format!("import os\nDOC = \"{ECB}\"\n"));
    assert_eq!(p.provenance, Provenance::NoCodeLocation);
    assert!(!c.passed, "{c:?}");
}

#[test]
fn trace_paths_match_case_keys_by_the_documented_rule() {
    let keys: Vec<String> = vec!["app.py".into(), "src/util/http.py".into()];
    let m = |p: &str| match_key(p, &keys);
    assert_eq!(m("app.py").as_deref(), Some("app.py"));
    assert_eq!(m("./app.py").as_deref(), Some("app.py"));
    assert_eq!(m("/workspace/app.py").as_deref(), Some("app.py"));
    assert_eq!(
        m("/workspace/django__django-1/app.py").as_deref(),
        Some("app.py")
    );
    assert_eq!(
        m("/testbed/src/util/http.py").as_deref(),
        Some("src/util/http.py")
    );
    assert_eq!(
        m("/project/repo/src/util/http.py").as_deref(),
        Some("src/util/http.py")
    );
    // Never deeper than one folder inside a root, never under an unknown root, never a
    // relative path with extra folders.
    assert_eq!(m("/workspace/a/b/app.py"), None);
    assert_eq!(m("/tmp/app.py"), None);
    assert_eq!(m("tests/app.py"), None);
    // A case key written absolutely matches the trace's relative name.
    let abs: Vec<String> = vec!["/testbed/app.py".into()];
    assert_eq!(
        match_key("app.py", &abs).as_deref(),
        Some("/testbed/app.py")
    );
    assert_eq!(
        match_key("/workspace/app.py", &abs).as_deref(),
        Some("/testbed/app.py")
    );
    // The history uses the case key, and says how it matched.
    let mut t = CanonicalTrace::new("t", vec!["t".into()]);
    t.push_turn(turn(
        vec![w(
            "/workspace/repo/app.py",
            WriteOp::FullContent {
                content: "y = 1\n".into(),
            },
            false,
        )],
        vec![],
    ));
    let h = reconstruct(&base(), &t);
    assert_eq!(h.snapshots[0].artefact, "app.py");
    assert_eq!(h.path_matches["/workspace/repo/app.py"], "app.py");
}
