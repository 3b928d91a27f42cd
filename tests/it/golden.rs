//! Golden outputs of the bundled corpus (issue 30): `sage localize corpora/` under the default
//! lexicon judge, pinned byte for byte as insta snapshots: `results.json` (`sage.results/1`),
//! `summary.json`, the SARIF view, Table 5 as printed, the HTML site of `sage view` and the
//! annotation packets of `sage annotate export`; `sage replay --format json` of two traces; and
//! `sage case check --format json` of three cases.
//! A change to any published output fails here and shows the difference for review
//! (`cargo insta review`, or `INSTA_UPDATE=always` to accept).
//!
//! Masked, deliberately, and only these:
//! - the repository's absolute path (`[ROOT]`): results carry each case's folder
//!   (`case_dir`) and SARIF its `file://` URI, which differ per checkout, not per behaviour;
//! - the temporary folder the run is made in (`[TMP]`): Table 5's last line names the results
//!   folder in it and `results.json` records it as `case_root`;
//! - sage's own version (`[VERSION]`: `sage_version` in results, the SARIF driver's
//!   `version`): a release bump is not a change of behaviour.
//!
//! Nothing else in these outputs is volatile: no timestamp, duration or host name.
//! The pages of the 14 real cases (`corpora/susvibes`, 0.4-1.2 MB each, mostly the trace
//! itself) are pinned by SHA-256 and length in one snapshot instead of in full; the pages of the
//! 15 constructed cases and the index are kept whole.

use assert_cmd::Command;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn mask(text: &str) -> String {
    let uri = url::Url::from_directory_path(ROOT).unwrap();
    let uri = uri.as_str().trim_end_matches('/');
    let version = env!("CARGO_PKG_VERSION");
    text.replace(uri, "file://[ROOT]")
        .replace(ROOT, "[ROOT]")
        .replace(
            &format!("\"sage_version\": \"{version}\""),
            "\"sage_version\": \"[VERSION]\"",
        )
        .replace(
            &format!("\"name\": \"sage-localize\",\n          \"version\": \"{version}\""),
            "\"name\": \"sage-localize\",\n          \"version\": \"[VERSION]\"",
        )
}

fn snapshot(name: &str, text: &str) {
    insta::with_settings!({snapshot_path => "../snapshots", prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!(format!("golden__{name}"), mask(text));
    });
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

#[test]
fn the_bundled_corpus_localizes_to_its_golden_outputs() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("sage-results");
    let site = tmp.path().join("site");
    let table = Command::cargo_bin("sage")
        .unwrap()
        .current_dir(tmp.path())
        .arg("localize")
        .arg(Path::new(ROOT).join("corpora"))
        .args(["--no-ledger", "--no-progress", "--out-dir"])
        .arg(&out)
        .arg("--sarif")
        .arg(tmp.path().join("sarif.json"))
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    Command::cargo_bin("sage")
        .unwrap()
        .arg("view")
        .arg(&out)
        .arg("--out")
        .arg(&site)
        .assert()
        .success();

    // the table's last line names the results folder, a fresh temporary folder per run
    let table = String::from_utf8(table).unwrap();
    let table = table.replace(&out.display().to_string(), "[TMP]/sage-results");
    snapshot("table5", &table);
    // results.json records the folder localize ran in (`case_root`): the temporary folder
    let tmp_dir = tmp.path().display().to_string();
    snapshot(
        "results_json",
        &read(&out.join("results.json")).replace(&tmp_dir, "[TMP]"),
    );
    snapshot("summary_json", &read(&out.join("summary.json")));
    snapshot("sarif", &read(&tmp.path().join("sarif.json")));
    snapshot("view_index_html", &read(&site.join("index.html")));

    let constructed: Vec<String> = files(&Path::new(ROOT).join("corpora"))
        .into_iter()
        .filter(|d| d.join("case.json").is_file())
        .map(|d| d.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(constructed.len(), 15, "the 15 constructed cases");
    let mut digests = String::new();
    let pages = files(&site.join("cases"));
    assert_eq!(pages.len(), 29, "one page per case");
    for page in pages {
        let id = page.file_stem().unwrap().to_string_lossy().into_owned();
        let html = read(&page);
        if constructed.contains(&id) {
            snapshot(&format!("view_case_{id}"), &html);
        } else {
            let masked = mask(&html);
            let sha = hex::encode(Sha256::digest(masked.as_bytes()));
            digests.push_str(&format!("{id}.html  {sha}  {} bytes\n", masked.len()));
        }
    }
    snapshot("view_real_case_pages_sha256", &digests);

    // The annotation packets of the run (`sage.annotation-packet/1`): the sheet whole, the
    // packets (4 MB, mostly the traces) and the key by SHA-256.
    let ann = tmp.path().join("annotate");
    Command::cargo_bin("sage")
        .unwrap()
        .args(["annotate", "export"])
        .arg(&out)
        .args(["--annotator", "R1", "--out"])
        .arg(&ann)
        .assert()
        .success();
    snapshot("annotate_sheet_csv", &read(&ann.join("packet/sheet.csv")));
    let mut digests = String::new();
    let packet_files = [ann.join("key.json"), ann.join("packet/packets.json")];
    for f in packet_files
        .into_iter()
        .chain(files(&ann.join("packet/cases")))
    {
        let masked = mask(&read(&f));
        let sha = hex::encode(Sha256::digest(masked.as_bytes()));
        let name = f.strip_prefix(&ann).unwrap().display().to_string();
        digests.push_str(&format!("{name}  {sha}  {} bytes\n", masked.len()));
    }
    snapshot("annotate_packets_sha256", &digests);
}

/// `sage screen` of the bundled corpus (`sage.screen/1`, issue 30) as JSON and SARIF, without
/// Bandit (L2 not run; nothing is timed then). Run from `corpora/` so each case's `source`
/// is `./CASE`.
#[test]
fn the_bundled_corpus_screens_to_its_golden_report() {
    let corpora = Path::new(ROOT).join("corpora");
    let screen = |format: &str| {
        let out = Command::cargo_bin("sage")
            .unwrap()
            .current_dir(&corpora)
            .args(["screen", ".", "--no-bandit", "-q", "--format", format])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        String::from_utf8(out).unwrap()
    };
    snapshot("screen_json", &screen("json"));
    snapshot("screen_sarif", &screen("sarif"));
}

/// `sage confirm export` of the bundled corpus's screen report: its `key.json`
/// (`sage.confirm-key/1`, issue 30) with a seeded sample for the second annotator. Run from
/// `corpora/` so each packet's `source` is `./CASE`; nothing in the key is volatile.
#[test]
fn the_bundled_corpus_exports_to_its_golden_confirm_key() {
    let corpora = Path::new(ROOT).join("corpora");
    let tmp = tempfile::tempdir().unwrap();
    let report = Command::cargo_bin("sage")
        .unwrap()
        .current_dir(&corpora)
        .args(["screen", ".", "--no-bandit", "-q", "--format", "json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    std::fs::write(tmp.path().join("screen.json"), report).unwrap();
    Command::cargo_bin("sage")
        .unwrap()
        .current_dir(&corpora)
        .args(["confirm", "export"])
        .arg(tmp.path().join("screen.json"))
        .arg("--out")
        .arg(tmp.path().join("packets"))
        .args(["--annotators", "R1,R2", "--sample", "3"])
        .assert()
        .success();
    snapshot("confirm_key", &read(&tmp.path().join("packets/key.json")));
}

/// A git repository a test builds for `sage szz` (issue 30): an import, a reindent, a rename
/// of the file and two fixes, with fixed dates and author so every hash is the same on every
/// machine. Returns the repository, the first fix and the second.
fn szz_repo() -> (crate::szz::Repo, String, String) {
    let mut r = crate::szz::Repo::new();
    let body = "int main(void) {\n    int n = read_len();\n    char buf[16];\n    copy(buf, src, n);\n    // copy the rest\n    return 0;\n}\n";
    r.commit_file("m.c", body, "add main");
    r.write("other.c", "int x;\n");
    r.commit("unrelated");
    let body = body.replace("    copy(buf, src, n);", "\tcopy(buf,  src, n);");
    r.commit_file("m.c", &body, "reindent");
    r.git(&["mv", "m.c", "main.c"]);
    r.commit("rename");
    let body = body.replace(
        "\tcopy(buf,  src, n);",
        "\tcopy(buf, src, n < 16 ? n : 16);",
    );
    let fix1 = r.commit_file("main.c", &body, "fix overflow");
    let body = body.replace("char buf[16];", "char buf[32];");
    let fix2 = r.commit_file("main.c", &body, "fix size");
    (r, fix1, fix2)
}

/// The temporary folder and the timings (`elapsed_ms`, `median_ms`, `mean_ms`) masked: nothing
/// else in `sage szz`'s JSON is volatile.
fn mask_szz(text: &str, tmp: &Path) -> String {
    let ms = regex::Regex::new(r#""(elapsed_ms|median_ms|mean_ms)": [0-9.]+"#).unwrap();
    ms.replace_all(
        &text.replace(&tmp.display().to_string(), "[TMP]"),
        "\"$1\": [MS]",
    )
    .into_owned()
}

/// `sage szz --format json` with every variant, and `sage szz eval --format json` of a small
/// dataset on the same repository (one fix absent), pinned as written before the format had
/// types of its own, except the `schema` line that named each format with them.
#[test]
fn szz_on_a_built_repository_gives_its_golden_json() {
    let (r, fix1, fix2) = szz_repo();
    let out = Command::cargo_bin("sage")
        .unwrap()
        .args(["szz", "--repo"])
        .arg(r.path())
        .args(["--fix", &fix1, "--variant", "b,ag,ma,r,l,v,agent"])
        .args(["--format", "json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    snapshot(
        "szz_json",
        &mask_szz(&String::from_utf8(out).unwrap(), r.path()),
    );

    let repos = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(repos.path().join("acme")).unwrap();
    r.git(&[
        "clone",
        "-q",
        "--bare",
        ".",
        repos.path().join("acme/widget.git").to_str().unwrap(),
    ]);
    let first = r.git(&["rev-list", "--max-parents=0", "HEAD"]);
    let ds = serde_json::json!([
        {"id": 1, "repo_name": "acme/widget", "fix_commit_hash": fix1, "bug_commit_hash": [first], "language": ["c"]},
        {"id": 2, "repo_name": "acme/widget", "fix_commit_hash": fix2, "bug_commit_hash": [first[..12].to_string()], "language": ["c"]},
        {"id": 3, "repo_name": "acme/absent", "fix_commit_hash": "abcdef1234", "bug_commit_hash": ["1234567"], "language": ["c"]}
    ]);
    let file = repos.path().join("ds.json");
    std::fs::write(&file, serde_json::to_string(&ds).unwrap()).unwrap();
    let out = Command::cargo_bin("sage")
        .unwrap()
        .args(["szz", "eval"])
        .arg(&file)
        .arg("--repos")
        .arg(repos.path())
        .args(["--variant", "b,ag,ma,r,l,v,agent", "--format", "json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    snapshot(
        "szz_eval_json",
        &mask_szz(&String::from_utf8(out).unwrap(), repos.path()),
    );
}

/// `sage replay --format json` (`sage.replay/1`, issue 30) of two traces of the bundled corpus,
/// run from `corpora/` so the trace's path is relative: a real SWE-agent trace of SusVibes
/// checked against its submission and the case's model patch, without a baseline (partial
/// views, known runs), and a constructed AG2 chat on its baseline folder (whole files).
/// Commands are not executed (`--no-execute`: the execution block says `off: ...`; whether the
/// sandbox runs depends on the host, and what it runs is timed).
#[test]
fn replays_of_the_bundled_corpus_are_golden() {
    let corpora = Path::new(ROOT).join("corpora");
    let replay = |args: &[&str]| {
        let out = Command::cargo_bin("sage")
            .unwrap()
            .current_dir(&corpora)
            .arg("replay")
            .args(args)
            .args(["--no-execute", "--format", "json"])
            .output()
            .unwrap();
        assert!(
            out.stderr.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let real = "susvibes/claude-4-sonnet__psf__requests_74ea7cf7a6a27a4eeb2ae24e162bcc942a6706d5";
    snapshot(
        "replay_susvibes_requests",
        &replay(&[
            &format!("{real}/psf__requests_74ea7cf7a6a27a4eeb2ae24e162bcc942a6706d5.json"),
            "--result",
            &format!("{real}/model_patch.diff"),
        ]),
    );
    snapshot(
        "replay_ag2_aes_ecb",
        &replay(&[
            "ag2-fig1a-aes-ecb/chat.json",
            "--baseline-dir",
            "ag2-fig1a-aes-ecb/baseline",
        ]),
    );
}

/// `sage reliability` (`sage.reliability/1`, issue 30): `reliability.json` and Table 6-7 as
/// Markdown of two inputs. The results of the bundled corpus written by main
/// (`tests/fixtures/results-main`: one judge, no annotations, so the report says why its
/// tables are empty), and the inputs of `reliability.rs` (two runs of one judge, a second
/// judge, two annotators), which fill every record of the format: consistency, agreement with
/// humans, resampling and subgroups. What `--format json` prints is the same document.
#[test]
fn reliability_reports_are_golden() {
    let tmp = tempfile::tempdir().unwrap();
    let report = |name: &str, sets: &[PathBuf], annotations: Option<&Path>| {
        let out = tmp.path().join(name);
        let mut cmd = Command::cargo_bin("sage").unwrap();
        cmd.current_dir(ROOT).arg("reliability").args(sets);
        if let Some(a) = annotations {
            cmd.arg("--annotations").arg(a);
        }
        let printed = cmd
            .arg("--out")
            .arg(&out)
            .args(["--format", "json"])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let json = read(&out.join("reliability.json"));
        assert_eq!(String::from_utf8(printed).unwrap(), json, "{name}");
        let tmp_dir = tmp.path().display().to_string();
        (
            json.replace(&tmp_dir, "[TMP]"),
            read(&out.join("reliability.md")).replace(&tmp_dir, "[TMP]"),
        )
    };
    let corpus = [PathBuf::from("tests/fixtures/results-main/results.json")];
    let (json, _) = report("corpus", &corpus, None);
    snapshot("reliability_corpus_json", &json);
    let (sets, ann) = crate::reliability::two_runs_two_annotators(tmp.path());
    let (json, md) = report("two-judges", &sets, Some(&ann));
    snapshot("reliability_two_judges_json", &json);
    snapshot("reliability_two_judges_md", &md);
}

/// `sage case check --format json` (issue 30) of three cases of the bundled corpus, run from
/// `corpora/` so each case's folder is relative: a real SWE-agent case of SusVibes (views that
/// agree, a replay equal to the final file, unverifiable files the trace made), a constructed
/// Aider case with a problem (an anchor on a file the trace never touches) and a constructed
/// AG2 case whose final file is its own (a replay that differs). Commands are not executed
/// (`--no-execute`), as in the replays above; nothing else is volatile. Pinned as written
/// before the format had types of its own, except the `schema` line that named it with them.
#[test]
fn case_check_of_the_bundled_corpus_is_golden() {
    let out = Command::cargo_bin("sage")
        .unwrap()
        .current_dir(Path::new(ROOT).join("corpora"))
        .args(["case", "check", "--no-execute", "--format", "json"])
        .args([
            "susvibes/claude-4-sonnet__psf__requests_74ea7cf7a6a27a4eeb2ae24e162bcc942a6706d5",
            "aider-undetermined-curl",
            "ag2-final-only-normpath",
        ])
        .assert()
        .code(1)
        .get_output()
        .stdout
        .clone();
    snapshot("case_check", &String::from_utf8(out).unwrap());
}

/// `sage szz bench --format json` on the built repository's two fixes: each fix's row as
/// written before the output had types of its own. The timings and the repository's folder
/// are masked; the rest (files, lines, candidates, git calls) is the same on every machine.
#[test]
fn szz_bench_on_a_built_repository_gives_its_golden_json() {
    let (r, fix1, fix2) = szz_repo();
    let bench = |fix: &str| {
        let out = Command::cargo_bin("sage")
            .unwrap()
            .args(["szz", "bench", "--repo"])
            .arg(r.path())
            .args(["--fix", fix, "--runs", "1", "--format", "json"])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let ms = regex::Regex::new(r#""(bszz_ms|blame_ms)": [0-9.e-]+"#).unwrap();
        ms.replace_all(
            &String::from_utf8(out)
                .unwrap()
                .replace(&r.path().display().to_string(), "[TMP]"),
            "\"$1\": [MS]",
        )
        .into_owned()
    };
    snapshot(
        "szz_bench_json",
        &format!("{}{}", bench(&fix1), bench(&fix2)),
    );
}

/// `sage agree --format json` (a document the CLI builds, no internal type reaches it) of the
/// Krippendorff 2011 reliability data with alpha at each level and Gwet's AC2, and of Cohen's
/// yes/no example with kappa, run from the repository so the file is named relatively: pinned
/// so any change of its bytes is a reviewed one.
#[test]
fn agreement_reports_are_golden() {
    let agree = |args: &[&str]| {
        let out = Command::cargo_bin("sage")
            .unwrap()
            .current_dir(ROOT)
            .arg("agree")
            .args(args)
            .args(["--format", "json"])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        String::from_utf8(out).unwrap()
    };
    let k2011 = "tests/data/agree/krippendorff2011.csv";
    let mut text = String::new();
    for level in ["nominal", "ordinal", "interval", "ratio"] {
        text.push_str(&agree(&[k2011, "--metric", "alpha", "--level", level]));
    }
    text.push_str(&agree(&[
        k2011,
        "--metric",
        "gwet",
        "--weights",
        "quadratic",
    ]));
    text.push_str(&agree(&[
        "tests/data/agree/cohen_yes_no.csv",
        "--metric",
        "cohen",
    ]));
    snapshot("agree_json", &text);
}
