//! The LLM-judge parts of a scoring run (not a subcommand): family warnings, batch export,
//! the cost forecast and progress display before `sage localize` runs, the cost summary
//! after.

use super::JudgeFlags;
use anyhow::Context;
use sage_judge::concurrent::ScoreItem;
use sage_judge::spec::{family_warnings, BuiltJudge, JudgeSession};
use sage_pipeline::localize::Ready;
use std::io::Write;
use std::path::Path;

/// `--batch MODE`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchMode {
    /// Send every call still needed to the provider's batch API.
    Submit,
    /// Import the answers of the submitted batches that ended into the ledger.
    Poll,
}

/// What to do after [`before_run`].
pub enum Before {
    /// Stop with this exit code (a batch export was written).
    Exit(super::ExitStatus),
    /// Run.
    Go,
}

/// Before an LLM-judged run of the cases under `root`, prepared once for it (`ready`; the
/// run scores the same prepared cases): preflight, family warnings, batches, the forecast.
pub fn before_run(
    root: &Path,
    ready: &[Ready],
    flags: &JudgeFlags,
    session: &JudgeSession,
    llm: &[BuiltJudge],
) -> anyhow::Result<Before> {
    // Fatal errors first, once: a missing or refused key, an unknown model or endpoint.
    if !flags.offline && flags.batch_export.is_none() {
        let rt = super::runtime()?;
        for j in llm {
            let Some(judge) = &j.llm else { continue };
            if let Err(e) = rt.block_on(judge.preflight()) {
                let m = match e {
                    sage_judge::JudgeError::Fatal(m) => m,
                    other => other.to_string(),
                };
                errln!("sage: {m}");
                return Ok(Before::Exit(super::EXIT_FATAL));
            }
        }
    }
    // Unreadable cases are reported by the run itself.
    let prepared: Vec<_> = ready
        .iter()
        .filter_map(|r| r.prepared.as_ref().ok().map(|p| &p.0))
        .collect();
    let items: Vec<ScoreItem> = prepared
        .iter()
        .map(|p| ScoreItem {
            id: &p.case.id,
            task: p.case.task(),
            trace: &p.trace,
            store: &p.store,
        })
        .collect();
    let cases: Vec<(&str, Option<&str>)> = prepared
        .iter()
        .map(|p| {
            (
                p.case.id.as_str(),
                p.case.manifest.metadata.base_model.as_deref(),
            )
        })
        .collect();
    for w in family_warnings(llm, &cases) {
        errln!("sage: {w}");
    }
    if let Some(mode) = flags.batch {
        anyhow::ensure!(
            llm.len() == 1,
            "--batch takes exactly one LLM judge (a batch is for one provider and model)"
        );
        let judge = llm[0].llm.as_ref().expect("an LLM judge");
        return batch(mode, root, judge, &items, flags);
    }
    if let Some(file) = &flags.batch_export {
        anyhow::ensure!(
            llm.len() == 1,
            "--batch-export takes exactly one LLM judge (a batch file is for one provider and model)"
        );
        let judge = llm[0].llm.as_ref().expect("an LLM judge");
        let mut f = std::io::BufWriter::new(
            std::fs::File::create(file).with_context(|| format!("creating {}", file.display()))?,
        );
        let rep = sage_judge::llm::batch::export_requests(
            judge,
            &items,
            flags.runs,
            flags.max_attempts,
            &mut f,
        )?;
        f.flush()?;
        errln!(
            "sage: wrote {} request(s) for {} to {} (~{} prompt tokens); {} turn-run(s) already settled by the ledger; \
             {} turn-run(s) cannot fit the context budget (context-overflow). \
             Submit the file to the provider's batch API, then re-run with --batch-import RESULTS.jsonl",
            rep.requests,
            judge.settings().who(),
            file.display(),
            rep.prompt_tokens,
            rep.settled,
            rep.overflow
        );
        return Ok(Before::Exit(super::EXIT_OK));
    }
    for line in session.forecast(llm, &items).to_string().lines() {
        crate::note!("sage: {}", sage_llm::secrets::scrub(line));
    }
    Ok(Before::Go)
}

/// `--batch submit|poll`, then stop: the scores come from a later plain run, which replays
/// the imported answers from the ledger.
fn batch(
    mode: BatchMode,
    root: &Path,
    judge: &sage_judge::llm::LlmJudge,
    items: &[ScoreItem],
    flags: &JudgeFlags,
) -> anyhow::Result<Before> {
    use sage_judge::llm::batch;
    use sage_llm::secrets::scrub;
    let rt = super::runtime()?;
    let who = judge.settings().who();
    let (runs, attempts) = (flags.runs, flags.max_attempts);
    let ledger = judge
        .ledger()
        .map(|l| l.dir().display().to_string())
        .unwrap_or_default();
    let fatal = |e: sage_judge::JudgeError| {
        errln!("sage: {}", scrub(&e.to_string()));
        Ok(Before::Exit(super::EXIT_FATAL))
    };
    match mode {
        BatchMode::Submit => {
            let rep = match rt.block_on(batch::submit(judge, items, runs, attempts)) {
                Ok(r) => r,
                Err(e) => return fatal(e),
            };
            let sent: usize = rep.batches.iter().map(|(_, n)| n).sum();
            for (id, n) in &rep.batches {
                errln!("sage: submitted batch {id} ({n} call(s)) for {who}");
            }
            errln!(
                "sage: {sent} call(s) submitted in {} batch(es), recorded in {ledger}/batches; \
                 {} turn-run(s) already settled by the ledger, {} call(s) already in a running batch, \
                 {} sent once for identical requests, {} turn-run(s) cannot fit the context budget (context-overflow)",
                rep.batches.len(),
                rep.export.settled,
                rep.in_flight,
                rep.duplicates,
                rep.export.overflow
            );
            if sent > 0 || rep.in_flight > 0 {
                errln!(
                    "sage: next: `sage localize {} --judge {who} --batch poll` (again until every batch has ended)",
                    root.display()
                );
            } else {
                errln!(
                    "sage: nothing to submit: a plain `sage localize {}` replays every turn from the ledger",
                    root.display()
                );
            }
            Ok(Before::Exit(super::EXIT_OK))
        }
        BatchMode::Poll => {
            let rep = match rt.block_on(batch::poll(judge)) {
                Ok(r) => r,
                Err(e) => return fatal(e),
            };
            for (id, what) in &rep.batches {
                errln!("sage: batch {id}: {}", scrub(what));
            }
            if rep.batches.is_empty() {
                errln!("sage: no outstanding batch of {who} in {ledger}/batches");
            }
            let (left, running) = match batch::remaining(judge, items, runs, attempts) {
                Ok(r) => r,
                Err(e) => return fatal(e),
            };
            errln!(
                "sage: imported {} answer(s) into {ledger}; {} batch(es) still running; \
                 {} turn-run(s) settled by the ledger, {} call(s) in running batches, {} call(s) still needed \
                 ({} stored answer(s) rejected on replay and retried with the reason, as online)",
                rep.imported, rep.running, left.settled, running, left.requests, left.rejected
            );
            if running > 0 {
                errln!("sage: next: poll again later");
            } else if left.requests > 0 {
                errln!(
                    "sage: next: `--batch submit` again sends the {} call(s) still needed as a new round \
                     (or a plain `sage localize` sends them online)",
                    left.requests
                );
            } else {
                errln!(
                    "sage: every turn-run is settled: `sage localize {} --judge {who} --offline` replays them from the ledger",
                    root.display()
                );
            }
            Ok(Before::Exit(super::EXIT_OK))
        }
    }
}

pub fn after_run(session: &JudgeSession) {
    for line in session.stats().to_string().lines() {
        crate::note!("sage: {}", sage_llm::secrets::scrub(line));
    }
    if let Some(l) = &session.parts.ledger {
        crate::note!(
            "sage: judgments are kept in {}; re-running the same command reuses them",
            l.dir().display()
        );
    }
}

/// The scoring progress bar: jobs settled of the total, elapsed time and ETA, and the LLM
/// counters (cache hits, retries, cost) when a judge session has them. Drawn on stderr only
/// when it is a terminal.
pub struct Bar {
    bar: indicatif::ProgressBar,
    stats: Option<std::sync::Arc<sage_llm::cost::RunStats>>,
}

impl Bar {
    /// A bar, or `None` when progress is off (`--no-progress`, `-q`) or stderr is not a
    /// terminal.
    pub fn new(
        no_progress: bool,
        stats: Option<std::sync::Arc<sage_llm::cost::RunStats>>,
    ) -> Option<Bar> {
        Bar::labelled("scoring turns", no_progress, stats)
    }

    /// A bar that counts `what` (`scoring turns`, `cases`, ...): the same display for every
    /// long run (localize, screen, szz eval).
    pub fn labelled(
        what: &str,
        no_progress: bool,
        stats: Option<std::sync::Arc<sage_llm::cost::RunStats>>,
    ) -> Option<Bar> {
        use std::io::IsTerminal;
        if no_progress || super::quiet() || !std::io::stderr().is_terminal() {
            return None;
        }
        let bar = indicatif::ProgressBar::hidden();
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} {prefix} {pos}/{len} [{elapsed_precise}, ETA {eta}] {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar.set_prefix(what.to_string());
        Some(Bar { bar, stats })
    }

    /// Print a line above the bar (per-case detail under `-v`) without tearing it.
    pub fn println(&self, line: &str) {
        self.bar.println(line);
    }
}

/// `sage screen` reports its stages; each is drawn as the bar's count of that stage.
impl sage_screen::Progress for Bar {
    fn stage(&self, name: &str, total: u64) {
        sage_judge::concurrent::Progress::start(self, total);
        self.bar.set_prefix(name.to_string());
    }
    fn step(&self) {
        self.bar.inc(1);
    }
}

impl sage_judge::concurrent::Progress for Bar {
    fn start(&self, total: u64) {
        self.bar.set_length(total);
        self.bar.set_position(0);
        self.bar
            .set_draw_target(indicatif::ProgressDrawTarget::stderr());
    }
    fn advance(&self, n: u64) {
        self.bar.inc(n);
        if let Some(st) = &self.stats {
            self.bar.set_message(st.progress_line());
        }
    }
    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
