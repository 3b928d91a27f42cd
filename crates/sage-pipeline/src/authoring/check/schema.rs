//! What `sage case check --format json` prints (`docs/case.md`), as types of its own.
//!
//! Every record of the report is defined here, with its field names and serde attributes, and
//! converted explicitly from the values the check works with ([`super::CaseCheck`] and its
//! problems and replay verdicts), which derive no serde: renaming or adding a field of theirs
//! stops the build here, at the conversion, instead of silently changing the published JSON.
//! A file's verdict and the counts are published as `sage.replay/1` publishes them
//! ([`crate::trace_replay::schema`]). Nothing reads the report back, so the conversions go one
//! way; they are written with [`mirror_out!`]: an exhaustive pattern takes each
//! internal value apart, so each internal field is named once here.

use super as check;
use crate::trace_replay::schema::{Counts, Verdict};
use sage_schema::{mirror_out, Conv};
use serde::Serialize;

/// The name of `sage case check --format json`'s format, its first field.
pub const CASE_CHECK_SCHEMA: &str = "sage.case-check/1";

/// What `sage case check --format json` prints: each case's check, how many were checked and
/// how many have problems.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseCheckReport {
    pub schema: &'static str,
    pub cases: Vec<CaseCheck>,
    pub checked: usize,
    pub with_problems: usize,
}

impl CaseCheckReport {
    pub fn new(checks: Vec<check::CaseCheck>) -> CaseCheckReport {
        CaseCheckReport {
            schema: CASE_CHECK_SCHEMA,
            checked: checks.len(),
            with_problems: checks.iter().filter(|c| !c.problems.is_empty()).count(),
            cases: checks.conv(),
        }
    }
}

mirror_out! {
    /// The check of one case.
    pub struct CaseCheck = check::CaseCheck {
        dir: String,
        problems: Vec<Problem>,
        verified: Vec<String>,
        notes: Vec<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        replay: Option<ReplayVerdicts>,
    }
}

mirror_out! {
    /// One problem and how to fix it.
    pub struct Problem = check::Problem {
        what: String,
        fix: String,
    }
}

mirror_out! {
    /// `sage replay`'s verdicts on a case, file by file.
    pub struct ReplayVerdicts = check::ReplayVerdicts {
        results: Vec<String>,
        counts: Counts,
        files: Vec<FileVerdict>,
        execution: String,
    }
}

mirror_out! {
    /// One file's verdict.
    pub struct FileVerdict = check::FileVerdict {
        path: String,
        baseline: String,
        verdict: Verdict,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        failed_writes: Vec<String>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        executed: Vec<String>,
    }
}

#[cfg(test)]
mod tests {
    use super::check;
    use crate::trace_replay;

    /// The JSON of the fields `golden__case_check` leaves out (a file's failed and executed
    /// writes without a reason, a case whose replay failed), pinned as written before the
    /// format had types of its own: the records here write them byte for byte.
    #[test]
    fn the_json_of_fields_the_golden_run_leaves_out_is_pinned() {
        let replayed = check::CaseCheck {
            dir: "c".into(),
            replay: Some(check::ReplayVerdicts {
                results: vec![],
                counts: trace_replay::Counts::default(),
                files: vec![check::FileVerdict {
                    path: "a.py".into(),
                    baseline: "none".into(),
                    verdict: trace_replay::Verdict::Differs,
                    reason: None,
                    failed_writes: vec!["turn 2: no match".into()],
                    executed: vec!["turn 3: verified".into()],
                }],
                execution: "on".into(),
            }),
            ..check::CaseCheck::default()
        };
        let unreplayed = check::CaseCheck {
            dir: "d".into(),
            problems: vec![check::Problem {
                what: "w".into(),
                fix: "f".into(),
            }],
            ..check::CaseCheck::default()
        };
        let report = super::CaseCheckReport::new(vec![replayed, unreplayed]);
        assert_eq!((report.checked, report.with_problems), (2, 1));
        assert_eq!(
            serde_json::to_string(&report.cases).unwrap(),
            r#"[{"dir":"c","problems":[],"verified":[],"notes":[],"replay":{"results":[],"counts":{"files":0,"matches":0,"differs":0,"unverifiable":0},"files":[{"path":"a.py","baseline":"none","verdict":"differs","failed_writes":["turn 2: no match"],"executed":["turn 3: verified"]}],"execution":"on"}},{"dir":"d","problems":[{"what":"w","fix":"f"}],"verified":[],"notes":[]}]"#
        );
    }
}
