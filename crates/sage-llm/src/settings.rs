//! Which provider and model a call goes to, with what key, endpoint and limits.

use crate::cost::{self, Price};
use crate::error::UrlError;
use crate::http::RetryPolicy;
use crate::secrets;
use std::time::Duration;

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
    /// A key must be set (false for a local server that takes none: no header is sent).
    pub key_required: bool,
    /// OpenAI-compatible only: send `cache_prompt: true` (llama-server keeps the prompt in
    /// its KV cache, so the next request's shared prefix is not evaluated again).
    pub cache_prompt: bool,
    /// The cap on one reply's body, in bytes: `SAGE_MAX_REPLY_MB` of the environment given
    /// ([`max_reply_bytes`]), else [`crate::http::DEFAULT_MAX_REPLY_BYTES`].
    pub max_reply_bytes: std::num::NonZeroU64,
}

/// The reply cap `env` sets (`SAGE_MAX_REPLY_MB`, mebibytes): the default when unset; an
/// error when set to anything but a positive number (the CLI names it; the default holds).
pub fn max_reply_bytes(env: &Env) -> Result<std::num::NonZeroU64, &'static str> {
    match env.var("SAGE_MAX_REPLY_MB") {
        None => Ok(crate::http::DEFAULT_MAX_REPLY_BYTES),
        Some(v) => v
            .trim()
            .parse::<std::num::NonZeroU64>()
            .ok()
            .map(|n| n.saturating_mul(std::num::NonZeroU64::new(1 << 20).unwrap()))
            .ok_or("not a positive number"),
    }
}

/// The environment variables a run may read (API keys, base URLs, a named judge's `*_env`
/// settings), read once by the CLI and passed as a value: no library reads the process
/// environment (docs/architecture.md).
#[derive(Debug, Clone, Default)]
pub struct Env {
    vars: std::collections::BTreeMap<String, String>,
}

impl Env {
    /// The variables given (the CLI passes `std::env::vars()`); non-UTF-8 values are absent.
    pub fn from_vars(vars: impl IntoIterator<Item = (String, String)>) -> Env {
        Env {
            vars: vars.into_iter().collect(),
        }
    }

    /// The value of `var`, if set.
    pub fn var(&self, var: &str) -> Option<&str> {
        self.vars.get(var).map(String::as_str)
    }
}

impl LlmSettings {
    /// Settings from the conventional environment variables of `env`.
    pub fn from_env(provider: Provider, model: &str, env: &Env) -> LlmSettings {
        let base_url = env
            .var(provider.base_var())
            .map(str::to_string)
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| provider.default_base().to_string());
        LlmSettings {
            provider,
            name: provider.name().to_string(),
            model: model.to_string(),
            base_url,
            api_key: env.var(provider.key_var()).and_then(ApiKey::new),
            key_var: provider.key_var().to_string(),
            temperature: None,
            max_tokens: None,
            json_schema: true,
            timeout: Duration::from_secs(120),
            retry: RetryPolicy::default(),
            price: cost::price_for(model, &Default::default()),
            key_required: true,
            cache_prompt: false,
            max_reply_bytes: max_reply_bytes(env).unwrap_or(crate::http::DEFAULT_MAX_REPLY_BYTES),
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

/// A base URL, checked: absolute, `http` or `https`, with a host; no fragment.
pub(crate) fn base_url(base: &str) -> Result<url::Url, UrlError> {
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
