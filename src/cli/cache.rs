//! `sage cache stats|prune|merge`: inspect, trim and merge judgment ledgers.

use clap::{Args, Subcommand};
use comfy_table::Table;
use sage_judge::llm::ledger::{Ledger, MergeError, PruneFilter, DEFAULT_LEDGER_DIR};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct CacheArgs {
    /// The ledger directory.
    #[arg(long, global = true, default_value = DEFAULT_LEDGER_DIR)]
    pub ledger: PathBuf,
    #[command(subcommand)]
    pub action: CacheAction,
}

#[derive(Subcommand, Debug)]
pub enum CacheAction {
    /// Entries, tokens and cost per backend, model and rubric version.
    Stats {
        #[command(flatten)]
        out: super::OutputArgs,
        /// The same as `--format json` (kept for scripts written before `--format`).
        #[arg(long, hide = true)]
        json: bool,
    },
    /// Remove entries; conditions combine (all must hold). Leftover temporary files from
    /// killed runs are always removed.
    Prune {
        /// Remove every entry.
        #[arg(long)]
        all: bool,
        #[arg(long)]
        backend: Option<String>,
        #[arg(long)]
        model: Option<String>,
        /// Remove entries of this rubric version (e.g. `sage-rubric/1`).
        #[arg(long)]
        rubric_version: Option<String>,
        /// Remove entries of every rubric version except this one.
        #[arg(long)]
        keep_rubric_version: Option<String>,
        /// Remove entries recorded more than this many days ago.
        #[arg(long)]
        older_than_days: Option<u64>,
        /// Also remove entries that cannot be read.
        #[arg(long)]
        unreadable: bool,
        /// Show what would be removed.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        out: super::OutputArgs,
    },
    /// Merge ledgers (e.g. of `--shard i/n` runs on several machines) into one. Two
    /// different answers to the same call are refused, naming both files; nothing is
    /// written then.
    Merge {
        /// The ledgers to merge.
        #[arg(required = true, value_name = "LEDGER")]
        ledgers: Vec<PathBuf>,
        /// The merged ledger (created, or added to).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
}

pub fn run(args: CacheArgs) -> anyhow::Result<super::ExitStatus> {
    let ledger = Ledger::new(&args.ledger);
    match args.action {
        CacheAction::Merge { ledgers, out } => {
            for l in &ledgers {
                anyhow::ensure!(l.is_dir(), "{}: no such ledger folder", l.display());
            }
            let inputs: Vec<Ledger> = ledgers.iter().map(Ledger::new).collect();
            match sage_judge::llm::ledger::merge(&inputs, &Ledger::new(&out)) {
                Ok(r) => {
                    errln!(
                        "sage: merged {} ledger(s) into {}: {} entr(ies) copied, {} identical kept once, {} batch record(s)",
                        ledgers.len(),
                        out.display(),
                        r.copied,
                        r.identical,
                        r.batches
                    );
                    Ok(super::EXIT_OK)
                }
                Err(MergeError::Conflict(m)) => {
                    errln!("sage: error: cache merge: {m}");
                    Ok(super::EXIT_FATAL)
                }
                Err(e) => Err(e.into()),
            }
        }
        CacheAction::Stats { mut out, json } => {
            // A mistyped --ledger would otherwise read as an empty ledger.
            if !args.ledger.is_dir() {
                errln!(
                    "sage: error: {}: no ledger here (it is created by the first judged run)",
                    args.ledger.display()
                );
                return Ok(super::ExitStatus::InputFailed);
            }
            let st = ledger.stats()?;
            if json {
                out.format = super::TableOrJson::Json;
            }
            let table = || {
                let mut t = Table::new();
                super::width::fit_table(&mut t);
                t.set_header(vec![
                    "backend",
                    "model",
                    "rubric",
                    "entries",
                    "batch",
                    "prompt tok",
                    "cached",
                    "output tok",
                    "cost USD",
                    "mean latency ms",
                    "size",
                ]);
                for ((b, m, r), g) in &st.groups {
                    t.add_row(vec![
                        b.clone(),
                        m.clone(),
                        r.clone(),
                        g.entries.to_string(),
                        g.from_batch.to_string(),
                        g.input_tokens.to_string(),
                        g.cached_input_tokens.to_string(),
                        g.output_tokens.to_string(),
                        format!("{:.4}", g.cost_usd),
                        (g.latency_ms / g.entries.max(1)).to_string(),
                        human_bytes(g.bytes),
                    ]);
                }
                let mut s = format!("ledger {}\n", args.ledger.display());
                if st.groups.is_empty() {
                    s.push_str("(empty)\n");
                } else {
                    s.push_str(&format!("{t}\n"));
                }
                if st.temp_files > 0 || st.unreadable > 0 {
                    s.push_str(&format!(
                        "{} leftover temporary file(s), {} unreadable entr(ies): `sage cache prune --unreadable` removes them\n",
                        st.temp_files, st.unreadable
                    ));
                }
                s
            };
            let json = || {
                let groups: Vec<_> = st
                    .groups
                    .iter()
                    .map(|((b, m, r), g)| {
                        serde_json::json!({
                            "backend": b, "model": m, "rubric_version": r,
                            "entries": g.entries, "from_batch": g.from_batch, "bytes": g.bytes,
                            "input_tokens": g.input_tokens, "cached_input_tokens": g.cached_input_tokens,
                            "output_tokens": g.output_tokens, "cost_usd": g.cost_usd,
                        })
                    })
                    .collect();
                serde_json::json!({
                    "ledger": args.ledger.display().to_string(),
                    "groups": groups,
                    "temp_files": st.temp_files,
                    "unreadable": st.unreadable,
                })
            };
            out.emit(table, json)?;
            Ok(super::ExitStatus::Ok)
        }
        CacheAction::Prune {
            all,
            backend,
            model,
            rubric_version,
            keep_rubric_version,
            older_than_days,
            unreadable,
            dry_run,
            out,
        } => {
            let f = PruneFilter {
                all,
                backend,
                model,
                rubric_version,
                keep_rubric_version,
                older_than: older_than_days.map(|d| Duration::from_secs(d * 86400)),
                unreadable,
                dry_run,
            };
            if f.is_empty() && !unreadable {
                errln!(
                    "sage cache prune: say what to remove (--all, --backend, --model, --rubric-version, \
                     --keep-rubric-version, --older-than-days, --unreadable)"
                );
                return Ok(super::ExitStatus::Fatal);
            }
            let r = ledger.prune(&f)?;
            out.emit(
                || {
                    format!(
                        "{} {} file(s) ({}), kept {}",
                        if dry_run { "would remove" } else { "removed" },
                        r.files,
                        human_bytes(r.bytes),
                        r.kept
                    )
                },
                || {
                    serde_json::json!({
                        "dry_run": dry_run, "removed_files": r.files,
                        "removed_bytes": r.bytes, "kept": r.kept
                    })
                },
            )?;
            Ok(super::ExitStatus::Ok)
        }
    }
}

fn human_bytes(b: u64) -> String {
    if b >= 1 << 20 {
        format!("{:.1} MiB", b as f64 / (1 << 20) as f64)
    } else if b >= 1 << 10 {
        format!("{:.1} KiB", b as f64 / 1024.0)
    } else {
        format!("{b} B")
    }
}
