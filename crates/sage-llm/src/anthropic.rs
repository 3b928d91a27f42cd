//! Anthropic Messages API: request bodies (tool use for structured output, cache
//! breakpoints on the shared prefix) and response parsing.

use crate::cost::Usage;
use crate::{Answer, Completion, LlmSettings, Output, Prompt};
use serde_json::{json, Value};

/// The API version header sage speaks.
pub const API_VERSION: &str = "2023-06-01";
/// `max_tokens` is required by the Messages API.
pub const DEFAULT_MAX_TOKENS: u32 = 2048;

/// The request URL as text ([`super::endpoint_url`]).
pub fn endpoint(base_url: &str) -> String {
    crate::endpoint_url(crate::Provider::Anthropic, base_url)
        .map(|u| u.to_string())
        .unwrap_or_else(|_| format!("{}/v1/messages", base_url.trim_end_matches('/')))
}

/// The request body. Each user block is its own content block, and the block that ends the
/// shared prefix ([`Prompt::cache_after`]) carries a cache breakpoint: the request for turn
/// k+1 then finds the cached prefix that ended at turn k on a block boundary. A schema is
/// asked for as a forced tool call whose input is the answer.
pub fn request_body(s: &LlmSettings, p: &Prompt, out: &Output) -> Value {
    let mut blocks: Vec<Value> = p
        .blocks
        .iter()
        .map(|t| json!({"type": "text", "text": t}))
        .collect();
    if let Some(b) = p.cache_after.and_then(|i| blocks.get_mut(i)) {
        b["cache_control"] = json!({"type": "ephemeral"});
    }
    let system = if p.cache_system {
        json!([{"type": "text", "text": p.system, "cache_control": {"type": "ephemeral"}}])
    } else {
        json!(p.system)
    };
    let mut body = json!({
        "model": s.model,
        "max_tokens": s.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        "system": system,
        "messages": [{"role": "user", "content": blocks}],
    });
    if let Output::Schema {
        name,
        description,
        schema,
    } = out
    {
        body["tools"] = json!([{"name": name, "description": description, "input_schema": schema}]);
        body["tool_choice"] = json!({"type": "tool", "name": name});
    }
    if let Some(t) = s.temperature {
        body["temperature"] = json!(t);
    }
    body
}

/// Parse a Messages response: the tool call's input, or else the text blocks.
pub fn parse_response(bytes: &[u8]) -> Result<Completion, crate::EnvelopeError> {
    parse_envelope(bytes).map_err(crate::EnvelopeError)
}

fn parse_envelope(bytes: &[u8]) -> Result<Completion, String> {
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
    let answer = if stop == "max_tokens" {
        Err("the answer was cut off at max_tokens; answer briefly".to_string())
    } else if let Some(t) = tool {
        match t.get("input") {
            Some(input) => Ok(Answer::Json(input.clone())),
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
            Ok(Answer::Text(text))
        }
    };
    Ok(Completion { answer, usage })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tool_use_and_usage() {
        let input = json!({"applicable":true});
        let body = json!({"content":[{"type":"tool_use","name":"t","input":input}],
            "stop_reason":"tool_use",
            "usage":{"input_tokens":10,"cache_read_input_tokens":90,"cache_creation_input_tokens":5,"output_tokens":30}});
        let p = parse_response(body.to_string().as_bytes()).unwrap();
        assert_eq!(p.answer.unwrap(), Answer::Json(input));
        assert_eq!(p.usage.input_tokens, 105);
        assert_eq!(p.usage.cached_input_tokens, 90);
        let cut = json!({"content":[{"type":"text","text":"{"}],"stop_reason":"max_tokens"});
        assert!(parse_response(cut.to_string().as_bytes())
            .unwrap()
            .answer
            .unwrap_err()
            .contains("cut off"));
        assert_eq!(
            endpoint("https://api.anthropic.com"),
            "https://api.anthropic.com/v1/messages"
        );
        assert_eq!(endpoint("http://x/v1/"), "http://x/v1/messages");
    }

    #[test]
    fn cache_breakpoint_on_the_named_block() {
        let s = LlmSettings::from_env(
            crate::Provider::Anthropic,
            "claude-x",
            &crate::Env::default(),
        );
        let p = Prompt {
            system: "sys".into(),
            cache_system: true,
            blocks: vec!["task".into(), "turn1".into(), "instr".into()],
            cache_after: Some(1),
        };
        let b = request_body(&s, &p, &Output::JsonObject);
        let blocks = b["messages"][0]["content"].as_array().unwrap();
        assert!(blocks[0].get("cache_control").is_none());
        assert_eq!(blocks[1]["cache_control"]["type"], "ephemeral");
        assert!(blocks[2].get("cache_control").is_none());
        assert!(b.get("tools").is_none());
    }
}
