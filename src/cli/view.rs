//! `sage view RESULTS --out DIR`: a self-contained static HTML site of a localize run.

use super::{EXIT_INPUT_FAILED, EXIT_OK};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A `sage localize` results file (results.json) or results folder.
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
    let set = super::annotate::read_results(&a.results)?;
    let locator = sage_pipeline::locate::CaseLocator::for_results(&a.results)
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
