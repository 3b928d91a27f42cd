//! Agreement benchmark (plain timing, no harness): `cargo bench --bench agreement [-- SCENARIO]
//! [--csv DIR]`. Scenarios: nominal, ordinal, interval50, bootstrap (default: all). With
//! `--csv DIR` the generated data are also written as CSV (units × raters, empty = missing) so
//! `scripts/bench_krippendorff.py` can time the Python `krippendorff` package on the same data.
//! Run one scenario under `/usr/bin/time -v` for its peak memory.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sage_reliability::{alpha_coded, alpha_numeric, kalpha_bootstrap, Coded, Label, Level};
use std::hint::black_box;
use std::io::Write;
use std::time::Instant;

/// 3 raters × `units` with `values` distinct values: each rater copies a true value or, with
/// probability 0.3, draws another; 5 % missing.
fn data(units: usize, values: u32, seed: u64) -> Vec<Vec<Option<f64>>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let truth: Vec<u32> = (0..units).map(|_| rng.gen_range(0..values)).collect();
    (0..3)
        .map(|_| {
            truth
                .iter()
                .map(|&t| {
                    if rng.gen::<f64>() < 0.05 {
                        None
                    } else if rng.gen::<f64>() < 0.3 {
                        Some(f64::from(rng.gen_range(0..values)))
                    } else {
                        Some(f64::from(t))
                    }
                })
                .collect()
        })
        .collect()
}

fn write_csv(dir: &str, name: &str, d: &[Vec<Option<f64>>]) {
    std::fs::create_dir_all(dir).expect("csv dir");
    let path = format!("{dir}/{name}.csv");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).expect("csv file"));
    writeln!(f, "r1,r2,r3").expect("write");
    for u in 0..d[0].len() {
        let row: Vec<String> = d
            .iter()
            .map(|r| r[u].map(|x| format!("{x}")).unwrap_or_default())
            .collect();
        writeln!(f, "{}", row.join(",")).expect("write");
    }
}

fn coded(d: &[Vec<Option<f64>>]) -> Coded {
    let labels: Vec<Vec<Option<Label>>> = d
        .iter()
        .map(|r| r.iter().map(|x| x.and_then(Label::num)).collect())
        .collect();
    Coded::new(&labels).expect("code")
}

/// Best of `reps` runs, in milliseconds.
fn time<T>(reps: usize, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut best = f64::INFINITY;
    let mut out = None;
    for _ in 0..reps {
        let t = Instant::now();
        let v = black_box(f());
        best = best.min(t.elapsed().as_secs_f64() * 1e3);
        out = Some(v);
    }
    (best, out.expect("at least one run"))
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let csv_dir = args
        .iter()
        .position(|a| a == "--csv")
        .and_then(|i| args.get(i + 1).cloned());
    let wanted: Vec<&str> = args
        .iter()
        .filter(|a| !a.starts_with("--") && Some(*a) != csv_dir.as_ref())
        .map(String::as_str)
        .collect();
    let run = |s: &str| wanted.is_empty() || wanted.contains(&s);

    if run("nominal") || run("ordinal") {
        let d = data(100_000, 5, 1);
        if let Some(dir) = &csv_dir {
            write_csv(dir, "nominal_3x100000", &d);
        }
        for (name, level) in [("nominal", Level::Nominal), ("ordinal", Level::Ordinal)] {
            if !run(name) {
                continue;
            }
            let (code_ms, c) = time(3, || coded(&d));
            let (ms, a) = time(5, || alpha_coded(&c, level).expect("alpha").value);
            let (all_ms, _) = time(3, || alpha_numeric(&d, level).expect("alpha").value);
            println!(
                "{name:<9} 3 x 100,000 (5 values): alpha = {a:.6}; coding {code_ms:.1} ms, \
                 alpha on coded data {ms:.1} ms, end to end from numbers {all_ms:.1} ms"
            );
        }
    }
    if run("interval50") {
        let d = data(100_000, 50, 2);
        if let Some(dir) = &csv_dir {
            write_csv(dir, "interval50_3x100000", &d);
        }
        let (ms, a) = time(5, || {
            alpha_numeric(&d, Level::Interval).expect("alpha").value
        });
        println!("interval  3 x 100,000 (50 values): alpha = {a:.6}; {ms:.1} ms");
        let (ms, a) = time(3, || alpha_numeric(&d, Level::Ratio).expect("alpha").value);
        println!("ratio     3 x 100,000 (50 values): alpha = {a:.6}; {ms:.1} ms");
    }
    if run("bootstrap") {
        let d = data(1_000, 5, 3);
        if let Some(dir) = &csv_dir {
            write_csv(dir, "bootstrap_3x1000", &d);
        }
        let c = coded(&d);
        for level in [Level::Nominal, Level::Interval] {
            let (ms, b) = time(3, || {
                kalpha_bootstrap(&c, level, 1_000, 42, 0.95).expect("boot")
            });
            println!(
                "bootstrap {:<8} 3 x 1,000, 1,000 replicates x {} draws: alpha = {:.4}, \
                 95% CI [{:.4}, {:.4}]; {ms:.1} ms",
                level.as_str(),
                b.m_draws,
                b.alpha,
                b.ci_low,
                b.ci_high
            );
        }
    }
}
