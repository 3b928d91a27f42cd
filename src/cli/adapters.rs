//! `sage adapters [--format table|json] [--show NAME]`: the trace formats sage reads, the
//! versions covered, and where each mapping lives. `sage adapters detect FILE...`: every
//! adapter's score on the file, the evidence and the verdict.

use clap::{Args as ClapArgs, Subcommand, ValueEnum};
use comfy_table::Table;
use sage_adapters::{self, EMBEDDED_MAPPINGS};

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Output format (also after `detect`).
    #[arg(long, global = true, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Write what would be printed to FILE instead (replaced whole; also after `detect`).
    #[arg(long = "output", short = 'o', global = true, value_name = "FILE")]
    pub output: Option<std::path::PathBuf>,
    /// Print the embedded mapping file of this adapter (a starting point for `--adapter`).
    #[arg(long)]
    pub show: Option<String>,
    #[command(subcommand)]
    pub action: Option<Action>,
}

#[derive(Subcommand, Debug)]
pub enum Action {
    /// Score every adapter on FILE (a sample across the whole file) and print the evidence:
    /// the file's structure, each adapter's score and matched rule, and the verdict.
    /// Exit 1 when some file has no verdict (not a trace, not recognized, ambiguous).
    Detect {
        #[arg(required = true)]
        files: Vec<std::path::PathBuf>,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Format {
    Table,
    Json,
}

pub fn run(args: Args, rc: &super::RunConfig) -> anyhow::Result<super::ExitStatus> {
    if let Some(Action::Detect { files }) = &args.action {
        let (text, rc) = detect(files, args.format, &rc.rules.adapters);
        super::print_or_write(args.output.as_deref(), &text)?;
        return Ok(rc);
    }
    if let Some(name) = &args.show {
        return match EMBEDDED_MAPPINGS.iter().find(|(n, _)| n == name) {
            Some((_, text)) => {
                super::print_or_write(args.output.as_deref(), text)?;
                Ok(super::ExitStatus::Ok)
            }
            None => {
                errln!(
                    "sage: error: {name:?} has no mapping file (parsed by code, or unknown); see `sage adapters`"
                );
                Ok(super::ExitStatus::Fatal)
            }
        };
    }
    let rows: Vec<(String, String, String)> = sage_adapters::registry()
        .iter()
        .map(|a| {
            let mapping = match a.mapping() {
                Some(m) => format!("mappings/{}.toml v{}", m.name(), m.file.adapter.version),
                None => "code".to_string(),
            };
            (a.name().to_string(), mapping, a.versions().to_string())
        })
        .collect();
    let text = match args.format {
        Format::Table => {
            let mut t = Table::new();
            super::width::fit_table(&mut t);
            t.set_header(vec!["framework", "mapping", "versions and formats covered"]);
            for (n, m, v) in &rows {
                t.add_row(vec![n, m, v]);
            }
            format!("{t}\n")
        }
        Format::Json => {
            let v: Vec<_> = rows
                .iter()
                .map(|(n, m, v)| serde_json::json!({"framework": n, "mapping": m, "versions": v}))
                .collect();
            serde_json::to_string_pretty(&v).unwrap_or_default() + "\n"
        }
    };
    super::print_or_write(args.output.as_deref(), &text)?;
    Ok(super::ExitStatus::Ok)
}

/// The evidence of each file (text or JSON) and the exit status (1 when a file has no verdict).
fn detect(
    files: &[std::path::PathBuf],
    format: Format,
    rules: &sage_adapters::Rules,
) -> (String, super::ExitStatus) {
    let reg = sage_adapters::registry();
    let mut rc = super::ExitStatus::Ok;
    let mut all = Vec::new();
    let mut text = String::new();
    for f in files {
        let name = f.display().to_string();
        match sage_adapters::detect::detect_file(&reg, f, &name, rules) {
            Ok(d) => {
                if d.verdict().is_err() {
                    rc = super::ExitStatus::InputFailed;
                }
                match format {
                    Format::Table => text.push_str(&d.report()),
                    Format::Json => all.push(d),
                }
            }
            Err(e) => {
                errln!("sage: error: {e}");
                rc = super::ExitStatus::InputFailed;
            }
        }
    }
    if let Format::Json = format {
        let v: Vec<_> = all
            .iter()
            .map(|d| {
                let mut j = serde_json::to_value(d).unwrap_or_default();
                j["verdict"] = match d.verdict() {
                    Ok(c) => serde_json::json!({"framework": c.framework}),
                    Err(e) => serde_json::json!({"error": e.to_string()}),
                };
                j
            })
            .collect();
        text = serde_json::to_string_pretty(&v).unwrap_or_default() + "\n";
    }
    (text, rc)
}
