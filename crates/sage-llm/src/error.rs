//! Why a call failed: the errors of this crate.

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

/// A request that cannot be authenticated: the key's variable is unset for a server that
/// needs a key. The message names the variable, never a key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct MissingKey(pub String);
