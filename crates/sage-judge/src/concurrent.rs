//! Score many traces at once: every (trace, judge, run, turn) is one job, run with bounded
//! concurrency through the same retry-and-verify logic as [`score_turn`]
//! ([`score_turn_with`]). Turns of one trace are independent (each request holds only its own
//! prefix), so they need no ordering; jobs are issued turn-major (turn 1 of every trace,
//! then turn 2, ...) so that the request for turn k+1 usually goes out after turn k's shared
//! prefix is in the provider's cache.
//!
//! [`score_turn`]: crate::score_turn

use super::{score_turn_with, verify_judgment, Judge, JudgeError, TraceScores, TurnOutcome};
use crate::prefix::PrefixChain;
use futures::StreamExt;
use sage_llm::cost::RunStats;
use sage_trace::case::TaskContext;
use sage_trace::{CanonicalTrace, RawStore};
use std::future::Future;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Where scoring progress is reported. The scorer never draws anything itself: the CLI
/// implements this with a progress bar, and nothing is reported when it is absent.
pub trait Progress: Send + Sync {
    /// Scoring starts with `total` jobs (one per turn, judge and run).
    fn start(&self, total: u64);
    /// `n` more jobs are settled.
    fn advance(&self, n: u64);
    /// Scoring is over (also after an early stop).
    fn finish(&self);
}

impl std::fmt::Debug for dyn Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Progress")
    }
}

/// One trace to score.
#[derive(Debug, Clone, Copy)]
pub struct ScoreItem<'a> {
    /// The case id (for messages).
    pub id: &'a str,
    pub task: &'a TaskContext,
    pub trace: &'a CanonicalTrace,
    /// The raw trace, against which quotes are verified.
    pub store: &'a RawStore,
}

/// Requests in flight at once when neither `--concurrency` nor a named judge says otherwise:
/// the one default of every command that scores (`localize`, `study`, `explain`, `validate`).
pub const DEFAULT_CONCURRENCY: NonZeroUsize = NonZeroUsize::new(16).unwrap();

/// How to score.
#[derive(Debug, Clone)]
pub struct ScoreOptions {
    /// Requests in flight at once (`--concurrency`).
    pub concurrency: NonZeroUsize,
    /// Runs per judge (`--runs`), numbered from 0.
    pub runs: std::num::NonZeroU32,
    /// Attempts per turn (first try + retries with feedback).
    pub max_attempts: std::num::NonZeroU32,
    /// Told the number of jobs, then of every settled job (the CLI draws a progress bar).
    pub progress: Option<Arc<dyn Progress>>,
    /// Counters shared with the judges (cache hits, retries, cost) for the progress bar.
    pub stats: Option<Arc<RunStats>>,
    /// The injection rules quotes are verified against (`--injection-rules`).
    pub injection: Arc<crate::injection::Rules>,
}

impl Default for ScoreOptions {
    fn default() -> Self {
        ScoreOptions {
            concurrency: DEFAULT_CONCURRENCY,
            runs: std::num::NonZeroU32::MIN,
            max_attempts: std::num::NonZeroU32::new(3).unwrap(),
            progress: None,
            stats: None,
            injection: Arc::new(crate::injection::Rules::embedded()),
        }
    }
}

/// The scores of one trace under one judge and run; `None` when the run stopped before every
/// turn of it was settled.
pub type Slot = Option<TraceScores>;

/// What [`score_traces_concurrently`] produced.
#[derive(Debug)]
pub struct ScoredBatch {
    /// `scores[item][judge * runs + run]`.
    pub scores: Vec<Vec<Slot>>,
    /// Why the run stopped early (a fatal error or the budget); everything finished before
    /// is in the ledger, so a re-run resumes.
    pub stopped: Option<JudgeError>,
}

impl ScoredBatch {
    /// The slot of `item`, `judge`, `run`.
    pub fn get(&self, item: usize, judge: usize, run: u32, runs: u32) -> Option<&TraceScores> {
        self.scores
            .get(item)?
            .get(judge * runs as usize + run as usize)?
            .as_ref()
    }
}

#[derive(Debug, Clone, Copy)]
struct Job {
    item: usize,
    judge: usize,
    run: u32,
    k: usize,
}

/// Requests below which one more driver thread is not started.
const JOBS_PER_DRIVER: usize = 16;

/// Whether a pool of `jobs` requests runs on the calling thread alone (too few for a second
/// driver): a caller whose judges need no network can then run it without a multi-thread
/// runtime, whose worker threads would only be started and stopped.
pub fn on_calling_thread(jobs: usize) -> bool {
    jobs <= JOBS_PER_DRIVER
}

/// Run the scoring pool: `concurrency` request slots in all, shared out among one driver per
/// core (but no more than one per [`JOBS_PER_DRIVER`] of the `jobs` requests), each a thread of
/// its own that polls its slots' futures on the caller's tokio runtime.
/// A request's CPU work (building and measuring the prompt, hashing, parsing, verifying
/// quotes) runs on the thread that polls it, so a single driver caps a long trace's
/// throughput at one core's worth of prompt building however many requests are in flight.
/// Without a multi-thread tokio runtime (a plain executor, as in unit tests) there is one
/// driver on the calling thread.
async fn run_drivers<F, Fut, T>(concurrency: NonZeroUsize, jobs: usize, drive: &F) -> Vec<T>
where
    F: Fn(NonZeroUsize) -> Fut + Sync,
    Fut: Future<Output = Vec<T>>,
    T: Send,
{
    // a driver thread is not worth starting for a handful of requests (a short trace under
    // the lexicon judge is scored before the threads would have started)
    let worth = NonZeroUsize::new(jobs.div_ceil(JOBS_PER_DRIVER)).unwrap_or(NonZeroUsize::MIN);
    // (the core count reads cgroup files: not asked when one driver is all there can be)
    let cores = if worth.get() > 1 && concurrency.get() > 1 {
        std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN)
    } else {
        NonZeroUsize::MIN
    };
    let drivers = cores.min(concurrency).min(worth);
    let handle = match tokio::runtime::Handle::try_current() {
        Ok(h)
            if drivers.get() > 1
                && h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread =>
        {
            h
        }
        _ => return drive(concurrency).await,
    };
    // Blocking here is what block_in_place is for: the runtime moves its other work off
    // this thread while the drivers run.
    tokio::task::block_in_place(|| {
        std::thread::scope(|scope| {
            let threads: Vec<_> = (0..drivers.get())
                .map(|i| {
                    // slots shared out as evenly as possible, summing to `concurrency`: each
                    // driver at least one, as there are no more drivers than slots
                    let slots =
                        concurrency.get() / drivers + usize::from(i < concurrency.get() % drivers);
                    let slots = NonZeroUsize::new(slots).unwrap_or(NonZeroUsize::MIN);
                    let h = handle.clone();
                    scope.spawn(move || h.block_on(drive(slots)))
                })
                .collect();
            threads
                .into_iter()
                .flat_map(|t| t.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        })
    })
}

/// The order jobs are sent in. With requests in flight at once, turn-major (turn 1 of every
/// trace, then turn 2, ...): turn k+1 usually goes out after turn k's prefix is in the
/// provider's cache. With one request at a time (a one-slot local server), trace by trace:
/// each request then extends the one before it (the runs of one turn are the same prompt),
/// so the server's KV cache holds the whole shared prefix, where turn-major would replace it
/// with another trace's at every request.
fn job_order(items: &[ScoreItem<'_>], judges: usize, runs: u32, concurrency: usize) -> Vec<Job> {
    let mut jobs = Vec::new();
    if concurrency == 1 {
        for (ii, item) in items.iter().enumerate() {
            for ji in 0..judges {
                for k in 1..=item.trace.turns.len() {
                    for run in 0..runs {
                        jobs.push(Job {
                            item: ii,
                            judge: ji,
                            run,
                            k,
                        });
                    }
                }
            }
        }
        return jobs;
    }
    let max_turns = items.iter().map(|i| i.trace.turns.len()).max().unwrap_or(0);
    for k in 1..=max_turns {
        for (ii, item) in items.iter().enumerate() {
            if k > item.trace.turns.len() {
                continue;
            }
            for ji in 0..judges {
                for run in 0..runs {
                    jobs.push(Job {
                        item: ii,
                        judge: ji,
                        run,
                        k,
                    });
                }
            }
        }
    }
    jobs
}

/// Score every turn of every item with every judge, `opts.runs` times.
pub async fn score_traces_concurrently(
    judges: &[Arc<dyn Judge>],
    items: &[ScoreItem<'_>],
    opts: &ScoreOptions,
) -> ScoredBatch {
    let runs = opts.runs.get();
    // Every turn's prompt hash comes from one chain per trace: linear in the trace.
    let chains: Vec<PrefixChain> = items
        .iter()
        .map(|i| PrefixChain::new(i.task, &i.trace.turns))
        .collect();
    let jobs = job_order(items, judges.len(), runs, opts.concurrency.get());
    let bar = opts.progress.as_deref();
    if let Some(b) = bar {
        b.start(jobs.len() as u64);
    }
    let stop = AtomicBool::new(false);
    let stopped: Mutex<Option<JudgeError>> = Mutex::new(None);
    // Jobs are taken in order from one shared queue by every driver below.
    let next = AtomicUsize::new(0);
    let take = || {
        let i = next.fetch_add(1, Ordering::Relaxed);
        jobs.get(i).copied()
    };
    let drive = |slots: NonZeroUsize| {
        futures::stream::iter(std::iter::from_fn(take))
            .map(|job| {
                let judge = judges[job.judge].as_ref();
                let item = items[job.item];
                let chain = &chains[job.item];
                let (stop, stopped, stats) = (&stop, &stopped, &opts.stats);
                async move {
                    if stop.load(Ordering::Relaxed) {
                        return (job, None);
                    }
                    let out = score_turn_with(
                        judge,
                        item.task,
                        item.trace,
                        Some(chain),
                        job.k,
                        job.run,
                        opts.max_attempts,
                        stats.as_deref(),
                        // The item's one store, shared by every driver thread.
                        |turn, j| verify_judgment(item.store, turn, j, &opts.injection),
                    )
                    .await;
                    if let Some(b) = bar {
                        b.advance(1);
                    }
                    match out {
                        Ok(o) => {
                            if let Some(st) = stats {
                                let c = match &o {
                                    TurnOutcome::Scored(s) => {
                                        st.judgment_retries.fetch_add(
                                            u64::from(s.attempts.saturating_sub(1)),
                                            Ordering::Relaxed,
                                        );
                                        Some(&st.turns_scored)
                                    }
                                    TurnOutcome::Failed { attempts, .. } => {
                                        st.judgment_retries.fetch_add(
                                            u64::from(attempts.saturating_sub(1)),
                                            Ordering::Relaxed,
                                        );
                                        Some(&st.turns_failed)
                                    }
                                    TurnOutcome::ContextOverflow { .. } => {
                                        Some(&st.turns_overflowed)
                                    }
                                    TurnOutcome::Administrative { .. } => None,
                                };
                                if let Some(c) = c {
                                    c.fetch_add(1, Ordering::Relaxed);
                                }
                            }
                            (job, Some(o))
                        }
                        Err(e) => {
                            stop.store(true, Ordering::Relaxed);
                            let mut s = stopped.lock().unwrap_or_else(|p| p.into_inner());
                            if s.is_none() {
                                *s = Some(e);
                            }
                            (job, None)
                        }
                    }
                }
            })
            .buffer_unordered(slots.get())
            .collect::<Vec<(Job, Option<TurnOutcome>)>>()
    };
    let results = run_drivers(opts.concurrency, jobs.len(), &drive).await;
    if let Some(b) = bar {
        b.finish();
    }
    // Reassemble in order: item → (judge, run) → turn.
    let slots = judges.len() * runs as usize;
    let mut grid: Vec<Vec<Vec<Option<TurnOutcome>>>> = items
        .iter()
        .map(|i| vec![vec![None; i.trace.turns.len()]; slots])
        .collect();
    for (job, out) in results {
        grid[job.item][job.judge * runs as usize + job.run as usize][job.k - 1] = out;
    }
    let scores = grid
        .into_iter()
        .map(|per_slot| {
            per_slot
                .into_iter()
                .enumerate()
                .map(|(slot, turns)| {
                    let turns: Option<Vec<TurnOutcome>> = turns.into_iter().collect();
                    turns.map(|turns| TraceScores {
                        judge: judges[slot / runs as usize].id(),
                        run: (slot % runs as usize) as u32,
                        turns,
                    })
                })
                .collect()
        })
        .collect();
    ScoredBatch {
        scores,
        stopped: stopped.into_inner().unwrap_or_else(|p| p.into_inner()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::trace_with;
    use crate::{DimensionScore, JudgeId, Judgment, TurnRequest};
    use futures::future::BoxFuture;

    struct Echo;
    impl Judge for Echo {
        fn id(&self) -> JudgeId {
            JudgeId {
                name: "echo".into(),
                model: "-".into(),
                rubric_version: "0".into(),
            }
        }
        fn judge<'a>(
            &'a self,
            req: &'a TurnRequest<'a>,
        ) -> BoxFuture<'a, Result<Judgment, JudgeError>> {
            let text = req.target().message.as_ref().unwrap().text.clone();
            Box::pin(async move {
                if text.contains("fatal") {
                    return Err(JudgeError::Fatal("boom".into()));
                }
                Ok(Judgment {
                    applicable: true,
                    tr: DimensionScore {
                        score: 1,
                        quote: Some(text),
                        rationale: None,
                        also: Vec::new(),
                    },
                    ..Default::default()
                })
            })
        }
    }

    #[test]
    fn every_turn_of_every_run_is_scored_once_in_order() {
        let (t1, s1) = trace_with(&["one", "two", "three"]);
        let (t2, s2) = trace_with(&["alpha"]);
        let task = TaskContext::default();
        let items = [
            ScoreItem {
                id: "a",
                task: &task,
                trace: &t1,
                store: &s1,
            },
            ScoreItem {
                id: "b",
                task: &task,
                trace: &t2,
                store: &s2,
            },
        ];
        let judges: Vec<Arc<dyn Judge>> = vec![Arc::new(Echo)];
        let opts = ScoreOptions {
            runs: std::num::NonZeroU32::new(2).unwrap(),
            concurrency: NonZeroUsize::new(3).unwrap(),
            ..Default::default()
        };
        let out = futures::executor::block_on(score_traces_concurrently(&judges, &items, &opts));
        assert!(out.stopped.is_none());
        let s = out.get(0, 0, 1, 2).unwrap();
        assert_eq!(s.run, 1);
        assert_eq!(s.turns.len(), 3);
        assert_eq!(
            s.score(3).unwrap().judgment.tr.quote.as_deref(),
            Some("three")
        );
        assert_eq!(out.get(1, 0, 0, 2).unwrap().turns.len(), 1);
    }

    #[test]
    fn one_request_at_a_time_goes_trace_by_trace() {
        let (t1, s1) = trace_with(&["one", "two"]);
        let (t2, s2) = trace_with(&["alpha", "beta"]);
        let task = TaskContext::default();
        let item = |id, trace, store| ScoreItem {
            id,
            task: &task,
            trace,
            store,
        };
        let items = [item("a", &t1, &s1), item("b", &t2, &s2)];
        let key = |j: &Job| (j.item, j.judge, j.k, j.run);
        let serial: Vec<_> = job_order(&items, 1, 2, 1).iter().map(key).collect();
        assert_eq!(
            serial,
            [
                (0, 0, 1, 0),
                (0, 0, 1, 1),
                (0, 0, 2, 0),
                (0, 0, 2, 1),
                (1, 0, 1, 0),
                (1, 0, 1, 1),
                (1, 0, 2, 0),
                (1, 0, 2, 1)
            ]
        );
        let pooled: Vec<_> = job_order(&items, 1, 1, 4).iter().map(key).collect();
        assert_eq!(
            pooled,
            [(0, 0, 1, 0), (1, 0, 1, 0), (0, 0, 2, 0), (1, 0, 2, 0)]
        );
    }

    #[test]
    fn a_fatal_error_stops_cleanly() {
        let (t1, s1) = trace_with(&["ok", "fatal", "later"]);
        let task = TaskContext::default();
        let items = [ScoreItem {
            id: "a",
            task: &task,
            trace: &t1,
            store: &s1,
        }];
        let judges: Vec<Arc<dyn Judge>> = vec![Arc::new(Echo)];
        let opts = ScoreOptions {
            concurrency: NonZeroUsize::MIN,
            ..Default::default()
        };
        let out = futures::executor::block_on(score_traces_concurrently(&judges, &items, &opts));
        assert_eq!(out.stopped, Some(JudgeError::Fatal("boom".into())));
        assert!(out.scores[0][0].is_none());
    }
}
