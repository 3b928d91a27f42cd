//! `sage confirm`: manual confirmation of screened candidates (export, import, report).

use anyhow::{Context, Result};
use clap::{Args as ClapArgs, Subcommand};
use sage_pipeline::confirm::{self, ConfirmError, ExportOptions};
use std::path::PathBuf;

#[derive(ClapArgs, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub command: Cmd,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Blinded packets and one sheet per annotator from a screen report (`sage screen DIR
    /// --format json -o screen.json`).
    Export(ExportArgs),
    /// Validate the deciding annotator's sheet and write confirmed case folders (TP, Partial).
    Import(ImportArgs),
    /// Table 3: agreement of two annotators' sheets, or of an R1×R2 count matrix.
    Report(ReportArgs),
}

#[derive(ClapArgs, Debug)]
pub struct ExportArgs {
    /// The screen report (JSON) whose candidates to export.
    pub screen: PathBuf,
    /// Folder for the packets, sheets and key.json.
    #[arg(long, short)]
    pub out: PathBuf,
    /// Annotator names, comma-separated; the first labels every packet.
    #[arg(long, value_delimiter = ',', default_value = "R1,R2")]
    pub annotators: Vec<String>,
    /// Packets on each further annotator's sheet (a seeded random sample).
    #[arg(long)]
    pub sample: Option<usize>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Export every screened run, not only the candidates.
    #[arg(long)]
    pub all: bool,
}

#[derive(ClapArgs, Debug)]
pub struct ImportArgs {
    /// The export folder (holding key.json).
    pub export: PathBuf,
    /// The deciding sheet (after disagreements are resolved), e.g. sheet-R1.csv.
    pub sheet: PathBuf,
    /// Folder for the confirmed case folders.
    #[arg(long, short)]
    pub out: PathBuf,
}

#[derive(ClapArgs, Debug)]
pub struct ReportArgs {
    /// The export folder (holding key.json); with two sheets.
    #[arg(long, requires = "sheets")]
    pub export: Option<PathBuf>,
    /// Two sheets: rows R1, columns R2.
    #[arg(long, num_args = 2)]
    pub sheets: Vec<PathBuf>,
    /// An R1×R2 count matrix (CSV, rows and columns TP, Partial, FP) instead of sheets.
    #[arg(long, conflicts_with_all = ["sheets", "export"])]
    pub counts: Option<PathBuf>,
    /// Table 3 as Markdown (table), or the agreement as JSON; `-o FILE` writes it instead.
    #[command(flatten)]
    pub out: super::OutputArgs,
    /// The same as `--format json` (kept for scripts written before `--format`).
    #[arg(long, hide = true)]
    pub json: bool,
}

fn input(e: ConfirmError) -> Result<super::ExitStatus> {
    // a sheet with several bad rows: one line each
    for line in e.to_string().lines() {
        errln!("sage: error: {line}");
    }
    Ok(super::EXIT_INPUT_FAILED)
}

pub fn run(a: Args, rc: &super::RunConfig) -> Result<super::ExitStatus> {
    match a.command {
        Cmd::Export(x) => {
            let text = std::fs::read_to_string(&x.screen)
                .with_context(|| format!("cannot read {}", x.screen.display()))?;
            let report: sage_screen::Report = match sage_trace::json::parse(&text) {
                Ok(r) => r,
                Err(e) => {
                    errln!(
                        "sage: error: {}: not a screen report (sage screen --format json): {e}",
                        x.screen.display()
                    );
                    return Ok(super::EXIT_INPUT_FAILED);
                }
            };
            let opts = ExportOptions {
                annotators: x.annotators,
                sample: x.sample,
                seed: x.seed,
                all: x.all,
                rules: rc.rules.clone(),
            };
            match confirm::export(&report, &opts, &x.out) {
                Ok(s) => {
                    outln!("{} packets in {}", s.packets, x.out.display());
                    for (who, p, n) in s.sheets {
                        outln!("sheet for {who}: {} ({n} packets)", p.display());
                    }
                    outln!(
                        "key: {} (packet → run; keep it from the annotators)",
                        x.out.join(confirm::KEY_NAME).display()
                    );
                    Ok(super::EXIT_OK)
                }
                Err(e) => input(e),
            }
        }
        Cmd::Import(x) => match confirm::import(&x.export, &x.sheet, &x.out, &rc.rules) {
            Ok(s) => {
                let labels: Vec<String> =
                    s.by_label.iter().map(|(k, v)| format!("{k} {v}")).collect();
                outln!(
                    "{} packets labelled ({}); {} confirmed case folders in {}",
                    s.labelled,
                    labels.join(", "),
                    s.cases.len(),
                    x.out.display()
                );
                Ok(super::EXIT_OK)
            }
            Err(e) => input(e),
        },
        Cmd::Report(x) => {
            let (matrix, r1, r2) = if let Some(c) = &x.counts {
                match confirm::read_counts(c) {
                    Ok(m) => (m, "R1".to_string(), "R2".to_string()),
                    Err(e) => return input(e),
                }
            } else {
                let Some(export) = &x.export else {
                    anyhow::bail!("give --counts FILE, or --export DIR with --sheets A B");
                };
                let key = match confirm::Key::load(export) {
                    Ok(k) => k,
                    Err(e) => return input(e),
                };
                let mut rows = Vec::new();
                for s in &x.sheets {
                    match confirm::read_sheet(s, &key, false, &rc.rules) {
                        Ok(r) => rows.push(r),
                        Err(e) => return input(e),
                    }
                }
                (
                    confirm::matrix_of(&rows[0], &rows[1]),
                    confirm::annotator_of(&x.sheets[0]),
                    confirm::annotator_of(&x.sheets[1]),
                )
            };
            match confirm::agreement(matrix) {
                Ok(a) => {
                    let mut out = x.out.clone();
                    if x.json {
                        out.format = super::TableOrJson::Json;
                    }
                    out.emit(
                        || confirm::render_markdown(&a, &r1, &r2),
                        || serde_json::to_value(&a).unwrap_or_default(),
                    )?;
                    Ok(super::EXIT_OK)
                }
                Err(e) => input(e),
            }
        }
    }
}
