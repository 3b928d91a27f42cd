//! LLM judges: OpenAI-compatible Chat Completions and the Anthropic Messages API behind the
//! [`Judge`] trait.
//!
//! One call = render the prefix request in the cache-friendly layout ([`prompt`]), build the
//! provider's body, hash exactly those bytes (the score's `prompt_hash`), look the call up in
//! the [`ledger`] (then in an imported batch result), and only then send it, within the
//! budget, through the retrying [`http`] transport. The answer is stored before it is parsed,
//! so a replay parses the very same bytes.

pub mod batch;
pub mod choices;
pub mod digest;
pub mod ledger;
pub mod prompt;

use crate::{CallInfo, Judge, JudgeAnswer, JudgeError, JudgeId, Judgment, TurnRequest};
use futures::future::BoxFuture;
use ledger::{Ledger, LedgerEntry, LedgerKey, LEDGER_SCHEMA};
use prompt::Rubric;
use sage_llm::cost::{CostMeter, RunStats, Usage};
use sage_llm::http::Transport;
use sage_llm::secrets::scrubbed;
use sage_llm::{Answer, LlmSettings, Output, Provider};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// A provider response reduced to what the judge uses.
#[derive(Debug, Clone)]
pub struct ParsedResponse {
    pub judgment: Result<Judgment, String>,
    pub usage: Usage,
}

/// The tool (Anthropic) or schema (OpenAI) name the judgment is requested under.
fn output_name(p: Provider) -> &'static str {
    match p {
        Provider::OpenAi => "sage_turn_score",
        Provider::Anthropic => "record_turn_score",
    }
}

/// The judgment in a completion's answer: a forced tool call's input, or strict text.
pub(crate) fn judgment_from_answer(a: Answer) -> Result<Judgment, String> {
    match a {
        Answer::Json(v) => judgment_from_value(v),
        Answer::Text(t) => parse_judgment_text(&t),
    }
}

/// The JSON schema of a judgment (OpenAI strict mode: every property required, no extras),
/// optionally with each quote one of `choices` (turn k's own sentences,
/// [`choices::quote_choices`]) or null, and each rationale at most `rationale_max` characters.
/// With no choice at all, every score is 0: nothing could be quoted for it.
pub(crate) fn judgment_schema_with(
    choices: Option<&[String]>,
    rationale_max: Option<u32>,
) -> Value {
    let quote = match choices {
        None => {
            json!({"type": ["string", "null"], "description": "verbatim from the scored turn; null when score is 0"})
        }
        Some(c) => {
            let mut one_of: Vec<Value> = c.iter().map(|q| json!(q)).collect();
            one_of.push(Value::Null);
            json!({"enum": one_of, "description": "one sentence of the scored turn, verbatim; null when score is 0"})
        }
    };
    let scores = match choices {
        Some([]) => json!([0]),
        _ => json!([0, 1, 2, 3]),
    };
    let mut rationale = json!({"type": "string"});
    if let Some(m) = rationale_max {
        rationale["maxLength"] = json!(m);
    }
    let dim = json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["score", "quote", "rationale"],
        "properties": {
            "score": {"type": "integer", "enum": scores},
            "quote": quote,
            "rationale": rationale,
        },
    });
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["applicable", "security_opportunity", "TR", "DI", "VR", "SA"],
        "properties": {
            "applicable": {"type": "boolean"},
            "security_opportunity": {"type": "boolean"},
            "TR": dim, "DI": dim, "VR": dim, "SA": dim,
        },
    })
}

/// Strict parsing of a judgment given as text: one JSON object, optionally inside a single
/// markdown code fence, nothing else. Unparseable output is an error, never a score of 0.
pub(crate) fn parse_judgment_text(text: &str) -> Result<Judgment, String> {
    let mut t = text.trim();
    if let Some(rest) = t.strip_prefix("```") {
        let rest = rest.strip_prefix("json").unwrap_or(rest);
        t = rest
            .trim()
            .strip_suffix("```")
            .ok_or("the answer opens a code fence and never closes it")?
            .trim();
    }
    let v: Value = serde_json::from_str(t).map_err(|e| {
        format!("the answer is not one JSON object ({e}); reply with the JSON object only")
    })?;
    judgment_from_value(v)
}

/// Check and convert a JSON value to a judgment, naming what is wrong.
pub(crate) fn judgment_from_value(v: Value) -> Result<Judgment, String> {
    let o = v.as_object().ok_or("the answer is not a JSON object")?;
    for k in ["applicable", "security_opportunity"] {
        if !o.get(k).is_some_and(Value::is_boolean) {
            return Err(format!("\"{k}\" must be true or false"));
        }
    }
    for d in ["TR", "DI", "VR", "SA"] {
        let s = o
            .get(d)
            .and_then(|x| x.get("score"))
            .ok_or_else(|| format!("\"{d}\" must be an object with a \"score\""))?;
        if s.as_u64().is_none_or(|n| n > 3) {
            return Err(format!("\"{d}\".score must be an integer 0-3, got {s}"));
        }
    }
    serde_json::from_value(v).map_err(|e| format!("the answer does not match the schema: {e}"))
}

/// Whether a refusal says the request is longer than the model's context window (HTTP 413,
/// or the providers' wording for it on a 400).
fn too_long(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    [
        "http 413",
        "context_length_exceeded",
        "maximum context length",
        "context window",
        "prompt is too long",
        "too many tokens",
    ]
    .iter()
    .any(|p| m.contains(p))
}

/// Batch results loaded by `--batch-import`: ledger id (`custom_id`) → raw response body.
pub type BatchResults = HashMap<String, Vec<u8>>;

/// The answer to a lookup that sends nothing.
#[allow(clippy::large_enum_variant)] // short-lived, never stored in bulk
pub enum Lookup {
    /// Found in the ledger or an imported batch.
    Stored(Result<JudgeAnswer, JudgeError>),
    /// Not found: this body would have to be sent; `id` is its ledger id / batch custom_id.
    Miss {
        id: String,
        key: LedgerKey,
        body: Vec<u8>,
        context: Option<crate::ContextUse>,
    },
}

/// Shared pieces every judge of one session uses.
#[derive(Debug, Clone)]
pub struct SessionParts {
    pub rubric: Arc<Rubric>,
    pub ledger: Option<Ledger>,
    pub stats: Arc<RunStats>,
    pub meter: Arc<CostMeter>,
    pub imports: Option<Arc<BatchResults>>,
    /// Never call the API: a ledger miss stops the run.
    pub offline: bool,
    /// The injection rules of the run (`--injection-rules`, else the embedded ones): a
    /// flagged sentence is never offered as a quote choice.
    pub injection: Arc<crate::injection::Rules>,
    /// The first fatal error of the session: once set, no judge sends another request (a
    /// refused key must not be retried once per case).
    pub tripped: Arc<std::sync::Mutex<Option<JudgeError>>>,
}

impl Default for SessionParts {
    fn default() -> Self {
        SessionParts {
            rubric: Arc::new(Rubric::embedded()),
            ledger: None,
            stats: Arc::default(),
            meter: Arc::new(CostMeter::new(None)),
            imports: None,
            offline: false,
            injection: Arc::new(crate::injection::Rules::embedded()),
            tripped: Arc::default(),
        }
    }
}

/// An LLM judge (either provider).
pub struct LlmJudge {
    s: LlmSettings,
    parts: SessionParts,
    transport: Transport,
    /// The parsed request URL.
    url: url::Url,
    /// Cleared when an OpenAI-compatible server refuses `json_schema`.
    schema_ok: AtomicBool,
    successes: AtomicU64,
    refusals: AtomicU64,
    /// Tokens one request may fill (prompt and output), as sage estimates them.
    context_tokens: u64,
    /// Offer at most this many of turn k's sentences as the only quotes ([`choices`]).
    quote_choices: Option<usize>,
    /// Cap each rationale at this many characters in the schema.
    rationale_max_chars: Option<u32>,
}

impl std::fmt::Debug for LlmJudge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmJudge")
            .field("settings", &self.s)
            .finish_non_exhaustive()
    }
}

/// Output tokens assumed for a forecast or a budget reservation.
pub const EXPECTED_OUTPUT_TOKENS: u64 = 400;

/// Output tokens kept free in the context budget when the judge sets no `max_tokens`.
pub const DEFAULT_OUTPUT_ALLOWANCE: u32 = 2048;

/// What the forecast learns of one turn's first attempt, sending nothing.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Probe {
    /// Runs whose first attempt the ledger (or an imported batch) already answers.
    pub stored: u32,
    /// The exact request body's length in bytes.
    pub body_len: usize,
}

/// A request ready to send.
#[derive(Debug, Clone)]
pub struct BuiltRequest {
    pub body: Vec<u8>,
    /// sha256 (hex) of `body`: the score's `prompt_hash`.
    pub hash: String,
    /// How the prefix was fitted (`None`: every turn whole).
    pub context: Option<crate::ContextUse>,
}

impl LlmJudge {
    pub fn new(s: LlmSettings, parts: SessionParts) -> Result<LlmJudge, JudgeError> {
        // The key and the base URL's credentials are scrubbed from everything sage writes.
        let url = s
            .endpoint_url()
            .map_err(|m| JudgeError::Fatal(format!("{}: {m}", s.who())))?;
        let transport = Transport::new(
            s.timeout,
            s.retry,
            parts.stats.clone(),
            s.secrets(),
            s.max_reply_bytes,
        )?;
        Ok(LlmJudge {
            context_tokens: crate::config::default_context_tokens(&s.model, &Default::default()),
            schema_ok: AtomicBool::new(s.json_schema),
            s,
            parts,
            transport,
            url,
            successes: AtomicU64::new(0),
            refusals: AtomicU64::new(0),
            quote_choices: None,
            rationale_max_chars: None,
        })
    }

    /// Constrain answers for a server that enforces the schema with a grammar (a small local
    /// model): quotes chosen from at most `quote_choices` of turn k's sentences, rationales
    /// capped at `rationale_max_chars` characters (`quote_choices` and `rationale_max_chars`
    /// of a named judge).
    pub fn set_answer_limits(
        &mut self,
        quote_choices: Option<usize>,
        rationale_max_chars: Option<u32>,
    ) {
        self.quote_choices = quote_choices;
        self.rationale_max_chars = rationale_max_chars;
    }

    pub fn settings(&self) -> &LlmSettings {
        &self.s
    }

    pub fn stats(&self) -> &Arc<RunStats> {
        &self.parts.stats
    }

    /// The judge's context budget: tokens one request may fill, prompt and output.
    pub fn context_tokens(&self) -> u64 {
        self.context_tokens
    }

    /// Set the context budget (`context_tokens` in `sage.toml`, or the model's default).
    pub fn set_context_tokens(&mut self, tokens: u64) {
        self.context_tokens = tokens;
    }

    /// Tokens a prompt may use: the context budget less the output allowance
    /// (`max_tokens`, or 2,048 when unset).
    pub fn prompt_budget(&self) -> u64 {
        let out = u64::from(self.s.max_tokens.unwrap_or(DEFAULT_OUTPUT_ALLOWANCE));
        self.context_tokens.saturating_sub(out)
    }

    fn output(&self, req: &TurnRequest<'_>) -> Output {
        if self.s.provider == Provider::OpenAi && !self.schema_ok.load(Ordering::Relaxed) {
            Output::JsonObject
        } else {
            let choices = self
                .quote_choices
                .map(|n| choices::quote_choices(req, n, &self.parts.injection));
            Output::Schema {
                name: output_name(self.s.provider).into(),
                description: "Record the SAGE scores of the turn being scored.".into(),
                schema: judgment_schema_with(choices.as_deref(), self.rationale_max_chars),
            }
        }
    }

    fn body_of(&self, r: &prompt::RenderedPrompt, out: &Output) -> Vec<u8> {
        let v = sage_llm::request_body(&self.s, &r.to_prompt(), out);
        // A secret the trace happens to hold (an agent that printed its environment) is
        // not sent to the provider either; the hash is of what is sent.
        let body = serde_json::to_string(&v).expect("a JSON value serializes");
        scrubbed(body).into_bytes()
    }

    /// The exact request for `req`, fitted into the context budget ([`digest`]): its body,
    /// the body's sha256, and which turns are whole or digested. A turn that cannot fit is
    /// [`JudgeError::ContextOverflow`].
    pub(crate) fn build_request(&self, req: &TurnRequest<'_>) -> Result<BuiltRequest, JudgeError> {
        let out = self.output(req);
        // `fit` measures its chosen prompt last, so the last body measured is the one to send.
        let last = std::cell::RefCell::new(Vec::new());
        let measure = |r: &prompt::RenderedPrompt| {
            let body = self.body_of(r, &out);
            let n = (body.len() as u64).div_ceil(4);
            *last.borrow_mut() = body;
            n
        };
        let fitted = digest::fit(&self.parts.rubric, req, self.prompt_budget(), &measure)?;
        let body = last.into_inner();
        let hash = hex::encode(Sha256::digest(&body));
        Ok(BuiltRequest {
            body,
            hash,
            context: fitted.context,
        })
    }

    /// The exact request body for `req` and its sha256 (see [`LlmJudge::build_request`]).
    pub fn request_body(&self, req: &TurnRequest<'_>) -> Result<(Vec<u8>, String), JudgeError> {
        self.build_request(req).map(|b| (b.body, b.hash))
    }

    /// The checks that must not wait for the first case: the key is set, the server answers,
    /// the key is accepted and the model is known (`GET` of the model list or the model, which
    /// costs nothing). A failure is fatal and trips the session, so it is reported once,
    /// before the forecast. A server without a model list is not an error: its model is then
    /// checked by the first request.
    pub async fn preflight(&self) -> Result<(), JudgeError> {
        let who = self.s.who();
        let headers = sage_llm::auth(&self.s).map_err(|m| {
            JudgeError::Fatal(format!(
                "{m}; set it, or pass --offline to answer from the ledger only"
            ))
        })?;
        let url =
            sage_llm::models_url(&self.s).map_err(|m| JudgeError::Fatal(format!("{who}: {m}")))?;
        let res = self
            .transport
            .get(&url, &headers, &who, &self.s.key_var)
            .await;
        // the lookup URL as it may be shown (no credentials, no query values)
        let url = sage_llm::secrets::display_url(&url);
        let fatal = match res {
            Ok(ok) => match (self.s.provider, sage_llm::model_listed(&ok.body, &self.s.model)) {
                (Provider::OpenAi, Some(false)) => Some(format!(
                    "{who}: unknown model: {url} does not list {:?}; check the model name and the base URL",
                    self.s.model
                )),
                _ => None,
            },
            // An OpenAI-compatible server without a model list: nothing to check here.
            Err(sage_llm::LlmError::Fatal(m))
                if self.s.provider == Provider::OpenAi && m.contains("HTTP 404") =>
            {
                None
            }
            Err(sage_llm::LlmError::Fatal(m)) => Some(m),
            Err(sage_llm::LlmError::Transient(m)) => {
                Some(format!("{who}: the server cannot be reached: {m}"))
            }
            Err(_) => None,
        };
        match fatal {
            None => Ok(()),
            Some(m) => {
                let e = JudgeError::Fatal(m);
                if let Ok(mut t) = self.parts.tripped.lock() {
                    t.get_or_insert(e.clone());
                }
                Err(e)
            }
        }
    }

    /// The request URL as it may be shown (no credentials, no query values).
    pub fn endpoint(&self) -> String {
        sage_llm::secrets::display_url(&self.url)
    }

    pub fn ledger_key(&self, prompt_hash: &str, call: CallInfo) -> LedgerKey {
        LedgerKey {
            backend: self.s.provider.name().to_string(),
            model: self.s.model.clone(),
            rubric_version: self.parts.rubric.version.clone(),
            prompt_hash: prompt_hash.to_string(),
            run: call.run,
            attempt: call.attempt,
        }
    }

    /// Parse a response body, scrubbed of secrets first: what is stored, replayed and
    /// parsed is the same text, and a judge that echoes the key (in its id, a rationale, a
    /// quote) gets it into no result.
    fn parse(&self, bytes: &[u8]) -> Result<ParsedResponse, String> {
        let text = scrubbed(String::from_utf8_lossy(bytes));
        let c = sage_llm::parse_response(self.s.provider, text.as_bytes()).map_err(|e| e.0)?;
        Ok(ParsedResponse {
            judgment: c.answer.and_then(judgment_from_answer),
            usage: c.usage,
        })
    }

    fn answer(
        &self,
        p: ParsedResponse,
        hash: String,
        context: Option<crate::ContextUse>,
    ) -> Result<JudgeAnswer, JudgeError> {
        p.judgment
            .map(|judgment| JudgeAnswer {
                judgment,
                prompt_hash: Some(hash),
                context,
            })
            .map_err(JudgeError::Invalid)
    }

    /// The estimated cost of sending `body` (prompt at the uncached price).
    pub(crate) fn estimate_cost(&self, body_len: usize) -> Option<f64> {
        self.s.price.map(|p| {
            p.cost(&Usage {
                input_tokens: (body_len as u64).div_ceil(4),
                output_tokens: EXPECTED_OUTPUT_TOKENS,
                ..Default::default()
            })
        })
    }

    /// Whether the call is already answered (ledger or imported batch), and the size of its
    /// request body; no side effects. `Err` for a turn that overflows the context budget.
    pub(crate) fn probe(
        &self,
        req: &TurnRequest<'_>,
        runs: std::num::NonZeroU32,
    ) -> Result<Probe, JudgeError> {
        // The body is the same for every run (the run is only in the ledger key): built once.
        let (body, hash) = self.request_body(req)?;
        let stored = (0..runs.get())
            .filter(|&run| {
                let key = self.ledger_key(&hash, CallInfo { run, attempt: 1 });
                self.parts.ledger.as_ref().is_some_and(|l| l.contains(&key))
                    || self
                        .parts
                        .imports
                        .as_ref()
                        .is_some_and(|m| m.contains_key(&key.id()))
            })
            .count() as u32;
        Ok(Probe {
            stored,
            body_len: body.len(),
        })
    }

    /// Look the call up in the ledger and in imported batch results, sending nothing.
    pub fn lookup(&self, req: &TurnRequest<'_>, call: CallInfo) -> Lookup {
        let BuiltRequest {
            body,
            hash,
            context,
        } = match self.build_request(req) {
            Ok(b) => b,
            Err(e) => return Lookup::Stored(Err(e)),
        };
        let key = self.ledger_key(&hash, call);
        if let Some(l) = &self.parts.ledger {
            if let Some(e) = l.get(&key) {
                if let Ok(p) = self.parse(e.response.as_bytes()) {
                    self.parts.stats.ledger_hits.fetch_add(1, Ordering::Relaxed);
                    return Lookup::Stored(self.answer(p, hash, context));
                }
            }
        }
        let id = key.id();
        if let Some(bytes) = self.parts.imports.as_ref().and_then(|m| m.get(&id)) {
            if let Ok((p, entry)) = self.batch_entry(key.clone(), bytes) {
                self.parts.stats.batch_hits.fetch_add(1, Ordering::Relaxed);
                if let Some(l) = &self.parts.ledger {
                    if let Err(e) = l.put(&entry) {
                        return Lookup::Stored(Err(JudgeError::Fatal(e.to_string())));
                    }
                }
                return Lookup::Stored(self.answer(p, hash, context));
            }
        }
        Lookup::Miss {
            id,
            key,
            body,
            context,
        }
    }

    /// The ledger entry of a batch answer to the call `key`: the body is scrubbed and parsed
    /// exactly as a live answer is (`Err` for an envelope that holds no answer at all, which
    /// is never stored, as online). The cost is the batch price, half the live one.
    pub(crate) fn batch_entry(
        &self,
        key: LedgerKey,
        bytes: &[u8],
    ) -> Result<(ParsedResponse, LedgerEntry), String> {
        let p = self.parse(bytes)?;
        let entry = LedgerEntry {
            schema: LEDGER_SCHEMA.into(),
            id: key.id(),
            key,
            source: "batch".into(),
            response: scrubbed(String::from_utf8_lossy(bytes)),
            usage: p.usage,
            cost_usd: self
                .s
                .price
                .map(|pr| pr.cost(&p.usage) * sage_llm::batch::BATCH_PRICE_FACTOR),
            latency_ms: 0,
            http_retries: 0,
            recorded_at: ledger::now_secs(),
        };
        Ok((p, entry))
    }

    /// The session's ledger (batch records live in it).
    pub fn ledger(&self) -> Option<&Ledger> {
        self.parts.ledger.as_ref()
    }

    async fn call(&self, req: &TurnRequest<'_>, call: CallInfo) -> Result<JudgeAnswer, JudgeError> {
        // At most two rounds: the second only after the server refused json_schema.
        for _ in 0..2 {
            let (id, key, body, context) = match self.lookup(req, call) {
                Lookup::Stored(a) => return a,
                Lookup::Miss {
                    id,
                    key,
                    body,
                    context,
                } => (id, key, body, context),
            };
            match self.send(req, call, id, key, body, context).await {
                Err(JudgeError::Invalid(m))
                    if self.s.provider == Provider::OpenAi
                        && self.schema_ok.load(Ordering::Relaxed)
                        && (m.contains("response_format") || m.contains("json_schema")) =>
                {
                    // The server lacks structured outputs: fall back to strict parsing.
                    self.parts.stats.warn(format!(
                        "{} refused response_format json_schema; using json_object and strict parsing",
                        self.s.who()
                    ));
                    self.schema_ok.store(false, Ordering::Relaxed);
                }
                other => return other,
            }
        }
        Err(JudgeError::Invalid(format!(
            "{}: the server refused both structured-output modes",
            self.s.who()
        )))
    }

    async fn send(
        &self,
        req: &TurnRequest<'_>,
        call: CallInfo,
        id: String,
        ledger_key: LedgerKey,
        body: Vec<u8>,
        context: Option<crate::ContextUse>,
    ) -> Result<JudgeAnswer, JudgeError> {
        let who = self.s.who();
        if self.parts.offline {
            return Err(JudgeError::Fatal(format!(
                "{who}: offline, and turn {} (run {}, attempt {}) is not in the ledger",
                req.k(),
                call.run,
                call.attempt
            )));
        }
        if let Some(e) = self.parts.tripped.lock().ok().and_then(|t| t.clone()) {
            return Err(e);
        }
        let headers = sage_llm::auth(&self.s)
            .map_err(|m| JudgeError::Fatal(format!("{m} (needed for calls not in the ledger)")))?;
        let estimate = self.estimate_cost(body.len()).unwrap_or(0.0);
        // A 200 whose body is not an answer envelope at all (empty, an HTML error page,
        // garbage from a proxy) is a transport fault: retried here like a 5xx, never stored,
        // never shown to the model as "your answer was rejected", never a judgment attempt.
        let retry = self.transport.retry_policy();
        let mut unusable = 0u32;
        let (ok, parsed) = loop {
            self.parts
                .meter
                .reserve(estimate)
                .map_err(|e| JudgeError::Budget(e.0))?;
            let res = self
                .transport
                .post(&self.url, &headers, &body, &who, &self.s.key_var)
                .await;
            let ok = match res {
                Ok(ok) => ok,
                Err(e) => {
                    let e = JudgeError::from(e);
                    self.parts.meter.settle(estimate, None);
                    if let JudgeError::Fatal(_) = &e {
                        if let Ok(mut t) = self.parts.tripped.lock() {
                            t.get_or_insert(e.clone());
                        }
                    }
                    if let JudgeError::Invalid(m) = &e {
                        // The provider counts more tokens than sage estimated: the turn does
                        // not fit this model, which is its outcome, not a refusal of every
                        // request.
                        if too_long(m) {
                            return Err(JudgeError::ContextOverflow {
                                needed: (body.len() as u64).div_ceil(4),
                                budget: self.prompt_budget(),
                            });
                        }
                        // A server that refuses every request (a parameter it lacks) would
                        // fail each turn slowly; stop once it is clear nothing gets through.
                        let n = self.refusals.fetch_add(1, Ordering::Relaxed) + 1;
                        if n >= 3 && self.successes.load(Ordering::Relaxed) == 0 {
                            return Err(JudgeError::Fatal(format!(
                                "{m} (the first {n} requests were all refused)"
                            )));
                        }
                    }
                    return Err(e);
                }
            };
            match self.parse(&ok.body) {
                Ok(p) => break (ok, p),
                Err(m) => {
                    // the call may have been billed: count the estimate as spent
                    self.parts.meter.settle(estimate, Some(estimate));
                    if unusable >= retry.max_retries {
                        return Err(JudgeError::Transient(format!(
                            "{who}: {m} ({} unusable answers in a row)",
                            unusable + 1
                        )));
                    }
                    let wait = retry.backoff(unusable);
                    unusable += 1;
                    self.parts
                        .stats
                        .http_retries
                        .fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(wait).await;
                }
            }
        };
        self.successes.fetch_add(1, Ordering::Relaxed);
        let cost = self.s.price.map(|p| p.cost(&parsed.usage));
        self.parts.meter.settle(estimate, Some(cost.unwrap_or(0.0)));
        self.parts.stats.api_calls.fetch_add(1, Ordering::Relaxed);
        self.parts.stats.add_usage(&parsed.usage, cost);
        // the key carries the body's hash, computed when the body was built
        let hash = ledger_key.prompt_hash.clone();
        if let Some(l) = &self.parts.ledger {
            let entry = LedgerEntry {
                schema: LEDGER_SCHEMA.into(),
                id,
                key: ledger_key,
                source: "api".into(),
                response: scrubbed(String::from_utf8_lossy(&ok.body)),
                usage: parsed.usage,
                cost_usd: cost,
                latency_ms: ok.latency.as_millis() as u64,
                http_retries: ok.retries,
                recorded_at: ledger::now_secs(),
            };
            put_off_thread(l, entry)
                .await
                .map_err(|e| JudgeError::Fatal(format!("cannot record the judgment: {e}")))?;
        }
        self.answer(parsed, hash, context)
    }
}

impl Judge for LlmJudge {
    fn id(&self) -> JudgeId {
        JudgeId {
            name: self.s.name.clone(),
            model: self.s.model.clone(),
            rubric_version: self.parts.rubric.version.clone(),
        }
    }

    fn judge<'a>(
        &'a self,
        req: &'a TurnRequest<'a>,
    ) -> BoxFuture<'a, Result<Judgment, JudgeError>> {
        Box::pin(async move {
            self.call(req, CallInfo { run: 0, attempt: 1 })
                .await
                .map(|a| a.judgment)
        })
    }

    fn judge_call<'a>(
        &'a self,
        req: &'a TurnRequest<'a>,
        call: CallInfo,
    ) -> BoxFuture<'a, Result<JudgeAnswer, JudgeError>> {
        Box::pin(self.call(req, call))
    }
}

/// Store a ledger entry on the blocking pool: `put` syncs the file to disk (an answer already
/// paid for must survive a crash), and a sync takes milliseconds; done on the task that
/// drives every call in flight, it stalled them all (at `--concurrency 64` the scorer sent
/// about half the requests it could).
pub(crate) async fn put_off_thread(l: &Ledger, entry: LedgerEntry) -> Result<(), String> {
    if tokio::runtime::Handle::try_current().is_err() {
        return l.put(&entry).map(|_| ()).map_err(|e| e.to_string());
    }
    let l = l.clone();
    match tokio::task::spawn_blocking(move || l.put(&entry)).await {
        Ok(r) => r.map(|_| ()).map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_choices_and_rationale_cap_shape_the_schema() {
        let plain = judgment_schema_with(None, None);
        assert_eq!(
            plain["properties"]["TR"]["properties"]["quote"]["type"],
            json!(["string", "null"])
        );
        assert!(plain["properties"]["TR"]["properties"]["rationale"]
            .get("maxLength")
            .is_none());
        let c = vec!["I will validate the host.".to_string()];
        let s = judgment_schema_with(Some(&c), Some(160));
        let dim = &s["properties"]["DI"]["properties"];
        assert_eq!(
            dim["quote"]["enum"],
            json!(["I will validate the host.", null])
        );
        assert_eq!(dim["rationale"]["maxLength"], json!(160));
        assert_eq!(dim["score"]["enum"], json!([0, 1, 2, 3]));
        // nothing quotable: nothing but 0 can be verified, so nothing else is offered
        let none = judgment_schema_with(Some(&[]), None);
        assert_eq!(
            none["properties"]["SA"]["properties"]["score"]["enum"],
            json!([0])
        );
    }

    #[test]
    fn strict_parsing_rejects_what_is_not_one_judgment() {
        let ok = r#"{"applicable":true,"security_opportunity":false,
          "TR":{"score":0,"quote":null,"rationale":""},"DI":{"score":2,"quote":"x","rationale":""},
          "VR":{"score":0,"quote":null,"rationale":""},"SA":{"score":0,"quote":null,"rationale":""}}"#;
        assert_eq!(parse_judgment_text(ok).unwrap().di.score, 2);
        assert!(parse_judgment_text(&format!("```json\n{ok}\n```")).is_ok());
        assert!(parse_judgment_text(&format!("Sure! {ok}")).is_err());
        assert!(parse_judgment_text(&ok[..50]).is_err());
        assert!(
            parse_judgment_text(&ok.replace("\"score\":2", "\"score\":\"high\""))
                .unwrap_err()
                .contains("0-3")
        );
        assert!(parse_judgment_text(&ok.replace("\"DI\"", "\"XX\""))
            .unwrap_err()
            .contains("DI"));
    }
}
