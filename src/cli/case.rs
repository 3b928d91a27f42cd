//! `sage case init|check|show`: build a case from a trace, check one, look inside one.

use super::{EXIT_FATAL, EXIT_INPUT_FAILED, EXIT_OK};
use sage_pipeline::authoring::{check, init, show};
use sage_trace::case::{DeficiencyCategory, TraceSource};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub command: Sub,
}

#[derive(clap::Subcommand, Debug)]
// parsed once per process: the size of the largest variant does not matter
#[allow(clippy::large_enum_variant)]
pub enum Sub {
    /// Write a case folder from a trace: artefacts by canonical name, baselines, final state,
    /// task; the failure anchor left to fill unless given.
    Init(InitArgs),
    /// Report every problem that would make a case's result silently wrong (exit 1 if any).
    Check(CheckArgs),
    /// Print an artefact after a write or a turn, or the diff it made.
    Show(ShowArgs),
}

#[derive(clap::Args, Debug)]
pub struct InitArgs {
    /// The trace file (its format is detected from content).
    pub trace: PathBuf,
    /// The case folder to write.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Take baselines from a git revision: `REPO@REV` (e.g. `../repo@1b356f0^`).
    #[arg(long, value_name = "REPO@REV", conflicts_with = "baseline_dir")]
    pub baseline_from: Option<String>,
    /// Timeout of each `git show` of a baseline (--baseline-from), in seconds.
    #[arg(long, default_value = "120", value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub git_timeout: u64,
    /// Take baselines from a folder holding the files at their artefact paths.
    #[arg(long, value_name = "DIR")]
    pub baseline_dir: Option<PathBuf>,
    /// The submitted patch: a unified diff, a SWE-bench `.pred` / `preds.json`, or a commit
    /// series (what `sage replay --result` takes). Its result is the final state, its blob ids
    /// check the baselines. Default: the trace's own submission, when it records one.
    #[arg(long, value_name = "FILE")]
    pub patch: Option<PathBuf>,
    /// A file holding the task statement (default: the trace's first user message).
    #[arg(long, value_name = "FILE")]
    pub task: Option<PathBuf>,
    /// The task's id (default: the trace file's name without extension).
    #[arg(long, value_name = "ID")]
    pub task_id: Option<String>,
    /// The task's CWE (also the anchor's unless --anchor-cwe).
    #[arg(long, value_name = "CWE")]
    pub cwe: Option<String>,
    /// The CVE the task was cut from.
    #[arg(long, value_name = "CVE")]
    pub cve: Option<String>,
    /// The dataset or benchmark (metadata).
    #[arg(long, value_name = "NAME")]
    pub dataset: Option<String>,
    /// The case id (default: the folder's name).
    #[arg(long, value_name = "ID")]
    pub id: Option<String>,
    /// Force the trace's adapter (see `sage adapters`).
    #[arg(long, value_name = "NAME")]
    pub framework: Option<String>,
    /// Anchor: the affected artefact (as the trace names it).
    #[arg(long, value_name = "PATH")]
    pub artefact: Option<String>,
    /// Anchor: the code fragment, verbatim from the final file.
    #[arg(long, value_name = "TEXT")]
    pub fragment: Option<String>,
    /// Anchor: the deficiency category.
    #[arg(long, value_enum, value_name = "CATEGORY")]
    pub category: Option<Category>,
    /// Anchor: the confirmed weakness's CWE (default: --cwe).
    #[arg(long, value_name = "CWE")]
    pub anchor_cwe: Option<String>,
    /// Anchor: what is wrong, in words.
    #[arg(long, value_name = "TEXT")]
    pub description: Option<String>,
    /// Whether the trace is a recorded run (`real`) or written by hand (`constructed`).
    #[arg(long, value_enum, default_value_t = Source::Real)]
    pub trace_source: Source,
    /// Replace an existing case in --out.
    #[arg(long)]
    pub force: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum Category {
    DefenceAbsent,
    DefenceInsufficient,
    VulnerabilityIntroduced,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum Source {
    Real,
    Constructed,
}

#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    /// Case folders, or folders searched recursively for case.json.
    #[arg(required = true)]
    pub cases: Vec<PathBuf>,
    #[command(flatten)]
    pub out: super::OutputArgs,
    #[command(flatten)]
    pub exec: super::replay::ExecArgs,
}

#[derive(clap::Args, Debug)]
pub struct ShowArgs {
    /// The case folder.
    pub case: PathBuf,
    /// After write N (numbered from 1 in trace order, as results number them).
    #[arg(
        long,
        value_name = "N",
        conflicts_with = "at",
        required_unless_present = "at"
    )]
    pub write: Option<usize>,
    /// After turn N (every write of turns 1..=N).
    #[arg(long, value_name = "TURN")]
    pub at: Option<usize>,
    /// The artefact (default: the anchor's; with --write, the write's own).
    #[arg(long, value_name = "PATH")]
    pub artefact: Option<String>,
    /// Print the diff the write (or the turn) made instead of the snapshot.
    #[arg(long)]
    pub diff: bool,
    #[command(flatten)]
    pub out: super::OutputArgs,
}

pub fn run(a: Args, rc: &super::RunConfig) -> anyhow::Result<super::ExitStatus> {
    match a.command {
        Sub::Init(i) => Ok(run_init(i, rc)),
        Sub::Check(c) => run_check(c, rc),
        Sub::Show(s) => run_show(s, rc),
    }
}

fn run_init(a: InitArgs, rc: &super::RunConfig) -> super::ExitStatus {
    let baseline = match (&a.baseline_from, &a.baseline_dir) {
        (Some(g), _) => {
            match init::BaselineSource::parse_git(g, std::time::Duration::from_secs(a.git_timeout))
            {
                Ok(b) => Some(b),
                Err(e) => {
                    errln!("sage: error: --baseline-from {e}");
                    return EXIT_FATAL;
                }
            }
        }
        (None, Some(d)) => Some(init::BaselineSource::Dir(d.clone())),
        (None, None) => None,
    };
    let o = init::InitOptions {
        trace: a.trace,
        framework: a.framework,
        baseline,
        patch: a.patch,
        task: a.task,
        task_id: a.task_id,
        cwe: a.cwe,
        cve: a.cve,
        dataset: a.dataset,
        id: a.id,
        anchor: init::AnchorFlags {
            artefact: a.artefact,
            fragment: a.fragment,
            category: a.category.map(|c| match c {
                Category::DefenceAbsent => DeficiencyCategory::DefenceAbsent,
                Category::DefenceInsufficient => DeficiencyCategory::DefenceInsufficient,
                Category::VulnerabilityIntroduced => DeficiencyCategory::VulnerabilityIntroduced,
            }),
            cwe: a.anchor_cwe,
            description: a.description,
        },
        trace_source: match a.trace_source {
            Source::Real => TraceSource::Real,
            Source::Constructed => TraceSource::Constructed,
        },
        out: a.out.clone(),
        force: a.force,
        rules: rc.rules.clone(),
    };
    let r = init::init(&o);
    for l in &r.lines {
        outln!("{l}");
    }
    if !r.artefacts.is_empty() {
        outln!("artefacts (canonical names):");
        for x in &r.artefacts {
            outln!(
                "  {}  {} write(s); baseline: {}; final: {}",
                x.name,
                x.writes,
                x.baseline
                    .as_ref()
                    .map(|b| b.1.as_str())
                    .unwrap_or("none (created by the agent, or not found)"),
                x.final_state
                    .as_ref()
                    .map(|f| f.1.as_str())
                    .unwrap_or("none")
            );
        }
    }
    for w in &r.warnings {
        errln!("sage: warning: {w}");
    }
    for e in &r.errors {
        errln!("sage: error: {e}");
    }
    if !r.written {
        errln!("sage: nothing written");
        return EXIT_INPUT_FAILED;
    }
    outln!("case written to {}", a.out.display());
    let todo = r.manifest.as_ref().is_some_and(|m| {
        m.anchor
            .as_ref()
            .is_none_or(|a| a.artefact == init::TODO || a.description == init::TODO)
    });
    if todo {
        outln!(
            "next: fill in the failure anchor in {} (the fields marked TODO), then run `sage case check {}`",
            a.out.join("case.json").display(),
            a.out.display()
        );
    } else {
        outln!("next: sage case check {}", a.out.display());
    }
    if r.warnings.is_empty() {
        EXIT_OK
    } else {
        EXIT_INPUT_FAILED
    }
}

fn run_check(a: CheckArgs, rc: &super::RunConfig) -> anyhow::Result<super::ExitStatus> {
    let mut dirs = Vec::new();
    let mut failed = false;
    for p in &a.cases {
        match sage_trace::case::discover(p) {
            Ok(d) if d.is_empty() => {
                errln!(
                    "sage: error: {}: no case found (a case is a folder holding case.json)",
                    p.display()
                );
                failed = true;
            }
            Ok(d) => dirs.extend(d),
            Err(e) => {
                errln!("sage: error: {e}");
                failed = true;
            }
        }
    }
    let Some(execution) = super::replay::execution(&a.exec)? else {
        return Ok(super::EXIT_FATAL);
    };
    let checks: Vec<check::CaseCheck> = dirs
        .iter()
        .map(|d| check::check_case(d, &rc.rules, &execution))
        .collect();
    let n_bad = checks.iter().filter(|c| !c.problems.is_empty()).count();
    let table = || {
        let mut s = String::new();
        for c in &checks {
            if c.problems.is_empty() {
                s.push_str(&format!(
                    "{}: ok{}\n",
                    c.dir,
                    if c.verified.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", c.verified.join("; "))
                    }
                ));
            } else {
                s.push_str(&format!("{}: {} problem(s)\n", c.dir, c.problems.len()));
                for p in &c.problems {
                    s.push_str(&format!("  ✗ {}\n    fix: {}\n", p.what, p.fix));
                }
            }
            for n in &c.notes {
                s.push_str(&format!("  note: {n}\n"));
            }
            if let Some(r) = &c.replay {
                s.push_str(&replay_lines(r));
            }
        }
        s
    };
    let json = || serde_json::json!(check::schema::CaseCheckReport::new(checks.clone()));
    a.out.emit(table, json)?;
    errln!(
        "sage: {} case(s) checked, {} with problems",
        dirs.len(),
        n_bad
    );
    Ok(if failed || n_bad > 0 {
        EXIT_INPUT_FAILED
    } else {
        EXIT_OK
    })
}

fn run_show(a: ShowArgs, rc: &super::RunConfig) -> anyhow::Result<super::ExitStatus> {
    let at = match (a.write, a.at) {
        (Some(n), _) => show::At::Write(n),
        (None, Some(t)) => show::At::Turn(t),
        (None, None) => unreachable!("clap requires --write or --at"),
    };
    match show::show(&a.case, &at, a.artefact.as_deref(), a.diff, &rc.rules) {
        Ok(text) => {
            let json = || {
                let (key, n) = match at {
                    show::At::Write(n) => ("write", n),
                    show::At::Turn(n) => ("turn", n),
                };
                serde_json::json!({
                    "case": a.case.display().to_string(),
                    "after": {key: n},
                    "artefact": a.artefact,
                    "shows": if a.diff { "diff" } else { "snapshot" },
                    "text": text,
                })
            };
            a.out.emit(|| text.clone(), json)?;
            Ok(EXIT_OK)
        }
        Err(e) => {
            errln!("sage: error: {e}");
            Ok(EXIT_INPUT_FAILED)
        }
    }
}

/// A case's per-file replay verdicts, as `case check` prints them under the case.
fn replay_lines(r: &check::ReplayVerdicts) -> String {
    let mut s = format!(
        "  replay: {} file(s): {} matches, {} differs, {} unverifiable (against: {}; execution: {})\n",
        r.counts.files,
        r.counts.matches,
        r.counts.differs,
        r.counts.unverifiable,
        if r.results.is_empty() {
            "nothing recorded".to_string()
        } else {
            r.results.join(", ")
        },
        r.execution
    );
    for f in &r.files {
        s.push_str(&format!("    {:<12} {}", f.verdict.as_str(), f.path));
        if !f.failed_writes.is_empty() {
            s.push_str(&format!(": {} failed write(s)", f.failed_writes.len()));
        }
        if let Some(why) = &f.reason {
            let sep = if f.failed_writes.is_empty() {
                ": "
            } else {
                "; "
            };
            s.push_str(&format!("{sep}{why}"));
        }
        s.push('\n');
        for e in &f.executed {
            s.push_str(&format!("      executed write, {e}\n"));
        }
    }
    s
}
