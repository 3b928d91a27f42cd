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

mod error;
mod provider;
mod settings;
mod wire;

pub use error::{EnvelopeError, LlmError, MissingKey, UrlError};
pub use provider::{auth, auth_headers, endpoint, parse_response, request_body};
pub(crate) use settings::base_url;
pub use settings::{
    endpoint_url, max_reply_bytes, model_family, model_listed, models_url, ApiKey, Env,
    LlmSettings, Provider,
};
pub use wire::{Answer, Completion, Output, Prompt};

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
        let mut s = LlmSettings::from_env(Provider::OpenAi, "gpt-4o", &crate::Env::default());
        s.api_key = ApiKey::new("sk-SECRET-123");
        assert!(!format!("{s:?}").contains("SECRET"));
    }
}
