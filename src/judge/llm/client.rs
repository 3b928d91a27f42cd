//! A small generic client: send one prompt, get one JSON value back. For helpers that need
//! an LLM outside turn scoring (the `szz` agentic tracer), with the same transport (retries,
//! `Retry-After`, timeouts, fatal errors) and the same key handling as the judges.

use super::cost::Usage;
use super::http::Transport;
use super::{anthropic, openai, LlmSettings, Provider};
use crate::judge::JudgeError;
use serde_json::{json, Value};
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
) -> Result<JsonAnswer, JudgeError> {
    let key = s
        .api_key
        .as_ref()
        .ok_or_else(|| JudgeError::Fatal(format!("{}: {} is not set", s.who(), s.key_var)))?;
    let transport = Transport::new(
        s.timeout,
        s.retry,
        Arc::default(),
        vec![key.expose().to_string()],
    )?;
    let (url, headers, body) = match s.provider {
        Provider::OpenAi => {
            let mut b = json!({
                "model": s.model,
                "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            });
            if let Some(t) = s.temperature {
                b["temperature"] = json!(t);
            }
            b["response_format"] = match schema {
                Some(sc) => json!({"type": "json_schema",
                    "json_schema": {"name": "answer", "strict": true, "schema": sc}}),
                None => json!({"type": "json_object"}),
            };
            (
                openai::endpoint(&s.base_url),
                vec![("authorization", format!("Bearer {}", key.expose()))],
                b,
            )
        }
        Provider::Anthropic => {
            let mut b = json!({
                "model": s.model,
                "max_tokens": s.max_tokens.unwrap_or(anthropic::DEFAULT_MAX_TOKENS),
                "system": system,
                "messages": [{"role": "user", "content": user}],
            });
            if let Some(sc) = schema {
                b["tools"] = json!([{"name": "answer", "description": "Give the answer.", "input_schema": sc}]);
                b["tool_choice"] = json!({"type": "tool", "name": "answer"});
            }
            if let Some(t) = s.temperature {
                b["temperature"] = json!(t);
            }
            (
                anthropic::endpoint(&s.base_url),
                vec![
                    ("x-api-key", key.expose().to_string()),
                    ("anthropic-version", anthropic::API_VERSION.to_string()),
                ],
                b,
            )
        }
    };
    let bytes = serde_json::to_vec(&body).expect("a JSON value serializes");
    let ok = transport
        .post(&url, &headers, &bytes, &s.who(), &s.key_var)
        .await?;
    let raw = String::from_utf8_lossy(&ok.body).into_owned();
    let v: Value = serde_json::from_slice(&ok.body)
        .map_err(|e| JudgeError::Transient(format!("{}: response is not JSON: {e}", s.who())))?;
    let (text_or_value, usage) = match s.provider {
        Provider::OpenAi => {
            let u = Usage {
                input_tokens: v
                    .pointer("/usage/prompt_tokens")
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
                cached_input_tokens: v
                    .pointer("/usage/prompt_tokens_details/cached_tokens")
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
                cache_write_tokens: 0,
                output_tokens: v
                    .pointer("/usage/completion_tokens")
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
            };
            let text = v
                .pointer("/choices/0/message/content")
                .and_then(Value::as_str)
                .ok_or_else(|| JudgeError::Invalid("the answer has no content".into()))?;
            (Err(text.to_string()), u)
        }
        Provider::Anthropic => {
            let u = Usage {
                input_tokens: v
                    .pointer("/usage/input_tokens")
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
                output_tokens: v
                    .pointer("/usage/output_tokens")
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
                ..Default::default()
            };
            let content = v
                .get("content")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            match content.iter().find(|b| b["type"] == "tool_use") {
                Some(t) => (Ok(t["input"].clone()), u),
                None => (
                    Err(content
                        .iter()
                        .filter_map(|b| b["text"].as_str())
                        .collect::<String>()),
                    u,
                ),
            }
        }
    };
    let value = match text_or_value {
        Ok(v) => v,
        Err(text) => strict_json(&text).map_err(JudgeError::Invalid)?,
    };
    Ok(JsonAnswer { value, usage, raw })
}

/// [`complete_json`] for synchronous callers (builds a small runtime).
pub fn complete_json_blocking(
    s: &LlmSettings,
    system: &str,
    user: &str,
    schema: Option<&Value>,
) -> Result<JsonAnswer, JudgeError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| JudgeError::Fatal(format!("cannot start the async runtime: {e}")))?;
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
