//! One case replay for every consumer: the final state of each artefact of a case, as the
//! screening stage (`sage-screen`, which takes files and knows no trace format) needs it.

use sage_screen::{TestsInput, Unit};
use sage_trace::case::{self, Case};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

/// Load every case under `root`, read by `rules`; each case that cannot be loaded is
/// reported by message.
pub fn units_from_cases(
    root: &Path,
    rules: &crate::Rules,
) -> Result<(Vec<Unit>, Vec<String>), case::CaseError> {
    let mut units = Vec::new();
    let mut errors = Vec::new();
    for dir in case::discover(root)? {
        match Case::load(&dir, rules.limits()) {
            Ok(c) => match unit_from_run(&c, rules) {
                Ok(u) => units.push(u),
                Err(e) => errors.push(e),
            },
            Err(e) => errors.push(e.to_string()),
        }
    }
    Ok((units, errors))
}

/// Load every run under `root` (folders with `run.json`, and case folders, whose anchors
/// screening does not read), read by `rules`; each run that cannot be loaded is reported by
/// message.
pub fn units_from_runs(
    root: &Path,
    rules: &crate::Rules,
) -> Result<(Vec<Unit>, Vec<String>), case::CaseError> {
    let (runs, mut errors) = load_runs(root, rules.limits())?;
    let mut units = Vec::new();
    for r in &runs {
        match unit_from_run(r, rules) {
            Ok(u) => units.push(u),
            Err(e) => errors.push(e),
        }
    }
    Ok((units, errors))
}

/// Every loadable run under `root`, and a message per folder that is not one.
pub(crate) fn load_runs(
    root: &Path,
    limits: &sage_trace::safe::Limits,
) -> Result<(Vec<Case>, Vec<String>), case::CaseError> {
    let mut runs = Vec::new();
    let mut errors = Vec::new();
    for dir in case::discover_runs(root)? {
        match Case::load_run(&dir, limits) {
            Ok(r) => runs.push(r),
            Err(e) => errors.push(e.to_string()),
        }
    }
    Ok((runs, errors))
}

/// The submission applied to the baselines: every file section of the unified diff, in
/// order. A section that does not apply to a baseline is an error naming the patch and the
/// file. A section that edits a file the run does not hold (the run keeps only part of the
/// repository) cannot be applied and is returned as a note; new files are kept.
pub(crate) fn apply_patch(r: &Case, patch: &str) -> Result<(Finals, Vec<String>), String> {
    let name = r.manifest.patch.as_deref().unwrap_or("patch");
    let parsed = sage_adapters::edits::unified_diffs(patch);
    if let Some(u) = parsed.uninterpreted.first() {
        return Err(format!(
            "{}: patch {name}: cannot interpret {}: {}",
            r.dir.display(),
            u.text,
            u.reason
        ));
    }
    if parsed.edits.is_empty() {
        return Err(format!(
            "{}: patch {name}: no file section (--- / +++) found",
            r.dir.display()
        ));
    }
    let mut finals: Finals = BTreeMap::new();
    let mut notes = Vec::new();
    for e in parsed.edits {
        let current = match finals.get(&e.path) {
            Some(c) => c.clone(),
            None => r.baselines.get(&e.path).cloned(),
        };
        let held = current.is_some() || r.baselines.contains_key(&e.path);
        let applied = sage_history::apply(current.as_deref(), &e.op);
        if applied.is_err() && !held {
            notes.push(format!(
                "patch {name}: the section for {} edits a file the run does not hold (not screened)",
                e.path
            ));
            continue;
        }
        let applied = applied.map_err(|why| {
            format!(
                "{}: patch {name}: the section for {} does not apply: {why}",
                r.dir.display(),
                e.path
            )
        })?;
        finals.insert(e.path, applied.content);
    }
    Ok((finals, notes))
}

/// Artefact → final content (None: deleted).
type Finals = BTreeMap<String, Option<String>>;

/// The final snapshot of every artefact, by replaying the trace: the adapter normalizes it
/// into a canonical trace and `history::reconstruct` applies every write to the baselines.
/// Writes that could not be applied are returned as notes (the final state may be off).
fn replay_final(c: &Case, rules: &crate::Rules) -> Result<(Finals, Vec<String>), String> {
    let spec = &c.manifest.trace;
    let files = sage_adapters::case_sources(&c.dir, spec);
    let trace = sage_adapters::normalize(
        &files,
        &sage_adapters::NormalizeOptions::of_manifest(spec, &rules.adapters),
    )
    .map_err(|e| format!("no final snapshot: the trace cannot be replayed: {e}"))?;
    let h = sage_history::reconstruct(&c.baselines, &trace, &rules.workspace_roots);
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

/// One run as a screening unit: its final state (submitted files, else the patch applied to
/// the baselines, else the replayed trace, read by `rules`) next to its baselines.
pub(crate) fn unit_from_run(c: &Case, rules: &crate::Rules) -> Result<Unit, String> {
    let mut unit = Unit {
        id: c.id.clone(),
        source: c.dir.display().to_string(),
        framework: c.framework(),
        task_cwe: c.manifest.task.cwe.clone(),
        artefacts: Vec::new(),
        tests: None,
        excluded: None,
        notes: Vec::new(),
    };
    if let Some(why) = &c.manifest.excluded {
        unit.excluded = Some(format!("recorded as invalid: {why}"));
        return Ok(unit);
    }
    // The final files as submitted win over the patch, and the patch over replay.
    let finals: Result<Finals, String> = if !c.final_files.is_empty() {
        Ok(c.final_files
            .iter()
            .map(|(k, v)| (k.clone(), Some(v.clone())))
            .collect())
    } else if let Some(p) = &c.patch {
        apply_patch(c, p).map(|(f, notes)| {
            unit.notes = notes;
            f
        })
    } else {
        replay_final(c, rules).map(|(f, notes)| {
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
            // a manifest names these: they stay inside the case folder like every case file
            let bytes =
                sage_trace::safe::read_case_file(&c.dir, f, rules.limits()).map_err(|e| {
                    format!(
                        "{}: tests file {}: {e}",
                        c.dir.display(),
                        c.dir.join(f).display()
                    )
                })?;
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
