//! `sage adapters [--format table|json] [--show NAME]`: the trace formats sage reads, the
//! versions covered, and where each mapping lives.

use clap::{Args as ClapArgs, ValueEnum};
use comfy_table::Table;
use sage_adapters::{self, EMBEDDED_MAPPINGS};

#[derive(ClapArgs, Debug)]
pub struct Args {
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Print the embedded mapping file of this adapter (a starting point for `--adapter`).
    #[arg(long)]
    pub show: Option<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Format {
    Table,
    Json,
}

pub fn run(args: Args) -> i32 {
    if let Some(name) = &args.show {
        return match EMBEDDED_MAPPINGS.iter().find(|(n, _)| n == name) {
            Some((_, text)) => {
                print!("{text}");
                0
            }
            None => {
                eprintln!(
                    "error: {name:?} has no mapping file (parsed by code, or unknown); see `sage adapters`"
                );
                2
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
    match args.format {
        Format::Table => {
            let mut t = Table::new();
            t.set_header(vec!["framework", "mapping", "versions and formats covered"]);
            for (n, m, v) in &rows {
                t.add_row(vec![n, m, v]);
            }
            println!("{t}");
        }
        Format::Json => {
            let v: Vec<_> = rows
                .iter()
                .map(|(n, m, v)| serde_json::json!({"framework": n, "mapping": m, "versions": v}))
                .collect();
            println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        }
    }
    0
}
