//! The localize pipeline: case folder → canonical trace → artefact history → turn scores →
//! origin → one [`CaseResult`] per judge run, and the [`ResultSet`] of a whole corpus.
//!
//! Bad input never aborts the corpus: a case that cannot be processed becomes a [`Skipped`]
//! entry naming the case, the stage and the reason; every other case still runs.

use crate::results::*;
use sage_history::origin::{self, RuleInput};
use sage_history::{self, ArtefactHistory, ProvenanceResult};
use sage_judge::{self, Judge, TraceScores};
use sage_trace::case::{Case, FailureAnchor};
use sage_trace::{CanonicalTrace, RawStore};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Options of a localize run.
#[derive(Clone)]
pub struct Options {
    pub judges: Vec<Arc<dyn Judge>>,
    /// Repeated runs per judge (run indices 0..runs).
    pub runs: std::num::NonZeroU32,
    /// Attempts per turn for non-deterministic judges.
    pub max_attempts: std::num::NonZeroU32,
    /// Judge requests in flight at once, across all cases, judges, runs and turns.
    pub concurrency: std::num::NonZeroUsize,
    /// Where scoring progress goes (the CLI draws it); `None` for none.
    pub progress: Option<Arc<dyn sage_judge::concurrent::Progress>>,
    /// Counters shared with LLM judges (cache hits, retries, cost).
    pub stats: Option<Arc<sage_llm::cost::RunStats>>,
    /// The lexicon whose CWE vocabulary links defences to the anchor's weakness.
    pub lexicon: Arc<sage_judge::lexicon::Lexicon>,
    /// `--shard i/n`: only the cases of this shard (see [`sage_judge::spec::Shard`]).
    pub shard: Option<sage_judge::spec::Shard>,
    /// `--follow-links`: follow symbolic links out of the corpus folder.
    pub follow_links: bool,
    /// The injection rules (`--injection-rules`, else the embedded ones): the turns that
    /// address the judge, and the quotes that never verify.
    pub injection: Arc<sage_judge::injection::Rules>,
    /// How cases and traces are read (the turn classifier, detection rules, input limits
    /// and workspace roots the user set, else the embedded ones).
    pub rules: crate::Rules,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            judges: vec![Arc::new(sage_judge::lexicon::LexiconJudge::embedded())],
            runs: std::num::NonZeroU32::MIN,
            max_attempts: std::num::NonZeroU32::new(3).unwrap(),
            concurrency: sage_judge::concurrent::DEFAULT_CONCURRENCY,
            progress: None,
            stats: None,
            lexicon: Arc::new(sage_judge::lexicon::Lexicon::embedded()),
            shard: None,
            follow_links: false,
            injection: Arc::new(sage_judge::injection::Rules::embedded()),
            rules: crate::Rules::default(),
        }
    }
}

/// A case read and reconstructed, ready for scoring.
pub struct PreparedCase {
    pub case: Case,
    /// The case's failure anchor (a run, which has none yet, is never prepared).
    pub anchor: FailureAnchor,
    pub trace: CanonicalTrace,
    pub store: RawStore,
    pub history: ArtefactHistory,
    /// The anchor fragment matched along the history once, read by provenance and by the
    /// checks of every judge run.
    pub fragment: sage_history::FragmentStates,
    pub provenance: ProvenanceResult,
}

fn skip(dir: &Path, stage: &str, message: impl Into<String>) -> Skipped {
    Skipped {
        case: dir.display().to_string(),
        stage: stage.into(),
        message: message.into(),
    }
}

/// The case's final files, as the history takes them (they verify the replay; they are no
/// turn's write).
fn supplied_finals(case: &Case) -> Vec<sage_history::SuppliedFinal> {
    case.final_files
        .iter()
        .map(|(artefact, content)| sage_history::SuppliedFinal {
            artefact: artefact.clone(),
            file: case
                .manifest
                .final_state
                .get(artefact)
                .cloned()
                .unwrap_or_default(),
            content: content.clone(),
        })
        .collect()
}

/// Levenshtein distance (for "did you mean" candidates).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

/// A case whose anchor names an artefact the trace never touches would silently come out
/// `no-code-location` (or inherited with no write): that is an error naming the closest
/// artefacts the trace does touch. "Touches": a write or a submission resolves to it under
/// the path rule, the case supplies its final file, or some turn's text names the file.
fn anchor_touched(
    anchor: &FailureAnchor,
    trace: &CanonicalTrace,
    history: &ArtefactHistory,
) -> Result<(), String> {
    let artefact = &anchor.artefact;
    let anchor = history.resolve_name(artefact);
    let written: Vec<String> = trace
        .writes()
        .map(|(_, w)| w.artefact.clone())
        .chain(trace.submissions.iter().map(|w| w.artefact.clone()))
        .collect();
    if written.iter().any(|w| history.resolve_name(w) == anchor)
        || !history.final_states_of(&anchor).is_empty()
    {
        return Ok(());
    }
    let base = sage_trace::text::basename(&anchor);
    let named = trace.turns.iter().any(|t| {
        t.text_items()
            .iter()
            .any(|(text, _)| sage_trace::text::names_file(text, base))
    });
    if named {
        return Ok(());
    }
    let mut candidates: Vec<String> = written.iter().map(|w| history.resolve_name(w)).collect();
    candidates.sort();
    candidates.dedup();
    candidates.sort_by_key(|c| {
        let same_base = sage_trace::text::basename(c) == base;
        (!same_base, edit_distance(c, &anchor))
    });
    candidates.truncate(5);
    Err(format!(
        "the anchor names artefact {:?}, which the trace never touches (no write, submission, \
         final file or mention of {base}); {}",
        artefact,
        if candidates.is_empty() {
            "the trace writes no file at all".to_string()
        } else {
            format!(
                "closest artefacts the trace writes: {}",
                candidates.join(", ")
            )
        }
    ))
}

/// How many times each case folder was prepared, in this crate's tests: a command prepares a
/// case once and carries it to every consumer.
#[cfg(test)]
pub(crate) static PREPARED: std::sync::Mutex<std::collections::BTreeMap<PathBuf, usize>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// Load, normalize and reconstruct one case, read by `rules`.
pub fn prepare(dir: &Path, rules: &crate::Rules) -> Result<(PreparedCase, Vec<String>), Skipped> {
    #[cfg(test)]
    {
        let mut n = PREPARED.lock().unwrap_or_else(|p| p.into_inner());
        *n.entry(dir.to_path_buf()).or_default() += 1;
    }
    let case = Case::load(dir, rules.limits()).map_err(|e| skip(dir, "case", e.to_string()))?;
    let anchor = case
        .anchor()
        .map_err(|e| skip(dir, "case", e.to_string()))?
        .clone();
    let spec = &case.manifest.trace;
    let files = sage_adapters::case_sources(&case.dir, spec);
    let (mut trace, seen) = sage_adapters::normalize_with_seen(
        &files,
        &sage_adapters::NormalizeOptions::of_manifest(spec, &rules.adapters),
    )
    .map_err(|e| skip(dir, "adapter", e.to_string()))?;
    if trace.turns.is_empty() {
        return Err(skip(dir, "adapter", "the trace holds no canonical turn"));
    }
    let store = RawStore::load_case(
        &trace,
        &case.dir,
        &case.manifest.trace.files,
        rules.limits(),
    )
    .map_err(|e| skip(dir, "raw-trace", e.to_string()))?;
    // Any adapter's final-state writes are the trace's submission, never a turn's write.
    trace.separate_submissions();
    // the checkout folder the trace names its files under and the case does not
    if let Some(x) = &case.manifest.trace.checkout {
        sage_history::strip_checkout(&mut trace, x);
    }
    // The case's baselines first, then what the trace shows of the files it does not give.
    let known = crate::knowledge::of_case_and_trace(&case, &seen, &rules.workspace_roots);
    let history = sage_history::reconstruct_known(&known, &trace, &supplied_finals(&case));
    anchor_touched(&anchor, &trace, &history).map_err(|e| skip(dir, "case", e))?;
    let fragment = sage_history::FragmentStates::of(&anchor, &history);
    let provenance = sage_history::provenance_from(&fragment, &history, Some(&trace));
    let problems = history
        .failures
        .iter()
        .filter(|f| !sage_history::final_state::outside_case(&case, &anchor, &history, &f.artefact))
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
            anchor,
            trace,
            store,
            history,
            fragment,
            provenance,
        },
        problems,
    ))
}

/// Apply the origin rule to a prepared case with one judge run's scores.
pub(crate) fn conclude(
    p: &PreparedCase,
    scores: TraceScores,
    lexicon: &sage_judge::lexicon::Lexicon,
    vocabulary: &origin::WeaknessVocabulary,
    injection: &[sage_judge::injection::InjectionFlag],
) -> CaseResult {
    let anchor = &p.anchor;
    let weakness_terms = lexicon.cwe_terms(Some(&anchor.cwe)).to_vec();
    let origin = origin::localize(&RuleInput {
        trace: &p.trace,
        history: &p.history,
        provenance: &p.provenance,
        anchor,
        scores: &scores,
        weakness_terms: &weakness_terms,
        common_words: &lexicon.linking.common,
        stop_identifiers: &lexicon.linking.stop_identifiers,
        weakness_vocabulary: vocabulary,
    });
    let mut checks = sage_history::checks_from(&p.fragment, &p.provenance);
    checks.extend(sage_history::independent_checks_from(
        &p.fragment,
        anchor,
        &p.history,
        &p.trace,
        &p.provenance,
    ));
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
        task_cve: p.case.task().cve.clone(),
        task_description: p.case.task().description.clone(),
        metadata: p.case.manifest.metadata.clone(),
        anchor: anchor.clone(),
        // The agent framework as the case names it (the word screen, reliability and the
        // study use), else the adapter's; the adapter is kept apart when it differs (an
        // OpenHands run recorded as a Claude stream).
        framework: framework_of(&p.case.manifest.metadata, &p.case.manifest.trace, &p.trace),
        trace_format: Some(p.trace.framework.clone()).filter(|f| {
            *f != framework_of(&p.case.manifest.metadata, &p.case.manifest.trace, &p.trace)
        }),
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
        notes: p
            .history
            .path_matches
            .iter()
            .map(|(from, to)| format!("trace path {from} taken as the case's artefact {to}"))
            .collect(),
        expected: None,
        injection: injection.to_vec(),
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
pub(crate) fn compare_expected(
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
    let mut failed_names: Vec<String> = r.failed_checks().iter().map(|c| c.name.clone()).collect();
    failed_names.sort();
    failed_names.dedup();
    let actual = serde_json::json!({
        "provenance": r.provenance.provenance.as_str(),
        "introducing_write_turn": r.provenance.introducing_write.map(|w| w.turn),
        "reconstruction_condition": r.reconstruction_condition.as_str(),
        "outcome": if origin.is_some() { "localized" } else { "undetermined" },
        "origin_turn": origin.map(|o| o.0),
        "origin_type": origin.map(|o| o.1.as_str()),
        "undetermined_reason": match &r.origin.outcome {
            sage_history::origin::Outcome::Undetermined { reason } => Some(reason.as_str()),
            _ => None,
        },
        "missed_opportunities": r.origin.missed_opportunities.iter().map(|m| m.turn).collect::<Vec<_>>(),
        "introducing_write": r.provenance.introducing_write_label(),
        "turn_kinds": r.turns.iter().map(|t| t.kind.as_str()).collect::<Vec<_>>(),
        "linked_turns": r.origin.links.iter().filter(|l| l.linked).map(|l| l.turn).collect::<Vec<_>>(),
        "scoring_failures": r.origin.scoring_failures.clone(),
        "failed_checks": failed_names,
    });
    // `checks`: name → passed (every check of that name), for the names the case lists.
    let mut check_map: serde_json::Map<String, serde_json::Value> = serde_json::Map::new();
    for c in &r.checks {
        let all = check_map
            .get(&c.name)
            .and_then(|v| v.as_bool())
            .unwrap_or(true)
            && c.passed;
        check_map.insert(c.name.clone(), serde_json::Value::Bool(all));
    }
    let mut mismatches = Vec::new();
    if let Some(obj) = expected.as_object() {
        for (k, want) in obj {
            if k == "judge" {
                continue;
            }
            if k == "checks" {
                for (name, w) in want.as_object().into_iter().flatten() {
                    match check_map.get(name) {
                        Some(got) if got == w => {}
                        Some(got) => {
                            mismatches.push(format!("checks.{name}: expected {w}, got {got}"))
                        }
                        None => mismatches.push(format!("checks.{name}: no such check ran")),
                    }
                }
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

/// Everything one case produced: results per judge run, or why it was skipped, and the case
/// as it was prepared (for a consumer that shows it, e.g. `sage explain`).
pub struct CaseOutput {
    pub results: Vec<CaseResult>,
    pub skipped: Option<Skipped>,
    pub problems: Vec<Problem>,
    pub prepared: Option<PreparedCase>,
}

/// A case folder and what preparing it gave: the case read, normalized and reconstructed
/// (with its problems), or why it was skipped. A command prepares each case once and carries
/// it to every consumer: the cost forecast, scoring, the origin rule, the explanation.
pub struct Ready {
    pub dir: PathBuf,
    pub prepared: Result<(PreparedCase, Vec<String>), Skipped>,
}

/// Prepare case folders on all cores, in order (a panic is recorded as a skipped case).
pub fn prepare_all(dirs: &[PathBuf], rules: &crate::Rules) -> Vec<Ready> {
    map_ordered(dirs.iter().collect(), |d| Ready {
        dir: d.clone(),
        prepared: prepare_caught(d, rules),
    })
}

/// `items` mapped in order, on all cores when there is more than one: a single item does not
/// start rayon's thread pool (a one-case run is over in a few milliseconds).
fn map_ordered<T: Send, R: Send>(items: Vec<T>, f: impl Fn(T) -> R + Sync + Send) -> Vec<R> {
    use rayon::prelude::*;
    if items.len() <= 1 {
        items.into_iter().map(f).collect()
    } else {
        items.into_par_iter().map(f).collect()
    }
}

/// The cases of a localize run: the folders found under its root (this run's shard of them),
/// prepared as each batch comes, or all at once ahead of the run ([`Cases::prepare`]) for a
/// consumer that needs them before (the cost forecast), which the run then scores without
/// reading them again.
pub struct Cases {
    root: PathBuf,
    /// Why the root could not be searched (reported as a skipped case).
    error: Option<Skipped>,
    found_any: bool,
    dirs: Vec<PathBuf>,
    ready: Option<Vec<Ready>>,
}

impl Cases {
    /// The case folders found under `root`, kept to `opts.shard`.
    pub fn found(root: &Path, mut dirs: Vec<PathBuf>, opts: &Options) -> Cases {
        let found_any = !dirs.is_empty();
        if let Some(sh) = &opts.shard {
            // A shard may hold no case of a small corpus; that is not an input failure.
            dirs.retain(|x| sh.includes_dir(root, x));
        }
        Cases {
            root: root.to_path_buf(),
            error: None,
            found_any,
            dirs,
            ready: None,
        }
    }

    /// The case folders under `root` (`opts.follow_links`), kept to `opts.shard`.
    pub fn discover(root: &Path, opts: &Options) -> Cases {
        match sage_trace::case::discover_with(root, opts.follow_links) {
            Ok(dirs) => Cases::found(root, dirs, opts),
            Err(e) => Cases {
                error: Some(skip(root, "case", e.to_string())),
                ..Cases::found(root, Vec::new(), opts)
            },
        }
    }

    /// Prepare every case now; the run then uses them as they are.
    pub fn prepare(&mut self, rules: &crate::Rules) -> &[Ready] {
        if self.ready.is_none() {
            self.ready = Some(prepare_all(&self.dirs, rules));
        }
        self.ready.as_deref().unwrap_or_default()
    }

    /// The judge requests scoring the cases will take (every turn of every prepared trace,
    /// by every judge and run); `None` until the cases are prepared ([`Cases::prepare`]).
    pub fn requests(&self, opts: &Options) -> Option<usize> {
        let turns: usize = self
            .ready
            .as_ref()?
            .iter()
            .filter_map(|r| r.prepared.as_ref().ok())
            .map(|(p, _)| p.trace.turns.len())
            .sum();
        Some(turns * opts.judges.len() * opts.runs.get() as usize)
    }
}

/// Cases prepared and scored together: enough to keep every request slot of a large
/// `--concurrency` busy, few enough that memory stays flat on a large corpus.
const CASES_PER_BATCH: usize = 128;

/// [`prepare`], with a panic (a bug in sage, never the input's fault) caught and recorded
/// as a skipped case so that it cannot take the corpus down.
fn prepare_caught(
    dir: &Path,
    rules: &crate::Rules,
) -> Result<(PreparedCase, Vec<String>), Skipped> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| prepare(dir, rules))).unwrap_or_else(
        |e| {
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
        },
    )
}

/// Run case folders through the whole pipeline with every judge and run, handing each case's
/// output to `each` (in the order of `dirs`) as its batch finishes; nothing of a case is kept
/// after that. `each` returning [`ControlFlow::Break`] stops the run after that batch.
///
/// Cases are prepared on all cores; then every turn of every case, judge and run is one
/// request on the one bounded scoring pool ([`sage_judge::concurrent`]), so a long trace is
/// scored with as many requests in flight as a corpus of short ones.
pub async fn localize_dirs_each(
    dirs: &[PathBuf],
    opts: &Options,
    each: impl FnMut(CaseOutput) -> ControlFlow<()>,
) {
    let batches = dirs
        .chunks(batch_size(opts))
        .map(|dirs| prepare_all(dirs, &opts.rules));
    localize_batches(batches, opts, each).await
}

/// Cases prepared and scored together (see [`CASES_PER_BATCH`]).
fn batch_size(opts: &Options) -> usize {
    CASES_PER_BATCH.max(opts.concurrency.get().saturating_mul(2))
}

/// [`localize_dirs_each`] over cases already prepared: none is read again.
pub async fn localize_ready_each(
    mut ready: Vec<Ready>,
    opts: &Options,
    each: impl FnMut(CaseOutput) -> ControlFlow<()>,
) {
    let n = batch_size(opts);
    let batches = std::iter::from_fn(move || {
        (!ready.is_empty()).then(|| ready.drain(..n.min(ready.len())).collect())
    });
    localize_batches(batches, opts, each).await
}

/// Score and conclude batches of prepared cases; see [`localize_dirs_each`].
async fn localize_batches(
    batches: impl Iterator<Item = Vec<Ready>>,
    opts: &Options,
    mut each: impl FnMut(CaseOutput) -> ControlFlow<()>,
) {
    let runs = opts.runs;
    let score_opts = sage_judge::concurrent::ScoreOptions {
        concurrency: opts.concurrency,
        runs,
        max_attempts: opts.max_attempts,
        progress: opts.progress.clone(),
        stats: opts.stats.clone(),
        injection: opts.injection.clone(),
    };
    // Compiled once for the run, not once per case.
    let vocabulary = origin::WeaknessVocabulary::new(opts.lexicon.weakness_vocabulary());
    for cases in batches {
        let ready: Vec<&PreparedCase> = cases
            .iter()
            .filter_map(|r| r.prepared.as_ref().ok().map(|(p, _)| p))
            .collect();
        let items: Vec<sage_judge::concurrent::ScoreItem> = ready
            .iter()
            .map(|p| sage_judge::concurrent::ScoreItem {
                id: &p.case.id,
                task: p.case.task(),
                trace: &p.trace,
                store: &p.store,
            })
            .collect();
        let batch =
            sage_judge::concurrent::score_traces_concurrently(&opts.judges, &items, &score_opts)
                .await;
        let stopped = batch.stopped.as_ref().map(|e| e.to_string());
        let mut scored = batch.scores.into_iter();
        let work: Vec<_> = cases
            .into_iter()
            .map(|r| {
                let slots = if r.prepared.is_ok() {
                    scored.next().unwrap_or_default()
                } else {
                    Vec::new()
                };
                (r.dir, r.prepared, slots)
            })
            .collect();
        // The origin rule and the checks of every case of the batch on all cores (in order:
        // `par_iter` keeps it).
        let concluded: Vec<CaseOutput> = map_ordered(work, |(dir, p, slots)| {
            let (p, problems) = match p {
                Ok(p) => p,
                Err(s) => {
                    return CaseOutput {
                        results: vec![],
                        skipped: Some(s),
                        problems: vec![],
                        prepared: None,
                    }
                }
            };
            let problems = problems
                .into_iter()
                .map(|m| Problem {
                    case: dir.display().to_string(),
                    message: m,
                })
                .collect();
            let mut results = Vec::new();
            let mut unscored = Vec::new();
            for (slot, scores) in slots.into_iter().enumerate() {
                match scores {
                    Some(scores) => results.push(scores),
                    None => unscored.push(opts.judges[slot / runs.get() as usize].id().to_string()),
                }
            }
            // The trace's turns addressing the judge: the same under every judge run.
            let injection = opts.injection.scan(&p.trace);
            let results: Vec<CaseResult> = map_ordered(results, |scores| {
                conclude(&p, scores, &opts.lexicon, &vocabulary, &injection)
            });
            let skipped = (!unscored.is_empty()).then(|| {
                skip(
                    &dir,
                    "judge",
                    format!(
                        "{}: not every turn was scored: {}",
                        unscored.join(", "),
                        stopped.as_deref().unwrap_or("the scoring run stopped")
                    ),
                )
            });
            CaseOutput {
                results,
                skipped,
                problems,
                prepared: Some(p),
            }
        });
        for o in concluded {
            if each(o).is_break() {
                return;
            }
        }
    }
}

/// Run one case through the whole pipeline with every judge and run.
pub async fn localize_case(dir: &Path, opts: &Options) -> CaseOutput {
    localize_ready(prepare_all(&[dir.to_path_buf()], &opts.rules), opts).await
}

/// [`localize_case`] of a case already prepared (`ready` holds one case).
pub async fn localize_ready(ready: Vec<Ready>, opts: &Options) -> CaseOutput {
    let mut out = None;
    localize_ready_each(ready, opts, |o| {
        out = Some(o);
        ControlFlow::Break(())
    })
    .await;
    out.unwrap_or_else(|| CaseOutput {
        results: vec![],
        skipped: Some(skip(Path::new(""), "case", "no case given")),
        problems: vec![],
        prepared: None,
    })
}

impl RunTally {
    /// An empty tally for a run with `opts`' judges and runs.
    fn new(opts: &Options) -> RunTally {
        RunTally {
            judges: opts.judges.iter().map(|j| j.id()).collect(),
            runs: opts.runs.get(),
            skipped: vec![],
            problems: vec![],
            rows: vec![],
            cases: 0,
        }
    }
}

/// Run every case found under `root`, keeping every result: the [`ResultSet`].
pub async fn localize_dir(root: &Path, opts: &Options) -> ResultSet {
    localize_cases(Cases::discover(root, opts), opts).await
}

/// Run every case of `cases`, keeping every result: the [`ResultSet`].
pub async fn localize_cases(cases: Cases, opts: &Options) -> ResultSet {
    let mut results = Vec::new();
    let (tally, _) = localize_cases_each(cases, opts, |rs: Vec<CaseResult>, _| {
        results.extend(rs);
        Ok::<(), std::convert::Infallible>(())
    })
    .await;
    tally.into_set(results)
}

/// Run every case found under `root`, handing each case's results (every judge run) to `each`
/// as the case finishes, with the prepared case they came from, and keeping only what the
/// summaries need ([`RunTally`]): a corpus of any size, or a trace of any length, is never
/// held as a whole result set. An error from
/// `each` (a results file that cannot be written) stops the run; it is returned with the
/// tally of what finished.
pub async fn localize_dir_each<E>(
    root: &Path,
    opts: &Options,
    each: impl FnMut(Vec<CaseResult>, Option<&PreparedCase>) -> Result<(), E>,
) -> (RunTally, Option<E>) {
    localize_cases_each(Cases::discover(root, opts), opts, each).await
}

/// [`localize_dir_each`] over the cases already found (and perhaps prepared) under their
/// root, so a caller that looked for them first does not walk or read the corpus twice.
pub async fn localize_cases_each<E>(
    cases: Cases,
    opts: &Options,
    mut each: impl FnMut(Vec<CaseResult>, Option<&PreparedCase>) -> Result<(), E>,
) -> (RunTally, Option<E>) {
    let mut tally = RunTally::new(opts);
    if let Some(e) = cases.error {
        tally.skipped.push(e);
        return (tally, None);
    }
    if !cases.found_any {
        tally.skipped.push(skip(
            &cases.root,
            "case",
            "no case found (a case is a folder holding case.json)",
        ));
    }
    // One id, one case: a second folder with an id already taken (or one that differs only
    // in letter case, so its files would land on the first's) is an input error, never a
    // silent overwrite of the first case's result file and page.
    let mut owners: std::collections::BTreeMap<String, (String, String)> = Default::default();
    let mut error = None;
    let on_case = |o: CaseOutput| {
        if let Some(r) = o.results.first() {
            let key = sage_trace::safe::file_stem(&r.case_id).to_ascii_lowercase();
            match owners.get(&key) {
                Some((id, dir)) if *dir != r.case_dir => {
                    tally.skipped.push(skip(
                        Path::new(&r.case_dir),
                        "case",
                        format!(
                            "case id {:?} is already taken by {dir} (as {id:?}); give each case its own id",
                            r.case_id
                        ),
                    ));
                    return ControlFlow::Continue(());
                }
                _ => {
                    owners.insert(key, (r.case_id.clone(), r.case_dir.clone()));
                }
            }
            tally.cases += 1;
        }
        tally.rows.extend(o.results.iter().map(SummaryRow::from));
        tally.skipped.extend(o.skipped);
        tally.problems.extend(o.problems);
        if o.results.is_empty() {
            return ControlFlow::Continue(());
        }
        match each(o.results, o.prepared.as_ref()) {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => {
                error = Some(e);
                ControlFlow::Break(())
            }
        }
    };
    match cases.ready {
        Some(ready) => localize_ready_each(ready, opts, on_case).await,
        None => localize_dirs_each(&cases.dirs, opts, on_case).await,
    }
    (tally, error)
}

/// The framework a result names: the case's `metadata.framework`, else its
/// `trace.framework`, else the adapter that read the trace.
fn framework_of(
    metadata: &sage_trace::case::Metadata,
    spec: &sage_trace::case::TraceSpec,
    trace: &sage_trace::CanonicalTrace,
) -> String {
    metadata
        .framework
        .clone()
        .or_else(|| spec.framework.clone())
        .unwrap_or_else(|| trace.framework.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two bundled cases copied into a fresh folder (the preparation counts are per folder).
    fn corpus() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        let corpora = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../corpora");
        for c in ["ag2-fig1a-aes-ecb", "aider-inherited-pip"] {
            copy(&corpora.join(c), &tmp.path().join(c));
        }
        tmp
    }

    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let p = e.unwrap().path();
            let dest = to.join(p.file_name().unwrap());
            if p.is_dir() {
                copy(&p, &dest);
            } else {
                std::fs::copy(&p, dest).unwrap();
            }
        }
    }

    fn preparations(root: &Path) -> Vec<usize> {
        let counts = PREPARED.lock().unwrap();
        let mut v: Vec<usize> = counts
            .iter()
            .filter(|(d, _)| d.starts_with(root))
            .map(|(_, n)| *n)
            .collect();
        v.sort();
        v
    }

    #[test]
    fn cases_prepared_ahead_of_the_run_are_read_once_and_localize_as_the_run_would() {
        let (plain, ahead) = (corpus(), corpus());
        let opts = Options::default();
        let by_itself = futures::executor::block_on(localize_dir(plain.path(), &opts));
        assert_eq!(preparations(plain.path()), vec![1, 1]);
        // as `sage localize` with an LLM judge: the forecast reads every case first
        let mut cases = Cases::discover(ahead.path(), &opts);
        assert_eq!(cases.prepare(&opts.rules).len(), 2);
        let set = futures::executor::block_on(localize_cases(cases, &opts));
        assert_eq!(preparations(ahead.path()), vec![1, 1]);
        let text = |s: &ResultSet, root: &Path| {
            crate::sink::pretty(s).replace(&root.display().to_string(), "[ROOT]")
        };
        assert_eq!(text(&set, ahead.path()), text(&by_itself, plain.path()));
    }

    #[test]
    fn a_case_is_shown_from_the_preparation_it_was_localized_from() {
        let tmp = corpus();
        let opts = Options::default();
        let dir = tmp.path().join("ag2-fig1a-aes-ecb");
        let out = futures::executor::block_on(localize_ready(
            prepare_all(std::slice::from_ref(&dir), &opts.rules),
            &opts,
        ));
        assert_eq!(out.results.len(), 1);
        let p = out.prepared.expect("the prepared case comes back");
        assert_eq!(p.case.id, out.results[0].case_id);
        assert_eq!(preparations(tmp.path()), vec![1]);
    }

    #[test]
    fn no_case_given_is_a_skipped_case_not_a_panic() {
        let out = futures::executor::block_on(localize_ready(Vec::new(), &Options::default()));
        assert!(out.results.is_empty() && out.skipped.is_some());
    }
}
