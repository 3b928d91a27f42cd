//! What every SZZ stage shares: the variants, candidates, chains and results.

use crate::report::AgentReport;
use serde::Serialize;
use std::fmt;
use std::str::FromStr;

/// The SZZ variants `sage szz` implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Variant {
    /// B-SZZ: plain blame of the deleted lines at `fix^`.
    B,
    /// AG-SZZ: `-w`, comment filter, the more-than-20-files rule.
    Ag,
    /// MA-SZZ: AG plus `-M -C` and meta-changes (merges, mode changes, renames).
    Ma,
    /// R-SZZ: the latest MA-SZZ candidate.
    R,
    /// L-SZZ: the MA-SZZ candidate with the most modified lines.
    L,
    /// V-SZZ: walk each blamed line back by similarity; the earliest chain end.
    V,
    /// The agentic tracer (MAS-SZZ / AgentSZZ) with an oracle.
    Agent,
}

impl Variant {
    pub const ALL: [Variant; 7] = [
        Variant::B,
        Variant::Ag,
        Variant::Ma,
        Variant::R,
        Variant::L,
        Variant::V,
        Variant::Agent,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Variant::B => "b",
            Variant::Ag => "ag",
            Variant::Ma => "ma",
            Variant::R => "r",
            Variant::L => "l",
            Variant::V => "v",
            Variant::Agent => "agent",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Variant::B => "B-SZZ",
            Variant::Ag => "AG-SZZ",
            Variant::Ma => "MA-SZZ",
            Variant::R => "R-SZZ",
            Variant::L => "L-SZZ",
            Variant::V => "V-SZZ",
            Variant::Agent => "agent",
        }
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Variant {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim().to_ascii_lowercase();
        let s = s
            .strip_suffix("-szz")
            .or(s.strip_suffix("szz"))
            .unwrap_or(&s);
        Ok(match s {
            "b" => Variant::B,
            "ag" => Variant::Ag,
            "ma" => Variant::Ma,
            "r" => Variant::R,
            "l" => Variant::L,
            "v" => Variant::V,
            "agent" | "mas" | "agentic" => Variant::Agent,
            other => {
                return Err(format!(
                    "unknown variant {other:?} (b, ag, ma, r, l, v, agent)"
                ))
            }
        })
    }
}

/// A blamed line that led to a candidate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LineRef {
    /// The file at `fix^` and the line number there (the fix's old side).
    pub path: String,
    pub line: usize,
    /// Where blame attributed it: path and line in the candidate commit.
    pub orig_path: String,
    pub orig_line: usize,
    pub content: String,
}

/// One inducing-commit candidate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Candidate {
    pub commit: String,
    /// Committer time (Unix seconds).
    pub committed: i64,
    pub subject: String,
    /// The lines (or anchors) that point at it.
    pub lines: Vec<LineRef>,
    /// The agent's vote count or score, when the agent produced it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
}

/// V-SZZ's chain for one blamed line: commits from the first blame back to the chain end.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Chain {
    pub path: String,
    pub line: usize,
    pub commits: Vec<String>,
}

/// The answer of one variant for one fix.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SzzResult {
    pub variant: Variant,
    pub fix: String,
    /// The candidate set (B, AG, MA: all blamed commits; R, L: one; V: chain ends; agent:
    /// voted list, best first).
    pub candidates: Vec<Candidate>,
    /// The single answer when the variant picks one (R latest, L largest, V earliest chain
    /// end, agent top vote).
    pub selected: Option<String>,
    /// Commits ignored through `--ignore-rev` (large commits, merges, meta-changes).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ignored: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub chains: Vec<Chain>,
    /// Skipped files (binary, added, filtered), filtered lines, timeouts: said, not hidden.
    pub notes: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentReport>,
    pub git_calls: u64,
    pub elapsed_ms: u64,
}

impl SzzResult {
    pub fn commits(&self) -> Vec<&str> {
        self.candidates.iter().map(|c| c.commit.as_str()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variant_names_round_trip() {
        for v in Variant::ALL {
            assert_eq!(v.as_str().parse::<Variant>().unwrap(), v);
        }
        assert_eq!("MA-SZZ".parse::<Variant>().unwrap(), Variant::Ma);
        assert!("x".parse::<Variant>().is_err());
    }

    /// The JSON of the fields `golden__szz_json` and `golden__szz_eval_json` leave out
    /// (`ignored`, a score, the agent's fallback and missing root cause and review, evidence
    /// from the CVE and the message, a skipped and a failed case), pinned as written before
    /// the format had types of its own.
    #[test]
    fn the_json_of_fields_the_golden_runs_leave_out_is_pinned() {
        use crate::eval::{CaseResult, CaseStatus, EvalReport};
        use crate::oracle::{Evidence, EvidenceSource, RootCause};
        use crate::report::AnchorTrace;
        let result = SzzResult {
            variant: Variant::Ma,
            fix: "f1".into(),
            candidates: vec![Candidate {
                commit: "c1".into(),
                committed: 5,
                subject: "s".into(),
                lines: vec![],
                score: Some(0.5),
            }],
            selected: None,
            ignored: vec!["i1".into()],
            chains: vec![],
            notes: vec![],
            agent: Some(AgentReport {
                oracle: "lexicon".into(),
                root_cause: Some(RootCause {
                    summary: "x".into(),
                    evidence: vec![
                        Evidence {
                            claim: "a".into(),
                            quote: "q".into(),
                            source: EvidenceSource::Cve,
                        },
                        Evidence {
                            claim: "b".into(),
                            quote: "r".into(),
                            source: EvidenceSource::Message,
                        },
                    ],
                    keywords: vec![],
                    guards: vec!["g".into()],
                }),
                review_rounds: 0,
                review: None,
                traces: vec![AnchorTrace {
                    anchor: 1,
                    steps: vec![],
                    result: None,
                    stop: "no".into(),
                }],
                fallback: Some("ma".into()),
                ..AgentReport::default()
            }),
            git_calls: 1,
            elapsed_ms: 2,
        };
        assert_eq!(
            serde_json::to_string(&result).unwrap(),
            r#"{"variant":"ma","fix":"f1","candidates":[{"commit":"c1","committed":5,"subject":"s","lines":[],"score":0.5}],"selected":null,"ignored":["i1"],"notes":[],"agent":{"oracle":"lexicon","root_cause":{"summary":"x","evidence":[{"claim":"a","quote":"q","source":"cve"},{"claim":"b","quote":"r","source":"message"}],"keywords":[],"guards":["g"]},"review_rounds":0,"review":null,"hunks":[],"anchors":[],"traces":[{"anchor":1,"steps":[],"result":null,"stop":"no"}],"votes":[],"fallback":"ma","tool_calls":0,"cache_hits":0,"bytes_saved":0},"git_calls":1,"elapsed_ms":2}"#
        );
        let case = |status, selected: Option<&str>, notes: &[&str]| CaseResult {
            id: "1".into(),
            repo: "o/r".into(),
            fix: "f".into(),
            variant: Variant::Agent,
            labels: vec!["l".into()],
            predicted: vec![],
            selected: selected.map(Into::into),
            hits: 0,
            status,
            elapsed_ms: 3,
            notes: notes.iter().map(|n| n.to_string()).collect(),
        };
        let report = EvalReport {
            dataset: "d.json".into(),
            format: "rosa".into(),
            fixes_in_dataset: 2,
            fixes_run: 1,
            fixes_skipped: 1,
            missing_repos: vec![],
            scores: vec![],
            cases: vec![
                case(
                    CaseStatus::Skipped {
                        reason: "absent".into(),
                    },
                    None,
                    &[],
                ),
                case(
                    CaseStatus::Failed {
                        error: "bad".into(),
                    },
                    Some("c"),
                    &["n"],
                ),
            ],
            problems: vec!["p".into()],
        };
        assert_eq!(
            serde_json::to_string(&report).unwrap(),
            r#"{"dataset":"d.json","format":"rosa","fixes_in_dataset":2,"fixes_run":1,"fixes_skipped":1,"missing_repos":[],"scores":[],"cases":[{"id":"1","repo":"o/r","fix":"f","variant":"agent","labels":["l"],"predicted":[],"hits":0,"status":"skipped","reason":"absent","elapsed_ms":3},{"id":"1","repo":"o/r","fix":"f","variant":"agent","labels":["l"],"predicted":[],"selected":"c","hits":0,"status":"failed","error":"bad","elapsed_ms":3,"notes":["n"]}],"problems":["p"]}"#
        );
    }
}
