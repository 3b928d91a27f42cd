//! Code provenance and the introducing write: [`provenance`] compares the anchor fragment
//! (see [`crate::fragment`]) with the baseline and every snapshot of the anchor's artefact.

use crate::fragment::Matcher;
use crate::reconstruct::*;
use sage_trace::case::FailureAnchor;
use sage_trace::CanonicalTrace;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Code provenance of a failure anchor.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum Provenance {
    Inherited,
    AgentIntroduced,
    NoCodeLocation,
}

impl Provenance {
    pub fn as_str(self) -> &'static str {
        match self {
            Provenance::Inherited => "inherited",
            Provenance::AgentIntroduced => "agent-introduced",
            Provenance::NoCodeLocation => "no-code-location",
        }
    }
}

/// Where the anchor fragment is found: the baseline, after each write to its artefact, and
/// in the recorded final state when that differs from the replay (or nothing replays).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Presence {
    /// `None` for the baseline and the final state, else the write's position.
    pub write: Option<usize>,
    pub turn: Option<usize>,
    pub present: bool,
    /// True for the recorded final state (a submission or the case's final file), which no
    /// turn's replayed write produced.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub final_state: bool,
}

/// The introducing write: the write and its turn.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct IntroducingWrite {
    /// The write's position among all writes of the trace; 0 when the turn changed the
    /// artefact by an edit sage could not replay (see `deduced`).
    pub write: usize,
    pub turn: usize,
    /// True when an earlier write had introduced the fragment, a later one removed it, and
    /// this one reinstated it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reinstated: bool,
    /// True when no replayed snapshot shows the change: only the recorded final state holds
    /// the fragment, and this turn is the only one the trace records changing the artefact
    /// after the last replayed state (a write that could not be applied, or an edit command
    /// sage could not replay). [`ProvenanceResult::introducing_write_basis`] says which.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deduced: bool,
}

/// Code provenance and the introducing write of one anchor.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ProvenanceResult {
    pub provenance: Provenance,
    pub introducing_write: Option<IntroducingWrite>,
    /// Agent-introduced code whose change only the recorded final state shows, with no single
    /// turn recorded making it: the introducing write is `cannot-determine` (and
    /// `introducing_write` is `None`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub introducing_write_cannot_determine: bool,
    /// When the introducing write is not a replayed write: how it was deduced, or why it
    /// cannot be determined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub introducing_write_basis: Option<String>,
    /// The fragment's presence along the history (empty for no fragment).
    pub presence: Vec<Presence>,
    /// How the fragment was compared: `python-tokens` or `normalized-text`.
    pub matching: String,
    /// Why this provenance (one sentence).
    pub reason: String,
}

/// The fragment's presence in the baseline, after each applied write to `artefact`, and in
/// its recorded final state when that differs from the replayed one (or nothing replays).
pub(crate) fn presence_along<'h>(
    matcher: &Matcher,
    history: &'h ArtefactHistory,
    artefact: &str,
) -> Vec<Presence> {
    // A state equal to one already matched (a write that rewrites the file unchanged, a
    // revert) has the same answer: each distinct state is tokenized once.
    let mut seen: std::collections::HashMap<&str, bool> = Default::default();
    let mut found = |c: Option<&'h str>| -> bool {
        let Some(c) = c else { return false };
        *seen.entry(c).or_insert_with(|| matcher.found_in(c))
    };
    let mut out = vec![Presence {
        write: None,
        turn: None,
        present: found(history.baseline(artefact)),
        final_state: false,
    }];
    for s in history.snapshots_of(artefact) {
        out.push(Presence {
            write: Some(s.write),
            turn: Some(s.turn),
            present: found(s.content.as_deref()),
            final_state: false,
        });
    }
    if let Some(f) = history.recorded_final(artefact) {
        if f.content.as_deref() != history.replayed_final(artefact) {
            out.push(Presence {
                write: None,
                turn: None,
                present: found(f.content.as_deref()),
                final_state: true,
            });
        }
    }
    out
}

/// The anchor's fragment matched along its artefact's history once: the baseline, each
/// snapshot and the recorded final state ([`presence_along`]), each distinct state
/// tokenized once. Provenance and every check that needs the matcher's answers read them
/// from here, so a case's states are parsed once between them (they used to be parsed once
/// for provenance and again for the checks).
#[derive(Debug, Clone)]
pub struct FragmentStates {
    /// The anchor's artefact under the history's names.
    pub artefact: String,
    /// The matcher and the presence along the history; `None` when the anchor has no
    /// (non-blank) fragment.
    matched: Option<(Matcher, Vec<Presence>)>,
}

impl FragmentStates {
    /// Match `anchor`'s fragment along `history`.
    pub fn of(anchor: &FailureAnchor, history: &ArtefactHistory) -> FragmentStates {
        let artefact = history.resolve_name(&anchor.artefact);
        let matched = anchor
            .fragment
            .as_deref()
            .filter(|f| !f.trim().is_empty())
            .map(|fragment| {
                let matcher = matcher_for(fragment, &artefact, history);
                let presence = presence_along(&matcher, history, &artefact);
                (matcher, presence)
            });
        FragmentStates { artefact, matched }
    }

    /// The matcher and the fragment's presence along the history (baseline first), when the
    /// anchor has a fragment.
    pub fn matched(&self) -> Option<(&Matcher, &[Presence])> {
        self.matched.as_ref().map(|(m, p)| (m, p.as_slice()))
    }
}

fn matcher_for(fragment: &str, artefact: &str, history: &ArtefactHistory) -> Matcher {
    let sample = history
        .baseline(artefact)
        .or_else(|| history.final_content(artefact));
    Matcher::new(artefact, fragment, sample)
}

pub(crate) fn at(p: &Presence) -> String {
    match (p.write, p.turn) {
        (Some(w), Some(t)) => format!("write {w} (turn {t})"),
        _ if p.final_state => "the recorded final state".to_string(),
        _ => "the baseline".to_string(),
    }
}

/// The turns after `after` (every turn when `None`) that the trace records changing
/// `artefact` without a replayed snapshot: a write to it that could not be applied, or an
/// edit command naming it that produced no write to it. With the failed write's number.
pub(crate) fn unreplayed_changes(
    history: &ArtefactHistory,
    trace: Option<&CanonicalTrace>,
    artefact: &str,
    after: Option<usize>,
) -> BTreeMap<usize, (Option<usize>, String)> {
    let name = history.resolve_name(artefact);
    let later = |t: usize| after.is_none_or(|a| t > a);
    let mut out: BTreeMap<usize, (Option<usize>, String)> = BTreeMap::new();
    for f in history.failures_of(&name) {
        if later(f.turn) {
            out.entry(f.turn).or_insert((
                Some(f.write),
                format!(
                    "write {} ({}) could not be applied: {}",
                    f.write, f.op, f.reason
                ),
            ));
        }
    }
    if let Some(trace) = trace {
        let base = sage_trace::text::basename(&name);
        for t in &trace.turns {
            if !later(t.index) || out.contains_key(&t.index) || !t.is_applicable() {
                continue;
            }
            let writes_it = t
                .writes
                .iter()
                .any(|w| !w.final_state && history.resolve_name(&w.artefact) == name);
            if writes_it {
                continue;
            }
            // The adapters' classifier marks the calls that change a file (`edit_calls`).
            let edit = t
                .edit_calls
                .iter()
                .filter_map(|i| t.tool_calls.get(*i))
                .find(|c| sage_trace::text::names_file(&c.arguments, base));
            if let Some(call) = edit {
                out.insert(
                    t.index,
                    (
                        None,
                        format!(
                            "its {} call edits {name} in a way sage cannot replay ({})",
                            call.name,
                            call.raw.display()
                        ),
                    ),
                );
            }
        }
    }
    out
}

/// Code provenance and the introducing write of `anchor` in `history` (SAGE.md, "Artefact
/// history", and the decisions in `docs/design-history.md`), without the trace: a change
/// only the recorded final state shows is attributed from failed writes alone.
pub fn provenance(anchor: &FailureAnchor, history: &ArtefactHistory) -> ProvenanceResult {
    provenance_in(anchor, history, None)
}

/// [`provenance`], with the trace's unreplayed edit commands as evidence of which turn made a
/// change that only the recorded final state shows.
pub(crate) fn provenance_in(
    anchor: &FailureAnchor,
    history: &ArtefactHistory,
    trace: Option<&CanonicalTrace>,
) -> ProvenanceResult {
    provenance_from(&FragmentStates::of(anchor, history), history, trace)
}

/// [`provenance_in`] on the fragment's presence already matched along the history
/// ([`FragmentStates::of`] of the same anchor and history), so that provenance and its
/// checks tokenize each state once between them.
pub fn provenance_from(
    states: &FragmentStates,
    history: &ArtefactHistory,
    trace: Option<&CanonicalTrace>,
) -> ProvenanceResult {
    let no_location = |presence, matching: &str, reason: &str| ProvenanceResult {
        provenance: Provenance::NoCodeLocation,
        introducing_write: None,
        introducing_write_cannot_determine: false,
        introducing_write_basis: None,
        presence,
        matching: matching.to_string(),
        reason: reason.to_string(),
    };
    let Some((matcher, presence)) = states.matched() else {
        return no_location(
            Vec::new(),
            "none",
            "the failure anchor has no code fragment",
        );
    };
    let artefact = states.artefact.clone();
    let matching = matcher.method().as_str();
    let presence = presence.to_vec();
    if !presence.iter().any(|p| p.present) {
        let reason = format!(
            "fragment found in neither the baseline nor any snapshot{} of {artefact}",
            if presence.iter().any(|p| p.final_state) {
                " nor the recorded final state"
            } else {
                ""
            }
        );
        return no_location(presence, matching, &reason);
    }
    let last = presence.len() - 1;
    if !presence[last].present {
        return no_location(
            presence,
            matching,
            "fragment not present in the final snapshot",
        );
    }
    // The introducing write follows the last state without the fragment.
    let Some(gap) = presence.iter().rposition(|p| !p.present) else {
        let snaps = presence.iter().filter(|p| p.write.is_some()).count();
        let reason = if last == 0 {
            format!("fragment present in the baseline and no write changed {artefact}")
        } else if snaps == 0 {
            format!(
                "fragment present in the baseline and in the recorded final state of {artefact}"
            )
        } else {
            format!(
                "fragment present in the baseline and in all {last} later state(s) of {artefact}"
            )
        };
        return ProvenanceResult {
            provenance: Provenance::Inherited,
            introducing_write: None,
            introducing_write_cannot_determine: false,
            introducing_write_basis: None,
            presence,
            matching: matching.to_string(),
            reason,
        };
    };
    let intro = &presence[gap + 1];
    let reinstated = presence[..gap].iter().any(|p| p.present);
    let first = presence.iter().position(|p| p.present).unwrap_or(0);
    if intro.final_state {
        // No replayed snapshot shows the change: only the recorded final state holds the
        // fragment. The introducing write is the turn the trace records making the change,
        // when there is exactly one; else it cannot be determined.
        let source = history
            .recorded_final(&artefact)
            .map(|f| f.source.clone())
            .unwrap_or_default();
        let after = history.snapshots_of(&artefact).last().map(|s| s.turn);
        let changes = unreplayed_changes(history, trace, &artefact, after);
        let since = match after {
            Some(t) => format!(" after the last replayed write (turn {t})"),
            None => " (no write of the trace replays it)".to_string(),
        };
        let reason = if reinstated {
            format!(
                "fragment present in {}, eliminated by {}, and present again only in the \
                 recorded final state ({source})",
                at(&presence[first]),
                at(&presence[gap])
            )
        } else {
            format!(
                "fragment absent from the baseline and present only in the recorded final state \
                 ({source})"
            )
        };
        let mut result = ProvenanceResult {
            provenance: Provenance::AgentIntroduced,
            introducing_write: None,
            introducing_write_cannot_determine: true,
            introducing_write_basis: None,
            presence,
            matching: matching.to_string(),
            reason,
        };
        if changes.len() == 1 {
            let (turn, (write, how)) = changes.into_iter().next().unwrap_or_default();
            result.introducing_write = Some(IntroducingWrite {
                write: write.unwrap_or(0),
                turn,
                reinstated,
                deduced: true,
            });
            result.introducing_write_cannot_determine = false;
            result.introducing_write_basis = Some(format!(
                "turn {turn} is the only turn the trace records changing {artefact}{since}: {how}"
            ));
        } else if changes.is_empty() {
            result.introducing_write_basis = Some(format!(
                "cannot determine: {artefact} is changed only in the recorded final state and \
                 the trace records no turn making a change to it{since}"
            ));
        } else {
            let turns: Vec<String> = changes.keys().map(|t| t.to_string()).collect();
            result.introducing_write_basis = Some(format!(
                "cannot determine: the trace records {} turns changing {artefact}{since} \
                 without a replayable write (turns {}), and only the final state is known",
                turns.len(),
                turns.join(", ")
            ));
        }
        return result;
    }
    let (Some(write), Some(turn)) = (intro.write, intro.turn) else {
        // Unreachable: entries after the baseline are snapshots or the final state.
        return no_location(
            presence,
            matching,
            "internal: introducing state is the baseline",
        );
    };
    let reason = if reinstated {
        format!(
            "fragment present in {}, eliminated by {}, reinstated by write {write} (turn {turn}) \
             and present through the final snapshot",
            at(&presence[first]),
            at(&presence[gap]),
        )
    } else {
        format!(
            "fragment absent from the baseline and present from write {write} (turn {turn}) \
             through the final snapshot"
        )
    };
    ProvenanceResult {
        provenance: Provenance::AgentIntroduced,
        introducing_write: Some(IntroducingWrite {
            write,
            turn,
            reinstated,
            deduced: false,
        }),
        introducing_write_cannot_determine: false,
        introducing_write_basis: None,
        presence,
        matching: matching.to_string(),
        reason,
    }
}

impl ProvenanceResult {
    /// The introducing-write label as annotators write it: `turn:N`, `none` or
    /// `cannot-determine`.
    pub fn introducing_write_label(&self) -> String {
        match (
            &self.introducing_write,
            self.introducing_write_cannot_determine,
        ) {
            (Some(w), _) => format!("turn:{}", w.turn),
            (None, true) => "cannot-determine".to_string(),
            (None, false) => "none".to_string(),
        }
    }
}
