//! The origin rule (paper 3.3.2, `../shared/method/SAGE.md`): from the artefact history, the
//! per-turn scores and the failure anchor to the origin turn and its type, the missed
//! detection opportunities and the automatic checks.
//!
//! Linking a turn to the anchor is a separate step after scoring (the judge never saw the
//! anchor), and every link records how it was made.

use crate::{ArtefactHistory, Check, Provenance, ProvenanceResult};
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

/// How a turn's expressed defence was linked to the failure anchor. A link must concern the
/// anchor's weakness: the two methods that link are `quote-names-weakness` and
/// `quote-shares-fragment-identifier`; naming or writing the anchor's artefact is recorded as
/// context and links nothing by itself.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum LinkMethod {
    /// A DI quote names the anchor's artefact (its file name). Context only: never links.
    QuoteNamesArtefact,
    /// A DI quote contains a distinctive identifier of the anchor fragment (not a common
    /// word) and names no other weakness.
    QuoteSharesFragmentIdentifier,
    /// A DI quote names the anchor's weakness: its CWE id or a term of its vocabulary that is
    /// not a common word.
    QuoteNamesWeakness,
    /// The turn writes the anchor's artefact. Context only: never links.
    WritesAnchorArtefact,
}

impl LinkMethod {
    /// True for the methods that link a defence to the anchor's weakness.
    pub fn links(self) -> bool {
        matches!(
            self,
            LinkMethod::QuoteNamesWeakness | LinkMethod::QuoteSharesFragmentIdentifier
        )
    }
}

/// A turn with DI > 0 and whether (and how) it is linked to the anchor.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Link {
    pub turn: usize,
    pub linked: bool,
    /// Every method that linked it (empty when not linked).
    pub methods: Vec<LinkMethod>,
    /// What matched, and in which DI quote: the term or the identifier.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<String>,
    /// What was found that does not link by itself (the quote names the artefact, the turn
    /// writes it, a shared identifier in a quote about another weakness).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub context: Vec<String>,
}

/// The earliest turn qualifying under each candidate of the rule (before choosing).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Candidates {
    pub inadequate_defence_selected: Option<usize>,
    pub unaddressed_requirement: Option<usize>,
    pub defect_in_code_change: Option<usize>,
}

/// A missed detection opportunity: an implementation or review turn after the origin, marked
/// applicable and a security opportunity by the judge, whose VR or SA is at most 1. Reported
/// separately, never an origin.
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
    /// Turns whose scoring failed. The case is undetermined (scoring-failed) only when the
    /// rule needed one of them (see `docs/design.md`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scoring_failures: Vec<usize>,
    /// Implementation or review turns after the origin whose scoring failed: they could not
    /// be assessed as missed detection opportunities.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missed_unassessed: Vec<usize>,
    /// What the rule could not know, and how it proceeded (e.g. the introducing write cannot
    /// be determined in a final-only trace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uncertainty: Option<String>,
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
    /// What linking may not rest on: everyday words and too-common identifiers
    /// (`[linking]` of the lexicon).
    pub common_words: &'a [String],
    /// Identifiers too common in code to link anything.
    pub stop_identifiers: &'a [String],
    /// Every CWE's distinctive vocabulary, `(term, CWE)`: a quote naming another weakness's
    /// term concerns that weakness.
    pub weakness_vocabulary: &'a WeaknessVocabulary,
}

/// Every CWE's distinctive vocabulary, `(term, CWE)`, compiled into one [`TermSet`] once for
/// a run: compiling it for every case was a fifth of a corpus run of small cases. Each case
/// masks out the anchor's own terms ([`Linker`]) instead of compiling the rest anew.
#[derive(Debug)]
pub struct WeaknessVocabulary {
    terms: Vec<(String, String)>,
    /// Each term's CWE, normalized (`CWE-22`).
    cwes: Vec<Option<String>>,
    set: TermSet,
    /// An anchor's own vocabulary compiled, by its terms: the cases of a corpus share a
    /// handful of CWEs, and compiling it per case was most of what linking cost them.
    anchors: std::sync::Mutex<std::collections::HashMap<Vec<String>, std::sync::Arc<TermSet>>>,
}

impl WeaknessVocabulary {
    /// Compile `(term, CWE)` pairs (the lexicon's `weakness_vocabulary`), in their order.
    pub fn new(terms: Vec<(String, String)>) -> WeaknessVocabulary {
        WeaknessVocabulary {
            cwes: terms
                .iter()
                .map(|(_, c)| sage_trace::text::normalize_cwe(c))
                .collect(),
            set: TermSet::new(&terms.iter().map(|(t, _)| t).collect::<Vec<_>>()),
            terms,
            anchors: Default::default(),
        }
    }

    /// `TermSet::new(weakness)`, compiled once per distinct list.
    fn anchor_set(&self, weakness: &[&String]) -> std::sync::Arc<TermSet> {
        let key: Vec<String> = weakness.iter().map(|t| t.to_string()).collect();
        let mut cache = self.anchors.lock().unwrap_or_else(|p| p.into_inner());
        cache
            .entry(key)
            .or_insert_with(|| std::sync::Arc::new(TermSet::new(weakness)))
            .clone()
    }
}

/// Distinctive identifiers of a fragment (and the words inside its string literals): three or
/// more characters, not all digits, not a stop identifier.
pub(crate) fn fragment_identifiers_with(fragment: &str, stop: &[String]) -> Vec<String> {
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
                && !stop.iter().any(|x| x.to_lowercase() == lc)
                && !out.iter().any(|o| o.to_lowercase() == lc)
            {
                out.push(w);
            }
        }
    }
    out
}

use sage_trace::text::{basename, term_matches, TermSet};
use std::collections::HashSet;

/// What linking reads of the anchor and the vocabularies, prepared once per case: every
/// vocabulary compiled into one [`TermSet`] (matching a quote is one pass per vocabulary,
/// whatever its size), the common words lower-cased once (`[linking]`: they never link), the fragment's identifiers found
/// once. Linking a turn is then O(its quotes).
struct Linker<'a> {
    input: &'a RuleInput<'a>,
    anchor_cwe: Option<String>,
    /// The anchor CWE's id as a term (`cwe-327`).
    anchor_cwe_term: Option<String>,
    /// The anchor's vocabulary without its common words, in the lexicon's order.
    weakness: Vec<&'a String>,
    weakness_set: std::sync::Arc<TermSet>,
    /// Per term of the weakness vocabulary: another weakness's term (another CWE, not in
    /// the anchor's vocabulary).
    other: Vec<bool>,
    /// Distinctive identifiers of the fragment that are not common words.
    ids: Vec<String>,
    ids_set: TermSet,
    /// The anchor artefact's file name, lower-cased.
    artefact: String,
    anchor_name: String,
}

impl<'a> Linker<'a> {
    fn new(input: &'a RuleInput<'a>) -> Linker<'a> {
        let common: HashSet<String> = input
            .common_words
            .iter()
            .map(|c| c.to_lowercase())
            .collect();
        let is_common = |w: &str| common.contains(&w.trim_end_matches('*').to_lowercase());
        let anchor_cwe = sage_trace::text::normalize_cwe(&input.anchor.cwe);
        let weakness: Vec<&String> = input
            .weakness_terms
            .iter()
            .filter(|t| !is_common(t))
            .collect();
        let vocabulary = input.weakness_vocabulary;
        let other: Vec<bool> = vocabulary
            .terms
            .iter()
            .zip(&vocabulary.cwes)
            .map(|((t, _), cwe)| {
                *cwe != anchor_cwe
                    && !input
                        .weakness_terms
                        .iter()
                        .any(|a| a.eq_ignore_ascii_case(t))
            })
            .collect();
        let ids: Vec<String> = input
            .anchor
            .fragment
            .as_deref()
            .map(|f| fragment_identifiers_with(f, input.stop_identifiers))
            .unwrap_or_default()
            .into_iter()
            .filter(|id| !is_common(id))
            .collect();
        Linker {
            weakness_set: input.weakness_vocabulary.anchor_set(&weakness),
            other,
            ids_set: TermSet::new(&ids),
            ids,
            anchor_cwe_term: anchor_cwe.as_ref().map(|id| id.to_lowercase()),
            anchor_cwe,
            weakness,
            artefact: basename(&input.anchor.artefact).to_lowercase(),
            anchor_name: input.history.resolve_name(&input.anchor.artefact),
            input,
        }
    }

    /// The anchor's weakness named in `q` (lower-cased, normalized): its distinctive terms,
    /// then its CWE id.
    fn names_weakness(&self, q: &str) -> Vec<String> {
        let mut terms: Vec<String> = self
            .weakness_set
            .matching(q)
            .into_iter()
            .map(|i| self.weakness[i].clone())
            .collect();
        if let Some(id) = &self.anchor_cwe_term {
            if term_matches(q, id) {
                terms.push(self.input.anchor.cwe.clone());
            }
        }
        terms
    }

    /// Link turn `k` (which has DI > 0) to the anchor, reading every non-zero DI quote of
    /// the turn: linked when one of them names the anchor's weakness, or shares a
    /// distinctive identifier with the fragment without naming another weakness.
    fn link(&self, k: usize) -> Link {
        let input = self.input;
        let mut methods = Vec::new();
        let mut evidence = Vec::new();
        let mut context = Vec::new();
        let quotes: Vec<String> = input
            .scores
            .score(k)
            .map(|s| {
                s.judgment
                    .di
                    .quotes()
                    .into_iter()
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        // The turn's other non-zero quotes (TR, VR, SA): the weakness its defence concerns
        // is often named in the sentence next to the defence.
        let other_quotes: Vec<String> = input
            .scores
            .score(k)
            .map(|s| {
                [&s.judgment.tr, &s.judgment.vr, &s.judgment.sa]
                    .iter()
                    .flat_map(|d| d.quotes())
                    .filter(|q| !quotes.iter().any(|x| x == q))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let short = |q: &str| {
            let n = normalize_ws(q);
            if n.chars().count() > 60 {
                format!("{}…", n.chars().take(60).collect::<String>())
            } else {
                n
            }
        };
        for quote in &other_quotes {
            let terms = self.names_weakness(&normalize_ws(&quote.to_lowercase()));
            if !terms.is_empty() && !quotes.is_empty() {
                if !methods.contains(&LinkMethod::QuoteNamesWeakness) {
                    methods.push(LinkMethod::QuoteNamesWeakness);
                }
                evidence.push(format!(
                    "weakness term {} in the same turn's “{}”",
                    terms.join(", "),
                    short(quote)
                ));
            }
        }
        for quote in &quotes {
            let q = normalize_ws(&quote.to_lowercase());
            // The anchor's weakness: its CWE id, or a distinctive term of its vocabulary.
            let terms = self.names_weakness(&q);
            // Another weakness: a CWE id other than the anchor's, or a distinctive term of
            // another CWE's vocabulary that the anchor's vocabulary does not share.
            let vocabulary = input.weakness_vocabulary;
            let other: Vec<String> = vocabulary
                .set
                .matching(&q)
                .into_iter()
                .filter(|&i| self.other[i])
                .map(|i| format!("{} ({})", vocabulary.terms[i].0, vocabulary.terms[i].1))
                .chain(
                    sage_trace::text::cwe_ids(&q)
                        .into_iter()
                        .filter(|c| Some(c) != self.anchor_cwe.as_ref()),
                )
                .collect();
            if !terms.is_empty() {
                if !methods.contains(&LinkMethod::QuoteNamesWeakness) {
                    methods.push(LinkMethod::QuoteNamesWeakness);
                }
                evidence.push(format!(
                    "weakness term {} in “{}”",
                    terms.join(", "),
                    short(quote)
                ));
            }
            let shared: Vec<&String> = self
                .ids_set
                .matching(&q)
                .into_iter()
                .map(|i| &self.ids[i])
                .collect();
            if !shared.is_empty() {
                let list = shared
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ");
                if other.is_empty() || !terms.is_empty() {
                    if !methods.contains(&LinkMethod::QuoteSharesFragmentIdentifier) {
                        methods.push(LinkMethod::QuoteSharesFragmentIdentifier);
                    }
                    evidence.push(format!("fragment identifier {list} in “{}”", short(quote)));
                } else {
                    context.push(format!(
                        "fragment identifier {list} in a quote about another weakness ({}): “{}”",
                        other.join(", "),
                        short(quote)
                    ));
                }
            }
            if !self.artefact.is_empty() && sage_trace::text::names_file(&q, &self.artefact) {
                let note = format!("a DI quote names {}", input.anchor.artefact);
                if !context.contains(&note) {
                    context.push(note);
                }
            }
        }
        if input.trace.turn(k).is_some_and(|t| {
            t.writes.iter().any(|w| {
                !w.final_state && input.history.resolve_name(&w.artefact) == self.anchor_name
            })
        }) {
            context.push(format!("writes {}", input.anchor.artefact));
        }
        Link {
            turn: k,
            linked: methods.iter().any(|m| m.links()),
            methods,
            evidence,
            context,
        }
    }
}

/// Apply the origin rule.
pub fn localize(input: &RuleInput<'_>) -> OriginResult {
    let n = input.trace.turns.len();
    let introducing = input.provenance.introducing_write.map(|w| w.turn);
    let agent_introduced = input.provenance.provenance == Provenance::AgentIntroduced;
    // The introducing write is unknown (a final-only trace that does not show which turn made
    // the change): the rule runs over every scored turn and says so.
    let unknown_write = agent_introduced
        && introducing.is_none()
        && input.provenance.introducing_write_cannot_determine;
    let last_write = input
        .history
        .snapshots
        .iter()
        .map(|s| s.turn)
        .chain(input.history.failures.iter().map(|f| f.turn))
        .max();

    // (i) may come from turns strictly before the introducing write; for inherited (and
    // no-code-location) cases from turns at or before the last write, or any turn when the
    // trace writes nothing (or the introducing write is unknown).
    let defence_window_end = match (agent_introduced, introducing, last_write) {
        (true, Some(iw), _) => iw.saturating_sub(1),
        (true, None, _) => n,
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
    let linker = Linker::new(input);
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
            let link = linker.link(k);
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

    // A failed turn matters only when its scores could have changed the outcome: a turn
    // before an (i) or (ii) origin (it could be an earlier candidate); for (iii) or no
    // candidate, a turn inside the windows of (i) and (ii) (it could be a candidate), or the
    // introducing write itself.
    let window = defence_window_end.max(origin_window_end);
    let needed: Vec<usize> = scoring_failures
        .iter()
        .copied()
        .filter(|&f| match chosen {
            Some((
                o,
                OriginType::InadequateDefenceSelected | OriginType::UnaddressedRequirement,
            )) => f < o,
            _ => f <= window || Some(f) == introducing,
        })
        .collect();
    let outcome = if !needed.is_empty() {
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
    let mut missed_unassessed = Vec::new();
    if let Some((origin, _)) = outcome.origin() {
        for t in &input.trace.turns {
            if t.index <= origin || !matches!(t.kind, TurnKind::Implementation | TurnKind::Review) {
                continue;
            }
            match input.scores.get(t.index) {
                Some(sage_trace::TurnOutcome::Scored(s)) => {
                    // Only turns the judge marks applicable and a security opportunity: a
                    // turn with no bearing on the task's security intent misses nothing.
                    if !(s.judgment.applicable && s.judgment.security_opportunity) {
                        continue;
                    }
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
                Some(sage_trace::TurnOutcome::Failed { .. }) => missed_unassessed.push(t.index),
                _ => {}
            }
        }
    }

    let uncertainty = unknown_write.then(|| {
        format!(
            "the introducing write cannot be determined ({}): (i) and (ii) were sought over \
             every scored turn, (iii) was not available, and the origin may come after the \
             unknown introducing write",
            input
                .provenance
                .introducing_write_basis
                .as_deref()
                .unwrap_or("only the final state is known")
        )
    });

    OriginResult {
        outcome,
        candidates,
        defence_window_end: Some(defence_window_end).filter(|e| *e > 0),
        links,
        missed_opportunities: missed,
        scoring_failures,
        missed_unassessed,
        uncertainty,
    }
}

/// The checks of the rule itself (the history checks come from [`crate::checks`]).
pub fn checks(result: &OriginResult, provenance: &ProvenanceResult) -> Vec<Check> {
    let mut out = Vec::new();
    if let Some((origin, ty)) = result.outcome.origin() {
        if provenance.introducing_write_cannot_determine {
            // Nothing to compare the origin with; the result says so in `uncertainty`.
            return out;
        }
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
    use crate::{IntroducingWrite, ReconstructionCondition, Snapshot};
    use proptest::prelude::*;
    use sage_trace::case::DeficiencyCategory;
    use sage_trace::{Actor, RawRef, Turn, Write, WriteOp};
    use sage_trace::{DimensionScore, JudgeId, Judgment, TurnOutcome, TurnScore};

    #[test]
    fn identifiers_skip_common_words() {
        let stop = strings(STOP);
        let ids =
            fragment_identifiers_with(r#"origin = self.request.headers.get("Origin")"#, &stop);
        assert_eq!(ids, vec!["origin", "headers"]);
        let ids = fragment_identifiers_with("cipher = AES.new(secret_key, AES.MODE_ECB)", &stop);
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
            also: Vec::new(),
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
                    crlf_normalized: false,
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
                final_states: vec![],
                path_matches: Default::default(),
                roots: Default::default(),
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
                deduced: false,
            }),
            introducing_write_cannot_determine: false,
            introducing_write_basis: None,
            presence: vec![],
            matching: "test".into(),
            reason: "test".into(),
        }
    }

    /// A small linking vocabulary for the tests (the real one is the lexicon's `[linking]`
    /// and CWE vocabularies, passed in by the pipeline).
    const COMMON: &[&str] = &["target", "path", "query", "url", "file", "name", "key"];
    const STOP: &[&str] = &[
        "self", "get", "set", "new", "return", "def", "import", "from", "data", "value", "request",
        "response", "open", "name", "app",
    ];
    const VOCAB: &[(&str, &str)] = &[
        ("ECB", "CWE-327"),
        ("AES", "CWE-327"),
        ("redirect", "CWE-601"),
        ("open redirect", "CWE-601"),
        ("allowed host*", "CWE-601"),
        ("same host", "CWE-601"),
        ("path traversal", "CWE-22"),
        ("directory traversal", "CWE-22"),
        ("normpath", "CWE-22"),
        ("SQL", "CWE-89"),
    ];

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn run_cwe(b: &Built, p: &ProvenanceResult, cwe: &str) -> OriginResult {
        let terms: Vec<String> = VOCAB
            .iter()
            .filter(|(_, c)| *c == cwe)
            .map(|(t, _)| t.to_string())
            .collect();
        let vocabulary = WeaknessVocabulary::new(
            VOCAB
                .iter()
                .map(|(t, c)| (t.to_string(), c.to_string()))
                .collect(),
        );
        localize(&RuleInput {
            trace: &b.trace,
            history: &b.history,
            provenance: p,
            anchor: &b.anchor,
            scores: &b.scores,
            weakness_terms: &terms,
            common_words: &strings(COMMON),
            stop_identifiers: &strings(STOP),
            weakness_vocabulary: &vocabulary,
        })
    }

    fn run(b: &Built, p: &ProvenanceResult) -> OriginResult {
        run_cwe(b, p, "CWE-327")
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
    fn missed_opportunities_need_an_applicable_security_opportunity() {
        use TurnKind::*;
        let mut b = build(
            &[
                t(Planning, false, 0, 0, true, ""),
                t(Implementation, true, 0, 0, false, ""),
                t(Review, false, 0, 0, true, ""),
                t(Review, false, 0, 0, true, ""),
            ],
            Some(r#"origin = self.request.headers.get("Origin")"#),
        );
        // Turn 4: the judge marks it not applicable.
        if let TurnOutcome::Scored(s) = &mut b.scores.turns[3] {
            s.judgment.applicable = false;
        }
        let r = run(&b, &provenance(Provenance::Inherited, None));
        assert_eq!(
            r.outcome.origin(),
            Some((1, OriginType::UnaddressedRequirement))
        );
        // Turn 2 has no security opportunity, turn 4 is not applicable: only turn 3.
        let missed: Vec<usize> = r.missed_opportunities.iter().map(|m| m.turn).collect();
        assert_eq!(missed, vec![3]);
    }

    /// A built case whose turn `k` has these DI quotes (the first is the main one).
    fn with_di_quotes(b: &mut Built, k: usize, quotes: &[&str]) {
        if let TurnOutcome::Scored(s) = &mut b.scores.turns[k - 1] {
            s.judgment.di = DimensionScore {
                score: 2,
                quote: Some(quotes[0].to_string()),
                rationale: None,
                also: quotes[1..].iter().map(|q| q.to_string()).collect(),
            };
        }
    }

    fn cwe601(b: &mut Built, fragment: &str) {
        b.anchor.cwe = "CWE-601".into();
        b.anchor.fragment = Some(fragment.into());
    }

    fn run601(b: &Built, p: &ProvenanceResult) -> OriginResult {
        run_cwe(b, p, "CWE-601")
    }

    #[test]
    fn linking_rests_on_the_weakness_not_on_common_words_or_the_file() {
        use TurnKind::*;
        let mut b = build(
            &[
                // Writes app.py and names it, shares `target` and `path` with the fragment,
                // but its defence concerns path traversal.
                t(Implementation, true, 0, 2, true, "x"),
                t(Review, false, 0, 0, false, ""),
            ],
            None,
        );
        cwe601(&mut b, "return redirect(target_path)");
        with_di_quotes(
            &mut b,
            1,
            &["In app.py, sanitize the target path with normpath to block directory traversal."],
        );
        let r = run601(&b, &provenance(Provenance::Inherited, None));
        let l = &r.links[0];
        assert!(!l.linked, "{l:?}");
        assert!(
            l.context.iter().any(|c| c.contains("writes app.py")),
            "{l:?}"
        );
        assert!(
            l.context.iter().any(|c| c.contains("names app.py")),
            "{l:?}"
        );
        assert_eq!(
            r.outcome,
            Outcome::Undetermined {
                reason: UndeterminedReason::NoLinkedCandidate
            }
        );
        // A quote naming the anchor's weakness links.
        with_di_quotes(&mut b, 1, &["Only allow a redirect to our own host."]);
        let r = run601(&b, &provenance(Provenance::Inherited, None));
        assert!(r.links[0].linked);
        assert!(r.links[0].methods.contains(&LinkMethod::QuoteNamesWeakness));
        // A distinctive identifier of the fragment links when the quote is about no other
        // weakness.
        with_di_quotes(
            &mut b,
            1,
            &["Validate target_path against a list before use."],
        );
        let r = run601(&b, &provenance(Provenance::Inherited, None));
        assert_eq!(
            r.links[0].methods,
            vec![LinkMethod::QuoteSharesFragmentIdentifier]
        );
    }

    #[test]
    fn every_di_quote_counts_and_their_order_cannot_flip_the_result() {
        use TurnKind::*;
        let a = "Use a constant-time comparison for the token.";
        let l = "Only allow a redirect to our own host.";
        for order in [[a, l], [l, a]] {
            let mut b = build(
                &[
                    t(Planning, false, 0, 2, true, "x"),
                    t(Implementation, true, 0, 0, true, ""),
                ],
                None,
            );
            cwe601(&mut b, "return redirect(next_url)");
            with_di_quotes(&mut b, 1, &order);
            let r = run601(&b, &provenance(Provenance::AgentIntroduced, Some(2)));
            assert_eq!(
                r.outcome.origin(),
                Some((1, OriginType::InadequateDefenceSelected)),
                "{order:?}"
            );
        }
    }

    #[test]
    fn an_unknown_introducing_write_is_recorded_and_widens_the_windows() {
        use TurnKind::*;
        let b = build(
            &[
                t(Planning, false, 1, 0, false, "security"),
                t(Implementation, false, 0, 2, true, "use AES in ECB mode"),
            ],
            Some("AES.MODE_ECB"),
        );
        let mut p = provenance(Provenance::AgentIntroduced, None);
        p.introducing_write_cannot_determine = true;
        p.introducing_write_basis = Some("cannot determine: final state only".into());
        let r = run(&b, &p);
        // (i) from every scored turn; (iii) is unavailable without an introducing write.
        assert_eq!(
            r.outcome.origin(),
            Some((2, OriginType::InadequateDefenceSelected))
        );
        assert_eq!(r.candidates.defect_in_code_change, None);
        assert!(r
            .uncertainty
            .as_deref()
            .unwrap()
            .contains("final state only"));
        assert!(checks(&r, &p).is_empty(), "no origin/write order to check");
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

    fn failed(turn: usize) -> TurnOutcome {
        TurnOutcome::Failed {
            turn,
            attempts: 3,
            reason: "x".into(),
        }
    }

    #[test]
    fn a_scoring_failure_the_rule_needs_leaves_the_case_undetermined() {
        use TurnKind::*;
        let mut b = build(
            &[
                t(Planning, false, 0, 0, true, ""),
                t(Review, false, 0, 0, true, ""),
            ],
            None,
        );
        // Turn 1 fails: it could have been the earliest candidate.
        b.scores.turns[0] = failed(1);
        let r = run(&b, &provenance(Provenance::NoCodeLocation, None));
        assert_eq!(
            r.outcome,
            Outcome::Undetermined {
                reason: UndeterminedReason::ScoringFailed
            }
        );
        assert_eq!(r.scoring_failures, vec![1]);
        assert_eq!(r.candidates.unaddressed_requirement, Some(2));
    }

    #[test]
    fn a_scoring_failure_after_the_origin_is_settled_does_not() {
        use TurnKind::*;
        let mut b = build(
            &[
                t(Planning, false, 0, 0, true, ""),
                t(Review, false, 0, 0, true, ""),
            ],
            None,
        );
        b.scores.turns[1] = failed(2);
        let r = run(&b, &provenance(Provenance::NoCodeLocation, None));
        assert_eq!(
            r.outcome.origin(),
            Some((1, OriginType::UnaddressedRequirement))
        );
        assert_eq!(r.scoring_failures, vec![2]);
        // The failed review turn could not be assessed as a missed opportunity.
        assert!(r.missed_opportunities.is_empty());
        assert_eq!(r.missed_unassessed, vec![2]);
    }

    #[test]
    fn a_defect_in_the_code_change_needs_every_turn_up_to_the_write() {
        use TurnKind::*;
        let mut b = build(
            &[
                t(Planning, false, 1, 0, false, "security matters"),
                t(Implementation, true, 0, 2, true, "use AES in ECB mode"),
                t(Review, false, 0, 0, true, ""),
            ],
            Some("AES.MODE_ECB"),
        );
        let p = provenance(Provenance::AgentIntroduced, Some(2));
        // A failure after the introducing write does not change (iii) at turn 2.
        b.scores.turns[2] = failed(3);
        assert_eq!(
            run(&b, &p).outcome.origin(),
            Some((2, OriginType::DefectInCodeChange))
        );
        // A failure before it might have been (i) or (ii).
        b.scores.turns[0] = failed(1);
        assert_eq!(
            run(&b, &p).outcome,
            Outcome::Undetermined {
                reason: UndeterminedReason::ScoringFailed
            }
        );
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
