use crate::apply::*;
use crate::checks::*;
use crate::fragment::Matcher;
use crate::provenance::*;
use crate::reconstruct::*;
use sage_trace::case::DeficiencyCategory;
use sage_trace::case::FailureAnchor;
use sage_trace::{Actor, Turn, TurnKind, Write};
use sage_trace::{CanonicalTrace, RawRef, WriteOp};
use std::collections::BTreeMap;

/// [`crate::reconstruct`] with the embedded workspace roots.
fn reconstruct(b: &BTreeMap<String, String>, t: &CanonicalTrace) -> ArtefactHistory {
    crate::reconstruct(b, t, &Default::default())
}

fn w(artefact: &str, op: WriteOp) -> Write {
    Write {
        artefact: artefact.to_string(),
        op,
        via: "test".to_string(),
        final_state: false,
        raw: RawRef::synthetic("t", "test"),
    }
}

/// One turn per write.
fn trace(writes: Vec<Write>) -> CanonicalTrace {
    let mut t = CanonicalTrace::new("test", vec![]);
    for wr in writes {
        let mut turn = Turn::new(Actor::new("engineer", None), TurnKind::Implementation);
        turn.writes.push(wr);
        t.push_turn(turn);
    }
    t
}

fn base(content: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("app.py".to_string(), content.to_string())])
}

fn anchor(fragment: Option<&str>) -> FailureAnchor {
    FailureAnchor {
        artefact: "app.py".into(),
        fragment: fragment.map(str::to_string),
        category: DeficiencyCategory::VulnerabilityIntroduced,
        cwe: "CWE-327".into(),
        description: "ECB".into(),
    }
}

fn one(current: Option<&str>, op: WriteOp) -> Result<Option<String>, String> {
    apply(current, &op)
        .map(|a| a.content)
        .map_err(|e| e.to_string())
}

fn ok(current: &str, op: WriteOp) -> String {
    one(Some(current), op).unwrap().unwrap()
}

#[test]
fn full_content_and_delete() {
    assert_eq!(
        one(
            None,
            WriteOp::FullContent {
                content: "x\n".into()
            }
        ),
        Ok(Some("x\n".into()))
    );
    assert_eq!(one(Some("x"), WriteOp::Delete), Ok(None));
    assert_eq!(
        one(None, WriteOp::Delete),
        Err("delete: artefact does not exist".into())
    );
}

#[test]
fn search_replace_exact_first_occurrence() {
    let op = WriteOp::SearchReplace {
        search: "a = 1\n".into(),
        replace: "a = 2\n".into(),
        tolerance: sage_trace::Tolerance::LinesThenElision,
    };
    assert_eq!(ok("a = 1\nb\na = 1\n", op), "a = 2\nb\na = 1\n");
}

#[test]
fn search_replace_empty_search_appends_or_creates() {
    let op = || WriteOp::SearchReplace {
        search: "".into(),
        replace: "new\n".into(),
        tolerance: sage_trace::Tolerance::LinesThenElision,
    };
    assert_eq!(ok("old\n", op()), "old\nnew\n");
    assert_eq!(one(None, op()), Ok(Some("new\n".into())));
}

/// Issue 30: an editor's tolerance is data on the op. The same edits that apply through
/// the line match, the `...` elision or the trimmed retry do not apply when the op says
/// `Exact`, whatever wrote them.
#[test]
fn the_tolerance_on_the_op_decides_the_fallbacks() {
    use sage_trace::Tolerance;
    let file = "class A:\n    def f(self):\n        x = 1   \n        return x\n";
    let sr = |tolerance| WriteOp::SearchReplace {
        search: "def f(self):\n    x = 1\n".into(),
        replace: "def f(self):\n    x = 2\n".into(),
        tolerance,
    };
    assert!(
        apply(Some(file), &sr(Tolerance::LinesThenElision))
            .unwrap()
            .fuzzy
    );
    for t in [Tolerance::Exact, Tolerance::TrimmedRetry] {
        assert_eq!(apply(Some(file), &sr(t)), Err(ApplyError::SearchNotFound));
    }
    let elided = |tolerance| WriteOp::SearchReplace {
        search: "a = 1\n...\nc = 3\n".into(),
        replace: "a = 10\n...\nc = 30\n".into(),
        tolerance,
    };
    let abc = "a = 1\nb = 2\nc = 3\n";
    assert_eq!(
        ok(abc, elided(Tolerance::LinesThenElision)),
        "a = 10\nb = 2\nc = 30\n"
    );
    assert!(apply(Some(abc), &elided(Tolerance::Exact)).is_err());
    let str_replace = |tolerance| WriteOp::StrReplace {
        old: "  x = 1   ".into(),
        new: " x = 2 ".into(),
        all: false,
        tolerance,
    };
    let one_line = "x = 1\n";
    assert_eq!(
        ok(one_line, str_replace(Tolerance::TrimmedRetry)),
        "x = 2\n"
    );
    for t in [Tolerance::Exact, Tolerance::LinesThenElision] {
        assert_eq!(
            apply(Some(one_line), &str_replace(t)),
            Err(ApplyError::OldNotFound)
        );
    }
}

/// A canonical trace written before the tolerance was on the op reads as it applied then,
/// and an op at that default writes no `tolerance` key (normalize's output is unchanged).
#[test]
fn an_op_without_a_tolerance_reads_as_before() {
    use sage_trace::Tolerance;
    let sr: WriteOp =
        serde_json::from_str(r#"{"type":"search-replace","search":"a","replace":"b"}"#).unwrap();
    assert!(matches!(
        sr,
        WriteOp::SearchReplace {
            tolerance: Tolerance::LinesThenElision,
            ..
        }
    ));
    let st: WriteOp =
        serde_json::from_str(r#"{"type":"str-replace","old":"a","new":"b"}"#).unwrap();
    assert!(matches!(
        st,
        WriteOp::StrReplace {
            tolerance: Tolerance::TrimmedRetry,
            ..
        }
    ));
    assert!(!serde_json::to_string(&sr).unwrap().contains("tolerance"));
    let exact = WriteOp::StrReplace {
        old: "a".into(),
        new: "b".into(),
        all: false,
        tolerance: Tolerance::Exact,
    };
    assert!(serde_json::to_string(&exact)
        .unwrap()
        .contains(r#""tolerance":"exact""#));
}

#[test]
fn search_replace_whitespace_tolerant_is_recorded_fuzzy() {
    let file = "class A:\n    def f(self):\n        x = 1   \n        return x\n";
    let op = WriteOp::SearchReplace {
        search: "def f(self):\n    x = 1\n".into(),
        replace: "def f(self):\n    x = 2\n".into(),
        tolerance: sage_trace::Tolerance::LinesThenElision,
    };
    let a = apply(Some(file), &op).unwrap();
    assert!(a.fuzzy);
    assert_eq!(
        a.content.unwrap(),
        "class A:\n    def f(self):\n        x = 2\n        return x\n"
    );
    let miss = WriteOp::SearchReplace {
        search: "y = 1".into(),
        replace: "y = 2".into(),
        tolerance: sage_trace::Tolerance::LinesThenElision,
    };
    let e = one(Some(file), miss).unwrap_err();
    assert!(e.contains("search text not found"), "{e}");
}

#[test]
fn search_replace_with_aider_elision() {
    // Aider's `...` lines: the pieces between them are replaced one by one.
    let file = "def a():\n    x = 1\n    y = 2\n    z = 3\n    return x\n";
    let op = WriteOp::SearchReplace {
        search: "def a():\n    x = 1\n...\n    return x\n".into(),
        replace: "def a():\n    x = 10\n...\n    return x + 1\n".into(),
        tolerance: sage_trace::Tolerance::LinesThenElision,
    };
    let a = apply(Some(file), &op).unwrap();
    assert!(a.fuzzy);
    assert_eq!(
        a.content.unwrap(),
        "def a():\n    x = 10\n    y = 2\n    z = 3\n    return x + 1\n"
    );
    let unpaired = WriteOp::SearchReplace {
        search: "x = 1\n...\nreturn x\n".into(),
        replace: "x = 10\n".into(),
        tolerance: sage_trace::Tolerance::LinesThenElision,
    };
    let e = one(Some(file), unpaired).unwrap_err();
    assert!(e.contains("unpaired"), "{e}");
    let missing = WriteOp::SearchReplace {
        search: "    x = 1\n...\n    nope\n".into(),
        replace: "    x = 1\n...\n    yes\n".into(),
        tolerance: sage_trace::Tolerance::LinesThenElision,
    };
    assert!(one(Some(file), missing)
        .unwrap_err()
        .contains("not in the file"));
}

#[test]
fn lf_edits_apply_to_crlf_files_as_editors_read_them() {
    let file = "def f():\r\n    a = 1\r\n    b = 2\r\n";
    let op = WriteOp::StrReplace {
        old: "    a = 1\n    b = 2".into(),
        new: "    a = 3\n    b = 4".into(),
        all: false,
        tolerance: sage_trace::Tolerance::TrimmedRetry,
    };
    let a = apply(Some(file), &op).unwrap();
    assert!(a.crlf_normalized);
    assert_eq!(a.content.unwrap(), "def f():\n    a = 3\n    b = 4\n");
    // A one-line edit matches the CRLF file as it is and keeps its line ends.
    let one_line = WriteOp::StrReplace {
        old: "a = 1".into(),
        new: "a = 5".into(),
        all: false,
        tolerance: sage_trace::Tolerance::TrimmedRetry,
    };
    let a = apply(Some(file), &one_line).unwrap();
    assert!(!a.crlf_normalized);
    assert_eq!(a.content.unwrap(), "def f():\r\n    a = 5\r\n    b = 2\r\n");
    // Aider search/replace too, without falling back to the fuzzy line match.
    let sr = WriteOp::SearchReplace {
        search: "    a = 1\n    b = 2\n".into(),
        replace: "    a = 9\n".into(),
        tolerance: sage_trace::Tolerance::LinesThenElision,
    };
    let a = apply(Some(file), &sr).unwrap();
    assert!(a.crlf_normalized && !a.fuzzy);
    assert_eq!(a.content.unwrap(), "def f():\n    a = 9\n");
}

#[test]
fn str_replace_must_match_once() {
    let op = |all| WriteOp::StrReplace {
        old: "x".into(),
        new: "y".into(),
        all,
        tolerance: sage_trace::Tolerance::TrimmedRetry,
    };
    assert_eq!(ok("a x b", op(false)), "a y b");
    assert_eq!(
        one(Some("x x x"), op(false)),
        Err("str_replace: old text occurs 3 times (must occur exactly once)".into())
    );
    assert_eq!(ok("x x x", op(true)), "y y y");
    assert_eq!(
        one(Some("abc"), op(false)),
        Err("str_replace: old text not found".into())
    );
    assert_eq!(
        one(None, op(false)),
        Err("str_replace: artefact does not exist".into())
    );
    let empty = WriteOp::StrReplace {
        old: "".into(),
        new: "y".into(),
        all: false,
        tolerance: sage_trace::Tolerance::TrimmedRetry,
    };
    assert!(one(Some("abc"), empty).is_err());
}

#[test]
fn insert_after_line() {
    let op = |n, t: &str| WriteOp::Insert {
        after_line: n,
        text: t.into(),
    };
    assert_eq!(ok("a\nb\n", op(0, "z")), "z\na\nb\n");
    assert_eq!(ok("a\nb\n", op(1, "z\n")), "a\nz\nb\n");
    assert_eq!(ok("a\nb\n", op(2, "z")), "a\nb\nz\n");
    assert_eq!(ok("a\nb", op(2, "z")), "a\nb\nz");
    assert_eq!(one(None, op(0, "z\n")), Ok(Some("z\n".into())));
    assert_eq!(
        one(Some("a\nb\n"), op(5, "z")),
        Err("insert: line 5 is beyond the end of the file (2 lines)".into())
    );
    assert!(one(None, op(3, "z")).is_err());
}

#[test]
fn replace_lines_inclusive() {
    let op = |s, e, t: &str| WriteOp::ReplaceLines {
        start: s,
        end: e,
        text: t.into(),
    };
    assert_eq!(ok("a\nb\nc\nd\n", op(2, 3, "X")), "a\nX\nd\n");
    assert_eq!(ok("a\nb\nc\n", op(3, 3, "X\nY\n")), "a\nb\nX\nY\n");
    assert_eq!(ok("a\nb\nc\n", op(1, 3, "")), "");
    assert_eq!(
        one(Some("a\nb\n"), op(2, 4, "X")),
        Err("replace-lines: lines 2..=4 are not within the file (2 lines)".into())
    );
    assert!(one(Some("a\n"), op(0, 1, "X")).is_err());
    assert!(one(Some("a\nb\n"), op(2, 1, "X")).is_err());
}

const TEN: &str = "l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\nl10\n";

fn diff(current: Option<&str>, d: &str) -> Result<Option<String>, String> {
    one(current, WriteOp::UnifiedDiff { diff: d.into() })
}

// The patch model's own rules are tested in sage-patch; these check that a
// `unified-diff` write goes through it, errors included.
#[test]
fn unified_diff_multi_hunk_exact() {
    let d = "--- a/app.py\n+++ b/app.py\n@@ -1,3 +1,3 @@\n l1\n-l2\n+L2\n l3\n@@ -8,3 +8,4 @@\n l8\n l9\n+l9b\n l10\n";
    assert_eq!(
        diff(Some(TEN), d).unwrap().unwrap(),
        "l1\nL2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\nl9b\nl10\n"
    );
}

#[test]
fn unified_diff_fails_clearly() {
    let d = "@@ -1,2 +1,2 @@\n l1\n-nope\n+x\n";
    let e = diff(Some(TEN), d).unwrap_err();
    assert!(e.contains("hunk 1 (@@ -1,2 +1,2 @@) does not apply"), "{e}");
    assert!(e.contains("expected `nope`, found `l2`"), "{e}");
    assert!(diff(Some(TEN), "just prose\n")
        .unwrap_err()
        .contains("no hunk"));
    assert_eq!(diff(Some(TEN), "\n"), Ok(Some(TEN.to_string())));
    assert!(diff(None, "").is_err());
    assert!(diff(Some(TEN), "@@ -x +y @@\n")
        .unwrap_err()
        .contains("malformed"));
    assert!(diff(None, "@@ -1 +1 @@\n-l1\n+x\n")
        .unwrap_err()
        .contains("does not exist"));
}

#[test]
fn unified_diff_new_and_deleted_file() {
    let d = "diff --git a/new.py b/new.py\nnew file mode 100644\n--- /dev/null\n+++ b/new.py\n@@ -0,0 +1,2 @@\n+import os\n+x = 1\n";
    assert_eq!(diff(None, d).unwrap().unwrap(), "import os\nx = 1\n");
    assert!(diff(Some("exists\n"), d)
        .unwrap_err()
        .contains("already exists"));
    let del = "--- a/x.py\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\n-b\n";
    assert_eq!(diff(Some("a\nb\n"), del), Ok(None));
}

#[test]
fn reconstruct_numbers_writes_records_failures_and_continues() {
    let t = trace(vec![
        w(
            "app.py",
            WriteOp::StrReplace {
                old: "a".into(),
                new: "b".into(),
                all: false,
                tolerance: sage_trace::Tolerance::TrimmedRetry,
            },
        ),
        w(
            "app.py",
            WriteOp::StrReplace {
                old: "zzz".into(),
                new: "q".into(),
                all: false,
                tolerance: sage_trace::Tolerance::TrimmedRetry,
            },
        ),
        w(
            "./app.py",
            WriteOp::Insert {
                after_line: 1,
                text: "c\n".into(),
            },
        ),
        w(
            "new.py",
            WriteOp::FullContent {
                content: "n\n".into(),
            },
        ),
    ]);
    let h = reconstruct(&base("a\n"), &t);
    assert_eq!(h.condition, ReconstructionCondition::PerWrite);
    assert_eq!(h.snapshots.len(), 3);
    assert_eq!(h.failures.len(), 1);
    let f = &h.failures[0];
    assert_eq!((f.write, f.turn, f.artefact.as_str()), (2, 2, "app.py"));
    assert_eq!(f.reason, "str_replace: old text not found");
    assert_eq!(h.snapshots[1].write, 3);
    assert_eq!(h.snapshots[1].artefact, "app.py");
    assert_eq!(h.final_content("app.py"), Some("b\nc\n"));
    assert_eq!(h.final_content("new.py"), Some("n\n"));
    assert_eq!(h.snapshots_of("app.py").len(), 2);
    assert_eq!(h.state_before(3), Some("b\n"));
    let d = h.write_diff(3).unwrap();
    assert!(d.contains("+c"), "{d}");
    assert_eq!(h.artefact_diffs("app.py").len(), 2);
    assert_eq!(h.artefacts(), ["app.py", "new.py"]);
}

#[test]
fn reconstruction_conditions() {
    let none = reconstruct(&base("a\n"), &trace(vec![]));
    assert_eq!(none.condition, ReconstructionCondition::NoWrite);
    assert_eq!(none.final_content("app.py"), Some("a\n"));
    let fc = || {
        w(
            "app.py",
            WriteOp::FullContent {
                content: "b\n".into(),
            },
        )
    };
    let single = reconstruct(&base("a\n"), &trace(vec![fc()]));
    assert_eq!(single.condition, ReconstructionCondition::SingleWrite);
    let mut fin = fc();
    fin.final_state = true;
    let h = reconstruct(&base("a\n"), &trace(vec![fin.clone()]));
    assert_eq!(h.condition, ReconstructionCondition::FinalOnly);
    assert_eq!(h.final_content("app.py"), Some("b\n"));
    assert!(h.snapshots.is_empty(), "a final state is no turn's write");
    // One edit plus its submission is one write, not two (cause 1 of issue 12).
    let h = reconstruct(&base("a\n"), &trace(vec![fin, fc()]));
    assert_eq!(h.condition, ReconstructionCondition::SingleWrite);
    assert_eq!(h.snapshots.len(), 1);
    assert_eq!(h.snapshots[0].write, 1);
    assert_eq!(h.snapshots[0].turn, 2);
    assert_eq!(h.final_states.len(), 1);
    let two = reconstruct(&base("a\n"), &trace(vec![fc(), fc()]));
    assert_eq!(two.condition, ReconstructionCondition::PerWrite);
}

const ECB: &str = "cipher = AES.new(key, AES.MODE_ECB)";
const GCM: &str = "cipher = AES.new(key, AES.MODE_GCM)";

fn history_of(baseline: &str, contents: &[&str]) -> ArtefactHistory {
    let t = trace(
        contents
            .iter()
            .map(|c| {
                w(
                    "app.py",
                    WriteOp::FullContent {
                        content: c.to_string(),
                    },
                )
            })
            .collect(),
    );
    reconstruct(&base(baseline), &t)
}

#[test]
fn presence_matches_each_state_once_with_the_same_answers() {
    // Repeated and reverted states (answered from the memo) get the answer a fresh match
    // of that state gives, in order.
    let (with, without) = (
        "key = 1\ncipher = AES.new(key, AES.MODE_ECB)\n",
        "key = 1\n",
    );
    let h = history_of(
        without,
        &[with, with, without, with, without, without, with],
    );
    let m = Matcher::new("app.py", "AES.new(key, AES.MODE_ECB)", None);
    let along: Vec<bool> = presence_along(&m, &h, "app.py")
        .iter()
        .map(|p| p.present)
        .collect();
    let fresh: Vec<bool> = std::iter::once(without)
        .chain(h.snapshots.iter().filter_map(|s| s.content.as_deref()))
        .map(|c| m.found_in(c))
        .collect();
    assert_eq!(along, fresh);
    assert_eq!(along, [false, true, true, false, true, false, false, true]);
    // Provenance and checks on the states matched once equal the one-call forms.
    let a = anchor(Some("AES.new(key, AES.MODE_ECB)"));
    let states = FragmentStates::of(&a, &h);
    let p = provenance_from(&states, &h, None);
    assert_eq!(p, provenance(&a, &h));
    assert_eq!(checks_from(&states, &p), checks(&a, &h, &p));
}

fn prov(baseline: &str, contents: &[&str]) -> (ProvenanceResult, Vec<Check>) {
    let h = history_of(baseline, contents);
    let a = anchor(Some("cipher = AES.new(key,\n    AES.MODE_ECB)"));
    let r = provenance(&a, &h);
    let c = checks(&a, &h, &r);
    (r, c)
}

fn all_pass(c: &[Check]) {
    assert!(c.iter().all(|c| c.passed), "{c:#?}");
    assert!(!c.is_empty());
}

#[test]
fn agent_introduced_with_introducing_write() {
    let (r, c) = prov("x = 1\n", &["x = 2\n", ECB, ECB]);
    assert_eq!(r.provenance, Provenance::AgentIntroduced);
    assert_eq!(
        r.introducing_write,
        Some(IntroducingWrite {
            write: 2,
            turn: 2,
            reinstated: false,
            deduced: false,
        })
    );
    assert_eq!(r.matching, "python-tokens");
    let seq: Vec<bool> = r.presence.iter().map(|p| p.present).collect();
    assert_eq!(seq, [false, false, true, true]);
    all_pass(&c);
    let names: Vec<&str> = c.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "fragment-absent-from-baseline",
            "fragment-present-after-introducing-write",
            "fragment-present-in-every-later-snapshot"
        ]
    );
}

#[test]
fn remove_then_reinstate_names_the_reinstating_write() {
    let (r, c) = prov("x = 1\n", &[ECB, GCM, ECB]);
    assert_eq!(
        r.introducing_write,
        Some(IntroducingWrite {
            write: 3,
            turn: 3,
            reinstated: true,
            deduced: false,
        })
    );
    all_pass(&c);
}

#[test]
fn baseline_eliminated_then_reinstated_is_agent_introduced() {
    let (r, c) = prov(ECB, &[GCM, ECB]);
    assert_eq!(r.provenance, Provenance::AgentIntroduced);
    assert_eq!(
        r.introducing_write,
        Some(IntroducingWrite {
            write: 2,
            turn: 2,
            reinstated: true,
            deduced: false,
        })
    );
    assert!(r.reason.contains("eliminated by write 1"), "{}", r.reason);
    all_pass(&c);
    assert!(c[0].detail.contains("eliminated"), "{}", c[0].detail);
}

#[test]
fn inherited_when_never_eliminated() {
    let (r, c) = prov(ECB, &[&format!("import os\n{ECB}\n")]);
    assert_eq!(r.provenance, Provenance::Inherited);
    assert_eq!(r.introducing_write, None);
    all_pass(&c);
    let (r, c) = prov(ECB, &[]);
    assert_eq!(r.provenance, Provenance::Inherited);
    assert_eq!(r.presence.len(), 1);
    all_pass(&c);
}

#[test]
fn no_code_location_cases() {
    let h = history_of(ECB, &[GCM]);
    let r = provenance(&anchor(None), &h);
    assert_eq!(r.provenance, Provenance::NoCodeLocation);
    assert_eq!(r.reason, "the failure anchor has no code fragment");
    assert!(r.presence.is_empty());
    all_pass(&checks(&anchor(None), &h, &r));
    let a = anchor(Some("hashlib.md5(data)"));
    let r = provenance(&a, &h);
    assert_eq!(r.provenance, Provenance::NoCodeLocation);
    assert!(r.reason.contains("neither the baseline nor any snapshot"));
    assert_eq!(r.presence.len(), 2);
    // Found earlier but gone from the final snapshot: decision (b).
    let (r, c) = prov(ECB, &[GCM]);
    assert_eq!(r.provenance, Provenance::NoCodeLocation);
    assert_eq!(r.reason, "fragment not present in the final snapshot");
    assert_eq!(r.introducing_write, None);
    all_pass(&c);
}

#[test]
fn checks_catch_an_inconsistent_result() {
    let h = history_of("x = 1\n", &[ECB, ECB]);
    let a = anchor(Some(ECB));
    let mut r = provenance(&a, &h);
    r.introducing_write = Some(IntroducingWrite {
        write: 2,
        turn: 2,
        reinstated: false,
        deduced: false,
    });
    let c = checks(&a, &h, &r);
    let bad: Vec<&str> = c
        .iter()
        .filter(|c| !c.passed)
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(bad, ["fragment-absent-from-baseline"]);
    r.provenance = Provenance::Inherited;
    let c = checks(&a, &h, &r);
    assert!(c
        .iter()
        .any(|c| !c.passed && c.name == "fragment-present-in-baseline"));
    assert!(c
        .iter()
        .any(|c| !c.passed && c.name == "no-introducing-write"));
}

#[test]
fn failed_write_leaves_state_and_is_not_a_snapshot() {
    let t = trace(vec![
        w(
            "app.py",
            WriteOp::StrReplace {
                old: "MODE_GCM".into(),
                new: "MODE_ECB".into(),
                all: false,
                tolerance: sage_trace::Tolerance::TrimmedRetry,
            },
        ),
        w(
            "app.py",
            WriteOp::StrReplace {
                old: "nothing".into(),
                new: "x".into(),
                all: false,
                tolerance: sage_trace::Tolerance::TrimmedRetry,
            },
        ),
    ]);
    let h = reconstruct(&base(&format!("{GCM}\n")), &t);
    assert_eq!(h.failures.len(), 1);
    let r = provenance(&anchor(Some(ECB)), &h);
    assert_eq!(r.introducing_write.map(|i| i.write), Some(1));
    assert_eq!(r.presence.len(), 2);
}

/// A write failure says which knowledge it lacked: a file nothing is known of is not a file the
/// trace deleted, and an edit on a partial baseline may need a line the trace never shows.
#[test]
fn a_write_failure_says_what_was_not_known() {
    let sr = |old: &str| WriteOp::StrReplace {
        old: old.into(),
        new: "z".into(),
        all: false,
        tolerance: sage_trace::Tolerance::Exact,
    };
    let partial = crate::knowledge::sparse(&BTreeMap::from([(2, "b".to_string())]));
    let baselines = BTreeMap::from([
        ("app.py".to_string(), "a\n".to_string()),
        ("part.py".to_string(), partial),
    ]);
    let t = trace(vec![
        w("unseen.py", sr("a")),
        w("app.py", WriteOp::Delete),
        w("app.py", sr("a")),
        w("part.py", sr("b")),
        w("part.py", sr("c")),
    ]);
    let h = reconstruct(&baselines, &t);
    let reasons: Vec<(usize, &str)> = h
        .failures
        .iter()
        .map(|f| (f.write, f.reason.as_str()))
        .collect();
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert!(reasons[0]
        .1
        .starts_with("str_replace: nothing is known of the file before this write (no baseline"));
    // Deleted by write 2: it does not exist.
    assert_eq!(reasons[1], (3, "str_replace: artefact does not exist"));
    // Write 4 lands on the known line 2; write 5's text is on no known line.
    assert_eq!(reasons[2].0, 5);
    assert!(reasons[2]
        .1
        .starts_with("str_replace: old text not found among the lines the trace shows"));
    let d = h.write_diff(4).unwrap();
    assert!(
        d.contains("-b\n+z\n") && d.contains("[a line the trace never shows]"),
        "{d}"
    );
}

/// A file the trace shows only in the snippets its editor prints after each edit: the first
/// edit fails (nothing is known before it), the snippet after it tells some lines, and the
/// next edit applies to them.
#[test]
fn a_later_view_lets_the_next_write_apply() {
    let sr = |old: &str, new: &str| WriteOp::StrReplace {
        old: old.into(),
        new: new.into(),
        all: false,
        tolerance: sage_trace::Tolerance::Exact,
    };
    let t = trace(vec![
        w("t.py", sr("a = 1", "a = 2")),
        w("t.py", sr("b = 1", "b = 2")),
    ]);
    let mut k = crate::knowledge::FileKnowledge::default();
    // The snippet after write 1: lines 3-4 of the file as it then was.
    k.add_later_view(
        "t.py",
        1,
        BTreeMap::from([(3, "a = 2".to_string()), (4, "b = 1".to_string())]),
    );
    let h = reconstruct_known(&k, &t, &[]);
    assert_eq!(h.failures.len(), 1, "{:?}", h.failures);
    assert_eq!(h.failures[0].write, 1);
    let after = h.snapshot(2).unwrap().content.as_deref().unwrap();
    let known: Vec<&str> = after
        .lines()
        .filter(|l| !crate::knowledge::is_unknown(l))
        .collect();
    assert_eq!(known, ["a = 2", "b = 2"]);
    // Without the view, both fail.
    let h = reconstruct_known(&crate::knowledge::FileKnowledge::default(), &t, &[]);
    assert_eq!(h.failures.len(), 2);
}

/// An insert into a file nothing is known of, which the trace shows after it (the editor's
/// snippet): it needs only its position, so it lands after that many unknown lines; without
/// a later view the file may not exist, and the insert fails.
#[test]
fn an_insert_into_a_file_shown_only_later_lands_at_its_line() {
    let ins = WriteOp::Insert {
        after_line: 2,
        text: "x = 1\n".into(),
    };
    let t = trace(vec![w("t.py", ins)]);
    let mut k = crate::knowledge::FileKnowledge::default();
    k.add_later_view(
        "t.py",
        1,
        BTreeMap::from([(2, "import os".to_string()), (3, "x = 1".to_string())]),
    );
    let h = reconstruct_known(&k, &t, &[]);
    assert!(h.failures.is_empty(), "{:?}", h.failures);
    let after = h.snapshot(1).unwrap().content.as_deref().unwrap();
    assert_eq!(after.lines().nth(2), Some("x = 1"));
    assert!(crate::knowledge::is_unknown(after.lines().nth(1).unwrap()));
    let h = reconstruct_known(&crate::knowledge::FileKnowledge::default(), &t, &[]);
    assert_eq!(h.failures.len(), 1);
}
