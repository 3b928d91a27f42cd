//! `sage reliability RESULTS... [--annotations FILE...] --out DIR`: the paper's reliability
//! report (Tables 6-7, Figures 5-6) from `sage localize` result sets and human annotations.

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use sage_pipeline::from_results::report_input;
use sage_pipeline::results::{ResultSet, RESULTS_VERSION};
use sage_reliability::annotations::parse_annotations;
use sage_reliability::report::{build, figure5_svg, figure6_svg, markdown, schema, Annotations};
use sage_reliability::Level;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TurnLevel {
    Nominal,
    Ordinal,
    Interval,
}

#[derive(Debug, Args)]
pub struct ReliabilityArgs {
    /// Result sets written by `sage localize` (JSON): repeated runs of a judge, other judges.
    #[arg(required = true)]
    pub results: Vec<PathBuf>,
    /// Human annotation CSV files (docs/annotations.md).
    #[arg(long, num_args = 1..)]
    pub annotations: Vec<PathBuf>,
    /// Output folder for reliability.md, reliability.json, figure5.svg, figure6.svg.
    #[arg(long)]
    pub out: PathBuf,
    /// The primary judge (as printed in the report, `name:model (rubric v)`); default: the
    /// judge of the first result set.
    #[arg(long)]
    pub primary_judge: Option<String>,
    /// Task-disjoint random partitions.
    #[arg(long, default_value_t = 1000)]
    pub partitions: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Level of measurement of the origin-turn alpha.
    #[arg(long, value_enum, default_value = "nominal")]
    pub turn_level: TurnLevel,
    /// What to print: the one-line summary and notes, or the whole report as JSON (the
    /// files in --out are written either way).
    #[command(flatten)]
    pub print: super::OutputArgs,
}

fn read_set(path: &Path) -> Result<ResultSet> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{}: cannot read", path.display()))?;
    let set: ResultSet = sage_trace::json::parse(&text)
        .with_context(|| format!("{}: not a sage localize result set", path.display()))?;
    if set.version != RESULTS_VERSION {
        anyhow::bail!(
            "{}: version {:?}, expected {RESULTS_VERSION}",
            path.display(),
            set.version
        );
    }
    Ok(set)
}

pub fn run(args: ReliabilityArgs) -> Result<super::ExitStatus> {
    let mut failed = false;
    let mut sets = Vec::new();
    for p in &args.results {
        match read_set(p) {
            Ok(s) => sets.push((p.display().to_string(), s)),
            Err(e) => {
                errln!("sage: error: {e:#}");
                failed = true;
            }
        }
    }
    if sets.is_empty() {
        errln!("sage: error: no result set could be read");
        return Ok(super::ExitStatus::Fatal);
    }
    if let Some(msg) = identical_sets(&sets) {
        errln!("sage: error: {msg}");
        return Ok(super::ExitStatus::Fatal);
    }
    for w in deterministic_repeats(&sets) {
        errln!("warning: {w}");
    }
    let (annotators, bad) = read_annotations(&args.annotations);
    failed |= bad;
    let level = match args.turn_level {
        TurnLevel::Nominal => Level::Nominal,
        TurnLevel::Ordinal => Level::Ordinal,
        TurnLevel::Interval => Level::Interval,
    };
    let (input, notes) = report_input(
        &sets,
        annotators,
        args.primary_judge.clone(),
        args.partitions,
        args.seed,
        level,
    );
    // Annotated cases missing from the results are reported, not silently dropped.
    for (annotator, unknown) in labels_outside(&input) {
        errln!("warning: {unknown} case(s) annotated by {annotator} are not in the results");
    }
    let mut report = build(&input);
    report.notes.extend(notes);
    if let Err(e) = write_outputs(&args.out, &report) {
        errln!("sage: error: {e:#}");
        return Ok(super::ExitStatus::Fatal);
    }
    let printed = args.print.emit(
        || {
            let mut t = format!(
                "{} cases, {} judge(s), {} annotator(s) → {}",
                report.cases,
                report.judges.len(),
                report.annotators.len(),
                args.out.display()
            );
            for n in &report.notes {
                t.push_str(&format!("\nnote: {n}"));
            }
            t
        },
        || {
            serde_json::to_value(schema::ReliabilityReport::from(report.clone()))
                .unwrap_or_default()
        },
    );
    if let Err(e) = printed {
        errln!("sage: error: {e:#}");
        return Ok(super::ExitStatus::Fatal);
    }
    Ok(super::failed_if(failed))
}

/// Per annotator, how many of their labelled cases the results do not hold (only those
/// with some), in the order of the input.
pub fn labels_outside(input: &sage_reliability::report::ReportInput) -> Vec<(String, usize)> {
    let known: BTreeSet<&str> = input.cases.iter().map(|c| c.case_id.as_str()).collect();
    input
        .annotators
        .iter()
        .map(|a| {
            let unknown = a
                .labels
                .iter()
                .filter(|l| !known.contains(l.case_id.as_str()))
                .count();
            (a.annotator.clone(), unknown)
        })
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// Human annotation files (docs/annotations.md), merged per annotator. Every bad row or file
/// is named on stderr; the second value says whether any was.
pub fn read_annotations(paths: &[PathBuf]) -> (Vec<Annotations>, bool) {
    let mut annotators: Vec<Annotations> = Vec::new();
    let mut failed = false;
    for p in paths {
        let text = match std::fs::read_to_string(p) {
            Ok(t) => t,
            Err(e) => {
                errln!("sage: error: {}: cannot read: {e}", p.display());
                failed = true;
                continue;
            }
        };
        let (found, errors) = parse_annotations(&text);
        for e in errors {
            errln!(
                "sage: error: {} line {}: {}",
                p.display(),
                e.line,
                e.message
            );
            failed = true;
        }
        for a in found {
            match annotators.iter_mut().find(|x| x.annotator == a.annotator) {
                Some(x) => {
                    let have: BTreeSet<String> =
                        x.labels.iter().map(|l| l.case_id.clone()).collect();
                    for l in a.labels {
                        if have.contains(&l.case_id) {
                            errln!(
                                "sage: warning: {}: case {} is annotated by {} in an earlier file too; \
                                 the earlier label is kept",
                                p.display(),
                                l.case_id,
                                a.annotator
                            );
                            failed = true;
                        } else {
                            x.labels.push(l);
                        }
                    }
                }
                None => annotators.push(a),
            }
        }
    }
    (annotators, failed)
}

/// Two result sets with the same per-case results are not two runs: agreement between them
/// is 1 by construction (the same file given twice, or a copy). Refused, naming both.
fn identical_sets(sets: &[(String, ResultSet)]) -> Option<String> {
    let keys: Vec<String> = sets
        .iter()
        .map(|(_, s)| serde_json::to_string(&s.results).unwrap_or_default())
        .collect();
    for i in 0..sets.len() {
        for j in i + 1..sets.len() {
            if keys[i] == keys[j] && !sets[i].1.results.is_empty() {
                return Some(format!(
                    "{} and {} hold identical results; repeated runs must be scored \
                     independently (the same file given twice, or a deterministic judge run \
                     twice, would report perfect consistency)",
                    sets[i].0, sets[j].0
                ));
            }
        }
    }
    None
}

/// Judges that give the same answer every time (the lexicon judge) make repeated scoring
/// trivially consistent: warn for each such judge scored more than once.
fn deterministic_repeats(sets: &[(String, ResultSet)]) -> Vec<String> {
    let mut runs: std::collections::BTreeMap<String, BTreeSet<(usize, u32)>> = Default::default();
    for (i, (_, s)) in sets.iter().enumerate() {
        for r in &s.results {
            if r.judge.name == "lexicon" {
                runs.entry(r.judge.to_string())
                    .or_default()
                    .insert((i, r.run));
            }
        }
    }
    runs.into_iter()
        .filter(|(_, r)| r.len() > 1)
        .map(|(j, r)| {
            format!(
                "judge {j} is deterministic: its {} repeated runs agree by construction, so \
                 \"repeated scoring\" says nothing about it (use an LLM judge)",
                r.len()
            )
        })
        .collect()
}

pub fn write_outputs(
    out: &Path,
    report: &sage_reliability::report::ReliabilityReport,
) -> Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("{}: cannot create", out.display()))?;
    let write = |name: &str, body: String| -> Result<()> {
        let p = out.join(name);
        std::fs::write(&p, body).with_context(|| format!("{}: cannot write", p.display()))
    };
    write("reliability.md", markdown(report))?;
    write(
        "reliability.json",
        serde_json::to_string_pretty(&schema::ReliabilityReport::from(report.clone()))? + "\n",
    )?;
    write("figure5.svg", figure5_svg(report))?;
    write("figure6.svg", figure6_svg(report))?;
    Ok(())
}
