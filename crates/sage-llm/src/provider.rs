//! Each provider's request body and response parser, chosen by [`Provider`].

use crate::error::{EnvelopeError, MissingKey};
use crate::settings::{ApiKey, LlmSettings, Provider};
use crate::wire::{Completion, Output, Prompt};
use crate::{anthropic, openai};
use serde_json::Value;

/// The provider's request body for `p`.
pub fn request_body(s: &LlmSettings, p: &Prompt, out: &Output) -> Value {
    match s.provider {
        Provider::OpenAi => openai::request_body(s, p, out),
        Provider::Anthropic => anthropic::request_body(s, p, out),
    }
}

/// Parse a response body of `provider`. `Err` means the envelope itself is unusable.
pub fn parse_response(provider: Provider, bytes: &[u8]) -> Result<Completion, EnvelopeError> {
    match provider {
        Provider::OpenAi => openai::parse_response(bytes),
        Provider::Anthropic => anthropic::parse_response(bytes),
    }
}

/// The provider's endpoint URL as text (see [`endpoint_url`]).
pub fn endpoint(s: &LlmSettings) -> String {
    match s.provider {
        Provider::OpenAi => openai::endpoint(&s.base_url),
        Provider::Anthropic => anthropic::endpoint(&s.base_url),
    }
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

/// The authentication headers of a request: the key's, none for a server that needs no key
/// (`key_required` false: only Anthropic's version header), or which variable is unset.
pub fn auth(s: &LlmSettings) -> Result<Vec<(&'static str, String)>, MissingKey> {
    match &s.api_key {
        Some(key) => Ok(auth_headers(s, key)),
        None if !s.key_required => Ok(match s.provider {
            Provider::Anthropic => vec![("anthropic-version", anthropic::API_VERSION.to_string())],
            Provider::OpenAi => Vec::new(),
        }),
        None => Err(MissingKey(format!("{}: {} is not set", s.who(), s.key_var))),
    }
}
