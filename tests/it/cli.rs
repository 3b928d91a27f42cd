//! Conventions every subcommand follows: nonsense values are usage errors (exit 2), judge
//! and config come from `SAGE_*` variables too, completions and the man page are generated
//! from the real command definition.

use assert_cmd::Command;
use std::path::Path;

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
            "replay",
            "corpora/ag2-fig1a-aes-ecb/chat.json",
            "--exec-timeout",
            "0",
        ],
        &["szz", "--repo", ".", "--fix", "HEAD", "--threads", "0"],
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

/// `-q` leaves only results and errors; `-v` adds a line per case; both at once is a usage
/// error.
#[test]
fn quiet_and_verbose_are_global_and_mean_the_same_everywhere() {
    let out = sage()
        .args(["localize", "corpora", "--no-write"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let normal = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(normal.contains("case(s) processed"), "{normal}");
    let out = sage()
        .args(["-q", "localize", "corpora", "--no-write"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("(a) Code provenance"));
    // the flag is global: after the subcommand too
    let out = sage()
        .args(["localize", "corpora", "--no-write", "--verbose"])
        .output()
        .unwrap();
    let verbose = String::from_utf8_lossy(&out.stderr).into_owned();
    // corpora/ag2-fig1a-aes-ecb: the lexicon origin is turn 1, the introducing write turn 3
    assert!(
        verbose.contains(
            "sage: ag2-fig1a-aes-ecb (lexicon run 0): agent-introduced, introducing write turn 3, origin turn 1 (inadequate-defence-selected)"
        ),
        "{verbose}"
    );
    assert!(verbose.lines().count() > normal.lines().count());
    let out = sage()
        .args(["-q", "-v", "localize", "corpora", "--no-write"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// The progress bar of `sage screen`, in a real pseudo-terminal (util-linux `script`): the
/// stage, done/total and ETA are drawn; with `-q`, or when stderr is not a terminal, nothing.
#[test]
fn screen_draws_a_progress_bar_with_totals_only_on_a_terminal() {
    let has_script = std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_script {
        super::need::skip("needs util-linux `script` for a pseudo-terminal");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let py = d.path().join("py");
    std::fs::create_dir_all(&py).unwrap();
    std::fs::write(py.join("a.py"), "import os\nos.system(input())\n").unwrap();
    std::fs::write(py.join("b.py"), "x = 1\n").unwrap();
    let bin = assert_cmd::cargo::cargo_bin("sage");
    // A terminal that can redraw a line (indicatif draws nothing on TERM=dumb, which is what
    // the fresh-clone check sets).
    let on_term = |term: &str, extra: &str| -> String {
        let cmd = format!(
            "TERM={term} {} {extra} screen {} --no-bandit --format json -o {}",
            bin.display(),
            py.display(),
            d.path().join("out.json").display()
        );
        let out = std::process::Command::new("script")
            .args(["-qec", &cmd, "/dev/null"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let on_tty = |extra: &str| on_term("xterm-256color", extra);
    let tty = on_tty("");
    assert!(
        tty.contains("static checks (L0, L1, L3), cases 2/2") && tty.contains("ETA"),
        "{tty}"
    );
    assert!(tty.contains("verdicts, cases 2/2"), "{tty}");
    assert!(!on_tty("-q").contains("ETA"));
    assert!(
        !on_term("dumb", "").contains("ETA"),
        "no bar on a dumb terminal"
    );
    // not a terminal: no bar
    let out = sage()
        .arg("screen")
        .arg(&py)
        .args(["--no-bandit", "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("ETA"));
}

/// `-o FILE` on the commands that print a result and lacked it: agree, szz, explain (which
/// also takes `--format json`).
#[test]
fn agree_szz_and_explain_write_their_result_with_o() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("agree.json");
    sage()
        .args([
            "agree",
            "tests/data/agree/krippendorff2011.csv",
            "--metric",
            "alpha",
            "--format",
            "json",
            "-o",
        ])
        .arg(&f)
        .assert()
        .success()
        .stdout("");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap();
    assert!(v.is_object() && !v.as_object().unwrap().is_empty(), "{v}");

    let f = d.path().join("explain.json");
    sage()
        .args([
            "explain",
            "corpora/ag2-fig1a-aes-ecb",
            "--format",
            "json",
            "-o",
        ])
        .arg(&f)
        .assert()
        .success()
        .stdout("");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap();
    assert_eq!(v[0]["case_id"], "ag2-fig1a-aes-ecb", "{v}");

    // szz on a one-commit-fix repository
    let mut r = super::szz::Repo::new();
    let a = r.commit_file("m.c", "int a;\nint b;\n", "add");
    let fix = r.commit_file("m.c", "int a;\nint c;\n", "fix");
    let f = d.path().join("szz.txt");
    sage()
        .args(["szz", "--repo"])
        .arg(r.path())
        .args(["--fix", &fix, "-o"])
        .arg(&f)
        .assert()
        .success()
        .stdout("");
    let t = std::fs::read_to_string(&f).unwrap();
    assert!(t.contains(&a[..12]) && t.contains("B-SZZ"), "{t}");
}

/// The commands that print a result and lacked one of the two flags take `--format
/// table|json` and `-o FILE` like every other: `cache stats` (`--json` kept, hidden),
/// `normalize` and `adapters` (`-o`), `case check` and `case show` (`--format`).
#[test]
fn result_commands_take_format_and_output() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpora");
    let case = corpus.join("ag2-fig1a-aes-ecb");
    let dir = tempfile::tempdir().unwrap();
    let json = |args: &[&str]| -> serde_json::Value {
        let out = sage().args(args).output().unwrap();
        assert!(
            out.status.success() || out.status.code() == Some(1),
            "{args:?}"
        );
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stdout)))
    };
    let ledger = dir.path().join("ledger");
    let l = ledger.to_str().unwrap();
    // No ledger at that path is an error, not an empty table.
    let out = sage()
        .args(["cache", "--ledger", l, "stats"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no ledger here"));
    std::fs::create_dir_all(&ledger).unwrap();
    for flag in [&["--format", "json"][..], &["--json"][..]] {
        let mut a = vec!["cache", "--ledger", l, "stats"];
        a.extend_from_slice(flag);
        let v = json(&a);
        assert_eq!(v["groups"], serde_json::json!([]), "{v}");
    }
    let c = case.to_str().unwrap();
    let v = json(&["case", "check", c, "--format", "json"]);
    assert_eq!(v["checked"], 1);
    assert_eq!(v["cases"][0]["problems"], serde_json::json!([]));
    let v = json(&[
        "case", "show", c, "--write", "1", "--diff", "--format", "json",
    ]);
    assert_eq!(v["shows"], "diff");
    assert!(v["text"].as_str().unwrap().contains("AES.MODE_ECB"));
    // -o writes what would be printed, and prints nothing.
    for (args, file, must) in [
        (
            vec!["normalize", "--format", "summary"],
            "normalize.txt",
            "engineer",
        ),
        (
            vec!["adapters", "--format", "json"],
            "adapters.json",
            "\"framework\"",
        ),
        (vec!["adapters", "detect"], "detect.txt", "verdict: ag2"),
    ] {
        let o = dir.path().join(file);
        let mut cmd = sage();
        cmd.args(&args);
        if args[0] != "adapters" || args.len() > 1 && args[1] == "detect" {
            cmd.arg(case.join("chat.json"));
        }
        let out = cmd.arg("-o").arg(&o).output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.stdout.is_empty(), "{args:?} printed to stdout");
        let text = std::fs::read_to_string(&o).unwrap();
        assert!(text.contains(must), "{args:?}: {text}");
    }
}
