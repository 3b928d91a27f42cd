//! The origin rule (paper 3.3.2, `../shared/method/SAGE.md`): from the artefact history, the
//! per-turn scores and the failure anchor to the origin turn and its type, the missed
//! detection opportunities and the automatic checks.
//!
//! Linking a turn to the anchor is a separate step after scoring (the judge never saw the
//! anchor), and every link records how it was made.

use crate::history::{ArtefactHistory, Check, Provenance, ProvenanceResult};
use sage_trace::case::FailureAnchor;
use sage_trace::{normalize_ws, CanonicalTrace, TurnKind};
use sage_trace::{Dimension, TraceScores};
use serde::{Deserialize, Serialize};

/// Which candidate of the rule was selected.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum OriginType {
    /// (i) a defence linked to the anchor was expressed (DI > 0) before the introducing write.
    InadequateDefenceSelected,
    /// (ii) a turn with a security opportunity expressed neither TR nor DI.
    UnaddressedRequirement,
    /// (iii) the introducing write itself, expressing TR or DI, with no (i) or (ii).
    DefectInCodeChange,
}

impl OriginType {
    pub fn as_str(self) -> &'static str {
        match self {
            OriginType::InadequateDefenceSelected => "inadequate-defence-selected",
            OriginType::UnaddressedRequirement => "unaddressed-requirement",
            OriginType::DefectInCodeChange => "defect-in-code-change",
        }
    }
    /// The words of the paper, for tables.
    pub fn label(self) -> &'static str {
        match self {
            OriginType::InadequateDefenceSelected => "Inadequate defence selected",
            OriginType::UnaddressedRequirement => "Unaddressed requirement",
            OriginType::DefectInCodeChange => "Defect in the code change",
        }
    }
}

/// Why no origin was selected.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum UndeterminedReason {
    /// No candidate turn could be linked to the confirmed deficiency.
    NoLinkedCandidate,
    /// The per-turn scores the rule needs are unavailable: scoring failed for the trace.
    ScoringFailed,
}

impl UndeterminedReason {
    pub fn as_str(self) -> &'static str {
        match self {
            UndeterminedReason::NoLinkedCandidate => "no-linked-candidate",
            UndeterminedReason::ScoringFailed => "scoring-failed",
        }
    }
}

/// Localized with an origin, or undetermined with a reason.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
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

impl Outcome {
    pub fn origin(&self) -> Option<(usize, OriginType)> {
        match self {
            Outcome::Localized {
                origin_turn,
                origin_type,
            } => Some((*origin_turn, *origin_type)),
            Outcome::Undetermined { .. } => None,
        }
    }
}

/// How a turn's expressed defence was linked to the failure anchor.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum LinkMethod {
    /// The DI quote names the anchor's artefact (its file name).
    QuoteNamesArtefact,
    /// The DI quote contains a distinctive identifier of the anchor fragment.
    QuoteSharesFragmentIdentifier,
    /// The DI quote names the anchor's weakness (its CWE id or a term of its vocabulary).
    QuoteNamesWeakness,
    /// The turn writes the anchor's artefact.
    WritesAnchorArtefact,
}

/// A turn with DI > 0 and whether (and how) it is linked to the anchor.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Link {
    pub turn: usize,
    pub linked: bool,
    /// Every method that linked it (empty when not linked).
    pub methods: Vec<LinkMethod>,
    /// What matched: the artefact name, the identifier or the term.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<String>,
}

/// The earliest turn qualifying under each candidate of the rule (before choosing).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Candidates {
    pub inadequate_defence_selected: Option<usize>,
    pub unaddressed_requirement: Option<usize>,
    pub defect_in_code_change: Option<usize>,
}

/// A missed detection opportunity: an implementation or review turn after the origin whose
/// VR or SA is at most 1. Reported separately, never an origin.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MissedOpportunity {
    pub turn: usize,
    pub kind: TurnKind,
    #[serde(rename = "VR")]
    pub vr: u8,
    #[serde(rename = "SA")]
    pub sa: u8,
}

/// The origin rule's result for one case under one judge run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OriginResult {
    #[serde(flatten)]
    pub outcome: Outcome,
    pub candidates: Candidates,
    /// The last turn (i) may come from: the window of the rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defence_window_end: Option<usize>,
    pub links: Vec<Link>,
    pub missed_opportunities: Vec<MissedOpportunity>,
    /// Turns whose scoring failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scoring_failures: Vec<usize>,
}

/// Inputs to the rule, borrowed from the earlier stages.
pub struct RuleInput<'a> {
    pub trace: &'a CanonicalTrace,
    pub history: &'a ArtefactHistory,
    pub provenance: &'a ProvenanceResult,
    pub anchor: &'a FailureAnchor,
    pub scores: &'a TraceScores,
    /// The anchor CWE's vocabulary (for linking by weakness).
    pub weakness_terms: &'a [String],
}

/// Identifiers too common to link anything.
const STOP_IDENTIFIERS: &[&str] = &[
    "self", "cls", "get", "set", "new", "return", "def", "class", "import", "from", "none", "true",
    "false", "and", "not", "for", "with", "the", "str", "int", "len", "data", "value", "args",
    "kwargs", "result", "res", "request", "response", "print", "open", "list", "dict", "try",
    "except", "elif", "else", "pass", "lambda", "yield", "object", "name", "app", "route",
];

/// Distinctive identifiers of a fragment (and the words inside its string literals).
pub fn fragment_identifiers(fragment: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut cur = String::new();
    for c in fragment.chars().chain(std::iter::once(' ')) {
        if c.is_alphanumeric() || c == '_' {
            cur.push(c);
        } else if !cur.is_empty() {
            let w = std::mem::take(&mut cur);
            let lc = w.to_lowercase();
            if w.chars().count() >= 3
                && !w.chars().all(|c| c.is_ascii_digit())
                && !STOP_IDENTIFIERS.contains(&lc.as_str())
                && !out.iter().any(|o| o.to_lowercase() == lc)
            {
                out.push(w);
            }
        }
    }
    out
}

fn basename(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

/// Link turn `k` (which has DI > 0) to the anchor.
fn link_turn(input: &RuleInput<'_>, k: usize) -> Link {
    let mut methods = Vec::new();
    let mut evidence = Vec::new();
    let quote = input
        .scores
        .score(k)
        .and_then(|s| s.judgment.di.quote.clone())
        .unwrap_or_default();
    let q = normalize_ws(&quote.to_lowercase());
    let artefact = basename(&input.anchor.artefact).to_lowercase();
    if !artefact.is_empty() && q.contains(&artefact) {
        methods.push(LinkMethod::QuoteNamesArtefact);
        evidence.push(format!("artefact {}", input.anchor.artefact));
    }
    if let Some(fragment) = &input.anchor.fragment {
        let ids: Vec<String> = fragment_identifiers(fragment)
            .into_iter()
            .filter(|id| sage_trace::text::term_matches(&q, id))
            .collect();
        if !ids.is_empty() {
            methods.push(LinkMethod::QuoteSharesFragmentIdentifier);
            evidence.push(format!("fragment identifier {}", ids.join(", ")));
        }
    }
    let mut terms: Vec<&str> = input
        .weakness_terms
        .iter()
        .map(String::as_str)
        .filter(|t| sage_trace::text::term_matches(&q, t))
        .collect();
    if let Some(id) = sage_trace::text::normalize_cwe(&input.anchor.cwe) {
        if q.contains(&id.to_lowercase()) {
            terms.push(&input.anchor.cwe);
        }
    }
    if !terms.is_empty() {
        methods.push(LinkMethod::QuoteNamesWeakness);
        evidence.push(format!("weakness term {}", terms.join(", ")));
    }
    if input
        .trace
        .turn(k)
        .is_some_and(|t| t.writes.iter().any(|w| w.artefact == input.anchor.artefact))
    {
        methods.push(LinkMethod::WritesAnchorArtefact);
        evidence.push(format!("writes {}", input.anchor.artefact));
    }
    Link {
        turn: k,
        linked: !methods.is_empty(),
        methods,
        evidence,
    }
}

/// Apply the origin rule.
pub fn localize(input: &RuleInput<'_>) -> OriginResult {
    let n = input.trace.turns.len();
    let introducing = input.provenance.introducing_write.map(|w| w.turn);
    let last_write = input.history.snapshots.iter().map(|s| s.turn).max();
    let agent_introduced = input.provenance.provenance == Provenance::AgentIntroduced;

    // (i) may come from turns strictly before the introducing write; for inherited (and
    // no-code-location) cases from turns at or before the last write, or any turn when the
    // trace writes nothing.
    let defence_window_end = match (agent_introduced, introducing, last_write) {
        (true, Some(iw), _) => iw.saturating_sub(1),
        (_, _, Some(lw)) => lw,
        _ => n,
    };
    // (ii) and every origin may not come after the introducing write.
    let origin_window_end = if agent_introduced {
        introducing.unwrap_or(n)
    } else {
        n
    };

    let score = |k: usize, d: Dimension| input.scores.score(k).map(|s| s.score(d));
    let mut links = Vec::new();
    let mut candidates = Candidates::default();
    for k in 1..=n {
        let Some(s) = input.scores.score(k) else {
            continue;
        };
        if !s.judgment.applicable {
            continue;
        }
        let di = s.score(Dimension::DI);
        let tr = s.score(Dimension::TR);
        if di > 0 {
            let link = link_turn(input, k);
            if link.linked
                && k <= defence_window_end
                && candidates.inadequate_defence_selected.is_none()
            {
                candidates.inadequate_defence_selected = Some(k);
            }
            links.push(link);
        }
        if s.judgment.security_opportunity
            && tr == 0
            && di == 0
            && k <= origin_window_end
            && candidates.unaddressed_requirement.is_none()
        {
            candidates.unaddressed_requirement = Some(k);
        }
    }
    if agent_introduced {
        if let Some(iw) = introducing {
            let expresses = score(iw, Dimension::TR).unwrap_or(0) > 0
                || score(iw, Dimension::DI).unwrap_or(0) > 0;
            if expresses {
                candidates.defect_in_code_change = Some(iw);
            }
        }
    }

    let scoring_failures = input.scores.failures();
    let chosen = [
        candidates
            .inadequate_defence_selected
            .map(|t| (t, OriginType::InadequateDefenceSelected)),
        candidates
            .unaddressed_requirement
            .map(|t| (t, OriginType::UnaddressedRequirement)),
    ]
    .into_iter()
    .flatten()
    .min_by_key(|(t, _)| *t)
    .or(candidates
        .defect_in_code_change
        .map(|t| (t, OriginType::DefectInCodeChange)));

    let outcome = if !scoring_failures.is_empty() {
        Outcome::Undetermined {
            reason: UndeterminedReason::ScoringFailed,
        }
    } else {
        match chosen {
            Some((t, ty)) => Outcome::Localized {
                origin_turn: t,
                origin_type: ty,
            },
            None => Outcome::Undetermined {
                reason: UndeterminedReason::NoLinkedCandidate,
            },
        }
    };

    let mut missed = Vec::new();
    if let Some((origin, _)) = outcome.origin() {
        for t in &input.trace.turns {
            if t.index <= origin || !matches!(t.kind, TurnKind::Implementation | TurnKind::Review) {
                continue;
            }
            if let Some(s) = input.scores.score(t.index) {
                let (vr, sa) = (s.score(Dimension::VR), s.score(Dimension::SA));
                if vr <= 1 || sa <= 1 {
                    missed.push(MissedOpportunity {
                        turn: t.index,
                        kind: t.kind,
                        vr,
                        sa,
                    });
                }
            }
        }
    }

    OriginResult {
        outcome,
        candidates,
        defence_window_end: Some(defence_window_end).filter(|e| *e > 0),
        links,
        missed_opportunities: missed,
        scoring_failures,
    }
}

/// The checks of the rule itself (the history checks come from [`crate::history`]).
pub fn checks(result: &OriginResult, provenance: &ProvenanceResult) -> Vec<Check> {
    let mut out = Vec::new();
    if let Some((origin, ty)) = result.outcome.origin() {
        match provenance.introducing_write {
            Some(iw) => out.push(Check {
                name: "origin-not-after-introducing-write".into(),
                passed: origin <= iw.turn,
                detail: format!(
                    "origin turn {origin}, introducing write at turn {}",
                    iw.turn
                ),
            }),
            None => out.push(Check {
                name: "no-introducing-write-for-non-agent-introduced".into(),
                passed: provenance.provenance != Provenance::AgentIntroduced,
                detail: format!("provenance {}", provenance.provenance.as_str()),
            }),
        }
        if ty == OriginType::DefectInCodeChange {
            out.push(Check {
                name: "defect-in-code-change-only-for-agent-introduced".into(),
                passed: provenance.provenance == Provenance::AgentIntroduced
                    && provenance.introducing_write.map(|w| w.turn) == Some(origin),
                detail: format!("origin turn {origin} is the introducing write"),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{IntroducingWrite, ReconstructionCondition, Snapshot};
    use proptest::prelude::*;
    use sage_trace::case::DeficiencyCategory;
    use sage_trace::{Actor, RawRef, Turn, Write, WriteOp};
    use sage_trace::{DimensionScore, JudgeId, Judgment, TurnOutcome, TurnScore};

    #[test]
    fn identifiers_skip_common_words() {
        let ids = fragment_identifiers(r#"origin = self.request.headers.get("Origin")"#);
        assert_eq!(ids, vec!["origin", "headers"]);
        let ids = fragment_identifiers("cipher = AES.new(secret_key, AES.MODE_ECB)");
        assert_eq!(ids, vec!["cipher", "AES", "secret_key", "MODE_ECB"]);
    }

    /// One turn of a synthetic case: kind, whether it writes app.py, and its scores.
    #[derive(Debug, Clone)]
    struct T {
        kind: TurnKind,
        write: bool,
        tr: u8,
        di: u8,
        vr: u8,
        sa: u8,
        opp: bool,
        quote: &'static str,
    }

    fn t(kind: TurnKind, write: bool, tr: u8, di: u8, opp: bool, quote: &'static str) -> T {
        T {
            kind,
            write,
            tr,
            di,
            vr: 0,
            sa: 0,
            opp,
            quote,
        }
    }

    fn dim(score: u8, quote: &str) -> DimensionScore {
        DimensionScore {
            score,
            quote: (score > 0).then(|| quote.to_string()),
            rationale: None,
        }
    }

    struct Built {
        trace: CanonicalTrace,
        history: ArtefactHistory,
        scores: TraceScores,
        anchor: FailureAnchor,
    }

    fn build(turns: &[T], fragment: Option<&str>) -> Built {
        let mut trace = CanonicalTrace::new("test", vec!["t".into()]);
        let mut snapshots = Vec::new();
        let mut outcomes = Vec::new();
        for (i, x) in turns.iter().enumerate() {
            let mut turn = Turn::new(Actor::new("agent", None), x.kind);
            if x.write {
                turn.writes.push(Write {
                    artefact: "app.py".into(),
                    op: WriteOp::FullContent {
                        content: String::new(),
                    },
                    via: "test".into(),
                    final_state: false,
                    raw: RawRef::lines("t", 1, 1),
                });
                snapshots.push(Snapshot {
                    write: snapshots.len() + 1,
                    turn: i + 1,
                    artefact: "app.py".into(),
                    op: "full-content".into(),
                    via: "test".into(),
                    final_state: false,
                    fuzzy: false,
                    content: Some(String::new()),
                    raw: RawRef::lines("t", 1, 1),
                });
            }
            trace.push_turn(turn);
            outcomes.push(if x.kind == TurnKind::Administrative {
                TurnOutcome::Administrative { turn: i + 1 }
            } else {
                TurnOutcome::Scored(TurnScore {
                    turn: i + 1,
                    judge: JudgeId {
                        name: "t".into(),
                        model: "-".into(),
                        rubric_version: "0".into(),
                    },
                    run: 0,
                    judgment: Judgment {
                        applicable: true,
                        security_opportunity: x.opp,
                        tr: dim(x.tr, x.quote),
                        di: dim(x.di, x.quote),
                        vr: dim(x.vr, x.quote),
                        sa: dim(x.sa, x.quote),
                    },
                    quotes: vec![],
                    prompt_hash: String::new(),
                    attempts: 1,
                    context: None,
                })
            });
        }
        let condition = match snapshots.len() {
            0 => ReconstructionCondition::NoWrite,
            1 => ReconstructionCondition::SingleWrite,
            _ => ReconstructionCondition::PerWrite,
        };
        Built {
            trace,
            history: ArtefactHistory {
                baselines: Default::default(),
                snapshots,
                failures: vec![],
                condition,
            },
            scores: TraceScores {
                judge: JudgeId {
                    name: "t".into(),
                    model: "-".into(),
                    rubric_version: "0".into(),
                },
                run: 0,
                turns: outcomes,
            },
            anchor: FailureAnchor {
                artefact: "app.py".into(),
                fragment: fragment.map(str::to_string),
                category: DeficiencyCategory::DefenceInsufficient,
                cwe: "CWE-327".into(),
                description: "weak cipher mode".into(),
            },
        }
    }

    fn provenance(p: Provenance, iw: Option<usize>) -> ProvenanceResult {
        ProvenanceResult {
            provenance: p,
            introducing_write: iw.map(|turn| IntroducingWrite {
                write: 1,
                turn,
                reinstated: false,
            }),
            presence: vec![],
            matching: "test".into(),
            reason: "test".into(),
        }
    }

    fn run(b: &Built, p: &ProvenanceResult) -> OriginResult {
        let terms = vec!["ECB".to_string(), "AES".to_string()];
        localize(&RuleInput {
            trace: &b.trace,
            history: &b.history,
            provenance: p,
            anchor: &b.anchor,
            scores: &b.scores,
            weakness_terms: &terms,
        })
    }

    #[test]
    fn figure_1a_inadequate_defence_before_the_write() {
        use TurnKind::*;
        let b = build(
            &[
                t(
                    Planning,
                    false,
                    0,
                    2,
                    true,
                    "Replace DES with AES; use ECB mode.",
                ),
                t(
                    Implementation,
                    false,
                    0,
                    2,
                    true,
                    "I propose AES in ECB mode.",
                ),
                t(Implementation, true, 0, 0, true, ""),
            ],
            Some("cipher = AES.new(secret_key, AES.MODE_ECB)"),
        );
        let r = run(&b, &provenance(Provenance::AgentIntroduced, Some(3)));
        assert_eq!(
            r.outcome.origin(),
            Some((1, OriginType::InadequateDefenceSelected))
        );
        assert_eq!(r.candidates.unaddressed_requirement, Some(3));
        let l = &r.links[0];
        assert!(l
            .methods
            .contains(&LinkMethod::QuoteSharesFragmentIdentifier));
        assert!(l.methods.contains(&LinkMethod::QuoteNamesWeakness));
        assert!(
            checks(&r, &provenance(Provenance::AgentIntroduced, Some(3)))
                .iter()
                .all(|c| c.passed)
        );
    }

    #[test]
    fn figure_1b_unaddressed_requirement_with_missed_detection() {
        use TurnKind::*;
        let b = build(
            &[
                t(Planning, false, 0, 0, true, ""),
                t(Implementation, true, 0, 0, true, ""),
                t(Review, false, 0, 0, true, ""),
            ],
            Some(r#"origin = self.request.headers.get("Origin")"#),
        );
        let r = run(&b, &provenance(Provenance::Inherited, None));
        assert_eq!(
            r.outcome.origin(),
            Some((1, OriginType::UnaddressedRequirement))
        );
        let missed: Vec<usize> = r.missed_opportunities.iter().map(|m| m.turn).collect();
        assert_eq!(missed, vec![2, 3]);
    }

    #[test]
    fn defect_in_the_code_change_only_at_the_write() {
        use TurnKind::*;
        let b = build(
            &[
                t(Planning, false, 1, 0, false, "security matters"),
                t(Implementation, true, 0, 2, true, "use AES in ECB mode"),
            ],
            Some("AES.MODE_ECB"),
        );
        let r = run(&b, &provenance(Provenance::AgentIntroduced, Some(2)));
        assert_eq!(
            r.outcome.origin(),
            Some((2, OriginType::DefectInCodeChange))
        );
        // Never for inherited code: there the write's linked defence, at or before the last
        // write, is an inadequate defence selected.
        let r = run(&b, &provenance(Provenance::Inherited, None));
        assert_eq!(
            r.outcome.origin(),
            Some((2, OriginType::InadequateDefenceSelected))
        );
    }

    #[test]
    fn unlinked_defences_do_not_count() {
        use TurnKind::*;
        let b = build(
            &[
                t(Planning, false, 2, 2, true, "parameterize the login query"),
                t(Review, false, 1, 0, true, "looks secure"),
            ],
            Some("AES.MODE_ECB"),
        );
        let r = run(&b, &provenance(Provenance::Inherited, None));
        assert!(!r.links[0].linked);
        assert_eq!(
            r.outcome,
            Outcome::Undetermined {
                reason: UndeterminedReason::NoLinkedCandidate
            }
        );
    }

    #[test]
    fn a_scoring_failure_leaves_the_case_undetermined() {
        use TurnKind::*;
        let mut b = build(
            &[
                t(Planning, false, 0, 0, true, ""),
                t(Review, false, 0, 0, true, ""),
            ],
            None,
        );
        b.scores.turns[1] = TurnOutcome::Failed {
            turn: 2,
            attempts: 3,
            reason: "x".into(),
        };
        let r = run(&b, &provenance(Provenance::NoCodeLocation, None));
        assert_eq!(
            r.outcome,
            Outcome::Undetermined {
                reason: UndeterminedReason::ScoringFailed
            }
        );
        assert_eq!(r.scoring_failures, vec![2]);
    }

    #[test]
    fn administrative_turns_are_never_origins() {
        use TurnKind::*;
        let b = build(
            &[
                t(Administrative, false, 0, 0, true, ""),
                t(Planning, false, 0, 0, true, ""),
            ],
            None,
        );
        let r = run(&b, &provenance(Provenance::NoCodeLocation, None));
        assert_eq!(
            r.outcome.origin(),
            Some((2, OriginType::UnaddressedRequirement))
        );
    }

    fn arb_turn() -> impl Strategy<Value = T> {
        (
            prop_oneof![
                Just(TurnKind::Planning),
                Just(TurnKind::Implementation),
                Just(TurnKind::Review),
                Just(TurnKind::Verification),
                Just(TurnKind::Administrative)
            ],
            any::<bool>(),
            0u8..4,
            0u8..4,
            0u8..4,
            0u8..4,
            any::<bool>(),
            prop_oneof![Just("use AES here"), Just("sanitize the name"), Just("ok")],
        )
            .prop_map(|(kind, write, tr, di, vr, sa, opp, quote)| T {
                kind,
                write,
                tr,
                di,
                vr,
                sa,
                opp,
                quote,
            })
    }

    proptest! {
        #[test]
        fn rule_invariants(turns in prop::collection::vec(arb_turn(), 1..12), prov in 0u8..3) {
            let b = build(&turns, Some("cipher = AES.new(k, AES.MODE_ECB)"));
            let writes: Vec<usize> = b.history.snapshots.iter().map(|s| s.turn).collect();
            let p = match (prov, writes.first()) {
                (0, Some(_)) => {
                    // the introducing write: any write of the trace
                    let iw = writes[writes.len() / 2];
                    provenance(Provenance::AgentIntroduced, Some(iw))
                }
                (1, _) => provenance(Provenance::Inherited, None),
                _ => provenance(Provenance::NoCodeLocation, None),
            };
            let r = run(&b, &p);
            if let Some((origin, ty)) = r.outcome.origin() {
                // The origin never comes after the introducing write.
                if let Some(iw) = p.introducing_write {
                    prop_assert!(origin <= iw.turn);
                }
                // Defect in the code change: only the introducing write, only agent-introduced.
                if ty == OriginType::DefectInCodeChange {
                    prop_assert_eq!(p.provenance, Provenance::AgentIntroduced);
                    prop_assert_eq!(Some(origin), p.introducing_write.map(|w| w.turn));
                }
                // The origin is an applicable, scored turn.
                prop_assert!(b.scores.score(origin).is_some_and(|s| s.judgment.applicable));
                // Missed opportunities come after the origin and are implementation/review.
                for m in &r.missed_opportunities {
                    prop_assert!(m.turn > origin);
                    prop_assert!(m.vr <= 1 || m.sa <= 1);
                }
                prop_assert!(checks(&r, &p).iter().all(|c| c.passed));
            } else {
                prop_assert!(r.missed_opportunities.is_empty());
            }
            // It is the earliest qualifying candidate among (i) and (ii).
            if let (Some(a), Some(o)) = (r.candidates.inadequate_defence_selected, r.outcome.origin()) {
                prop_assert!(o.0 <= a);
            }
            if let (Some(a), Some(o)) = (r.candidates.unaddressed_requirement, r.outcome.origin()) {
                prop_assert!(o.0 <= a);
            }
        }
    }
}
