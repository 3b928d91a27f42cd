//! A user's first day (issue 28), scripted: the README's examples in its order, as a new user
//! types them, with the results opened from a different folder than the one `localize` ran
//! in, and the project then moved. Each step states the exit status and what the user must
//! see. Steps on `../shared` data skip with a printed reason when it is absent.
//!
//! Before issue 28, from another folder: `sage view` wrote 29 pages without trace text (exit
//! 1); `sage annotate export` exported 0 packets and left a `key.json` that blocked the retry;
//! a missing path exited 1 in explain, normalize, agree and case check; `--help` had no
//! examples.

use super::support::copy_dir;
use assert_cmd::Command;
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// `sage ARGS` run in `dir`; asserts the exit status; returns (stdout, stderr).
fn step(dir: &Path, args: &[&str], code: i32) -> (String, String) {
    let out = Command::cargo_bin("sage")
        .unwrap()
        .current_dir(dir)
        .env_remove("COLUMNS")
        .args(args)
        .output()
        .unwrap();
    let (o, e) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert_eq!(
        out.status.code(),
        Some(code),
        "sage {}\n--- stdout\n{o}\n--- stderr\n{e}",
        args.join(" ")
    );
    (o, e)
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

#[test]
fn the_readme_walk_from_another_folder() {
    let tmp = tempfile::tempdir().unwrap();
    // the user's project: the bundled corpus and the agreement sample
    let project = tmp.path().join("project");
    copy_dir(&Path::new(ROOT).join("corpora"), &project.join("corpora"));
    copy_dir(
        &Path::new(ROOT).join("tests/data/agree"),
        &project.join("tests/data/agree"),
    );
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();

    // 1. explain one case
    let (o, _) = step(&project, &["explain", "corpora/ag2-fig1a-aes-ecb"], 0);
    assert!(o.contains("outcome: localized — origin turn 1, Inadequate defence selected"));
    assert!(
        o.contains("candidates (the origin is the earlier of (i) and (ii)"),
        "{o}"
    );

    // 2. localize the corpus (results in ./sage-results)
    let (o, _) = step(&project, &["localize", "corpora/"], 0);
    assert!(o.contains("Table 5 — 14 real cases"), "{o}");
    let results = project.join("sage-results");
    let doc = std::fs::read_to_string(results.join("results.json")).unwrap();
    assert!(
        doc.contains(&format!("\"case_root\": \"{}\"", project.display())),
        "results record their run's folder: {}",
        &doc[..400]
    );

    // 3. shards and their merge
    step(
        &project,
        &[
            "localize",
            "corpora",
            "--shard",
            "1/2",
            "--no-write",
            "--output",
            "s1.json",
        ],
        0,
    );
    step(
        &project,
        &[
            "localize",
            "corpora",
            "--shard",
            "2/2",
            "--no-write",
            "--output",
            "s2.json",
        ],
        0,
    );
    step(
        &project,
        &["merge-shards", "--output", "all.json", "s1.json", "s2.json"],
        0,
    );

    // 4. case check and case show
    let (o, _) = step(&project, &["case", "check", "corpora/susvibes"], 0);
    assert!(o.contains("ok"), "{o}");
    step(
        &project,
        &[
            "case",
            "show",
            "corpora/ag2-fig1a-aes-ecb",
            "--write",
            "1",
            "--diff",
        ],
        0,
    );

    // 5. from another folder: view, annotate export (the results' case folders are found)
    let (o, e) = step(&elsewhere, &["view", &s(&results), "--out", "site"], 0);
    assert!(!e.contains("without trace text"), "{e}");
    assert!(o.contains("29 case page(s)"), "{o}");
    let (o, _) = step(
        &elsewhere,
        &[
            "annotate",
            "export",
            &s(&results),
            "--annotator",
            "R1",
            "--out",
            "ann",
        ],
        0,
    );
    assert!(o.contains("29 packet(s)"), "{o}");
    // a view of a case folder before it is a result
    let (o, _) = step(
        &elsewhere,
        &[
            "view",
            &s(&project.join("corpora/aider-whole-cookie")),
            "--out",
            "case-site",
        ],
        0,
    );
    assert!(o.contains("1 trace page(s)"), "{o}");

    // 6. agreement on the sample ratings
    let (o, _) = step(
        &project,
        &[
            "agree",
            "tests/data/agree/krippendorff2011.csv",
            "--metric",
            "alpha",
            "--level",
            "ordinal",
        ],
        0,
    );
    assert!(o.to_lowercase().contains("alpha"), "{o}");

    // 7. adapters detect, normalize, replay on a corpus trace
    step(
        &project,
        &["adapters", "detect", "corpora/ag2-fig1a-aes-ecb/chat.json"],
        0,
    );
    step(
        &project,
        &[
            "normalize",
            "corpora/ag2-fig1a-aes-ecb/chat.json",
            "--format",
            "summary",
        ],
        0,
    );

    // 8. two lexicon runs and a reliability report
    step(
        &project,
        &[
            "localize",
            "corpora",
            "--runs",
            "2",
            "--no-write",
            "--output",
            "runs.json",
        ],
        0,
    );
    step(
        &project,
        &["reliability", "runs.json", "--out", "reports/demo"],
        0,
    );

    // 9. the project moves: its results travel with it (found beside the results)
    let moved = tmp.path().join("moved-project");
    std::fs::rename(&project, &moved).unwrap();
    let (_, e) = step(
        &elsewhere,
        &["view", &s(&moved.join("sage-results")), "--out", "site2"],
        0,
    );
    assert!(!e.contains("without trace text"), "{e}");

    // 10. the edges: a missing input is exit 2 with one message, for every command
    let missing = s(&elsewhere.join("no-such"));
    for args in [
        vec!["localize", missing.as_str()],
        vec!["explain", missing.as_str()],
        vec!["case", "check", missing.as_str()],
        vec!["normalize", missing.as_str()],
        vec!["agree", missing.as_str(), "--metric", "alpha"],
        vec!["view", missing.as_str(), "--out", "x"],
        vec!["replay", missing.as_str()],
    ] {
        let (_, e) = step(&elsewhere, &args, 2);
        assert_eq!(
            e,
            format!("sage: error: {missing}: no such file or directory\n"),
            "sage {}",
            args.join(" ")
        );
    }
    // --help carries two examples
    let (o, _) = step(&elsewhere, &["localize", "--help"], 0);
    assert!(o.contains("Examples:\n  sage localize corpora/"), "{o}");
}

/// The same walk's `../shared` steps: case init from a real trace, validate, replay.
#[test]
fn the_readme_walk_on_shared_data() {
    if super::need::missing_shared("traces/swe-agent/pydicom__pydicom-1458.traj") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let traces: PathBuf = super::need::shared_path("traces");
    let (o, _) = step(
        tmp.path(),
        &[
            "replay",
            &s(&traces.join("swe-agent/pydicom__pydicom-1458.traj")),
            "--result",
            &s(&traces.join("swe-agent/pydicom__pydicom-1458.patch")),
        ],
        0,
    );
    assert!(o.contains("2 files: 2 matches"), "{o}");
    let (o, _) = step(
        tmp.path(),
        &["view", &s(&traces.join("swe-agent")), "--out", "site"],
        0,
    );
    assert!(o.contains("trace page(s)"), "{o}");
    if !super::need::missing_shared("traces/who-and-when") {
        step(
            tmp.path(),
            &[
                "validate",
                &s(&traces.join("who-and-when")),
                "--judge",
                "baseline:first-agent-step",
            ],
            0,
        );
    }
}
