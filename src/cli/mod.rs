//! Subcommands. Each lives in its own file and only parses arguments, calls the library and
//! prints. Exit codes: 0 all inputs processed, 1 some inputs failed (the rest was still
//! processed and written), 2 usage or fatal error.

pub mod agree;
mod annotate;
mod cache;
mod explain;
mod localize;
pub mod screen;
pub mod szz;

use clap::{Parser, Subcommand};

mod adapters;
mod normalize;

/// Every input processed.
pub const EXIT_OK: i32 = 0;
/// Some inputs failed; results for the rest were still produced.
pub const EXIT_INPUT_FAILED: i32 = 1;
/// Usage error or nothing could be done.
pub const EXIT_FATAL: i32 = 2;

#[derive(Parser, Debug)]
#[command(
    name = "sage",
    version,
    about = "Audit recorded runs of LLM coding agents: where did the repair first go wrong?",
    after_help = "Exit status: 0 every input processed; 1 some inputs failed (the rest were \
                  processed and written); 2 usage or fatal error."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
// parsed once per process: the size of the largest variant does not matter
#[allow(clippy::large_enum_variant)]
pub enum Command {
    /// Localize the origin of every confirmed silent failure in a folder of cases.
    Localize(localize::Args),
    /// Walk through one case turn by turn: scores, quotes, writes, origin.
    Explain(explain::Args),
    /// Blinded packets for human annotators, and their labels back.
    Annotate(annotate::Args),
    /// Screen agent patches L0-L3 for silent-failure candidates (paper §3.2.4).
    Screen(screen::ScreenArgs),
    /// Agreement coefficient (percent, Cohen, Fleiss, Gwet, Krippendorff) for a CSV of ratings.
    Agree(agree::AgreeArgs),
    /// Find the commit that introduced a bug or vulnerability from its fixing commit (SZZ).
    Szz(szz::SzzArgs),
    /// Inspect or trim the judgment ledger (`stats`, `prune`).
    Cache(cache::CacheArgs),
    /// List the trace formats sage reads and the versions covered.
    Adapters(adapters::Args),
    /// Convert a native trace to the canonical trace (JSON on stdout, counts on stderr).
    Normalize(normalize::Args),
}

pub fn run() -> i32 {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Localize(a) => localize::run(a),
        Command::Explain(a) => explain::run(a),
        Command::Screen(a) => screen::run(a),
        Command::Annotate(a) => annotate::run(a),
        Command::Agree(a) => Ok(agree::run(a)),
        Command::Szz(a) => Ok(szz::run(a)),
        Command::Cache(a) => cache::run(a),
        Command::Adapters(a) => Ok(adapters::run(a)),
        Command::Normalize(a) => Ok(normalize::run(a)),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("sage: error: {e:#}");
            EXIT_FATAL
        }
    }
}

/// Build the judges and options of a run from the common flags.
pub fn build_options(
    judges: &[String],
    lexicon: Option<&std::path::Path>,
) -> anyhow::Result<sage::localize::Options> {
    use sage::judge::lexicon::{Lexicon, LexiconJudge};
    use std::sync::Arc;
    let lex = match lexicon {
        Some(p) => Lexicon::load(p)?,
        None => Lexicon::embedded(),
    };
    let mut opts = sage::localize::Options {
        lexicon: Arc::new(lex.clone()),
        judges: Vec::new(),
        ..Default::default()
    };
    let specs: Vec<String> = if judges.is_empty() {
        vec!["lexicon".into()]
    } else {
        judges.to_vec()
    };
    for spec in specs {
        match spec.as_str() {
            "lexicon" => opts.judges.push(Arc::new(LexiconJudge::new(lex.clone()))),
            other => anyhow::bail!(
                "unknown judge {other:?}: this build knows `lexicon` (the offline default)"
            ),
        }
    }
    Ok(opts)
}

/// A tokio runtime for the async pipeline.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}
