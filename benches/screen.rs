//! Screening time per file next to Bandit's own time on the same files.
//!
//! `cargo bench --bench screen` (release). Files: the 221 SecurityEval v2.2 + SALLM insecure
//! programs (baseline = the prompt), from ../shared/security/datasets. Prints:
//! * sage in-process L0+L1+L3 per file (parse, syntax errors, definitions, imports, score),
//! * sage `screen()` for the whole batch without Bandit, per file,
//! * Bandit once over the batch (what `sage screen` does), per file,
//! * Bandit invoked once per file (a sample), per file,
//! * sage `screen()` with Bandit, per file.

use sage_screen::{l0, l1, l3, py::PyFile, Artefact, BanditMode, Options, Unit};
use std::time::{Duration, Instant};

const SHARED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/security/datasets");

fn load() -> Vec<(String, String, String, String)> {
    let mut out = Vec::new();
    let rx = regex::Regex::new(r"(?i)cwe-?0*(\d+)").unwrap();
    for (file, id, p, i) in [
        (
            "SecurityEval/dataset.jsonl",
            "ID",
            "Prompt",
            "Insecure_code",
        ),
        (
            "SALLM/PythonDataset/dataset.jsonl",
            "id",
            "prompt",
            "insecure_code",
        ),
    ] {
        let text = std::fs::read_to_string(format!("{SHARED}/{file}"))
            .unwrap_or_else(|e| panic!("{SHARED}/{file}: {e}"));
        for l in text.lines().filter(|l| !l.trim().is_empty()) {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let id = v[id].as_str().unwrap().to_string();
            let cwe = format!("CWE-{}", &rx.captures(&id).unwrap()[1]);
            out.push((
                id,
                cwe,
                v[p].as_str().unwrap().into(),
                v[i].as_str().unwrap().into(),
            ));
        }
    }
    out
}

fn per_file(d: Duration, n: usize) -> String {
    format!("{:>9.1} µs/file", d.as_secs_f64() * 1e6 / n as f64)
}

fn main() {
    let rows = load();
    let n = rows.len();
    let bytes: usize = rows.iter().map(|r| r.3.len()).sum();
    println!(
        "screen benchmark: {n} files, {:.1} KiB of final code",
        bytes as f64 / 1024.0
    );
    let rules = l3::Rules::builtin();
    let env = l1::ImportEnv {
        stdlib: l1::stdlib(),
        ..Default::default()
    };

    // 1. in-process levels, best of 5 passes.
    let mut best = Duration::MAX;
    let mut flagged = 0;
    for _ in 0..5 {
        let t = Instant::now();
        flagged = 0;
        for (_, cwe, prompt, code) in &rows {
            let f = PyFile::parse(code);
            let b = PyFile::parse(prompt);
            let errs = l0::check(&f);
            let missing = l1::missing_definitions(&b, &f);
            let imps = l1::imports(&f);
            let unresolved = imps
                .iter()
                .filter(|i| {
                    env.resolve(i, &Default::default(), &Default::default())
                        == l1::Resolution::Unresolved
                })
                .count();
            let s = l3::score_file(&rules, &f, l3::parse_cwe(cwe), Some(&b));
            flagged += usize::from(s.flagged);
            std::hint::black_box((errs, missing, unresolved));
        }
        best = best.min(t.elapsed());
    }
    println!(
        "sage L0+L1+L3 in-process (1 thread, best of 5): {}  ({flagged} flagged at L3)",
        per_file(best, n)
    );

    let units: Vec<Unit> = rows
        .iter()
        .map(|(id, cwe, prompt, code)| Unit {
            id: id.clone(),
            source: id.clone(),
            framework: None,
            task_cwe: Some(cwe.clone()),
            artefacts: vec![Artefact {
                path: id.clone(),
                baseline: Some(prompt.clone()),
                final_content: Some(code.clone()),
            }],
            tests: None,
            excluded: None,
            notes: Vec::new(),
        })
        .collect();

    // 2. the whole batch through screen(), no Bandit.
    let opts = Options {
        bandit: BanditMode::Off,
        ..Default::default()
    };
    let mut best = Duration::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        std::hint::black_box(sage_screen::screen(&units, &opts));
        best = best.min(t.elapsed());
    }
    println!(
        "sage screen() batch, --no-bandit (rayon):       {}",
        per_file(best, n)
    );

    // 3-5. Bandit.
    let cmd = match sage_screen::l2::locate(None, None, sage_screen::DEFAULT_TOOL_TIMEOUT) {
        Ok(c) => c,
        Err(e) => {
            println!("bandit: not run ({e})");
            return;
        }
    };
    let files: Vec<sage_screen::l2::BatchFile> = rows
        .iter()
        .map(|r| sage_screen::l2::BatchFile {
            key: r.0.clone(),
            content: &r.3,
        })
        .collect();
    let t = Instant::now();
    let res =
        sage_screen::l2::run_batch(&cmd, &files, "(bench)", sage_screen::DEFAULT_TOOL_TIMEOUT)
            .expect("bandit batch runs");
    let batch = t.elapsed();
    let with = res
        .files
        .values()
        .filter(|f| !f.findings.is_empty())
        .count();
    println!(
        "bandit {} one batch (-r, json):            {}  (wall {:.2}s; {with} files with findings)",
        cmd.version,
        per_file(batch, n),
        batch.as_secs_f64()
    );
    let sample = 20.min(n);
    let t = Instant::now();
    for f in files.iter().take(sample) {
        sage_screen::l2::run_batch(
            &cmd,
            std::slice::from_ref(f),
            "(bench)",
            sage_screen::DEFAULT_TOOL_TIMEOUT,
        )
        .expect("bandit runs");
    }
    println!(
        "bandit one process per file ({sample} files):   {}",
        per_file(t.elapsed(), sample)
    );
    let opts = Options {
        bandit: BanditMode::Auto,
        ..Default::default()
    };
    let t = Instant::now();
    let r = sage_screen::screen(&units, &opts);
    let cand = r.cases.iter().filter(|c| c.candidate).count();
    println!(
        "sage screen() batch with bandit (finals + baselines): {}  ({cand} candidates)",
        per_file(t.elapsed(), n)
    );
}
