//! `sage merge-shards OUT SHARD.json...`: join the result sets of `sage localize --shard i/n
//! --output SHARD.json` runs into one, as if the corpus had been run on one machine.

use anyhow::Context;
use sage_pipeline::results::ResultSet;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Where to write the merged result set (JSON).
    #[arg(long, short, value_name = "FILE")]
    pub output: PathBuf,
    /// Result sets written by `sage localize --shard i/n --output FILE`.
    #[arg(required = true, value_name = "SHARD.json")]
    pub shards: Vec<PathBuf>,
}

pub fn run(a: Args) -> anyhow::Result<super::ExitStatus> {
    let mut sets = Vec::new();
    for p in &a.shards {
        let text =
            std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
        let set: ResultSet = sage_trace::json::parse(&text)
            .with_context(|| format!("{}: not a sage result set", p.display()))?;
        sets.push((p, set));
    }
    let merged = merge(
        sets.iter()
            .map(|(p, s)| (p.display().to_string(), s.clone()))
            .collect(),
    )?;
    // one id, one case folder: shards of a corpus holding two folders with one id would
    // otherwise merge into a set no writer accepts
    sage_pipeline::sink::results_by_case(&merged).map_err(anyhow::Error::msg)?;
    std::fs::write(&a.output, sage_pipeline::sink::pretty(&merged))
        .with_context(|| format!("writing {}", a.output.display()))?;
    errln!(
        "sage: merged {} shard(s): {} result(s), {} skipped, into {}",
        sets.len(),
        merged.results.len(),
        merged.skipped.len(),
        a.output.display()
    );
    Ok(super::EXIT_OK)
}

/// Merge result sets made with the same judges and runs; a case present in two shards is an
/// error (the shards overlap), never silently deduplicated.
pub fn merge(sets: Vec<(String, ResultSet)>) -> anyhow::Result<ResultSet> {
    let mut it = sets.into_iter().enumerate();
    let (_, (first_name, mut out)) = it.next().context("no shard given")?;
    // case folder → (shard position, shard name)
    let mut seen: std::collections::BTreeMap<String, (usize, String)> = out
        .results
        .iter()
        .map(|r| (r.case_dir.clone(), (0, first_name.clone())))
        .collect();
    for (i, (name, s)) in it {
        anyhow::ensure!(
            s.version == out.version && s.judges == out.judges && s.runs == out.runs,
            "{name}: made with other judges, runs or format than {first_name}; shards must come from the same command"
        );
        for r in &s.results {
            if let Some((_, prev)) = seen.get(&r.case_dir).filter(|(j, _)| *j != i) {
                anyhow::bail!(
                    "case {} is in both {prev} and {name}: the shards overlap",
                    r.case_dir
                );
            }
        }
        for r in &s.results {
            seen.insert(r.case_dir.clone(), (i, name.clone()));
        }
        out.results.extend(s.results);
        out.skipped.extend(s.skipped);
        out.problems.extend(s.problems);
    }
    // One machine lists cases in folder order, each case's judge runs in order.
    out.results.sort_by(|a, b| a.case_dir.cmp(&b.case_dir));
    out.skipped.sort_by(|a, b| a.case.cmp(&b.case));
    out.problems.sort_by(|a, b| a.case.cmp(&b.case));
    out.summaries = sage_pipeline::report::summaries(&out.results);
    Ok(out)
}
