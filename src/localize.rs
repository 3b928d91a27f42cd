//! The localize pipeline: case folder → canonical trace → artefact history → turn scores →
//! origin → one [`CaseResult`] per judge run, and the [`ResultSet`] of a whole corpus.
//!
//! Bad input never aborts the corpus: a case that cannot be processed becomes a [`Skipped`]
//! entry naming the case, the stage and the reason; every other case still runs.

use crate::adapters::{self, SourceFile};
use crate::case::{Case, FailureAnchor, Metadata};
use crate::history::{
    self, ArtefactHistory, Check, ProvenanceResult, ReconstructionCondition, WriteFailure,
};
use crate::judge::{self, Judge, JudgeId, TraceScores, TurnOutcome};
use crate::origin::{self, OriginResult, RuleInput};
use crate::report::Summary;
use crate::trace::{
    Actor, CanonicalTrace, RawRef, RawStore, TraceCounts, TurnKind, Write, WriteOp,
};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Version tag of result files.
pub const RESULTS_VERSION: &str = "sage.results/1";

/// One turn, as results and reports list it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TurnInfo {
    pub turn: usize,
    pub actor: Actor,
    pub kind: TurnKind,
    /// Positions (1-based, trace order) of the writes this turn holds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writes: Vec<usize>,
}

/// The outcome of one case under one judge run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CaseResult {
    pub case_id: String,
    pub case_dir: String,
    pub task_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_cwe: Option<String>,
    pub metadata: Metadata,
    pub anchor: FailureAnchor,
    /// The adapter that read the trace.
    pub framework: String,
    pub counts: TraceCounts,
    pub turns: Vec<TurnInfo>,
    pub reconstruction_condition: ReconstructionCondition,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub write_failures: Vec<WriteFailure>,
    pub provenance: ProvenanceResult,
    pub judge: JudgeId,
    pub run: u32,
    pub scores: Vec<TurnOutcome>,
    pub origin: OriginResult,
    /// The automatic checks; a failed one is reported, never hidden.
    pub checks: Vec<Check>,
    /// How the result compares with the case's stated expectations, when it states them for
    /// this judge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<ExpectedComparison>,
}

impl CaseResult {
    pub fn failed_checks(&self) -> Vec<&Check> {
        self.checks.iter().filter(|c| !c.passed).collect()
    }
}

/// The comparison of a result with the `expected` block of its case manifest.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ExpectedComparison {
    pub matched: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mismatches: Vec<String>,
}

/// A case that could not be processed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Skipped {
    /// The case folder.
    pub case: String,
    /// Where it failed: `case`, `adapter`, `raw-trace`, `judge`.
    pub stage: String,
    pub message: String,
}

/// A problem in a case that was still processed (e.g. a write that could not be applied).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Problem {
    pub case: String,
    pub message: String,
}

/// Everything `sage localize` produced for a folder.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ResultSet {
    pub version: String,
    pub sage_version: String,
    pub judges: Vec<JudgeId>,
    pub runs: u32,
    pub results: Vec<CaseResult>,
    pub skipped: Vec<Skipped>,
    pub problems: Vec<Problem>,
    /// One Table-5 summary per judge and run.
    pub summaries: Vec<Summary>,
}

impl ResultSet {
    /// Read a result set from `results.json` or from a results folder holding it.
    pub fn read(path: &Path) -> Result<ResultSet, String> {
        let file = if path.is_dir() {
            path.join("results.json")
        } else {
            path.to_path_buf()
        };
        let text =
            std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let set: ResultSet = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not a sage results file: {e}", file.display()))?;
        if set.version != RESULTS_VERSION {
            return Err(format!(
                "{}: results version {:?}, this sage reads {RESULTS_VERSION:?}",
                file.display(),
                set.version
            ));
        }
        Ok(set)
    }

    /// True when every input was processed without a problem.
    pub fn all_ok(&self) -> bool {
        self.skipped.is_empty() && self.problems.is_empty()
    }
}

/// Options of a localize run.
#[derive(Clone)]
pub struct Options {
    pub judges: Vec<Arc<dyn Judge>>,
    /// Repeated runs per judge (run indices 0..runs).
    pub runs: u32,
    /// Attempts per turn for non-deterministic judges.
    pub max_attempts: u32,
    /// Cases processed at once.
    pub concurrency: usize,
    /// The lexicon whose CWE vocabulary links defences to the anchor's weakness.
    pub lexicon: Arc<crate::judge::lexicon::Lexicon>,
    /// `--shard i/n`: only the cases of this shard (see [`crate::judge::spec::Shard`]).
    pub shard: Option<crate::judge::spec::Shard>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            judges: vec![Arc::new(crate::judge::lexicon::LexiconJudge::embedded())],
            runs: 1,
            max_attempts: 3,
            concurrency: 4,
            lexicon: Arc::new(crate::judge::lexicon::Lexicon::embedded()),
            shard: None,
        }
    }
}

/// A case read and reconstructed, ready for scoring.
pub struct PreparedCase {
    pub case: Case,
    pub trace: CanonicalTrace,
    pub store: RawStore,
    pub history: ArtefactHistory,
    pub provenance: ProvenanceResult,
}

fn skip(dir: &Path, stage: &str, message: impl Into<String>) -> Skipped {
    Skipped {
        case: dir.display().to_string(),
        stage: stage.into(),
        message: message.into(),
    }
}

/// For a trace that kept only the final file: attach the case's final state as a
/// final-state write to the last implementation turn (else the last applicable turn).
fn attach_final_state(case: &Case, trace: &mut CanonicalTrace) {
    for (artefact, content) in &case.final_files {
        if trace.writes().any(|(_, w)| &w.artefact == artefact) {
            continue;
        }
        let target = trace
            .turns
            .iter()
            .rev()
            .find(|t| t.kind == TurnKind::Implementation)
            .or_else(|| trace.turns.iter().rev().find(|t| t.is_applicable()))
            .map(|t| t.index);
        let Some(k) = target else { continue };
        let file = case
            .manifest
            .final_state
            .get(artefact)
            .cloned()
            .unwrap_or_default();
        trace.turns[k - 1].writes.push(Write {
            artefact: artefact.clone(),
            op: WriteOp::FullContent {
                content: content.clone(),
            },
            via: "final-state file of the case".into(),
            final_state: true,
            raw: RawRef::synthetic(
                &file,
                "final state given by the case, not recorded in the trace",
            ),
        });
        trace.notes.push(format!(
            "final state of {artefact} taken from the case ({file}) and attached to turn {k}"
        ));
    }
}

/// Load, normalize and reconstruct one case.
pub fn prepare(dir: &Path) -> Result<(PreparedCase, Vec<String>), Skipped> {
    let case = Case::load(dir).map_err(|e| skip(dir, "case", e.to_string()))?;
    let sources: Vec<SourceFile> = case
        .manifest
        .trace
        .files
        .iter()
        .map(|f| SourceFile::new(f.clone(), case.dir.join(f)))
        .collect();
    let mut trace = adapters::normalize(&sources, case.manifest.trace.framework.as_deref())
        .map_err(|e| skip(dir, "adapter", e.to_string()))?;
    if trace.turns.is_empty() {
        return Err(skip(dir, "adapter", "the trace holds no canonical turn"));
    }
    let store =
        RawStore::load(&trace, &case.dir).map_err(|e| skip(dir, "raw-trace", e.to_string()))?;
    attach_final_state(&case, &mut trace);
    let history = history::reconstruct(&case.baselines, &trace);
    let provenance = history::provenance(case.anchor(), &history);
    let problems = history
        .failures
        .iter()
        .map(|f| {
            format!(
                "{}: write {} at turn {} ({}) could not be applied to {}: {}",
                dir.display(),
                f.write,
                f.turn,
                f.raw.display(),
                f.artefact,
                f.reason
            )
        })
        .collect();
    Ok((
        PreparedCase {
            case,
            trace,
            store,
            history,
            provenance,
        },
        problems,
    ))
}

/// Apply the origin rule to a prepared case with one judge run's scores.
pub fn conclude(
    p: &PreparedCase,
    scores: TraceScores,
    lexicon: &crate::judge::lexicon::Lexicon,
) -> CaseResult {
    let anchor = p.case.anchor();
    let weakness_terms = lexicon.cwe_terms(Some(&anchor.cwe)).to_vec();
    let origin = origin::localize(&RuleInput {
        trace: &p.trace,
        history: &p.history,
        provenance: &p.provenance,
        anchor,
        scores: &scores,
        weakness_terms: &weakness_terms,
    });
    let mut checks = history::checks(anchor, &p.history, &p.provenance);
    checks.extend(origin::checks(&origin, &p.provenance));
    let mut write_no = 0;
    let turns = p
        .trace
        .turns
        .iter()
        .map(|t| TurnInfo {
            turn: t.index,
            actor: t.actor.clone(),
            kind: t.kind,
            writes: t
                .writes
                .iter()
                .map(|_| {
                    write_no += 1;
                    write_no
                })
                .collect(),
        })
        .collect();
    let mut result = CaseResult {
        case_id: p.case.id.clone(),
        case_dir: p.case.dir.display().to_string(),
        task_id: p.case.task().id.clone(),
        task_cwe: p.case.task().cwe.clone(),
        metadata: p.case.manifest.metadata.clone(),
        anchor: anchor.clone(),
        framework: p.trace.framework.clone(),
        counts: p.trace.counts(),
        turns,
        reconstruction_condition: p.history.condition,
        write_failures: p.history.failures.clone(),
        provenance: p.provenance.clone(),
        judge: scores.judge.clone(),
        run: scores.run,
        scores: scores.turns,
        origin,
        checks,
        expected: None,
    };
    result.expected = p
        .case
        .manifest
        .expected
        .as_ref()
        .and_then(|e| compare_expected(&result, e));
    result
}

/// Compare a result with an `expected` block written for the same judge name.
pub fn compare_expected(
    r: &CaseResult,
    expected: &serde_json::Value,
) -> Option<ExpectedComparison> {
    let judge = expected
        .get("judge")
        .and_then(|j| j.as_str())
        .unwrap_or("lexicon");
    if judge != r.judge.name {
        return None;
    }
    let origin = r.origin.outcome.origin();
    let actual = serde_json::json!({
        "provenance": r.provenance.provenance.as_str(),
        "introducing_write_turn": r.provenance.introducing_write.map(|w| w.turn),
        "reconstruction_condition": r.reconstruction_condition.as_str(),
        "outcome": if origin.is_some() { "localized" } else { "undetermined" },
        "origin_turn": origin.map(|o| o.0),
        "origin_type": origin.map(|o| o.1.as_str()),
        "undetermined_reason": match &r.origin.outcome {
            crate::origin::Outcome::Undetermined { reason } => Some(reason.as_str()),
            _ => None,
        },
        "missed_opportunities": r.origin.missed_opportunities.iter().map(|m| m.turn).collect::<Vec<_>>(),
    });
    let mut mismatches = Vec::new();
    if let Some(obj) = expected.as_object() {
        for (k, want) in obj {
            if k == "judge" {
                continue;
            }
            match actual.get(k) {
                Some(got) if got == want => {}
                Some(got) => mismatches.push(format!("{k}: expected {want}, got {got}")),
                None => mismatches.push(format!("{k}: not a known expectation")),
            }
        }
    }
    Some(ExpectedComparison {
        matched: mismatches.is_empty(),
        mismatches,
    })
}

/// Everything one case produced: results per judge run, or why it was skipped.
pub struct CaseOutput {
    pub results: Vec<CaseResult>,
    pub skipped: Option<Skipped>,
    pub problems: Vec<Problem>,
}

/// Run one case through the whole pipeline with every judge and run.
pub async fn localize_case(dir: &Path, opts: &Options) -> CaseOutput {
    // A panic is a bug in sage, never the input's fault; it must not take the corpus down.
    let prepared = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| prepare(dir)))
        .unwrap_or_else(|e| {
            let what = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(skip(
                dir,
                "internal",
                format!("internal error (a bug in sage): {what}"),
            ))
        });
    let (mut prepared, problems) = match prepared {
        Ok(p) => p,
        Err(s) => {
            return CaseOutput {
                results: vec![],
                skipped: Some(s),
                problems: vec![],
            }
        }
    };
    let problems: Vec<Problem> = problems
        .into_iter()
        .map(|m| Problem {
            case: dir.display().to_string(),
            message: m,
        })
        .collect();
    let mut results = Vec::new();
    for judge in &opts.judges {
        for run in 0..opts.runs.max(1) {
            let task = prepared.case.task().clone();
            match judge::score_trace(
                judge.as_ref(),
                &task,
                &prepared.trace,
                &mut prepared.store,
                run,
                opts.max_attempts,
            )
            .await
            {
                Ok(scores) => results.push(conclude(&prepared, scores, &opts.lexicon)),
                Err(e) => {
                    return CaseOutput {
                        results,
                        skipped: Some(skip(dir, "judge", format!("{}: {e}", judge.id()))),
                        problems,
                    }
                }
            }
        }
    }
    CaseOutput {
        results,
        skipped: None,
        problems,
    }
}

/// Run every case found under `root`.
pub async fn localize_dir(root: &Path, opts: &Options) -> ResultSet {
    use futures::StreamExt;
    let mut set = ResultSet {
        version: RESULTS_VERSION.into(),
        sage_version: env!("CARGO_PKG_VERSION").into(),
        judges: opts.judges.iter().map(|j| j.id()).collect(),
        runs: opts.runs.max(1),
        results: vec![],
        skipped: vec![],
        problems: vec![],
        summaries: vec![],
    };
    let mut dirs: Vec<PathBuf> = match crate::case::discover(root) {
        Ok(d) => d,
        Err(e) => {
            set.skipped.push(skip(root, "case", e.to_string()));
            return set;
        }
    };
    let found_any = !dirs.is_empty();
    if let Some(sh) = &opts.shard {
        // A shard may hold no case of a small corpus; that is not an input failure.
        dirs.retain(|x| sh.includes_dir(root, x));
    }
    if !found_any {
        set.skipped.push(skip(
            root,
            "case",
            "no case found (a case is a folder holding case.json)",
        ));
    }
    let outputs: Vec<CaseOutput> = futures::stream::iter(dirs.iter())
        .map(|d| localize_case(d, opts))
        .buffered(opts.concurrency.max(1))
        .collect()
        .await;
    for o in outputs {
        set.results.extend(o.results);
        set.skipped.extend(o.skipped);
        set.problems.extend(o.problems);
    }
    set.summaries = crate::report::summaries(&set.results);
    set
}
