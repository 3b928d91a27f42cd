//! `sage view` in a real browser: headless Chromium loads the pages, the tests read the DOM
//! it produced and save screenshots under `target/` for review.

use assert_cmd::Command;
use std::path::{Path, PathBuf};
use std::process::Command as Process;

fn chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|n| {
            Process::new("sh")
                .arg("-c")
                .arg(format!("command -v {n}"))
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        })
}

fn browser(args: &[&str], url: &str) -> String {
    let bin = chromium().expect("chromium");
    let out = Process::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--virtual-time-budget=2000",
        ])
        .args(args)
        .arg(url)
        .output()
        .expect("chromium runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn site() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let results = d.path().join("results");
    Command::cargo_bin("sage")
        .unwrap()
        .args(["localize", "corpora", "--out-dir"])
        .arg(&results)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .assert()
        .success();
    let out = d.path().join("site");
    Command::cargo_bin("sage")
        .unwrap()
        .arg("view")
        .arg(&results)
        .arg("--out")
        .arg(&out)
        .assert()
        .success();
    (d, out)
}

fn url(p: &Path, query: &str) -> String {
    format!("file://{}{}", p.display(), query)
}

fn screenshot_dir() -> PathBuf {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/view-screenshots");
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn pages_are_self_contained() {
    let (_d, out) = site();
    for e in std::fs::read_dir(out.join("cases")).unwrap() {
        let html = std::fs::read_to_string(e.unwrap().path()).unwrap();
        assert!(!html.contains("src=\"http") && !html.contains("href=\"http"));
        assert!(html.contains("default-src 'none'"));
    }
}

#[test]
fn the_origin_marker_sits_on_the_right_turn_in_a_browser() {
    if chromium().is_none() {
        super::need::skip(
            "needs Chromium, which is not installed (bash scripts/install-chromium.sh)",
        );
        return;
    }
    let (_d, out) = site();
    let page = out.join("cases/ag2-fig1a-aes-ecb.html");
    let dom = browser(&["--dump-dom"], &url(&page, ""));
    // Turn 1 carries the origin marker and class; turn 3 the introducing write.
    let turn = |n: usize| {
        let start = dom
            .find(&format!("id=\"turn-{n}\""))
            .unwrap_or_else(|| panic!("turn {n} missing"));
        let end = dom[start..].find("</section>").unwrap() + start;
        let open = dom[..start].rfind("<section").unwrap();
        dom[open..end].to_string()
    };
    assert!(turn(1).contains("class=\"turn origin\""), "{}", turn(1));
    assert!(turn(1).contains("data-marker=\"origin\""));
    assert!(!turn(2).contains("data-marker=\"origin\""));
    assert!(turn(3).contains("data-marker=\"introducing-write\""));
    assert!(turn(3).contains("data-marker=\"missed\""));
    // The quote is highlighted in place.
    assert!(turn(1).contains("<mark>"), "{}", turn(1));
    let shot = screenshot_dir().join("case-fig1a.png");
    browser(
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1280,1400",
        ],
        &url(&page, ""),
    );
    assert!(shot.is_file());
}

#[test]
fn search_finds_a_quoted_phrase_in_a_browser() {
    if chromium().is_none() {
        super::need::skip(
            "needs Chromium, which is not installed (bash scripts/install-chromium.sh)",
        );
        return;
    }
    let (_d, out) = site();
    let index = out.join("index.html");
    let dom = browser(
        &["--dump-dom"],
        &url(&index, "?q=Replace%20DES%20with%20AES"),
    );
    let visible: Vec<&str> = dom
        .split("<tr class=\"case")
        .skip(1)
        .filter(|row| row.starts_with("\""))
        .map(|row| {
            row.split("data-id=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap()
        })
        .collect();
    assert_eq!(visible, vec!["ag2-fig1a-aes-ecb"], "{dom}");
    assert!(dom.contains("<span id=\"shown\">1</span>"));
    let shot = screenshot_dir().join("index.png");
    browser(
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1280,1400",
        ],
        &url(&index, ""),
    );
    assert!(shot.is_file());
}
