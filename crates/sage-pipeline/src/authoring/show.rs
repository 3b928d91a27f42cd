//! `sage case show`: an artefact as sage's history has it after a write or a turn, or the
//! diff that write or turn made.

use sage_history::ArtefactHistory;
use std::path::Path;

/// What to show.
#[derive(Debug, Clone)]
pub enum At {
    /// After write N (1-based, trace order, as results number writes).
    Write(usize),
    /// After every write of turns 1..=N.
    Turn(usize),
}

/// The text to print, or an error naming the case and what is wrong.
pub fn show(
    dir: &Path,
    at: &At,
    artefact: Option<&str>,
    diff: bool,
    rules: &crate::Rules,
) -> Result<String, crate::InputError> {
    // A partly known file's placeholders are shown as what they are.
    show_text(dir, at, artefact, diff, rules)
        .map(|t| sage_history::knowledge::readable(&t))
        .map_err(crate::InputError)
}

fn show_text(
    dir: &Path,
    at: &At,
    artefact: Option<&str>,
    diff: bool,
    rules: &crate::Rules,
) -> Result<String, String> {
    let (prepared, _) =
        crate::localize::prepare(dir, rules).map_err(|s| format!("{}: {}", s.case, s.message))?;
    let h: &ArtefactHistory = &prepared.history;
    let name = |a: &str| h.resolve_name(a);
    match at {
        At::Write(n) => {
            if let Some(f) = h.failures.iter().find(|f| f.write == *n) {
                return Err(format!(
                    "{}: write {n} (turn {}, {} on {}) could not be applied: {}",
                    dir.display(),
                    f.turn,
                    f.op,
                    f.artefact,
                    f.reason
                ));
            }
            let Some(s) = h.snapshots.iter().find(|s| s.write == *n) else {
                let total = h.snapshots.len() + h.failures.len();
                return Err(format!(
                    "{}: no write {n}; the trace has {total} write(s) (numbered from 1 in trace order)",
                    dir.display()
                ));
            };
            if let Some(a) = artefact {
                if name(a) != s.artefact {
                    return Err(format!(
                        "{}: write {n} changes {}, not {a}",
                        dir.display(),
                        s.artefact
                    ));
                }
            }
            let before = before_write(h, &s.artefact, *n);
            let header = format!(
                "# write {n} at turn {} → {} ({}, via {}; {}{})\n",
                s.turn,
                s.artefact,
                s.op,
                s.via,
                s.raw.display(),
                if s.fuzzy {
                    "; applied by a whitespace-tolerant match"
                } else {
                    ""
                }
            );
            Ok(header + &render(&s.artefact, before.as_deref(), s.content.as_deref(), diff))
        }
        At::Turn(t) => {
            if *t == 0 || *t > prepared.trace.turns.len() {
                return Err(format!(
                    "{}: no turn {t}; the trace has turns 1..={}",
                    dir.display(),
                    prepared.trace.turns.len()
                ));
            }
            let a = name(artefact.unwrap_or(&prepared.anchor.artefact));
            let before = h
                .snapshots
                .iter()
                .rev()
                .find(|s| s.artefact == a && s.turn < *t)
                .map(|s| s.content.clone())
                .unwrap_or_else(|| h.baselines.get(&a).cloned());
            let after_snap = h
                .snapshots
                .iter()
                .rev()
                .find(|s| s.artefact == a && s.turn <= *t);
            let after = match after_snap {
                Some(s) => s.content.clone(),
                None => h.baselines.get(&a).cloned(),
            };
            let writes: Vec<String> = h
                .snapshots
                .iter()
                .filter(|s| s.artefact == a && s.turn == *t)
                .map(|s| s.write.to_string())
                .collect();
            let header = format!(
                "# {a} after turn {t} ({})\n",
                if writes.is_empty() {
                    "the turn does not write it".to_string()
                } else {
                    format!("write(s) {} in this turn", writes.join(", "))
                }
            );
            if before.is_none() && after.is_none() {
                let known = h.artefacts();
                let near = super::closest(&a, &known, 3);
                return Err(format!(
                    "{}: {a} does not exist after turn {t} (no baseline, no write yet){}",
                    dir.display(),
                    if near.is_empty() {
                        format!("; the case's artefacts: {}", known.join(", "))
                    } else {
                        format!("; did you mean {}?", near.join(" or "))
                    }
                ));
            }
            Ok(header + &render(&a, before.as_deref(), after.as_deref(), diff))
        }
    }
}

/// The artefact's content before write `n`.
fn before_write(h: &ArtefactHistory, artefact: &str, n: usize) -> Option<String> {
    h.snapshots
        .iter()
        .rev()
        .find(|s| s.artefact == artefact && s.write < n)
        .map(|s| s.content.clone())
        .unwrap_or_else(|| h.baselines.get(artefact).cloned())
}

fn render(artefact: &str, before: Option<&str>, after: Option<&str>, diff: bool) -> String {
    if !diff {
        return match after {
            Some(c) => c.to_string(),
            None => "(the artefact is deleted)\n".into(),
        };
    }
    let old = before.unwrap_or("");
    let new = after.unwrap_or("");
    if old == new {
        return "(no change)\n".into();
    }
    let a = if before.is_some() {
        format!("a/{artefact}")
    } else {
        "/dev/null".into()
    };
    let b = if after.is_some() {
        format!("b/{artefact}")
    } else {
        "/dev/null".into()
    };
    sage_patch::make(old, new, &a, &b)
}
