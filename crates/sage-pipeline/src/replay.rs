//! One case replay for every consumer: the final state of each artefact of a case, as the
//! screening stage (`sage-screen`, which takes files and knows no trace format) needs it.

use sage_screen::{TestsInput, Unit};
use sage_trace::case::{self, Case};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

/// Load every case under `root`; each case that cannot be loaded is reported by message.
pub fn units_from_cases(root: &Path) -> Result<(Vec<Unit>, Vec<String>), case::CaseError> {
    let mut units = Vec::new();
    let mut errors = Vec::new();
    for dir in case::discover(root)? {
        match Case::load(&dir) {
            Ok(c) => match unit_from_case(&c) {
                Ok(u) => units.push(u),
                Err(e) => errors.push(e),
            },
            Err(e) => errors.push(e.to_string()),
        }
    }
    Ok((units, errors))
}

/// Artefact → final content (None: deleted).
type Finals = BTreeMap<String, Option<String>>;

/// The final snapshot of every artefact, by replaying the trace: the adapter normalizes it
/// into a canonical trace and `history::reconstruct` applies every write to the baselines.
/// Writes that could not be applied are returned as notes (the final state may be off).
fn replay_final(c: &Case) -> Result<(Finals, Vec<String>), String> {
    let files: Vec<sage_adapters::SourceFile> = c
        .manifest
        .trace
        .files
        .iter()
        .map(|f| sage_adapters::SourceFile::new(f.clone(), c.dir.join(f)))
        .collect();
    let trace = sage_adapters::normalize(&files, c.manifest.trace.framework.as_deref())
        .map_err(|e| format!("no final snapshot: the trace cannot be replayed: {e}"))?;
    let h = sage_history::reconstruct(&c.baselines, &trace);
    let mut names: BTreeSet<String> = h.baselines.keys().cloned().collect();
    names.extend(h.snapshots.iter().map(|s| s.artefact.clone()));
    let finals = names
        .into_iter()
        .map(|a| {
            let f = h.final_content(&a).map(String::from);
            (a, f)
        })
        .collect();
    let notes = h
        .failures
        .iter()
        .map(|f| {
            format!(
                "write {} (turn {}) to {} could not be applied: {}",
                f.write, f.turn, f.artefact, f.reason
            )
        })
        .collect();
    Ok((finals, notes))
}

fn unit_from_case(c: &Case) -> Result<Unit, String> {
    let framework = c
        .manifest
        .trace
        .framework
        .clone()
        .or_else(|| c.manifest.metadata.framework.clone());
    let mut unit = Unit {
        id: c.id.clone(),
        source: c.dir.display().to_string(),
        framework,
        task_cwe: c.task().cwe.clone(),
        artefacts: Vec::new(),
        tests: None,
        excluded: None,
        notes: Vec::new(),
    };
    // The final files as submitted win over replay (final-only traces carry them).
    let finals: Result<Finals, String> = if !c.final_files.is_empty() {
        Ok(c.final_files
            .iter()
            .map(|(k, v)| (k.clone(), Some(v.clone())))
            .collect())
    } else {
        replay_final(c).map(|(f, notes)| {
            unit.notes = notes;
            f
        })
    };
    match finals {
        Ok(finals) => {
            let names: BTreeSet<&String> = c.baselines.keys().chain(finals.keys()).collect();
            for a in names {
                let baseline = c.baselines.get(a).cloned();
                // An artefact the final state does not mention is unchanged.
                let final_content = match finals.get(a) {
                    Some(f) => f.clone(),
                    None => baseline.clone(),
                };
                unit.artefacts.push(sage_screen::Artefact {
                    path: a.clone(),
                    baseline,
                    final_content,
                });
            }
        }
        Err(e) => unit.excluded = Some(e),
    }
    if let Some(t) = &c.manifest.tests {
        let mut files = BTreeMap::new();
        for f in &t.files {
            let p = c.dir.join(f);
            let bytes = std::fs::read(&p)
                .map_err(|e| format!("{}: tests file {}: {e}", c.dir.display(), p.display()))?;
            files.insert(f.clone(), bytes);
        }
        unit.tests = Some(TestsInput {
            command: t.command.clone(),
            files,
            timeout: t.timeout_secs.map(Duration::from_secs),
        });
    }
    Ok(unit)
}
