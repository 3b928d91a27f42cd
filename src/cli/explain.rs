//! `sage explain CASE`: one case, turn by turn.

use super::{build_options, runtime, EXIT_INPUT_FAILED, EXIT_OK};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The case folder (holding case.json).
    pub case: PathBuf,
    /// Judge: `lexicon` (offline, default).
    #[arg(long = "judge", value_name = "SPEC")]
    pub judges: Vec<String>,
    /// Use this lexicon file instead of the embedded one.
    #[arg(long, value_name = "FILE")]
    pub lexicon: Option<PathBuf>,
    /// Print the case's results as JSON instead.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: Args) -> anyhow::Result<i32> {
    let opts = build_options(&a.judges, a.lexicon.as_deref())?;
    let out = runtime()?.block_on(sage_pipeline::localize::localize_case(&a.case, &opts));
    if let Some(s) = &out.skipped {
        eprintln!("sage: skipped {} ({}): {}", s.case, s.stage, s.message);
    }
    for p in &out.problems {
        eprintln!("sage: problem: {}", p.message);
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&out.results)?);
    } else {
        let prepared = sage_pipeline::localize::prepare(&a.case).ok().map(|p| p.0);
        for r in &out.results {
            print!(
                "{}",
                sage_pipeline::report::explain(r, prepared.as_ref().map(|p| &p.trace))
            );
        }
    }
    Ok(if out.skipped.is_none() && out.problems.is_empty() {
        EXIT_OK
    } else {
        EXIT_INPUT_FAILED
    })
}
