//! Two real examples per command, shown at the end of its `--help` (and in `sage man`). Each
//! runs as written from the repository's root (the bundled corpus) or names the shared data
//! the README uses; the unit test below parses every one with the real argument parser.

/// (command path, examples): a path is the subcommand names from `sage` down.
pub const EXAMPLES: &[(&[&str], [&str; 2])] = &[
    (&["localize"], [
        "sage localize corpora/",
        "sage localize corpora/ --format json --output results.json --sarif origins.sarif",
    ]),
    (&["explain"], [
        "sage explain corpora/ag2-fig1a-aes-ecb",
        "sage explain corpora/aider-whole-cookie --format json -o explain.json",
    ]),
    (&["case", "init"], [
        "sage case init trace.jsonl --out cases/my-case --patch fix.patch --baseline-from repo@HEAD~1",
        "sage case init run.traj --out cases/run1 --baseline-dir checkout/",
    ]),
    (&["case", "check"], [
        "sage case check corpora/susvibes",
        "sage case check corpora/ag2-fig1a-aes-ecb --format json",
    ]),
    (&["case", "show"], [
        "sage case show corpora/ag2-fig1a-aes-ecb --write 1 --diff",
        "sage case show corpora/aider-whole-cookie --at 3",
    ]),
    (&["annotate", "export"], [
        "sage annotate export sage-results --annotator R1 --out annotate/R1",
        "sage annotate export sage-results --annotator R2 --out annotate/R2 --sample 10 --seed 7",
    ]),
    (&["annotate", "import"], [
        "sage annotate import annotate/R1/packet/sheet.csv --key annotate/R1/key.json --results sage-results",
        "sage annotate import - --key annotate/R2/key.json --store annotations",
    ]),
    (&["view"], [
        "sage view sage-results --out site",
        "sage view corpora/ag2-fig1a-aes-ecb --out case-site",
    ]),
    (&["screen"], [
        "sage screen ../shared/security/l3/examples --baseline ../shared/security/l3/examples/orig.py --cwe CWE-78",
        "sage screen runs/ --format sarif --output screen.sarif --no-bandit",
    ]),
    (&["confirm", "export"], [
        "sage confirm export screen.json --out packets --annotators R1,R2",
        "sage confirm export screen.json --out packets --sample 20 --seed 7",
    ]),
    (&["confirm", "import"], [
        "sage confirm import packets packets/sheet-R1.csv --out cases",
        "sage confirm import packets sheet-R2.csv --out cases-r2",
    ]),
    (&["confirm", "report"], [
        "sage confirm report --export packets --sheets packets/sheet-R1.csv packets/sheet-R2.csv",
        "sage confirm report --counts t3b.csv --format json",
    ]),
    (&["study"], [
        "sage study ../shared/susvibes --out study --all --sample 6 --seed 7",
        "sage study ../shared/susvibes --out study --sheets study/packets/sheet-R1.csv study/packets/sheet-R2.csv --sample 6",
    ]),
    (&["agree"], [
        "sage agree tests/data/agree/krippendorff2011.csv --metric alpha --level ordinal",
        "sage agree ratings.csv --metric cohen --format json",
    ]),
    (&["szz"], [
        "sage szz --repo ../repo --fix 066cb43b4413 --variant b,ag,v",
        "sage szz --repo ../repo --fix HEAD --variant agent --cve \"command injection in ping\" --format json",
    ]),
    (&["szz", "eval"], [
        "sage szz eval dataset.json --repos repos/ --variant b,ag,ma,r,l,v",
        "sage szz eval dataset.json --repos repos/ --limit 20 --format json",
    ]),
    (&["szz", "bench"], [
        "sage szz bench --repo ../repo --fix 066cb43b4413 --runs 3",
        "sage szz bench --dataset dataset.json --repos repos/ --limit 10",
    ]),
    (&["cache"], [
        "sage cache stats",
        "sage cache merge ledger-a ledger-b --out ledger",
    ]),
    (&["adapters"], [
        "sage adapters",
        "sage adapters detect corpora/ag2-fig1a-aes-ecb/chat.json",
    ]),
    (&["normalize"], [
        "sage normalize corpora/ag2-fig1a-aes-ecb/chat.json --format summary",
        "sage normalize corpora/aider-whole-cookie/.aider.chat.history.md -o canonical.json",
    ]),
    (&["replay"], [
        "sage replay corpora/aider-whole-cookie/.aider.chat.history.md",
        "sage replay run.traj --result run.patch --format json",
    ]),
    (&["merge-shards"], [
        "sage merge-shards --output all.json s1.json s2.json",
        "sage merge-shards --output all.json shard-*.json",
    ]),
    (&["validate"], [
        "sage validate ../shared/traces/who-and-when --judge baseline:first-agent-step",
        "sage validate logs/ --judge local --format json",
    ]),
    (&["reliability"], [
        "sage reliability runs.json --out reports/demo",
        "sage reliability runs.json --annotations r1.csv r2.csv --out reports/demo",
    ]),
    (&["completions"], [
        "sage completions bash > ~/.local/share/bash-completion/completions/sage",
        "sage completions zsh > ~/.zfunc/_sage",
    ]),
    (&["man"], ["sage man | man -l -", "sage man > sage.1"]),
];

/// The examples as a help section.
fn section(ex: &[&str; 2]) -> String {
    format!("Examples:\n  {}\n  {}", ex[0], ex[1])
}

/// `cmd` with every command's examples after its help.
pub fn with_examples(mut cmd: clap::Command) -> clap::Command {
    for (path, ex) in EXAMPLES {
        cmd = attach(cmd, path, &section(ex));
    }
    cmd
}

fn attach(cmd: clap::Command, path: &[&str], text: &str) -> clap::Command {
    match path {
        [] => cmd.after_help(text.to_string()),
        [first, rest @ ..] => {
            let text = text.to_string();
            let rest: Vec<String> = rest.iter().map(|s| s.to_string()).collect();
            cmd.mut_subcommand(*first, move |c| {
                let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
                attach(c, &rest, &text)
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, FromArgMatches};

    /// Shell words of an example up to a pipe or redirection (enough for these lines).
    fn words(line: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut cur = String::new();
        let mut quoted = false;
        let mut any = false;
        for c in line.chars() {
            match c {
                '"' => {
                    quoted = !quoted;
                    any = true;
                }
                '|' | '>' if !quoted => break,
                c if c.is_whitespace() && !quoted => {
                    if any {
                        out.push(std::mem::take(&mut cur));
                        any = false;
                    }
                }
                c => {
                    cur.push(c);
                    any = true;
                }
            }
        }
        if any {
            out.push(cur);
        }
        out
    }

    #[test]
    fn every_command_has_two_examples_that_parse() {
        let root = with_examples(super::super::Cli::command());
        // every leaf command (and every command with its own arguments) has examples
        let mut leaves: Vec<Vec<String>> = Vec::new();
        fn walk(c: &clap::Command, path: Vec<String>, out: &mut Vec<Vec<String>>) {
            let subs: Vec<&clap::Command> = c
                .get_subcommands()
                .filter(|s| s.get_name() != "help")
                .collect();
            if !path.is_empty() && (subs.is_empty() || !c.is_subcommand_required_set()) {
                out.push(path.clone());
            }
            for s in subs {
                let mut p = path.clone();
                p.push(s.get_name().to_string());
                walk(s, p, out);
            }
        }
        walk(&root, Vec::new(), &mut leaves);
        for leaf in &leaves {
            // a nested command may share its parent's examples (cache stats/prune/merge)
            let covered = EXAMPLES
                .iter()
                .any(|(p, _)| p.len() <= leaf.len() && p.iter().zip(leaf).all(|(a, b)| a == b));
            assert!(covered, "no examples for `sage {}`", leaf.join(" "));
        }
        for (path, ex) in EXAMPLES {
            for line in ex {
                let w = words(line);
                assert_eq!(w[0], "sage", "{line}");
                assert!(
                    w[1..].starts_with(&path.iter().map(|s| s.to_string()).collect::<Vec<_>>()),
                    "example of `{}` runs another command: {line}",
                    path.join(" ")
                );
                let m = root.clone().try_get_matches_from(&w);
                let m = m.unwrap_or_else(|e| panic!("{line}: {e}"));
                super::super::Cli::from_arg_matches(&m).unwrap_or_else(|e| panic!("{line}: {e}"));
            }
            // the help shows them
            let mut c = root.clone();
            let mut sub = &mut c;
            for name in *path {
                sub = sub.find_subcommand_mut(name).unwrap();
            }
            // (help wraps long lines: compare with whitespace collapsed)
            let flat = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
            let help = flat(&sub.render_long_help().to_string());
            assert!(
                help.contains(&flat(ex[0])) && help.contains(&flat(ex[1])),
                "{help}"
            );
        }
    }

    #[test]
    fn corpus_paths_in_examples_exist() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        for (_, ex) in EXAMPLES {
            for line in ex {
                for w in words(line) {
                    if w.starts_with("corpora/") || w.starts_with("tests/data/") {
                        assert!(root.join(&w).exists(), "{line}: {w} does not exist");
                    }
                }
            }
        }
    }
}
