//! `sage annotate export|import`: blinded packets for human annotators, and their labels back.

use super::{EXIT_INPUT_FAILED, EXIT_OK};
use anyhow::Context;
use sage_pipeline::annotate::{self, ExportOptions, Key};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub action: Action,
}

#[derive(clap::Subcommand, Debug)]
pub enum Action {
    /// Write blinded packets (sheet.csv, packets.json, one text per case) for an annotator.
    Export {
        /// A `sage localize` results file (results.json) or results folder.
        results: PathBuf,
        /// The annotator's short name (R1, R2, ...).
        #[arg(long)]
        annotator: String,
        /// Output folder: `packet/` goes to the annotator, `key.json` stays with you.
        #[arg(long)]
        out: PathBuf,
        /// Annotate a random sample of N cases instead of all.
        #[arg(long, value_name = "N")]
        sample: Option<usize>,
        /// Seed of the sample and of the packet order.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Keep the sample proportional across framework, base_model, dataset, category,
        /// condition or cwe.
        #[arg(long, value_name = "FIELD")]
        stratify_by: Option<String>,
        /// Replace an existing OUT/key.json (the old one is kept as key.<time>.json): the
        /// sheets of the earlier export can only be imported with it.
        #[arg(long)]
        force: bool,
        /// The case folders moved: `OLD=NEW` rewrites the start of each result's case folder
        /// (repeatable). Without it they are looked for from here and beside the results.
        #[arg(long, value_name = "OLD=NEW")]
        relocate: Vec<String>,
    },
    /// Validate a filled sheet and store its labels for `sage reliability`.
    Import {
        /// The filled sheet (CSV).
        file: PathBuf,
        /// The export's key.json (maps packet ids back to case ids).
        #[arg(long)]
        key: Option<PathBuf>,
        /// Results of the cases, to check that an introducing write is a write turn.
        #[arg(long)]
        results: Option<PathBuf>,
        /// Where annotations are stored (one CSV per annotator).
        #[arg(long, default_value = "annotations")]
        store: PathBuf,
        #[command(flatten)]
        out: super::OutputArgs,
    },
}

/// Whether a sheet identifies its rows by packet id only (so it needs the key).
fn names_packets_only(text: &str) -> bool {
    let mut rdr = csv::ReaderBuilder::new()
        .flexible(true)
        .from_reader(text.as_bytes());
    let Ok(h) = rdr.headers() else {
        return false;
    };
    let has = |n: &str| h.iter().any(|c| c.trim().eq_ignore_ascii_case(n));
    has("packet_id") && !has("case_id")
}

/// Read a results file or folder.
pub fn read_results(path: &Path) -> anyhow::Result<sage_pipeline::results::ResultSet> {
    sage_pipeline::results::ResultSet::read(path).map_err(anyhow::Error::msg)
}

pub fn run(a: Args, rc: &super::RunConfig) -> anyhow::Result<super::ExitStatus> {
    match a.action {
        Action::Export {
            results,
            annotator,
            out,
            sample,
            seed,
            stratify_by,
            force,
            relocate,
        } => {
            let key_path = out.join("key.json");
            if key_path.exists() {
                if !force {
                    errln!(
                        "sage: error: {} exists: the sheets of that export need it to be \
                         imported; choose another --out, or --force to replace it (the old \
                         key is kept beside it)",
                        key_path.display()
                    );
                    return Ok(super::EXIT_FATAL);
                }
                let secs = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                let kept = out.join(format!("key.{secs}.json"));
                std::fs::rename(&key_path, &kept)
                    .with_context(|| format!("keeping the old key as {}", kept.display()))?;
                errln!("sage: the old key is kept as {}", kept.display());
            }
            let set = read_results(&results)?;
            let locator = sage_pipeline::locate::CaseLocator::for_set(&results, &set)
                .with_relocations(&relocate)
                .map_err(anyhow::Error::msg)?;
            let report = annotate::export(
                &set,
                &ExportOptions {
                    annotator,
                    out: out.clone(),
                    sample,
                    seed,
                    stratify_by,
                    locator,
                    rules: rc.rules.clone(),
                },
            )?;
            for f in &report.failures {
                errln!("sage: could not package {}", sage_llm::secrets::scrub(f));
            }
            outln!(
                "{} packet(s) in {}; keep {} to import the filled sheet",
                report.packets,
                out.join("packet").display(),
                out.join("key.json").display()
            );
            Ok(if report.failures.is_empty() {
                EXIT_OK
            } else {
                EXIT_INPUT_FAILED
            })
        }
        Action::Import {
            file,
            key,
            results,
            store,
            out,
        } => {
            let text = super::read_input(&file)?;
            if key.is_none() && names_packets_only(&text) {
                errln!(
                    "sage: error: --key is required: {} names packets (packet_id) and only the \
                     export's key.json maps them to cases",
                    file.display()
                );
                return Ok(super::EXIT_FATAL);
            }
            let key: Option<Key> = match key {
                Some(k) => Some(
                    sage_trace::json::parse(
                        &std::fs::read_to_string(&k)
                            .with_context(|| format!("reading {}", k.display()))?,
                    )
                    .with_context(|| format!("{} is not an annotation key", k.display()))?,
                ),
                None => None,
            };
            let mut write_turns: BTreeMap<String, Vec<usize>> = BTreeMap::new();
            if let Some(r) = results {
                for res in read_results(&r)?.results {
                    // Only the final state shows the change: any turn may be the annotator's
                    // introducing write, so there is no write turn to hold them to.
                    let unreplayed = res.provenance.introducing_write_cannot_determine
                        || res.provenance.introducing_write.is_some_and(|w| w.deduced);
                    if unreplayed {
                        continue;
                    }
                    let turns = res
                        .turns
                        .iter()
                        .filter(|t| !t.writes.is_empty())
                        .map(|t| t.turn)
                        .collect();
                    write_turns.insert(res.case_id, turns);
                }
            }
            let (rows, errors) = annotate::validate_sheet(&text, key.as_ref(), &write_turns);
            for e in &errors {
                errln!(
                    "sage: {}:{}: {}",
                    file.display(),
                    e.line,
                    sage_llm::secrets::scrub(&e.message)
                );
            }
            let written = annotate::store(&store, &rows)?;
            let files: Vec<String> = written.iter().map(|p| p.display().to_string()).collect();
            out.emit(
                || {
                    format!(
                        "{} annotation(s) stored ({}), {} bad row(s)",
                        rows.len(),
                        files.join(", "),
                        errors.len()
                    )
                },
                || {
                    serde_json::json!({
                        "stored": rows.len(),
                        "files": files,
                        "bad_rows": errors.iter().map(|e| serde_json::json!({
                            "file": file.display().to_string(), "line": e.line, "message": e.message
                        })).collect::<Vec<_>>(),
                    })
                },
            )?;
            Ok(if errors.is_empty() {
                EXIT_OK
            } else {
                EXIT_INPUT_FAILED
            })
        }
    }
}
