//! `sage replay TRACE... [--baseline-dir DIR] [--result FILE]... [--format json|table]
//! [-o FILE]`: the reconstructed final state of every artefact of one trace and, where the
//! trace carries its own result (or `--result` gives one), a verdict per file. The work is
//! `sage_pipeline::trace_replay`; this file parses flags, prints and sets the exit status.

use anyhow::Context;
use clap::{Args as ClapArgs, ValueEnum};
use sage_adapters::SourceFile;
use sage_pipeline::execute::Execution;
use sage_pipeline::trace_replay::{self, ReplayOptions};
use sage_sandbox::{Limits, Rules, Sandbox, SandboxConfig};
use std::path::PathBuf;
use std::time::Duration;

#[derive(ClapArgs, Debug)]
#[command(
    after_help = "Exit status: 0 every file matches or is unverifiable (with the reason); 1 some \
                  file differs, or the trace or a result cannot be read; 2 usage error."
)]
pub struct Args {
    /// The trace file, then any extra files of the same run (e.g. aider's input history).
    #[arg(required = true)]
    pub trace: Vec<PathBuf>,
    /// A folder holding the files as they were before the run (paths relative to it); else
    /// the baselines are what the trace itself shows.
    #[arg(long)]
    pub baseline_dir: Option<PathBuf>,
    /// A result kept beside the trace: a final diff (`git diff`, a SWE-bench `.pred` with
    /// `model_patch`), a series of commits (`git show --patch` / `git log -p` output) or a
    /// directory snapshot (JSON: path → sha256). Repeatable.
    #[arg(long = "result", value_name = "FILE")]
    pub results: Vec<PathBuf>,
    /// Force the format instead of detecting it from content (see `sage adapters`).
    #[arg(long)]
    pub framework: Option<String>,
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Write the report here instead of stdout.
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// Read run N (from 1) of a file that holds several: the Nth record of an OpenHands
    /// `output.jsonl`, the Nth sample of an Inspect log (default: the first, the others
    /// reported as dropped records).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub run: Option<u64>,
    /// Accept a trace that yields no agent-authored turn.
    #[arg(long)]
    pub allow_empty: bool,
    /// The placeholders of redacted traces (TOML, the schema of
    /// crates/sage-pipeline/data/redactions.toml) instead of the embedded ones: a result equal
    /// to the replay up to them matches.
    #[arg(long, value_name = "FILE")]
    pub redactions: Option<PathBuf>,
    #[command(flatten)]
    pub exec: ExecArgs,
}

/// Replay by execution: the flags of `sage replay` and `sage case check`.
#[derive(ClapArgs, Debug)]
pub struct ExecArgs {
    /// Run the shell commands sage does not read statically again, in a sandbox (Linux
    /// namespaces: no network, nothing of the host writable, limits; docs/security.md), and
    /// keep the files they write as writes of their turn. The default where a sandbox can be
    /// made; with --execute, no sandbox is an error (exit 2).
    #[arg(long, conflicts_with = "no_execute")]
    pub execute: bool,
    /// Never run a command of the trace.
    #[arg(long)]
    pub no_execute: bool,
    /// The command rules (TOML, the schema of crates/sage-sandbox/data/commands.toml) instead
    /// of the embedded ones: shell tools, commands never executed, volatile output parts.
    #[arg(long, value_name = "FILE")]
    pub exec_rules: Option<PathBuf>,
    /// Kill an executed command after this many seconds (at least 1).
    #[arg(long, value_name = "SECONDS", default_value = "20", value_parser = clap::builder::TypedValueParser::map(clap::value_parser!(u64).range(1..), |n| std::num::NonZeroU64::new(n).expect("range(1..)")))]
    pub exec_timeout: std::num::NonZeroU64,
}

/// Whether commands are executed, and with what: `None` is a usage error (already printed).
pub fn execution(args: &ExecArgs) -> anyhow::Result<Option<Execution>> {
    if args.no_execute {
        return Ok(Some(Execution::Off("--no-execute".into())));
    }
    let rules = match &args.exec_rules {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("cannot read {}", p.display()))?;
            Rules::parse(&text).with_context(|| p.display().to_string())?
        }
        None => Rules::embedded(),
    };
    let config = SandboxConfig {
        scratch: std::env::temp_dir(),
        limits: Limits {
            wall: Duration::from_secs(args.exec_timeout.get()),
            ..Limits::default()
        },
    };
    match Sandbox::probe(config) {
        Ok(sandbox) => Ok(Some(Execution::On { sandbox, rules })),
        Err(e) if args.execute => {
            errln!("error: --execute: {e}");
            Ok(None)
        }
        Err(e) => {
            errln!("note: commands are not executed: {e} (--no-execute silences this)");
            Ok(Some(Execution::Off(e.to_string())))
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Format {
    /// One line per file, then the first differing hunks.
    Table,
    /// `sage.replay/1` JSON (docs/replay.md).
    Json,
}

pub fn run(args: Args, rc: &super::RunConfig) -> anyhow::Result<super::ExitStatus> {
    let files: Vec<SourceFile> = args
        .trace
        .iter()
        .map(|p| SourceFile::new(p.display().to_string(), p))
        .collect();
    let Some(execution) = execution(&args.exec)? else {
        return Ok(super::EXIT_FATAL);
    };
    let redactions = match &args.redactions {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("cannot read {}", p.display()))?;
            sage_pipeline::redactions::Redactions::parse(&text)
                .map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?
        }
        None => Default::default(),
    };
    let opts = ReplayOptions {
        framework: args.framework.clone(),
        baseline_dir: args.baseline_dir.clone(),
        results: args.results.clone(),
        allow_empty: args.allow_empty,
        run: args.run.map(|n| n as usize),
        execution,
        rules: rc.rules.clone(),
        redactions,
        ..ReplayOptions::default()
    };
    let r = match trace_replay::replay(&files, &opts) {
        Ok(r) => r,
        Err(e) => {
            errln!("sage: error: {}", sage_llm::secrets::scrub(&e.to_string()));
            return Ok(super::EXIT_INPUT_FAILED);
        }
    };
    let text = match args.format {
        Format::Json => {
            serde_json::to_string_pretty(&trace_replay::schema::TraceReplay::from(r.clone()))?
                + "\n"
        }
        Format::Table => trace_replay::render_table(&r),
    };
    let text = sage_llm::secrets::scrub(&text).into_owned();
    match &args.output {
        Some(p) => {
            std::fs::write(p, text).with_context(|| format!("cannot write {}", p.display()))?
        }
        None => out!("{text}"),
    }
    Ok(if r.counts.differs > 0 {
        super::EXIT_INPUT_FAILED
    } else {
        super::EXIT_OK
    })
}
