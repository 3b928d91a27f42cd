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
    /// Folder to write the site into (index.html, cases/*.html).
    #[arg(long)]
    pub out: PathBuf,
    /// The case folders moved: `OLD=NEW` rewrites the start of each result's case folder
    /// (repeatable). Without it they are looked for from here and beside the results.
    #[arg(long, value_name = "OLD=NEW")]
    pub relocate: Vec<String>,
}

pub fn run(a: Args) -> anyhow::Result<super::ExitStatus> {
    use sage_pipeline::view_trace::{classify, write_trace_site, ViewInput};
    let items = match classify(&a.results)? {
        ViewInput::Results(_) => None,
        ViewInput::Items { items, skipped } => Some((items, skipped)),
    };
    if let Some((items, skipped)) = items {
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
        let report = write_trace_site(&items, &a.out)?;
        for f in &report.failures {
            errln!("sage: no page: {}", sage_llm::secrets::scrub(f));
        }
        outln!(
            "{} trace page(s); open {}",
            report.pages,
            a.out.join("index.html").display()
        );
        return Ok(if report.failures.is_empty() {
            EXIT_OK
        } else {
            EXIT_INPUT_FAILED
        });
    }
    let set = super::annotate::read_results(&a.results)?;
    let locator = sage_pipeline::locate::CaseLocator::for_set(&a.results, &set)
        .with_relocations(&a.relocate)
        .map_err(anyhow::Error::msg)?;
    let report = sage_pipeline::view::write_site(&set, &locator, &a.out)?;
    for w in &report.warnings {
        errln!(
            "sage: page without trace text: {}",
            sage_llm::secrets::scrub(w)
        );
    }
    outln!(
        "{} case page(s); open {}",
        report.pages,
        a.out.join("index.html").display()
    );
    Ok(if report.warnings.is_empty() {
        EXIT_OK
    } else {
        EXIT_INPUT_FAILED
    })
}
