//! `sage localize` on the product path: the release binary, the offline lexicon judge, on
//! generated long traces (AG2 and Aider, 100 / 1,000 / 10,000 turns) and generated corpora
//! (100 / 1,000 / 10,000 cases), side by side with a plain parse of the same files.
//!
//! Run: `cargo bench --bench localize` (add `-- --quick` to skip the 10,000 sizes;
//! `SAGE_BENCH_BIN=PATH` runs another build of sage on the same inputs, to compare).
//! Prints wall time, CPU time (user + system of the sage process: steadier than wall time on a
//! shared machine), turns/s, peak memory (VmHWM of the sage process), the plain parse time of
//! the same trace files (JSON: `serde_json::from_slice::<Value>`; Markdown: reading and
//! splitting lines), the ratio of the two, the growth factor per 10× size, and for a single
//! trace two more references: `sage normalize` of the same files (the adapter's parse into
//! canonical turns, with process start-up, as localize has it), and a plain parse by another
//! program, `python3 -c 'json.load(...)'` (the reference issue 19 was filed against: 0.27 s
//! for its 10,000-message trace), when python3 is on the PATH. Inputs are built from the
//! bundled corpus's cases, so every turn is a real turn shape of its format.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), dst).unwrap();
        }
    }
}

fn set_id(case_dir: &Path, id: &str) {
    let p = case_dir.join("case.json");
    let mut c: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    c["id"] = id.into();
    // The corpus's expectations hold for the original trace only.
    c.as_object_mut().unwrap().remove("expected");
    std::fs::write(&p, serde_json::to_string_pretty(&c).unwrap()).unwrap();
}

/// An AG2 case whose chat repeats the corpus case's agent messages up to `turns` messages.
fn ag2_case(dir: &Path, turns: usize) -> PathBuf {
    let src = Path::new(ROOT).join("corpora/ag2-fig1a-aes-ecb");
    let out = dir.join(format!("ag2-{turns}"));
    copy_dir(&src, &out);
    set_id(&out, &format!("ag2-{turns}"));
    let p = out.join("chat.json");
    let mut chat: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    let msgs = chat["chat_history"].as_array().unwrap().clone();
    let mut hist = vec![msgs[0].clone()];
    while hist.len() < turns {
        hist.extend(msgs[1..].iter().cloned());
    }
    hist.truncate(turns);
    chat["chat_history"] = serde_json::Value::Array(hist);
    std::fs::write(&p, serde_json::to_vec(&chat).unwrap()).unwrap();
    out
}

/// An Aider case: `turns / 2` exchanges, every fifth reply a SEARCH/REPLACE edit that
/// toggles a marker line of the baseline (so every edit applies).
fn aider_case(dir: &Path, turns: usize) -> PathBuf {
    let src = Path::new(ROOT).join("corpora/aider-defect-sqli-blocklist");
    let out = dir.join(format!("aider-{turns}"));
    copy_dir(&src, &out);
    set_id(&out, &format!("aider-{turns}"));
    let base = out.join("baseline/app.py");
    let mut b = std::fs::read_to_string(&base).unwrap();
    b.push_str("\n# review pass 0\n");
    std::fs::write(&base, b).unwrap();
    let hist = out.join(".aider.chat.history.md");
    let head = std::fs::read_to_string(&hist).unwrap();
    let mut text = head;
    let mut pass = 0;
    for i in 0..turns / 2 {
        text.push_str(&format!(
            "\n#### Review step {i}: check the title handling again.  \n\n"
        ));
        if i % 5 == 4 {
            text.push_str(&format!(
                "The title check stays; I record the review pass.\n\napp.py\n```python\n\
                 <<<<<<< SEARCH\n# review pass {pass}\n=======\n# review pass {}\n\
                 >>>>>>> REPLACE\n```\n\n> Applied edit to app.py  \n",
                pass + 1
            ));
            pass += 1;
        } else {
            text.push_str(
                "The query still concatenates the title, so the injection path remains; \
                 a parameterized query would close it.\n",
            );
        }
    }
    std::fs::write(&hist, text).unwrap();
    out
}

/// A corpus of `n` small cases, copies of the bundled cases with distinct ids.
fn corpus(dir: &Path, n: usize) -> PathBuf {
    let out = dir.join(format!("corpus-{n}"));
    let mut srcs: Vec<PathBuf> = std::fs::read_dir(Path::new(ROOT).join("corpora"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("case.json").is_file())
        .collect();
    srcs.sort();
    for i in 0..n {
        let s = &srcs[i % srcs.len()];
        let d = out.join(format!("c{i:05}"));
        copy_dir(s, &d);
        set_id(&d, &format!("c{i:05}"));
    }
    out
}

/// Trace files of every case under `root`.
fn trace_files(root: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    for e in walkdir::WalkDir::new(root)
        .into_iter()
        .filter_map(Result::ok)
    {
        if e.file_name() == "case.json" {
            let c: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(e.path()).unwrap()).unwrap();
            for f in c["trace"]["files"].as_array().unwrap() {
                v.push(e.path().parent().unwrap().join(f.as_str().unwrap()));
            }
        }
    }
    v
}

/// The plain parse of the same files: what reading the input costs at the least.
fn plain_parse(files: &[PathBuf]) -> Duration {
    let t = Instant::now();
    let mut n = 0usize;
    for f in files {
        let bytes = std::fs::read(f).unwrap();
        if f.extension().is_some_and(|x| x == "json") {
            let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            n += std::hint::black_box(&v).is_object() as usize;
        } else {
            n += String::from_utf8_lossy(&bytes).lines().count();
        }
    }
    std::hint::black_box(n);
    t.elapsed()
}

/// A plain parse of the same files by another program, as a user would time one:
/// `python3` loading each JSON file (and reading the lines of the others), process start-up
/// included. `None` without python3.
fn python_parse(files: &[PathBuf]) -> Option<Duration> {
    const SCRIPT: &str = "import json, sys\n\
        for f in sys.argv[1:]:\n    \
        json.load(open(f)) if f.endswith('.json') else open(f).read().splitlines()\n";
    let t = Instant::now();
    let status = Command::new("python3")
        .arg("-c")
        .arg(SCRIPT)
        .args(files)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .ok()?;
    status.success().then(|| t.elapsed())
}

/// The sage binary to measure: this build, or `SAGE_BENCH_BIN`.
fn sage_bin() -> String {
    std::env::var("SAGE_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_sage").to_string())
}

/// CPU time (user + system) of this process's waited-for children so far, from
/// `/proc/self/stat` (`cutime`, `cstime`, in clock ticks of 1/100 s on Linux).
fn children_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // cutime and cstime are fields 16 and 17 of the whole line: 14 and 15 after `)`.
    let ticks = f.get(13).copied().unwrap_or(0) + f.get(14).copied().unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

/// `sage normalize` of a single trace's files: the adapter's parse, with process start-up.
fn normalize(files: &[PathBuf]) -> Duration {
    let t = Instant::now();
    let status = Command::new(sage_bin())
        .arg("normalize")
        .args(files)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "sage normalize failed on {files:?}");
    t.elapsed()
}

/// Run `sage localize DIR --no-write`; wall time, CPU time, the process's peak RSS in KiB
/// and the number of turns.
fn localize(dir: &Path) -> (Duration, Duration, u64, usize) {
    let t = Instant::now();
    let cpu = children_cpu();
    let mut child = Command::new(sage_bin())
        .args([
            "localize",
            dir.to_str().unwrap(),
            "--no-write",
            "--format",
            "json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let status = format!("/proc/{}/status", child.id());
    let mut peak = 0u64;
    let out = {
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut { stdout }, &mut s).unwrap();
            s
        });
        loop {
            if let Ok(s) = std::fs::read_to_string(&status) {
                if let Some(l) = s.lines().find(|l| l.starts_with("VmHWM:")) {
                    let kb: u64 = l
                        .split_whitespace()
                        .nth(1)
                        .and_then(|x| x.parse().ok())
                        .unwrap_or(0);
                    peak = peak.max(kb);
                }
            }
            if child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let out = reader.join().unwrap();
        child.wait().unwrap();
        out
    };
    let elapsed = t.elapsed();
    let cpu = children_cpu().saturating_sub(cpu);
    let set: serde_json::Value = serde_json::from_str(&out).expect("localize printed JSON");
    let turns: usize = set["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["turns"].as_array().map_or(0, Vec::len))
        .sum();
    (elapsed, cpu, peak, turns)
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let sizes: &[usize] = if quick {
        &[100, 1_000]
    } else {
        &[100, 1_000, 10_000]
    };
    let tmp = tempfile::tempdir().unwrap();
    println!(
        "{:<16} {:>8} {:>10} {:>8} {:>10} {:>9} {:>9} {:>8} {:>9} {:>8} {:>9} {:>6} {:>8}",
        "input",
        "turns",
        "localize",
        "cpu",
        "turns/s",
        "peak MB",
        "parse",
        "× parse",
        "normalize",
        "× norm",
        "py parse",
        "× py",
        "growth"
    );
    type Make = fn(&Path, usize) -> PathBuf;
    let kinds: [(&str, Make); 3] = [
        ("ag2 trace", ag2_case),
        ("aider trace", aider_case),
        ("corpus", corpus),
    ];
    for (kind, make) in kinds {
        let mut prev: Option<f64> = None;
        for &n in sizes {
            let dir = make(tmp.path(), n);
            let files = trace_files(&dir);
            let parse = plain_parse(&files);
            // One process per trace: for a corpus that would measure process start-up.
            let norm = (kind != "corpus").then(|| normalize(&files));
            let py = if kind != "corpus" {
                python_parse(&files)
            } else {
                None
            };
            let (t, cpu, peak, turns) = localize(&dir);
            let secs = t.as_secs_f64();
            let growth = prev.map_or("-".to_string(), |p| format!("{:.1}×", secs / p));
            let (norm_s, norm_x) = match norm {
                Some(d) => (
                    format!("{:.3}s", d.as_secs_f64()),
                    format!("{:.1}", secs / d.as_secs_f64().max(1e-9)),
                ),
                None => ("-".into(), "-".into()),
            };
            let (py_s, py_x) = match py {
                Some(d) => (
                    format!("{:.3}s", d.as_secs_f64()),
                    format!("{:.1}", secs / d.as_secs_f64().max(1e-9)),
                ),
                None => ("-".into(), "-".into()),
            };
            println!(
                "{:<16} {:>8} {:>9.3}s {:>7.2}s {:>10.0} {:>9.1} {:>8.3}s {:>8.1} {:>9} {:>8} {:>9} {:>6} {:>8}",
                format!("{kind} {n}"),
                turns,
                secs,
                cpu.as_secs_f64(),
                turns as f64 / secs,
                peak as f64 / 1024.0,
                parse.as_secs_f64(),
                secs / parse.as_secs_f64().max(1e-9),
                norm_s,
                norm_x,
                py_s,
                py_x,
                growth
            );
            prev = Some(secs);
        }
    }
}
