//! Subcommands. Each lives in its own file and only parses arguments, calls the library and
//! prints. Exit codes: 0 all inputs processed, 1 some inputs failed (the rest was still
//! processed and written), 2 usage or fatal error.

// ------------------------------------------------------------------ the output discipline
//
// Everything the CLI prints goes through these macros (or `print_or_write`, or a
// `TerminalWriter`), and so through `sage_markup::terminal`: text from a trace, a case, a
// judge or a sheet cannot put a control character or a bidirectional override on the user's
// terminal (docs/security.md, "Into terminals"). `tests/it/architecture.rs` refuses a raw
// `println!`, `eprintln!`, `print!` or `eprint!` anywhere else in the CLI.

/// `println!` through the terminal sanitizer.
macro_rules! outln {
    () => { ::std::println!() };
    ($($t:tt)*) => { ::std::println!("{}", $crate::cli::width::fit(&::sage_markup::terminal(&::std::format!($($t)*)), $crate::cli::width::width())) };
}

/// `print!` through the terminal sanitizer.
macro_rules! out {
    ($($t:tt)*) => { ::std::print!("{}", $crate::cli::width::fit(&::sage_markup::terminal(&::std::format!($($t)*)), $crate::cli::width::width())) };
}

/// `eprintln!` through the terminal sanitizer.
macro_rules! errln {
    () => { ::std::eprintln!() };
    ($($t:tt)*) => { ::std::eprintln!("{}", $crate::cli::width::fit(&::sage_markup::terminal(&::std::format!($($t)*)), $crate::cli::width::width())) };
}

/// `eprint!` through the terminal sanitizer.
macro_rules! errout {
    ($($t:tt)*) => { ::std::eprint!("{}", ::sage_markup::terminal(&::std::format!($($t)*))) };
}

/// A note on stderr (not a result, not an error): silent under `-q`.
#[macro_export]
macro_rules! note {
    ($($t:tt)*) => {
        if !$crate::cli::quiet() {
            ::std::eprintln!("{}", $crate::cli::width::fit(&::sage_markup::terminal(&::std::format!($($t)*)), $crate::cli::width::width()));
        }
    };
}

pub mod agree;
mod annotate;
mod cache;
mod case;
mod completions;
mod confirm;
mod examples;
mod explain;
mod inputs;
mod judges;
mod localize;
pub mod reliability;
mod replay;
pub mod screen;
mod shards;
mod study;
pub mod szz;
mod validate;
mod view;
pub mod width;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

mod adapters;
mod normalize;

/// How a subcommand ended; the process exit status is its code. Every subcommand returns
/// `anyhow::Result<ExitStatus>` (an error is `Fatal`), so the three meanings are typed from
/// the subcommand to the process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitStatus {
    /// Every input processed.
    Ok = 0,
    /// Some inputs failed; results for the rest were still produced.
    InputFailed = 1,
    /// Usage error or nothing could be done.
    Fatal = 2,
}

impl ExitStatus {
    pub fn code(self) -> i32 {
        self as i32
    }
}

/// Every input processed.
pub const EXIT_OK: ExitStatus = ExitStatus::Ok;
/// Some inputs failed; results for the rest were still produced.
pub const EXIT_INPUT_FAILED: ExitStatus = ExitStatus::InputFailed;
/// Usage error or nothing could be done.
pub const EXIT_FATAL: ExitStatus = ExitStatus::Fatal;

/// `ExitStatus::InputFailed` when `failed`, else `ExitStatus::Ok`.
pub fn failed_if(failed: bool) -> ExitStatus {
    if failed {
        ExitStatus::InputFailed
    } else {
        ExitStatus::Ok
    }
}

/// `sage --version`: the package version and the commit it was built from.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("SAGE_COMMIT"),
    ")"
);

#[derive(Parser, Debug)]
#[command(
    name = "sage",
    version = VERSION,
    about = "Audit recorded runs of LLM coding agents: where did the repair first go wrong?",
    after_help = "Exit status: 0 every input processed; 1 some inputs failed (the rest were \
                  processed and written); 2 usage or fatal error."
)]
pub struct Cli {
    /// Only results and errors: no progress bars, notes or summaries on stderr.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Per-case detail and warnings on stderr (e.g. one line per case and variant of
    /// `sage szz eval`).
    #[arg(short, long, global = true)]
    pub verbose: bool,
    #[command(subcommand)]
    pub command: Command,
}

/// How much a run says on stderr besides results and errors: -1 quiet, 0 default, 1 verbose.
static VERBOSITY: std::sync::atomic::AtomicI8 = std::sync::atomic::AtomicI8::new(0);

/// `-q`: only results and errors.
pub fn quiet() -> bool {
    VERBOSITY.load(std::sync::atomic::Ordering::Relaxed) < 0
}

/// `-v`: per-case detail and warnings too.
pub fn verbose() -> bool {
    VERBOSITY.load(std::sync::atomic::Ordering::Relaxed) > 0
}

#[derive(Subcommand, Debug)]
// parsed once per process: the size of the largest variant does not matter
#[allow(clippy::large_enum_variant)]
pub enum Command {
    /// Localize the origin of every confirmed silent failure in a folder of cases.
    Localize(localize::Args),
    /// Walk through one case turn by turn: scores, quotes, writes, origin.
    Explain(explain::Args),
    /// Build a case from a trace (`init`), check one (`check`), look inside one (`show`).
    Case(case::Args),
    /// Blinded packets for human annotators, and their labels back.
    Annotate(annotate::Args),
    /// Write a self-contained HTML site of a localize run (index + one page per case).
    View(view::Args),
    /// Screen agent patches L0-L3 for silent-failure candidates (paper §3.2.4).
    Screen(screen::ScreenArgs),
    /// Manual confirmation of candidates: blinded packets out, sheets in, Table 3.
    Confirm(confirm::Args),
    /// The whole funnel on a folder of runs: screen, propose, export; with --sheets: import,
    /// Table 3, localize, Tables 6-7.
    Study(study::Args),
    /// Agreement coefficient (percent, Cohen, Fleiss, Gwet, Krippendorff) for a CSV of ratings.
    Agree(agree::AgreeArgs),
    /// Find the commit that introduced a bug or vulnerability from its fixing commit (SZZ).
    Szz(szz::SzzArgs),
    /// Inspect, trim or merge judgment ledgers (`stats`, `prune`, `merge`).
    Cache(cache::CacheArgs),
    /// List the trace formats sage reads and the versions covered.
    Adapters(adapters::Args),
    /// Convert a native trace to the canonical trace (JSON on stdout, counts on stderr).
    Normalize(normalize::Args),
    /// Replay one trace: each file's reconstructed final state, checked against the result
    /// the trace carries (matches / differs / unverifiable).
    Replay(replay::Args),
    /// Merge the result sets of `sage localize --shard i/n` runs.
    MergeShards(shards::Args),
    /// Compare a judge's per-step output with human labels (Who&When: the decisive error
    /// step and agent): step, agent and per-step label accuracy on a seeded dev/test split.
    Validate(validate::Args),
    /// Reliability report (Tables 6-7, Figures 5-6) from localize result sets and annotations.
    Reliability(reliability::ReliabilityArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(completions::CompletionsArgs),
    /// Print the man page (roff): `sage man | man -l -`.
    Man(completions::ManArgs),
}

pub fn run() -> ExitStatus {
    quiet_on_broken_pipe();
    // Every configured secret is blanked out of what sage writes or prints (see
    // docs/security.md); judges add their keys and base-URL credentials when built.
    sage_llm::secrets::register_env_secrets(std::env::vars_os());
    let limits = input_limits();
    let cli = match Cli::from_arg_matches(&examples::with_examples(Cli::command()).get_matches()) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    VERBOSITY.store(
        if cli.quiet { -1 } else { i8::from(cli.verbose) },
        std::sync::atomic::Ordering::Relaxed,
    );
    let config = data_overrides(limits);
    let missing = inputs::missing(&inputs::named_inputs(&cli.command));
    if !missing.is_empty() {
        for p in missing {
            errln!("sage: error: {}: no such file or directory", p.display());
        }
        return ExitStatus::Fatal;
    }
    let result = match cli.command {
        Command::Localize(a) => localize::run(a, &config),
        Command::Explain(a) => explain::run(a, &config),
        Command::Case(a) => case::run(a, &config),
        Command::Screen(a) => screen::run(a, &config),
        Command::Annotate(a) => annotate::run(a, &config),
        Command::View(a) => view::run(a, &config),
        Command::Confirm(a) => confirm::run(a, &config),
        Command::Study(a) => study::run(a, &config),
        Command::Agree(a) => agree::run(a),
        Command::Szz(a) => szz::run(a),
        Command::Cache(a) => cache::run(a),
        Command::Adapters(a) => adapters::run(a, &config),
        Command::Normalize(a) => normalize::run(a, &config),
        Command::Replay(a) => replay::run(a, &config),
        Command::MergeShards(a) => shards::run(a),
        Command::Validate(a) => validate::run(a, &config),
        Command::Reliability(a) => reliability::run(a),
        Command::Completions(a) => completions::completions(a),
        Command::Man(a) => completions::man(a),
    };
    match result {
        Ok(status) => status,
        Err(e) => {
            if is_broken_pipe(&e) {
                return ExitStatus::Ok;
            }
            errln!(
                "sage: error: {}",
                sage_llm::secrets::scrub(&format!("{e:#}"))
            );
            ExitStatus::Fatal
        }
    }
}

/// `sage ... | head`: the reader closed the pipe, which is its choice, not an error of
/// sage's. Rust ignores SIGPIPE, so `println!` panics on the closed stdout; that panic (and
/// only it) ends the process quietly with status 0 instead of a panic message.
fn quiet_on_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if msg.contains("failed printing to stdout") && msg.contains("Broken pipe") {
            std::process::exit(ExitStatus::Ok.code());
        }
        default(info);
    }));
}

/// An error that is a closed stdout (a subcommand that writes with `write!` and `?`).
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// The input limits a user may set through the environment (docs/security.md): the cap on
/// one judge reply (`SAGE_MAX_REPLY_MB`, mebibytes), the size
/// limit of one input file (`SAGE_MAX_INPUT_MB`, mebibytes) and the folders outside a case
/// that its files may point into (`SAGE_CASE_ROOTS`, separated like `PATH`). The last two are
/// returned, for the run's [`RunConfig`].
fn input_limits() -> sage_trace::safe::Limits {
    // The reply cap travels in the environment value (`LlmSettings::max_reply_bytes`, read
    // from `environment()`); a value that cannot be used is named here, once.
    if let Some(v) = std::env::var_os("SAGE_MAX_REPLY_MB") {
        let env = sage_llm::Env::from_vars(
            v.into_string()
                .ok()
                .map(|s| ("SAGE_MAX_REPLY_MB".to_string(), s)),
        );
        if sage_llm::max_reply_bytes(&env).is_err() || env.var("SAGE_MAX_REPLY_MB").is_none() {
            errln!("sage: SAGE_MAX_REPLY_MB ignored: not a positive number");
        }
    }
    let mut limits = sage_trace::safe::Limits::default();
    if let Some(v) = std::env::var_os("SAGE_MAX_INPUT_MB") {
        match v
            .to_str()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .filter(|n| *n > 0)
        {
            Some(n) => limits.max_input_bytes = n.saturating_mul(1 << 20),
            None => errln!("sage: SAGE_MAX_INPUT_MB ignored: not a positive number"),
        }
    }
    if let Some(v) = std::env::var_os("SAGE_CASE_ROOTS") {
        limits = limits.with_roots(std::env::split_paths(&v));
    }
    limits
}

/// The data files a user may replace through the environment (docs/design.md): the turn
/// classifier's lists (`SAGE_TURN_KINDS=FILE`), the adapters' detection rules
/// (`SAGE_DETECT_RULES=FILE`) and the workspace roots of the path rule
/// (`SAGE_WORKSPACE_ROOTS=FILE`). A file that cannot be used is named on stderr and the
/// embedded data stays in use.
///
/// They are returned, with the input `limits`, in the run's [`RunConfig`], passed by
/// reference to the commands that read traces.
fn data_overrides(limits: sage_trace::safe::Limits) -> RunConfig {
    let mut detect = None;
    override_from("SAGE_DETECT_RULES", |t, origin| {
        let rules =
            sage_adapters::rules::DetectRules::parse(t, origin).map_err(|e| e.to_string())?;
        let known: Vec<&str> = sage_adapters::registry().iter().map(|a| a.name()).collect();
        let unknown = rules.unknown_adapters(&known);
        if !unknown.is_empty() {
            return Err(format!(
                "{origin}: rules for unknown adapter(s) {} (see `sage adapters`)",
                unknown.join(", ")
            ));
        }
        detect = Some(rules);
        Ok(true)
    });
    let mut kinds = None;
    override_from("SAGE_TURN_KINDS", |t, origin| {
        sage_adapters::kinds::Classifier::parse(t, origin)
            .map(|c| kinds = Some(c))
            .map(|()| true)
            .map_err(|e| e.to_string())
    });
    let mut workspace_roots = sage_history::WorkspaceRoots::default();
    if let Some(p) = std::env::var_os("SAGE_WORKSPACE_ROOTS") {
        let path = std::path::PathBuf::from(p);
        match std::fs::read_to_string(&path) {
            Ok(t) => workspace_roots = sage_history::WorkspaceRoots::parse(&t),
            Err(e) => errln!(
                "sage: SAGE_WORKSPACE_ROOTS ignored: {}: {e}",
                path.display()
            ),
        }
    }
    RunConfig {
        rules: sage_pipeline::Rules {
            adapters: sage_adapters::Rules {
                kinds: kinds.map_or_else(
                    || sage_adapters::kinds::Classifier::embedded_arc().clone(),
                    std::sync::Arc::new,
                ),
                detect: detect.map_or_else(
                    || sage_adapters::rules::DetectRules::embedded_arc().clone(),
                    std::sync::Arc::new,
                ),
                limits,
            },
            workspace_roots,
        },
    }
}

/// The run's configuration, built once from the environment ([`input_limits`],
/// [`data_overrides`]) and passed by reference to the commands (as ripgrep's `HiArgs`): the
/// libraries hold no process-global configuration.
pub struct RunConfig {
    /// How cases and traces are read: the turn classifier (`SAGE_TURN_KINDS=FILE`), the
    /// detection rules (`SAGE_DETECT_RULES=FILE`), the input limits (`SAGE_MAX_INPUT_MB`,
    /// `SAGE_CASE_ROOTS`) and the workspace roots (`SAGE_WORKSPACE_ROOTS=FILE`), each the
    /// embedded or default one unless set.
    pub rules: sage_pipeline::Rules,
}

/// Read the file named by the environment variable `var` and hand it to `install` (its text
/// and the file's name for messages); a file that cannot be read or used is named on stderr
/// and the embedded data stays in use.
fn override_from(var: &str, install: impl FnOnce(&str, &str) -> Result<bool, String>) {
    let Some(p) = std::env::var_os(var) else {
        return;
    };
    let path = std::path::PathBuf::from(p);
    let origin = path.display().to_string();
    match std::fs::read_to_string(&path)
        .map_err(|e| format!("{origin}: {e}"))
        .and_then(|t| install(&t, &origin))
    {
        Ok(_) => {}
        Err(e) => errln!("sage: {var} ignored: {e}"),
    }
}

/// Judge flags of a scoring run (see docs/judges.md).
#[derive(clap::Args, Debug, Clone)]
pub struct JudgeFlags {
    /// Repeated runs per judge (run indices 0..N), for run-to-run reliability.
    #[arg(long, default_value = "1", value_name = "N", value_parser = clap::builder::TypedValueParser::map(clap::value_parser!(u32).range(1..), non_zero))]
    pub runs: std::num::NonZeroU32,
    /// Stop cleanly when LLM calls have cost this much (USD); re-run to resume.
    #[arg(long, value_name = "USD")]
    pub budget: Option<f64>,
    /// Judgment ledger directory (every LLM answer, reused on re-runs).
    #[arg(long, value_name = "DIR", env = "SAGE_LEDGER", default_value = sage_judge::llm::ledger::DEFAULT_LEDGER_DIR)]
    pub ledger: std::path::PathBuf,
    /// Keep no ledger (nothing written, nothing reused).
    #[arg(long)]
    pub no_ledger: bool,
    /// Answer only from the ledger (and --batch-import); a missing judgment stops the run.
    #[arg(long)]
    pub offline: bool,
    /// The SAGE rubric for LLM judges, instead of the embedded crates/sage-judge/rubrics/sage-rubric.toml.
    #[arg(long, value_name = "FILE")]
    pub rubric: Option<std::path::PathBuf>,
    /// Config file with named judges and prices (default: ./sage.toml when present).
    #[arg(long, value_name = "FILE", env = "SAGE_CONFIG")]
    pub config: Option<std::path::PathBuf>,
    /// Write the LLM calls still needed as a provider batch file (OpenAI Batch API or
    /// Anthropic Message Batches JSONL) instead of calling the API.
    #[arg(long, value_name = "FILE")]
    pub batch_export: Option<std::path::PathBuf>,
    /// Use a provider batch result file as answers (then the ledger keeps them).
    #[arg(long, value_name = "FILE")]
    pub batch_import: Option<std::path::PathBuf>,
    /// Score through the provider's batch API (one LLM judge): `submit` sends every call
    /// still needed as batches, recorded in the ledger folder; `poll` imports the answers
    /// of the batches that ended into the ledger. Then a plain run replays them.
    #[arg(long, value_enum, value_name = "MODE", conflicts_with_all = ["offline", "batch_export", "batch_import", "no_ledger"])]
    pub batch: Option<judges::BatchMode>,
    /// Process only shard i of n of the cases (merge with `sage merge-shards`).
    #[arg(long, value_name = "i/n", value_parser = sage_judge::spec::Shard::parse)]
    pub shard: Option<sage_judge::spec::Shard>,
    /// Attempts per turn (an invalid answer or unverified quote is retried with the reason).
    #[arg(long, default_value = "3", value_name = "N", value_parser = clap::builder::TypedValueParser::map(clap::value_parser!(u32).range(1..), non_zero))]
    pub max_attempts: std::num::NonZeroU32,
    /// Per-request timeout for LLM calls, in seconds.
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<u64>,
    /// Whole-request deadline for LLM calls, in seconds: every try and retry of one call
    /// (default 300, or --timeout if longer).
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub deadline: Option<u64>,
    /// No progress display on stderr.
    #[arg(long)]
    pub no_progress: bool,
}

/// Judges built for a run: the localize options, and the LLM session when any judge is an
/// LLM (for forecasts, batch export and the cost summary).
pub struct BuiltRun {
    pub opts: sage_pipeline::localize::Options,
    pub session: Option<sage_judge::spec::JudgeSession>,
    pub llm: Vec<sage_judge::spec::BuiltJudge>,
}

/// Build the judges and options of a run from the common flags (lexicon unless told).
/// `injection_rules` is `--injection-rules` where the command has it (else the embedded
/// rules). `concurrency` is `--concurrency` where the command has it: it wins; else the smallest a
/// named judge asks for; else [`sage_judge::concurrent::DEFAULT_CONCURRENCY`], the one default.
pub fn build_run(
    judges: &[String],
    lexicon: Option<&std::path::Path>,
    flags: &JudgeFlags,
    concurrency: Option<std::num::NonZeroUsize>,
    injection_rules: Option<&std::path::Path>,
    run_config: &RunConfig,
) -> anyhow::Result<BuiltRun> {
    use sage_judge::lexicon::{Lexicon, LexiconJudge};
    use sage_judge::spec::{JudgeOptions, JudgeSession};
    use std::sync::Arc;
    let lex = match lexicon {
        Some(p) => Arc::new(Lexicon::load(p)?),
        None => Lexicon::embedded_shared(),
    };
    let injection = Arc::new(match injection_rules {
        Some(p) => sage_judge::injection::Rules::load(p)?,
        None => sage_judge::injection::Rules::embedded(),
    });
    let mut opts = sage_pipeline::localize::Options {
        injection: injection.clone(),
        lexicon: lex.clone(),
        judges: Vec::new(),
        runs: flags.runs,
        max_attempts: flags.max_attempts,
        // set below, once the judges have said what they prefer
        concurrency: sage_judge::concurrent::DEFAULT_CONCURRENCY,
        progress: None,
        stats: None,
        shard: flags.shard,
        follow_links: false,
        rules: run_config.rules.clone(),
    };
    let specs: Vec<String> = if judges.is_empty() {
        vec!["lexicon".into()]
    } else {
        judges.to_vec()
    };
    let mut session = None;
    let mut llm = Vec::new();
    let mut preferred = None;
    for spec in specs {
        if spec == "lexicon" {
            opts.judges.push(Arc::new(LexiconJudge::new(lex.clone())));
            continue;
        }
        if session.is_none() {
            let config = sage_judge::config::Config::discover(flags.config.as_deref())?;
            let jo = JudgeOptions {
                runs: flags.runs,
                max_attempts: flags.max_attempts,
                budget_usd: flags.budget,
                ledger_dir: Some(if flags.ledger.as_os_str().is_empty() {
                    sage_judge::llm::ledger::DEFAULT_LEDGER_DIR.into()
                } else {
                    flags.ledger.clone()
                }),
                no_ledger: flags.no_ledger,
                offline: flags.offline,
                rubric: flags.rubric.clone(),
                batch_import: flags.batch_import.clone(),
                timeout: flags.timeout.map(std::time::Duration::from_secs),
                deadline: flags.deadline.map(std::time::Duration::from_secs),
                shard: flags.shard,
                env: environment(),
                injection: injection.clone(),
                ..Default::default()
            };
            session = Some(JudgeSession::new(&config, jo)?);
        }
        let s = session.as_ref().expect("session set above");
        let b = s.build(&spec)?;
        if let Some(c) = s.preferred_concurrency(&spec) {
            // the smallest any judge asks for: a one-slot server is not flooded by another's
            preferred = Some(preferred.map_or(c, |p: std::num::NonZeroUsize| p.min(c)));
        }
        opts.judges.push(b.judge.clone());
        if b.llm.is_some() {
            llm.push(b);
        }
    }
    opts.concurrency = concurrency
        .or(preferred)
        .unwrap_or(sage_judge::concurrent::DEFAULT_CONCURRENCY);
    Ok(BuiltRun { opts, session, llm })
}

/// The process environment, read once here for the libraries (which never read it): the
/// variables whose names and values are text.
pub fn environment() -> sage_llm::Env {
    sage_llm::Env::from_vars(
        std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))),
    )
}

/// `--concurrency N`: at least 1 (0 makes no sense and is refused).
pub fn concurrency(s: &str) -> Result<std::num::NonZeroUsize, String> {
    at_least_one(s).map(|n| std::num::NonZeroUsize::new(n).expect("at least one"))
}

/// A count clap has already refused at 0 (`value_parser!(u32).range(1..)`), as a type that
/// cannot be zero, so nothing downstream clamps it.
pub fn non_zero(n: u32) -> std::num::NonZeroU32 {
    std::num::NonZeroU32::new(n).expect("clap's range(1..) refuses 0")
}

/// A count that must be at least 1.
pub fn at_least_one(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// A tokio runtime for the async pipeline.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

/// A tokio runtime on the calling thread alone, for work that needs no other thread.
pub fn current_thread_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

/// The text of a file, or of standard input when the path is `-`. A UTF-8 byte-order mark
/// (spreadsheet exports write one) is dropped so the first column's name matches.
pub fn read_input(path: &std::path::Path) -> anyhow::Result<String> {
    use anyhow::Context as _;
    use std::io::Read as _;
    let mut text = String::new();
    if path.as_os_str() == "-" {
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading standard input")?;
    } else {
        text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    }
    Ok(match text.strip_prefix('\u{feff}') {
        Some(rest) => rest.to_string(),
        None => text,
    })
}

/// A command's result: printed, or with `-o FILE` written whole to FILE (never half-written).
pub fn print_or_write(output: Option<&std::path::Path>, text: &str) -> anyhow::Result<()> {
    use anyhow::Context as _;
    use std::io::Write as _;
    match output {
        Some(p) => sage_pipeline::sink::write_atomic(p, sage_markup::terminal(text).as_bytes())
            .with_context(|| format!("writing {}", p.display())),
        None => Ok(std::io::stdout().write_all(sage_markup::terminal(text).as_bytes())?),
    }
}

/// `--format table|json` of a command whose table is for people.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TableOrJson {
    #[default]
    Table,
    Json,
}

/// `--format table|json` and `-o FILE`, shared by the commands that print a result.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct OutputArgs {
    /// What to print: a table for people, or JSON for programs.
    #[arg(long, value_enum, default_value_t = TableOrJson::Table)]
    pub format: TableOrJson,
    /// Write what would be printed to FILE instead (replaced whole, never half-written).
    #[arg(long = "output", short = 'o', value_name = "FILE")]
    pub output: Option<std::path::PathBuf>,
}

impl OutputArgs {
    /// Print (or write to `-o`) the table or the JSON, whichever `--format` asks for.
    pub fn emit(
        &self,
        table: impl FnOnce() -> String,
        json: impl FnOnce() -> serde_json::Value,
    ) -> anyhow::Result<()> {
        let mut text = match self.format {
            // for people: prose lines fit the terminal (tables are laid out to it)
            TableOrJson::Table if self.output.is_none() => width::fit(&table(), width::width()),
            TableOrJson::Table => table(),
            TableOrJson::Json => serde_json::to_string_pretty(&json())?,
        };
        if !text.ends_with('\n') {
            text.push('\n');
        }
        print_or_write(self.output.as_deref(), &text)
    }
}

/// A writer that passes what it is given through [`sage_markup::terminal`] (for output
/// streamed to stdout rather than printed whole). A character split across two writes is
/// held until its last byte arrives.
pub struct TerminalWriter<W: std::io::Write> {
    inner: W,
    pending: Vec<u8>,
}

impl<W: std::io::Write> TerminalWriter<W> {
    pub fn new(inner: W) -> TerminalWriter<W> {
        TerminalWriter {
            inner,
            pending: Vec::new(),
        }
    }
}

impl<W: std::io::Write> std::io::Write for TerminalWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(buf);
        let valid = match std::str::from_utf8(&self.pending) {
            Ok(_) => self.pending.len(),
            // an incomplete character at the end waits; invalid bytes pass (lossy) below
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => self.pending.len(),
        };
        let rest = self.pending.split_off(valid);
        let text = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending = rest;
        self.inner
            .write_all(sage_markup::terminal(&text).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if !self.pending.is_empty() {
            let text = String::from_utf8_lossy(&self.pending).into_owned();
            self.pending.clear();
            self.inner
                .write_all(sage_markup::terminal(&text).as_bytes())?;
        }
        self.inner.flush()
    }
}
