//! Screen reports written before `sage.screen/1` had types of its own (issue 30) still read:
//! `tests/fixtures/screen-main/` holds two outputs of `sage screen --format json` at main
//! 6c771d5 (see its README). `sage confirm export` reads them, so each must read and write
//! back byte for byte, and the bundled corpus's report must open in `confirm export`.

use assert_cmd::Command;
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn fixture(name: &str) -> PathBuf {
    Path::new(ROOT)
        .join("tests/fixtures/screen-main")
        .join(name)
}

#[test]
fn screen_reports_written_by_main_read_and_write_back_byte_for_byte() {
    for name in ["screen.json", "cases.json"] {
        let text = std::fs::read_to_string(fixture(name)).unwrap();
        let report: sage_screen::Report = serde_json::from_str(&text).unwrap();
        assert!(!report.cases.is_empty(), "{name}");
        let back = serde_json::to_string_pretty(&report).unwrap() + "\n";
        assert_eq!(back, text, "{name} does not write back as main wrote it");
    }
}

#[test]
fn a_screen_report_written_by_main_opens_in_confirm_export() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::cargo_bin("sage")
        .unwrap()
        .current_dir(Path::new(ROOT).join("corpora"))
        .args(["confirm", "export"])
        .arg(fixture("screen.json"))
        .arg("--out")
        .arg(tmp.path())
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let out = String::from_utf8(out).unwrap();
    assert!(out.starts_with("10 packets in "), "{out}");
    assert!(tmp.path().join("sheet-R1.csv").is_file());
}
