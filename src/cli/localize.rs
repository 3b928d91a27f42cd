//! `sage localize DIR`: every case under DIR → per-case results and the Table-5 summary.

use super::{build_run, runtime, JudgeFlags, EXIT_INPUT_FAILED, EXIT_OK};
use anyhow::Context;
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
    /// Folder for per-case results (`cases/<id>.json`), `results.json` and `summary.json`.
    #[arg(long, value_name = "DIR", default_value = "sage-results")]
    pub out_dir: PathBuf,
    /// Do not write the results folder.
    #[arg(long)]
    pub no_write: bool,
    /// Judge requests in flight at once, across every case, turn, judge and run.
    #[arg(long, default_value_t = 16, value_parser = super::at_least_one)]
    pub concurrency: usize,
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

pub fn run(a: Args) -> anyhow::Result<super::ExitStatus> {
    // Nothing to localize is a usage error, found before any judge is built or any result
    // file touched: an empty run must not replace the results of a real one.
    match sage_trace::case::discover_with(&a.dir, a.follow_links) {
        Ok(d) if !d.is_empty() => {}
        Ok(_) => {
            eprintln!(
                "sage: error: {}: no case found (a case is a folder holding case.json); \
                 nothing written",
                a.dir.display()
            );
            return Ok(super::EXIT_FATAL);
        }
        Err(e) => {
            eprintln!("sage: error: {}: {e}; nothing written", a.dir.display());
            return Ok(super::EXIT_FATAL);
        }
    }
    use sage_llm::secrets::scrub;
    if let Some(p) = &a.injection_rules {
        sage_judge::injection::set_active(sage_judge::injection::Rules::load(p)?);
    }
    let built = build_run(&a.judges, a.lexicon.as_deref(), &a.judge_flags)?;
    let mut opts = built.opts;
    opts.concurrency = a.concurrency;
    opts.follow_links = a.follow_links;
    if let Some(session) = &built.session {
        if let super::judges::Before::Exit(code) =
            super::judges::before_run(&a.dir, &a.judge_flags, session, &built.llm, a.follow_links)?
        {
            return Ok(code);
        }
    }
    let stats = built.session.as_ref().map(|s| s.stats().clone());
    if let Some(bar) = super::judges::Bar::new(a.judge_flags.no_progress, stats.clone()) {
        opts.progress = Some(std::sync::Arc::new(bar));
    }
    opts.stats = stats;
    let set = runtime()?.block_on(sage_pipeline::localize::localize_dir(&a.dir, &opts));
    if let Some(session) = &built.session {
        super::judges::after_run(session);
    }

    if !a.no_write {
        sage_pipeline::report::write_results_dir(&a.out_dir, &set)
            .with_context(|| format!("writing results to {}", a.out_dir.display()))?;
    }
    if let Some(path) = &a.output {
        let text = sage_pipeline::report::pretty(&set);
        sage_pipeline::report::write_atomic(path, text.as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &a.sarif {
        let log = sage_pipeline::sarif_view::to_sarif(&set);
        std::fs::write(path, sage_pipeline::report::pretty(&log))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    match a.format {
        Format::Json => print!("{}", sage_pipeline::report::pretty(&set)),
        Format::Table => {
            for s in &set.summaries {
                println!("{}", scrub(&sage_pipeline::report::render_summary(s)));
            }
            for r in &set.results {
                for c in r.failed_checks() {
                    println!(
                        "check failed: {} ({}): {} — {}",
                        r.case_id,
                        r.judge,
                        c.name,
                        scrub(&c.detail)
                    );
                }
                if let Some(e) = r.expected.as_ref().filter(|e| !e.matched) {
                    println!(
                        "expectation not met: {}: {}",
                        r.case_id,
                        e.mismatches.join("; ")
                    );
                }
            }
            // Flags are per case, the same under every judge: print each case once.
            let mut shown = std::collections::BTreeSet::new();
            for r in &set.results {
                if !shown.insert(&r.case_id) {
                    continue;
                }
                for f in &r.injection {
                    println!(
                        "addresses the judge: {} turn {} ({}): {}",
                        r.case_id,
                        f.turn,
                        f.rule,
                        scrub(&f.excerpt)
                    );
                }
            }
            if !a.no_write && !super::quiet() {
                println!("per-case results written to {}", a.out_dir.display());
            }
        }
    }
    for s in &set.skipped {
        eprintln!(
            "sage: skipped {} ({}): {}",
            s.case,
            s.stage,
            scrub(&s.message)
        );
    }
    for p in &set.problems {
        eprintln!("sage: problem: {}", scrub(&p.message));
    }
    // A fatal judge error (a dead endpoint, a refused key) stops the run: whatever finished
    // is written and in the ledger, and the exit status says the run did not complete.
    if let Some(e) = built
        .session
        .as_ref()
        .and_then(|s| s.parts.tripped.lock().ok().and_then(|t| t.clone()))
    {
        eprintln!("sage: the run stopped: {}", scrub(&e.to_string()));
        return Ok(super::EXIT_FATAL);
    }
    let cases = set
        .results
        .iter()
        .map(|r| &r.case_id)
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    if super::verbose() {
        for r in &set.results {
            eprintln!(
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
            );
        }
    }
    crate::note!(
        "sage: {} case(s) processed, {} skipped, {} problem(s)",
        cases,
        set.skipped.len(),
        set.problems.len()
    );
    Ok(if set.all_ok() {
        EXIT_OK
    } else {
        EXIT_INPUT_FAILED
    })
}
