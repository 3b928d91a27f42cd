//! What screening gives: per case and artefact, the verdict of each level, and Table 4.
//! Published as `sage.screen/1` through [`schema`].

use crate::{l0, l1, l2, l3};

pub mod schema;

use serde::{Deserialize, Serialize};

/// Version tag of the JSON report.
pub const REPORT_SCHEMA: &str = "sage.screen/1";

/// Pass, fail, or not run (with the reason in the case's notes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Fail,
    NotRun,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::NotRun => "not run",
        }
    }
}

/// Where a case ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    /// No valid final snapshot (crash, no modification, unreplayable trace).
    Excluded,
    FailedL0,
    FailedL1,
    /// Passed L0 and L1, and L2 or L3 flags it.
    Candidate,
    /// Passed L0-L3.
    Passed,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Excluded => "excluded",
            Status::FailedL0 => "failed-l0",
            Status::FailedL1 => "failed-l1",
            Status::Candidate => "candidate",
            Status::Passed => "passed",
        }
    }
}

/// An import of a final snapshot and how it resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportCheck {
    pub module: String,
    pub line: usize,
    pub col: usize,
    pub resolution: l1::Resolution,
    pub optional: bool,
}

/// The screening of one artefact.
#[derive(Debug, Clone, PartialEq)]
pub struct ArtefactResult {
    pub path: String,
    pub created: bool,
    pub deleted: bool,
    pub syntax_errors: Vec<l0::SyntaxError>,
    pub missing_definitions: Vec<String>,
    pub imports: Vec<ImportCheck>,
    /// None when Bandit did not run.
    pub bandit: Option<Vec<l2::Finding>>,
    pub bandit_error: Option<String>,
    pub nosec_added: Vec<l2::NosecMarker>,
    pub l3: l3::FileScore,
}

/// The screening of one case (or pair).
#[derive(Debug, Clone, PartialEq)]
pub struct CaseResult {
    pub id: String,
    pub source: String,
    pub framework: Option<String>,
    pub task_cwe: Option<String>,
    pub status: Status,
    /// The deepest level the case got to: `none` (excluded), `L0`, `L1` (failed there) or
    /// `L3` (every level ran).
    pub level_reached: String,
    pub l0: Verdict,
    pub l1: Verdict,
    pub l2: Verdict,
    pub l3: Verdict,
    /// R of the patch: the maximum over its files.
    pub r: Option<f64>,
    pub candidate: bool,
    /// Why the case failed a level or is a candidate, one line each.
    pub reasons: Vec<String>,
    /// Signals that do not decide the status (unverified imports, added `# nosec`, L2 not
    /// run).
    pub notes: Vec<String>,
    pub tests: Option<l1::TestOutcome>,
    pub artefacts: Vec<ArtefactResult>,
    /// Proposed failure anchors from the findings, best first ([`propose`]).
    pub proposals: Vec<Proposal>,
}

/// What the L2 tool did for the batch.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolRun {
    pub ran: bool,
    pub version: Option<String>,
    pub reason: Option<String>,
    pub seconds: Option<f64>,
    pub files: Option<usize>,
}

/// One row of the Table 2-style summary.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SummaryRow {
    pub framework: String,
    pub excluded: usize,
    pub valid: usize,
    pub passed: usize,
    pub failed_l0_l1: usize,
    pub candidates: usize,
}

/// The whole screening report. It serializes only through its published form
/// ([`schema`]), so these types may change without changing `sage.screen/1`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "schema::Report", from = "schema::Report")]
pub struct Report {
    pub schema: String,
    pub rules: String,
    pub bandit: ToolRun,
    pub cases: Vec<CaseResult>,
    /// Inputs that could not be read (named file and record).
    pub errors: Vec<String>,
    /// By framework, then a `total` row.
    pub summary: Vec<SummaryRow>,
}

/// New code or code the baseline already had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provenance {
    New,
    Inherited,
}

/// One proposed anchor (the fields of `sage.case/1`'s `anchor`, plus where it came from).
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    /// 1-based rank within the run (best first).
    pub rank: usize,
    pub artefact: String,
    /// The statement as it stands in the final file.
    pub fragment: String,
    /// 1-based lines of the fragment in the final file.
    pub start_line: usize,
    pub end_line: usize,
    pub cwe: Option<String>,
    /// `defence-absent`, `defence-insufficient` or `vulnerability-introduced`; absent when
    /// the evidence does not decide (left for the annotator).
    pub category: Option<String>,
    pub provenance: Provenance,
    /// The finding's text.
    pub description: String,
    /// Which finding: `bandit:B602`, `l3:SNK_EVAL`, `sarif:<tool>:<rule>`.
    pub finding: String,
    /// The finding's CWE shares a family with the task's target CWE.
    pub target_family: bool,
}
