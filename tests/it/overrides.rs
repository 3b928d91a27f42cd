//! The user's overrides end to end (issue 30: configuration is a value the CLI builds once
//! and passes down, no process global): each environment variable, set for the real binary,
//! changes what a command reports, so a library that ignored the value it is handed would
//! fail here. `SAGE_TURN_KINDS`, `SAGE_DETECT_RULES`, `SAGE_WORKSPACE_ROOTS`,
//! `SAGE_MAX_INPUT_MB` and `SAGE_CASE_ROOTS`.

use assert_cmd::Command;
use std::path::{Path, PathBuf};

fn sage() -> Command {
    Command::cargo_bin("sage").unwrap()
}

fn corpora(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpora")
        .join(rel)
}

/// A copy of the bundled case `name` in `into/<name>`.
fn copy_case(name: &str, into: &Path) -> PathBuf {
    let to = into.join(name);
    for e in walkdir::WalkDir::new(corpora(name)) {
        let e = e.unwrap();
        let rel = e.path().strip_prefix(corpora(name)).unwrap();
        if e.file_type().is_dir() {
            std::fs::create_dir_all(to.join(rel)).unwrap();
        } else {
            std::fs::copy(e.path(), to.join(rel)).unwrap();
        }
    }
    to
}

/// stdout and stderr of `sage ARGS`, with `env` set.
fn run(args: &[&str], env: &[(&str, &Path)]) -> (Option<i32>, String, String) {
    let mut c = sage();
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The kinds column of `sage normalize --format summary`.
fn kinds_of(summary: &str) -> Vec<String> {
    summary
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2).map(String::from))
        .collect()
}

#[test]
fn the_turn_classifier_a_user_gives_classifies_the_turns() {
    let dir = tempfile::tempdir().unwrap();
    // every command a turn runs counts as a test run: no turn that calls a tool is planning
    let embedded = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/sage-adapters/mappings/turn-kinds.toml"),
    )
    .unwrap();
    let tests = regex::Regex::new(r"(?s)\ntests = \[.*?\]").unwrap();
    assert!(tests.is_match(&embedded));
    let kinds = dir.path().join("kinds.toml");
    std::fs::write(&kinds, tests.replace(&embedded, "\ntests = ['.']").as_ref()).unwrap();
    let trace = corpora(
        "susvibes/claude-4-sonnet__psf__requests_74ea7cf7a6a27a4eeb2ae24e162bcc942a6706d5/psf__requests_74ea7cf7a6a27a4eeb2ae24e162bcc942a6706d5.json",
    );
    let trace = trace.to_str().unwrap();
    let args = ["normalize", "--format", "summary", trace];
    let (code, out, err) = run(&args, &[]);
    assert_eq!(code, Some(0), "{err}");
    let before = kinds_of(&out);
    assert!(before.iter().any(|k| k == "planning"), "{out}");
    let (code, out, err) = run(&args, &[("SAGE_TURN_KINDS", &kinds)]);
    assert_eq!(code, Some(0), "{err}");
    let after = kinds_of(&out);
    assert_eq!(after.len(), before.len(), "{out}");
    assert!(!after.iter().any(|k| k == "planning"), "{out}");
    assert!(
        after.iter().filter(|k| *k == "verification").count()
            > before.iter().filter(|k| *k == "verification").count()
    );
}

#[test]
fn the_detection_rules_a_user_gives_decide_the_format_when_normalizing() {
    let dir = tempfile::tempdir().unwrap();
    // aider's only rule now matches nothing: the history is no longer recognised
    let rules = dir.path().join("never.toml");
    std::fs::write(
        &rules,
        "version = \"never-1\"\n[[rule]]\nadapter = \"aider\"\nwhy = \"never\"\nform = [\"text\"]\nlines = ['^NEVER MATCHES$']\nscore = 90\n",
    )
    .unwrap();
    let history = corpora("aider-whole-cookie/.aider.chat.history.md");
    let args = [
        "normalize",
        "--format",
        "summary",
        history.to_str().unwrap(),
    ];
    let (code, _, err) = run(&args, &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("aider:"), "{err}");
    let (code, _, err) = run(&args, &[("SAGE_DETECT_RULES", &rules)]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("format not recognized"), "{err}");
}

#[test]
fn the_workspace_roots_a_user_gives_name_the_files_a_trace_writes() {
    let dir = tempfile::tempdir().unwrap();
    let case = copy_case("ag2-defect-systemrandom", dir.path());
    // the agent writes /workspace/app.py: app.py under the embedded roots
    let chat = case.join("chat.json");
    let t = std::fs::read_to_string(&chat).unwrap();
    assert!(t.contains("# filename: app.py"));
    std::fs::write(
        &chat,
        t.replace("# filename: app.py", "# filename: /workspace/app.py"),
    )
    .unwrap();
    let roots = dir.path().join("roots.txt");
    std::fs::write(&roots, "# no /workspace here\n/elsewhere\n").unwrap();
    let provenance = |out: &str, env: &[(&str, &Path)]| {
        let out_dir = dir.path().join(out);
        let (code, _, err) = run(
            &[
                "localize",
                case.to_str().unwrap(),
                "--out-dir",
                out_dir.to_str().unwrap(),
            ],
            env,
        );
        assert_eq!(code, Some(0), "{err}");
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out_dir.join("results.json")).unwrap())
                .unwrap();
        v["results"][0]["provenance"]["provenance"]
            .as_str()
            .unwrap_or_else(|| panic!("no provenance: {v}"))
            .to_string()
    };
    assert_eq!(provenance("embedded", &[]), "agent-introduced");
    assert_eq!(
        provenance("mine", &[("SAGE_WORKSPACE_ROOTS", &roots)]),
        "no-code-location"
    );
}

#[test]
fn the_input_limit_a_user_sets_bounds_what_a_case_check_reads() {
    let dir = tempfile::tempdir().unwrap();
    let case = copy_case("ag2-defect-systemrandom", dir.path());
    let base = case.join("baseline/app.py");
    let mut t = std::fs::read_to_string(&base).unwrap();
    // one long comment line: 1.5 MB, over a 1 MiB limit (many short lines would make the
    // check slow, not the limit bite)
    t.push_str(&format!("# {}\n", "x".repeat(1_500_000)));
    std::fs::write(&base, t).unwrap();
    let args = ["case", "check", case.to_str().unwrap()];
    let (_, out, err) = run(&args, &[]);
    assert!(!out.contains("input limit"), "{out}{err}");
    let mut c = sage();
    let out = c.args(args).env("SAGE_MAX_INPUT_MB", "1").output().unwrap();
    let out = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.contains("larger than the input limit of 1048576 bytes"),
        "{out}"
    );
}

#[test]
fn the_case_roots_a_user_allows_let_a_case_point_outside_its_folder() {
    let dir = tempfile::tempdir().unwrap();
    let case = copy_case("ag2-defect-systemrandom", dir.path());
    let shared = dir.path().join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::rename(case.join("baseline/app.py"), shared.join("app.py")).unwrap();
    let m = case.join("case.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&m).unwrap()).unwrap();
    v["baseline"] = serde_json::json!({"app.py": "../shared/app.py"});
    std::fs::write(&m, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    let args = ["case", "check", case.to_str().unwrap()];
    let (code, out, _) = run(&args, &[]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("outside the case folder"), "{out}");
    let (code, out, err) = run(&args, &[("SAGE_CASE_ROOTS", &shared)]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("ok (fragment located)"), "{out}");
}
