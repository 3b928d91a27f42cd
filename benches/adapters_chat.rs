//! Throughput of the adapters of issue 3 part A on inputs built by repeating the real samples
//! in `../shared/traces`, next to a plain parse of the same file (serde_json to a `Value`, or
//! reading and splitting the lines for markdown). The 100 MB AG2 runtime log also reports the
//! peak resident memory, which stays far below twice the file (JSON Lines are streamed).
//!
//! Run: `cargo bench --bench adapters_chat`

use sage_adapters::SourceFile;
use std::io::{BufRead, Write};
use std::path::Path;
use std::time::Instant;

const TRACES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/traces");
const MB: f64 = 1024.0 * 1024.0;

fn vm_hwm_kb() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Build a file of at least `target` bytes.
fn build(kind: &str, target: usize, out: &Path) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(out).unwrap());
    let read = |p: &str| std::fs::read_to_string(Path::new(TRACES).join(p)).unwrap();
    let mut written = 0usize;
    match kind {
        "aider" => {
            let s = read("aider/Simple-Calulator.aider.chat.history.md");
            while written < target {
                f.write_all(s.as_bytes()).unwrap();
                written += s.len();
            }
        }
        "ag2" => {
            let s = read("ag2/PhenoAssistant_autogen_runtime.log");
            let (banner, body) = s.split_once('\n').unwrap();
            writeln!(f, "{banner}").unwrap();
            while written < target {
                f.write_all(body.as_bytes()).unwrap();
                if !body.ends_with('\n') {
                    f.write_all(b"\n").unwrap();
                }
                written += body.len() + 1;
            }
        }
        "who-and-when" | "deepagents" => {
            let (p, list) = if kind == "who-and-when" {
                ("who-and-when/hand_crafted_6.json", "/history")
            } else {
                ("deepagents/summarization_seed_messages.json", "")
            };
            let mut v: serde_json::Value = serde_json::from_str(&read(p)).unwrap();
            let items = v.pointer(list).unwrap().as_array().unwrap().clone();
            let one = serde_json::to_string(&items).unwrap().len();
            let mut all = Vec::new();
            while all.len() / items.len() * one < target {
                all.extend(items.iter().cloned());
            }
            *v.pointer_mut(list).unwrap() = serde_json::Value::Array(all);
            serde_json::to_writer_pretty(&mut f, &v).unwrap();
        }
        "camel" => {
            let s = read("camel/camel_gaia_results.jsonl");
            while written < target {
                f.write_all(s.as_bytes()).unwrap();
                f.write_all(b"\n").unwrap();
                written += s.len() + 1;
            }
        }
        _ => unreachable!(),
    }
    f.flush().unwrap();
}

fn plain_parse(kind: &str, p: &Path) {
    let r = std::io::BufReader::new(std::fs::File::open(p).unwrap());
    match kind {
        "aider" => {
            let n = std::fs::read_to_string(p).unwrap().lines().count();
            std::hint::black_box(n);
        }
        "ag2" => {
            for l in r.lines() {
                let l = l.unwrap();
                std::hint::black_box(serde_json::from_str::<serde_json::Value>(&l).ok());
            }
        }
        "camel" => {
            for v in serde_json::Deserializer::from_reader(r).into_iter::<serde_json::Value>() {
                std::hint::black_box(v.unwrap());
            }
        }
        _ => {
            let v: serde_json::Value = serde_json::from_reader(r).unwrap();
            std::hint::black_box(v);
        }
    }
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    println!(
        "{:<14} {:>8} {:>12} {:>10} {:>12} {:>10} {:>8} {:>8} {:>12}",
        "adapter", "MB", "normalize s", "MB/s", "plain s", "MB/s", "ratio", "turns", "peak RSS MB"
    );
    for (kind, size) in [
        ("ag2", 100usize),
        ("aider", 20),
        ("who-and-when", 20),
        ("deepagents", 20),
        ("camel", 20),
    ] {
        let p = dir.path().join(kind);
        build(kind, size * 1024 * 1024, &p);
        let mb = std::fs::metadata(&p).unwrap().len() as f64 / MB;
        let files = [SourceFile::new(kind, &p)];
        let t0 = Instant::now();
        let t = sage_adapters::normalize(
            &files,
            &sage_adapters::NormalizeOptions::framework(Some(kind)),
        )
        .unwrap();
        let norm = t0.elapsed().as_secs_f64();
        let hwm = vm_hwm_kb().map(|k| k as f64 / 1024.0).unwrap_or(f64::NAN);
        let turns = t.turns.len();
        drop(t);
        let t1 = Instant::now();
        plain_parse(kind, &p);
        let plain = t1.elapsed().as_secs_f64();
        println!(
            "{:<14} {:>8.1} {:>12.3} {:>10.1} {:>12.3} {:>10.1} {:>8.2} {:>8} {:>12.0}",
            kind,
            mb,
            norm,
            mb / norm,
            plain,
            mb / plain,
            norm / plain,
            turns,
            hwm
        );
        std::fs::remove_file(&p).unwrap();
    }
}
