//! `sage agree FILE.csv --metric ...`: an agreement coefficient for a CSV of ratings (header
//! row = rater names, one row per unit, empty cell = missing).

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use sage_reliability::{
    alpha_coded_units, alpha_numeric_units, cohen_kappa, fleiss_kappa_units, gwet_ac_units,
    kalpha_bootstrap, percent_agreement_units, AgreementWeights, BootstrapResult, CodedUnits,
    FleissMethod, FleissMissing, KappaWeights, Label, Level, Scores, StatError, StatResult,
    MISSING,
};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Metric {
    /// Percent agreement (pairwise, averaged over units with ≥ 2 ratings).
    Percent,
    /// Cohen's kappa (exactly two raters; units with a missing rating are dropped).
    Cohen,
    /// Fleiss' kappa (missing ratings: see --missing).
    Fleiss,
    /// Gwet's AC1 (no weights) or AC2 (with --weights).
    Gwet,
    /// Krippendorff's alpha (see --level).
    Alpha,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WeightsArg {
    Unweighted,
    Linear,
    Quadratic,
    Ordinal,
    Radical,
    Ratio,
    Circular,
    Bipolar,
}

#[derive(Debug, Args)]
pub struct AgreeArgs {
    /// CSV file: header row of rater names, one row per unit, empty cell = missing.
    pub file: PathBuf,
    #[arg(long, value_enum)]
    pub metric: Metric,
    /// Level of measurement for alpha.
    #[arg(long, value_enum, default_value = "nominal")]
    pub level: LevelArg,
    /// Weights: Cohen (linear, quadratic), Gwet AC2 and percent (all irrCAC kinds).
    /// Default unweighted; alpha takes none (its --level sets the distance).
    #[arg(long, value_enum)]
    pub weights: Option<WeightsArg>,
    /// Cohen's weights measure distance on category positions (default) or numeric values.
    #[arg(long, value_enum, default_value = "position")]
    pub scores: ScoresArg,
    /// Category order (comma-separated), needed for ordinal alpha on text labels; also declares
    /// unused categories.
    #[arg(long, value_delimiter = ',')]
    pub order: Option<Vec<String>>,
    /// Fleiss with missing ratings: reject (undefined), listwise deletion, or Gwet's
    /// generalisation.
    #[arg(long, value_enum, default_value = "reject")]
    pub missing: MissingArg,
    /// Fleiss' chance agreement: fleiss (marginals) or randolph (1/q).
    #[arg(long, value_enum, default_value = "fleiss")]
    pub fleiss_method: FleissMethodArg,
    /// Hayes & Krippendorff bootstrap replicates for alpha's confidence interval.
    #[arg(long)]
    pub bootstrap: Option<usize>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[arg(long, default_value_t = 0.95)]
    pub confidence: f64,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Write the result to FILE instead of printing it (replaced whole).
    #[arg(long = "output", short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LevelArg {
    Nominal,
    Ordinal,
    Interval,
    Ratio,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ScoresArg {
    Position,
    Value,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MissingArg {
    Reject,
    Listwise,
    Gwet,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FleissMethodArg {
    Fleiss,
    Randolph,
}

/// The ratings as read, in one pass over the file and without keeping it: rater names, each
/// distinct cell text once, and every cell as the index of its text (4 bytes a rating, unit
/// by unit, as the rows come).
pub struct RatingsCsv {
    pub raters: Vec<String>,
    /// Distinct non-empty cell texts (trimmed), in order of first appearance.
    texts: Vec<String>,
    /// Units × raters: an index into `texts`, or [`MISSING`] for an empty cell.
    cells: Vec<u32>,
    units: usize,
    /// `(unit, line)` wherever a unit's row is not on the line after the previous unit's
    /// (the first unit, and after a quoted line break or a skipped blank line): the line of
    /// every unit, for messages, without a number per unit.
    line_jumps: Vec<(usize, u64)>,
}

/// Cell texts to indices: a short list searched in place while the texts are few (ratings
/// have a handful of values), a hash map beyond.
#[derive(Default)]
struct Interner {
    texts: Vec<String>,
    map: HashMap<String, u32>,
}

impl Interner {
    const SHORT: usize = 16;

    fn id(&mut self, t: &str) -> Option<u32> {
        if self.texts.len() <= Self::SHORT {
            if let Some(i) = self.texts.iter().position(|x| x == t) {
                return Some(i as u32);
            }
        } else if let Some(&i) = self.map.get(t) {
            return Some(i);
        }
        let i = u32::try_from(self.texts.len())
            .ok()
            .filter(|&i| i != MISSING)?;
        self.texts.push(t.to_string());
        if self.texts.len() > Self::SHORT {
            if self.map.is_empty() {
                self.map = (self.texts.iter().cloned()).zip(0..).collect();
            } else {
                self.map.insert(t.to_string(), i);
            }
        }
        Some(i)
    }
}

/// Whether anything but ASCII white space went through (an empty file is an error).
struct SeesText<R> {
    inner: R,
    text: bool,
}

impl<R: std::io::Read> std::io::Read for SeesText<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if !self.text && buf[..n].iter().any(|b| !b.is_ascii_whitespace()) {
            self.text = true;
        }
        Ok(n)
    }
}

/// Reads the CSV; ragged rows and empty files are errors naming the line.
pub fn read_ratings(path: &Path) -> Result<RatingsCsv> {
    let file =
        std::fs::File::open(path).with_context(|| format!("{}: cannot read", path.display()))?;
    let empty = || {
        anyhow::anyhow!(
            "{}: empty file (expected a header row of rater names)",
            path.display()
        )
    };
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .buffer_capacity(1 << 16)
        .from_reader(SeesText {
            inner: file,
            text: false,
        });
    let header = rdr.headers().cloned();
    let header = match header {
        Ok(h) => h,
        Err(_) if !rdr.get_ref().text => return Err(empty()),
        Err(e) => {
            return Err(anyhow::Error::new(e)
                .context(format!("{}: cannot read the header row", path.display())))
        }
    };
    let raters: Vec<String> = header.iter().map(|s| s.trim().to_string()).collect();
    let k = raters.len();
    let mut texts = Interner::default();
    let mut cells: Vec<u32> = Vec::new();
    let mut units = 0usize;
    let mut line_jumps: Vec<(usize, u64)> = Vec::new();
    let mut rec = csv::StringRecord::new();
    let mut last_line = 0u64;
    loop {
        match rdr.read_record(&mut rec) {
            Ok(true) => {}
            Ok(false) => break,
            // an all-white-space file is "empty", whatever the parser made of it
            Err(_) if !rdr.get_ref().text => return Err(empty()),
            Err(e) => {
                return Err(
                    anyhow::Error::new(e).context(format!("{}: malformed CSV", path.display()))
                )
            }
        }
        let line = rec.position().map_or(0, |p| p.line());
        if rec.len() != k {
            if !rdr.get_ref().text {
                return Err(empty());
            }
            bail!(
                "{} line {line}: {} cells, but the header names {k} raters",
                path.display(),
                rec.len()
            );
        }
        for c in rec.iter() {
            let t = c.trim();
            cells.push(if t.is_empty() {
                MISSING
            } else {
                texts
                    .id(t)
                    .with_context(|| format!("{}: too many distinct ratings", path.display()))?
            });
        }
        if units == 0 || line != last_line + 1 {
            line_jumps.push((units, line));
        }
        last_line = line;
        units += 1;
    }
    if !rdr.get_ref().text {
        return Err(empty());
    }
    Ok(RatingsCsv {
        raters,
        texts: texts.texts,
        cells,
        units,
        line_jumps,
    })
}

impl RatingsCsv {
    /// Units (rows below the header).
    pub fn units(&self) -> usize {
        self.units
    }

    /// The line of unit `u`'s row (from 0).
    fn line(&self, u: usize) -> u64 {
        let i = self.line_jumps.partition_point(|&(v, _)| v <= u);
        match i.checked_sub(1).map(|i| self.line_jumps[i]) {
            Some((v, line)) => line + (u - v) as u64,
            None => 0,
        }
    }

    /// True when every cell is a number: the labels are then numbers, otherwise all text.
    fn all_numeric(&self) -> bool {
        self.texts
            .iter()
            .all(|c| Label::parse(c).as_f64().is_some())
    }

    /// The label of each distinct text.
    fn labels(&self) -> Vec<Label> {
        let numeric = self.all_numeric();
        self.texts
            .iter()
            .map(|c| {
                if numeric {
                    Label::parse(c)
                } else {
                    Label::text(c.clone())
                }
            })
            .collect()
    }

    /// The first cell, rater by rater, whose text `bad` picks: (rater, unit).
    fn first_cell(&self, bad: &[bool]) -> Option<(usize, usize)> {
        let k = self.raters.len();
        (0..k).find_map(|r| {
            (0..self.units)
                .find(|&u| {
                    let c = self.cells[u * k + r];
                    c != MISSING && bad[c as usize]
                })
                .map(|u| (r, u))
        })
    }

    /// The coded data: categories are the sorted distinct labels, or `order` (declared, in
    /// that order; a label outside it is an error naming the first such cell, rater by
    /// rater). The same categories and errors as coding the labels cell by cell
    /// (`Coded::new`, `Coded::with_categories`).
    fn coded(&mut self, order: Option<&[String]>) -> Result<CodedUnits, StatError> {
        let labels = self.labels();
        let numeric = self.all_numeric();
        let (categories, declared) = match order {
            Some(order) => (
                order
                    .iter()
                    .map(|s| {
                        if numeric {
                            Label::parse(s.trim())
                        } else {
                            Label::text(s.trim())
                        }
                    })
                    .collect::<Vec<Label>>(),
                true,
            ),
            None => {
                let mut c = labels.clone();
                c.sort();
                c.dedup();
                (c, false)
            }
        };
        let mut index: HashMap<&Label, u32> = HashMap::with_capacity(categories.len());
        for (i, c) in categories.iter().enumerate() {
            if index.insert(c, i as u32).is_some() {
                return Err(StatError::Invalid {
                    reason: format!("category {c} is declared twice"),
                });
            }
        }
        let to: Vec<Option<u32>> = labels.iter().map(|l| index.get(l).copied()).collect();
        if to.iter().any(Option::is_none) {
            let bad: Vec<bool> = to.iter().map(Option::is_none).collect();
            if let Some((r, u)) = self.first_cell(&bad) {
                let l = &labels[self.cells[u * self.raters.len() + r] as usize];
                return Err(StatError::Invalid {
                    reason: format!(
                        "rater {} unit {}: label {l} is not a declared category",
                        r + 1,
                        u + 1
                    ),
                });
            }
        }
        drop(index);
        let mut cells = std::mem::take(&mut self.cells);
        for c in &mut cells {
            if *c != MISSING {
                *c = to[*c as usize].unwrap_or(MISSING);
            }
        }
        CodedUnits::new(categories, declared, self.raters.len(), cells)
    }
}

pub fn run(args: AgreeArgs) -> Result<super::ExitStatus> {
    // Usage errors (exit 2) before touching the file.
    let weights = args.weights.unwrap_or(WeightsArg::Unweighted);
    let usage = if args.weights.is_some() && matches!(args.metric, Metric::Alpha | Metric::Fleiss) {
        Some(
            format!(
                "--weights does not apply to {:?} (alpha's distance comes from --level)",
                args.metric
            )
            .to_lowercase(),
        )
    } else if args.bootstrap.is_some() && args.metric != Metric::Alpha {
        Some("--bootstrap is only available for --metric alpha".to_string())
    } else if args.metric == Metric::Cohen
        && !matches!(
            weights,
            WeightsArg::Unweighted | WeightsArg::Linear | WeightsArg::Quadratic
        )
    {
        Some("Cohen's kappa takes --weights unweighted, linear or quadratic".to_string())
    } else if args.bootstrap == Some(0) {
        Some("--bootstrap needs at least one replicate".to_string())
    } else if !(args.confidence > 0.0 && args.confidence < 1.0) {
        Some("--confidence must be between 0 and 1".to_string())
    } else {
        None
    };
    if let Some(msg) = usage {
        errln!("sage: error: {msg}");
        return Ok(super::ExitStatus::Fatal);
    }
    match run_inner(&args) {
        Ok(()) => Ok(super::ExitStatus::Ok),
        Err(e) => {
            errln!("sage: error: {e:#}");
            Ok(super::ExitStatus::InputFailed)
        }
    }
}

fn level(l: LevelArg) -> Level {
    match l {
        LevelArg::Nominal => Level::Nominal,
        LevelArg::Ordinal => Level::Ordinal,
        LevelArg::Interval => Level::Interval,
        LevelArg::Ratio => Level::Ratio,
    }
}

fn agreement_weights(w: WeightsArg) -> AgreementWeights {
    match w {
        WeightsArg::Unweighted => AgreementWeights::Identity,
        WeightsArg::Linear => AgreementWeights::Linear,
        WeightsArg::Quadratic => AgreementWeights::Quadratic,
        WeightsArg::Ordinal => AgreementWeights::Ordinal,
        WeightsArg::Radical => AgreementWeights::Radical,
        WeightsArg::Ratio => AgreementWeights::Ratio,
        WeightsArg::Circular => AgreementWeights::Circular,
        WeightsArg::Bipolar => AgreementWeights::Bipolar,
    }
}

fn label_json(l: &Label) -> Value {
    match l {
        // Whole numbers print as integers (1, not 1.0).
        Label::Num(x) if x.fract() == 0.0 && x.abs() < 9.0e15 => json!(*x as i64),
        Label::Num(x) => json!(x),
        Label::Text(s) => json!(s),
    }
}

fn run_inner(args: &AgreeArgs) -> Result<()> {
    let weights = args.weights.unwrap_or(WeightsArg::Unweighted);
    let path = &args.file;
    let mut csv = read_ratings(path)?;
    let lvl = level(args.level);
    let coded = csv
        .coded(args.order.as_deref())
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    // The rater-major form, built only for the statistics that need it.
    let rater_major = || coded.to_coded();
    let mut weights_name = None;
    let result: StatResult = match args.metric {
        Metric::Percent => {
            weights_name = Some(weights);
            percent_agreement_units(&coded, agreement_weights(weights))
        }
        Metric::Gwet => {
            weights_name = Some(weights);
            gwet_ac_units(&coded, agreement_weights(weights))
        }
        Metric::Cohen => {
            if csv.raters.len() != 2 {
                bail!(
                    "{}: Cohen's kappa needs exactly two rater columns, the header names {}",
                    path.display(),
                    csv.raters.len()
                );
            }
            let w = match weights {
                WeightsArg::Unweighted => KappaWeights::Unweighted,
                WeightsArg::Linear => KappaWeights::Linear,
                WeightsArg::Quadratic => KappaWeights::Quadratic,
                other => bail!("Cohen's kappa takes linear or quadratic weights, not {other:?}"),
            };
            weights_name = Some(weights);
            let scores = match args.scores {
                ScoresArg::Position => Scores::Position,
                ScoresArg::Value => Scores::Value,
            };
            cohen_kappa(&rater_major(), w, scores)
        }
        Metric::Fleiss => {
            let method = match args.fleiss_method {
                FleissMethodArg::Fleiss => FleissMethod::Fleiss,
                FleissMethodArg::Randolph => FleissMethod::Randolph,
            };
            let missing = match args.missing {
                MissingArg::Reject => FleissMissing::Reject,
                MissingArg::Listwise => FleissMissing::Listwise,
                MissingArg::Gwet => FleissMissing::Gwet,
            };
            fleiss_kappa_units(&coded, method, missing)
        }
        Metric::Alpha => match lvl {
            Level::Interval | Level::Ratio if args.order.is_none() => {
                // the first cell, rater by rater, that is not a number
                let k = csv.raters.len();
                let not_number: Vec<bool> = coded
                    .categories
                    .iter()
                    .map(|c| match c {
                        Label::Num(_) => false,
                        Label::Text(t) => Label::parse(t).as_f64().is_none(),
                    })
                    .collect();
                if let Some((r, u)) = (0..k).find_map(|r| {
                    (0..coded.n_units())
                        .find(|&u| coded.get(r, u).is_some_and(|c| not_number[c as usize]))
                        .map(|u| (r, u))
                }) {
                    let c = coded
                        .get(r, u)
                        .map(|c| coded.categories[c as usize].to_string());
                    bail!(
                        "{} line {} (rater {}): {:?} is not a number ({} level needs numbers)",
                        path.display(),
                        csv.line(u),
                        csv.raters[r],
                        c.unwrap_or_default(),
                        lvl.as_str()
                    );
                }
                alpha_numeric_units(&coded, lvl)
            }
            Level::Ordinal | Level::Interval | Level::Ratio
                if coded.categories.iter().any(|c| c.as_f64().is_none())
                    && (lvl != Level::Ordinal || args.order.is_none()) =>
            {
                Err(StatError::Invalid {
                    reason: format!(
                        "{} alpha needs numeric ratings{}",
                        lvl.as_str(),
                        if lvl == Level::Ordinal {
                            " or --order giving the order of the text labels"
                        } else {
                            ""
                        }
                    ),
                })
            }
            _ => alpha_coded_units(&coded, lvl),
        },
    };
    if let Err(StatError::Invalid { reason }) = &result {
        bail!("{}: {reason}", path.display());
    }
    let boot: Option<Result<BootstrapResult, StatError>> = match (args.bootstrap, &result) {
        (Some(b), Ok(_)) => Some(kalpha_bootstrap(
            &rater_major(),
            lvl,
            b,
            args.seed,
            args.confidence,
        )),
        _ => None,
    };
    if let Some(Err(StatError::Invalid { reason })) = &boot {
        bail!("{}: bootstrap: {reason}", path.display());
    }

    let metric_name = match args.metric {
        Metric::Percent => "percent",
        Metric::Cohen => "cohen",
        Metric::Fleiss => "fleiss",
        Metric::Gwet => {
            if weights == WeightsArg::Unweighted {
                "gwet-ac1"
            } else {
                "gwet-ac2"
            }
        }
        Metric::Alpha => "alpha",
    };
    let weights_str = weights_name.map(|w| format!("{w:?}").to_lowercase());
    let mut out = serde_json::Map::new();
    out.insert("file".into(), json!(path.display().to_string()));
    out.insert("metric".into(), json!(metric_name));
    if args.metric == Metric::Alpha {
        out.insert("level".into(), json!(lvl.as_str()));
    }
    if let Some(w) = &weights_str {
        out.insert("weights".into(), json!(w));
    }
    out.insert("raters".into(), json!(csv.raters));
    out.insert("units".into(), json!(csv.units()));
    out.insert(
        "categories".into(),
        Value::Array(coded.categories.iter().map(label_json).collect()),
    );
    match &result {
        Ok(e) => {
            out.insert("value".into(), json!(e.value));
            out.insert("n".into(), json!(e.units));
            let (o, x) = if args.metric == Metric::Alpha {
                ("observed_disagreement", "expected_disagreement")
            } else {
                ("observed_agreement", "chance_agreement")
            };
            out.insert(o.into(), json!(e.observed));
            if let Some(p) = e.expected {
                out.insert(x.into(), json!(p));
            }
        }
        Err(err) => {
            out.insert("value".into(), Value::Null);
            out.insert("n".into(), json!(0));
            let reason = match err {
                StatError::Undefined { reason } | StatError::Invalid { reason } => reason,
            };
            out.insert("reason".into(), json!(reason));
        }
    }
    if let Some(b) = &boot {
        out.insert(
            "bootstrap".into(),
            match b {
                Ok(b) => json!({
                    "method": "hayes-krippendorff (KALPHA v3.0)",
                    "replicates": b.replicates,
                    "draws_per_replicate": b.m_draws,
                    "seed": b.seed,
                    "confidence": b.confidence,
                    "ci_low": b.ci_low,
                    "ci_high": b.ci_high,
                    "mean": b.mean,
                    "p_below": b.p_below.iter().map(|(a, p)| json!({"alpha_min": a, "p": p})).collect::<Vec<_>>(),
                }),
                Err(e) => json!({"value": null, "reason": e.to_string()}),
            },
        );
    }
    let text = match args.format {
        Format::Json => serde_json::to_string_pretty(&Value::Object(out))? + "\n",
        Format::Table => table(&out),
    };
    super::print_or_write(args.output.as_deref(), &text)?;
    Ok(())
}

fn table(out: &serde_json::Map<String, Value>) -> String {
    let mut t = comfy_table::Table::new();
    super::width::fit_table(&mut t);
    t.load_preset(comfy_table::presets::UTF8_BORDERS_ONLY);
    let show = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_f64() {
            Some(x) if n.is_f64() => format!("{x:.4}"),
            _ => n.to_string(),
        },
        Value::Array(a) if a.len() > 12 => format!("{} categories", a.len()),
        Value::Array(a) => a
            .iter()
            .map(|x| match x {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect::<Vec<_>>()
            .join(", "),
        Value::Null => "undefined".to_string(),
        other => other.to_string(),
    };
    for (k, v) in out {
        if k == "bootstrap" {
            if let Some(b) = v.as_object() {
                if let (Some(lo), Some(hi)) = (b.get("ci_low"), b.get("ci_high")) {
                    let c = b.get("confidence").and_then(Value::as_f64).unwrap_or(0.95);
                    t.add_row(vec![
                        format!("{:.0}% CI (bootstrap)", c * 100.0),
                        format!("[{}, {}]", show(lo), show(hi)),
                    ]);
                    t.add_row(vec!["replicates".to_string(), show(&b["replicates"])]);
                } else {
                    t.add_row(vec!["bootstrap".to_string(), show(&b["reason"])]);
                }
            }
            continue;
        }
        t.add_row(vec![k.clone(), show(v)]);
    }
    format!("{t}\n")
}
