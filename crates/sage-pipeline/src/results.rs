//! The results of a localize run, as `results.json` (`sage.results/1`, documented in
//! `docs/results.md`) holds them: one [`CaseResult`] per case and judge run, the cases that
//! were skipped, and one Table-5 [`Summary`] per judge run.
//!
//! These are the values the pipeline works with; their published form is [`schema`], which
//! every one of them is serialized and read through.

use sage_history::origin::OriginResult;
use sage_history::{Check, ProvenanceResult, ReconstructionCondition, WriteFailure};
use sage_judge::{JudgeId, TurnOutcome};
use sage_trace::case::{FailureAnchor, Metadata};
use sage_trace::{Actor, TraceCounts, TurnKind};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

pub mod schema;

/// Version tag of result files.
pub const RESULTS_VERSION: &str = "sage.results/1";

/// One turn, as results and reports list it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(into = "schema::TurnInfo", from = "schema::TurnInfo")]
pub struct TurnInfo {
    pub turn: usize,
    pub actor: Actor,
    pub kind: TurnKind,
    /// Positions (1-based, trace order) of the writes this turn holds.
    pub writes: Vec<usize>,
}

/// The outcome of one case under one judge run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(into = "schema::CaseResult", from = "schema::CaseResult")]
pub struct CaseResult {
    pub case_id: String,
    pub case_dir: String,
    pub task_id: String,
    pub task_cwe: Option<String>,
    /// The CVE the task was cut from, when the case names one.
    pub task_cve: Option<String>,
    /// The task statement the agent was given, so a reader can see when the task itself
    /// asked for the risky behaviour.
    pub task_description: String,
    pub metadata: Metadata,
    pub anchor: FailureAnchor,
    /// The agent framework: the case's `metadata.framework`, else its `trace.framework`,
    /// else the adapter that read the trace.
    pub framework: String,
    /// The adapter that read the trace, when it is not the framework's name (an OpenHands
    /// run recorded in Claude's stream format is `openhands` read as `claude-stream`).
    pub trace_format: Option<String>,
    pub counts: TraceCounts,
    pub turns: Vec<TurnInfo>,
    pub reconstruction_condition: ReconstructionCondition,
    pub write_failures: Vec<WriteFailure>,
    pub provenance: ProvenanceResult,
    pub judge: JudgeId,
    pub run: u32,
    pub scores: Vec<TurnOutcome>,
    pub origin: OriginResult,
    /// The automatic checks; a failed one is reported, never hidden.
    pub checks: Vec<Check>,
    /// How the history read the trace where a reader should know: trace paths matched to the
    /// case's artefact keys by the path rule.
    pub notes: Vec<String>,
    /// How the result compares with the case's stated expectations, when it states them for
    /// this judge.
    pub expected: Option<ExpectedComparison>,
    /// Turns whose text addresses the judge (prompt injection), by the rules of
    /// `crates/sage-judge/rubrics/injection.toml`; their text is never accepted as a quote.
    pub injection: Vec<sage_judge::injection::InjectionFlag>,
}

impl CaseResult {
    pub fn failed_checks(&self) -> Vec<&Check> {
        self.checks.iter().filter(|c| !c.passed).collect()
    }
}

/// The comparison of a result with the `expected` block of its case manifest.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(
    into = "schema::ExpectedComparison",
    from = "schema::ExpectedComparison"
)]
pub struct ExpectedComparison {
    pub matched: bool,
    pub mismatches: Vec<String>,
}

/// A case that could not be processed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(into = "schema::Skipped", from = "schema::Skipped")]
pub struct Skipped {
    /// The case folder.
    pub case: String,
    /// Where it failed: `case`, `adapter`, `raw-trace`, `judge`.
    pub stage: String,
    pub message: String,
}

/// A problem in a case that was still processed (e.g. a write that could not be applied).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(into = "schema::Problem", from = "schema::Problem")]
pub struct Problem {
    pub case: String,
    pub message: String,
}

/// Everything `sage localize` produced for a folder.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(into = "schema::ResultSet", from = "schema::ResultSet")]
pub struct ResultSet {
    pub version: String,
    pub sage_version: String,
    pub judges: Vec<JudgeId>,
    pub runs: u32,
    /// The folder `sage localize` ran in (absolute): the results' case folders (`case_dir`,
    /// relative to it) are found from there wherever the results are opened from.
    pub case_root: Option<String>,
    pub results: Vec<CaseResult>,
    pub skipped: Vec<Skipped>,
    pub problems: Vec<Problem>,
    /// One Table-5 summary per judge and run.
    pub summaries: Vec<Summary>,
}

impl ResultSet {
    /// Read a result set from `results.json` or from a results folder holding it.
    pub fn read(path: &Path) -> Result<ResultSet, crate::InputError> {
        Self::read_file(path).map_err(crate::InputError)
    }

    fn read_file(path: &Path) -> Result<ResultSet, String> {
        let file = if path.is_dir() {
            path.join("results.json")
        } else {
            path.to_path_buf()
        };
        let text =
            std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let set: ResultSet = sage_trace::json::parse(&text)
            .map_err(|e| format!("{}: not a sage results file: {e}", file.display()))?;
        if set.version != RESULTS_VERSION {
            return Err(format!(
                "{}: results version {:?}, this sage reads {RESULTS_VERSION:?}",
                file.display(),
                set.version
            ));
        }
        Ok(set)
    }

    /// True when every input was processed without a problem.
    pub fn all_ok(&self) -> bool {
        self.skipped.is_empty() && self.problems.is_empty()
    }
}

/// A count and its share of the group, as the paper's tables print them.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
#[serde(into = "schema::Count", from = "schema::Count")]
pub struct Count {
    pub n: usize,
    /// Percentage of the group (0 when the group is empty).
    pub pct: f64,
}

impl Count {
    pub(crate) fn of(n: usize, total: usize) -> Count {
        Count {
            n,
            pct: if total == 0 {
                0.0
            } else {
                (n as f64) * 100.0 / (total as f64)
            },
        }
    }
}

/// Table 5 of the paper for one judge run: (a) code provenance, (b) origin type, (c) origin
/// timing for agent-introduced code, (d) missed detection opportunities.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(into = "schema::Summary", from = "schema::Summary")]
pub struct Summary {
    pub judge: JudgeId,
    pub run: u32,
    /// `real` or `constructed` when the run mixes cases of both kinds (`metadata.trace_source`),
    /// which are then summarized apart; absent for a summary of every case.
    pub subset: Option<String>,
    /// Cases with a result.
    pub cases: usize,
    pub provenance: BTreeMap<String, Count>,
    pub origin_type: BTreeMap<String, Count>,
    /// Localized agent-introduced cases: origin before / at the introducing write.
    pub timing_agent_introduced: BTreeMap<String, Count>,
    pub timing_n: usize,
    pub missed_opportunities: BTreeMap<String, Count>,
    /// Results with at least one failed automatic check.
    pub failed_checks: usize,
    /// Failed checks by name (how many results failed each).
    pub failed_check_names: BTreeMap<String, usize>,
    /// Turns over the group's results: scored, scoring failures, administrative (not scored).
    pub turns_scored: usize,
    pub turns_failed: usize,
    pub turns_administrative: usize,
    /// Results with at least one turn addressing the judge (see `injection` per result).
    pub injection_flagged: usize,
    /// Every case summarized is a constructed one (`metadata.trace_source`): written for the
    /// lexicon's rule, so its table carries no baseline notice. Not published.
    pub constructed_only: bool,
}

/// What a Table-5 [`Summary`] needs of one [`CaseResult`]: kept per result while the result
/// itself is written out and dropped, so a run's memory does not grow with its traces.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryRow {
    pub judge: JudgeId,
    pub run: u32,
    /// `metadata.trace_source` (`real`, `constructed`), or `unmarked`.
    pub subset: &'static str,
    pub provenance: sage_history::Provenance,
    /// The origin turn and type when localized.
    pub origin: Option<(usize, sage_history::origin::OriginType)>,
    pub introducing_turn: Option<usize>,
    pub missed: bool,
    /// Names of the failed checks, sorted, each once.
    pub failed_checks: Vec<String>,
    pub turns_scored: usize,
    pub turns_failed: usize,
    pub turns_administrative: usize,
    pub injection_flagged: bool,
}

impl From<&CaseResult> for SummaryRow {
    fn from(r: &CaseResult) -> Self {
        let mut failed_checks: Vec<String> =
            r.failed_checks().iter().map(|c| c.name.clone()).collect();
        failed_checks.sort();
        failed_checks.dedup();
        let count = |f: fn(&TurnOutcome) -> bool| r.scores.iter().filter(|o| f(o)).count();
        SummaryRow {
            judge: r.judge.clone(),
            run: r.run,
            subset: r
                .metadata
                .trace_source
                .map(|t| t.as_str())
                .unwrap_or("unmarked"),
            provenance: r.provenance.provenance,
            origin: r.origin.outcome.origin(),
            introducing_turn: r.provenance.introducing_write.map(|w| w.turn),
            missed: !r.origin.missed_opportunities.is_empty(),
            failed_checks,
            turns_scored: count(|o| matches!(o, TurnOutcome::Scored(_))),
            turns_failed: count(|o| matches!(o, TurnOutcome::Failed { .. })),
            turns_administrative: count(|o| matches!(o, TurnOutcome::Administrative { .. })),
            injection_flagged: !r.injection.is_empty(),
        }
    }
}

/// A localize run as it ends when each case's results were handed on (written out) as the
/// case finished: everything of a [`ResultSet`] but the results, plus one [`SummaryRow`] per
/// result.
#[derive(Debug, Clone, PartialEq)]
pub struct RunTally {
    pub judges: Vec<JudgeId>,
    pub runs: u32,
    pub skipped: Vec<Skipped>,
    pub problems: Vec<Problem>,
    pub rows: Vec<SummaryRow>,
    /// Cases with a result.
    pub cases: usize,
}

impl RunTally {
    /// True when every input was processed without a problem.
    pub fn all_ok(&self) -> bool {
        self.skipped.is_empty() && self.problems.is_empty()
    }
}
