//! The history-only automatic checks: [`checks`] re-derives them from the history, and
//! [`independent_checks`] uses evidence other than the fragment matcher.

use crate::provenance::*;
use crate::reconstruct::*;
use sage_trace::case::FailureAnchor;
use sage_trace::{normalize_ws, CanonicalTrace};
use serde::{Deserialize, Serialize};

/// One automatic check on a result: a failed check is reported, never hidden.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Check {
    /// Kebab-case name, e.g. `fragment-absent-from-baseline`.
    pub name: String,
    pub passed: bool,
    /// What was found, in words.
    pub detail: String,
}

impl Check {
    fn new(name: &str, passed: bool, detail: impl Into<String>) -> Check {
        Check {
            name: name.to_string(),
            passed,
            detail: detail.into(),
        }
    }
}

/// The automatic checks of SAGE.md that depend on the history only, re-derived from `history`
/// (not from `result.presence`), so a result that disagrees with its history fails them.
/// The origin check (origin turn <= introducing write) belongs to the origin rule; the
/// checks that use evidence other than the fragment matcher are [`independent_checks`].
pub fn checks(
    anchor: &FailureAnchor,
    history: &ArtefactHistory,
    result: &ProvenanceResult,
) -> Vec<Check> {
    checks_from(&FragmentStates::of(anchor, history), result)
}

/// [`checks`] on the fragment's presence matched along the history ([`FragmentStates::of`]),
/// not on `result.presence`: a result that disagrees with its history still fails them.
pub fn checks_from(states: &FragmentStates, result: &ProvenanceResult) -> Vec<Check> {
    let mut out = Vec::new();
    let no_intro = |out: &mut Vec<Check>| {
        let passed =
            result.introducing_write.is_none() && !result.introducing_write_cannot_determine;
        out.push(Check::new(
            "no-introducing-write",
            passed,
            if passed {
                format!(
                    "{} code has no introducing write",
                    result.provenance.as_str()
                )
            } else {
                format!(
                    "{} code names an introducing write",
                    result.provenance.as_str()
                )
            },
        ));
    };
    let (Some((_, presence)), false) = (
        states.matched(),
        result.provenance == Provenance::NoCodeLocation,
    ) else {
        no_intro(&mut out);
        return out;
    };
    let artefact = &states.artefact;
    let missing =
        |ps: &[Presence]| -> Vec<String> { ps.iter().filter(|p| !p.present).map(at).collect() };
    match result.provenance {
        Provenance::Inherited => {
            let base = presence[0].present;
            out.push(Check::new(
                "fragment-present-in-baseline",
                base,
                if base {
                    "fragment found in the baseline".to_string()
                } else {
                    format!("fragment not found in the baseline of {artefact}")
                },
            ));
            let absent = missing(&presence[1..]);
            out.push(Check::new(
                "fragment-present-in-every-snapshot",
                absent.is_empty(),
                if absent.is_empty() {
                    format!(
                        "fragment found in all {} later state(s)",
                        presence.len() - 1
                    )
                } else {
                    format!("fragment missing after {}", absent.join(", "))
                },
            ));
            no_intro(&mut out);
        }
        Provenance::AgentIntroduced => {
            // The state the result says introduced the fragment: the introducing write's
            // snapshot, or the recorded final state when no replayed snapshot shows it.
            let idx = match result.introducing_write {
                Some(iw) if !iw.deduced => presence.iter().position(|p| p.write == Some(iw.write)),
                Some(_) => presence.iter().position(|p| p.final_state),
                None if result.introducing_write_cannot_determine => {
                    presence.iter().position(|p| p.final_state)
                }
                None => {
                    out.push(Check::new(
                        "fragment-present-after-introducing-write",
                        false,
                        "agent-introduced code without an introducing write",
                    ));
                    return out;
                }
            };
            let Some(idx) = idx.filter(|i| *i > 0) else {
                out.push(Check::new(
                    "fragment-present-after-introducing-write",
                    false,
                    match result.introducing_write {
                        Some(iw) if !iw.deduced => {
                            format!("write {} is not an applied write to {artefact}", iw.write)
                        }
                        _ => format!("{artefact} has no recorded final state beyond the replay"),
                    },
                ));
                return out;
            };
            let base = presence[0].present;
            let before = &presence[idx - 1];
            let (passed, detail) = match (base, before.present) {
                (false, false) => (true, "fragment not found in the baseline".to_string()),
                (true, false) => (
                    true,
                    format!(
                        "fragment in the baseline but eliminated before the introducing write \
                         (absent after {})",
                        at(before)
                    ),
                ),
                (_, true) => (
                    false,
                    format!(
                        "fragment already present in {}, before the introducing write",
                        at(before)
                    ),
                ),
            };
            out.push(Check::new("fragment-absent-from-baseline", passed, detail));
            let here = presence[idx].present;
            out.push(Check::new(
                "fragment-present-after-introducing-write",
                here,
                {
                    let where_ = if presence[idx].final_state {
                        format!("in {}", at(&presence[idx]))
                    } else {
                        format!("after {}", at(&presence[idx]))
                    };
                    if here {
                        format!("fragment found {where_}")
                    } else {
                        format!("fragment not found {where_}")
                    }
                },
            ));
            let absent = missing(&presence[idx + 1..]);
            out.push(Check::new(
                "fragment-present-in-every-later-snapshot",
                absent.is_empty(),
                if absent.is_empty() {
                    format!(
                        "fragment found in all {} later state(s)",
                        presence.len() - idx - 1
                    )
                } else {
                    format!("fragment missing after {}", absent.join(", "))
                },
            ));
        }
        // Handled above: no-code-location only has the no-introducing-write check.
        Provenance::NoCodeLocation => {}
    }
    out
}

/// Whitespace-normalized literal containment: the fragment's text as written, runs of
/// whitespace collapsed, nothing else (no tokenizer).
pub(crate) fn literally_contains(state: &str, fragment: &str) -> bool {
    let f = normalize_ws(fragment);
    !f.is_empty() && normalize_ws(state).contains(&f)
}

/// The checks that can fail independently of the code that produced the result: each uses
/// evidence other than the replay and the fragment matcher (the trace's own submission or the
/// case's final file, the canonical trace's write records, literal text search).
///
/// - `every-write-applied`: no write to the anchor's artefact failed, and no turn ran an edit
///   command naming it that sage could not replay;
/// - `final-state-matches-replay`, per artefact: the replayed final state equals each
///   recorded final state (submission, case final file) of an artefact the trace changes;
/// - `introducing-write-is-a-write-of-the-trace`: the introducing write is write N of the
///   canonical trace, held by its turn, to the anchor's artefact (or, deduced, a turn the
///   trace records changing it);
/// - `fragment-literally-absent` (no-code-location): the fragment's text occurs in no state;
/// - `fragment-in-baseline-literal-and-tokens`: a literal occurrence in the baseline is
///   also found by the token matcher.
pub fn independent_checks(
    anchor: &FailureAnchor,
    history: &ArtefactHistory,
    trace: &CanonicalTrace,
    result: &ProvenanceResult,
) -> Vec<Check> {
    independent_checks_from(
        &FragmentStates::of(anchor, history),
        anchor,
        history,
        trace,
        result,
    )
}

/// [`independent_checks`], reading the token matcher's answer on the baseline from `states`
/// ([`FragmentStates::of`] of the same anchor and history) instead of tokenizing it again.
pub fn independent_checks_from(
    states: &FragmentStates,
    anchor: &FailureAnchor,
    history: &ArtefactHistory,
    trace: &CanonicalTrace,
    result: &ProvenanceResult,
) -> Vec<Check> {
    let mut out = Vec::new();
    let artefact = history.resolve_name(&anchor.artefact);

    // every-write-applied
    let failed = history.failures_of(&artefact);
    let unreplayed: Vec<(usize, String)> =
        unreplayed_changes(history, Some(trace), &artefact, None)
            .into_iter()
            .filter(|(_, (w, _))| w.is_none())
            .map(|(t, (_, how))| (t, how))
            .collect();
    let mut problems: Vec<String> = failed
        .iter()
        .map(|f| {
            format!(
                "write {} (turn {}, {}) failed: {}",
                f.write, f.turn, f.op, f.reason
            )
        })
        .collect();
    // An unreplayed edit is covered when the artefact's recorded final state is known: the
    // history then takes the final state from that record (and final-state-matches-replay
    // compares it with whatever did replay); without one, the replay is silently short.
    let covered = history.recorded_final(&artefact).map(|f| f.source.clone());
    let notes: Vec<String> = unreplayed
        .iter()
        .map(|(t, how)| format!("turn {t}: {how}"))
        .collect();
    if covered.is_none() {
        problems.extend(notes.iter().cloned());
    }
    out.push(Check::new(
        "every-write-applied",
        problems.is_empty(),
        if !problems.is_empty() {
            problems.join("; ")
        } else if let (false, Some(src)) = (notes.is_empty(), &covered) {
            format!(
                "all {} replayable write(s) to {artefact} applied; not replayed, and covered by the \
                 {src}: {}",
                history.snapshots_of(&artefact).len(),
                notes.join("; ")
            )
        } else {
            format!(
                "all {} write(s) to {artefact} applied; no unreplayed edit names it",
                history.snapshots_of(&artefact).len()
            )
        },
    ));

    // final-state-matches-replay, per artefact the trace changes (or that has several records)
    let has_trace_submission =
        !trace.submissions.is_empty() || trace.writes().any(|(_, w)| w.final_state);
    let mut names: Vec<String> = history
        .final_states
        .iter()
        .map(|f| f.artefact.clone())
        .collect();
    if has_trace_submission {
        // A submitted patch covers the whole repository: a baseline artefact the replay
        // changed but the patch does not name must have stayed as it was.
        for k in history.baselines.keys() {
            if !history.snapshots_of(k).is_empty() {
                names.push(k.clone());
            }
        }
    }
    names.sort();
    names.dedup();
    for name in names {
        let recorded: Vec<&FinalState> = history.final_states_of(&name);
        // Something replays when the trace has write records for the artefact.
        let replays =
            !history.snapshots_of(&name).is_empty() || !history.failures_of(&name).is_empty();
        let replayed = history.replayed_final(&name);
        if recorded.is_empty() {
            // Named by no submission: the patch says the file is unchanged.
            let base = history.baseline(&name);
            out.push(Check::new(
                "final-state-matches-replay",
                replayed == base,
                if replayed == base {
                    format!("{name}: replay ends where it started, as the submission (which does not name it) says")
                } else {
                    format!("{name}: the replay changes it, but the submission does not name it (unchanged)")
                },
            ));
            continue;
        }
        if !replays {
            // Nothing to replay: the recorded states can only be compared with each other.
            let usable: Vec<&&FinalState> = recorded.iter().filter(|f| f.usable()).collect();
            if recorded.len() > 1 {
                let agree = usable.len() == recorded.len()
                    && usable.windows(2).all(|w| w[0].content == w[1].content);
                out.push(Check::new(
                    "final-state-sources-agree",
                    agree,
                    format!(
                        "{name}: {} (no write of the trace replays it)",
                        recorded
                            .iter()
                            .map(|f| match &f.error {
                                Some(e) => format!("{}: {e}", f.source),
                                None => f.source.clone(),
                            })
                            .collect::<Vec<_>>()
                            .join(if agree { " = " } else { " vs " })
                    ),
                ));
            } else if let Some(e) = &recorded[0].error {
                out.push(Check::new(
                    "final-state-matches-replay",
                    false,
                    format!("{name}: {}: {e}", recorded[0].source),
                ));
            }
            continue;
        }
        let lf = |x: Option<&str>| x.map(|t| t.replace("\r\n", "\n"));
        for f in recorded {
            let (passed, detail) = match (&f.error, f.content.as_deref()) {
                (Some(e), _) => (false, format!("{name}: {}: {e}", f.source)),
                (None, rec) if rec == replayed => (
                    true,
                    format!("{name}: the replayed final state equals the {}", f.source),
                ),
                (None, rec) if lf(rec) == lf(replayed) => (
                    true,
                    format!(
                        "{name}: the replayed final state equals the {} up to CRLF/LF line ends",
                        f.source
                    ),
                ),
                (None, rec) => (
                    false,
                    format!("{name}: {}", first_difference(replayed, rec, &f.source)),
                ),
            };
            out.push(Check::new("final-state-matches-replay", passed, detail));
        }
    }

    // introducing-write-is-a-write-of-the-trace
    if let Some(iw) = result.introducing_write {
        let (passed, detail) = if iw.deduced {
            let turn_changes = unreplayed_changes(history, Some(trace), &artefact, None);
            match turn_changes.get(&iw.turn) {
                Some((_, how)) => (
                    true,
                    format!("turn {} records a change to {artefact}: {how}", iw.turn),
                ),
                None => (
                    false,
                    format!("turn {} records no change to {artefact}", iw.turn),
                ),
            }
        } else {
            let nth = trace
                .turns
                .iter()
                .flat_map(|t| t.writes.iter().map(move |w| (t.index, w)))
                .filter(|(_, w)| !w.final_state)
                .nth(iw.write.wrapping_sub(1));
            match nth {
                Some((t, w)) if t == iw.turn && history.resolve_name(&w.artefact) == artefact => (
                    true,
                    format!(
                        "write {} of the trace is turn {t}'s {} to {}",
                        iw.write,
                        w.via,
                        w.artefact
                    ),
                ),
                Some((t, w)) => (
                    false,
                    format!(
                        "write {} of the trace is turn {t}'s write to {}, not turn {}'s to {artefact}",
                        iw.write, w.artefact, iw.turn
                    ),
                ),
                None => (false, format!("the trace has no write {}", iw.write)),
            }
        };
        out.push(Check::new(
            "introducing-write-is-a-write-of-the-trace",
            passed,
            detail,
        ));
    }

    let fragment = anchor.fragment.as_deref().filter(|f| !f.trim().is_empty());
    if let (Some(fragment), Some((matcher, presence))) = (fragment, states.matched()) {
        // fragment-literally-absent
        if result.provenance == Provenance::NoCodeLocation {
            let mut found = Vec::new();
            if history
                .baseline(&artefact)
                .is_some_and(|b| literally_contains(b, fragment))
            {
                found.push("the baseline".to_string());
            }
            for s in history.snapshots_of(&artefact) {
                if s.content
                    .as_deref()
                    .is_some_and(|c| literally_contains(c, fragment))
                {
                    found.push(format!("write {} (turn {})", s.write, s.turn));
                }
            }
            for f in history.final_states_of(&artefact) {
                if f.content
                    .as_deref()
                    .is_some_and(|c| literally_contains(c, fragment))
                {
                    found.push(f.source.clone());
                }
            }
            out.push(Check::new(
                "fragment-literally-absent",
                found.is_empty(),
                if found.is_empty() {
                    format!("the fragment's text occurs in no state of {artefact}")
                } else {
                    format!("the fragment's text occurs in {}", found.join(", "))
                },
            ));
        }
        // fragment-in-baseline-literal-and-tokens (comments cut first in Python, naively to
        // the end of the line on both sides, so old code kept in a comment is not "present")
        if let Some(b) = history.baseline(&artefact) {
            let literal = if matcher.method() == crate::fragment::Method::PythonTokens {
                let cut = |t: &str| {
                    t.lines()
                        .map(|l| l.split('#').next().unwrap_or(""))
                        .collect::<Vec<_>>()
                        .join("\n")
                };
                literally_contains(&cut(b), &cut(fragment))
            } else {
                literally_contains(b, fragment)
            };
            // The baseline's entry of the presence: the token matcher on this baseline.
            let tokens = presence[0].present;
            let word = |x: bool| if x { "present" } else { "absent" };
            out.push(Check::new(
                "fragment-in-baseline-literal-and-tokens",
                !literal || tokens,
                format!(
                    "in the baseline of {artefact}: literally {}, by {} {}",
                    word(literal),
                    matcher.method().as_str(),
                    word(tokens)
                ),
            ));
        }
    }
    out
}

/// Where two final states first differ, in words.
fn first_difference(replayed: Option<&str>, recorded: Option<&str>, source: &str) -> String {
    match (replayed, recorded) {
        (None, None) => format!("both the replay and the {source} have no file"),
        (None, Some(_)) => format!("the replay leaves no file, the {source} has one"),
        (Some(_), None) => format!("the replay leaves a file, the {source} deletes it"),
        (Some(a), Some(b)) => {
            let (la, lb): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
            let n = la
                .iter()
                .zip(&lb)
                .position(|(x, y)| x != y)
                .unwrap_or(la.len().min(lb.len()));
            let show = |v: &[&str]| {
                v.get(n)
                    .map(|l| format!("`{}`", l.trim()))
                    .unwrap_or_else(|| "end of file".into())
            };
            let eol = if la == lb {
                " (line ends or final newline differ)"
            } else {
                ""
            };
            format!(
                "the replayed final state differs from the {source} at line {}: replay {}, \
                 {source} {}{eol}",
                n + 1,
                show(&la),
                show(&lb)
            )
        }
    }
}
