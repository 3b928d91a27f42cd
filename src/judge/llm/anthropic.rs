//! Anthropic Messages API: request bodies (tool use for structured output, cache
//! breakpoints on the shared prefix) and response parsing.

use super::cost::Usage;
use super::prompt::RenderedPrompt;
use super::{judgment_schema, parse_judgment_text, LlmSettings, ParsedResponse};
use serde_json::{json, Value};

/// The API version header sage speaks.
pub const API_VERSION: &str = "2023-06-01";
/// The tool the model is made to call with its judgment.
pub const TOOL_NAME: &str = "record_turn_score";
/// `max_tokens` is required by the Messages API.
pub const DEFAULT_MAX_TOKENS: u32 = 2048;

pub fn endpoint(base_url: &str) -> String {
    let b = base_url.trim_end_matches('/');
    if b.ends_with("/v1") {
        format!("{b}/messages")
    } else {
        format!("{b}/v1/messages")
    }
}

/// The request body. Each turn is its own content block, and the last transcript block
/// carries a cache breakpoint: the request for turn k+1 then finds the cached prefix that
/// ended at turn k on a block boundary.
pub fn request_body(s: &LlmSettings, p: &RenderedPrompt) -> Value {
    let mut blocks = vec![json!({"type": "text", "text": p.task})];
    for t in &p.turns {
        blocks.push(json!({"type": "text", "text": t}));
    }
    if let Some(last) = blocks.last_mut() {
        last["cache_control"] = json!({"type": "ephemeral"});
    }
    blocks.push(json!({"type": "text", "text": p.instruction}));
    if let Some(f) = &p.feedback {
        blocks.push(json!({"type": "text", "text": f}));
    }
    let mut body = json!({
        "model": s.model,
        "max_tokens": s.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        "system": [{"type": "text", "text": p.system, "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": blocks}],
        "tools": [{
            "name": TOOL_NAME,
            "description": "Record the SAGE scores of the turn being scored.",
            "input_schema": judgment_schema(),
        }],
        "tool_choice": {"type": "tool", "name": TOOL_NAME},
    });
    if let Some(t) = s.temperature {
        body["temperature"] = json!(t);
    }
    body
}

/// Parse a Messages response: the tool call's input, or else a JSON text block.
pub fn parse_response(bytes: &[u8]) -> Result<ParsedResponse, String> {
    let v: Value = serde_json::from_slice(bytes)
        .map_err(|e| format!("the response body is not JSON ({e})"))?;
    let content = v
        .get("content")
        .and_then(Value::as_array)
        .ok_or("the response has no content array")?;
    let u = |p: &str| v.pointer(p).and_then(Value::as_u64).unwrap_or(0);
    let cached = u("/usage/cache_read_input_tokens");
    let written = u("/usage/cache_creation_input_tokens");
    let usage = Usage {
        input_tokens: u("/usage/input_tokens") + cached + written,
        cached_input_tokens: cached,
        cache_write_tokens: written,
        output_tokens: u("/usage/output_tokens"),
    };
    let stop = v.get("stop_reason").and_then(Value::as_str).unwrap_or("");
    let tool = content
        .iter()
        .find(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"));
    let judgment = if stop == "max_tokens" {
        Err("the answer was cut off at max_tokens; answer briefly".to_string())
    } else if let Some(t) = tool {
        match t.get("input") {
            Some(input) => super::judgment_from_value(input.clone()),
            None => Err("the tool call has no input".into()),
        }
    } else {
        let text: String = content
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect();
        if text.trim().is_empty() {
            Err("the answer has neither a tool call nor text".into())
        } else {
            parse_judgment_text(&text)
        }
    };
    Ok(ParsedResponse { judgment, usage })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tool_use_and_usage() {
        let input = json!({"applicable":true,"security_opportunity":true,
            "TR":{"score":1,"quote":"q","rationale":"r"},"DI":{"score":0,"quote":null,"rationale":""},
            "VR":{"score":0,"quote":null,"rationale":""},"SA":{"score":0,"quote":null,"rationale":""}});
        let body = json!({"content":[{"type":"tool_use","name":TOOL_NAME,"input":input}],
            "stop_reason":"tool_use",
            "usage":{"input_tokens":10,"cache_read_input_tokens":90,"cache_creation_input_tokens":5,"output_tokens":30}});
        let p = parse_response(body.to_string().as_bytes()).unwrap();
        assert_eq!(p.judgment.unwrap().tr.score, 1);
        assert_eq!(p.usage.input_tokens, 105);
        assert_eq!(p.usage.cached_input_tokens, 90);
        assert_eq!(
            endpoint("https://api.anthropic.com"),
            "https://api.anthropic.com/v1/messages"
        );
        assert_eq!(endpoint("http://x/v1/"), "http://x/v1/messages");
    }
}
