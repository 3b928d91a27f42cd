//! `sage screen`: L0-L3 screening of agent patches for silent-failure candidates.

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use sage_screen::{self, BanditMode, Options, Report};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq)]
pub enum Format {
    Table,
    Json,
    Sarif,
}

#[derive(Args, Debug)]
pub struct ScreenArgs {
    /// A folder of runs (folders holding run.json) and/or cases (case.json; the anchor is
    /// ignored); with --pairs, a folder of
    /// <name>.orig.py / <name>.py pairs or a CSV of baseline,final,cwe[,framework][,id].
    pub dir: PathBuf,
    /// Read plain files instead of cases (the default when DIR holds no case.json): each
    /// `<name>.py` against `<name>.orig.py` beside it, else against --baseline, else as new
    /// code; or a CSV of pairs.
    #[arg(long)]
    pub pairs: bool,
    /// The baseline of every plain `.py` file that has no `<name>.orig.py` (implies --pairs).
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// Target CWE for pairs that name none (e.g. CWE-78).
    #[arg(long)]
    pub cwe: Option<String>,
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Interpreter to resolve imports against (importlib.util.find_spec) and run tests with.
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// Requirements list (pip format) naming what the environment provides.
    #[arg(long)]
    pub requirements: Option<PathBuf>,
    /// L3 rule table (JSON) replacing the built-in crates/sage-screen/rules/l3_rules.json.
    #[arg(long)]
    pub rules: Option<PathBuf>,
    /// Do not run Bandit (L2 is reported as not run).
    #[arg(long)]
    pub no_bandit: bool,
    /// The Bandit executable. Default: `bandit` on PATH, else the project's `.venv/bin/bandit`
    /// (scripts/setup.sh puts it there; looked for in the current folder and in the checkout
    /// sage was built from), else `~/.local/bin/bandit` (pipx, pip --user), else
    /// `python3 -m bandit`.
    #[arg(long, env = "SAGE_BANDIT", conflicts_with = "no_bandit")]
    pub bandit: Option<PathBuf>,
    /// Run each case's own `tests.command` for L1 (in a scratch copy, with a timeout, a
    /// cleared environment and no network where the platform allows). Off by default: the
    /// command comes from the case folder.
    #[arg(long)]
    pub run_tests: bool,
    /// Timeout of a case's tests, in seconds (a case's tests.timeout_secs wins).
    #[arg(long, default_value_t = 60)]
    pub test_timeout: u64,
    /// Timeout of each run of an outside tool, in seconds: the interpreter (locating syntax
    /// errors, resolving imports) and Bandit, each run once over the whole batch.
    #[arg(long, value_name = "SECS", default_value_t = sage_screen::DEFAULT_TOOL_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..))]
    pub tool_timeout: u64,
    /// SARIF 2.1.0 logs of other tools (CodeQL, Semgrep, Bandit) whose results become
    /// proposed anchors; a log belongs to the run whose folder holds it or whose id is its
    /// runs[].automationDetails.id.
    #[arg(long, num_args = 1..)]
    pub sarif: Vec<PathBuf>,
    /// Write the output here instead of stdout.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
}

/// Where scripts/setup.sh may have put Bandit when it is not on PATH: a project-local
/// virtual environment (so no root and no system pip is needed), or pipx / `pip --user`.
fn default_bandit(limit: Duration) -> BanditMode {
    use sage_sandbox::child;
    let mut probe = child::command("bandit");
    probe.arg("--version").stdin(std::process::Stdio::null());
    // a `bandit` that does not answer is passed over, as a missing one is
    let capture = child::Capture::Apart {
        stdout: 1 << 16,
        stderr: 1 << 16,
    };
    let on_path = child::run(probe, limit, capture)
        .is_ok_and(|r| matches!(r.end, child::End::Exited(s) if s.success()));
    if on_path {
        return BanditMode::Auto;
    }
    let mut places = vec![
        PathBuf::from(".venv/bin/bandit"),
        PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.venv/bin/bandit")),
    ];
    if let Some(home) = std::env::var_os("HOME") {
        places.push(PathBuf::from(home).join(".local/bin/bandit"));
    }
    places
        .into_iter()
        .find(|p| p.is_file())
        .map_or(BanditMode::Auto, BanditMode::Path)
}

pub fn run(a: ScreenArgs, rc: &super::RunConfig) -> Result<super::ExitStatus> {
    let rules = match &a.rules {
        None => sage_screen::l3::Rules::builtin(),
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("cannot read rules {}", p.display()))?;
            sage_screen::l3::Rules::parse(&text, &p.display().to_string())?
        }
    };
    let requirements = match &a.requirements {
        None => None,
        Some(p) => Some(sage_screen::l1::parse_requirements(
            &std::fs::read_to_string(p)
                .with_context(|| format!("cannot read requirements {}", p.display()))?,
        )),
    };
    let opts = Options {
        rules,
        python: a.python.clone(),
        requirements,
        bandit: if a.no_bandit {
            BanditMode::Off
        } else if let Some(b) = &a.bandit {
            BanditMode::Path(b.clone())
        } else {
            default_bandit(Duration::from_secs(a.tool_timeout.min(30)))
        },
        test_timeout: Duration::from_secs(a.test_timeout),
        tool_timeout: Duration::from_secs(a.tool_timeout),
        run_tests: a.run_tests,
        path: std::env::var_os("PATH"),
    };
    let plain = |dir: &std::path::Path| {
        sage_screen::units_from_pairs(
            dir,
            a.cwe.as_deref(),
            a.baseline.as_deref(),
            rc.rules.limits().max_input_bytes,
        )
        .map_err(anyhow::Error::msg)
    };
    let (units, errors) = if a.pairs || a.baseline.is_some() {
        plain(&a.dir)?
    } else {
        let (u, e) = sage_pipeline::replay::units_from_runs(&a.dir, &rc.rules)?;
        if u.is_empty() && e.is_empty() {
            // No run.json or case.json anywhere: a folder of plain Python files (or a CSV
            // of pairs).
            plain(&a.dir).map_err(|e| {
                anyhow::anyhow!("{e} and no run.json or case.json; nothing to screen")
            })?
        } else {
            (u, e)
        }
    };
    for e in &errors {
        errln!("sage: error: {e}");
    }
    let mut external = Vec::new();
    for f in &a.sarif {
        match sage_screen::sarif_in::read(f, &units) {
            Ok(x) => external.extend(x),
            // A bad log is bad input: named, exit 1, nothing screened on a partial view.
            Err(e) => {
                errln!("sage: error: {e}");
                return Ok(super::EXIT_INPUT_FAILED);
            }
        }
    }
    if opts.run_tests {
        // Shown before anything runs: the user asked for it and sees exactly what and how.
        for u in &units {
            if let Some(t) = &u.tests {
                let timeout = t.timeout.unwrap_or(opts.test_timeout);
                errln!(
                    "sage screen: running the tests of {}: {:?} ({})",
                    u.id,
                    t.command,
                    sage_screen::l1::sandbox_description(timeout)
                );
            }
        }
    }
    let bar = super::judges::Bar::labelled("cases", false, None);
    let mut report = sage_screen::screen_with(
        &units,
        &opts,
        bar.as_ref().map(|b| b as &dyn sage_screen::Progress),
    );
    if let Some(b) = &bar {
        sage_judge::concurrent::Progress::finish(b);
    }
    if super::verbose() {
        for c in &report.cases {
            errln!("sage screen: {}: {:?}", c.id, c.status);
        }
    }
    sage_screen::propose::attach(&units, &mut report, &external, &opts.rules);
    report.errors = errors;
    let text = match a.format {
        Format::Json => serde_json::to_string_pretty(&report)? + "\n",
        Format::Sarif => {
            serde_json::to_string_pretty(&sage_screen::sarif::to_sarif(&report, &units))? + "\n"
        }
        Format::Table => render_table(&report),
    };
    match &a.output {
        Some(p) => std::fs::write(p, sage_llm::secrets::scrubbed(&text))
            .with_context(|| format!("cannot write {}", p.display()))?,
        None => out!("{}", sage_llm::secrets::scrub(&text)),
    }
    Ok(if report.errors.is_empty() {
        super::ExitStatus::Ok
    } else {
        super::ExitStatus::InputFailed
    })
}

fn render_table(r: &Report) -> String {
    let mut t = Table::new();
    super::width::fit_table(&mut t);
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(vec![
        "case",
        "framework",
        "CWE",
        "status",
        "level",
        "L0",
        "L1",
        "L2",
        "R",
        "candidate",
        "why",
    ]);
    for c in &r.cases {
        let why: Vec<&str> = c.reasons.iter().map(String::as_str).take(3).collect();
        let more = c.reasons.len().saturating_sub(3);
        t.add_row(vec![
            c.id.clone(),
            c.framework.clone().unwrap_or_else(|| "-".into()),
            c.task_cwe.clone().unwrap_or_else(|| "-".into()),
            c.status.as_str().to_string(),
            c.level_reached.clone(),
            c.l0.as_str().into(),
            c.l1.as_str().into(),
            c.l2.as_str().into(),
            c.r.map(|r| format!("{r:.1}")).unwrap_or_else(|| "-".into()),
            if c.candidate { "yes" } else { "no" }.into(),
            format!(
                "{}{}{}",
                why.join("\n"),
                if more > 0 {
                    format!("\n(+{more} more)")
                } else {
                    String::new()
                },
                // "L2 not run" is said once under the table.
                match c
                    .notes
                    .iter()
                    .filter(|n| !n.starts_with("L2 not run"))
                    .count()
                {
                    0 => String::new(),
                    n => format!(
                        "{}({n} note{}: --format json)",
                        if why.is_empty() { "" } else { "\n" },
                        if n == 1 { "" } else { "s" }
                    ),
                }
            ),
        ]);
    }
    let mut s = String::new();
    s.push_str(&t.to_string());
    s.push('\n');
    let mut sum = Table::new();
    super::width::fit_table(&mut sum);
    sum.load_preset(UTF8_FULL_CONDENSED);
    sum.set_header(vec![
        "framework",
        "excluded runs",
        "valid traces",
        "passed L0-L3",
        "failed L0/L1",
        "SF candidates",
    ]);
    for row in &r.summary {
        sum.add_row(vec![
            row.framework.clone(),
            row.excluded.to_string(),
            row.valid.to_string(),
            row.passed.to_string(),
            row.failed_l0_l1.to_string(),
            row.candidates.to_string(),
        ]);
    }
    s.push_str(&sum.to_string());
    s.push('\n');
    if r.bandit.ran {
        s.push_str(&format!(
            "L2: bandit {} over {} files in {:.2}s\n",
            r.bandit.version.as_deref().unwrap_or("?"),
            r.bandit.files.unwrap_or(0),
            r.bandit.seconds.unwrap_or(0.0)
        ));
    } else {
        s.push_str(&format!(
            "L2: not run ({})\n",
            r.bandit.reason.as_deref().unwrap_or("unknown reason")
        ));
    }
    s.push_str(&format!("L3 rules: {}\n", r.rules));
    for e in &r.errors {
        s.push_str(&format!("error: {e}\n"));
    }
    s
}
