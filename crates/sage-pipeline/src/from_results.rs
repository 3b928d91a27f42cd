//! Adapter from `sage localize` result sets (`sage.results/1`) to the report's input structs.

use crate::results::{CaseResult, ResultSet};
use sage_judge::{Dimension, TurnOutcome};
use sage_reliability::measures::{ArtefactLabel, Origin, OriginRating};
use sage_reliability::report::{Annotations, CaseInfo, RatingSource, ReportInput};
use sage_reliability::stats::Level;
use std::collections::BTreeMap;

/// SAGE's artefact labels of a result: provenance, and the introducing write as `turn:N`,
/// `none` or `cannot-determine`.
pub fn sage_labels(r: &CaseResult) -> ArtefactLabel {
    ArtefactLabel {
        case_id: r.case_id.clone(),
        provenance: Some(r.provenance.provenance.as_str().to_string()),
        introducing_write: Some(r.provenance.introducing_write_label()),
    }
}

/// The origin of a result with the four scores at the origin turn.
pub(crate) fn origin_rating(r: &CaseResult) -> OriginRating {
    let origin = r.origin.outcome.origin().map(|(turn, ty)| {
        let scores = r.scores.iter().find_map(|s| match s {
            TurnOutcome::Scored(s) if s.turn == turn => Some([
                s.score(Dimension::TR),
                s.score(Dimension::DI),
                s.score(Dimension::VR),
                s.score(Dimension::SA),
            ]),
            _ => None,
        });
        Origin {
            origin_type: ty.as_str().to_string(),
            turn: turn as u32,
            scores,
        }
    });
    OriginRating {
        case_id: r.case_id.clone(),
        origin,
    }
}

fn case_info(r: &CaseResult) -> CaseInfo {
    let mut subgroups = BTreeMap::new();
    let framework = r
        .metadata
        .framework
        .clone()
        .unwrap_or_else(|| r.framework.clone());
    subgroups.insert("framework".to_string(), framework);
    if let Some(m) = &r.metadata.base_model {
        subgroups.insert("base model".to_string(), m.clone());
    }
    subgroups.insert(
        "deficiency".to_string(),
        r.anchor.category.as_str().to_string(),
    );
    subgroups.insert(
        "condition".to_string(),
        r.reconstruction_condition.as_str().to_string(),
    );
    CaseInfo {
        case_id: r.case_id.clone(),
        task_id: r.task_id.clone(),
        subgroups,
        sage: sage_labels(r),
    }
}

/// Builds the report input. Each (judge, run) of each result set is one source; when a later
/// set repeats a (judge, run) already seen (separate `localize` invocations with one run each),
/// it is renumbered after the judge's highest run and a note says so.
pub fn report_input(
    sets: &[(String, ResultSet)],
    annotators: Vec<Annotations>,
    primary_judge: Option<String>,
    partitions: usize,
    seed: u64,
    turn_level: Level,
) -> (ReportInput, Vec<String>) {
    let mut notes = Vec::new();
    let mut cases: BTreeMap<String, CaseInfo> = BTreeMap::new();
    let mut sources: Vec<RatingSource> = Vec::new();
    let mut max_run: BTreeMap<String, u32> = BTreeMap::new();
    for (file, set) in sets {
        // (judge, run) → source within this set.
        let mut here: BTreeMap<(String, u32), Vec<OriginRating>> = BTreeMap::new();
        for r in &set.results {
            cases
                .entry(r.case_id.clone())
                .or_insert_with(|| case_info(r));
            here.entry((r.judge.to_string(), r.run))
                .or_default()
                .push(origin_rating(r));
        }
        for ((judge, run), ratings) in here {
            let taken = sources.iter().any(|s| s.judge == judge && s.run == run);
            let run_id = if taken {
                let next = max_run.get(&judge).map_or(0, |m| m + 1);
                notes.push(format!(
                    "{file}: {judge} run {run} repeats an earlier set; counted as run {next}"
                ));
                next
            } else {
                run
            };
            let m = max_run.entry(judge.clone()).or_insert(run_id);
            *m = (*m).max(run_id);
            sources.push(RatingSource {
                judge,
                run: run_id,
                ratings,
            });
        }
    }
    (
        ReportInput {
            cases: cases.into_values().collect(),
            sources,
            annotators,
            primary_judge,
            partitions,
            seed,
            turn_level,
        },
        notes,
    )
}
