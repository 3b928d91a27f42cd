//! A small generic client: send one prompt, get one JSON value back. For helpers that need
//! an LLM outside turn scoring (the `szz` agentic tracer), with the same transport (retries,
//! `Retry-After`, timeouts, fatal errors) and the same key handling as the judges.

use crate::cost::Usage;
use crate::http::Transport;
use crate::{Answer, LlmError, LlmSettings, Output, Prompt};
use serde_json::Value;
use std::sync::Arc;

/// The answer of [`complete_json`].
#[derive(Debug, Clone, PartialEq)]
pub struct JsonAnswer {
    pub value: Value,
    pub usage: Usage,
    /// The provider's raw response body.
    pub raw: String,
}

/// Send `system` + `user` to the configured model and parse its answer as one JSON object.
/// With `schema`, OpenAI-compatible servers get `response_format: json_schema` and Anthropic
/// a forced tool call with that input schema; without, the answer is parsed strictly.
pub async fn complete_json(
    s: &LlmSettings,
    system: &str,
    user: &str,
    schema: Option<&Value>,
) -> Result<JsonAnswer, LlmError> {
    send_json_request(s, &json_request(s, system, user, schema)).await
}

/// The request body [`complete_json`] sends (secrets scrubbed): what a ledger keys a call
/// by, so a caller can look the answer up before sending it.
pub fn json_request(s: &LlmSettings, system: &str, user: &str, schema: Option<&Value>) -> String {
    let prompt = Prompt {
        system: system.to_string(),
        cache_system: false,
        blocks: vec![user.to_string()],
        cache_after: None,
    };
    let out = match schema {
        Some(sc) => Output::Schema {
            name: "answer".into(),
            description: "Give the answer.".into(),
            schema: sc.clone(),
        },
        None => Output::JsonObject,
    };
    let body = crate::request_body(s, &prompt, &out);
    // secrets are neither sent nor kept: scrubbed from the request and from the answer
    crate::secrets::scrubbed(serde_json::to_string(&body).expect("a JSON value serializes"))
}

/// Send a body made by [`json_request`] and parse the answer.
pub async fn send_json_request(s: &LlmSettings, body: &str) -> Result<JsonAnswer, LlmError> {
    let headers = crate::auth(s).map_err(|e| LlmError::Fatal(e.0))?;
    let transport = Transport::new(
        s.timeout,
        s.retry,
        Arc::default(),
        s.secrets(),
        s.max_reply_bytes,
    )?;
    let url = s
        .endpoint_url()
        .map_err(|m| LlmError::Fatal(format!("{}: {m}", s.who())))?;
    let ok = transport
        .post(&url, &headers, body.as_bytes(), &s.who(), &s.key_var)
        .await?;
    json_answer(
        s,
        crate::secrets::scrubbed(String::from_utf8_lossy(&ok.body)),
    )
}

/// Parse a provider's raw response body (live, or kept in a ledger) as one JSON answer.
pub fn json_answer(s: &LlmSettings, raw: String) -> Result<JsonAnswer, LlmError> {
    let c = crate::parse_response(s.provider, raw.as_bytes())
        .map_err(|e| LlmError::Transient(format!("{}: {e}", s.who())))?;
    let value = match c.answer.map_err(LlmError::Invalid)? {
        Answer::Json(v) => v,
        Answer::Text(text) => strict_json(&text).map_err(LlmError::Invalid)?,
    };
    Ok(JsonAnswer {
        value,
        usage: c.usage,
        raw,
    })
}

/// [`complete_json`] for synchronous callers (builds a small runtime).
pub fn complete_json_blocking(
    s: &LlmSettings,
    system: &str,
    user: &str,
    schema: Option<&Value>,
) -> Result<JsonAnswer, LlmError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| LlmError::Fatal(format!("cannot start the async runtime: {e}")))?;
    rt.block_on(complete_json(s, system, user, schema))
}

/// One JSON object, optionally inside one code fence (the same rule as judgments).
fn strict_json(text: &str) -> Result<Value, String> {
    let t = text.trim();
    let inner = t
        .strip_prefix("```")
        .map(|r| {
            r.strip_prefix("json")
                .unwrap_or(r)
                .trim()
                .trim_end_matches("```")
                .trim()
        })
        .unwrap_or(t);
    serde_json::from_str(inner).map_err(|e| format!("the answer is not one JSON object ({e})"))
}
