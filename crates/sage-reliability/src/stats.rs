//! Agreement statistics, no I/O: percent agreement, Cohen's kappa, Fleiss' kappa, Gwet's AC1/AC2
//! and Krippendorff's alpha (nominal, ordinal, interval, ratio; any number of raters; missing
//! values). Formulas and conventions: `docs/reliability.md`.
//!
//! Data are *reliability data*: one row per rater, one entry per unit, `None` = missing.
//! An undefined coefficient is `Err(StatError::Undefined { reason })`, never 1.0 or NaN.

use serde::Deserialize;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::fmt;
use std::hash::{Hash, Hasher};

/// Why a coefficient has no value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StatError {
    /// The coefficient is mathematically undefined on these data (e.g. no variation).
    #[error("undefined: {reason}")]
    Undefined { reason: String },
    /// The data do not fit the statistic (ragged rows, text at interval level, ...).
    #[error("invalid input: {reason}")]
    Invalid { reason: String },
}

pub(crate) fn undefined(reason: impl Into<String>) -> StatError {
    StatError::Undefined {
        reason: reason.into(),
    }
}

pub(crate) fn invalid(reason: impl Into<String>) -> StatError {
    StatError::Invalid {
        reason: reason.into(),
    }
}

/// A coefficient and what it was computed from.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    pub value: f64,
    /// Units that entered the computation: pairable units (alpha, AC, percent), units rated by
    /// both raters (Cohen), units kept (Fleiss).
    pub units: usize,
    /// Observed agreement p_a (kappa family, percent) or observed disagreement D_o (alpha).
    pub observed: f64,
    /// Chance agreement p_e or expected disagreement D_e (alpha); `None` for percent agreement.
    pub expected: Option<f64>,
}

pub type StatResult = Result<Estimate, StatError>;

// ---------------------------------------------------------------------------------------------
// Labels and coded data
// ---------------------------------------------------------------------------------------------

/// One rating: a finite number or a text label. Labels compare exactly (no trimming, no case
/// folding). Numbers sort numerically and before text.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Label {
    Num(f64),
    Text(String),
}

impl Label {
    /// A numeric label; `None` for NaN or infinities (never a category).
    pub fn num(x: f64) -> Option<Label> {
        // -0.0 and 0.0 are one category.
        x.is_finite()
            .then_some(Label::Num(if x == 0.0 { 0.0 } else { x }))
    }

    pub fn text(s: impl Into<String>) -> Label {
        Label::Text(s.into())
    }

    /// A finite number when the cell parses as one, otherwise text (so `nan` stays a label).
    pub fn parse(s: &str) -> Label {
        match s.parse::<f64>() {
            Ok(x) if x.is_finite() => Label::num(x).unwrap_or_else(|| Label::text(s)),
            _ => Label::text(s),
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Label::Num(x) => Some(*x),
            Label::Text(_) => None,
        }
    }
}

impl PartialEq for Label {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Label {}

impl Hash for Label {
    fn hash<H: Hasher>(&self, state: &mut H) {
        match self {
            Label::Num(x) => {
                0u8.hash(state);
                (if *x == 0.0 { 0.0f64 } else { *x }).to_bits().hash(state);
            }
            Label::Text(s) => {
                1u8.hash(state);
                s.hash(state);
            }
        }
    }
}

impl PartialOrd for Label {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Label {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Label::Num(a), Label::Num(b)) => {
                let a = if *a == 0.0 { 0.0 } else { *a };
                let b = if *b == 0.0 { 0.0 } else { *b };
                a.total_cmp(&b)
            }
            (Label::Num(_), Label::Text(_)) => Ordering::Less,
            (Label::Text(_), Label::Num(_)) => Ordering::Greater,
            (Label::Text(a), Label::Text(b)) => a.cmp(b),
        }
    }
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Label::Num(x) if x.fract() == 0.0 && x.abs() < 1e15 => write!(f, "{x:.0}"),
            Label::Num(x) => write!(f, "{x}"),
            Label::Text(s) => f.write_str(s),
        }
    }
}

/// Number of units of rater rows; rows of unequal length are an error.
pub(crate) fn check_rectangular<T>(rows: &[Vec<T>]) -> Result<usize, StatError> {
    let Some(first) = rows.first() else {
        return Err(invalid("no raters"));
    };
    let n = first.len();
    for (i, r) in rows.iter().enumerate() {
        if r.len() != n {
            return Err(invalid(format!(
                "rater {} has {} units, rater 1 has {}",
                i + 1,
                r.len(),
                n
            )));
        }
    }
    Ok(n)
}

/// Reliability data with every label replaced by the index of its category.
#[derive(Debug, Clone, PartialEq)]
pub struct Coded {
    /// Categories in their order (sorted labels, or the declared order).
    pub categories: Vec<Label>,
    /// Raters × units; each entry indexes `categories`.
    pub ratings: Vec<Vec<Option<u32>>>,
    /// True when the categories were declared by the caller (kept even if unused).
    pub declared: bool,
}

impl Coded {
    /// Codes the data with the sorted distinct labels as categories.
    pub fn new(data: &[Vec<Option<Label>>]) -> Result<Coded, StatError> {
        check_rectangular(data)?;
        let mut seen: HashMap<&Label, ()> = HashMap::new();
        for row in data {
            for l in row.iter().flatten() {
                seen.entry(l).or_insert(());
            }
        }
        let mut categories: Vec<Label> = seen.into_keys().cloned().collect();
        categories.sort();
        Self::code(data, categories, false)
    }

    /// Codes the data with declared categories in the given order (an order for ordinal data,
    /// or unused categories that must count). A label outside the list is an error, never
    /// silently dropped.
    pub fn with_categories(
        data: &[Vec<Option<Label>>],
        categories: &[Label],
    ) -> Result<Coded, StatError> {
        check_rectangular(data)?;
        Self::code(data, categories.to_vec(), true)
    }

    fn code(
        data: &[Vec<Option<Label>>],
        categories: Vec<Label>,
        declared: bool,
    ) -> Result<Coded, StatError> {
        let mut index: HashMap<&Label, u32> = HashMap::with_capacity(categories.len());
        for (i, c) in categories.iter().enumerate() {
            if index.insert(c, i as u32).is_some() {
                return Err(invalid(format!("category {c} is declared twice")));
            }
        }
        let mut ratings = Vec::with_capacity(data.len());
        for (r, row) in data.iter().enumerate() {
            let mut out = Vec::with_capacity(row.len());
            for (u, l) in row.iter().enumerate() {
                out.push(match l {
                    None => None,
                    Some(l) => Some(*index.get(l).ok_or_else(|| {
                        invalid(format!(
                            "rater {} unit {}: label {l} is not a declared category",
                            r + 1,
                            u + 1
                        ))
                    })?),
                });
            }
            ratings.push(out);
        }
        Ok(Coded {
            categories,
            ratings,
            declared,
        })
    }

    pub fn n_raters(&self) -> usize {
        self.ratings.len()
    }

    pub fn n_units(&self) -> usize {
        self.ratings.first().map_or(0, Vec::len)
    }

    /// Numeric value of every category, when all are numbers.
    pub(crate) fn numeric_values(&self) -> Option<Vec<f64>> {
        self.categories.iter().map(Label::as_f64).collect()
    }
}

/// Calls `f` with the present values of each unit (reusing one buffer).
fn for_each_unit<T: Copy>(rows: &[Vec<Option<T>>], mut f: impl FnMut(&[T])) {
    let n = rows.first().map_or(0, Vec::len);
    let mut buf = Vec::with_capacity(rows.len());
    for u in 0..n {
        buf.clear();
        buf.extend(rows.iter().filter_map(|r| r[u]));
        f(&buf);
    }
}

/// Coded data seen unit by unit: the present category indices of each unit, in unit order.
pub(crate) trait Units {
    fn raters(&self) -> usize;
    fn each_unit(&self, f: impl FnMut(&[u32]));
}

impl Units for Coded {
    fn raters(&self) -> usize {
        self.n_raters()
    }
    fn each_unit(&self, f: impl FnMut(&[u32])) {
        for_each_unit(&self.ratings, f)
    }
}

/// A missing rating in [`CodedUnits`].
pub const MISSING: u32 = u32::MAX;

/// Coded reliability data stored unit by unit, one `u32` per cell ([`MISSING`] = no rating):
/// 4 bytes a rating, where [`Coded`] holds 8, and the order a CSV of one row per unit is read
/// in. The statistics on it are those of [`Coded`], computed by the same code.
#[derive(Debug, Clone, PartialEq)]
pub struct CodedUnits {
    /// Categories in their order (sorted labels, or the declared order).
    pub categories: Vec<Label>,
    /// True when the categories were declared by the caller (kept even if unused).
    pub declared: bool,
    raters: usize,
    /// Units × raters, row-major.
    cells: Vec<u32>,
}

impl CodedUnits {
    /// `cells` holds `raters` entries per unit, each an index into `categories` or
    /// [`MISSING`].
    pub fn new(
        categories: Vec<Label>,
        declared: bool,
        raters: usize,
        cells: Vec<u32>,
    ) -> Result<CodedUnits, StatError> {
        if raters == 0 {
            return Err(invalid("no raters"));
        }
        if !cells.len().is_multiple_of(raters) {
            return Err(invalid("the cells are not a whole number of units"));
        }
        let q = categories.len();
        if cells.iter().any(|&c| c != MISSING && c as usize >= q) {
            return Err(invalid("a cell indexes no category"));
        }
        Ok(CodedUnits {
            categories,
            declared,
            raters,
            cells,
        })
    }

    pub fn n_raters(&self) -> usize {
        self.raters
    }

    pub fn n_units(&self) -> usize {
        self.cells.len() / self.raters
    }

    /// The rating of rater `r` (from 0) for unit `u` (from 0).
    pub fn get(&self, r: usize, u: usize) -> Option<u32> {
        Some(self.cells[u * self.raters + r]).filter(|&c| c != MISSING)
    }

    /// The same data as [`Coded`] (raters × units), for the statistics that need it.
    pub fn to_coded(&self) -> Coded {
        let ratings = (0..self.raters)
            .map(|r| {
                self.cells
                    .iter()
                    .skip(r)
                    .step_by(self.raters)
                    .map(|&c| Some(c).filter(|&c| c != MISSING))
                    .collect()
            })
            .collect();
        Coded {
            categories: self.categories.clone(),
            ratings,
            declared: self.declared,
        }
    }
}

impl Units for CodedUnits {
    fn raters(&self) -> usize {
        self.raters
    }
    fn each_unit(&self, mut f: impl FnMut(&[u32])) {
        let mut buf = Vec::with_capacity(self.raters);
        for unit in self.cells.chunks_exact(self.raters) {
            buf.clear();
            buf.extend(unit.iter().copied().filter(|&c| c != MISSING));
            f(&buf);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Krippendorff's alpha
// ---------------------------------------------------------------------------------------------

/// Level of measurement (metric of Krippendorff's alpha).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Nominal,
    Ordinal,
    Interval,
    Ratio,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Nominal => "nominal",
            Level::Ordinal => "ordinal",
            Level::Interval => "interval",
            Level::Ratio => "ratio",
        }
    }
}

const NO_PAIRABLE: &str = "no unit has two or more values (nothing is pairable)";
const NO_VARIATION: &str =
    "all pairable values are equal (no variation): expected disagreement is zero";

/// Krippendorff's alpha on labelled data. Nominal and ordinal work on categories (ordinal needs
/// numbers or a `domain` giving the order); interval and ratio need numbers.
pub fn krippendorff_alpha(
    data: &[Vec<Option<Label>>],
    level: Level,
    domain: Option<&[Label]>,
) -> StatResult {
    match level {
        Level::Nominal | Level::Ordinal => {
            let coded = match domain {
                Some(d) => Coded::with_categories(data, d)?,
                None => Coded::new(data)?,
            };
            if level == Level::Ordinal
                && domain.is_none()
                && coded.categories.iter().any(|c| c.as_f64().is_none())
            {
                return Err(invalid(
                    "ordinal alpha on text labels needs an explicit order of the categories",
                ));
            }
            alpha_coded(&coded, level)
        }
        Level::Interval | Level::Ratio => {
            check_rectangular(data)?;
            let mut rows = Vec::with_capacity(data.len());
            for (r, row) in data.iter().enumerate() {
                let mut out = Vec::with_capacity(row.len());
                for (u, l) in row.iter().enumerate() {
                    out.push(match l {
                        None => None,
                        Some(Label::Num(x)) => Some(*x),
                        Some(Label::Text(t)) => {
                            return Err(invalid(format!(
                                "rater {} unit {}: {t:?} is not a number ({} level needs numbers)",
                                r + 1,
                                u + 1,
                                level.as_str()
                            )))
                        }
                    });
                }
                rows.push(out);
            }
            alpha_numeric(&rows, level)
        }
    }
}

/// Krippendorff's alpha on coded data. Ordinal uses the category order; interval and ratio use
/// the categories' numeric values.
pub fn alpha_coded(data: &Coded, level: Level) -> StatResult {
    check_rectangular(&data.ratings)?;
    alpha_units(data, &data.categories, level)
}

/// [`alpha_coded`] on data stored unit by unit.
pub fn alpha_coded_units(data: &CodedUnits, level: Level) -> StatResult {
    alpha_units(data, &data.categories, level)
}

fn alpha_units(data: &impl Units, categories: &[Label], level: Level) -> StatResult {
    let v = categories.len();
    // Pairable marginals n_c (integers), pairable units, and per-unit tallies grouped by m_u so
    // every division by m_u - 1 happens once.
    let mut n_c = vec![0u64; v];
    let mut units = 0usize;
    let m_max = data.raters();
    data.each_unit(|vals| {
        if vals.len() >= 2 {
            units += 1;
            for &c in vals {
                n_c[c as usize] += 1;
            }
        }
    });
    if units == 0 {
        return Err(undefined(NO_PAIRABLE));
    }
    let n: u64 = n_c.iter().sum();
    if n_c.iter().filter(|&&x| x > 0).count() < 2 {
        return Err(undefined(NO_VARIATION));
    }
    let nf = n as f64;
    match level {
        Level::Nominal => {
            // Σ o δ = Σ_u (ordered pairs with different values) / (m_u - 1).
            let mut disagree = vec![0u64; m_max + 1];
            data.each_unit(|vals| {
                let m = vals.len();
                if m >= 2 {
                    let mut d = 0u64;
                    for i in 0..m {
                        for j in (i + 1)..m {
                            d += u64::from(vals[i] != vals[j]);
                        }
                    }
                    disagree[m] += 2 * d;
                }
            });
            let obs = per_m_sum(&disagree);
            let sum_sq: u128 = n_c.iter().map(|&x| u128::from(x) * u128::from(x)).sum();
            let de_num = (u128::from(n) * u128::from(n) - sum_sq) as f64;
            finish_alpha(nf, obs, de_num, units)
        }
        Level::Ordinal => {
            // δ_ck = mid(k) - mid(c) with mid(c) = Σ_{g<c} n_g + n_c/2: ordinal alpha is interval
            // alpha on mid-ranks. Twice the mid-rank is an integer, so this is exact.
            let mut twice_mid = vec![0i128; v];
            let mut before = 0i128;
            for c in 0..v {
                twice_mid[c] = 2 * before + n_c[c] as i128;
                before += n_c[c] as i128;
            }
            let mut obs_m = vec![0i128; m_max + 1];
            data.each_unit(|vals| {
                let m = vals.len();
                if m >= 2 {
                    let mut s = 0i128;
                    for i in 0..m {
                        for j in (i + 1)..m {
                            let d = twice_mid[vals[i] as usize] - twice_mid[vals[j] as usize];
                            s += d * d;
                        }
                    }
                    obs_m[m] += 2 * s;
                }
            });
            let obs = obs_m
                .iter()
                .enumerate()
                .skip(2)
                .map(|(m, &s)| s as f64 / (m as f64 - 1.0))
                .sum::<f64>()
                / 4.0;
            let (mut s1, mut s2) = (0i128, 0i128);
            for c in 0..v {
                let nc = n_c[c] as i128;
                s1 += nc * twice_mid[c];
                s2 += nc * twice_mid[c] * twice_mid[c];
            }
            let de_num = (2 * n as i128 * s2 - 2 * s1 * s1) as f64 / 4.0;
            finish_alpha(nf, obs, de_num, units)
        }
        Level::Interval | Level::Ratio => {
            let values: Vec<f64> = categories
                .iter()
                .map(Label::as_f64)
                .collect::<Option<_>>()
                .ok_or_else(|| {
                    invalid(format!("{} alpha needs numeric categories", level.as_str()))
                })?;
            let mut obs_m = vec![0f64; m_max + 1];
            data.each_unit(|vals| {
                let m = vals.len();
                if m >= 2 {
                    let mut s = 0.0;
                    for i in 0..m {
                        for j in (i + 1)..m {
                            s +=
                                delta_sq(level, values[vals[i] as usize], values[vals[j] as usize]);
                        }
                    }
                    obs_m[m] += 2.0 * s;
                }
            });
            let obs = per_m_sum_f(&obs_m);
            let counted: Vec<(f64, u64)> = values
                .iter()
                .zip(&n_c)
                .filter(|(_, &c)| c > 0)
                .map(|(&x, &c)| (x, c))
                .collect();
            let de_num = expected_sum(level, &counted, n);
            finish_alpha(nf, obs, de_num, units)
        }
    }
}

/// Krippendorff's alpha on numbers. Interval needs O(1) memory beyond the data (variance form);
/// ratio keeps the distinct pairable values and their counts (never a value × value matrix);
/// nominal and ordinal code the values as categories.
pub fn alpha_numeric(rows: &[Vec<Option<f64>>], level: Level) -> StatResult {
    check_rectangular(rows)?;
    for (r, row) in rows.iter().enumerate() {
        if let Some(u) = row.iter().position(|x| x.is_some_and(|x| !x.is_finite())) {
            return Err(invalid(format!(
                "rater {} unit {}: value is not a finite number",
                r + 1,
                u + 1
            )));
        }
    }
    match level {
        Level::Nominal | Level::Ordinal => {
            let labels: Vec<Vec<Option<Label>>> = rows
                .iter()
                .map(|r| r.iter().map(|x| x.and_then(Label::num)).collect())
                .collect();
            alpha_coded(&Coded::new(&labels)?, level)
        }
        Level::Interval | Level::Ratio => alpha_metric(
            rows.len(),
            &|f: &mut dyn FnMut(&[f64])| for_each_unit(rows, f),
            level,
        ),
    }
}

/// [`alpha_numeric`] at the interval or ratio level on coded data stored unit by unit: the
/// categories' numbers, unit by unit, through the same code (the same figures to the last
/// bit as [`alpha_numeric`] on the same numbers).
pub fn alpha_numeric_units(data: &CodedUnits, level: Level) -> StatResult {
    if !matches!(level, Level::Interval | Level::Ratio) {
        return alpha_coded_units(data, level);
    }
    let values: Vec<f64> = data
        .categories
        .iter()
        .map(Label::as_f64)
        .collect::<Option<_>>()
        .ok_or_else(|| invalid(format!("{} alpha needs numeric categories", level.as_str())))?;
    let each = |f: &mut dyn FnMut(&[f64])| {
        let mut buf = Vec::with_capacity(data.n_raters());
        data.each_unit(|vals| {
            buf.clear();
            buf.extend(vals.iter().map(|&c| values[c as usize]));
            f(&buf);
        });
    };
    alpha_metric(data.n_raters(), &each, level)
}

/// Interval or ratio alpha over the units `each` hands out (present values only), `m_max`
/// raters at most.
/// Hands each unit's present values to the callback, in unit order.
type EachUnit<'a> = &'a dyn Fn(&mut dyn FnMut(&[f64]));

fn alpha_metric(m_max: usize, each: EachUnit<'_>, level: Level) -> StatResult {
    let mut obs_m = vec![0f64; m_max + 1];
    let (mut n, mut units, mut sum) = (0u64, 0usize, 0f64);
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    each(&mut |vals: &[f64]| {
        let m = vals.len();
        if m >= 2 {
            units += 1;
            n += m as u64;
            let mut s = 0.0;
            for i in 0..m {
                sum += vals[i];
                lo = lo.min(vals[i]);
                hi = hi.max(vals[i]);
                for j in (i + 1)..m {
                    s += delta_sq(level, vals[i], vals[j]);
                }
            }
            obs_m[m] += 2.0 * s;
        }
    });
    if units == 0 {
        return Err(undefined(NO_PAIRABLE));
    }
    if lo == hi {
        return Err(undefined(NO_VARIATION));
    }
    let obs = per_m_sum_f(&obs_m);
    let de_num = if level == Level::Interval {
        // Σ n_c n_k (c-k)² = 2 n Σ (x - mean)², two passes for accuracy.
        let mean = sum / n as f64;
        let mut ss = 0.0;
        each(&mut |vals: &[f64]| {
            if vals.len() >= 2 {
                for &x in vals {
                    ss += (x - mean) * (x - mean);
                }
            }
        });
        2.0 * n as f64 * ss
    } else {
        let mut all = Vec::with_capacity(n as usize);
        each(&mut |vals: &[f64]| {
            if vals.len() >= 2 {
                all.extend_from_slice(vals);
            }
        });
        all.sort_by(f64::total_cmp);
        let mut counted: Vec<(f64, u64)> = Vec::new();
        for x in all {
            match counted.last_mut() {
                Some((y, c)) if *y == x => *c += 1,
                _ => counted.push((x, 1)),
            }
        }
        expected_sum(level, &counted, n)
    };
    finish_alpha(n as f64, obs, de_num, units)
}

/// Squared metric difference for interval and ratio data.
fn delta_sq(level: Level, a: f64, b: f64) -> f64 {
    match level {
        Level::Ratio => {
            let s = a + b;
            // Only c = k = 0 (or c = -k) gives 0/0; treated as no difference, as the
            // `krippendorff` package does.
            if s == 0.0 {
                0.0
            } else {
                ((a - b) / s) * ((a - b) / s)
            }
        }
        _ => (a - b) * (a - b),
    }
}

/// Σ_{c,k} n_c n_k δ²_ck over distinct values (interval by closed form, ratio by pairs of
/// distinct values: O(V) memory, O(V²) time).
fn expected_sum(level: Level, counted: &[(f64, u64)], n: u64) -> f64 {
    if level == Level::Interval {
        let nf = n as f64;
        let mean = counted.iter().map(|&(x, c)| x * c as f64).sum::<f64>() / nf;
        let ss: f64 = counted
            .iter()
            .map(|&(x, c)| c as f64 * (x - mean) * (x - mean))
            .sum();
        return 2.0 * nf * ss;
    }
    let mut s = 0.0;
    for (i, &(a, ca)) in counted.iter().enumerate() {
        for &(b, cb) in &counted[i + 1..] {
            s += (ca as f64) * (cb as f64) * delta_sq(level, a, b);
        }
    }
    2.0 * s
}

fn per_m_sum(by_m: &[u64]) -> f64 {
    by_m.iter()
        .enumerate()
        .skip(2)
        .map(|(m, &s)| s as f64 / (m as f64 - 1.0))
        .sum()
}

fn per_m_sum_f(by_m: &[f64]) -> f64 {
    by_m.iter()
        .enumerate()
        .skip(2)
        .map(|(m, &s)| s / (m as f64 - 1.0))
        .sum()
}

/// α = 1 - (n - 1) Σ o δ² / Σ n_c n_k δ².
fn finish_alpha(n: f64, obs: f64, de_num: f64, units: usize) -> StatResult {
    if de_num.is_nan() || de_num <= 0.0 {
        return Err(undefined(NO_VARIATION));
    }
    Ok(Estimate {
        value: 1.0 - (n - 1.0) * obs / de_num,
        units,
        observed: obs / n,
        expected: Some(de_num / (n * (n - 1.0))),
    })
}

// ---------------------------------------------------------------------------------------------
// Cohen's kappa
// ---------------------------------------------------------------------------------------------

/// Disagreement weights of Cohen's kappa.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KappaWeights {
    Unweighted,
    Linear,
    Quadratic,
}

/// What the weights measure distance on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scores {
    /// Position of the category in the sorted (or declared) list: scikit-learn, statsmodels,
    /// R irr `kappa2` (for labels that sort the same as strings).
    #[default]
    Position,
    /// The categories' numeric values: irrCAC, statsmodels `weights=`.
    Value,
}

/// Cohen's kappa for two raters. Units where either rater is missing are dropped (listwise).
/// Categories are those used in the kept pairs unless declared.
pub fn cohen_kappa(data: &Coded, weights: KappaWeights, scores: Scores) -> StatResult {
    check_rectangular(&data.ratings)?;
    if data.n_raters() != 2 {
        return Err(invalid(format!(
            "Cohen's kappa needs exactly two raters (got {})",
            data.n_raters()
        )));
    }
    let pairs: Vec<(u32, u32)> = data.ratings[0]
        .iter()
        .zip(&data.ratings[1])
        .filter_map(|(a, b)| Some(((*a)?, (*b)?)))
        .collect();
    if pairs.is_empty() {
        return Err(undefined("no unit is rated by both raters"));
    }
    // Category list: declared, else the labels used in the complete pairs.
    let cats: Vec<u32> = if data.declared {
        (0..data.categories.len() as u32).collect()
    } else {
        let mut used = vec![false; data.categories.len()];
        for &(a, b) in &pairs {
            used[a as usize] = true;
            used[b as usize] = true;
        }
        (0..data.categories.len() as u32)
            .filter(|&c| used[c as usize])
            .collect()
    };
    let q = cats.len();
    let mut pos = vec![0usize; data.categories.len()];
    for (i, &c) in cats.iter().enumerate() {
        pos[c as usize] = i;
    }
    let s: Vec<f64> = match scores {
        Scores::Position => (0..q).map(|i| i as f64).collect(),
        Scores::Value => cats
            .iter()
            .map(|&c| data.categories[c as usize].as_f64())
            .collect::<Option<Vec<f64>>>()
            .ok_or_else(|| invalid("value scores need numeric categories"))?,
    };
    let w = |i: usize, j: usize| -> f64 {
        match weights {
            KappaWeights::Unweighted => f64::from(u8::from(i != j)),
            KappaWeights::Linear => (s[i] - s[j]).abs(),
            KappaWeights::Quadratic => (s[i] - s[j]) * (s[i] - s[j]),
        }
    };
    let mut table = vec![0u64; q * q];
    for &(a, b) in &pairs {
        table[pos[a as usize] * q + pos[b as usize]] += 1;
    }
    let mut row = vec![0u64; q];
    let mut col = vec![0u64; q];
    for i in 0..q {
        for j in 0..q {
            row[i] += table[i * q + j];
            col[j] += table[i * q + j];
        }
    }
    let nf = pairs.len() as f64;
    let (mut num, mut den, mut wmax) = (0.0, 0.0, 0.0f64);
    for i in 0..q {
        for j in 0..q {
            let wij = w(i, j);
            wmax = wmax.max(wij);
            num += wij * table[i * q + j] as f64;
            den += wij * (row[i] as f64 * col[j] as f64);
        }
    }
    let den = den / nf;
    if den.is_nan() || den <= 0.0 {
        return Err(undefined(
            "expected disagreement is zero (p_e = 1): both raters used one category",
        ));
    }
    Ok(Estimate {
        value: 1.0 - num / den,
        units: pairs.len(),
        observed: 1.0 - num / (nf * wmax),
        expected: Some(1.0 - den / (nf * wmax)),
    })
}

// ---------------------------------------------------------------------------------------------
// Gwet family (irrCAC): percent agreement, AC1/AC2, generalised Fleiss, Brennan-Prediger
// ---------------------------------------------------------------------------------------------

/// Agreement weights as irrCAC defines them (on the categories' numeric values when all are
/// numbers, else on 1..q).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AgreementWeights {
    Identity,
    Linear,
    Quadratic,
    Ordinal,
    Radical,
    Ratio,
    Circular,
    Bipolar,
}

/// The q × q agreement-weight matrix (row-major).
pub fn agreement_weights(
    categories: &[Label],
    kind: AgreementWeights,
) -> Result<Vec<f64>, StatError> {
    let q = categories.len();
    let mut w = vec![0.0; q * q];
    for k in 0..q {
        w[k * q + k] = 1.0;
    }
    if kind == AgreementWeights::Identity || q < 2 {
        return Ok(w);
    }
    let x: Vec<f64> = match categories
        .iter()
        .map(Label::as_f64)
        .collect::<Option<Vec<_>>>()
    {
        Some(mut v) => {
            v.sort_by(f64::total_cmp);
            v
        }
        None => (1..=q).map(|i| i as f64).collect(),
    };
    let (xmin, xmax) = (x[0], x[q - 1]);
    let range = xmax - xmin;
    let dis = |k: usize, l: usize| -> f64 {
        let d = x[k] - x[l];
        match kind {
            AgreementWeights::Identity => f64::from(u8::from(k != l)),
            AgreementWeights::Linear => d.abs() / range,
            AgreementWeights::Quadratic => d * d / (range * range),
            AgreementWeights::Ordinal => {
                let a = k.abs_diff(l) as f64;
                (a + 1.0) * a / 2.0
            }
            AgreementWeights::Radical => d.abs().sqrt() / range.sqrt(),
            AgreementWeights::Ratio => {
                let r = d / (x[k] + x[l]);
                let m = range / (xmax + xmin);
                r * r / (m * m)
            }
            AgreementWeights::Circular => {
                let u = range + 1.0;
                (std::f64::consts::PI * d / u).sin().powi(2)
            }
            AgreementWeights::Bipolar => {
                if k == l {
                    0.0
                } else {
                    d * d / ((x[k] + x[l] - 2.0 * xmin) * (2.0 * xmax - x[k] - x[l]))
                }
            }
        }
    };
    if kind == AgreementWeights::Ratio && x.iter().any(|&v| v <= 0.0) {
        return Err(invalid("ratio weights need positive category values"));
    }
    let mut raw = vec![0.0; q * q];
    let mut mx = 0.0f64;
    for k in 0..q {
        for l in 0..q {
            raw[k * q + l] = dis(k, l);
            mx = mx.max(raw[k * q + l]);
        }
    }
    // Ordinal, circular and bipolar are normalised by their maximum; the others already are.
    let norm = match kind {
        AgreementWeights::Ordinal | AgreementWeights::Circular | AgreementWeights::Bipolar => mx,
        _ => 1.0,
    };
    for k in 0..q {
        for l in 0..q {
            w[k * q + l] = 1.0 - raw[k * q + l] / norm;
        }
    }
    Ok(w)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chance {
    None,
    Gwet,
    Fleiss,
    BrennanPrediger,
}

/// irrCAC raw-ratings formulas: units with no rating are dropped; p_a over units with ≥ 2
/// ratings; π_k over all rated units.
fn irrcac(data: &Coded, weights: AgreementWeights, chance: Chance) -> StatResult {
    check_rectangular(&data.ratings)?;
    irrcac_units(data, &data.categories, weights, chance)
}

fn irrcac_units(
    data: &impl Units,
    categories: &[Label],
    weights: AgreementWeights,
    chance: Chance,
) -> StatResult {
    let q = categories.len();
    // Identity weights need no q × q matrix (q may be in the thousands): w(k, l) = [k = l],
    // summed in the same order, so the figures are the same to the last bit.
    let identity = weights == AgreementWeights::Identity;
    let w = if identity {
        Vec::new()
    } else {
        agreement_weights(categories, weights)?
    };
    let wt = |k: u32, l: u32| -> f64 {
        if identity {
            f64::from(u8::from(k == l))
        } else {
            w[k as usize * q + l as usize]
        }
    };
    let mut pi = vec![0.0; q];
    let (mut n1, mut n2, mut pa_sum) = (0usize, 0usize, 0.0);
    data.each_unit(|vals| {
        let r = vals.len();
        if r == 0 {
            return;
        }
        n1 += 1;
        for &c in vals {
            pi[c as usize] += 1.0 / r as f64;
        }
        if r >= 2 {
            n2 += 1;
            // Σ_k r_ik (r*_ik - 1) = Σ over ordered pairs of different raters of w(c_a, c_b).
            let mut s = 0.0;
            for a in 0..r {
                for b in 0..r {
                    if a != b {
                        s += wt(vals[a], vals[b]);
                    }
                }
            }
            pa_sum += s / (r * (r - 1)) as f64;
        }
    });
    if n2 == 0 {
        return Err(undefined("no unit has two or more ratings"));
    }
    let pa = pa_sum / n2 as f64;
    for p in &mut pi {
        *p /= n1 as f64;
    }
    if chance == Chance::None {
        return Ok(Estimate {
            value: pa,
            units: n2,
            observed: pa,
            expected: None,
        });
    }
    if q < 2 {
        return Err(undefined(
            "only one category is used: chance agreement is 1",
        ));
    }
    let sum_w: f64 = if identity { q as f64 } else { w.iter().sum() };
    let qf = q as f64;
    let pe = match chance {
        Chance::Gwet => sum_w / (qf * (qf - 1.0)) * pi.iter().map(|p| p * (1.0 - p)).sum::<f64>(),
        Chance::Fleiss if identity => pi.iter().map(|p| p * p).fold(0.0, |s, x| s + x),
        Chance::Fleiss => {
            let mut s = 0.0;
            for k in 0..q {
                for l in 0..q {
                    s += w[k * q + l] * pi[k] * pi[l];
                }
            }
            s
        }
        Chance::BrennanPrediger => sum_w / (qf * qf),
        Chance::None => unreachable!("handled above"),
    };
    if pe >= 1.0 {
        return Err(undefined("chance agreement p_e is 1"));
    }
    Ok(Estimate {
        value: (pa - pe) / (1.0 - pe),
        units: n2,
        observed: pa,
        expected: Some(pe),
    })
}

/// Percent agreement (irrCAC `pa.coeff.raw`): per-unit pairwise agreement averaged over units
/// with at least two ratings; weighted when `weights` is not identity.
pub fn percent_agreement(data: &Coded, weights: AgreementWeights) -> StatResult {
    irrcac(data, weights, Chance::None)
}

/// Gwet's AC1 (identity weights) or AC2 (other weights), irrCAC conventions.
pub fn gwet_ac(data: &Coded, weights: AgreementWeights) -> StatResult {
    irrcac(data, weights, Chance::Gwet)
}

/// [`percent_agreement`] on data stored unit by unit.
pub fn percent_agreement_units(data: &CodedUnits, weights: AgreementWeights) -> StatResult {
    irrcac_units(data, &data.categories, weights, Chance::None)
}

/// [`gwet_ac`] on data stored unit by unit.
pub fn gwet_ac_units(data: &CodedUnits, weights: AgreementWeights) -> StatResult {
    irrcac_units(data, &data.categories, weights, Chance::Gwet)
}

/// Gwet's AC1/AC2 from a two-rater contingency table (rater 1 in rows), categories 1..q.
pub fn gwet_ac_table(table: &[Vec<u64>], weights: AgreementWeights) -> StatResult {
    let q = table.len();
    if table.iter().any(|r| r.len() != q) {
        return Err(invalid("the contingency table must be square"));
    }
    if q < 2 {
        return Err(undefined("only one category: chance agreement is 1"));
    }
    let cats: Vec<Label> = (1..=q).map(|i| Label::Num(i as f64)).collect();
    let w = agreement_weights(&cats, weights)?;
    let n: u64 = table.iter().flatten().sum();
    if n == 0 {
        return Err(undefined("the table is empty"));
    }
    let nf = n as f64;
    let mut pa = 0.0;
    let mut pi = vec![0.0; q];
    for k in 0..q {
        for l in 0..q {
            let c = table[k][l] as f64;
            pa += w[k * q + l] * c / nf;
            pi[k] += c / (2.0 * nf);
            pi[l] += c / (2.0 * nf);
        }
    }
    let sum_w: f64 = w.iter().sum();
    let qf = q as f64;
    let pe = sum_w / (qf * (qf - 1.0)) * pi.iter().map(|p| p * (1.0 - p)).sum::<f64>();
    if pe >= 1.0 {
        return Err(undefined("chance agreement p_e is 1"));
    }
    Ok(Estimate {
        value: (pa - pe) / (1.0 - pe),
        units: n as usize,
        observed: pa,
        expected: Some(pe),
    })
}

// ---------------------------------------------------------------------------------------------
// Fleiss' kappa
// ---------------------------------------------------------------------------------------------

/// Chance agreement of Fleiss' kappa.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FleissMethod {
    /// p_e = Σ p_j² (Fleiss 1971).
    #[default]
    Fleiss,
    /// p_e = 1/q (Randolph's free-marginal kappa).
    Randolph,
}

/// What to do when units have different numbers of ratings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FleissMissing {
    /// Classic Fleiss' kappa is undefined with unequal ratings per unit.
    #[default]
    Reject,
    /// Drop every unit with a missing rating (R irr `kappam.fleiss`).
    Listwise,
    /// Gwet's generalisation (irrCAC `fleiss.kappa.raw`).
    Gwet,
}

/// Fleiss' kappa from a units × categories table of counts (equal row sums ≥ 2).
pub fn fleiss_kappa_counts(counts: &[Vec<u64>], method: FleissMethod) -> StatResult {
    let q = check_rectangular(counts).map_err(|_| invalid("rows have different lengths"))?;
    let r = counts[0].iter().sum::<u64>();
    if let Some(i) = counts.iter().position(|row| row.iter().sum::<u64>() != r) {
        return Err(undefined(format!(
            "unit {} has a different number of ratings than unit 1: classic Fleiss' kappa \
             needs equal numbers (use listwise or gwet handling of missing ratings)",
            i + 1
        )));
    }
    if r < 2 {
        return Err(undefined("fewer than two ratings per unit"));
    }
    let big_n = counts.len() as f64;
    let rf = r as f64;
    let mut pbar = 0.0;
    let mut p = vec![0.0; q];
    for row in counts {
        let ss: u64 = row.iter().map(|x| x * x).sum();
        pbar += (ss - r) as f64 / (rf * (rf - 1.0));
        for (j, &x) in row.iter().enumerate() {
            p[j] += x as f64;
        }
    }
    pbar /= big_n;
    let pe = match method {
        FleissMethod::Fleiss => p.iter().map(|x| (x / (big_n * rf)).powi(2)).sum::<f64>(),
        FleissMethod::Randolph => {
            if q < 2 {
                return Err(undefined("only one category: chance agreement is 1"));
            }
            1.0 / q as f64
        }
    };
    if pe >= 1.0 {
        return Err(undefined("chance agreement p_e is 1 (one category used)"));
    }
    Ok(Estimate {
        value: (pbar - pe) / (1.0 - pe),
        units: counts.len(),
        observed: pbar,
        expected: Some(pe),
    })
}

/// Fleiss' kappa on raw ratings with an explicit choice for missing ratings.
pub fn fleiss_kappa(data: &Coded, method: FleissMethod, missing: FleissMissing) -> StatResult {
    check_rectangular(&data.ratings)?;
    fleiss_units(data, &data.categories, method, missing)
}

/// [`fleiss_kappa`] on data stored unit by unit.
pub fn fleiss_kappa_units(
    data: &CodedUnits,
    method: FleissMethod,
    missing: FleissMissing,
) -> StatResult {
    fleiss_units(data, &data.categories, method, missing)
}

/// Fleiss' kappa unit by unit: each unit's Σ_j n_ij² from its sorted ratings and the
/// category totals, never a units × categories table (memory flat in the number of
/// categories). The same sums in the same order as [`fleiss_kappa_counts`].
fn fleiss_units(
    data: &impl Units,
    categories: &[Label],
    method: FleissMethod,
    missing: FleissMissing,
) -> StatResult {
    let q = categories.len();
    let m = data.raters();
    if missing == FleissMissing::Gwet {
        let chance = match method {
            FleissMethod::Fleiss => Chance::Fleiss,
            FleissMethod::Randolph => Chance::BrennanPrediger,
        };
        return irrcac_units(data, categories, AgreementWeights::Identity, chance);
    }
    // Every kept unit has m ratings: listwise keeps complete units only, and reject fails
    // below when any unit is incomplete.
    let r = m as u64;
    let rf = r as f64;
    let mut kept = 0usize;
    let mut incomplete = 0usize;
    let mut pbar = 0.0;
    let mut p = vec![0u64; q];
    let mut sorted = Vec::with_capacity(m);
    data.each_unit(|vals| {
        if vals.len() < m {
            // listwise drops it; reject fails below whatever the other units hold
            incomplete += 1;
            return;
        }
        kept += 1;
        sorted.clear();
        sorted.extend_from_slice(vals);
        sorted.sort_unstable();
        let mut ss = 0u64;
        for run in sorted.chunk_by(|a, b| a == b) {
            let n = run.len() as u64;
            ss += n * n;
            p[run[0] as usize] += n;
        }
        if r >= 2 {
            pbar += (ss - r) as f64 / (rf * (rf - 1.0));
        }
    });
    if kept == 0 && (missing == FleissMissing::Listwise || incomplete == 0) {
        return Err(undefined("no unit is rated by every rater"));
    }
    if missing == FleissMissing::Reject && incomplete > 0 {
        return Err(undefined(format!(
            "{incomplete} unit(s) have missing ratings: classic Fleiss' kappa needs equal \
             numbers of ratings per unit (use listwise or gwet handling)"
        )));
    }
    if r < 2 {
        return Err(undefined("fewer than two ratings per unit"));
    }
    let big_n = kept as f64;
    pbar /= big_n;
    let pe = match method {
        FleissMethod::Fleiss => p
            .iter()
            .map(|&x| (x as f64 / (big_n * rf)).powi(2))
            .sum::<f64>(),
        FleissMethod::Randolph => {
            if q < 2 {
                return Err(undefined("only one category: chance agreement is 1"));
            }
            1.0 / q as f64
        }
    };
    if pe >= 1.0 {
        return Err(undefined("chance agreement p_e is 1 (one category used)"));
    }
    Ok(Estimate {
        value: (pbar - pe) / (1.0 - pe),
        units: kept,
        observed: pbar,
        expected: Some(pe),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Raters × units of category indices from a seeded generator, some missing.
    fn random_coded(raters: usize, units: usize, q: usize, missing: u32, seed: u64) -> Coded {
        let mut x = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut next = move || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) as u32
        };
        let ratings = (0..raters)
            .map(|_| {
                (0..units)
                    .map(|_| (next() % 100 >= missing).then(|| next() % q as u32))
                    .collect()
            })
            .collect();
        Coded {
            categories: (0..q).map(|i| Label::Num(i as f64)).collect(),
            ratings,
            declared: false,
        }
    }

    fn units_of(c: &Coded) -> CodedUnits {
        let (m, n) = (c.n_raters(), c.n_units());
        let mut cells = Vec::with_capacity(m * n);
        for u in 0..n {
            for r in 0..m {
                cells.push(c.ratings[r][u].unwrap_or(MISSING));
            }
        }
        CodedUnits::new(c.categories.clone(), c.declared, m, cells).unwrap()
    }

    /// The table of counts `fleiss_kappa` used to build (units × categories).
    fn counts_of(c: &Coded, complete_only: bool) -> Vec<Vec<u64>> {
        let mut counts = Vec::new();
        for_each_unit(&c.ratings, |vals| {
            if complete_only && vals.len() < c.n_raters() {
                return;
            }
            let mut row = vec![0u64; c.categories.len()];
            for &v in vals {
                row[v as usize] += 1;
            }
            counts.push(row);
        });
        counts
    }

    #[test]
    fn unit_by_unit_statistics_equal_the_table_and_rater_forms_to_the_bit() {
        for (raters, units, q, missing, seed) in [
            (3, 200, 5, 0, 1),
            (5, 300, 1000, 0, 2),
            (4, 300, 7, 10, 3),
            (2, 50, 3, 30, 4),
            (6, 100, 2, 0, 5),
        ] {
            let c = random_coded(raters, units, q, missing, seed);
            let cu = units_of(&c);
            assert_eq!(cu.to_coded(), c);
            for method in [FleissMethod::Fleiss, FleissMethod::Randolph] {
                // reject and listwise: the old table of counts, complete units only
                let table = fleiss_kappa_counts(&counts_of(&c, true), method);
                for missing_rule in [FleissMissing::Listwise, FleissMissing::Reject] {
                    let got = fleiss_kappa(&c, method, missing_rule);
                    if missing == 0 || missing_rule == FleissMissing::Listwise {
                        assert_eq!(got, table, "{raters}x{units} q={q} {missing_rule:?}");
                    } else {
                        assert!(got.is_err());
                    }
                    assert_eq!(fleiss_kappa_units(&cu, method, missing_rule), got);
                }
                let g = fleiss_kappa(&c, method, FleissMissing::Gwet);
                assert_eq!(fleiss_kappa_units(&cu, method, FleissMissing::Gwet), g);
            }
            for level in [
                Level::Nominal,
                Level::Ordinal,
                Level::Interval,
                Level::Ratio,
            ] {
                assert_eq!(alpha_coded_units(&cu, level), alpha_coded(&c, level));
            }
            let numbers: Vec<Vec<Option<f64>>> = c
                .ratings
                .iter()
                .map(|r| r.iter().map(|v| v.map(|v| v as f64 + 1.0)).collect())
                .collect();
            let shifted = CodedUnits::new(
                (1..=q).map(|i| Label::Num(i as f64)).collect(),
                false,
                raters,
                units_of(&c).cells,
            )
            .unwrap();
            for level in [Level::Interval, Level::Ratio] {
                assert_eq!(
                    alpha_numeric_units(&shifted, level),
                    alpha_numeric(&numbers, level)
                );
            }
            for w in [AgreementWeights::Identity, AgreementWeights::Quadratic] {
                if q > 50 && w != AgreementWeights::Identity {
                    continue;
                }
                assert_eq!(percent_agreement_units(&cu, w), percent_agreement(&c, w));
                assert_eq!(gwet_ac_units(&cu, w), gwet_ac(&c, w));
            }
        }
    }

    #[test]
    fn identity_weights_without_a_matrix_give_the_matrix_figures() {
        let c = random_coded(4, 200, 6, 15, 9);
        let w = agreement_weights(&c.categories, AgreementWeights::Identity).unwrap();
        // the matrix form, as irrcac computed it before
        let q = c.categories.len();
        let mut pi = vec![0.0; q];
        let (mut n1, mut n2, mut pa_sum) = (0usize, 0usize, 0.0);
        for_each_unit(&c.ratings, |vals| {
            let r = vals.len();
            if r == 0 {
                return;
            }
            n1 += 1;
            for &v in vals {
                pi[v as usize] += 1.0 / r as f64;
            }
            if r >= 2 {
                n2 += 1;
                let mut s = 0.0;
                for a in 0..r {
                    for b in 0..r {
                        if a != b {
                            s += w[vals[a] as usize * q + vals[b] as usize];
                        }
                    }
                }
                pa_sum += s / (r * (r - 1)) as f64;
            }
        });
        let pa = pa_sum / n2 as f64;
        for p in &mut pi {
            *p /= n1 as f64;
        }
        let mut pe = 0.0;
        for k in 0..q {
            for l in 0..q {
                pe += w[k * q + l] * pi[k] * pi[l];
            }
        }
        let e = fleiss_kappa(&c, FleissMethod::Fleiss, FleissMissing::Gwet).unwrap();
        assert_eq!(e.observed, pa);
        assert_eq!(e.expected, Some(pe));
        assert_eq!(e.value, (pa - pe) / (1.0 - pe));
    }

    fn nums(rows: &[&[Option<f64>]]) -> Vec<Vec<Option<Label>>> {
        rows.iter()
            .map(|r| r.iter().map(|x| x.and_then(Label::num)).collect())
            .collect()
    }

    #[test]
    fn label_parse_keeps_nan_as_text() {
        assert_eq!(Label::parse("nan"), Label::text("nan"));
        assert_eq!(Label::parse("2"), Label::Num(2.0));
        assert_eq!(Label::parse("-0"), Label::Num(0.0));
        assert!(Label::Num(10.0) > Label::Num(2.0));
    }

    #[test]
    fn ragged_rows_are_invalid() {
        let d = nums(&[&[Some(1.0), Some(2.0)], &[Some(1.0)]]);
        assert!(matches!(
            krippendorff_alpha(&d, Level::Nominal, None),
            Err(StatError::Invalid { .. })
        ));
    }

    #[test]
    fn one_value_is_undefined_not_one() {
        let d = nums(&[&[Some(3.0), Some(3.0)], &[Some(3.0), Some(3.0)]]);
        for level in [
            Level::Nominal,
            Level::Ordinal,
            Level::Interval,
            Level::Ratio,
        ] {
            assert!(matches!(
                krippendorff_alpha(&d, level, None),
                Err(StatError::Undefined { .. })
            ));
        }
    }

    #[test]
    fn interval_variance_form_equals_coded_form() {
        let d = nums(&[
            &[Some(1.0), Some(2.5), None, Some(4.0), Some(0.5)],
            &[Some(1.5), Some(2.5), Some(3.0), Some(1.0), None],
            &[None, Some(2.0), Some(3.5), Some(4.0), Some(0.5)],
        ]);
        let coded = Coded::new(&d).unwrap();
        for level in [Level::Interval, Level::Ratio] {
            let a = alpha_coded(&coded, level).unwrap().value;
            let b = krippendorff_alpha(&d, level, None).unwrap().value;
            assert!((a - b).abs() < 1e-13, "{level:?}: {a} vs {b}");
        }
    }

    #[test]
    fn ordinal_on_text_needs_an_order() {
        let d = vec![
            vec![Some(Label::text("lo")), Some(Label::text("hi"))],
            vec![Some(Label::text("lo")), Some(Label::text("hi"))],
        ];
        assert!(matches!(
            krippendorff_alpha(&d, Level::Ordinal, None),
            Err(StatError::Invalid { .. })
        ));
        let order = [Label::text("lo"), Label::text("hi")];
        assert_eq!(
            krippendorff_alpha(&d, Level::Ordinal, Some(&order))
                .unwrap()
                .value,
            1.0
        );
    }

    #[test]
    fn cohen_needs_two_raters() {
        let d = nums(&[&[Some(1.0)], &[Some(1.0)], &[Some(2.0)]]);
        let c = Coded::new(&d).unwrap();
        assert!(matches!(
            cohen_kappa(&c, KappaWeights::Unweighted, Scores::Position),
            Err(StatError::Invalid { .. })
        ));
    }
}
