//! `sage localize DIR`: every case under DIR → per-case results and the Table-5 summary.

use super::{build_run, runtime, JudgeFlags, EXIT_INPUT_FAILED, EXIT_OK};
use anyhow::Context;
use sage_pipeline::results::CaseResult;
use sage_pipeline::sink::{
    ResultSinks, ResultsDir, ResultsFile, ResultsStream, RunEnd, SarifFile, SinkError,
};
use sage_pipeline::view::ViewSite;
use std::io::BufWriter;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Folder of cases (searched recursively for case.json), or one case folder.
    pub dir: PathBuf,
    /// Judge: `lexicon` (offline, default), `openai:MODEL`, `anthropic:MODEL`, or a name
    /// from sage.toml. Repeatable.
    #[arg(
        long = "judge",
        value_name = "SPEC",
        env = "SAGE_JUDGE",
        value_delimiter = ','
    )]
    pub judges: Vec<String>,
    /// Use this lexicon file instead of the embedded crates/sage-judge/rubrics/lexicon.toml.
    #[arg(long, value_name = "FILE")]
    pub lexicon: Option<PathBuf>,
    /// What to print on stdout: the Table-5 summary, or the whole result set as JSON.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Also write the whole result set as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Also write a SARIF 2.1.0 view to FILE: the anchor as each result's location, the
    /// origin turn and the introducing write as related locations into the trace.
    #[arg(long, value_name = "FILE")]
    pub sarif: Option<PathBuf>,
    /// Also write the HTML view (as `sage view` writes it from the results) into DIR: each
    /// case's page as the case finishes, the index when the run ends.
    #[arg(long, value_name = "DIR")]
    pub view: Option<PathBuf>,
    /// Folder for per-case results (`cases/<id>.json`), `results.json` and `summary.json`.
    #[arg(long, value_name = "DIR", default_value = "sage-results")]
    pub out_dir: PathBuf,
    /// Do not write the results folder.
    #[arg(long)]
    pub no_write: bool,
    /// Judge requests in flight at once, across every case, turn, judge and run.
    /// Default: the judge's own (`concurrency` of a named judge; the local judge: 1), else 16.
    #[arg(long, value_parser = super::concurrency)]
    pub concurrency: Option<std::num::NonZeroUsize>,
    /// Follow symbolic links that lead out of DIR (by default only links that stay inside
    /// it are followed: a corpus must not make sage walk other folders).
    #[arg(long)]
    pub follow_links: bool,
    /// Rules flagging trace text that addresses the judge, instead of the embedded
    /// crates/sage-judge/rubrics/injection.toml.
    #[arg(long, value_name = "FILE")]
    pub injection_rules: Option<PathBuf>,
    #[command(flatten)]
    pub judge_flags: JudgeFlags,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
}

pub fn run(a: Args, rc: &super::RunConfig) -> anyhow::Result<super::ExitStatus> {
    // Nothing to localize is a usage error, found before any judge is built or any result
    // file touched: an empty run must not replace the results of a real one.
    let found = match sage_trace::case::discover_with(&a.dir, a.follow_links) {
        Ok(d) if !d.is_empty() => d,
        Ok(_) => {
            errln!(
                "sage: error: {}: no case found (a case is a folder holding case.json); \
                 nothing written",
                a.dir.display()
            );
            return Ok(super::EXIT_FATAL);
        }
        Err(e) => {
            errln!("sage: error: {}: {e}; nothing written", a.dir.display());
            return Ok(super::EXIT_FATAL);
        }
    };
    use sage_llm::secrets::scrub;
    let one_case = found.len() == 1;
    let built = build_run(
        &a.judges,
        a.lexicon.as_deref(),
        &a.judge_flags,
        a.concurrency,
        a.injection_rules.as_deref(),
        rc,
    )?;
    let mut opts = built.opts;
    opts.follow_links = a.follow_links;
    let mut cases = sage_pipeline::localize::Cases::found(&a.dir, found, &opts);
    if let Some(session) = &built.session {
        // the forecast reads every case first: the run scores the cases it read
        let ready = cases.prepare(&opts.rules);
        if let super::judges::Before::Exit(code) =
            super::judges::before_run(&a.dir, ready, &a.judge_flags, session, &built.llm)?
        {
            return Ok(code);
        }
    }
    let stats = built.session.as_ref().map(|s| s.stats().clone());
    if let Some(bar) = super::judges::Bar::new(a.judge_flags.no_progress, stats.clone()) {
        opts.progress = Some(std::sync::Arc::new(bar));
    }
    opts.stats = stats;
    // Each case's results are written out as the case finishes and then dropped: only the
    // summary rows and the lines printed at the end are kept (issue 19: memory stays flat
    // over a corpus of any size).
    let judge_ids: Vec<sage_judge::JudgeId> = opts.judges.iter().map(|j| j.id()).collect();
    let runs = opts.runs.get();
    let mut sinks = sinks(&a, &judge_ids, runs, &opts.rules)?;
    let mut lines = Lines::default();
    // One case whose judges need no network, with too few requests for a second pool
    // driver, is scored on this thread: a multi-thread runtime would only start and stop its
    // workers (issue 31: start-up). The case is read first to count its requests; the run
    // scores the case it read.
    let small = one_case && built.session.is_none() && {
        cases.prepare(&opts.rules);
        cases
            .requests(&opts)
            .is_some_and(sage_judge::concurrent::on_calling_thread)
    };
    let rt = if small {
        super::current_thread_runtime()?
    } else {
        runtime()?
    };
    let (tally, failed) = rt.block_on(sage_pipeline::localize::localize_cases_each(
        cases,
        &opts,
        |results, prepared| {
            sinks.case(&results, prepared).map_err(sink_error)?;
            lines.add(&results);
            anyhow::Ok(())
        },
    ));
    if let Some(session) = &built.session {
        super::judges::after_run(session);
    }
    if let Some(e) = failed {
        return Err(e);
    }
    let summaries = tally.summaries();
    let end = RunEnd {
        skipped: &tally.skipped,
        problems: &tally.problems,
        summaries: &summaries,
    };
    let warnings = sinks.warnings();
    sinks.finish(&end).map_err(sink_error)?;

    if a.format == Format::Table {
        for s in &summaries {
            outln!("{}", scrub(&sage_pipeline::report::render_summary(s)));
        }
        for l in lines.notices.iter().chain(&lines.flags) {
            outln!("{l}");
        }
        if !a.no_write && !super::quiet() {
            outln!("per-case results written to {}", a.out_dir.display());
        }
        if let Some(v) = a.view.as_ref().filter(|_| !super::quiet()) {
            outln!("view written to {}", v.join("index.html").display());
        }
    }
    for s in &tally.skipped {
        errln!(
            "sage: skipped {} ({}): {}",
            s.case,
            s.stage,
            scrub(&s.message)
        );
    }
    for p in &tally.problems {
        errln!("sage: problem: {}", scrub(&p.message));
    }
    for w in &warnings {
        errln!("sage: page without trace text: {}", scrub(w));
    }
    // A fatal judge error (a dead endpoint, a refused key) stops the run: whatever finished
    // is written and in the ledger, and the exit status says the run did not complete.
    if let Some(e) = built
        .session
        .as_ref()
        .and_then(|s| s.parts.tripped.lock().ok().and_then(|t| t.clone()))
    {
        errln!("sage: the run stopped: {}", scrub(&e.to_string()));
        return Ok(super::EXIT_FATAL);
    }
    for l in &lines.verbose {
        errln!("{l}");
    }
    crate::note!(
        "sage: {} case(s) processed, {} skipped, {} problem(s)",
        tally.cases,
        tally.skipped.len(),
        tally.problems.len()
    );
    // A turn that could not be scored is an input that failed: its case's origin rests on
    // the turns that were (issue 29: every turn failing used to exit 0).
    let turns_failed: usize = summaries.iter().map(|s| s.turns_failed).sum();
    if turns_failed > 0 {
        errln!(
            "sage: {turns_failed} turn(s) failed scoring (see `turns_failed` and each turn's \
             `error` in the results)"
        );
    }
    Ok(
        if tally.all_ok() && turns_failed == 0 && warnings.is_empty() {
            EXIT_OK
        } else {
            EXIT_INPUT_FAILED
        },
    )
}

/// The outputs the flags ask for, as the pipeline's sinks: the results folder, `--output`,
/// the JSON on stdout (`--format json`), the SARIF view and the HTML view.
fn sinks(
    a: &Args,
    judges: &[sage_judge::JudgeId],
    runs: u32,
    rules: &sage_pipeline::Rules,
) -> anyhow::Result<ResultSinks> {
    let root = run_folder();
    let root = root.as_deref();
    let mut sinks = ResultSinks::default();
    if !a.no_write {
        sinks.push(
            ResultsDir::create_at(&a.out_dir, judges, runs, root)
                .with_context(|| format!("writing results to {}", a.out_dir.display()))?,
        );
    }
    if let Some(path) = &a.output {
        sinks.push(
            ResultsFile::create(path, judges, runs, root)
                .with_context(|| format!("writing {}", path.display()))?,
        );
    }
    if a.format == Format::Json {
        let stdout =
            super::TerminalWriter::new(BufWriter::with_capacity(1 << 16, std::io::stdout().lock()));
        sinks.push(ResultsStream::begin(
            "standard output",
            stdout,
            judges,
            runs,
            root,
        )?);
    }
    if let Some(path) = &a.sarif {
        sinks.push(SarifFile::new(path, rules));
    }
    if let Some(dir) = &a.view {
        // the case folders as this run was given them, from the folder it runs in
        let locator = sage_pipeline::locate::CaseLocator::default();
        sinks.push(
            ViewSite::create(dir, judges, &locator, rules)
                .with_context(|| format!("writing the view to {}", dir.display()))?,
        );
    }
    Ok(sinks)
}

/// A sink's error as the CLI reports it: the output it names, then the cause; a closed pipe
/// as itself (it ends the run quietly).
fn sink_error(e: SinkError) -> anyhow::Error {
    match e.context {
        Some(c) => anyhow::Error::new(e.io).context(c),
        None => e.io.into(),
    }
}

/// What is printed after the run, from results that are no longer held.
#[derive(Default)]
struct Lines {
    /// Failed checks and unmet expectations, per result in order.
    notices: Vec<String>,
    /// Turns addressing the judge, once per case.
    flags: Vec<String>,
    /// `--verbose`: one line per result.
    verbose: Vec<String>,
}

impl Lines {
    fn add(&mut self, results: &[CaseResult]) {
        use sage_llm::secrets::scrub;
        for r in results {
            for c in r.failed_checks() {
                self.notices.push(format!(
                    "check failed: {} ({}): {} — {}",
                    r.case_id,
                    r.judge,
                    c.name,
                    scrub(&c.detail)
                ));
            }
            if let Some(e) = r.expected.as_ref().filter(|e| !e.matched) {
                self.notices.push(format!(
                    "expectation not met: {}: {}",
                    r.case_id,
                    e.mismatches.join("; ")
                ));
            }
            if super::verbose() {
                self.verbose.push(verbose_line(r));
            }
        }
        // Flags are per case, the same under every judge: listed once.
        if let Some(r) = results.first() {
            for f in &r.injection {
                self.flags.push(format!(
                    "addresses the judge: {} turn {} ({}): {}",
                    r.case_id,
                    f.turn,
                    f.rule,
                    scrub(&f.excerpt)
                ));
            }
        }
    }
}

fn verbose_line(r: &CaseResult) -> String {
    format!(
        "sage: {} ({} run {}): {}, introducing write {}, origin {}",
        r.case_id,
        r.judge.name,
        r.run,
        r.provenance.provenance.as_str(),
        r.provenance
            .introducing_write
            .map(|w| format!("turn {}", w.turn))
            .unwrap_or_else(|| "none".into()),
        match &r.origin.outcome {
            sage_history::origin::Outcome::Localized {
                origin_turn,
                origin_type,
            } => format!("turn {origin_turn} ({})", origin_type.as_str()),
            sage_history::origin::Outcome::Undetermined { reason } => {
                format!("undetermined ({})", reason.as_str())
            }
        }
    )
}

/// The folder this run is made in (absolute), recorded in every results document (the same
/// in the folder, `--output` and stdout, which stay one document) so that its case folders,
/// named relative to it, are found wherever the results are opened from (`case_root`).
fn run_folder() -> Option<String> {
    std::env::current_dir()
        .ok()
        .map(|d| d.display().to_string())
}
