//! The published format `sage.results/1` (`docs/results.md`) as types of its own.
//!
//! Every record a results document holds is defined here, with its field names and serde
//! attributes, and converted explicitly from and to the values the pipeline works with (the
//! trace's counts and actors, the history's provenance and origin, the judge's scores). The
//! internal values carry no say over the published JSON: renaming a field of
//! `sage_history::ProvenanceResult` (or adding one) stops the build here, at the conversion,
//! instead of silently changing every results file. The result types of
//! [`crate::results`] serialize through these types (`#[serde(into, from)]`), and old files
//! are read through them too.
//!
//! The conversions are exhaustive struct literals, so each internal field is named once
//! here: [`mirror!`] writes a record with the same field names as its internal value and
//! both conversions; a field the format names differently would be written out by hand.

use sage_schema::{from_both, mirror, words, Conv};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

fn is_zero(n: &usize) -> bool {
    *n == 0
}

// ---- the result set --------------------------------------------------------------------

mirror! {
    /// Everything `sage localize` produced for a folder (`results.json`).
    pub struct ResultSet = crate::results::ResultSet {
        version: String,
        sage_version: String,
        judges: Vec<JudgeId>,
        runs: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        case_root: Option<String>,
        results: Vec<CaseResult>,
        skipped: Vec<Skipped>,
        problems: Vec<Problem>,
        summaries: Vec<Summary>,
    }
}

mirror! {
    /// The outcome of one case under one judge run.
    pub struct CaseResult = crate::results::CaseResult {
        case_id: String,
        case_dir: String,
        task_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task_cwe: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task_cve: Option<String>,
        #[serde(default)]
        task_description: String,
        metadata: Metadata,
        anchor: FailureAnchor,
        framework: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        trace_format: Option<String>,
        counts: TraceCounts,
        turns: Vec<TurnInfo>,
        reconstruction_condition: ReconstructionCondition,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        write_failures: Vec<WriteFailure>,
        provenance: ProvenanceResult,
        judge: JudgeId,
        run: u32,
        scores: Vec<TurnOutcome>,
        origin: OriginResult,
        checks: Vec<Check>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        notes: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expected: Option<ExpectedComparison>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        injection: Vec<InjectionFlag>,
    }
}

mirror! {
    /// One turn as results list it.
    pub struct TurnInfo = crate::results::TurnInfo {
        turn: usize,
        actor: Actor,
        kind: TurnKind,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        writes: Vec<usize>,
    }
}

mirror! {
    /// A result compared with its case's `expected` block.
    pub struct ExpectedComparison = crate::results::ExpectedComparison {
        matched: bool,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        mismatches: Vec<String>,
    }
}

mirror! {
    /// A case that could not be processed.
    pub struct Skipped = crate::results::Skipped {
        case: String,
        stage: String,
        message: String,
    }
}

mirror! {
    /// A problem in a case that was still processed.
    pub struct Problem = crate::results::Problem {
        case: String,
        message: String,
    }
}

mirror! {
    /// A count and its share of the group.
    pub struct Count = crate::results::Count {
        n: usize,
        pct: f64,
    }
}

/// Table 5 for one judge run (`summaries[]`, `summary.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub judge: JudgeId,
    pub run: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subset: Option<String>,
    pub cases: usize,
    pub provenance: BTreeMap<String, Count>,
    pub origin_type: BTreeMap<String, Count>,
    pub timing_agent_introduced: BTreeMap<String, Count>,
    pub timing_n: usize,
    pub missed_opportunities: BTreeMap<String, Count>,
    pub failed_checks: usize,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub failed_check_names: BTreeMap<String, usize>,
    #[serde(default)]
    pub turns_scored: usize,
    #[serde(default)]
    pub turns_failed: usize,
    #[serde(default)]
    pub turns_administrative: usize,
    #[serde(default)]
    pub injection_flagged: usize,
}

// By hand: `constructed_only` is the pipeline's own and never published.
impl Conv<Summary> for crate::results::Summary {
    fn conv(self) -> Summary {
        Summary {
            judge: self.judge.conv(),
            run: self.run,
            subset: self.subset,
            cases: self.cases,
            provenance: self.provenance.conv(),
            origin_type: self.origin_type.conv(),
            timing_agent_introduced: self.timing_agent_introduced.conv(),
            timing_n: self.timing_n,
            missed_opportunities: self.missed_opportunities.conv(),
            failed_checks: self.failed_checks,
            failed_check_names: self.failed_check_names,
            turns_scored: self.turns_scored,
            turns_failed: self.turns_failed,
            turns_administrative: self.turns_administrative,
            injection_flagged: self.injection_flagged,
        }
    }
}

impl Conv<crate::results::Summary> for Summary {
    fn conv(self) -> crate::results::Summary {
        crate::results::Summary {
            judge: self.judge.conv(),
            run: self.run,
            subset: self.subset,
            cases: self.cases,
            provenance: self.provenance.conv(),
            origin_type: self.origin_type.conv(),
            timing_agent_introduced: self.timing_agent_introduced.conv(),
            timing_n: self.timing_n,
            missed_opportunities: self.missed_opportunities.conv(),
            failed_checks: self.failed_checks,
            failed_check_names: self.failed_check_names,
            turns_scored: self.turns_scored,
            turns_failed: self.turns_failed,
            turns_administrative: self.turns_administrative,
            injection_flagged: self.injection_flagged,
            constructed_only: false,
        }
    }
}

from_both! {
    ResultSet = crate::results::ResultSet;
    CaseResult = crate::results::CaseResult;
    TurnInfo = crate::results::TurnInfo;
    ExpectedComparison = crate::results::ExpectedComparison;
    Skipped = crate::results::Skipped;
    Problem = crate::results::Problem;
    Count = crate::results::Count;
    Summary = crate::results::Summary;
    JudgeId = sage_trace::JudgeId;
}

// ---- the case ---------------------------------------------------------------------------

mirror! {
    /// Where the case came from.
    pub struct Metadata = sage_trace::case::Metadata {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        framework: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        base_model: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dataset: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        trace_source: Option<TraceSource>,
    }
}

words! {
    /// `metadata.trace_source`.
    #[serde(rename_all = "kebab-case")]
    pub enum TraceSource = sage_trace::case::TraceSource { Real, Constructed }
}

mirror! {
    /// The confirmed deficiency.
    #[serde(deny_unknown_fields)]
    pub struct FailureAnchor = sage_trace::case::FailureAnchor {
        artefact: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fragment: Option<String>,
        category: DeficiencyCategory,
        cwe: String,
        description: String,
    }
}

words! {
    /// The anchor's deficiency category.
    #[serde(rename_all = "kebab-case")]
    pub enum DeficiencyCategory = sage_trace::case::DeficiencyCategory {
        DefenceAbsent,
        DefenceInsufficient,
        VulnerabilityIntroduced,
    }
}

// ---- the trace --------------------------------------------------------------------------

mirror! {
    /// How many of each item the canonical trace holds.
    pub struct TraceCounts = sage_trace::TraceCounts {
        turns: usize,
        administrative: usize,
        tool_calls: usize,
        tool_results: usize,
        writes: usize,
        dropped: usize,
        #[serde(default, skip_serializing_if = "is_zero")]
        submissions: usize,
    }
}

mirror! {
    /// Who authored a turn.
    pub struct Actor = sage_trace::Actor {
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        role: Option<String>,
    }
}

words! {
    /// A turn's workflow stage.
    #[serde(rename_all = "kebab-case")]
    pub enum TurnKind = sage_trace::TurnKind {
        Planning,
        Implementation,
        Review,
        Verification,
        Administrative,
    }
}

mirror! {
    /// A pointer back into a raw trace file.
    pub struct RawRef = sage_trace::RawRef {
        file: String,
        #[serde(flatten)]
        at: Locator,
    }
}

/// Where in the raw file an item lives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "locator", rename_all = "kebab-case")]
pub enum Locator {
    Bytes {
        start: usize,
        end: usize,
    },
    Lines {
        start: usize,
        end: usize,
    },
    Json {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        line: Option<usize>,
        pointer: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        inner: Option<String>,
    },
    Synthetic {
        what: String,
    },
}

impl Conv<Locator> for sage_trace::Locator {
    fn conv(self) -> Locator {
        use sage_trace::Locator as L;
        match self {
            L::Bytes { start, end } => Locator::Bytes { start, end },
            L::Lines { start, end } => Locator::Lines { start, end },
            L::Json {
                line,
                pointer,
                inner,
            } => Locator::Json {
                line,
                pointer,
                inner,
            },
            L::Synthetic { what } => Locator::Synthetic { what },
        }
    }
}

impl Conv<sage_trace::Locator> for Locator {
    fn conv(self) -> sage_trace::Locator {
        use sage_trace::Locator as L;
        match self {
            Locator::Bytes { start, end } => L::Bytes { start, end },
            Locator::Lines { start, end } => L::Lines { start, end },
            Locator::Json {
                line,
                pointer,
                inner,
            } => L::Json {
                line,
                pointer,
                inner,
            },
            Locator::Synthetic { what } => L::Synthetic { what },
        }
    }
}

// ---- the artefact history ---------------------------------------------------------------

words! {
    /// How much of the code's evolution the trace preserves.
    #[serde(rename_all = "kebab-case")]
    pub enum ReconstructionCondition = sage_history::ReconstructionCondition {
        SingleWrite,
        PerWrite,
        FinalOnly,
        NoWrite,
    }
}

mirror! {
    /// A write that could not be applied.
    pub struct WriteFailure = sage_history::WriteFailure {
        write: usize,
        turn: usize,
        artefact: String,
        op: String,
        reason: String,
        raw: RawRef,
    }
}

mirror! {
    /// Code provenance and the introducing write.
    pub struct ProvenanceResult = sage_history::ProvenanceResult {
        provenance: Provenance,
        introducing_write: Option<IntroducingWrite>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        introducing_write_cannot_determine: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        introducing_write_basis: Option<String>,
        presence: Vec<Presence>,
        matching: String,
        reason: String,
    }
}

words! {
    /// Code provenance of the anchor.
    #[serde(rename_all = "kebab-case")]
    pub enum Provenance = sage_history::Provenance {
        Inherited,
        AgentIntroduced,
        NoCodeLocation,
    }
}

mirror! {
    /// The fragment in one state of its artefact.
    pub struct Presence = sage_history::Presence {
        write: Option<usize>,
        turn: Option<usize>,
        present: bool,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        final_state: bool,
    }
}

mirror! {
    /// The introducing write and its turn.
    pub struct IntroducingWrite = sage_history::IntroducingWrite {
        write: usize,
        turn: usize,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        reinstated: bool,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        deduced: bool,
    }
}

mirror! {
    /// One automatic check.
    pub struct Check = sage_history::Check {
        name: String,
        passed: bool,
        detail: String,
    }
}

// ---- the origin rule --------------------------------------------------------------------

mirror! {
    /// The origin rule's result.
    pub struct OriginResult = sage_history::origin::OriginResult {
        #[serde(flatten)]
        outcome: Outcome,
        candidates: Candidates,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        defence_window_end: Option<usize>,
        links: Vec<Link>,
        missed_opportunities: Vec<MissedOpportunity>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        scoring_failures: Vec<usize>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        missed_unassessed: Vec<usize>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        uncertainty: Option<String>,
    }
}

/// Localized with an origin, or undetermined with a reason.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum Outcome {
    Localized {
        origin_turn: usize,
        origin_type: OriginType,
    },
    Undetermined {
        reason: UndeterminedReason,
    },
}

impl Conv<Outcome> for sage_history::origin::Outcome {
    fn conv(self) -> Outcome {
        use sage_history::origin::Outcome as O;
        match self {
            O::Localized {
                origin_turn,
                origin_type,
            } => Outcome::Localized {
                origin_turn,
                origin_type: origin_type.conv(),
            },
            O::Undetermined { reason } => Outcome::Undetermined {
                reason: reason.conv(),
            },
        }
    }
}

impl Conv<sage_history::origin::Outcome> for Outcome {
    fn conv(self) -> sage_history::origin::Outcome {
        use sage_history::origin::Outcome as O;
        match self {
            Outcome::Localized {
                origin_turn,
                origin_type,
            } => O::Localized {
                origin_turn,
                origin_type: origin_type.conv(),
            },
            Outcome::Undetermined { reason } => O::Undetermined {
                reason: reason.conv(),
            },
        }
    }
}

words! {
    /// The origin type.
    #[serde(rename_all = "kebab-case")]
    pub enum OriginType = sage_history::origin::OriginType {
        InadequateDefenceSelected,
        UnaddressedRequirement,
        DefectInCodeChange,
    }
}

words! {
    /// Why no origin was selected.
    #[serde(rename_all = "kebab-case")]
    pub enum UndeterminedReason = sage_history::origin::UndeterminedReason {
        NoLinkedCandidate,
        ScoringFailed,
    }
}

mirror! {
    /// The earliest turn under each candidate of the rule.
    pub struct Candidates = sage_history::origin::Candidates {
        inadequate_defence_selected: Option<usize>,
        unaddressed_requirement: Option<usize>,
        defect_in_code_change: Option<usize>,
    }
}

mirror! {
    /// A DI > 0 turn and how it is linked to the anchor.
    pub struct Link = sage_history::origin::Link {
        turn: usize,
        linked: bool,
        methods: Vec<LinkMethod>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        evidence: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        context: Vec<String>,
    }
}

words! {
    /// How a defence was linked to the anchor.
    #[serde(rename_all = "kebab-case")]
    pub enum LinkMethod = sage_history::origin::LinkMethod {
        QuoteNamesArtefact,
        QuoteSharesFragmentIdentifier,
        QuoteNamesWeakness,
        WritesAnchorArtefact,
    }
}

mirror! {
    /// A missed detection opportunity.
    pub struct MissedOpportunity = sage_history::origin::MissedOpportunity {
        turn: usize,
        kind: TurnKind,
        #[serde(rename = "VR")]
        vr: u8,
        #[serde(rename = "SA")]
        sa: u8,
    }
}

// ---- the judge's scores -----------------------------------------------------------------

mirror! {
    /// Who scored.
    pub struct JudgeId = sage_trace::JudgeId {
        name: String,
        model: String,
        rubric_version: String,
    }
}

/// What happened to one turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
// As the internal value: Scored is the common case, boxing it would only add indirection.
#[allow(clippy::large_enum_variant)]
pub enum TurnOutcome {
    Scored(TurnScore),
    Administrative {
        turn: usize,
    },
    Failed {
        turn: usize,
        attempts: u32,
        reason: String,
    },
    ContextOverflow {
        turn: usize,
        needed_tokens: u64,
        budget_tokens: u64,
    },
}

impl Conv<TurnOutcome> for sage_trace::TurnOutcome {
    fn conv(self) -> TurnOutcome {
        use sage_trace::TurnOutcome as T;
        match self {
            T::Scored(s) => TurnOutcome::Scored(s.conv()),
            T::Administrative { turn } => TurnOutcome::Administrative { turn },
            T::Failed {
                turn,
                attempts,
                reason,
            } => TurnOutcome::Failed {
                turn,
                attempts,
                reason,
            },
            T::ContextOverflow {
                turn,
                needed_tokens,
                budget_tokens,
            } => TurnOutcome::ContextOverflow {
                turn,
                needed_tokens,
                budget_tokens,
            },
        }
    }
}

impl Conv<sage_trace::TurnOutcome> for TurnOutcome {
    fn conv(self) -> sage_trace::TurnOutcome {
        use sage_trace::TurnOutcome as T;
        match self {
            TurnOutcome::Scored(s) => T::Scored(s.conv()),
            TurnOutcome::Administrative { turn } => T::Administrative { turn },
            TurnOutcome::Failed {
                turn,
                attempts,
                reason,
            } => T::Failed {
                turn,
                attempts,
                reason,
            },
            TurnOutcome::ContextOverflow {
                turn,
                needed_tokens,
                budget_tokens,
            } => T::ContextOverflow {
                turn,
                needed_tokens,
                budget_tokens,
            },
        }
    }
}

mirror! {
    /// A turn's accepted score.
    pub struct TurnScore = sage_trace::TurnScore {
        turn: usize,
        judge: JudgeId,
        run: u32,
        #[serde(flatten)]
        judgment: Judgment,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        quotes: Vec<VerifiedQuote>,
        prompt_hash: String,
        attempts: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        context: Option<ContextUse>,
    }
}

mirror! {
    /// The judgment: applicability and the four dimensions.
    pub struct Judgment = sage_trace::Judgment {
        applicable: bool,
        security_opportunity: bool,
        #[serde(rename = "TR")]
        tr: DimensionScore,
        #[serde(rename = "DI")]
        di: DimensionScore,
        #[serde(rename = "VR")]
        vr: DimensionScore,
        #[serde(rename = "SA")]
        sa: DimensionScore,
    }
}

mirror! {
    /// One dimension's score.
    pub struct DimensionScore = sage_trace::DimensionScore {
        score: u8,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        quote: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rationale: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        also: Vec<String>,
    }
}

mirror! {
    /// A verified quote and the raw record it was found in.
    pub struct VerifiedQuote = sage_trace::VerifiedQuote {
        dimension: Dimension,
        quote: String,
        raw: RawRef,
    }
}

words! {
    /// A scoring dimension.
    pub enum Dimension = sage_trace::Dimension { TR, DI, VR, SA }
}

mirror! {
    /// How a prefix was fitted into the judge's context budget.
    pub struct ContextUse = sage_trace::ContextUse {
        whole: Vec<[usize; 2]>,
        digested: Vec<[usize; 2]>,
        prompt_tokens: u64,
        budget_tokens: u64,
    }
}

mirror! {
    /// A turn whose text addresses the judge.
    pub struct InjectionFlag = sage_judge::injection::InjectionFlag {
        turn: usize,
        rule: String,
        rules_version: String,
        excerpt: String,
        raw: RawRef,
    }
}

#[cfg(test)]
mod tests {
    use crate::results::CaseResult;
    use serde_json::{json, Value};

    /// A result written by main (`tests/fixtures/results-main`), with every variant the
    /// bundled corpus does not produce written in: failed and overflowing turns, a context
    /// digest, further quotes, every raw locator, an injection flag, a write failure, a
    /// deduced introducing write, a scoring-failed origin, an expectation.
    fn every_variant() -> Value {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/results-main/results.json"
        );
        let set: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut r = set["results"][0].clone();
        let raw = |locator: Value| {
            let mut v = json!({"file": "t.json"});
            v.as_object_mut()
                .unwrap()
                .extend(locator.as_object().unwrap().clone());
            v
        };
        let mut scored = r["scores"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["status"] == "scored")
            .unwrap()
            .clone();
        scored["DI"] = json!({"score": 2, "quote": "q", "rationale": "why", "also": ["q2"]});
        scored["quotes"] = json!([
            {"dimension": "DI", "quote": "q", "raw": raw(json!({"locator": "lines", "start": 1, "end": 2}))},
            {"dimension": "VR", "quote": "q2", "raw": raw(json!({"locator": "json", "line": 3, "pointer": "/a", "inner": "/b"}))},
            {"dimension": "SA", "quote": "q3", "raw": raw(json!({"locator": "json", "pointer": "/c"}))}
        ]);
        scored["context"] = json!({"whole": [[1, 2]], "digested": [[3, 4]], "prompt_tokens": 10, "budget_tokens": 20});
        r["scores"] = json!([
            scored,
            {"status": "administrative", "turn": 2},
            {"status": "failed", "turn": 3, "attempts": 3, "reason": "no quote"},
            {"status": "context-overflow", "turn": 4, "needed_tokens": 9, "budget_tokens": 8}
        ]);
        r["task_cve"] = json!("CVE-2023-1");
        r["trace_format"] = json!("claude-stream");
        r["counts"]["submissions"] = json!(1);
        r["write_failures"] = json!([{"write": 2, "turn": 3, "artefact": "a.py", "op": "str-replace",
            "reason": "no match", "raw": raw(json!({"locator": "synthetic", "what": "final/a.py"}))}]);
        r["provenance"]["introducing_write"] =
            json!({"write": 0, "turn": 3, "reinstated": true, "deduced": true});
        r["provenance"]["introducing_write_cannot_determine"] = json!(true);
        r["provenance"]["introducing_write_basis"] = json!("only the final state");
        r["provenance"]["presence"] = json!([
            {"write": null, "turn": null, "present": false},
            {"write": 1, "turn": 2, "present": true},
            {"write": null, "turn": null, "present": true, "final_state": true}
        ]);
        r["origin"] = json!({
            "outcome": "undetermined", "reason": "scoring-failed",
            "candidates": {"inadequate_defence_selected": 1, "unaddressed_requirement": null, "defect_in_code_change": 3},
            "defence_window_end": 3,
            "links": [{"turn": 1, "linked": true, "methods": ["quote-names-weakness", "writes-anchor-artefact"],
                       "evidence": ["e"], "context": ["c"]}],
            "missed_opportunities": [{"turn": 4, "kind": "review", "VR": 1, "SA": 0}],
            "scoring_failures": [3, 4], "missed_unassessed": [4], "uncertainty": "u"
        });
        r["expected"] = json!({"matched": false, "mismatches": ["m"]});
        r["injection"] = json!([{"turn": 2, "rule": "ignore-previous", "rules_version": "1",
            "excerpt": "ignore", "raw": raw(json!({"locator": "bytes", "start": 0, "end": 6}))}]);
        r["metadata"]["trace_source"] = json!("real");
        r["anchor"]["category"] = json!("vulnerability-introduced");
        r
    }

    #[test]
    fn every_variant_of_a_result_reads_and_writes_back_unchanged() {
        let text = every_variant();
        let r: CaseResult = serde_json::from_value(text.clone()).unwrap();
        assert_eq!(serde_json::to_value(&r).unwrap(), text);
        // and the variants arrived as the pipeline's values
        assert_eq!(r.scores.len(), 4);
        assert_eq!(r.origin.scoring_failures, vec![3, 4]);
        assert!(r.provenance.introducing_write.is_some_and(|w| w.deduced));
        assert_eq!(r.injection[0].raw.file, "t.json");
    }

    #[test]
    fn an_anchor_with_an_unknown_field_is_refused_as_before() {
        let mut text = every_variant();
        text["anchor"]["origin_turn"] = json!(3);
        let e = serde_json::from_value::<CaseResult>(text).unwrap_err();
        assert!(e.to_string().contains("origin_turn"), "{e}");
    }
}
