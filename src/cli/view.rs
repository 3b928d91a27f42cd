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
}

pub fn run(a: Args) -> anyhow::Result<super::ExitStatus> {
    let set = super::annotate::read_results(&a.results)?;
    let report = sage_pipeline::view::write_site(&set, &a.out)?;
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
