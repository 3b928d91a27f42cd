//! `sage explain CASE`: one case, turn by turn.

use super::{build_run, runtime, JudgeFlags, EXIT_INPUT_FAILED, EXIT_OK};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The case folder (holding case.json).
    pub case: PathBuf,
    /// Judge: `lexicon` (offline, default), `openai:MODEL`, `anthropic:MODEL`, or a name
    /// from sage.toml. Repeatable.
    #[arg(
        long = "judge",
        value_name = "SPEC",
        env = "SAGE_JUDGE",
        value_delimiter = ','
    )]
    pub judges: Vec<String>,
    /// Use this lexicon file instead of the embedded one.
    #[arg(long, value_name = "FILE")]
    pub lexicon: Option<PathBuf>,
    /// The same as `--format json` (kept for scripts written before `--format`).
    #[arg(long, hide = true)]
    pub json: bool,
    #[command(flatten)]
    pub out: super::OutputArgs,
    /// Show the task, each turn's text and each diff whole (default: a few lines each).
    #[arg(long)]
    pub full: bool,
    /// Lines shown of each text and diff before it is folded.
    #[arg(long, default_value_t = 4, value_name = "N", value_parser = super::at_least_one)]
    pub fold: usize,
    #[command(flatten)]
    pub judge_flags: JudgeFlags,
}

pub fn run(a: Args, rc: &super::RunConfig) -> anyhow::Result<super::ExitStatus> {
    let built = build_run(
        &a.judges,
        a.lexicon.as_deref(),
        &a.judge_flags,
        None,
        None,
        rc,
    )?;
    let mut opts = built.opts;
    // The case is read once: for the forecast, scoring and the explanation.
    let ready = sage_pipeline::localize::prepare_all(std::slice::from_ref(&a.case), &opts.rules);
    if let Some(session) = &built.session {
        if let super::judges::Before::Exit(code) =
            super::judges::before_run(&a.case, &ready, &a.judge_flags, session, &built.llm)?
        {
            return Ok(code);
        }
    }
    opts.stats = built.session.as_ref().map(|s| s.stats().clone());
    let out = runtime()?.block_on(sage_pipeline::localize::localize_ready(ready, &opts));
    if let Some(session) = &built.session {
        super::judges::after_run(session);
    }
    use sage_llm::secrets::scrub;
    if let Some(s) = &out.skipped {
        errln!(
            "sage: skipped {} ({}): {}",
            s.case,
            s.stage,
            scrub(&s.message)
        );
    }
    for p in &out.problems {
        errln!("sage: problem: {}", scrub(&p.message));
    }
    let mut text = String::new();
    if a.json || a.out.format == super::TableOrJson::Json {
        text = sage_pipeline::sink::pretty(&out.results);
    } else {
        let prepared = out.prepared.as_ref();
        let fold = if a.full { 0 } else { a.fold };
        for r in &out.results {
            let context = prepared.map(|p| sage_pipeline::report::ExplainContext {
                trace: &p.trace,
                task: &p.case.task().description,
                history: &p.history,
                kinds: opts.rules.kinds(),
            });
            let layout = sage_pipeline::report::Layout {
                fold,
                width: if a.out.output.is_none() {
                    super::width::width()
                } else {
                    None
                },
            };
            text.push_str(&scrub(&sage_pipeline::report::explain(r, context, layout)));
        }
    }
    if a.out.output.is_none() && a.out.format == super::TableOrJson::Table && !a.json {
        text = super::width::fit(&text, super::width::width());
    }
    super::print_or_write(a.out.output.as_deref(), &text)?;
    // a turn that could not be scored is an input that failed (as in `sage localize`)
    let turns_failed: usize = out
        .results
        .iter()
        .map(|r| sage_pipeline::results::SummaryRow::from(r).turns_failed)
        .sum();
    if turns_failed > 0 {
        errln!("sage: {turns_failed} turn(s) failed scoring");
    }
    Ok(
        if out.skipped.is_none() && out.problems.is_empty() && turns_failed == 0 {
            EXIT_OK
        } else {
            EXIT_INPUT_FAILED
        },
    )
}
