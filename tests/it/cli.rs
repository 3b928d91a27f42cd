//! Conventions every subcommand follows: nonsense values are usage errors (exit 2), judge
//! and config come from `SAGE_*` variables too, completions and the man page are generated
//! from the real command definition.

use assert_cmd::Command;

fn sage() -> Command {
    let mut c = Command::cargo_bin("sage").unwrap();
    c.current_dir(env!("CARGO_MANIFEST_DIR"));
    c
}

#[test]
fn values_that_make_no_sense_are_usage_errors() {
    for args in [
        &["localize", "corpora", "--no-write", "--concurrency", "0"][..],
        &["localize", "corpora", "--no-write", "--runs", "0"],
        &["localize", "corpora", "--no-write", "--max-attempts", "0"],
        &["explain", "corpora/ag2-fig1a-aes-ecb", "--fold", "0"],
        &[
            "agree",
            "tests/data/agree/krippendorff2011.csv",
            "--metric",
            "alpha",
            "--weights",
            "linear",
        ],
    ] {
        let out = sage().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
    }
}

#[test]
fn the_judge_can_come_from_the_environment() {
    // An unknown judge named only in SAGE_JUDGE is refused like `--judge nope` would be,
    // which shows the variable is read.
    let out = sage()
        .args(["localize", "corpora", "--no-write"])
        .env("SAGE_JUDGE", "nope-not-a-judge")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("nope-not-a-judge"),
        "{out:?}"
    );
    // SAGE_JUDGE=lexicon is the default judge.
    sage()
        .args(["localize", "corpora", "--no-write", "--format", "json"])
        .env("SAGE_JUDGE", "lexicon")
        .assert()
        .success()
        .stdout(predicates::str::contains("\"name\": \"lexicon\""));
}

#[test]
fn completions_and_man_page_cover_every_subcommand() {
    let out = sage().args(["completions", "bash"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let bash = String::from_utf8(out.stdout).unwrap();
    for sub in [
        "localize",
        "explain",
        "screen",
        "reliability",
        "szz",
        "completions",
    ] {
        assert!(bash.contains(sub), "bash completion lacks {sub}");
    }
    assert!(bash.contains("--judge"));
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        sage().args(["completions", shell]).assert().success();
    }
    sage().args(["completions", "tcsh"]).assert().code(2);
    let out = sage().arg("man").output().unwrap();
    let man = String::from_utf8(out.stdout).unwrap();
    assert!(
        man.starts_with(".ie") || man.contains(".TH sage"),
        "{}",
        &man[..200.min(man.len())]
    );
    assert!(man.contains("localize"), "man page lacks the subcommands");
}

#[test]
fn result_printing_commands_take_format_json_and_output() {
    let d = tempfile::tempdir().unwrap();
    // cache prune on an empty ledger: the counts as JSON.
    let out = sage()
        .args(["cache", "--ledger"])
        .arg(d.path().join("ledger"))
        .args(["prune", "--all", "--dry-run", "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["removed_files"], 0);
    assert_eq!(v["dry_run"], true);

    // annotate import: the stored count and the bad rows, to a file with -o.
    let sheet = d.path().join("sheet.csv");
    std::fs::write(
        &sheet,
        "case_id,annotator,provenance,introducing_write\na,R1,inherited,none\nb,R1,bogus,none\n",
    )
    .unwrap();
    let report = d.path().join("import.json");
    sage()
        .args(["annotate", "import"])
        .arg(&sheet)
        .arg("--store")
        .arg(d.path().join("store"))
        .args(["--format", "json", "-o"])
        .arg(&report)
        .assert()
        .code(1)
        .stdout("");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(v["stored"], 1);
    assert_eq!(v["bad_rows"][0]["line"], 3);

    // reliability: the whole report on stdout.
    let run = d.path().join("run.json");
    sage()
        .args(["localize", "corpora", "--no-write", "--output"])
        .arg(&run)
        .assert()
        .success();
    let out = sage()
        .arg("reliability")
        .arg(&run)
        .arg("--out")
        .arg(d.path().join("rel"))
        .args(["--partitions", "10", "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["version"], "sage.reliability/1");
}
