//! HTTP transport to LLM providers: OpenAI-compatible Chat Completions and the Anthropic
//! Messages API. One request shape ([`Prompt`] + [`Output`]), one response parser per
//! provider ([`parse_response`]), retries with backoff and `Retry-After` ([`http`]), token
//! usage and cost ([`cost`]).
//!
//! This crate knows nothing of traces, rubrics or judgments: the judge renders its prompt
//! into a [`Prompt`] and reads its judgment out of a [`Completion`]; the SZZ oracle does the
//! same with its own prompts ([`client::complete_json`]).

pub mod anthropic;
pub mod batch;
pub mod client;
pub mod cost;
#[cfg(any(test, feature = "fake-server"))]
pub mod fake;
pub mod http;
pub mod openai;
pub mod secrets;

use cost::Price;
use http::RetryPolicy;
use serde_json::Value;
use std::time::Duration;

/// Why a call produced no usable answer.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum LlmError {
    /// The answer was malformed (not JSON, wrong schema): retryable with feedback.
    #[error("invalid answer: {0}")]
    Invalid(String),
    /// A transport or provider error that may succeed later.
    #[error("transient: {0}")]
    Transient(String),
    /// An error that cannot succeed on retry (bad key, unknown model): stop.
    #[error("fatal: {0}")]
    Fatal(String),
    /// A spending limit was reached.
    #[error("budget reached: {0}")]
    Budget(String),
}

/// A base URL sage cannot send to (not absolute, not http(s), no host). The message never
/// repeats the URL: it may hold a password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UrlError(pub String);

/// A response envelope that is not the provider's documented shape (an HTML error page, a
/// truncated body): a transport fault, never the judge's answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EnvelopeError(pub String);

/// Which API a judge speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Provider {
    OpenAi,
    Anthropic,
}

impl Provider {
    pub fn name(self) -> &'static str {
        match self {
            Provider::OpenAi => "openai",
            Provider::Anthropic => "anthropic",
        }
    }
    pub fn parse(s: &str) -> Option<Provider> {
        match s {
            "openai" => Some(Provider::OpenAi),
            "anthropic" => Some(Provider::Anthropic),
            _ => None,
        }
    }
    /// The conventional variable holding the key.
    pub fn key_var(self) -> &'static str {
        match self {
            Provider::OpenAi => "OPENAI_API_KEY",
            Provider::Anthropic => "ANTHROPIC_API_KEY",
        }
    }
    pub(crate) fn base_var(self) -> &'static str {
        match self {
            Provider::OpenAi => "OPENAI_BASE_URL",
            Provider::Anthropic => "ANTHROPIC_BASE_URL",
        }
    }
    pub(crate) fn default_base(self) -> &'static str {
        match self {
            Provider::OpenAi => "https://api.openai.com/v1",
            Provider::Anthropic => "https://api.anthropic.com",
        }
    }
}

/// An API key: never printed, never serialized.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn new(s: impl Into<String>) -> Option<ApiKey> {
        let s = s.into();
        (!s.trim().is_empty()).then(|| ApiKey(s.trim().to_string()))
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey([redacted])")
    }
}

/// Everything one LLM judge needs to know.
#[derive(Debug, Clone)]
pub struct LlmSettings {
    pub provider: Provider,
    /// The judge's name: the backend name, or the name from `sage.toml`.
    pub name: String,
    pub model: String,
    pub base_url: String,
    pub api_key: Option<ApiKey>,
    /// The variable the key came from (named in messages).
    pub key_var: String,
    pub temperature: Option<f64>,
    pub max_tokens: Option<u32>,
    /// Ask OpenAI-compatible servers for `response_format: json_schema`.
    pub json_schema: bool,
    pub timeout: Duration,
    pub retry: RetryPolicy,
    pub price: Option<Price>,
}

impl LlmSettings {
    /// Settings from the conventional environment variables.
    pub fn from_env(provider: Provider, model: &str) -> LlmSettings {
        let base_url = std::env::var(provider.base_var())
            .ok()
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| provider.default_base().to_string());
        LlmSettings {
            provider,
            name: provider.name().to_string(),
            model: model.to_string(),
            base_url,
            api_key: std::env::var(provider.key_var()).ok().and_then(ApiKey::new),
            key_var: provider.key_var().to_string(),
            temperature: None,
            max_tokens: None,
            json_schema: true,
            timeout: Duration::from_secs(120),
            retry: RetryPolicy::default(),
            price: cost::price_for(model, &Default::default()),
        }
    }

    /// `openai:gpt-4o` style label for messages.
    pub fn who(&self) -> String {
        format!("{}:{}", self.name, self.model)
    }

    /// The request URL ([`endpoint_url`]).
    pub fn endpoint_url(&self) -> Result<url::Url, UrlError> {
        endpoint_url(self.provider, &self.base_url)
    }

    /// The secrets of these settings: the key and the base URL's credentials.
    pub fn secrets(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .api_key
            .iter()
            .map(|k| k.expose().to_string())
            .collect();
        v.extend(secrets::url_credentials(&self.base_url));
        v
    }
}

/// The request URL of `provider` under the base URL `base`, parsed, not concatenated: the
/// path gets `/chat/completions` (OpenAI-compatible) or `/v1/messages` (Anthropic; `/messages`
/// when the base already ends in `/v1`), while a query string (`?api-version=...`) and
/// credentials (`user:pass@`) stay where they belong. Only absolute `http`/`https` URLs with a
/// host are accepted. Errors never repeat the URL (it may hold a password).
pub fn endpoint_url(provider: Provider, base: &str) -> Result<url::Url, UrlError> {
    let mut u = base_url(base)?;
    let path = u.path().trim_end_matches('/').to_string();
    let tail = match provider {
        Provider::OpenAi => "/chat/completions",
        Provider::Anthropic if path.ends_with("/v1") => "/messages",
        Provider::Anthropic => "/v1/messages",
    };
    u.set_path(&format!("{path}{tail}"));
    Ok(u)
}

/// What is sent: a system prompt and the user message's blocks, in layout order.
///
/// The blocks are concatenated for OpenAI-compatible servers (which cache any shared
/// prefix automatically) and sent as separate content blocks to Anthropic, with a cache
/// breakpoint after block [`Prompt::cache_after`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Prompt {
    pub system: String,
    /// Mark the system prompt cacheable (Anthropic).
    pub cache_system: bool,
    pub blocks: Vec<String>,
    /// Index of the last block of the prefix shared with the next request (Anthropic).
    pub cache_after: Option<usize>,
}

impl Prompt {
    /// The user message as one text: every block in order.
    pub fn user_text(&self) -> String {
        let mut s = String::with_capacity(self.blocks.iter().map(String::len).sum());
        for b in &self.blocks {
            s.push_str(b);
        }
        s
    }
}

/// How the answer's shape is requested.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// A JSON schema the server enforces: OpenAI `response_format: json_schema` (strict),
    /// an Anthropic forced tool call with that input schema.
    Schema {
        name: String,
        description: String,
        schema: Value,
    },
    /// Any one JSON object (servers without schema support), parsed strictly.
    JsonObject,
}

/// The answer of one completion.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// Text content, to be parsed by the caller.
    Text(String),
    /// Structured input of a forced tool call.
    Json(Value),
}

/// A provider response reduced to what sage uses.
#[derive(Debug, Clone)]
pub struct Completion {
    /// The answer, or why the completion has none (cut off, refused, empty).
    pub answer: Result<Answer, String>,
    pub usage: cost::Usage,
}

/// The provider's request body for `p`.
pub fn request_body(s: &LlmSettings, p: &Prompt, out: &Output) -> Value {
    match s.provider {
        Provider::OpenAi => openai::request_body(s, p, out),
        Provider::Anthropic => anthropic::request_body(s, p, out),
    }
}

/// A base URL, checked: absolute, `http` or `https`, with a host; no fragment.
fn base_url(base: &str) -> Result<url::Url, UrlError> {
    let mut u = url::Url::parse(base.trim())
        .map_err(|e| UrlError(format!("the base URL is not an absolute URL ({e})")))?;
    if !matches!(u.scheme(), "http" | "https") {
        return Err(UrlError(format!(
            "the base URL must be http or https, not {}",
            u.scheme()
        )));
    }
    if u.host_str().is_none_or(str::is_empty) {
        return Err(UrlError("the base URL has no host".into()));
    }
    u.set_fragment(None);
    Ok(u)
}

/// The provider's endpoint URL as text (see [`endpoint_url`]).
pub fn endpoint(s: &LlmSettings) -> String {
    match s.provider {
        Provider::OpenAi => openai::endpoint(&s.base_url),
        Provider::Anthropic => anthropic::endpoint(&s.base_url),
    }
}

/// Where to look the model up before scoring: the model list of an OpenAI-compatible server
/// (`GET {base}/models`, which vLLM, llama.cpp, Ollama, OpenRouter and LiteLLM serve too), or
/// the model itself on the Anthropic API (`GET {base}/v1/models/{model}`).
/// Parsed like [`endpoint_url`]: a query string and credentials in the base URL stay in
/// place, and the model name is one path segment (percent-encoded).
pub fn models_url(s: &LlmSettings) -> Result<url::Url, UrlError> {
    let mut u = base_url(&s.base_url)?;
    let path = u.path().trim_end_matches('/').to_string();
    match s.provider {
        Provider::OpenAi => u.set_path(&format!("{path}/models")),
        Provider::Anthropic => {
            let v1 = if path.ends_with("/v1") { "" } else { "/v1" };
            u.set_path(&format!("{path}{v1}/models"));
            if let Ok(mut seg) = u.path_segments_mut() {
                seg.push(&s.model);
            }
        }
    }
    Ok(u)
}

/// Whether an OpenAI-compatible model list (`{"data": [{"id": ...}]}`) names `model`:
/// `Some(false)` only when the list is readable, non-empty and lacks it (exactly, as
/// `model:latest`, or without a `vendor/` prefix); `None` when the list says nothing usable.
pub fn model_listed(list: &[u8], model: &str) -> Option<bool> {
    let v: serde_json::Value = serde_json::from_slice(list).ok()?;
    let ids: Vec<&str> = v
        .get("data")?
        .as_array()?
        .iter()
        .filter_map(|m| m.get("id").and_then(serde_json::Value::as_str))
        .collect();
    if ids.is_empty() {
        return None;
    }
    let bare = |x: &str| x.rsplit('/').next().unwrap_or(x).to_string();
    Some(
        ids.iter()
            .any(|id| *id == model || *id == format!("{model}:latest") || bare(id) == bare(model)),
    )
}

/// The authentication and version headers of one request.
pub fn auth_headers(s: &LlmSettings, key: &ApiKey) -> Vec<(&'static str, String)> {
    match s.provider {
        Provider::OpenAi => vec![("authorization", format!("Bearer {}", key.expose()))],
        Provider::Anthropic => vec![
            ("x-api-key", key.expose().to_string()),
            ("anthropic-version", anthropic::API_VERSION.to_string()),
        ],
    }
}

/// Parse a response body of `provider`. `Err` means the envelope itself is unusable.
pub fn parse_response(provider: Provider, bytes: &[u8]) -> Result<Completion, EnvelopeError> {
    match provider {
        Provider::OpenAi => openai::parse_response(bytes),
        Provider::Anthropic => anthropic::parse_response(bytes),
    }
}

/// Model families, for the warning that a judge shares its family with the model that
/// produced the trace (the paper's judge lies outside the evaluated base-model set).
pub fn model_family(model: &str) -> Option<&'static str> {
    let m = model.to_ascii_lowercase();
    let m = m.rsplit('/').next().unwrap_or(&m).to_string();
    let fams: &[(&[&str], &str)] = &[
        (
            &["gpt", "o1", "o3", "o4", "chatgpt", "davinci"],
            "openai-gpt",
        ),
        (&["claude"], "anthropic-claude"),
        (&["gemini", "gemma"], "google-gemini"),
        (&["llama", "meta-llama"], "meta-llama"),
        (&["qwen", "qwq"], "alibaba-qwen"),
        (&["deepseek"], "deepseek"),
        (&["mistral", "mixtral", "codestral", "devstral"], "mistral"),
        (&["grok"], "xai-grok"),
        (&["glm"], "zhipu-glm"),
        (&["kimi", "moonshot"], "moonshot-kimi"),
    ];
    fams.iter()
        .find(|(pre, _)| pre.iter().any(|p| m.starts_with(p)))
        .map(|(_, f)| *f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families() {
        assert_eq!(model_family("gpt-4o-mini"), Some("openai-gpt"));
        assert_eq!(model_family("openai/gpt-5"), Some("openai-gpt"));
        assert_eq!(model_family("claude-sonnet-4-5"), Some("anthropic-claude"));
        assert_eq!(model_family("Qwen2.5-Coder-32B"), Some("alibaba-qwen"));
        assert_eq!(model_family("unknown-thing"), None);
    }

    #[test]
    fn the_key_never_shows_in_debug() {
        let mut s = LlmSettings::from_env(Provider::OpenAi, "gpt-4o");
        s.api_key = ApiKey::new("sk-SECRET-123");
        assert!(!format!("{s:?}").contains("SECRET"));
    }
}
