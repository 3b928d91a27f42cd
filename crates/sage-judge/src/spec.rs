//! `--judge SPEC`: `lexicon`, `openai:MODEL`, `anthropic:MODEL`, or a NAME from `sage.toml`;
//! and the session that builds judges sharing one ledger, budget and set of counters.

use super::concurrent::{ScoreItem, ScoreOptions};
use super::llm::ledger::{Ledger, DEFAULT_LEDGER_DIR};
use super::llm::prompt::Rubric;
use super::llm::{batch, LlmJudge, SessionParts, EXPECTED_OUTPUT_TOKENS};
use super::{Judge, TurnRequest};
use crate::config::Config;
use crate::prefix::PrefixChain;
use sage_llm::cost::{price_for, CostMeter, RunStats};
use sage_llm::http::RetryPolicy;
use sage_llm::{model_family, ApiKey, LlmSettings, Provider};
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// A parsed `--judge` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JudgeSpec {
    Lexicon,
    Llm {
        provider: Provider,
        model: String,
    },
    /// A judge defined under `[judges.NAME]` in `sage.toml`.
    Named(String),
}

/// A judge that cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("--judge {spec:?}: {msg}")]
    Spec { spec: String, msg: String },
    #[error(transparent)]
    Rubric(#[from] super::llm::prompt::RubricError),
    #[error("{0}")]
    Other(String),
}

impl JudgeSpec {
    pub fn parse(s: &str) -> Result<JudgeSpec, SpecError> {
        let bad = |msg: &str| SpecError::Spec {
            spec: s.to_string(),
            msg: msg.to_string(),
        };
        let s = s.trim();
        if s.is_empty() {
            return Err(bad(
                "empty; use lexicon, openai:MODEL, anthropic:MODEL or a name from sage.toml",
            ));
        }
        if s == "lexicon" {
            return Ok(JudgeSpec::Lexicon);
        }
        if let Some((backend, model)) = s.split_once(':') {
            let provider = Provider::parse(backend)
                .ok_or_else(|| bad("unknown backend; use openai:MODEL or anthropic:MODEL"))?;
            if model.trim().is_empty() {
                return Err(bad("the model is missing"));
            }
            return Ok(JudgeSpec::Llm {
                provider,
                model: model.trim().to_string(),
            });
        }
        if s == "openai" || s == "anthropic" {
            return Err(bad("name the model: openai:MODEL or anthropic:MODEL"));
        }
        Ok(JudgeSpec::Named(s.to_string()))
    }
}

/// `--shard i/n`: this machine scores the cases whose id hashes to `i` of `n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// 1-based.
    pub index: u32,
    pub count: u32,
}

impl Shard {
    pub fn parse(s: &str) -> Result<Shard, SpecError> {
        let bad = |m: String| SpecError::Other(m);
        let (i, n) = s
            .split_once('/')
            .ok_or_else(|| bad(format!("--shard {s:?}: expected i/n, e.g. 2/8")))?;
        let (i, n): (u32, u32) = (
            i.trim()
                .parse()
                .map_err(|_| bad(format!("--shard {s:?}: i is not a number")))?,
            n.trim()
                .parse()
                .map_err(|_| bad(format!("--shard {s:?}: n is not a number")))?,
        );
        if n == 0 || i == 0 || i > n {
            return Err(bad(format!("--shard {s:?}: need 1 <= i <= n")));
        }
        Ok(Shard { index: i, count: n })
    }

    /// Stable under adding or removing other cases: decided by the case id alone.
    pub fn includes(&self, case_id: &str) -> bool {
        use sha2::{Digest, Sha256};
        let h = Sha256::digest(case_id.as_bytes());
        let v = u64::from_be_bytes(h[..8].try_into().expect("8 bytes"));
        (v % u64::from(self.count)) as u32 == self.index - 1
    }
}

impl Shard {
    /// The shard key of a case folder: its path relative to the corpus root (the folder name
    /// when the root is the case itself), so every machine splits the same corpus alike.
    pub fn includes_dir(&self, root: &std::path::Path, dir: &std::path::Path) -> bool {
        let rel = dir.strip_prefix(root).unwrap_or(dir);
        let key = if rel.as_os_str().is_empty() {
            dir.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        } else {
            rel.to_string_lossy().replace('\\', "/")
        };
        self.includes(&key)
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// Options shared by every judge of one run (the CLI's judge flags).
#[derive(Debug, Clone)]
pub struct JudgeOptions {
    /// `--runs N`.
    pub runs: std::num::NonZeroU32,
    /// Attempts per turn (first answer + retries with feedback).
    pub max_attempts: std::num::NonZeroU32,
    /// `--budget USD`.
    pub budget_usd: Option<f64>,
    /// `--ledger DIR` (default `.sage/ledger`).
    pub ledger_dir: Option<PathBuf>,
    /// Keep no ledger at all.
    pub no_ledger: bool,
    /// `--offline`: answer only from the ledger; a miss stops the run.
    pub offline: bool,
    /// `--rubric FILE`.
    pub rubric: Option<PathBuf>,
    /// `--batch-import FILE`.
    pub batch_import: Option<PathBuf>,
    /// Per-request timeout.
    pub timeout: Option<Duration>,
    /// `--deadline`: the whole-request deadline of one call, every try and retry included
    /// (default [`sage_llm::http::DEFAULT_DEADLINE`], or the per-try timeout if longer).
    pub deadline: Option<Duration>,
    /// Transport retry policy (tests shorten it).
    pub retry: Option<RetryPolicy>,
    /// `--shard i/n`.
    pub shard: Option<Shard>,
    /// The injection rules (`--injection-rules`, else the embedded ones).
    pub injection: Arc<crate::injection::Rules>,
    /// The environment the CLI read once: API keys, base URLs and a named judge's `*_env`
    /// variables come from here, never from the process.
    pub env: sage_llm::Env,
}

impl Default for JudgeOptions {
    fn default() -> Self {
        JudgeOptions {
            runs: std::num::NonZeroU32::MIN,
            max_attempts: std::num::NonZeroU32::new(3).unwrap(),
            budget_usd: None,
            ledger_dir: None,
            no_ledger: false,
            offline: false,
            rubric: None,
            batch_import: None,
            timeout: None,
            deadline: None,
            retry: None,
            shard: None,
            env: sage_llm::Env::default(),
            injection: Arc::new(crate::injection::Rules::embedded()),
        }
    }
}

/// A built judge: the trait object, plus the LLM judge behind it when it is one (for
/// forecasts and batch export).
#[derive(Clone)]
pub struct BuiltJudge {
    pub judge: Arc<dyn Judge>,
    pub llm: Option<Arc<LlmJudge>>,
}

/// Judges of one run, sharing the rubric, ledger, budget and counters.
pub struct JudgeSession {
    pub options: JudgeOptions,
    pub config: Config,
    pub parts: SessionParts,
}

impl JudgeSession {
    pub fn new(config: &Config, options: JudgeOptions) -> Result<JudgeSession, SpecError> {
        let rubric = match &options.rubric {
            Some(p) => Rubric::from_file(p)?,
            None => Rubric::embedded(),
        };
        let ledger = (!options.no_ledger).then(|| {
            Ledger::new(
                options
                    .ledger_dir
                    .clone()
                    .unwrap_or_else(|| PathBuf::from(DEFAULT_LEDGER_DIR)),
            )
        });
        let imports = match &options.batch_import {
            None => None,
            Some(p) => {
                let text = std::fs::read_to_string(p).map_err(|e| {
                    SpecError::Other(format!("--batch-import {}: {e}", p.display()))
                })?;
                let (map, _) = batch::parse_results(&text, &p.display().to_string())
                    .map_err(|e| SpecError::Other(e.to_string()))?;
                Some(Arc::new(map))
            }
        };
        Ok(JudgeSession {
            parts: SessionParts {
                rubric: Arc::new(rubric),
                ledger,
                stats: Arc::new(RunStats::default()),
                meter: Arc::new(CostMeter::new(options.budget_usd)),
                imports,
                offline: options.offline,
                injection: options.injection.clone(),
                tripped: Arc::default(),
            },
            config: config.clone(),
            options,
        })
    }

    pub fn stats(&self) -> &Arc<RunStats> {
        &self.parts.stats
    }

    /// The scorer's options for this session, with `concurrency` requests in flight.
    pub fn score_options(&self, concurrency: std::num::NonZeroUsize) -> ScoreOptions {
        ScoreOptions {
            concurrency,
            runs: self.options.runs,
            max_attempts: self.options.max_attempts,
            progress: None,
            stats: Some(self.parts.stats.clone()),
            injection: self.options.injection.clone(),
        }
    }

    /// Settings of an LLM judge, from the spec, `sage.toml` and the environment.
    pub fn llm_settings(&self, spec: &JudgeSpec) -> Result<Option<LlmSettings>, SpecError> {
        let mut s = match spec {
            JudgeSpec::Lexicon => return Ok(None),
            JudgeSpec::Llm { provider, model } => {
                LlmSettings::from_env(*provider, model, &self.options.env)
            }
            JudgeSpec::Named(name) => {
                let nj = self.config.judge(name).ok_or_else(|| SpecError::Spec {
                    spec: name.clone(),
                    msg: match &self.config.path {
                        Some(p) => format!(
                            "no such judge; {} and the built-in judges define: {}",
                            p.display(),
                            self.config.judge_names().join(", ")
                        ),
                        None => format!(
                            "not lexicon, openai:MODEL, anthropic:MODEL or a built-in judge ({}), \
                             and no sage.toml defines it",
                            self.config.judge_names().join(", ")
                        ),
                    },
                })?;
                let Some(provider) = Provider::parse(&nj.backend) else {
                    return Ok(None); // lexicon
                };
                let env = |var: &Option<String>| {
                    var.as_deref()
                        .and_then(|v| self.options.env.var(v))
                        .map(|v| v.trim().to_string())
                        .filter(|v| !v.is_empty())
                };
                let model = env(&nj.model_env)
                    .or_else(|| nj.model.clone())
                    .unwrap_or_default();
                let mut s = LlmSettings::from_env(provider, &model, &self.options.env);
                s.name = name.clone();
                if let Some(b) = &nj.base_url {
                    s.base_url = b.clone();
                }
                if let Some(var) = &nj.base_url_env {
                    // Named, so required: never the provider's remote default instead.
                    s.base_url = env(&nj.base_url_env).ok_or_else(|| SpecError::Spec {
                        spec: name.clone(),
                        msg: format!(
                            "{var} is not set: the judge's server is not running{}",
                            nj.setup
                                .as_deref()
                                .map(|h| format!("; start it with: {h}"))
                                .unwrap_or_default()
                        ),
                    })?;
                }
                if let Some(var) = &nj.api_key_env {
                    s.api_key = self.options.env.var(var).and_then(ApiKey::new);
                    s.key_var = var.clone();
                }
                s.key_required = !nj.api_key_optional;
                s.cache_prompt = nj.cache_prompt.unwrap_or(false);
                s.temperature = nj.temperature;
                s.max_tokens = nj.max_tokens;
                if let Some(j) = nj.json_schema {
                    s.json_schema = j;
                }
                if let Some(t) = nj.timeout_secs {
                    s.timeout = Duration::from_secs(t);
                }
                if let Some(r) = nj.max_retries {
                    s.retry.max_retries = r;
                }
                s
            }
        };
        s.price = price_for(&s.model, &self.config.price_table());
        if let (Some(b), None) = (self.options.budget_usd, s.price) {
            // Without a price every call costs "0" and the budget would never stop anything.
            return Err(SpecError::Spec {
                spec: spec_name(spec),
                msg: format!(
                    "--budget ${b} cannot be enforced: no price is known for model {:?}; \
                     add it under [prices.\"{}\"] in sage.toml (USD per million tokens) or drop --budget",
                    s.model, s.model
                ),
            });
        }
        if let Some(t) = self.options.timeout {
            s.timeout = t;
        }
        if let Some(r) = self.options.retry {
            s.retry = r;
        }
        s.retry.deadline = match self.options.deadline {
            Some(d) => d,
            None => s.retry.deadline.max(s.timeout),
        };
        Ok(Some(s))
    }

    /// The context budget of a judge: `context_tokens` of a named judge, else the model's
    /// entry under `[context_windows]` or in the embedded table.
    pub fn context_tokens(&self, spec: &JudgeSpec, model: &str) -> u64 {
        if let JudgeSpec::Named(name) = spec {
            if let Some(t) = self.config.judge(name).and_then(|j| j.context_tokens) {
                return t;
            }
        }
        crate::config::default_context_tokens(model, &self.config.context_windows)
    }

    /// The requests in flight a named judge asks for when `--concurrency` is not given
    /// (`concurrency` in its `[judges.NAME]`; a one-slot local server wants 1).
    pub fn preferred_concurrency(&self, spec: &str) -> Option<std::num::NonZeroUsize> {
        match JudgeSpec::parse(spec).ok()? {
            JudgeSpec::Named(name) => {
                std::num::NonZeroUsize::new(self.config.judge(&name)?.concurrency?)
            }
            _ => None,
        }
    }

    /// Build the judge named by `spec`.
    pub fn build(&self, spec: &str) -> Result<BuiltJudge, SpecError> {
        let parsed = JudgeSpec::parse(spec)?;
        match self.llm_settings(&parsed)? {
            Some(s) => {
                let context = self.context_tokens(&parsed, &s.model);
                let mut j = LlmJudge::new(s, self.parts.clone())
                    .map_err(|e| SpecError::Other(e.to_string()))?;
                j.set_context_tokens(context);
                if let JudgeSpec::Named(name) = &parsed {
                    if let Some(nj) = self.config.judge(name) {
                        j.set_answer_limits(nj.quote_choices, nj.rationale_max_chars);
                    }
                }
                let j = Arc::new(j);
                Ok(BuiltJudge {
                    judge: j.clone(),
                    llm: Some(j),
                })
            }
            None => Ok(BuiltJudge {
                judge: lexicon_judge()?,
                llm: None,
            }),
        }
    }

    /// What the run will cost before it starts: calls not yet in the ledger, their prompt
    /// tokens (estimated) and price, per judge.
    pub fn forecast(&self, judges: &[BuiltJudge], items: &[ScoreItem<'_>]) -> Forecast {
        let runs = self.options.runs;
        let mut out = Forecast::default();
        for j in judges {
            let Some(llm) = &j.llm else { continue };
            let mut f = JudgeForecast {
                judge: llm.settings().who(),
                ..Default::default()
            };
            // One chain per trace: the prompt hash and the digest lines are computed once per
            // trace, as the live run does, so forecasting stays linear in the trace.
            let chains: Vec<PrefixChain> = items
                .iter()
                .map(|i| PrefixChain::new(i.task, &i.trace.turns))
                .collect();
            let turns: Vec<(usize, usize)> = items
                .iter()
                .enumerate()
                .flat_map(|(ii, i)| {
                    (1..=i.trace.turns.len())
                        .filter(|&k| i.trace.turns[k - 1].is_applicable())
                        .map(move |k| (ii, k))
                })
                .collect();
            let probes = on_every_core(&turns, |&(ii, k)| {
                let item = &items[ii];
                let req = TurnRequest::prefix(item.task, item.trace, k)?.with_chain(&chains[ii]);
                llm.probe(&req, runs).ok()
            });
            // Summed in turn order, so the forecast is the same however the work was shared.
            for p in probes {
                f.turns += u64::from(runs.get());
                let Some(p) = p else {
                    f.overflow += u64::from(runs.get());
                    continue;
                };
                f.in_ledger += u64::from(p.stored);
                let new = u64::from(runs.get() - p.stored);
                f.new_calls += new;
                f.prompt_tokens += new * (p.body_len as u64).div_ceil(4);
                match llm.estimate_cost(p.body_len) {
                    Some(c) => f.cost_usd += c * new as f64,
                    None if new > 0 => f.unpriced = true,
                    None => {}
                }
            }
            f.output_tokens = f.new_calls * EXPECTED_OUTPUT_TOKENS;
            out.judges.push(f);
        }
        out.budget_usd = self.options.budget_usd;
        out
    }
}

/// `f` of every element of `xs`, in order, computed on every core (building a request is CPU
/// work: the forecast builds every request of the run once).
fn on_every_core<X: Sync, Y: Send>(xs: &[X], f: impl Fn(&X) -> Y + Sync) -> Vec<Y> {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    if cores < 2 || xs.len() < 2 {
        return xs.iter().map(f).collect();
    }
    // Interleaved shares: a trace's later (longer) requests are spread over every thread.
    let f = &f;
    let mut shares: Vec<Vec<(usize, Y)>> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..cores)
            .map(|c| {
                scope.spawn(move || {
                    xs.iter()
                        .enumerate()
                        .skip(c)
                        .step_by(cores)
                        .map(|(i, x)| (i, f(x)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    let mut all: Vec<(usize, Y)> = shares.drain(..).flatten().collect();
    all.sort_by_key(|(i, _)| *i);
    all.into_iter().map(|(_, y)| y).collect()
}

fn spec_name(spec: &JudgeSpec) -> String {
    match spec {
        JudgeSpec::Lexicon => "lexicon".into(),
        JudgeSpec::Llm { provider, model } => format!("{}:{model}", provider.name()),
        JudgeSpec::Named(n) => n.clone(),
    }
}

/// The lexicon judge (embedded lexicon), built by its own module.
fn lexicon_judge() -> Result<Arc<dyn Judge>, SpecError> {
    Ok(Arc::new(super::lexicon::LexiconJudge::embedded()))
}

/// Warnings for cases whose trace was produced by a model of the judge's family.
pub fn family_warnings(judges: &[BuiltJudge], cases: &[(&str, Option<&str>)]) -> Vec<String> {
    let mut out = Vec::new();
    for j in judges {
        let Some(llm) = &j.llm else { continue };
        let Some(jf) = model_family(&llm.settings().model) else {
            continue;
        };
        let same: Vec<&str> = cases
            .iter()
            .filter(|(_, bm)| bm.and_then(model_family) == Some(jf))
            .map(|(id, _)| *id)
            .collect();
        if !same.is_empty() {
            let shown: Vec<&str> = same.iter().take(5).copied().collect();
            out.push(format!(
                "warning: judge {} is of the {jf} family, like the base model of {} case(s) ({}{}); \
                 the paper scores with a judge outside the evaluated base-model set",
                llm.settings().who(),
                same.len(),
                shown.join(", "),
                if same.len() > 5 { ", ..." } else { "" }
            ));
        }
    }
    out
}

/// One judge's forecast.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JudgeForecast {
    pub judge: String,
    /// Applicable turns × runs.
    pub turns: u64,
    pub in_ledger: u64,
    pub new_calls: u64,
    pub prompt_tokens: u64,
    pub output_tokens: u64,
    /// Upper bound: every prompt token at the uncached price, first attempts only.
    pub cost_usd: f64,
    /// Turn-runs that cannot fit the judge's context budget (never sent).
    pub overflow: u64,
    pub unpriced: bool,
}

/// The forecast printed before a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Forecast {
    pub judges: Vec<JudgeForecast>,
    pub budget_usd: Option<f64>,
}

impl Forecast {
    pub(crate) fn total_cost(&self) -> f64 {
        self.judges.iter().map(|j| j.cost_usd).sum()
    }
}

impl fmt::Display for Forecast {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for j in &self.judges {
            write!(
                f,
                "forecast {}: {} turn-runs, {} in the ledger, {} new calls, ~{} prompt + ~{} output tokens, ",
                j.judge, j.turns, j.in_ledger, j.new_calls, j.prompt_tokens, j.output_tokens
            )?;
            if j.overflow > 0 {
                write!(
                    f,
                    "{} context-overflow (cannot fit the context budget), ",
                    j.overflow
                )?;
            }
            if j.unpriced {
                writeln!(
                    f,
                    "cost unknown (no price for this model; add one under [prices] in sage.toml)"
                )?;
            } else {
                writeln!(
                    f,
                    "at most ~${:.4} before prefix caching and retries",
                    j.cost_usd
                )?;
            }
        }
        if let Some(b) = self.budget_usd {
            write!(f, "budget: ${b:.4}")?;
            if self.total_cost() > b {
                write!(f, " (the forecast exceeds it: the run will stop when it is reached and can be resumed)")?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse() {
        assert_eq!(JudgeSpec::parse("lexicon").unwrap(), JudgeSpec::Lexicon);
        assert_eq!(
            JudgeSpec::parse("openai:gpt-4o").unwrap(),
            JudgeSpec::Llm {
                provider: Provider::OpenAi,
                model: "gpt-4o".into()
            }
        );
        assert_eq!(
            JudgeSpec::parse("anthropic:claude-sonnet-4-5").unwrap(),
            JudgeSpec::Llm {
                provider: Provider::Anthropic,
                model: "claude-sonnet-4-5".into()
            }
        );
        assert_eq!(
            JudgeSpec::parse("gpt").unwrap(),
            JudgeSpec::Named("gpt".into())
        );
        assert!(JudgeSpec::parse("gemini:x").is_err());
        assert!(JudgeSpec::parse("openai:").is_err());
        assert!(JudgeSpec::parse("openai").is_err());
    }

    #[test]
    fn unknown_named_judge_lists_the_known_ones() {
        let c =
            Config::parse("[judges.a]\nbackend=\"openai\"\nmodel=\"m\"\n", "sage.toml").unwrap();
        let s = JudgeSession::new(
            &c,
            JudgeOptions {
                no_ledger: true,
                ..Default::default()
            },
        )
        .unwrap();
        let e = s.build("b").err().unwrap().to_string();
        assert!(e.contains("define: a, local"), "{e}");
        let j = s.build("a").unwrap();
        assert_eq!(j.judge.id().name, "a");
        assert_eq!(j.judge.id().model, "m");
    }

    #[test]
    fn shards_partition_the_cases() {
        assert!(Shard::parse("0/3").is_err() && Shard::parse("4/3").is_err());
        let shards: Vec<Shard> = (1..=3)
            .map(|i| Shard::parse(&format!("{i}/3")).unwrap())
            .collect();
        for id in ["a", "b", "case-17", "x/y"] {
            assert_eq!(shards.iter().filter(|s| s.includes(id)).count(), 1);
        }
    }
}
