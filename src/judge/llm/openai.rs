//! OpenAI-compatible Chat Completions (OpenAI, OpenRouter, vLLM, llama.cpp server, Ollama,
//! LiteLLM): request bodies and response parsing.

use super::cost::Usage;
use super::prompt::RenderedPrompt;
use super::{judgment_schema, parse_judgment_text, LlmSettings, ParsedResponse};
use serde_json::{json, Value};

/// How the answer's shape is requested.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputMode {
    /// `response_format: json_schema` (strict): the server enforces the schema.
    JsonSchema,
    /// `response_format: json_object`, for servers without schema support: strict parsing.
    JsonObject,
}

pub fn endpoint(base_url: &str) -> String {
    format!("{}/chat/completions", base_url.trim_end_matches('/'))
}

/// The request body, in layout order (see [`super::prompt`]).
pub fn request_body(s: &LlmSettings, p: &RenderedPrompt, mode: OutputMode) -> Value {
    let mut body = json!({
        "model": s.model,
        "messages": [
            {"role": "system", "content": p.system},
            {"role": "user", "content": p.user_text()},
        ],
    });
    let o = body.as_object_mut().expect("object");
    if let Some(t) = s.temperature {
        o.insert("temperature".into(), json!(t));
    }
    if let Some(m) = s.max_tokens {
        // api.openai.com wants the newer name; most compatible servers know only the old.
        let name = if s.base_url.contains("api.openai.com") {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        o.insert(name.into(), json!(m));
    }
    let rf = match mode {
        OutputMode::JsonSchema => json!({
            "type": "json_schema",
            "json_schema": {"name": "sage_turn_score", "strict": true, "schema": judgment_schema()},
        }),
        OutputMode::JsonObject => json!({"type": "json_object"}),
    };
    o.insert("response_format".into(), rf);
    body
}

/// Parse a Chat Completions response. `Err` means the envelope itself is unusable (not a
/// completion at all); a completion whose content is not a valid judgment is
/// `Ok` with `judgment: Err(reason)`.
pub fn parse_response(bytes: &[u8]) -> Result<ParsedResponse, String> {
    let v: Value = serde_json::from_slice(bytes)
        .map_err(|e| format!("the response body is not JSON ({e})"))?;
    let choice = v
        .pointer("/choices/0")
        .ok_or("the response has no choices[0]")?;
    let usage = Usage {
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
    let msg = choice.get("message").ok_or("choices[0] has no message")?;
    let finish = choice
        .get("finish_reason")
        .and_then(Value::as_str)
        .unwrap_or("");
    let judgment = match msg.get("content").and_then(Value::as_str) {
        _ if finish == "length" => Err(
            "the answer was cut off at the token limit (finish_reason=length); answer briefly"
                .to_string(),
        ),
        Some(text) => parse_judgment_text(text),
        None => Err(match msg.get("refusal").and_then(Value::as_str) {
            Some(r) => format!("the model refused: {r}"),
            None => "the answer has no content".to_string(),
        }),
    };
    Ok(ParsedResponse { judgment, usage })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_content_usage_and_truncation() {
        let content = r#"{"applicable":true,"security_opportunity":false,"TR":{"score":0,"quote":null,"rationale":""},"DI":{"score":0,"quote":null,"rationale":""},"VR":{"score":0,"quote":null,"rationale":""},"SA":{"score":0,"quote":null,"rationale":""}}"#;
        let body = json!({"choices":[{"message":{"content":content},"finish_reason":"stop"}],
            "usage":{"prompt_tokens":100,"completion_tokens":20,"prompt_tokens_details":{"cached_tokens":64}}});
        let p = parse_response(body.to_string().as_bytes()).unwrap();
        assert!(p.judgment.unwrap().applicable);
        assert_eq!(p.usage.cached_input_tokens, 64);
        let cut = json!({"choices":[{"message":{"content":"{\"applicable\":"},"finish_reason":"length"}]});
        let p = parse_response(cut.to_string().as_bytes()).unwrap();
        assert!(p.judgment.unwrap_err().contains("cut off"));
        assert!(parse_response(b"{\"choices\":[{\"mess").is_err());
    }
}
