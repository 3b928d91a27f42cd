//! The inputs a command line names, checked before any work: a missing input is a usage
//! error of the whole invocation (exit 2, `sage: error: <path>: no such file or directory`),
//! the same for every command, and nothing is written.

use super::Command;
use std::path::{Path, PathBuf};

/// Every path on the command line that a command reads (not the ones it writes).
pub fn named_inputs(cmd: &Command) -> Vec<&Path> {
    let mut v: Vec<&Path> = Vec::new();
    fn opt<'a>(v: &mut Vec<&'a Path>, p: &'a Option<PathBuf>) {
        if let Some(p) = p {
            v.push(p);
        }
    }
    fn all<'a>(v: &mut Vec<&'a Path>, ps: &'a [PathBuf]) {
        v.extend(ps.iter().map(PathBuf::as_path));
    }
    match cmd {
        Command::Localize(a) => {
            v.push(&a.dir);
            opt(&mut v, &a.lexicon);
            opt(&mut v, &a.injection_rules);
        }
        Command::Explain(a) => {
            v.push(&a.case);
            opt(&mut v, &a.lexicon);
        }
        Command::Case(a) => match &a.command {
            super::case::Sub::Init(i) => {
                v.push(&i.trace);
                opt(&mut v, &i.baseline_dir);
                opt(&mut v, &i.patch);
                opt(&mut v, &i.task);
            }
            super::case::Sub::Check(c) => {
                all(&mut v, &c.cases);
                opt(&mut v, &c.exec.exec_rules);
            }
            super::case::Sub::Show(s) => v.push(&s.case),
        },
        Command::Annotate(a) => match &a.action {
            super::annotate::Action::Export { results, .. } => v.push(results),
            super::annotate::Action::Import {
                file, key, results, ..
            } => {
                v.push(file);
                opt(&mut v, key);
                opt(&mut v, results);
            }
        },
        Command::View(a) => v.push(&a.results),
        Command::Screen(a) => {
            v.push(&a.dir);
            opt(&mut v, &a.baseline);
            opt(&mut v, &a.requirements);
            opt(&mut v, &a.rules);
            all(&mut v, &a.sarif);
        }
        Command::Confirm(a) => match &a.command {
            super::confirm::Cmd::Export(e) => v.push(&e.screen),
            super::confirm::Cmd::Import(i) => {
                v.push(&i.export);
                v.push(&i.sheet);
            }
            super::confirm::Cmd::Report(r) => {
                opt(&mut v, &r.export);
                all(&mut v, &r.sheets);
                opt(&mut v, &r.counts);
            }
        },
        Command::Study(a) => {
            v.push(&a.dir);
            all(&mut v, &a.sarif);
            all(&mut v, &a.sheets);
            opt(&mut v, &a.lexicon);
            all(&mut v, &a.annotations);
        }
        Command::Agree(a) => v.push(&a.file),
        Command::Szz(a) => match &a.sub {
            None => opt(&mut v, &a.run.repo),
            Some(super::szz::SzzSub::Eval(e)) => {
                v.push(&e.dataset);
                v.push(&e.repos);
                opt(&mut v, &e.descriptions);
                opt(&mut v, &e.project_map);
            }
            Some(super::szz::SzzSub::Bench(b)) => {
                opt(&mut v, &b.repo);
                opt(&mut v, &b.dataset);
                opt(&mut v, &b.repos);
            }
        },
        Command::Cache(a) => {
            if let super::cache::CacheAction::Merge { ledgers, .. } = &a.action {
                all(&mut v, ledgers);
            }
        }
        Command::Normalize(a) => {
            all(&mut v, &a.trace);
            opt(&mut v, &a.adapter);
        }
        Command::Replay(a) => {
            all(&mut v, &a.trace);
            opt(&mut v, &a.baseline_dir);
            all(&mut v, &a.results);
            opt(&mut v, &a.redactions);
            opt(&mut v, &a.exec.exec_rules);
        }
        Command::MergeShards(a) => all(&mut v, &a.shards),
        Command::Validate(a) => {
            all(&mut v, &a.logs);
            opt(&mut v, &a.rubric);
            opt(&mut v, &a.config);
        }
        Command::Reliability(a) => {
            all(&mut v, &a.results);
            all(&mut v, &a.annotations);
        }
        Command::Adapters(_) | Command::Completions(_) | Command::Man(_) => {}
    }
    // `-` is standard input
    v.retain(|p| p.as_os_str() != "-");
    v
}

/// The named inputs that do not exist (a dangling symlink counts as missing).
pub fn missing<'a>(inputs: &[&'a Path]) -> Vec<&'a Path> {
    inputs.iter().copied().filter(|p| !p.exists()).collect()
}
