//! The LLM-judge parts of a scoring run (not a subcommand): family warnings, batch export,
//! the cost forecast and progress display before `sage localize` runs, the cost summary
//! after.

use super::JudgeFlags;
use anyhow::Context;
use sage::judge::concurrent::ScoreItem;
use sage::judge::spec::{family_warnings, BuiltJudge, JudgeSession};
use std::io::{IsTerminal, Write};
use std::path::Path;

/// What to do after [`before_run`].
pub enum Before {
    /// Stop with this exit code (a batch export was written).
    Exit(i32),
    /// Run, with this progress display.
    Go(Option<indicatif::ProgressBar>),
}

pub fn before_run(
    root: &Path,
    flags: &JudgeFlags,
    session: &JudgeSession,
    llm: &[BuiltJudge],
) -> anyhow::Result<Before> {
    // Cases are read here once more for the forecast; localize reports unreadable ones.
    let mut dirs = sage::case::discover(root).unwrap_or_default();
    if let Some(sh) = &flags.shard {
        dirs.retain(|d| sh.includes_dir(root, d));
    }
    let prepared: Vec<_> = dirs
        .iter()
        .filter_map(|d| sage::localize::prepare(d).ok().map(|p| p.0))
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
        eprintln!("sage: {w}");
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
        let rep = sage::judge::llm::batch::export_requests(
            judge,
            &items,
            flags.runs.max(1),
            flags.max_attempts.max(1),
            &mut f,
        )?;
        f.flush()?;
        eprintln!(
            "sage: wrote {} request(s) for {} to {} (~{} prompt tokens); {} turn-run(s) already settled by the ledger. \
             Submit the file to the provider's batch API, then re-run with --batch-import RESULTS.jsonl",
            rep.requests,
            judge.settings().who(),
            file.display(),
            rep.prompt_tokens,
            rep.settled
        );
        return Ok(Before::Exit(super::EXIT_OK));
    }
    for line in session.forecast(llm, &items).to_string().lines() {
        eprintln!("sage: {line}");
    }
    if flags.no_progress || !std::io::stderr().is_terminal() {
        return Ok(Before::Go(None));
    }
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} judging [{elapsed_precise}] {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    let (b, stats) = (bar.clone(), session.stats().clone());
    std::thread::spawn(move || {
        while !b.is_finished() {
            b.set_message(stats.progress_line());
            std::thread::sleep(std::time::Duration::from_millis(250));
        }
    });
    Ok(Before::Go(Some(bar)))
}

pub fn after_run(session: &JudgeSession, progress: Option<indicatif::ProgressBar>) {
    if let Some(b) = progress {
        b.finish_and_clear();
    }
    for line in session.stats().to_string().lines() {
        eprintln!("sage: {line}");
    }
    if let Some(l) = &session.parts.ledger {
        eprintln!(
            "sage: judgments are kept in {}; re-running the same command reuses them",
            l.dir().display()
        );
    }
}
