//! The published format `sage.screen/1` as types of its own.
//!
//! Every record a screen report holds is defined here, with its field names and serde
//! attributes, and converted explicitly from and to the values screening works with (the
//! levels' verdicts, L0's syntax errors, L1's imports and tests, L2's findings, L3's score).
//! The internal values carry no say over the published JSON: renaming a field of
//! [`crate::l3::FileScore`] (or adding one) stops the build here, at the conversion, instead of
//! silently changing every report. [`crate::Report`] serializes through these types
//! (`#[serde(into, from)]`), and reports already written (`sage confirm export` reads them)
//! are read through them too.
//!
//! The conversions are exhaustive struct literals, so each internal field is named once here:
//! [`mirror!`] writes a record with the same field names as its internal value and both
//! conversions. The same small macros serve `sage.results/1` in sage-pipeline, which this
//! crate cannot reach (it sits a floor below).

use super as report;
use crate::{l0, l1, l2, l3};
use sage_schema::{from_both, mirror, words};

fn not(b: &bool) -> bool {
    !*b
}

// ---- the report ------------------------------------------------------------------------

mirror! {
    /// The whole screening report.
    pub struct Report = report::Report {
        schema: String,
        rules: String,
        bandit: ToolRun,
        cases: Vec<CaseResult>,
        errors: Vec<String>,
        summary: Vec<SummaryRow>,
    }
}

from_both! {
    Report = report::Report;
    Proposal = report::Proposal;
}

mirror! {
    /// What the L2 tool did for the batch.
    pub struct ToolRun = report::ToolRun {
        ran: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        version: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        seconds: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        files: Option<usize>,
    }
}

mirror! {
    /// One row of the Table 2-style summary.
    pub struct SummaryRow = report::SummaryRow {
        framework: String,
        excluded: usize,
        valid: usize,
        passed: usize,
        failed_l0_l1: usize,
        candidates: usize,
    }
}

// ---- a case ----------------------------------------------------------------------------

mirror! {
    /// The screening of one case (or pair).
    pub struct CaseResult = report::CaseResult {
        id: String,
        source: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        framework: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task_cwe: Option<String>,
        status: Status,
        level_reached: String,
        l0: Verdict,
        l1: Verdict,
        l2: Verdict,
        l3: Verdict,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        r: Option<f64>,
        candidate: bool,
        reasons: Vec<String>,
        notes: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tests: Option<TestOutcome>,
        artefacts: Vec<ArtefactResult>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        proposals: Vec<Proposal>,
    }
}

words! {
    /// Where a case ended.
    #[serde(rename_all = "kebab-case")]
    pub enum Status = report::Status { Excluded, FailedL0, FailedL1, Candidate, Passed }
}

words! {
    /// Pass, fail, or not run.
    #[serde(rename_all = "kebab-case")]
    pub enum Verdict = report::Verdict { Pass, Fail, NotRun }
}

mirror! {
    /// The outcome of a case's own tests (L1).
    pub struct TestOutcome = l1::TestOutcome {
        status: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        seconds: f64,
        tail: String,
    }
}

mirror! {
    /// One proposed anchor.
    pub struct Proposal = report::Proposal {
        rank: usize,
        artefact: String,
        fragment: String,
        start_line: usize,
        end_line: usize,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cwe: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        category: Option<String>,
        provenance: Provenance,
        description: String,
        finding: String,
        #[serde(default, skip_serializing_if = "not")]
        target_family: bool,
    }
}

words! {
    /// New code or code the baseline already had.
    #[serde(rename_all = "kebab-case")]
    pub enum Provenance = report::Provenance { New, Inherited }
}

// ---- an artefact -----------------------------------------------------------------------

mirror! {
    /// The screening of one artefact.
    pub struct ArtefactResult = report::ArtefactResult {
        path: String,
        #[serde(default, skip_serializing_if = "not")]
        created: bool,
        #[serde(default, skip_serializing_if = "not")]
        deleted: bool,
        syntax_errors: Vec<SyntaxError>,
        missing_definitions: Vec<String>,
        imports: Vec<ImportCheck>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bandit: Option<Vec<Finding>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bandit_error: Option<String>,
        nosec_added: Vec<NosecMarker>,
        l3: FileScore,
    }
}

mirror! {
    /// One syntax error (L0).
    pub struct SyntaxError = l0::SyntaxError {
        line: usize,
        col: usize,
        node: String,
        message: String,
    }
}

mirror! {
    /// An import of a final snapshot and how it resolved (L1).
    pub struct ImportCheck = report::ImportCheck {
        module: String,
        line: usize,
        col: usize,
        resolution: Resolution,
        #[serde(default, skip_serializing_if = "not")]
        optional: bool,
    }
}

words! {
    /// How an import resolved.
    #[serde(rename_all = "kebab-case")]
    pub enum Resolution = l1::Resolution {
        Stdlib, Local, Baseline, Requirements, Interpreter, Unresolved, Unverified,
    }
}

mirror! {
    /// One Bandit finding (L2).
    pub struct Finding = l2::Finding {
        test_id: String,
        test_name: String,
        severity: String,
        confidence: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cwe: Option<u32>,
        families: Vec<String>,
        #[serde(default, skip_serializing_if = "not")]
        target_family: bool,
        #[serde(default, skip_serializing_if = "not")]
        in_baseline: bool,
        line: usize,
        col: usize,
        text: String,
    }
}

mirror! {
    /// A `# nosec` the final snapshot added.
    pub struct NosecMarker = l2::NosecMarker {
        line: usize,
        text: String,
    }
}

mirror! {
    /// The L3 result of one file.
    pub struct FileScore = l3::FileScore {
        r: f64,
        flagged: bool,
        persists: bool,
        penalty: f64,
        hits: Vec<Hit>,
    }
}

mirror! {
    /// One L3 rule that fired in a file.
    pub struct Hit = l3::Hit {
        rule: String,
        kind: HitKind,
        w: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cwe: Option<u32>,
        contribution: f64,
        #[serde(default, skip_serializing_if = "not")]
        target_family: bool,
        line: usize,
        col: usize,
    }
}

words! {
    /// Which L3 table a hit came from.
    #[serde(rename_all = "lowercase")]
    pub enum HitKind = l3::HitKind { Source, Sink, Safeguard }
}
