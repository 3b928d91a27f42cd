//! Hayes & Krippendorff bootstrap of alpha, as the KALPHA macro v3.0 (2011) does it: resample
//! pair-values from the coincidence matrix (not units), seeded with ChaCha8 so a seed gives the
//! same interval on every platform.

use crate::stats::{alpha_coded, invalid, Coded, Level, StatError};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::HashMap;

/// Everything KALPHA computes before its bootstrap loop.
#[derive(Debug, Clone, PartialEq)]
pub struct KalphaSetup {
    pub alpha: f64,
    /// Expected disagreement D_e = Σ n_c n_k δ² / (n (n - 1)).
    pub expected_disagreement: f64,
    /// Pairable values n.. (an integer).
    pub n: u64,
    /// Non-zero cells of the full coincidence matrix (Q).
    pub q_nonzero: usize,
    /// Draws per replicate, M = min(25 Q, floor((m - 1) n / 2)).
    pub m_draws: usize,
    /// Pairs of values within units, Σ m_u (m_u - 1) / 2.
    pub pairs: u64,
    /// Non-zero diagonal cells of the coincidence matrix.
    pub nonzero_diagonal: usize,
    /// Lower-triangle cells (row ≥ column category index) in KALPHA order, zero cells omitted.
    pub cells: Vec<(u32, u32)>,
    pub cumulative: Vec<f64>,
    pub delta: Vec<f64>,
    /// o_cc / n for every diagonal cell (for the correction of replicates equal to 1).
    diag_share: Vec<f64>,
}

/// The bootstrap's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct BootstrapResult {
    pub alpha: f64,
    pub confidence: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    pub replicates: usize,
    pub m_draws: usize,
    pub seed: u64,
    pub mean: f64,
    /// (α_min, share of replicates with α* < α_min).
    pub p_below: Vec<(f64, f64)>,
}

/// Builds the coincidence cells, their probabilities and metric differences.
pub fn kalpha_setup(data: &Coded, level: Level) -> Result<KalphaSetup, StatError> {
    let est = alpha_coded(data, level)?;
    let v = data.categories.len();
    let values = match level {
        Level::Interval | Level::Ratio => Some(
            data.numeric_values()
                .ok_or_else(|| invalid("interval and ratio need numeric categories"))?,
        ),
        _ => None,
    };
    // Sparse coincidence matrix on the lower triangle: key (j, i) with j ≥ i holds o_ji for the
    // diagonal and o_ji + o_ij = 2 o_ji off it.
    let mut o: HashMap<(u32, u32), f64> = HashMap::new();
    let mut n_c = vec![0u64; v];
    let (mut n, mut pairs) = (0u64, 0u64);
    let rows = &data.ratings;
    let mut buf = Vec::with_capacity(rows.len());
    for u in 0..data.n_units() {
        buf.clear();
        buf.extend(rows.iter().filter_map(|r| r[u]));
        let m = buf.len();
        if m < 2 {
            continue;
        }
        n += m as u64;
        pairs += (m * (m - 1) / 2) as u64;
        let inc = 1.0 / (m as f64 - 1.0);
        for a in 0..m {
            n_c[buf[a] as usize] += 1;
            for b in 0..m {
                if a != b {
                    let (j, i) = (buf[a].max(buf[b]), buf[a].min(buf[b]));
                    *o.entry((j, i)).or_insert(0.0) += inc;
                }
            }
        }
    }
    let twice_mid: Vec<f64> = {
        let mut before = 0u64;
        n_c.iter()
            .map(|&c| {
                let t = (2 * before + c) as f64;
                before += c;
                t
            })
            .collect()
    };
    let delta = |j: u32, i: u32| -> f64 {
        if i == j {
            return 0.0;
        }
        match level {
            Level::Nominal => 1.0,
            Level::Ordinal => {
                let d = (twice_mid[j as usize] - twice_mid[i as usize]) / 2.0;
                d * d
            }
            Level::Interval | Level::Ratio => {
                let vals = values.as_ref().expect("numeric values checked above");
                let (a, b) = (vals[j as usize], vals[i as usize]);
                let s = if level == Level::Ratio { a + b } else { 1.0 };
                if s == 0.0 {
                    0.0
                } else {
                    ((a - b) / s) * ((a - b) / s)
                }
            }
        }
    };
    let mut cells: Vec<((u32, u32), f64)> = o.into_iter().filter(|(_, x)| *x > 0.0).collect();
    // KALPHA order: column i ascending, then row j ascending.
    cells.sort_by_key(|&((j, i), _)| (i, j));
    let nf = n as f64;
    let mut cumulative = Vec::with_capacity(cells.len());
    let mut deltas = Vec::with_capacity(cells.len());
    let mut diag_share = Vec::new();
    let mut acc = 0.0;
    let mut q_nonzero = 0usize;
    for &((j, i), x) in &cells {
        acc += x / nf;
        cumulative.push(acc);
        deltas.push(delta(j, i));
        if i == j {
            q_nonzero += 1;
            diag_share.push(x / nf);
        } else {
            q_nonzero += 2;
        }
    }
    let m_judges = data.n_raters() as u64;
    let m_draws = (25 * q_nonzero as u64).min((m_judges - 1) * n / 2) as usize;
    Ok(KalphaSetup {
        alpha: est.value,
        expected_disagreement: est.expected.unwrap_or(f64::NAN),
        n,
        q_nonzero,
        m_draws,
        pairs,
        nonzero_diagonal: diag_share.len(),
        cells: cells.iter().map(|&(c, _)| c).collect(),
        cumulative,
        delta: deltas,
        diag_share,
    })
}

impl KalphaSetup {
    /// One replicate from M uniforms in [0, 1): each selects the first cell whose cumulative
    /// probability is ≥ it; α* = 1 - Σ δ² / (D_e M), clamped at -1; α* = 1 with a single
    /// non-zero diagonal cell becomes 0.
    pub fn replicate(&self, uniforms: impl IntoIterator<Item = f64>) -> f64 {
        let mut sum = 0.0;
        let mut m = 0usize;
        let last = self.cumulative.len().saturating_sub(1);
        for r in uniforms {
            let k = self.cumulative.partition_point(|&c| c < r).min(last);
            sum += self.delta[k];
            m += 1;
        }
        let a = 1.0 - sum / (self.expected_disagreement * m as f64);
        let a = a.max(-1.0);
        if a == 1.0 && self.nonzero_diagonal == 1 {
            0.0
        } else {
            a
        }
    }
}

/// The thresholds KALPHA reports P(α* < α_min) for.
pub const ALPHA_MINIMA: [f64; 6] = [0.9, 0.8, 0.7, 0.67, 0.6, 0.5];

/// Bootstrap confidence interval of alpha with `n_boot` replicates.
pub fn kalpha_bootstrap(
    data: &Coded,
    level: Level,
    n_boot: usize,
    seed: u64,
    confidence: f64,
) -> Result<BootstrapResult, StatError> {
    if n_boot == 0 {
        return Err(invalid("the bootstrap needs at least one replicate"));
    }
    if !(confidence > 0.0 && confidence < 1.0) {
        return Err(invalid("confidence must be between 0 and 1"));
    }
    let s = kalpha_setup(data, level)?;
    if s.m_draws == 0 {
        return Err(invalid("no pairs to resample"));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut alphas: Vec<f64> = (0..n_boot)
        .map(|_| s.replicate((0..s.m_draws).map(|_| rng.gen::<f64>())))
        .collect();
    // Step 6: the probability that every pair agrees by chance is Σ (o_cc/n)^P; that many
    // replicates equal to 1 become 0.
    let numone = alphas.iter().filter(|&&a| a == 1.0).count();
    let p_all: f64 = s.diag_share.iter().map(|p| p.powf(s.pairs as f64)).sum();
    let nx = (n_boot as f64 * p_all).round() as usize;
    if nx > 0 && s.nonzero_diagonal > 1 {
        let mut left = nx.min(numone);
        for a in alphas.iter_mut() {
            if left == 0 {
                break;
            }
            if *a == 1.0 {
                *a = 0.0;
                left -= 1;
            }
        }
    }
    let mean = alphas.iter().sum::<f64>() / n_boot as f64;
    let p_below = ALPHA_MINIMA
        .iter()
        .map(|&am| {
            let k = alphas.iter().filter(|&&a| a < am).count();
            (am, k as f64 / n_boot as f64)
        })
        .collect();
    alphas.sort_by(f64::total_cmp);
    // 1-based order statistics floor(B (1-c)/2) and floor(B (1+c)/2) + 1; the epsilon keeps
    // 0.975 * 200000 from flooring to 194999.
    let tail = (1.0 - confidence) / 2.0;
    let lo_rank = (tail * n_boot as f64 + 1e-9).floor() as usize;
    let hi_rank = ((1.0 - tail) * n_boot as f64 + 1e-9).floor() as usize + 1;
    let ci_low = alphas[lo_rank.saturating_sub(1).min(n_boot - 1)];
    let ci_high = alphas[(hi_rank - 1).min(n_boot - 1)];
    Ok(BootstrapResult {
        alpha: s.alpha,
        confidence,
        ci_low,
        ci_high,
        replicates: n_boot,
        m_draws: s.m_draws,
        seed,
        mean,
        p_below,
    })
}
