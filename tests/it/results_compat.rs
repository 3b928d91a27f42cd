//! Results files written before `sage.results/1` had types of its own (issue 30) still read:
//! `tests/fixtures/results-main/results.json` is the output of `sage localize` at main
//! 038e4df (the 15 constructed cases of `corpora/` and one real case, lexicon judge). It
//! must read, write back byte for byte, and open in `sage view`, `sage annotate export` and
//! the reliability input.

use assert_cmd::Command;
use sage_pipeline::results::ResultSet;
use std::path::Path;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const REAL: &str =
    "gemini-2.5-pro__aio-libs__aiohttp-session_1b356f01bbab57d041c9a75bacd72fbbf8524728";

fn fixture() -> std::path::PathBuf {
    Path::new(ROOT).join("tests/fixtures/results-main/results.json")
}

#[test]
fn a_results_file_written_by_main_reads_and_writes_back_byte_for_byte() {
    let text = std::fs::read_to_string(fixture()).unwrap();
    let set = ResultSet::read(&fixture()).unwrap();
    assert_eq!(set.results.len(), 16);
    assert_eq!(sage_pipeline::sink::pretty(&set), text);
    // the reliability input reads each result's labels: 10 agent-introduced, 4 inherited,
    // 2 with no code location, as main wrote them
    let mut provenance = std::collections::BTreeMap::new();
    for r in &set.results {
        let labels = sage_pipeline::from_results::sage_labels(r);
        *provenance.entry(labels.provenance.unwrap()).or_insert(0) += 1;
    }
    let want = [
        ("agent-introduced", 10),
        ("inherited", 4),
        ("no-code-location", 2),
    ];
    let want = want.map(|(k, n)| (k.to_string(), n)).into_iter().collect();
    assert_eq!(provenance, want);
}

#[test]
fn a_results_file_written_by_main_opens_in_view_and_annotate_export() {
    let tmp = tempfile::tempdir().unwrap();
    // The case folders were `./CASE` under a folder that is gone: found from `corpora/`.
    let relocate = format!("./{REAL}=susvibes/{REAL}");
    Command::cargo_bin("sage")
        .unwrap()
        .current_dir(Path::new(ROOT).join("corpora"))
        .arg("view")
        .arg(fixture())
        .arg("--out")
        .arg(tmp.path().join("site"))
        .args(["--relocate", &relocate])
        .assert()
        .success();
    assert_eq!(
        std::fs::read_dir(tmp.path().join("site/cases"))
            .unwrap()
            .count(),
        16
    );
    Command::cargo_bin("sage")
        .unwrap()
        .current_dir(Path::new(ROOT).join("corpora"))
        .args(["annotate", "export"])
        .arg(fixture())
        .args(["--annotator", "R1", "--out"])
        .arg(tmp.path().join("packets"))
        .args(["--relocate", &relocate])
        .assert()
        .success();
    let packets = std::fs::read_to_string(tmp.path().join("packets/packet/packets.json")).unwrap();
    assert!(packets.contains("sage.annotation-packet/1"), "{packets}");
}
