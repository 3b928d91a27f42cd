//! `sage view PATH --out DIR`: a self-contained static HTML site of a localize run (a
//! results file or folder), or of cases and traces not yet localized (a case folder, a trace
//! file, or a folder holding them).

use super::{EXIT_INPUT_FAILED, EXIT_OK};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A `sage localize` results file (results.json) or folder; or a case folder, a trace
    /// file, or a folder of cases and traces (shown unjudged).
    pub results: PathBuf,
    /// Folder to write the site into (index.html, cases/*.html or traces/*.html).
    #[arg(long)]
    pub out: PathBuf,
    /// The case folders moved: `OLD=NEW` rewrites the start of each result's case folder
    /// (repeatable). Without it they are looked for from here and beside the results.
    #[arg(long, value_name = "OLD=NEW")]
    pub relocate: Vec<String>,
    /// `text`: a line naming the index. `json`: what was written (pages, warnings).
    #[arg(long, value_enum, default_value_t = super::TableOrJson::Table)]
    pub format: super::TableOrJson,
}

/// What a view wrote, as `--format json` prints it.
#[derive(serde::Serialize)]
struct Written {
    /// `results` or `traces`.
    kind: &'static str,
    index: String,
    pages: usize,
    /// Pages written without trace text, or items that could not be read.
    warnings: Vec<String>,
}

pub fn run(a: Args, rc: &super::RunConfig) -> anyhow::Result<super::ExitStatus> {
    use sage_pipeline::view_trace::{classify, write_trace_site, ViewInput};
    let index = a.out.join("index.html").display().to_string();
    let written = match classify(&a.results, &rc.rules)? {
        ViewInput::Items { items, skipped } => {
            if !skipped.is_empty() {
                note!(
                    "sage: {} file(s) not read as a trace (-v lists them)",
                    skipped.len()
                );
                if super::verbose() {
                    for (p, why) in &skipped {
                        errln!("sage: not a trace: {}: {why}", p.display());
                    }
                }
            }
            let report = write_trace_site(&items, &a.out, &rc.rules)?;
            for f in &report.failures {
                errln!("sage: no page: {}", sage_llm::secrets::scrub(f));
            }
            Written {
                kind: "traces",
                index,
                pages: report.pages,
                warnings: report.failures,
            }
        }
        ViewInput::Results(_) => {
            let set = super::annotate::read_results(&a.results)?;
            let locator = sage_pipeline::locate::CaseLocator::for_set(&a.results, &set)
                .with_relocations(&a.relocate)?;
            let report = sage_pipeline::view::write_site(&set, &locator, &a.out, &rc.rules)?;
            for w in &report.warnings {
                errln!(
                    "sage: page without trace text: {}",
                    sage_llm::secrets::scrub(w)
                );
            }
            Written {
                kind: "results",
                index,
                pages: report.pages,
                warnings: report.warnings,
            }
        }
    };
    match a.format {
        super::TableOrJson::Json => {
            super::print_or_write(None, &(serde_json::to_string_pretty(&written)? + "\n"))?
        }
        super::TableOrJson::Table => outln!(
            "{} {} page(s); open {}",
            written.pages,
            if written.kind == "results" {
                "case"
            } else {
                "trace"
            },
            written.index
        ),
    }
    Ok(if written.warnings.is_empty() {
        EXIT_OK
    } else {
        EXIT_INPUT_FAILED
    })
}
