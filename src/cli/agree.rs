//! `sage agree FILE.csv --metric ...`: an agreement coefficient for a CSV of ratings (header
//! row = rater names, one row per unit, empty cell = missing).

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use sage_reliability::{
    alpha_coded, alpha_numeric, cohen_kappa, fleiss_kappa, gwet_ac, kalpha_bootstrap,
    percent_agreement, AgreementWeights, BootstrapResult, Coded, FleissMethod, FleissMissing,
    KappaWeights, Label, Level, Scores, StatError, StatResult,
};
use serde_json::{json, Value};
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

/// The ratings as read: rater names and raters × units cells (trimmed text, `None` = empty).
pub struct RatingsCsv {
    pub raters: Vec<String>,
    pub cells: Vec<Vec<Option<String>>>,
    /// Line number of each unit's row, for messages.
    pub lines: Vec<u64>,
}

/// Reads the CSV; ragged rows and empty files are errors naming the line.
pub fn read_ratings(path: &Path) -> Result<RatingsCsv> {
    let bytes = std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        bail!(
            "{}: empty file (expected a header row of rater names)",
            path.display()
        );
    }
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .from_reader(bytes.as_slice());
    let header = rdr
        .headers()
        .with_context(|| format!("{}: cannot read the header row", path.display()))?
        .clone();
    let raters: Vec<String> = header.iter().map(|s| s.trim().to_string()).collect();
    let k = raters.len();
    let mut cells = vec![Vec::new(); k];
    let mut lines = Vec::new();
    for rec in rdr.records() {
        let rec = rec.with_context(|| format!("{}: malformed CSV", path.display()))?;
        let line = rec.position().map_or(0, |p| p.line());
        if rec.len() != k {
            bail!(
                "{} line {line}: {} cells, but the header names {k} raters",
                path.display(),
                rec.len()
            );
        }
        for (i, c) in rec.iter().enumerate() {
            let t = c.trim();
            cells[i].push((!t.is_empty()).then(|| t.to_string()));
        }
        lines.push(line);
    }
    Ok(RatingsCsv {
        raters,
        cells,
        lines,
    })
}

impl RatingsCsv {
    /// Labels: numbers when every cell is a number, otherwise all text.
    fn labels(&self) -> Vec<Vec<Option<Label>>> {
        let all_numeric = self
            .cells
            .iter()
            .flatten()
            .flatten()
            .all(|c| Label::parse(c).as_f64().is_some());
        self.cells
            .iter()
            .map(|r| {
                r.iter()
                    .map(|c| {
                        c.as_ref().map(|c| {
                            if all_numeric {
                                Label::parse(c)
                            } else {
                                Label::text(c.clone())
                            }
                        })
                    })
                    .collect()
            })
            .collect()
    }

    /// Numbers for interval and ratio alpha; the first non-number is an error with its line.
    fn numbers(&self, path: &Path, level: &str) -> Result<Vec<Vec<Option<f64>>>> {
        let mut out = Vec::with_capacity(self.cells.len());
        for (r, row) in self.cells.iter().enumerate() {
            let mut v = Vec::with_capacity(row.len());
            for (u, c) in row.iter().enumerate() {
                v.push(match c {
                    None => None,
                    Some(c) => match Label::parse(c) {
                        Label::Num(x) => Some(x),
                        Label::Text(_) => bail!(
                            "{} line {} (rater {}): {c:?} is not a number ({level} level needs \
                             numbers)",
                            path.display(),
                            self.lines[u],
                            self.raters[r]
                        ),
                    },
                });
            }
            out.push(v);
        }
        Ok(out)
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
    let csv = read_ratings(path)?;
    let lvl = level(args.level);
    let labels = csv.labels();
    let coded = match &args.order {
        Some(order) => {
            let numeric = labels
                .iter()
                .flatten()
                .flatten()
                .all(|l| l.as_f64().is_some());
            let cats: Vec<Label> = order
                .iter()
                .map(|s| {
                    if numeric {
                        Label::parse(s.trim())
                    } else {
                        Label::text(s.trim())
                    }
                })
                .collect();
            Coded::with_categories(&labels, &cats)
        }
        None => Coded::new(&labels),
    }
    .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;

    let mut weights_name = None;
    let result: StatResult = match args.metric {
        Metric::Percent => {
            weights_name = Some(weights);
            percent_agreement(&coded, agreement_weights(weights))
        }
        Metric::Gwet => {
            weights_name = Some(weights);
            gwet_ac(&coded, agreement_weights(weights))
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
            cohen_kappa(&coded, w, scores)
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
            fleiss_kappa(&coded, method, missing)
        }
        Metric::Alpha => match lvl {
            Level::Interval | Level::Ratio if args.order.is_none() => {
                alpha_numeric(&csv.numbers(path, lvl.as_str())?, lvl)
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
            _ => alpha_coded(&coded, lvl),
        },
    };
    if let Err(StatError::Invalid { reason }) = &result {
        bail!("{}: {reason}", path.display());
    }
    let boot: Option<Result<BootstrapResult, StatError>> = match (args.bootstrap, &result) {
        (Some(b), Ok(_)) => Some(kalpha_bootstrap(&coded, lvl, b, args.seed, args.confidence)),
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
    out.insert("units".into(), json!(csv.lines.len()));
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
