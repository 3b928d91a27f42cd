//! `sage szz`: find the commit that introduced a bug or vulnerability from its fix.

use anyhow::Result;
use clap::{Args, Subcommand, ValueEnum};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use sage_szz::eval::{CaseResult, CaseStatus, EvalConfig};
use sage_szz::{self, git::short, Options, SzzResult, Variant};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct SzzArgs {
    #[command(subcommand)]
    pub sub: Option<SzzSub>,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Subcommand, Debug)]
pub enum SzzSub {
    /// Precision, recall and F1 of variants over a labelled dataset (Rosa et al. pairs).
    Eval(EvalArgs),
    /// Time B-SZZ against plain `git blame` of the same lines, per case.
    Bench(BenchArgs),
}

#[derive(Args, Debug)]
pub struct EvalArgs {
    /// A dataset file (V-SZZ, DS_GITHUB/Rosa, MAS-SZZ per-fix or Hinrichs JSON).
    pub dataset: PathBuf,
    /// Directory holding local clones (`owner/name`, `owner+name`, `name`, bare or not).
    #[arg(long)]
    pub repos: PathBuf,
    /// Variants to evaluate (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "b,ag,ma,r,l,v")]
    pub variant: Vec<String>,
    /// CVE descriptions (JSON object: CVE id → text), handed to the agent.
    #[arg(long)]
    pub descriptions: Option<PathBuf>,
    /// V-SZZ project → repository table (TSV) replacing the bundled one.
    #[arg(long)]
    pub project_map: Option<PathBuf>,
    /// Only the first N fixes whose repository is present.
    #[arg(long)]
    pub limit: Option<usize>,
    /// Print one line per case to stderr as it finishes.
    #[arg(long)]
    pub progress: bool,
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Write the result to FILE instead of printing it (replaced whole).
    #[arg(long = "output", short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub opts: VariantOpts,
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// A repository (with --fix) ...
    #[arg(long)]
    pub repo: Option<PathBuf>,
    #[arg(long, value_delimiter = ',')]
    pub fix: Vec<String>,
    /// ... or a dataset with --repos.
    #[arg(long)]
    pub dataset: Option<PathBuf>,
    #[arg(long)]
    pub repos: Option<PathBuf>,
    #[arg(long)]
    pub limit: Option<usize>,
    /// Timed runs per case (median reported).
    #[arg(long, default_value = "3", value_parser = super::concurrency)]
    pub runs: std::num::NonZeroUsize,
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Write the result to FILE instead of printing it (replaced whole).
    #[arg(long = "output", short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
}

/// Options every variant shares.
#[derive(Args, Debug, Clone)]
pub struct VariantOpts {
    /// Only files whose extension (the part after the first dot, as pyszz reads it) is listed,
    /// e.g. `c,java,cpp,h,hpp`.
    #[arg(long, value_delimiter = ',')]
    pub ext: Vec<String>,
    /// Keep blank blamed lines (pyszz's behaviour; by default AG and up drop them).
    #[arg(long)]
    pub keep_blank: bool,
    /// Keep blamed comment lines (pyszz's behaviour when srcML is missing).
    #[arg(long)]
    pub keep_comments: bool,
    /// MA-SZZ: also ignore revert commits.
    #[arg(long)]
    pub filter_revert: bool,
    /// AG/MA: the more-than-N-files rule.
    #[arg(long, default_value_t = 20)]
    pub max_change_size: usize,
    /// Bug-compatible with pyszz's blame bookkeeping (lines deduplicated by their path and
    /// line number in the blamed commit; see docs/szz.md).
    #[arg(long)]
    pub pyszz_compat: bool,
    /// The agent's oracle: `lexicon` (offline) or `openai:MODEL` / `anthropic:MODEL` (keys
    /// from OPENAI_API_KEY / ANTHROPIC_API_KEY, through the judges' client).
    #[arg(long, default_value = "lexicon")]
    pub oracle: String,
    /// The oracle's stop words, guard hints and LLM prompts (TOML), replacing the embedded
    /// crates/sage-szz/data/oracle.toml.
    #[arg(long, value_name = "FILE")]
    pub oracle_data: Option<PathBuf>,
    /// Timeout of each git call, in seconds.
    #[arg(long, default_value = "120", value_parser = clap::builder::TypedValueParser::map(clap::value_parser!(u64).range(1..), |n| std::num::NonZeroU64::new(n).expect("range(1..)")))]
    pub git_timeout: std::num::NonZeroU64,
    /// The most each git call may print, in MiB: a call that prints more (a hostile
    /// repository's blame or show) is killed and its case fails, naming the command.
    #[arg(long, default_value = "256", value_name = "MIB", value_parser = clap::builder::TypedValueParser::map(clap::value_parser!(u64).range(1..), |n| std::num::NonZeroU64::new(n).expect("range(1..)")))]
    pub git_max_output_mb: std::num::NonZeroU64,
    /// V-SZZ: threads that map lines through each commit's change (default: the machine's
    /// cores). The answer is the same for any number.
    #[arg(long, value_name = "N", value_parser = super::concurrency)]
    pub threads: Option<std::num::NonZeroUsize>,
}

impl VariantOpts {
    pub fn options(&self, cve: Option<String>) -> Options {
        Options {
            extensions: if self.ext.is_empty() {
                None
            } else {
                Some(
                    self.ext
                        .iter()
                        .map(|e| e.trim_start_matches('.').to_string())
                        .collect(),
                )
            },
            max_change_size: self.max_change_size,
            skip_blank: !self.keep_blank,
            skip_comments: !self.keep_comments,
            filter_revert: self.filter_revert,
            pyszz_compat: self.pyszz_compat,
            cve,
            threads: self.threads.unwrap_or(Options::default().threads),
            ..Options::default()
        }
    }
    pub fn oracle(&self) -> Result<Box<dyn sage_szz::oracle::SzzOracle>> {
        let mut lexicon = sage_szz::oracle::LexiconOracle::default();
        if let Some(p) = &self.oracle_data {
            lexicon.data = std::sync::Arc::new(sage_szz::oracle_data::OracleData::load(p)?);
        }
        Ok(if self.oracle == "lexicon" {
            Box::new(lexicon)
        } else {
            let mut o = sage_szz::oracle::LlmOracle::new(
                sage_szz::oracle::JudgeLlmClient::from_spec(&self.oracle, &super::environment())?,
            );
            o.fallback = lexicon;
            Box::new(o)
        })
    }
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.git_timeout.get())
    }
    /// `--git-max-output-mb` in bytes.
    pub fn max_output(&self) -> std::num::NonZeroU64 {
        self.git_max_output_mb
            .saturating_mul(std::num::NonZeroU64::new(1024 * 1024).unwrap())
    }
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The repository: a working tree or a bare repository.
    #[arg(long)]
    pub repo: Option<PathBuf>,
    /// The fixing commit (full hash, unique prefix or ref).
    #[arg(long)]
    pub fix: Option<String>,
    /// Variants to run (comma-separated): b, ag, ma, r, l, v, agent.
    #[arg(long, value_delimiter = ',', default_value = "b")]
    pub variant: Vec<String>,
    /// The CVE or bug description (guides the agent).
    #[arg(long)]
    pub cve: Option<String>,
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Write the result to FILE instead of printing it (replaced whole).
    #[arg(long = "output", short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub opts: VariantOpts,
}

pub fn run(args: SzzArgs) -> Result<super::ExitStatus> {
    match args.sub {
        None => match run_one(args.run) {
            Ok(code) => Ok(code),
            Err(e) => {
                errln!("sage: error: {e:#}");
                Ok(super::ExitStatus::Fatal)
            }
        },
        Some(SzzSub::Eval(a)) => match run_eval(a) {
            Ok(code) => Ok(code),
            Err(e) => {
                errln!("sage szz eval: {e:#}");
                Ok(super::ExitStatus::Fatal)
            }
        },
        Some(SzzSub::Bench(a)) => match run_bench(a) {
            Ok(code) => Ok(code),
            Err(e) => {
                errln!("sage szz bench: {e:#}");
                Ok(super::ExitStatus::Fatal)
            }
        },
    }
}

pub fn parse_variants(list: &[String]) -> Result<Vec<Variant>> {
    let mut out = Vec::new();
    for v in list {
        let v: Variant = v.parse().map_err(anyhow::Error::msg)?;
        if !out.contains(&v) {
            out.push(v);
        }
    }
    Ok(out)
}

fn run_one(a: RunArgs) -> Result<super::ExitStatus> {
    let mut o = String::new();
    let (Some(repo), Some(fix)) = (a.repo.as_ref(), a.fix.as_ref()) else {
        anyhow::bail!("--repo and --fix are required (or use `sage szz eval`)");
    };
    let variants = parse_variants(&a.variant)?;
    let git = sage_szz::open(repo, Some(a.opts.timeout()))?.with_max_output(a.opts.max_output());
    // fail early, and once, on an unknown fix
    let fix = git.resolve_commit(fix)?;
    let opts = a.opts.options(a.cve.clone());
    let oracle = a.opts.oracle()?;
    let mut results = Vec::new();
    let mut failed = false;
    for v in variants {
        match sage_szz::find_inducing(&git, &fix, v, &opts, Some(oracle.as_ref())) {
            Ok(r) => results.push(r),
            Err(e) => {
                errln!("sage: error: {}: {e}", v.label());
                failed = true;
            }
        }
    }
    match a.format {
        Format::Json => {
            // serialized straight from the published records (not through a
            // `serde_json::Value`: a copy of every line as a map, a fifth of V-SZZ's time on a
            // 40,000-line fix); the results are moved into them, not copied
            let out = sage_szz::schema::SzzReport::new(repo.display().to_string(), fix, results);
            o = out.into_json_pretty()?;
            o.push('\n');
        }
        Format::Table => print_table(&mut o, &fix, &results),
    }
    super::print_or_write(a.output.as_deref(), &o)?;
    Ok(if failed {
        super::ExitStatus::InputFailed
    } else {
        super::ExitStatus::Ok
    })
}

fn print_table(o: &mut String, fix: &str, results: &[SzzResult]) {
    _ = writeln!(o, "fix {fix}");
    let mut t = Table::new();
    super::width::fit_table(&mut t);
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(vec![
        "variant",
        "candidate",
        "committed",
        "lines",
        "subject",
        "selected",
    ]);
    for r in results {
        if r.candidates.is_empty() {
            t.add_row(vec![r.variant.label(), "(none)", "", "", "", ""]);
        }
        for c in &r.candidates {
            let sel = if r.selected.as_deref() == Some(c.commit.as_str()) {
                "*"
            } else {
                ""
            };
            t.add_row(vec![
                r.variant.label().to_string(),
                short(&c.commit).to_string(),
                fmt_date(c.committed),
                c.lines.len().to_string(),
                c.subject.chars().take(60).collect(),
                sel.to_string(),
            ]);
        }
    }
    _ = writeln!(o, "{t}");
    for r in results {
        // the agent's answer rests on its root cause: show the one it used
        if let Some(rc) = r.agent.as_ref().and_then(|a| a.root_cause.as_ref()) {
            _ = writeln!(o, "root cause [{}]: {}", r.variant.label(), rc.summary);
            _ = writeln!(o, "  keywords: {}", rc.keywords.join(", "));
            if !rc.guards.is_empty() {
                _ = writeln!(o, "  guards: {}", rc.guards.join(", "));
            }
        }
        for n in &r.notes {
            _ = writeln!(o, "note [{}]: {n}", r.variant.label());
        }
        _ = writeln!(
            o,
            "{}: {} candidate(s), {} git calls, {} ms",
            r.variant.label(),
            r.candidates.len(),
            r.git_calls,
            r.elapsed_ms
        );
    }
}

/// A Unix time as `YYYY-MM-DD` (UTC), without a date crate.
pub fn fmt_date(t: i64) -> String {
    let days = t.div_euclid(86_400);
    // civil-from-days (Howard Hinnant)
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!("{y:04}-{m:02}-{d:02}")
}

fn load_dataset(
    path: &std::path::Path,
    map: Option<&PathBuf>,
) -> Result<sage_szz::dataset::Dataset> {
    let map = match map {
        Some(p) => Some(sage_szz::dataset::parse_project_map(
            &std::fs::read_to_string(p).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?,
        )),
        None => None,
    };
    Ok(sage_szz::dataset::load(path, map.as_ref())?)
}

fn run_eval(a: EvalArgs) -> Result<super::ExitStatus> {
    let mut o = String::new();
    let variants = parse_variants(&a.variant)?;
    if !a.repos.is_dir() {
        anyhow::bail!("--repos {}: not a directory", a.repos.display());
    }
    let ds = load_dataset(&a.dataset, a.project_map.as_ref())?;
    let descriptions: HashMap<String, String> = match &a.descriptions {
        Some(p) => sage_trace::json::parse(&std::fs::read_to_string(p)?)
            .map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?,
        None => HashMap::new(),
    };
    let oracle = a.opts.oracle()?;
    // a bar with the total (fixes present × variants) and ETA on a terminal; the per-case
    // line with --progress or -v (above the bar when there is one)
    let bar = super::judges::Bar::labelled("cases × variants", false, None);
    if let Some(b) = &bar {
        let total = sage_szz::eval::planned(&ds, &a.repos, a.limit) * variants.len();
        sage_judge::concurrent::Progress::start(b, total as u64);
    }
    let lines = a.progress || super::verbose();
    let progress = |r: &CaseResult| {
        if lines {
            let line = format!(
                "{} {} {} {}: {} predicted, {} hit(s){}",
                r.id,
                r.repo,
                short(&r.fix),
                r.variant.label(),
                r.predicted.len(),
                r.hits,
                match &r.status {
                    CaseStatus::Failed { error } => format!(" FAILED: {error}"),
                    _ => String::new(),
                }
            );
            match &bar {
                Some(b) => b.println(&line),
                None => errln!("{line}"),
            }
        }
        if let Some(b) = &bar {
            sage_judge::concurrent::Progress::advance(b, 1);
        }
    };
    let cfg = EvalConfig {
        variants,
        options: a.opts.options(None),
        timeout: a.opts.timeout(),
        max_output: a.opts.max_output(),
        descriptions,
        oracle: Some(oracle.as_ref()),
        limit: a.limit,
        progress: if lines || bar.is_some() {
            Some(&progress)
        } else {
            None
        },
    };
    let report = sage_szz::eval::evaluate(&ds, &a.repos, &cfg);
    if let Some(b) = &bar {
        sage_judge::concurrent::Progress::finish(b);
    }
    for p in &report.problems {
        errln!("problem: {p}");
    }
    let failed = report
        .cases
        .iter()
        .any(|c| matches!(c.status, CaseStatus::Failed { .. }));
    match a.format {
        Format::Json => {
            let out = sage_szz::schema::EvalReport::from(report);
            _ = writeln!(o, "{}", serde_json::to_string_pretty(&out)?)
        }
        Format::Table => {
            let mut cases = Table::new();
            super::width::fit_table(&mut cases);
            cases.load_preset(UTF8_FULL_CONDENSED);
            cases.set_header(vec![
                "case",
                "repo",
                "fix",
                "variant",
                "labels",
                "predicted",
                "hits",
                "status",
            ]);
            for c in &report.cases {
                cases.add_row(vec![
                    c.id.clone(),
                    c.repo.clone(),
                    short(&c.fix).to_string(),
                    c.variant.label().to_string(),
                    c.labels
                        .iter()
                        .map(|l| short(l))
                        .collect::<Vec<_>>()
                        .join(" "),
                    c.predicted
                        .iter()
                        .map(|l| short(l))
                        .collect::<Vec<_>>()
                        .join(" "),
                    c.hits.to_string(),
                    match &c.status {
                        CaseStatus::Ok => "ok".to_string(),
                        CaseStatus::Skipped { reason } => format!("skipped: {reason}"),
                        CaseStatus::Failed { error } => format!("failed: {error}"),
                    },
                ]);
            }
            _ = writeln!(o, "{cases}");
            let mut t = Table::new();
            super::width::fit_table(&mut t);
            t.load_preset(UTF8_FULL_CONDENSED);
            t.set_header(vec![
                "variant",
                "cases",
                "failed",
                "oracle",
                "predicted",
                "TP",
                "precision",
                "recall",
                "F1",
                "label∈cand",
                "top-1",
                "median ms",
            ]);
            for s in &report.scores {
                t.add_row(vec![
                    s.variant.label().to_string(),
                    s.cases.to_string(),
                    s.failed.to_string(),
                    s.oracle_pairs.to_string(),
                    s.predicted_pairs.to_string(),
                    s.true_pairs.to_string(),
                    format!("{:.3}", s.precision),
                    format!("{:.3}", s.recall),
                    format!("{:.3}", s.f1),
                    s.label_in_candidates.to_string(),
                    if s.top1_cases > 0 {
                        format!("{}/{}", s.top1_correct, s.top1_cases)
                    } else {
                        "-".into()
                    },
                    s.median_ms.to_string(),
                ]);
            }
            _ = writeln!(o, "{t}");
            _ = writeln!(o,
                "dataset {} ({}): {} fixes, {} run, {} skipped; precision = TP/|predicted|, recall = TP/|oracle| over (repo, fix, inducing) pairs (Rosa et al.)",
                report.dataset, report.format, report.fixes_in_dataset, report.fixes_run, report.fixes_skipped
            );
            if !report.missing_repos.is_empty() {
                _ = writeln!(
                    o,
                    "skipped (repository not under {}): {}",
                    a.repos.display(),
                    report.missing_repos.join(", ")
                );
            }
        }
    }
    super::print_or_write(a.output.as_deref(), &o)?;
    Ok(if failed {
        super::ExitStatus::InputFailed
    } else {
        super::ExitStatus::Ok
    })
}

fn run_bench(a: BenchArgs) -> Result<super::ExitStatus> {
    let mut o = String::new();
    let mut jobs: Vec<(PathBuf, String)> = Vec::new();
    if let Some(repo) = &a.repo {
        for f in &a.fix {
            jobs.push((repo.clone(), f.clone()));
        }
    }
    if let Some(ds) = &a.dataset {
        let Some(repos) = &a.repos else {
            anyhow::bail!("--dataset needs --repos");
        };
        let ds = load_dataset(ds, None)?;
        for f in &ds.fixes {
            if let Some(dir) = sage_szz::dataset::find_repo(repos, &f.repo) {
                jobs.push((dir, f.fix.clone()));
            }
        }
    }
    if let Some(n) = a.limit {
        jobs.truncate(n);
    }
    if jobs.is_empty() {
        anyhow::bail!("nothing to benchmark: give --repo and --fix, or --dataset and --repos with repositories present");
    }
    let mut rows = Vec::new();
    let mut failed = false;
    for (repo, fix) in &jobs {
        let r =
            sage_szz::open(repo, None).and_then(|g| sage_szz::bench::bench_fix(&g, fix, a.runs));
        match r {
            Ok(row) => rows.push((repo.display().to_string(), row)),
            Err(e) => {
                errln!("{}: {fix}: {e}", repo.display());
                failed = true;
            }
        }
    }
    match a.format {
        Format::Json => {
            let v: Vec<sage_szz::schema::BenchEntry> = rows
                .iter()
                .map(|(repo, row)| sage_szz::schema::BenchEntry {
                    repo: repo.clone(),
                    row: row.clone().into(),
                })
                .collect();
            _ = writeln!(o, "{}", serde_json::to_string_pretty(&v)?);
        }
        Format::Table => {
            let mut t = Table::new();
            super::width::fit_table(&mut t);
            t.load_preset(UTF8_FULL_CONDENSED);
            t.set_header(vec![
                "repo",
                "fix",
                "files",
                "lines",
                "cand",
                "B-SZZ ms",
                "git blame ms",
                "ratio",
                "git calls",
            ]);
            for (repo, r) in &rows {
                t.add_row(vec![
                    repo.clone(),
                    short(&r.fix).to_string(),
                    r.files.to_string(),
                    r.lines.to_string(),
                    r.candidates.to_string(),
                    format!("{:.1}", r.bszz_ms),
                    format!("{:.1}", r.blame_ms),
                    if r.blame_ms > 0.0 {
                        format!("{:.2}", r.bszz_ms / r.blame_ms)
                    } else {
                        "-".into()
                    },
                    r.git_calls.to_string(),
                ]);
            }
            _ = writeln!(o, "{t}");
            if rows.is_empty() {
                super::print_or_write(a.output.as_deref(), &o)?;
                return Ok(super::ExitStatus::InputFailed);
            }
            let mut b: Vec<f64> = rows.iter().map(|(_, r)| r.bszz_ms).collect();
            let mut p: Vec<f64> = rows.iter().map(|(_, r)| r.blame_ms).collect();
            b.sort_by(f64::total_cmp);
            p.sort_by(f64::total_cmp);
            let sb: f64 = b.iter().sum();
            let sp: f64 = p.iter().sum();
            _ = writeln!(o,
                "{} case(s): B-SZZ median {:.1} ms (total {:.0} ms); plain git blame median {:.1} ms (total {:.0} ms); total ratio {:.2}",
                rows.len(),
                b[b.len() / 2],
                sb,
                p[p.len() / 2],
                sp,
                if sp > 0.0 { sb / sp } else { 0.0 }
            );
        }
    }
    super::print_or_write(a.output.as_deref(), &o)?;
    Ok(if failed {
        super::ExitStatus::InputFailed
    } else {
        super::ExitStatus::Ok
    })
}
