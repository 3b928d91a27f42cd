//! Performance, third round (issue 31): every row of the issue measured on the product's own
//! path (the release `sage` binary, or the library where the row is a library's), side by side
//! with its anchor in the same run. Prints figures; asserts nothing about time.
//!
//! Run: `cargo bench --bench perf3 [-- ROW...]`, rows `fleiss agree vszz normalize startup
//! pool` (default: all). Environment: `SAGE_BENCH_BIN=PATH` measures another build of sage
//! (e.g. main's, for the "before" figures); `SAGE_BENCH_RUNS=N` alternating runs per figure
//! (default 5; start-up takes 10× as many), medians reported; `SAGE_BENCH_PYTHON=PATH` a Python
//! with `krippendorff` and `numpy` (default `python3`; skipped with the reason when absent);
//! `SAGE_BENCH_MB` the SWE-agent trajectory's size (default 200); `SAGE_BENCH_VSZZ_LINES`
//! the V-SZZ fix's size (default 40000).
//!
//! Anchors: K = 5 for Fleiss' memory at K = 1,000; a one-pass floor program (this binary run
//! with `--floor-alpha FILE`, a process of its own) and Python `krippendorff` for `sage agree`;
//! B-SZZ and plain `git blame` of the same lines for V-SZZ; the file's size and Python's
//! `json.load` for `sage normalize`'s memory; a hello-world (this binary with `--hello`) for
//! start-up; the pool's request count for the pool's start. Peak memory is the max RSS that
//! `/usr/bin/time` reports for the process.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn sage_bin() -> String {
    std::env::var("SAGE_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_sage").to_string())
}

fn env_num(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn runs() -> usize {
    env_num("SAGE_BENCH_RUNS", 5).max(1)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// One process: wall time, peak memory (KiB), and what it printed.
struct Measured {
    secs: f64,
    rss_kib: u64,
    stdout: String,
}

/// Run `cmd` under `/usr/bin/time` (for its max RSS); the wall time is taken around it.
fn measure(cmd: &[OsString], dir: &Path) -> Measured {
    let tf = dir.join("time.out");
    let t = Instant::now();
    let out = Command::new("/usr/bin/time")
        .arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(&tf)
        .args(cmd)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("run /usr/bin/time");
    let secs = t.elapsed().as_secs_f64();
    if !out.status.success() {
        panic!("{:?} failed: {}", cmd, String::from_utf8_lossy(&out.stderr));
    }
    let rss_kib = std::fs::read_to_string(&tf)
        .ok()
        .and_then(|t| t.lines().last().and_then(|l| l.trim().parse().ok()))
        .unwrap_or(0);
    Measured {
        secs,
        rss_kib,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
    }
}

/// Wall time of `cmd` alone (no `/usr/bin/time` in between: start-up figures).
fn wall(cmd: &[OsString], dir: &Path) -> f64 {
    let t = Instant::now();
    let st = Command::new(&cmd[0])
        .args(&cmd[1..])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run");
    let s = t.elapsed().as_secs_f64();
    assert!(st.success(), "{cmd:?} failed");
    s
}

fn os(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Vec<OsString> {
    args.iter().map(|a| a.as_ref().to_os_string()).collect()
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// A seeded generator (no dependency, the same data on every run).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as u32
    }
    fn below(&mut self, n: u32) -> u32 {
        self.next() % n
    }
}

/// Units × raters ratings CSV: each rater copies the unit's true value or, with probability
/// 0.3, draws another; `missing_pct` % of cells empty.
fn ratings_csv(path: &Path, units: usize, raters: usize, k: u32, missing_pct: u32, seed: u64) {
    let mut rng = Lcg(seed);
    let mut s = String::with_capacity(units * raters * 3);
    let header: Vec<String> = (1..=raters).map(|r| format!("r{r}")).collect();
    s.push_str(&header.join(","));
    s.push('\n');
    for _ in 0..units {
        let truth = rng.below(k);
        for r in 0..raters {
            if r > 0 {
                s.push(',');
            }
            if rng.below(100) < missing_pct {
                continue;
            }
            let v = if rng.below(10) < 3 {
                rng.below(k)
            } else {
                truth
            };
            s.push_str(&v.to_string());
        }
        s.push('\n');
    }
    std::fs::write(path, s).unwrap();
}

fn json_value(stdout: &str) -> String {
    serde_json::from_str::<serde_json::Value>(stdout)
        .ok()
        .and_then(|v| v.get("value").cloned())
        .map_or_else(|| "?".into(), |v| v.to_string())
}

// ------------------------------------------------------------------------------------ rows

/// Row 1: `sage agree --metric fleiss`, 10^5 units × 5 raters, K = 5 and K = 1,000.
fn fleiss(dir: &Path) {
    let bin = sage_bin();
    let files: Vec<(u32, PathBuf)> = [5u32, 1000]
        .iter()
        .map(|&k| {
            let p = dir.join(format!("fleiss-k{k}.csv"));
            ratings_csv(&p, 100_000, 5, k, 0, 31 + u64::from(k));
            (k, p)
        })
        .collect();
    let mut rss: Vec<Vec<f64>> = vec![Vec::new(); files.len()];
    let mut secs: Vec<Vec<f64>> = vec![Vec::new(); files.len()];
    let mut values = vec![String::new(); files.len()];
    for _ in 0..runs() {
        for (i, (_, p)) in files.iter().enumerate() {
            let m = measure(
                &os(&[
                    &bin,
                    &"agree",
                    p,
                    &"--metric",
                    &"fleiss",
                    &"--format",
                    &"json",
                ]),
                dir,
            );
            rss[i].push(mib(m.rss_kib));
            secs[i].push(m.secs);
            values[i] = json_value(&m.stdout);
        }
    }
    let base = median(rss[0].clone());
    for (i, (k, p)) in files.iter().enumerate() {
        let r = median(rss[i].clone());
        println!(
            "fleiss: 10^5 units x 5 raters, K={k:<5} ({:.1} MB): peak {r:.1} MiB ({:.2}x the K=5 figure), {:.3} s, kappa {}",
            std::fs::metadata(p).unwrap().len() as f64 / 1e6,
            r / base,
            median(secs[i].clone()),
            values[i]
        );
    }
}

/// The floor for row 2: read the CSV once (the csv crate, records reused), trim each cell,
/// give each distinct text a small number, and add each unit's ordered pairs to a coincidence
/// table of texts by the unit's number of values; then nominal alpha from the table with the
/// texts merged into their labels (numbers when every text is one, as `sage agree` reads
/// them). Nothing per cell is kept.
fn floor_alpha(path: &str) {
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .buffer_capacity(1 << 16)
        .from_path(path)
        .expect("open");
    let raters = rdr.byte_headers().expect("header").len();
    let mut texts: Vec<Vec<u8>> = Vec::new();
    // pairs[m][a * D + b], D grows by rebuilding (rare: a few values)
    let mut d = 8usize;
    let mut pairs: Vec<Vec<u64>> = vec![vec![0; d * d]; raters + 1];
    let mut rec = csv::ByteRecord::new();
    let mut vals: Vec<usize> = Vec::with_capacity(raters);
    while rdr.read_byte_record(&mut rec).expect("record") {
        vals.clear();
        for c in rec.iter() {
            let t = std::str::from_utf8(c).expect("utf-8").trim().as_bytes();
            if t.is_empty() {
                continue;
            }
            let id = match texts.iter().position(|x| x == t) {
                Some(i) => i,
                None => {
                    texts.push(t.to_vec());
                    texts.len() - 1
                }
            };
            vals.push(id);
        }
        if texts.len() > d {
            let nd = texts.len().next_power_of_two();
            for p in &mut pairs {
                let mut q = vec![0; nd * nd];
                for a in 0..d {
                    for b in 0..d {
                        q[a * nd + b] = p[a * d + b];
                    }
                }
                *p = q;
            }
            d = nd;
        }
        let m = vals.len();
        if m >= 2 {
            let p = &mut pairs[m];
            for i in 0..m {
                for j in 0..m {
                    if i != j {
                        p[vals[i] * d + vals[j]] += 1;
                    }
                }
            }
        }
    }
    // texts → labels → categories
    let strs: Vec<&str> = texts
        .iter()
        .map(|t| std::str::from_utf8(t).unwrap())
        .collect();
    let numeric = strs
        .iter()
        .all(|s| s.parse::<f64>().is_ok_and(f64::is_finite));
    let key = |s: &str| -> String {
        if numeric {
            let x: f64 = s.parse().unwrap();
            format!("{}", if x == 0.0 { 0.0 } else { x })
        } else {
            s.to_string()
        }
    };
    let mut cats: Vec<String> = strs.iter().map(|s| key(s)).collect();
    cats.sort();
    cats.dedup();
    let cat: Vec<usize> = strs
        .iter()
        .map(|s| cats.binary_search(&key(s)).unwrap())
        .collect();
    let v = cats.len();
    let n_texts = texts.len();
    let mut obs = 0.0;
    for (m, p) in pairs.iter().enumerate().skip(2) {
        let mut dis = 0u64;
        for a in 0..n_texts {
            for b in 0..n_texts {
                if cat[a] != cat[b] {
                    dis += p[a * d + b];
                }
            }
        }
        obs += dis as f64 / (m as f64 - 1.0);
    }
    // n_c: each value of a unit with m values appears in m - 1 ordered pairs as `a`
    let mut n_c = vec![0f64; v];
    for (m, p) in pairs.iter().enumerate().skip(2) {
        for a in 0..n_texts {
            let row: u64 = (0..n_texts).map(|b| p[a * d + b]).sum();
            n_c[cat[a]] += row as f64 / (m as f64 - 1.0);
        }
    }
    let n: f64 = n_c.iter().sum();
    let sum_sq: f64 = n_c.iter().map(|x| x * x).sum();
    let alpha = 1.0 - (n - 1.0) * obs / (n * n - sum_sq);
    println!("{{\"value\": {alpha}}}");
}

/// Row 2: `sage agree --metric alpha` on 3 × 10^6 ratings against the floor and Python.
fn agree(dir: &Path) {
    let bin = sage_bin();
    let me = std::env::current_exe().unwrap();
    let p = dir.join("alpha-3x1000000.csv");
    ratings_csv(&p, 1_000_000, 3, 5, 5, 7);
    let size = std::fs::metadata(&p).unwrap().len();
    let python = std::env::var("SAGE_BENCH_PYTHON").unwrap_or_else(|_| "python3".into());
    let py_ok = Command::new(&python)
        .args(["-c", "import krippendorff, numpy"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let script = "import csv, sys, numpy as np, krippendorff\n\
        rows = list(csv.reader(open(sys.argv[1])))[1:]\n\
        x = np.array([[float(c) if c.strip() else np.nan for c in r] for r in rows]).T\n\
        print('{\"value\": %r}' % float(krippendorff.alpha(reliability_data=x, level_of_measurement='nominal')))\n";
    let mut sage = (Vec::new(), Vec::new(), String::new());
    let mut floor = (Vec::new(), Vec::new(), String::new());
    let mut py = (Vec::new(), Vec::new(), String::new());
    for i in 0..runs() {
        let s = os(&[
            &bin,
            &"agree",
            &p,
            &"--metric",
            &"alpha",
            &"--format",
            &"json",
        ]);
        let f = os(&[&me, &"--floor-alpha", &p]);
        // alternate which goes first
        let order: [&Vec<OsString>; 2] = if i % 2 == 0 { [&s, &f] } else { [&f, &s] };
        for cmd in order {
            let m = measure(cmd, dir);
            let slot = if std::ptr::eq(cmd, &s) {
                &mut sage
            } else {
                &mut floor
            };
            slot.0.push(m.secs);
            slot.1.push(mib(m.rss_kib));
            slot.2 = json_value(&m.stdout);
        }
        if py_ok && i < 3 {
            let m = measure(&os(&[&python, &"-c", &script, &p]), dir);
            py.0.push(m.secs);
            py.1.push(mib(m.rss_kib));
            py.2 = json_value(&m.stdout);
        }
    }
    let file_mib = size as f64 / (1 << 20) as f64;
    let (st, fl) = (median(sage.0.clone()), median(floor.0.clone()));
    println!(
        "agree: alpha nominal, 3 x 10^6 ratings ({:.2} MB): sage {:.3} s, floor {:.3} s: {:.2}x the floor; sage peak {:.1} MiB = {:.2}x the file (floor {:.1} MiB); alpha sage {} floor {}",
        size as f64 / 1e6,
        st,
        fl,
        st / fl,
        median(sage.1.clone()),
        median(sage.1.clone()) / file_mib,
        median(floor.1.clone()),
        sage.2,
        floor.2
    );
    if py_ok {
        println!(
            "agree: python krippendorff ({python}): {:.3} s, peak {:.1} MiB, alpha {}",
            median(py.0),
            median(py.1),
            py.2
        );
    } else {
        println!("agree: python krippendorff skipped: `{python}` cannot import krippendorff and numpy (set SAGE_BENCH_PYTHON)");
    }
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.com")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.com")
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Row 3: V-SZZ against B-SZZ on a fix that rewrites `n` lines of one file (each line was
/// changed by the commit before, so every line walks back one step).
fn vszz(dir: &Path) {
    let n = env_num("SAGE_BENCH_VSZZ_LINES", 40_000);
    let repo = dir.join(format!("vszz-{n}"));
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    let commit = |text: String, msg: &str, day: u32| {
        std::fs::write(repo.join("m.py"), text).unwrap();
        git(&repo, &["add", "m.py"]);
        let date = format!("2020-01-{day:02}T00:00:00Z");
        let out = Command::new("git")
            .arg("-C")
            .arg(&repo)
            .args(["commit", "-q", "-m", msg])
            .env("GIT_AUTHOR_NAME", "bench")
            .env("GIT_AUTHOR_EMAIL", "bench@example.com")
            .env("GIT_COMMITTER_NAME", "bench")
            .env("GIT_COMMITTER_EMAIL", "bench@example.com")
            .env("GIT_AUTHOR_DATE", &date)
            .env("GIT_COMMITTER_DATE", &date)
            .output()
            .unwrap();
        assert!(out.status.success());
        git(&repo, &["rev-parse", "HEAD"])
    };
    commit(
        (0..n)
            .map(|i| format!("value_{i} = compute({i})\n"))
            .collect(),
        "one",
        1,
    );
    commit(
        (0..n)
            .map(|i| format!("value_{i} = compute({i}, x)\n"))
            .collect(),
        "two",
        2,
    );
    let fix = commit(
        (0..n)
            .map(|i| format!("value_{i} = compute({i}, y)\n"))
            .collect(),
        "fix",
        3,
    );
    let bin = sage_bin();
    let run = |variant: &str| {
        os(&[
            &bin,
            &"szz",
            &"--repo",
            &repo,
            &"--fix",
            &fix,
            &"--variant",
            &variant,
            &"--format",
            &"json",
        ])
    };
    let blame = os(&[
        &"git",
        &"-C",
        &repo,
        &"blame",
        &"--porcelain",
        &"-L",
        &format!("1,{n}"),
        &format!("{fix}^"),
        &"--",
        &"m.py",
    ]);
    let (mut v, mut b, mut g) = (Vec::new(), Vec::new(), Vec::new());
    let mut cands = (String::new(), String::new());
    // (as many rounds as SAGE_BENCH_RUNS asks: a run takes half a second, and the ratio of
    // two medians wants more than three)
    let r = runs();
    for i in 0..r {
        let mut one = |which: usize| match which {
            0 => {
                let m = measure(&run("v"), dir);
                cands.0 = m.stdout.matches("\"commit\"").count().to_string();
                v.push(m.secs)
            }
            1 => {
                let m = measure(&run("b"), dir);
                cands.1 = m.stdout.matches("\"commit\"").count().to_string();
                b.push(m.secs)
            }
            _ => g.push(measure(&blame, dir).secs),
        };
        if i % 2 == 0 {
            (0..3).for_each(&mut one);
        } else {
            (0..3).rev().for_each(&mut one);
        }
    }
    let (vm, bm, gm) = (median(v), median(b), median(g));
    println!(
        "vszz: fix of {n} lines: V-SZZ {vm:.2} s, B-SZZ {bm:.2} s: V/B {:.2}x; plain git blame of the lines {gm:.2} s",
        vm / bm
    );
}

/// A SWE-agent trajectory of about `mb` MB: a real one's history and trajectory steps
/// (after the first assistant/observation pair) repeated.
fn big_trajectory(dir: &Path, mb: usize) -> PathBuf {
    let src = Path::new(ROOT).join("tests/fixtures/multi-block/swe-agent.traj");
    let shared =
        Path::new("/work/shared/traces/swe-agent/mas-evaluation.issue_3__psf__requests-2317.traj");
    let src = if shared.exists() {
        shared.to_path_buf()
    } else {
        src
    };
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&src).unwrap()).unwrap();
    let hist = v["history"].as_array().cloned().unwrap_or_default();
    let steps = v["trajectory"].as_array().cloned().unwrap_or_default();
    // keep the head (system, task) and repeat the rest
    let first_agent = hist
        .iter()
        .position(|m| m["role"] == "assistant")
        .unwrap_or(0);
    let one = serde_json::to_vec(&v).unwrap().len();
    let reps = (mb * 1_000_000 / one.max(1)).max(1);
    let mut h = hist[..first_agent].to_vec();
    let mut t = Vec::new();
    for _ in 0..reps {
        h.extend(hist[first_agent..].iter().cloned());
        t.extend(steps.iter().cloned());
    }
    v["history"] = serde_json::Value::Array(h);
    v["trajectory"] = serde_json::Value::Array(t);
    let out = dir.join(format!("big-{mb}.traj"));
    std::fs::write(&out, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    out
}

/// Row 5: `sage normalize` of a large SWE-agent trajectory: peak memory against the file.
fn normalize(dir: &Path) {
    let mb = env_num("SAGE_BENCH_MB", 200);
    let p = big_trajectory(dir, mb);
    let size = std::fs::metadata(&p).unwrap().len() as f64 / (1 << 20) as f64;
    let bin = sage_bin();
    let out = dir.join("normalized.json");
    let (mut s_rss, mut s_t, mut p_rss) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..runs().min(3) {
        let m = measure(
            &os(&[
                &bin,
                &"normalize",
                &p,
                &"--framework",
                &"swe-agent",
                &"-o",
                &out,
            ]),
            dir,
        );
        s_rss.push(mib(m.rss_kib));
        s_t.push(m.secs);
        if i == 0 {
            let m = measure(
                &os(&[
                    &"python3",
                    &"-c",
                    &"import json,sys; json.load(open(sys.argv[1]))",
                    &p,
                ]),
                dir,
            );
            p_rss.push(mib(m.rss_kib));
        }
    }
    let (sr, pr) = (median(s_rss), median(p_rss));
    println!(
        "normalize: SWE-agent trajectory {size:.0} MiB: sage peak {sr:.0} MiB = {:.2}x the file, {:.2} s; python json.load peak {pr:.0} MiB = {:.2}x",
        sr / size,
        median(s_t),
        pr / size
    );
}

/// Row 4: start-up of `sage normalize` and `sage localize` on one tiny input against a
/// hello-world.
fn startup(dir: &Path) {
    let bin = sage_bin();
    let me = std::env::current_exe().unwrap();
    let case = dir.join("tiny-case");
    copy_dir(&Path::new(ROOT).join("corpora/ag2-fig1a-aes-ecb"), &case);
    let trace = case.join("chat.json");
    let hello = os(&[&me, &"--hello"]);
    let norm = os(&[&bin, &"normalize", &trace, &"-o", &dir.join("tiny.json")]);
    let loc = os(&[
        &bin,
        &"localize",
        &case,
        &"--judge",
        &"lexicon",
        &"--output",
        &dir.join("tiny-results.json"),
    ]);
    let n = runs() * 10;
    let (mut h, mut a, mut b) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..n {
        h.push(wall(&hello, dir));
        a.push(wall(&norm, dir));
        b.push(wall(&loc, dir));
    }
    let (h, a, b) = (median(h) * 1e3, median(a) * 1e3, median(b) * 1e3);
    println!(
        "startup: hello-world {h:.1} ms; sage normalize (one {} B trace) {a:.1} ms = {:.1}x; sage localize (one case, lexicon judge) {b:.1} ms = {:.1}x",
        std::fs::metadata(&trace).unwrap().len(),
        a / h,
        b / h
    );
}

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

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("--floor-alpha") => return floor_alpha(&args[1]),
        Some("--hello") => {
            println!("hello");
            return;
        }
        _ => {}
    }
    let wanted: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let on = |r: &str| wanted.is_empty() || wanted.contains(&r);
    let dir = tempfile::tempdir().unwrap();
    println!("sage: {}", sage_bin());
    let t = Instant::now();
    if on("fleiss") {
        fleiss(dir.path());
    }
    if on("agree") {
        agree(dir.path());
    }
    if on("vszz") {
        vszz(dir.path());
    }
    if on("normalize") {
        normalize(dir.path());
    }
    if on("startup") {
        startup(dir.path());
    }
    if on("pool") {
        pool(dir.path());
    }
    let _ = Duration::ZERO;
    eprintln!("(bench took {:.0} s)", t.elapsed().as_secs_f64());
}

/// Row 6: the judge pool's start on the product's path: `sage localize --judge` (an OpenAI
/// judge, 64 slots) on one long AG2 case against the fake server on 127.0.0.1, which holds
/// every answer until 64 requests have arrived (at most 5 s) and counts the requests in
/// flight at once: 64 when every slot starts together.
fn pool(dir: &Path) {
    use sage_llm::fake::FakeServer;
    let case = dir.join("pool-case");
    copy_dir(&Path::new(ROOT).join("corpora/ag2-fig1a-aes-ecb"), &case);
    let p = case.join("case.json");
    let mut c: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    c.as_object_mut().unwrap().remove("expected");
    std::fs::write(&p, serde_json::to_string_pretty(&c).unwrap()).unwrap();
    let chat_p = case.join("chat.json");
    let mut chat: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&chat_p).unwrap()).unwrap();
    let msgs = chat["chat_history"].as_array().unwrap().clone();
    let mut hist = vec![msgs[0].clone()];
    while hist.len() < 200 {
        hist.extend(msgs[1..].iter().cloned());
    }
    hist.truncate(200);
    chat["chat_history"] = serde_json::Value::Array(hist);
    std::fs::write(&chat_p, serde_json::to_vec(&chat).unwrap()).unwrap();
    std::fs::write(
        dir.join("sage.toml"),
        "[judges.bench]\nbackend = \"openai\"\nmodel = \"gpt-4.1-mini\"\napi_key_env = \"SAGE_BENCH_KEY\"\n",
    )
    .unwrap();
    let corpus = Path::new(ROOT).join("corpora");
    for (what, input) in [
        ("one 200-message case", &case),
        ("the bundled corpus", &corpus),
    ] {
        let server = FakeServer::start(Duration::from_millis(200));
        server.hold_answers_until(64, Duration::from_secs(5));
        let t = Instant::now();
        let out = Command::new(sage_bin())
            .current_dir(dir)
            .env("SAGE_BENCH_KEY", "sk-bench")
            .env("OPENAI_BASE_URL", server.openai_base())
            .arg("localize")
            .arg(input)
            .env("XDG_CACHE_HOME", dir.join("cache"))
            .env("HOME", dir)
            .args(["--judge", "bench", "--no-write", "--no-progress"])
            .args(["--concurrency", "64", "--output"])
            .arg(dir.join("pool-out.json"))
            .output()
            .expect("sage localize");
        let secs = t.elapsed().as_secs_f64();
        if !out.status.success() {
            eprintln!("{}", String::from_utf8_lossy(&out.stderr));
        }
        println!(
        "pool: sage localize --judge (openai, 64 slots), {what}: {} requests; {} had arrived before the first answer (every slot at once: 64); {secs:.1} s with answers held until 64 arrive (at most 5 s)",
        server.requests().len(),
        server.arrived_before_first_answer()
    );
    }
}
