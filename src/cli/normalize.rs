//! `sage normalize TRACE... [--framework NAME] [--adapter FILE] [--format json|summary]`:
//! a native trace → the canonical trace (JSON on stdout), with a counts summary on stderr.

use anyhow::Context;
use clap::{Args as ClapArgs, ValueEnum};
use sage_adapters::{self, mapping::Mapping, SourceFile};
use sage_trace::{CanonicalTrace, RawStore};
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// The trace file, then any extra files of the same run (e.g. aider's input history).
    #[arg(required = true)]
    pub trace: Vec<PathBuf>,
    /// Force the format instead of detecting it from content (see `sage adapters`).
    #[arg(long)]
    pub framework: Option<String>,
    /// A mapping file (TOML) replacing the embedded one of the adapter it names, or
    /// describing a new format (see docs/adapters.md).
    #[arg(long)]
    pub adapter: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = Format::Json)]
    pub format: Format,
    /// Write the trace (or the summary) to FILE instead of stdout (replaced whole).
    #[arg(long = "output", short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Read run N (from 1) of a file that holds several: the Nth record of an OpenHands
    /// `output.jsonl`, the Nth sample of an Inspect log (default: the first, the others
    /// reported as dropped records).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub run: Option<u64>,
    /// Accept a trace that yields no agent-authored turn (by default an error naming what
    /// was found instead).
    #[arg(long)]
    pub allow_empty: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Format {
    /// The canonical trace as pretty JSON.
    Json,
    /// One line per turn: index, actor, kind, items.
    Summary,
}

pub fn run(args: Args, rc: &super::RunConfig) -> anyhow::Result<super::ExitStatus> {
    let mapping = match &args.adapter {
        None => None,
        Some(p) => match load_mapping(p) {
            Ok(m) => Some(m),
            Err(e) => {
                errln!("sage: error: {e:#}");
                return Ok(super::ExitStatus::Fatal);
            }
        },
    };
    let files: Vec<SourceFile> = args
        .trace
        .iter()
        .map(|p| SourceFile::new(p.display().to_string(), p))
        .collect();
    let opts = sage_adapters::NormalizeOptions {
        framework: args.framework.clone(),
        mapping,
        allow_empty: args.allow_empty,
        run: args.run.map(|n| n as usize),
        framework_from: None,
        rules: rc.rules.adapters.clone(),
    };
    let trace = match sage_adapters::normalize(&files, &opts) {
        Ok(t) => t,
        Err(e) => {
            errln!("sage: error: {}", sage_llm::secrets::scrub(&e.to_string()));
            return Ok(super::ExitStatus::InputFailed);
        }
    };
    let text = match args.format {
        Format::Json => match serde_json::to_string_pretty(&trace) {
            Ok(s) => sage_llm::secrets::scrubbed(&s) + "\n",
            Err(e) => {
                errln!("sage: error: {e}");
                return Ok(super::ExitStatus::Fatal);
            }
        },
        Format::Summary => sage_llm::secrets::scrubbed(turn_lines(&trace)),
    };
    super::print_or_write(args.output.as_deref(), &text)?;
    errout!("{}", counts_summary(&trace));
    // Every item must point at raw text that holds it (quotes are verified that way).
    match RawStore::load(
        &trace,
        std::path::Path::new(""),
        rc.rules.limits().max_input_bytes,
    ) {
        Ok(store) => {
            let bad = sage_adapters::verify_raw_refs(&trace, &store);
            let items: usize = trace.turns.iter().map(|t| t.text_items().len()).sum();
            if bad.is_empty() {
                errln!("  raw pointers: all {items} items resolve to their raw text");
            } else {
                errln!(
                    "  raw pointers: {} of {items} items do not verify:",
                    bad.len()
                );
                for b in bad.iter().take(10) {
                    errln!("    {}", sage_llm::secrets::scrub(b));
                }
            }
        }
        Err(e) => errln!("  raw pointers not checked: {e}"),
    }
    Ok(super::ExitStatus::Ok)
}

fn load_mapping(p: &PathBuf) -> anyhow::Result<Mapping> {
    let text =
        std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))?;
    Ok(Mapping::parse(&text, &p.display().to_string())?)
}

/// `framework: N turns (A administrative), ...` then dropped reasons with counts.
pub fn counts_summary(t: &CanonicalTrace) -> String {
    let c = t.counts();
    let mut s = format!(
        "{}: {} turns ({} administrative), {} tool calls, {} tool results, {} writes, {} dropped, {} notes\n",
        t.framework, c.turns, c.administrative, c.tool_calls, c.tool_results, c.writes, c.dropped,
        t.notes.len()
    );
    let mut reasons: BTreeMap<&str, usize> = BTreeMap::new();
    for d in &t.dropped {
        *reasons.entry(d.reason.as_str()).or_default() += 1;
    }
    for (r, n) in reasons {
        s.push_str(&format!("  dropped {n:>4}  {r}\n"));
    }
    s
}

/// One line per turn.
pub fn turn_lines(t: &CanonicalTrace) -> String {
    let mut s = String::new();
    for turn in &t.turns {
        let first = turn
            .message
            .as_ref()
            .map(|m| m.text.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_default();
        // trace text on a terminal: no control character may move the cursor or recolour it
        let clean = |x: &str| -> String { x.chars().filter(|c| !c.is_control()).collect() };
        let first: String = clean(&first).chars().take(70).collect();
        s.push_str(&format!(
            "{:>4} {:<24} {:<14} calls={} results={} writes={}  {}\n",
            turn.index,
            clean(&turn.actor.name),
            turn.kind.as_str(),
            turn.tool_calls.len(),
            turn.tool_results.len(),
            turn.writes.len(),
            first
        ));
    }
    s
}
