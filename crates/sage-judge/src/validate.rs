//! `sage validate`: a judge's per-step output against human labels.
//!
//! The Who&When profile: every log carries the step (`mistake_step`, a 0-based index into
//! `history`) and the agent (`mistake_agent`) of the decisive error. A judge predicts one
//! step per log; sage reports exact step accuracy, accuracy within ±k steps, agent accuracy,
//! and precision / recall / F1 of the per-step label "is the decisive error", on a seeded
//! dev/test split of the logs.
//!
//! Predictors:
//! - `baseline:first-agent-step`: always the first agent step (a deterministic floor).
//! - an LLM judge, run step by step as in the Who&When paper's step-by-step method: step k is
//!   asked with the query and steps 0..k only (prefix-only), in order, and the first step the
//!   judge calls decisive is the prediction. A "yes" must quote the step verbatim; an answer
//!   that is not valid or whose quote is not in the step is asked again with the reason, up to
//!   the attempt limit, and then counts as a failure (reported), never as a "yes".
//!
//! The labels are read from the log files here and never reach a prompt; the canonical
//! trace (the adapter's) never carries them.

use crate::llm::prompt::{fence, render_turn_body};
use crate::JudgeError;
use sage_llm::LlmSettings;
use sage_trace::{CanonicalTrace, Locator, Turn};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// A validation input that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{origin}: {msg}")]
pub struct ValidateError {
    pub origin: String,
    pub msg: String,
}

/// The human labels of one log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Gold {
    /// History index of the decisive error.
    pub step: usize,
    pub agent: String,
}

/// One labelled log.
#[derive(Debug, Clone)]
pub struct Labeled {
    pub id: String,
    /// `algorithm-generated` or `hand-crafted`.
    pub subset: String,
    pub question: String,
    pub ground_truth: Option<String>,
    pub gold: Gold,
    pub trace: CanonicalTrace,
}

/// The labels and task of a Who&When log (`mistake_step` is a string or a number).
pub fn who_and_when_labels(
    text: &str,
    origin: &str,
) -> Result<(String, String, Option<String>, Gold), ValidateError> {
    let err = |msg: String| ValidateError {
        origin: origin.to_string(),
        msg,
    };
    let v: Value = serde_json::from_str(text).map_err(|e| err(format!("not JSON: {e}")))?;
    let step = match v.get("mistake_step") {
        Some(Value::String(s)) => s.trim().parse::<usize>().ok(),
        Some(Value::Number(n)) => n.as_u64().map(|n| n as usize),
        _ => None,
    }
    .ok_or_else(|| err("no mistake_step (a step number): not a labelled Who&When log".into()))?;
    let agent = v
        .get("mistake_agent")
        .and_then(Value::as_str)
        .ok_or_else(|| err("no mistake_agent".into()))?
        .to_string();
    let history = v
        .get("history")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    if step >= history {
        return Err(err(format!(
            "mistake_step {step} is past the end of history ({history} steps)"
        )));
    }
    let question = v
        .get("question")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let ground_truth = v.get("ground_truth").and_then(|g| match g {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    });
    // the hand-crafted logs spell the key `is_corrected`
    let subset = if v.get("is_corrected").is_some() {
        "hand-crafted"
    } else {
        "algorithm-generated"
    };
    Ok((
        subset.to_string(),
        question,
        ground_truth,
        Gold { step, agent },
    ))
}

/// The history index a canonical turn stands for (its message's `/history/N/...` pointer).
pub fn step_of(turn: &Turn) -> Option<usize> {
    let raw = &turn.message.as_ref()?.raw;
    let Locator::Json { pointer, .. } = &raw.at else {
        return None;
    };
    pointer
        .strip_prefix("/history/")?
        .split('/')
        .next()?
        .parse()
        .ok()
}

/// The agent named by a canonical turn (the Who&When label names agents, not roles).
fn agent_of(turn: &Turn) -> String {
    turn.actor.name.trim().to_string()
}

/// What a predictor said about one log.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prediction {
    pub id: String,
    pub subset: String,
    pub gold: Gold,
    /// The predicted step (history index) and its agent; `None` when no step was called
    /// decisive.
    pub step: Option<usize>,
    pub agent: Option<String>,
    /// Steps the predictor judged (history index, called decisive).
    pub verdicts: Vec<(usize, bool)>,
    /// Steps whose answers were rejected on every attempt.
    pub failures: Vec<usize>,
}

/// The deterministic floor: always the first agent step.
pub fn first_agent_step(l: &Labeled) -> Prediction {
    let first = l
        .trace
        .turns
        .iter()
        .find_map(|t| Some((step_of(t)?, agent_of(t))));
    Prediction {
        id: l.id.clone(),
        subset: l.subset.clone(),
        gold: l.gold.clone(),
        step: first.as_ref().map(|f| f.0),
        agent: first.as_ref().map(|f| f.1.clone()),
        verdicts: first.iter().map(|f| (f.0, true)).collect(),
        failures: Vec::new(),
    }
}

/// Scores of a set of predictions.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Metrics {
    pub logs: usize,
    pub step_exact: f64,
    /// Within ±`within` steps.
    pub step_within: f64,
    pub within: usize,
    pub agent: f64,
    /// Per-step label "is the decisive error" over every step judged or labelled.
    pub tp: usize,
    pub fp: usize,
    pub fn_: usize,
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
    /// Steps whose answers were rejected on every attempt.
    pub failures: usize,
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// Step, agent and per-step label scores. A log with no predicted step counts as wrong on
/// step and agent. The per-step label: a step is a true positive when it is called decisive
/// and is the labelled step; a labelled step never called decisive is a false negative.
pub fn metrics(preds: &[&Prediction], within: usize) -> Metrics {
    let mut m = Metrics {
        logs: preds.len(),
        within,
        ..Default::default()
    };
    let (mut exact, mut near, mut agent) = (0, 0, 0);
    for p in preds {
        if p.step == Some(p.gold.step) {
            exact += 1;
        }
        if p.step.is_some_and(|s| s.abs_diff(p.gold.step) <= within) {
            near += 1;
        }
        if p.agent.as_deref() == Some(p.gold.agent.as_str()) {
            agent += 1;
        }
        let mut found = false;
        for &(s, yes) in &p.verdicts {
            match (yes, s == p.gold.step) {
                (true, true) => {
                    m.tp += 1;
                    found = true;
                }
                (true, false) => m.fp += 1,
                _ => {}
            }
        }
        if !found {
            m.fn_ += 1;
        }
        m.failures += p.failures.len();
    }
    m.step_exact = ratio(exact, preds.len());
    m.step_within = ratio(near, preds.len());
    m.agent = ratio(agent, preds.len());
    m.precision = ratio(m.tp, m.tp + m.fp);
    m.recall = ratio(m.tp, m.tp + m.fn_);
    m.f1 = if m.precision + m.recall > 0.0 {
        2.0 * m.precision * m.recall / (m.precision + m.recall)
    } else {
        0.0
    };
    m
}

/// Which side of the seeded split a log falls on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Split {
    Dev,
    Test,
}

/// Seeded dev/test split: a log is in dev when sha256(seed, id) falls below `dev_fraction`.
/// Decided by the id alone, so adding logs never moves another one.
pub fn split(id: &str, seed: u64, dev_fraction: f64) -> Split {
    let mut h = Sha256::new();
    h.update(b"sage-validate-split/1\0");
    h.update(seed.to_le_bytes());
    h.update(id.as_bytes());
    let d = h.finalize();
    let v = u64::from_be_bytes(d[..8].try_into().expect("8 bytes"));
    if (v as f64 / u64::MAX as f64) < dev_fraction {
        Split::Dev
    } else {
        Split::Test
    }
}

/// The decisive-error rubric (`rubrics/decisive-error.toml`).
#[derive(Debug, Clone, Deserialize)]
pub struct StepRubric {
    pub version: String,
    pub system: String,
    pub instruction: String,
    pub ground_truth: String,
    pub step: String,
}

/// The embedded rubric text.
pub const DECISIVE_ERROR_RUBRIC: &str = include_str!("../rubrics/decisive-error.toml");

impl StepRubric {
    pub fn embedded() -> StepRubric {
        StepRubric::parse(DECISIVE_ERROR_RUBRIC, "rubrics/decisive-error.toml")
            .expect("the embedded rubric parses")
    }

    pub fn parse(text: &str, origin: &str) -> Result<StepRubric, ValidateError> {
        let r: StepRubric = toml::from_str(text).map_err(|e| ValidateError {
            origin: origin.to_string(),
            msg: e.to_string(),
        })?;
        for (name, t, need) in [
            (
                "instruction",
                &r.instruction,
                &["{question}", "{steps}", "{k}"][..],
            ),
            ("step", &r.step, &["{k}", "{body}"][..]),
        ] {
            for n in need {
                if !t.contains(n) {
                    return Err(ValidateError {
                        origin: origin.to_string(),
                        msg: format!("{name} lacks the placeholder {n}"),
                    });
                }
            }
        }
        Ok(r)
    }

    /// The prompt asking about `turns[upto]`: the task and turns 0..=upto, nothing later.
    /// Every text from the log is fenced as data.
    pub fn render(&self, l: &Labeled, upto: usize, with_ground_truth: bool) -> (String, usize) {
        let mut steps = String::new();
        let mut k = 0;
        for t in &l.trace.turns[..=upto] {
            k = step_of(t).unwrap_or(t.index);
            let actor = match &t.actor.role {
                Some(r) => format!("{} ({r})", t.actor.name),
                None => t.actor.name.clone(),
            };
            let actor = actor.split_whitespace().collect::<Vec<_>>().join(" ");
            steps.push_str(
                &self
                    .step
                    .replace("{k}", &k.to_string())
                    .replace("{actor}", &actor)
                    .replace("{body}", &fence(&render_turn_body(t))),
            );
            steps.push('\n');
        }
        let gt = match (&l.ground_truth, with_ground_truth) {
            (Some(a), true) => self.ground_truth.replace("{answer}", &fence(a)),
            _ => String::new(),
        };
        let text = self
            .instruction
            .replace("{question}", &fence(&l.question))
            .replace("{ground_truth}", &gt)
            .replace("{steps}", steps.trim_end())
            .replace("{k}", &k.to_string());
        (text, k)
    }
}

/// The JSON schema of a step verdict.
pub(crate) fn verdict_schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["decisive_error", "quote", "reason"],
        "properties": {
            "decisive_error": {"type": "boolean"},
            "quote": {"type": ["string", "null"]},
            "reason": {"type": "string"},
        },
    })
}

fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Check one answer: `Ok(called decisive)` or why it is rejected.
pub(crate) fn check_verdict(v: &Value, turn: &Turn) -> Result<bool, String> {
    let yes = v
        .get("decisive_error")
        .and_then(Value::as_bool)
        .ok_or("\"decisive_error\" must be true or false")?;
    if !yes {
        return Ok(false);
    }
    let quote = v
        .get("quote")
        .and_then(Value::as_str)
        .filter(|q| !q.trim().is_empty())
        .ok_or("a decisive error needs a verbatim quote from the step")?;
    if squash(&render_turn_body(turn)).contains(&squash(quote)) {
        Ok(true)
    } else {
        Err(format!("the quote {quote:?} is not in the step's text"))
    }
}

/// Where a validation's judge calls are kept: the judges' ledger (`--ledger`), so a re-run
/// pays for no call twice and a validation replays offline exactly as it ran.
#[derive(Debug, Clone, Default)]
pub struct Calls {
    /// The ledger (`None`: `--no-ledger`, nothing kept or reused).
    pub ledger: Option<crate::llm::ledger::Ledger>,
    /// Only answers already in the ledger; a call not in it is a fatal error.
    pub offline: bool,
}

/// Ask about one step: the answer stored under the same request in the ledger, else sent (and
/// stored). The key is the one every judge call uses: backend, model, rubric version, the
/// request body's hash, run 0 and the attempt.
async fn ask(
    s: &LlmSettings,
    rubric: &StepRubric,
    user: &str,
    schema: &Value,
    attempt: u32,
    calls: &Calls,
) -> Result<Value, JudgeError> {
    use crate::llm::ledger::{now_secs, LedgerEntry, LedgerKey, LEDGER_SCHEMA};
    let body = sage_llm::client::json_request(s, &rubric.system, user, Some(schema));
    let key = LedgerKey {
        backend: s.provider.name().to_string(),
        model: s.model.clone(),
        rubric_version: rubric.version.clone(),
        prompt_hash: hex::encode(Sha256::digest(body.as_bytes())),
        run: 0,
        attempt,
    };
    if let Some(e) = calls.ledger.as_ref().and_then(|l| l.get(&key)) {
        if let Ok(a) = sage_llm::client::json_answer(s, e.response) {
            return Ok(a.value);
        }
    }
    if calls.offline {
        return Err(JudgeError::Fatal(format!(
            "{}: offline, and a step of this validation is not in the ledger",
            s.who()
        )));
    }
    let started = std::time::Instant::now();
    let a = sage_llm::client::send_json_request(s, &body).await?;
    if let Some(l) = &calls.ledger {
        let entry = LedgerEntry {
            schema: LEDGER_SCHEMA.into(),
            id: key.id(),
            key,
            source: "api".into(),
            response: a.raw.clone(),
            usage: a.usage,
            cost_usd: s.price.map(|p| p.cost(&a.usage)),
            latency_ms: started.elapsed().as_millis() as u64,
            http_retries: 0,
            recorded_at: now_secs(),
        };
        crate::llm::put_off_thread(l, entry)
            .await
            .map_err(|e| JudgeError::Fatal(format!("cannot record the answer: {e}")))?;
    }
    Ok(a.value)
}

/// Run the step-by-step method with an LLM judge on one log.
pub async fn step_by_step(
    s: &LlmSettings,
    rubric: &StepRubric,
    l: &Labeled,
    with_ground_truth: bool,
    max_attempts: std::num::NonZeroU32,
    calls: &Calls,
) -> Result<Prediction, JudgeError> {
    let mut p = Prediction {
        id: l.id.clone(),
        subset: l.subset.clone(),
        gold: l.gold.clone(),
        step: None,
        agent: None,
        verdicts: Vec::new(),
        failures: Vec::new(),
    };
    let schema = verdict_schema();
    for (i, turn) in l.trace.turns.iter().enumerate() {
        let Some(step) = step_of(turn) else { continue };
        let (user, k) = rubric.render(l, i, with_ground_truth);
        let mut feedback = String::new();
        let mut verdict = None;
        for attempt in 0..max_attempts.get() {
            let text = format!("{user}{feedback}");
            let a = ask(s, rubric, &text, &schema, attempt, calls).await;
            let v = match a {
                Ok(a) => check_verdict(&a, turn),
                Err(JudgeError::Invalid(m)) => Err(m),
                Err(e) => return Err(e),
            };
            match v {
                Ok(yes) => {
                    verdict = Some(yes);
                    break;
                }
                Err(why) => {
                    feedback = format!(
                        "\n\nYour previous answer was rejected: {why}. Answer again about step {k}."
                    )
                }
            }
        }
        match verdict {
            Some(yes) => {
                p.verdicts.push((step, yes));
                if yes {
                    p.step = Some(step);
                    p.agent = Some(agent_of(turn));
                    break;
                }
            }
            None => p.failures.push(step),
        }
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pred(gold: usize, step: Option<usize>, verdicts: &[(usize, bool)]) -> Prediction {
        Prediction {
            id: "x".into(),
            subset: "s".into(),
            gold: Gold {
                step: gold,
                agent: "a".into(),
            },
            step,
            agent: step.map(|s| if s == gold { "a" } else { "b" }.to_string()),
            verdicts: verdicts.to_vec(),
            failures: Vec::new(),
        }
    }

    #[test]
    fn metrics_by_hand() {
        // log 1: exact (verdicts: 0 no, 1 yes, gold 1) → tp 1
        // log 2: off by one (gold 3, predicted 2) → fp 1, fn 1
        // log 3: nothing predicted (gold 0) → fn 1
        let a = pred(1, Some(1), &[(0, false), (1, true)]);
        let b = pred(3, Some(2), &[(0, false), (1, false), (2, true)]);
        let c = pred(0, None, &[(0, false), (1, false)]);
        let m = metrics(&[&a, &b, &c], 1);
        assert_eq!((m.tp, m.fp, m.fn_), (1, 1, 2));
        assert!((m.step_exact - 1.0 / 3.0).abs() < 1e-9);
        assert!((m.step_within - 2.0 / 3.0).abs() < 1e-9);
        assert!((m.agent - 1.0 / 3.0).abs() < 1e-9);
        assert!((m.precision - 0.5).abs() < 1e-9);
        assert!((m.recall - 1.0 / 3.0).abs() < 1e-9);
        assert!((m.f1 - 0.4).abs() < 1e-9);
        assert_eq!(metrics(&[], 1).f1, 0.0);
    }

    #[test]
    fn the_split_is_seeded_and_stable() {
        let ids: Vec<String> = (0..200).map(|i| format!("log-{i}")).collect();
        let dev = |seed| {
            ids.iter()
                .filter(|i| split(i, seed, 0.5) == Split::Dev)
                .count()
        };
        assert_eq!(dev(1), dev(1));
        assert_ne!(
            ids.iter().map(|i| split(i, 1, 0.5)).collect::<Vec<_>>(),
            ids.iter().map(|i| split(i, 2, 0.5)).collect::<Vec<_>>()
        );
        assert!((70..130).contains(&dev(1)), "{}", dev(1));
        assert!(ids.iter().all(|i| split(i, 7, 0.0) == Split::Test));
    }

    #[test]
    fn labels_are_read_and_checked() {
        let (subset, q, gt, g) = who_and_when_labels(
            r#"{"question":"q","ground_truth":"8","is_correct":false,"mistake_step":"1","mistake_agent":"A","history":[{},{}]}"#,
            "f.json",
        )
        .unwrap();
        assert_eq!(
            (subset.as_str(), q.as_str(), gt.as_deref()),
            ("algorithm-generated", "q", Some("8"))
        );
        assert_eq!(
            g,
            Gold {
                step: 1,
                agent: "A".into()
            }
        );
        let e = who_and_when_labels(
            r#"{"mistake_step":"5","mistake_agent":"A","history":[]}"#,
            "f.json",
        )
        .unwrap_err();
        assert!(e.to_string().contains("past the end"), "{e}");
        assert!(who_and_when_labels(r#"{"history":[]}"#, "f.json").is_err());
        StepRubric::embedded();
    }
}
