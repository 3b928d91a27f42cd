//! OpenAI-compatible Chat Completions (OpenAI, OpenRouter, vLLM, llama.cpp server, Ollama,
//! LiteLLM): request bodies and response parsing.

use crate::cost::Usage;
use crate::{Answer, Completion, LlmSettings, Output, Prompt};
use serde_json::{json, Value};

/// The request URL as text ([`crate::endpoint_url`]; an unparseable base is reported when
/// the judge is built).
pub fn endpoint(base_url: &str) -> String {
    crate::endpoint_url(crate::Provider::OpenAi, base_url)
        .map(|u| u.to_string())
        .unwrap_or_else(|_| format!("{}/chat/completions", base_url.trim_end_matches('/')))
}

/// The request body, in layout order: the system message, then every user block
/// concatenated into one user message (the shared prefix first, so providers cache it).
pub fn request_body(s: &LlmSettings, p: &Prompt, out: &Output) -> Value {
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
        let official = url::Url::parse(s.base_url.trim())
            .ok()
            .is_some_and(|u| u.host_str() == Some("api.openai.com"));
        let name = if official {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        o.insert(name.into(), json!(m));
    }
    let rf = match out {
        Output::Schema { name, schema, .. } => json!({
            "type": "json_schema",
            "json_schema": {"name": name, "strict": true, "schema": schema},
        }),
        Output::JsonObject => json!({"type": "json_object"}),
    };
    o.insert("response_format".into(), rf);
    if s.cache_prompt {
        o.insert("cache_prompt".into(), json!(true));
    }
    body
}

/// Parse a Chat Completions response. `Err` means the envelope itself is unusable (not a
/// completion at all); a completion without a usable answer is `Ok` with `answer: Err(why)`.
pub fn parse_response(bytes: &[u8]) -> Result<Completion, crate::EnvelopeError> {
    parse_envelope(bytes).map_err(crate::EnvelopeError)
}

fn parse_envelope(bytes: &[u8]) -> Result<Completion, String> {
    let v: Value = serde_json::from_slice(bytes)
        .map_err(|e| format!("the response body is not JSON ({e})"))?;
    let choice = v
        .pointer("/choices/0")
        .ok_or("the response has no choices[0]")?;
    let u = |p: &str| v.pointer(p).and_then(Value::as_u64).unwrap_or(0);
    let usage = Usage {
        input_tokens: u("/usage/prompt_tokens"),
        // llama-server reports the prompt tokens it took from its KV cache as timings.cache_n
        cached_input_tokens: v
            .pointer("/usage/prompt_tokens_details/cached_tokens")
            .and_then(Value::as_u64)
            .unwrap_or_else(|| u("/timings/cache_n")),
        cache_write_tokens: 0,
        output_tokens: u("/usage/completion_tokens"),
    };
    let msg = choice.get("message").ok_or("choices[0] has no message")?;
    let finish = choice
        .get("finish_reason")
        .and_then(Value::as_str)
        .unwrap_or("");
    let answer = match msg.get("content").and_then(Value::as_str) {
        _ if finish == "length" => Err(
            "the answer was cut off at the token limit (finish_reason=length); answer briefly"
                .to_string(),
        ),
        Some(text) => Ok(Answer::Text(text.to_string())),
        None => Err(match msg.get("refusal").and_then(Value::as_str) {
            Some(r) => format!("the model refused: {r}"),
            None => "the answer has no content".to_string(),
        }),
    };
    Ok(Completion { answer, usage })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_content_usage_and_truncation() {
        let body = json!({"choices":[{"message":{"content":"{\"a\":1}"},"finish_reason":"stop"}],
            "usage":{"prompt_tokens":100,"completion_tokens":20,"prompt_tokens_details":{"cached_tokens":64}}});
        let p = parse_response(body.to_string().as_bytes()).unwrap();
        assert_eq!(p.answer.unwrap(), Answer::Text("{\"a\":1}".into()));
        assert_eq!(p.usage.cached_input_tokens, 64);
        let cut = json!({"choices":[{"message":{"content":"{\"applicable\":"},"finish_reason":"length"}]});
        let p = parse_response(cut.to_string().as_bytes()).unwrap();
        assert!(p.answer.unwrap_err().contains("cut off"));
        let refused = json!({"choices":[{"message":{"refusal":"no"},"finish_reason":"stop"}]});
        let p = parse_response(refused.to_string().as_bytes()).unwrap();
        assert!(p.answer.unwrap_err().contains("refused"));
        assert!(parse_response(b"{\"choices\":[{\"mess").is_err());
    }

    #[test]
    fn llama_server_cache_counts_and_cache_prompt() {
        // llama-server's own envelope: no prompt_tokens_details, the cache in timings.cache_n
        let body = json!({"choices":[{"message":{"content":"{}"},"finish_reason":"stop"}],
            "usage":{"prompt_tokens":40,"completion_tokens":5},
            "timings":{"cache_n":1200,"prompt_n":40}});
        let p = parse_response(body.to_string().as_bytes()).unwrap();
        assert_eq!(p.usage.cached_input_tokens, 1200);
        let mut s = LlmSettings::from_env(crate::Provider::OpenAi, "m", &crate::Env::default());
        let prompt = Prompt::default();
        assert!(request_body(&s, &prompt, &Output::JsonObject)
            .get("cache_prompt")
            .is_none());
        s.cache_prompt = true;
        assert_eq!(
            request_body(&s, &prompt, &Output::JsonObject)["cache_prompt"],
            json!(true)
        );
    }
}
