//! A replay against what a case says the files became, as `sage case init` and `sage case
//! check` use it: the replay's end state of an artefact, the first line where two states
//! differ, and which write failures lie outside a case. (The result's own
//! `final-state-matches-replay` check is [`crate::independent_checks`].)

use crate::ArtefactHistory;
use sage_trace::case::{Case, FailureAnchor};

/// The content of `artefact` after the last applied write that is the trace's own (not a
/// final-state write a case or a submission supplied), or the baseline when the trace never
/// wrote it. `None` = the artefact does not exist at the end.
pub fn replayed_end(history: &ArtefactHistory, artefact: &str) -> Option<String> {
    match history
        .snapshots
        .iter()
        .rev()
        .find(|s| s.artefact == artefact && !s.final_state)
    {
        Some(s) => s.content.clone(),
        None => history.baselines.get(artefact).cloned(),
    }
}

/// The first line where `got` and `want` differ: (1-based line, got's line, want's line);
/// `None` when they are equal. A missing line is shown as `<end of file>`; a difference only
/// in the final newline is reported on the last line.
pub fn first_difference(got: &str, want: &str) -> Option<(usize, String, String)> {
    if got == want {
        return None;
    }
    let nl = |s: &str| {
        if s.ends_with('\n') {
            "(ends with a newline)"
        } else {
            "(ends without a newline)"
        }
    };
    if got.trim_end_matches('\n') == want.trim_end_matches('\n') {
        let n = got.trim_end_matches('\n').split('\n').count();
        return Some((n, nl(got).to_string(), nl(want).to_string()));
    }
    let g: Vec<&str> = got.split('\n').collect();
    let w: Vec<&str> = want.split('\n').collect();
    let eof = || "<end of file>".to_string();
    for i in 0..g.len().max(w.len()) {
        let (a, b) = (g.get(i), w.get(i));
        if a != b {
            return Some((
                i + 1,
                a.map(|x| x.to_string()).unwrap_or_else(eof),
                b.map(|x| x.to_string()).unwrap_or_else(eof),
            ));
        }
    }
    Some((g.len(), nl(got).into(), nl(want).into()))
}

/// Whether a write that could not be applied concerns a file outside the case: one with no
/// case baseline and no final file that is not the anchor's artefact, while the anchor's artefact is
/// one the trace's applied writes do change (so the failure is not a misnamed anchor). Such a
/// write is kept in the result's `write_failures` but is not a problem of the case: the file is
/// context the case does not ask about (a scratch or test file the trace edits without ever
/// showing it whole). `anchor` is the case's (a run has none to be outside of).
pub fn outside_case(
    case: &Case,
    anchor: &FailureAnchor,
    history: &ArtefactHistory,
    artefact: &str,
) -> bool {
    let anchor = history.resolve_name(&anchor.artefact);
    let name = history.resolve_name(artefact);
    name != anchor
        && !case
            .baselines
            .keys()
            .any(|k| history.resolve_name(k) == name)
        && !case
            .final_files
            .keys()
            .any(|k| history.resolve_name(k) == name)
        && history.snapshots.iter().any(|s| s.artefact == anchor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences() {
        assert_eq!(first_difference("a\nb\n", "a\nb\n"), None);
        assert_eq!(
            first_difference("a\nb\n", "a\nc\n"),
            Some((2, "b".into(), "c".into()))
        );
        assert_eq!(
            first_difference("a\n", "a\nb\n"),
            Some((2, "".into(), "b".into()))
        );
        assert_eq!(
            first_difference("a\nb", "a\nb\n"),
            Some((
                2,
                "(ends without a newline)".into(),
                "(ends with a newline)".into()
            ))
        );
    }

    /// A case folder with `app.py` as baseline and anchor, and a trace with a str_replace
    /// (which needs an existing file) to `write_to`, then one to `second`.
    fn case_and_history(write_to: &str, second: &str) -> (Case, ArtefactHistory) {
        use sage_trace::{Actor, CanonicalTrace, RawRef, Turn, TurnKind, Write, WriteOp};
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("baseline")).unwrap();
        std::fs::write(d.path().join("baseline/app.py"), "x = 1\n").unwrap();
        std::fs::write(d.path().join("t.json"), "[]").unwrap();
        let m = r#"{"schema":"sage.case/1","trace":{"files":["t.json"]},
            "baseline":{"app.py":"baseline/app.py"},"task":{"description":"t"},
            "anchor":{"artefact":"app.py","fragment":"x = 2","category":"defence-absent","cwe":"CWE-1","description":"d"}}"#;
        let case = Case::from_manifest(
            d.path(),
            serde_json::from_str(m).unwrap(),
            &Default::default(),
        )
        .unwrap();
        let mut t = CanonicalTrace::new("test", vec!["t.json".into()]);
        let mut turn = Turn::new(Actor::new("agent", None), TurnKind::Implementation);
        for (a, old) in [(write_to, "y = 1"), (second, "x = 1")] {
            turn.writes.push(Write {
                artefact: a.into(),
                op: WriteOp::StrReplace {
                    old: old.into(),
                    new: "x = 2".into(),
                    all: false,
                    tolerance: sage_trace::Tolerance::TrimmedRetry,
                },
                via: "edit".into(),
                final_state: false,
                raw: RawRef::synthetic("t.json", "test"),
            });
        }
        t.push_turn(turn);
        let h = crate::reconstruct(&case.baselines, &t, &Default::default());
        (case, h)
    }

    #[test]
    fn failures_outside_the_case_only_when_the_anchor_is_written() {
        // A scratch file the case has no baseline for, while app.py is written: outside.
        let (case, h) = case_and_history("notes/scratch.py", "app.py");
        assert_eq!(h.failures.len(), 1);
        assert!(outside_case(
            &case,
            case.anchor().unwrap(),
            &h,
            "notes/scratch.py"
        ));
        // A failure on the anchor's own artefact is never outside.
        assert!(!outside_case(&case, case.anchor().unwrap(), &h, "app.py"));
        // The trace writes src/app.py only: the anchor's app.py is never written (misnamed),
        // so the failures stay problems.
        let (case, h) = case_and_history("src/app.py", "src/app.py");
        assert_eq!(h.failures.len(), 2);
        assert!(!outside_case(
            &case,
            case.anchor().unwrap(),
            &h,
            "src/app.py"
        ));
    }
}
