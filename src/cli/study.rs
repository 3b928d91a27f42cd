//! `sage study DIR --out OUT`: the paper's funnel in one command.
//!
//! Without `--sheets`: screen every run under DIR (Table 2), propose anchors, and export the
//! candidates' packets and sheets for the annotators (OUT/screen.json, OUT/screen.sarif,
//! OUT/table2.md, OUT/packets/). With `--sheets R1.csv [R2.csv]` (the filled sheets, the
//! first deciding): import the confirmed cases (OUT/cases/), write Table 3 when two sheets are
//! given (OUT/table3.md), localize the confirmed cases with the offline lexicon judge and
//! write the results and Table 5 (OUT/results/, OUT/localize.sarif).

use super::{build_run, runtime, JudgeFlags, EXIT_INPUT_FAILED, EXIT_OK};
use anyhow::{Context, Result};
use sage_pipeline::confirm::{self, ExportOptions};
use sage_screen::{BanditMode, Options};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A folder of runs (run.json) and/or cases (case.json).
    pub dir: PathBuf,
    /// Folder for everything the study writes.
    #[arg(long, short)]
    pub out: PathBuf,
    /// Other tools' SARIF logs whose results become proposed anchors.
    #[arg(long, num_args = 1..)]
    pub sarif: Vec<PathBuf>,
    /// Do not run Bandit.
    #[arg(long)]
    pub no_bandit: bool,
    /// Interpreter to resolve imports against and run tests with.
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// Annotator names; the first labels every packet.
    #[arg(long, value_delimiter = ',', default_value = "R1,R2")]
    pub annotators: Vec<String>,
    /// Packets on each further annotator's sheet (seeded random sample).
    #[arg(long)]
    pub sample: Option<usize>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Export every screened run, not only the candidates.
    #[arg(long)]
    pub all: bool,
    /// The filled sheets (the first decides): import, Table 3, localize.
    #[arg(long, num_args = 1..=2)]
    pub sheets: Vec<PathBuf>,
}

fn table2(r: &sage_screen::Report) -> String {
    let mut s = String::from(
        "## Table 2. Dataset construction by framework\n\n| Framework | Excluded runs | Valid \
         traces | Passed L0-L3 | Failed L0/L1 | SF candidates |\n|---|---|---|---|---|---|\n",
    );
    for row in &r.summary {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} |",
            row.framework, row.excluded, row.valid, row.passed, row.failed_l0_l1, row.candidates
        );
    }
    s
}

pub fn run(a: Args) -> Result<i32> {
    std::fs::create_dir_all(&a.out)
        .with_context(|| format!("cannot create {}", a.out.display()))?;
    let packets = a.out.join("packets");
    if a.sheets.is_empty() {
        let (units, errors) = sage_pipeline::replay::units_from_runs(&a.dir)?;
        if units.is_empty() && errors.is_empty() {
            anyhow::bail!("{}: no run.json or case.json found", a.dir.display());
        }
        for e in &errors {
            eprintln!("error: {e}");
        }
        let opts = Options {
            python: a.python.clone(),
            bandit: if a.no_bandit {
                BanditMode::Off
            } else {
                BanditMode::Auto
            },
            test_timeout: Duration::from_secs(60),
            ..Options::default()
        };
        let mut external = Vec::new();
        for f in &a.sarif {
            match sage_screen::sarif_in::read(f, &units) {
                Ok(x) => external.extend(x),
                Err(e) => {
                    eprintln!("sage: error: {e}");
                    return Ok(EXIT_INPUT_FAILED);
                }
            }
        }
        let mut report = sage_screen::screen(&units, &opts);
        sage_screen::propose::attach(&units, &mut report, &external, &opts.rules);
        report.errors = errors;
        let write = |name: &str, text: String| -> Result<()> {
            let p = a.out.join(name);
            std::fs::write(&p, text).with_context(|| format!("cannot write {}", p.display()))
        };
        write("screen.json", serde_json::to_string_pretty(&report)? + "\n")?;
        write(
            "screen.sarif",
            serde_json::to_string_pretty(&sage_screen::sarif::to_sarif(&report, &units))? + "\n",
        )?;
        let t2 = table2(&report);
        write("table2.md", t2.clone())?;
        print!("{t2}");
        let eopts = ExportOptions {
            annotators: a.annotators.clone(),
            sample: a.sample,
            seed: a.seed,
            all: a.all,
        };
        match confirm::export(&report, &eopts, &packets) {
            Ok(s) => {
                println!("\n{} packets in {}", s.packets, packets.display());
                for (who, p, n) in s.sheets {
                    println!("sheet for {who}: {} ({n} packets)", p.display());
                }
                println!(
                    "next: fill the sheets, then sage study {} --out {} --sheets {}",
                    a.dir.display(),
                    a.out.display(),
                    packets
                        .join(format!("sheet-{}.csv", a.annotators[0]))
                        .display()
                );
            }
            Err(e) => {
                eprintln!("sage: error: {e}");
                return Ok(EXIT_INPUT_FAILED);
            }
        }
        return Ok(if report.errors.is_empty() {
            EXIT_OK
        } else {
            EXIT_INPUT_FAILED
        });
    }
    // After confirmation: import, Table 3, localize.
    let cases = a.out.join("cases");
    let s = match confirm::import(&packets, &a.sheets[0], &cases) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("sage: error: {e}");
            return Ok(EXIT_INPUT_FAILED);
        }
    };
    println!(
        "{} confirmed case folders in {}",
        s.cases.len(),
        cases.display()
    );
    if a.sheets.len() == 2 {
        let key = confirm::Key::load(&packets).map_err(anyhow::Error::msg)?;
        let mut rows = Vec::new();
        for sh in &a.sheets {
            match confirm::read_sheet(sh, &key, false) {
                Ok(r) => rows.push(r),
                Err(e) => {
                    eprintln!("sage: error: {e}");
                    return Ok(EXIT_INPUT_FAILED);
                }
            }
        }
        match confirm::agreement(confirm::matrix_of(&rows[0], &rows[1])) {
            Ok(ag) => {
                let md = confirm::render_markdown(
                    &ag,
                    &confirm::annotator_of(&a.sheets[0]),
                    &confirm::annotator_of(&a.sheets[1]),
                );
                std::fs::write(a.out.join("table3.md"), &md)?;
                print!("{md}");
            }
            Err(e) => eprintln!("sage: Table 3 not written: {e}"),
        }
    }
    if s.cases.is_empty() {
        println!("no confirmed case: nothing to localize");
        return Ok(EXIT_OK);
    }
    let built = build_run(&[], None, &JudgeFlags::default())?;
    let set = runtime()?.block_on(sage_pipeline::localize::localize_dir(&cases, &built.opts));
    let results = a.out.join("results");
    sage_pipeline::report::write_results_dir(&results, &set)
        .with_context(|| format!("writing {}", results.display()))?;
    std::fs::write(
        a.out.join("localize.sarif"),
        serde_json::to_string_pretty(&sage_pipeline::sarif_view::to_sarif(&set))? + "\n",
    )?;
    for sm in &set.summaries {
        println!("{}", sage_pipeline::report::render_summary(sm));
    }
    for sk in &set.skipped {
        eprintln!("sage: skipped {} ({}): {}", sk.case, sk.stage, sk.message);
    }
    println!("results in {}", results.display());
    Ok(if set.all_ok() {
        EXIT_OK
    } else {
        EXIT_INPUT_FAILED
    })
}
