//! `sage validate LOGS --judge SPEC`: a judge's per-step output against human labels
//! (the Who&When profile: the decisive error step and agent of each failed log).

use anyhow::Context;
use sage_judge::validate::{self, Labeled, Metrics, Prediction, Split, StepRubric};
use std::path::PathBuf;
use std::sync::Arc;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Labelled logs: Who&When JSON files, or folders searched for them (`*.json`).
    #[arg(required = true, value_name = "LOGS")]
    pub logs: Vec<PathBuf>,
    /// The predictor: `baseline:first-agent-step` (always the first agent step, offline), or
    /// an LLM judge (`openai:MODEL`, `anthropic:MODEL`, a name from sage.toml) run step by
    /// step with the decisive-error rubric.
    #[arg(long, value_name = "SPEC")]
    pub judge: String,
    /// The label set and rubric (only `who-and-when` for now).
    #[arg(long, value_enum, default_value_t = Profile::WhoAndWhen)]
    pub profile: Profile,
    /// Also count a predicted step within ±K steps of the labelled one.
    #[arg(long, value_name = "K", default_value_t = 1)]
    pub within: usize,
    /// Seed of the dev/test split.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Share of logs in the dev split.
    #[arg(long, default_value_t = 0.5, value_name = "F")]
    pub dev_fraction: f64,
    /// Tell the judge the task's correct answer (the paper's "with ground truth" setting).
    #[arg(long)]
    pub with_ground_truth: bool,
    /// The step rubric instead of the embedded crates/sage-judge/rubrics/decisive-error.toml.
    #[arg(long, value_name = "FILE")]
    pub rubric: Option<PathBuf>,
    /// Attempts per step (an invalid answer or an unverified quote is asked again with the
    /// reason).
    #[arg(long, default_value = "3", value_name = "N", value_parser = clap::builder::TypedValueParser::map(clap::value_parser!(u32).range(1..), super::non_zero))]
    pub max_attempts: std::num::NonZeroU32,
    /// Logs judged at once. Default: the judge's own (`concurrency` of a named judge; the
    /// local judge: 1), else 16.
    #[arg(long, value_parser = super::concurrency)]
    pub concurrency: Option<std::num::NonZeroUsize>,
    /// Config file with named judges (default: ./sage.toml when present).
    #[arg(long, value_name = "FILE", env = "SAGE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Judgment ledger directory: every answer is kept and reused on re-runs (the same
    /// ledger `sage localize` uses; entries are keyed by the step rubric's version).
    #[arg(long, value_name = "DIR", env = "SAGE_LEDGER", default_value = sage_judge::llm::ledger::DEFAULT_LEDGER_DIR)]
    pub ledger: PathBuf,
    /// Keep no ledger (nothing written, nothing reused).
    #[arg(long, conflicts_with = "offline")]
    pub no_ledger: bool,
    /// Answer only from the ledger: a step not in it stops the validation (exit 2).
    #[arg(long)]
    pub offline: bool,
    #[command(flatten)]
    pub out: super::OutputArgs,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// Who&When (ICML 2025): `mistake_step` / `mistake_agent` per failed multi-agent log.
    WhoAndWhen,
}

/// Step-level accuracy of the Who&When paper's step-by-step method, GPT-4o with ground truth.
const PAPER_REFERENCE: &str = "Who&When paper, step-by-step, GPT-4o, with ground truth: \
                               step-level accuracy 25.51 % (algorithm-generated), 7.02 % (hand-crafted)";

fn log_files(inputs: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in inputs {
        if p.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(p)
                .with_context(|| format!("reading {}", p.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.is_file() && f.extension().is_some_and(|x| x == "json"))
                .collect();
            found.sort();
            out.extend(found);
        } else if p.is_file() {
            out.push(p.clone());
        } else {
            anyhow::bail!("{}: no such file or folder", p.display());
        }
    }
    Ok(out)
}

fn load(path: &std::path::Path, rules: &sage_adapters::Rules) -> anyhow::Result<Labeled> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {name}"))?;
    let (subset, question, ground_truth, gold) = validate::who_and_when_labels(&text, &name)?;
    let trace = sage_adapters::normalize(
        &[sage_adapters::SourceFile::new(name.clone(), path)],
        &sage_adapters::NormalizeOptions {
            rules: rules.clone(),
            ..sage_adapters::NormalizeOptions::framework(Some("who-and-when"))
        },
    )
    .with_context(|| format!("{name}: not a Who&When log"))?;
    anyhow::ensure!(
        trace.turns.iter().any(|t| validate::step_of(t).is_some()),
        "{name}: no agent step"
    );
    let id = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or(name);
    Ok(Labeled {
        id,
        subset,
        question,
        ground_truth,
        gold,
        trace,
    })
}

fn pct(x: f64) -> String {
    format!("{:.2} %", 100.0 * x)
}

pub fn run(a: Args, rc: &super::RunConfig) -> anyhow::Result<super::ExitStatus> {
    use sage_llm::secrets::scrub;
    anyhow::ensure!(
        (0.0..=1.0).contains(&a.dev_fraction),
        "--dev-fraction must be between 0 and 1"
    );
    let rubric = match &a.rubric {
        Some(p) => {
            let t =
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            StepRubric::parse(&t, &p.display().to_string())?
        }
        None => StepRubric::embedded(),
    };
    // The predictor first: a judge that cannot be built is a usage error before any file.
    let mut concurrency = a
        .concurrency
        .unwrap_or(sage_judge::concurrent::DEFAULT_CONCURRENCY);
    let settings = if a.judge == "baseline:first-agent-step" {
        None
    } else {
        let config = sage_judge::config::Config::discover(a.config.as_deref())?;
        let session = sage_judge::spec::JudgeSession::new(
            &config,
            sage_judge::spec::JudgeOptions {
                no_ledger: true,
                env: super::environment(),
                ..Default::default()
            },
        )?;
        let spec = sage_judge::spec::JudgeSpec::parse(&a.judge)?;
        if let (None, Some(c)) = (a.concurrency, session.preferred_concurrency(&a.judge)) {
            concurrency = c;
        }
        match session.llm_settings(&spec)? {
            Some(s) => Some(s),
            None => anyhow::bail!(
                "--judge {}: validate takes baseline:first-agent-step or an LLM judge",
                a.judge
            ),
        }
    };
    let files = log_files(&a.logs)?;
    let mut failed = 0;
    let mut logs = Vec::new();
    for f in &files {
        match load(f, &rc.rules.adapters) {
            Ok(l) => logs.push(l),
            Err(e) => {
                errln!("sage: skipped {}", scrub(&format!("{e:#}")));
                failed += 1;
            }
        }
    }
    if logs.is_empty() {
        errln!("sage: error: no labelled log among {} file(s)", files.len());
        return Ok(super::EXIT_FATAL);
    }
    let preds: Vec<Prediction> = match &settings {
        None => logs.iter().map(validate::first_agent_step).collect(),
        Some(s) => {
            let s = Arc::new(s.clone());
            let rubric = Arc::new(rubric.clone());
            let sem = Arc::new(tokio::sync::Semaphore::new(concurrency.get()));
            let (gt, attempts) = (a.with_ground_truth, a.max_attempts);
            let calls = Arc::new(validate::Calls {
                ledger: (!a.no_ledger).then(|| sage_judge::llm::ledger::Ledger::new(&a.ledger)),
                offline: a.offline,
            });
            let rt = super::runtime()?;
            let res: Vec<Result<Prediction, sage_judge::JudgeError>> = rt.block_on(async {
                let mut set = tokio::task::JoinSet::new();
                for (i, l) in logs.iter().cloned().enumerate() {
                    let (s, rubric, sem, calls) =
                        (s.clone(), rubric.clone(), sem.clone(), calls.clone());
                    set.spawn(async move {
                        let _permit = sem.acquire_owned().await;
                        (
                            i,
                            validate::step_by_step(&s, &rubric, &l, gt, attempts, &calls).await,
                        )
                    });
                }
                let mut out: Vec<Option<Result<Prediction, _>>> = vec![None; logs.len()];
                while let Some(r) = set.join_next().await {
                    if let Ok((i, p)) = r {
                        out[i] = Some(p);
                    }
                }
                out.into_iter()
                    .map(|p| {
                        p.unwrap_or_else(|| {
                            Err(sage_judge::JudgeError::Fatal(
                                "a judging task failed".into(),
                            ))
                        })
                    })
                    .collect()
            });
            let mut preds = Vec::new();
            for r in res {
                match r {
                    Ok(p) => preds.push(p),
                    Err(e) => {
                        errln!("sage: the run stopped: {}", scrub(&e.to_string()));
                        return Ok(super::EXIT_FATAL);
                    }
                }
            }
            preds
        }
    };
    let splits: Vec<Split> = preds
        .iter()
        .map(|p| validate::split(&p.id, a.seed, a.dev_fraction))
        .collect();
    // rows: (split, subset) → metrics
    let mut rows: Vec<(String, String, Metrics)> = Vec::new();
    let mut subsets: Vec<String> = preds.iter().map(|p| p.subset.clone()).collect();
    subsets.sort();
    subsets.dedup();
    for (sname, want) in [
        ("all", None),
        ("dev", Some(Split::Dev)),
        ("test", Some(Split::Test)),
    ] {
        for sub in std::iter::once(None).chain(subsets.iter().map(Some)) {
            let sel: Vec<&Prediction> = preds
                .iter()
                .zip(&splits)
                .filter(|(p, sp)| {
                    want.is_none_or(|w| **sp == w) && sub.is_none_or(|s| &p.subset == s)
                })
                .map(|(p, _)| p)
                .collect();
            if sel.is_empty() {
                continue;
            }
            rows.push((
                sname.to_string(),
                sub.cloned().unwrap_or_else(|| "all".into()),
                validate::metrics(&sel, a.within),
            ));
        }
    }
    let header = format!(
        "validate who-and-when with {}: {} log(s), rubric {}, seed {} (dev {}, test {})",
        a.judge,
        preds.len(),
        if settings.is_some() {
            rubric.version.as_str()
        } else {
            "none (baseline)"
        },
        a.seed,
        splits.iter().filter(|s| **s == Split::Dev).count(),
        splits.iter().filter(|s| **s == Split::Test).count(),
    );
    a.out.emit(
        || {
            let mut t = comfy_table::Table::new();
            super::width::fit_table(&mut t);
            t.set_header(vec![
                "split".to_string(),
                "subset".into(),
                "logs".into(),
                "step exact".into(),
                format!("step ±{}", a.within),
                "agent".into(),
                "precision".into(),
                "recall".into(),
                "F1".into(),
                "failed steps".into(),
            ]);
            for (sp, sub, m) in &rows {
                t.add_row(vec![
                    sp.clone(),
                    sub.clone(),
                    m.logs.to_string(),
                    pct(m.step_exact),
                    pct(m.step_within),
                    pct(m.agent),
                    format!("{:.3}", m.precision),
                    format!("{:.3}", m.recall),
                    format!("{:.3}", m.f1),
                    m.failures.to_string(),
                ]);
            }
            format!("{header}\n{t}\nreference: {PAPER_REFERENCE}")
        },
        || {
            serde_json::json!({
                "profile": "who-and-when",
                "judge": a.judge,
                "rubric": settings.as_ref().map(|_| rubric.version.clone()),
                "seed": a.seed,
                "dev_fraction": a.dev_fraction,
                "within": a.within,
                "rows": rows.iter().map(|(sp, sub, m)| serde_json::json!({
                    "split": sp, "subset": sub, "metrics": m,
                })).collect::<Vec<_>>(),
                "logs": preds.iter().zip(&splits).map(|(p, sp)| serde_json::json!({
                    "id": p.id, "subset": p.subset, "split": sp, "gold": p.gold,
                    "predicted_step": p.step, "predicted_agent": p.agent,
                    "verdicts": p.verdicts, "failed_steps": p.failures,
                })).collect::<Vec<_>>(),
                "reference": PAPER_REFERENCE,
            })
        },
    )?;
    Ok(if failed > 0 {
        super::EXIT_INPUT_FAILED
    } else {
        super::EXIT_OK
    })
}
