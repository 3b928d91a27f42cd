//! `sage study DIR --out OUT`: the paper's funnel in one command.
//!
//! Without `--sheets`: screen every run under DIR (Table 2), propose anchors, and export the
//! candidates' packets and sheets for the annotators (OUT/screen.json, OUT/screen.sarif,
//! OUT/table2.md, OUT/packets/). With `--sheets R1.csv [R2.csv]` (the filled sheets, the
//! first deciding): import the confirmed cases (OUT/cases/), write Table 3 when two sheets are
//! given (OUT/table3.md), localize the confirmed cases (`--judge`, `--runs`; the offline
//! lexicon judge by default) and write the results and Table 5 (OUT/results/,
//! OUT/localize.sarif), then Tables 6-7 and Figures 5-6 (OUT/reliability/): origin
//! consistency over repeated runs and judges, and, with `--annotations`, agreement with the
//! annotators' provenance and introducing-write labels; without them, blinded annotation
//! packets (OUT/annotate/<annotator>/).

use super::{build_run, runtime, JudgeFlags, EXIT_INPUT_FAILED, EXIT_OK};
use anyhow::{Context, Result};
use sage_pipeline::confirm::{self, ExportOptions};
use sage_screen::{BanditMode, Options};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A folder of runs (run.json) and/or cases (case.json).
    pub dir: PathBuf,
    /// `text`: the tables and next steps on stdout. `json`: one JSON document on stdout
    /// naming every file the study wrote (the tables and next steps go to stderr).
    #[arg(long, value_enum, default_value_t = StudyFormat::Text)]
    pub format: StudyFormat,
    /// Folder for everything the study writes.
    #[arg(long, short)]
    pub out: PathBuf,
    /// Other tools' SARIF logs whose results become proposed anchors.
    #[arg(long, num_args = 1..)]
    pub sarif: Vec<PathBuf>,
    /// Do not run Bandit.
    #[arg(long)]
    pub no_bandit: bool,
    /// Interpreter to resolve imports against and run tests with.
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// Annotator names; the first labels every packet.
    #[arg(long, value_delimiter = ',', default_value = "R1,R2")]
    pub annotators: Vec<String>,
    /// Packets on each further annotator's sheet (a seeded random sample): confirmation
    /// packets, and with --sheets the annotation packets of provenance and introducing write.
    #[arg(long)]
    pub sample: Option<usize>,
    /// Seed of the further annotators' samples and of Table 6(b)'s task-disjoint partitions.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Export every screened run, not only the candidates.
    #[arg(long)]
    pub all: bool,
    /// The filled sheets (the first decides): import, Table 3, localize, Tables 6-7.
    #[arg(long, num_args = 1..=2)]
    pub sheets: Vec<PathBuf>,
    /// Judges that localize the confirmed cases (as `sage localize --judge`; default the
    /// offline lexicon judge). The first is the primary judge of Table 6(a); each further one
    /// is a cross judge.
    #[arg(
        long = "judge",
        value_name = "SPEC",
        value_delimiter = ',',
        requires = "sheets"
    )]
    pub judges: Vec<String>,
    /// Use this lexicon file instead of the embedded one.
    #[arg(long, value_name = "FILE", requires = "sheets")]
    pub lexicon: Option<PathBuf>,
    /// The annotators' labels of provenance and introducing write (docs/annotations.md, as
    /// `sage annotate import` stores them): Table 6(b), 6(c) and Table 7.
    #[arg(long, num_args = 1.., requires = "sheets")]
    pub annotations: Vec<PathBuf>,
    /// Task-disjoint random partitions of Table 6(b).
    #[arg(long, default_value_t = 1000)]
    pub partitions: usize,
    /// Judge requests in flight at once.
    /// Default: the judge's own (`concurrency` of a named judge; the local judge: 1), else 16.
    #[arg(long, value_parser = super::concurrency)]
    pub concurrency: Option<std::num::NonZeroUsize>,
    #[command(flatten)]
    pub judge_flags: JudgeFlags,
}

fn table2(r: &sage_screen::Report) -> String {
    let mut s = String::from(
        "## Table 2. Dataset construction by framework\n\n| Framework | Excluded runs | Valid \
         traces | Passed L0-L3 | Failed L0/L1 | SF candidates |\n|---|---|---|---|---|---|\n",
    );
    for row in &r.summary {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} |",
            row.framework, row.excluded, row.valid, row.passed, row.failed_l0_l1, row.candidates
        );
    }
    s
}

/// `sage study --format`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum StudyFormat {
    Text,
    Json,
}

/// With `--format json`, the human report goes to stderr (stdout carries the document).
static REPORT_TO_STDERR: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `out!` / `outln!` of the human report: stdout, or stderr under `--format json`.
macro_rules! report {
    ($($t:tt)*) => {
        if REPORT_TO_STDERR.load(std::sync::atomic::Ordering::Relaxed) {
            errout!($($t)*)
        } else {
            out!($($t)*)
        }
    };
}
macro_rules! reportln {
    ($($t:tt)*) => {
        if REPORT_TO_STDERR.load(std::sync::atomic::Ordering::Relaxed) {
            errln!($($t)*)
        } else {
            outln!($($t)*)
        }
    };
}

pub fn run(a: Args, rc: &super::RunConfig) -> Result<super::ExitStatus> {
    let json = a.format == StudyFormat::Json;
    REPORT_TO_STDERR.store(json, std::sync::atomic::Ordering::Relaxed);
    let status = run_study(&a, rc)?;
    if json {
        // every file under OUT, with its size: what this study wrote
        let mut files = Vec::new();
        for e in walkdir::WalkDir::new(&a.out)
            .sort_by_file_name()
            .into_iter()
            .flatten()
            .filter(|e| e.file_type().is_file())
        {
            let rel = e.path().strip_prefix(&a.out).unwrap_or(e.path());
            files.push(serde_json::json!({
                "path": rel.display().to_string(),
                "bytes": e.metadata().map(|m| m.len()).unwrap_or(0),
            }));
        }
        let doc = serde_json::json!({
            "out": a.out.display().to_string(),
            "stage": if a.sheets.is_empty() { "screen-and-export" } else { "import-and-localize" },
            "exit": status.code(),
            "files": files,
        });
        super::print_or_write(None, &(serde_json::to_string_pretty(&doc)? + "\n"))?;
    }
    Ok(status)
}

fn run_study(a: &Args, rc: &super::RunConfig) -> Result<super::ExitStatus> {
    std::fs::create_dir_all(&a.out)
        .with_context(|| format!("cannot create {}", a.out.display()))?;
    let packets = a.out.join("packets");
    if a.sheets.is_empty() {
        let (units, errors) = sage_pipeline::replay::units_from_runs(&a.dir, &rc.rules)?;
        if units.is_empty() && errors.is_empty() {
            anyhow::bail!("{}: no run.json or case.json found", a.dir.display());
        }
        for e in &errors {
            errln!("sage: error: {e}");
        }
        let opts = Options {
            python: a.python.clone(),
            bandit: if a.no_bandit {
                BanditMode::Off
            } else {
                BanditMode::Auto
            },
            test_timeout: Duration::from_secs(60),
            path: std::env::var_os("PATH"),
            ..Options::default()
        };
        let mut external = Vec::new();
        for f in &a.sarif {
            match sage_screen::sarif_in::read(f, &units) {
                Ok(x) => external.extend(x),
                Err(e) => {
                    errln!("sage: error: {e}");
                    return Ok(EXIT_INPUT_FAILED);
                }
            }
        }
        let mut report = sage_screen::screen(&units, &opts);
        sage_screen::propose::attach(&units, &mut report, &external, &opts.rules);
        report.errors = errors;
        let write = |name: &str, text: String| -> Result<()> {
            let p = a.out.join(name);
            std::fs::write(&p, text).with_context(|| format!("cannot write {}", p.display()))
        };
        write("screen.json", serde_json::to_string_pretty(&report)? + "\n")?;
        write(
            "screen.sarif",
            serde_json::to_string_pretty(&sage_screen::sarif::to_sarif(&report, &units))? + "\n",
        )?;
        let t2 = table2(&report);
        write("table2.md", t2.clone())?;
        report!("{t2}");
        let eopts = ExportOptions {
            annotators: a.annotators.clone(),
            sample: a.sample,
            seed: a.seed,
            all: a.all,
            rules: rc.rules.clone(),
        };
        match confirm::export(&report, &eopts, &packets) {
            Ok(s) => {
                reportln!("\n{} packets in {}", s.packets, packets.display());
                for (who, p, n) in s.sheets {
                    reportln!("sheet for {who}: {} ({n} packets)", p.display());
                }
                reportln!(
                    "next: fill the sheets, then sage study {} --out {} --sheets {}",
                    a.dir.display(),
                    a.out.display(),
                    a.annotators
                        .iter()
                        .take(2)
                        .map(|w| packets.join(format!("sheet-{w}.csv")).display().to_string())
                        .collect::<Vec<_>>()
                        .join(" ")
                );
            }
            Err(e) => {
                errln!("sage: error: {e}");
                return Ok(EXIT_INPUT_FAILED);
            }
        }
        return Ok(if report.errors.is_empty() {
            EXIT_OK
        } else {
            EXIT_INPUT_FAILED
        });
    }
    // After confirmation: import, Table 3, localize, Tables 6-7.
    let cases = a.out.join("cases");
    // The cases are rebuilt from the sheets on every run (they are a function of the
    // sheets), so a second run (with annotations, another judge) starts from the same folders.
    let staging = a.out.join("cases.importing");
    if staging.exists() {
        std::fs::remove_dir_all(&staging)
            .with_context(|| format!("cannot remove {}", staging.display()))?;
    }
    let s = match confirm::import(&packets, &a.sheets[0], &staging, &rc.rules) {
        Ok(s) => s,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging);
            // every bad cell of the sheet, one line each (as `annotate import` lists them)
            for line in e.to_string().lines() {
                errln!("sage: error: {line}");
            }
            return Ok(EXIT_INPUT_FAILED);
        }
    };
    if cases.exists() {
        std::fs::remove_dir_all(&cases)
            .with_context(|| format!("cannot replace {}", cases.display()))?;
    }
    if staging.exists() {
        std::fs::rename(&staging, &cases).with_context(|| {
            format!("cannot rename {} to {}", staging.display(), cases.display())
        })?;
    }
    reportln!(
        "{} confirmed case folders in {}",
        s.cases.len(),
        cases.display()
    );
    if a.sheets.len() == 2 {
        let key = confirm::Key::load(&packets).map_err(anyhow::Error::msg)?;
        let mut rows = Vec::new();
        for sh in &a.sheets {
            match confirm::read_sheet(sh, &key, false, &rc.rules) {
                Ok(r) => rows.push(r),
                Err(e) => {
                    errln!("sage: error: {e}");
                    return Ok(EXIT_INPUT_FAILED);
                }
            }
        }
        match confirm::agreement(confirm::matrix_of(&rows[0], &rows[1])) {
            Ok(ag) => {
                let md = confirm::render_markdown(
                    &ag,
                    &confirm::annotator_of(&a.sheets[0]),
                    &confirm::annotator_of(&a.sheets[1]),
                );
                std::fs::write(a.out.join("table3.md"), &md)?;
                report!("{md}");
            }
            Err(e) => errln!("sage: Table 3 not written: {e}"),
        }
    }
    if s.cases.is_empty() {
        reportln!("no confirmed case: nothing to localize");
        return Ok(EXIT_OK);
    }
    let built = build_run(
        &a.judges,
        a.lexicon.as_deref(),
        &a.judge_flags,
        a.concurrency,
        None,
        rc,
    )?;
    let mut opts = built.opts;
    let mut run_cases = sage_pipeline::localize::Cases::discover(&cases, &opts);
    if let Some(session) = &built.session {
        // the forecast reads every case first: the run scores the cases it read
        let ready = run_cases.prepare(&opts.rules);
        if let super::judges::Before::Exit(code) =
            super::judges::before_run(&cases, ready, &a.judge_flags, session, &built.llm)?
        {
            return Ok(code);
        }
    }
    let stats = built.session.as_ref().map(|s| s.stats().clone());
    if let Some(bar) = super::judges::Bar::new(a.judge_flags.no_progress, stats.clone()) {
        opts.progress = Some(std::sync::Arc::new(bar));
    }
    opts.stats = stats;
    let primary = opts.judges.first().map(|j| j.id().to_string());
    let mut set = runtime()?.block_on(sage_pipeline::localize::localize_cases(run_cases, &opts));
    if let Some(session) = &built.session {
        super::judges::after_run(session);
    }
    let results = a.out.join("results");
    // the results record where this run was made, so their case folders are found later
    set.case_root = std::env::current_dir()
        .ok()
        .map(|d| d.display().to_string());
    sage_pipeline::sink::write_results_dir(&results, &set)
        .with_context(|| format!("writing {}", results.display()))?;
    std::fs::write(
        a.out.join("localize.sarif"),
        serde_json::to_string_pretty(&sage_pipeline::sarif_view::to_sarif(&set, &rc.rules))? + "\n",
    )?;
    for sm in &set.summaries {
        reportln!("{}", sage_pipeline::report::render_summary(sm));
    }
    for sk in &set.skipped {
        errln!("sage: skipped {} ({}): {}", sk.case, sk.stage, sk.message);
    }
    reportln!("results in {}", results.display());
    if let Some(e) = built
        .session
        .as_ref()
        .and_then(|s| s.parts.tripped.lock().ok().and_then(|t| t.clone()))
    {
        errln!("sage: the run stopped: {e}; Tables 6-7 not written");
        return Ok(super::EXIT_FATAL);
    }
    let annotations_ok = tables_6_7(a, &set, primary, rc)?;
    Ok(if set.all_ok() && annotations_ok {
        EXIT_OK
    } else {
        EXIT_INPUT_FAILED
    })
}

/// Tables 6-7 (paper §4.2-4.3) from the localized confirmed cases: origin consistency over
/// the judges' repeated runs and across judges, and, with annotators' labels of provenance
/// and introducing write, agreement with them overall, across task subsets and by framework
/// and base model. Without labels, blinded annotation packets are exported for them.
/// Returns false when an annotation file could not be read whole.
fn tables_6_7(
    a: &Args,
    set: &sage_pipeline::results::ResultSet,
    primary: Option<String>,
    rc: &super::RunConfig,
) -> Result<bool> {
    // The lexicon judge is deterministic: its repeated runs are copies of run 0 and would
    // report perfect consistency. Only run 0 is rated.
    let mut rated = set.clone();
    let lexicon_runs: std::collections::BTreeSet<u32> = set
        .results
        .iter()
        .filter(|r| r.judge.name == "lexicon")
        .map(|r| r.run)
        .collect();
    rated
        .results
        .retain(|r| !(r.judge.name == "lexicon" && r.run > 0));
    let mut notes = Vec::new();
    if lexicon_runs.len() > 1 {
        notes.push(format!(
            "the lexicon judge is deterministic: its {} runs are identical by construction, so \
             only its first is rated (repeated scoring needs an LLM judge, e.g. --judge \
             openai:MODEL --runs 3)",
            lexicon_runs.len()
        ));
    }
    let judges: std::collections::BTreeSet<String> =
        rated.results.iter().map(|r| r.judge.to_string()).collect();
    let repeated = rated.results.iter().any(|r| r.run > 0);
    if judges.len() < 2 && !repeated && lexicon_runs.len() < 2 {
        notes.push(
            "Table 6(a) needs repeated runs of an LLM judge (--runs N) or a second judge \
             (--judge SPEC, repeatable): one judge run gives one origin per case"
                .into(),
        );
    }
    let (annotators, bad) = super::reliability::read_annotations(&a.annotations);
    if !a.annotations.is_empty() && annotators.is_empty() {
        errln!("sage: error: no annotation could be read; Tables 6(b), 6(c) and 7 need them");
    }
    let (input, more) = sage_pipeline::from_results::report_input(
        &[(a.out.join("results").display().to_string(), rated)],
        annotators,
        primary,
        a.partitions,
        a.seed,
        sage_reliability::Level::Nominal,
    );
    for (annotator, unknown) in super::reliability::labels_outside(&input) {
        errln!(
            "sage: warning: {unknown} case(s) labelled by {annotator} are not confirmed cases \
             of this study"
        );
    }
    let mut report = sage_reliability::report::build(&input);
    report.notes.extend(more);
    report.notes.extend(notes);
    if a.annotations.is_empty() {
        // In place of the report's own "no human annotations" note: what to do about it.
        report
            .notes
            .retain(|n| !n.starts_with("no human annotations given"));
        report.notes.push(annotation_packets(a, set, rc)?);
    }
    let dir = a.out.join("reliability");
    super::reliability::write_outputs(&dir, &report)?;
    report!("\n{}", sage_reliability::report::markdown(&report));
    reportln!("Tables 6-7 and Figures 5-6 in {}", dir.display());
    Ok(!bad)
}

/// Blinded packets for the annotators' provenance and introducing-write labels (the first
/// annotator labels every case, the others `--sample` of them), unless an earlier export is
/// there: its sheets can only be imported with its key. Returns what to do next.
fn annotation_packets(
    a: &Args,
    set: &sage_pipeline::results::ResultSet,
    rc: &super::RunConfig,
) -> Result<String> {
    let root = a.out.join("annotate");
    let mut sheets = Vec::new();
    for (i, who) in a.annotators.iter().enumerate() {
        let out = root.join(sage_trace::safe::file_stem(who));
        let sheet = out.join("packet").join("sheet.csv");
        if out.join("key.json").exists() {
            reportln!("annotation packets for {who}: kept {}", out.display());
        } else {
            let opts = sage_pipeline::annotate::ExportOptions {
                annotator: who.clone(),
                out: out.clone(),
                sample: if i == 0 { None } else { a.sample },
                seed: a.seed,
                stratify_by: None,
                // the set was made by this run: its case folders are as written
                locator: sage_pipeline::locate::CaseLocator::default(),
                rules: rc.rules.clone(),
            };
            let rep = sage_pipeline::annotate::export(set, &opts).map_err(anyhow::Error::msg)?;
            for f in &rep.failures {
                errln!("sage: annotation packet not written: {f}");
            }
            reportln!(
                "annotation packets for {who}: {} cases, sheet {}",
                rep.packets,
                sheet.display()
            );
        }
        sheets.push((who.clone(), out, sheet));
    }
    let store = a.out.join("annotations");
    let imports: Vec<String> = sheets
        .iter()
        .map(|(_, out, sheet)| {
            format!(
                "sage annotate import {} --key {} --results {} --store {}",
                sheet.display(),
                out.join("key.json").display(),
                a.out.join("results").display(),
                store.display()
            )
        })
        .collect();
    Ok(format!(
        "no annotations given: Table 6(b), 6(c) and the provenance and introducing-write \
         columns of Table 7 need the annotators' labels; fill the sheets, then {}, and re-run \
         with --annotations {}",
        imports.join("; "),
        sheets
            .iter()
            .map(|(who, _, _)| store
                .join(format!("{}.csv", sage_trace::safe::file_stem(who)))
                .display()
                .to_string())
            .collect::<Vec<_>>()
            .join(" ")
    ))
}
