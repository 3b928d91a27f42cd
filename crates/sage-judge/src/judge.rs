//! What a judge is, what it answers, and how a call fails.

use crate::request::TurnRequest;
use futures::future::BoxFuture;
use sage_llm::LlmError;
use sage_trace::score::{ContextUse, JudgeId, Judgment};

/// Why a judge produced no judgment.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum JudgeError {
    /// The answer was malformed (not JSON, wrong schema, score out of range): retryable.
    #[error("invalid judgment: {0}")]
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
    /// Turn k does not fit the judge's context budget even with every earlier turn
    /// digested: a per-turn outcome, never a reason to stop.
    #[error("context overflow: the smallest request for the turn needs ~{needed} tokens, the budget is {budget}")]
    ContextOverflow { needed: u64, budget: u64 },
}

impl From<LlmError> for JudgeError {
    fn from(e: LlmError) -> JudgeError {
        match e {
            LlmError::Invalid(m) => JudgeError::Invalid(m),
            LlmError::Transient(m) => JudgeError::Transient(m),
            LlmError::Fatal(m) => JudgeError::Fatal(m),
            LlmError::Budget(m) => JudgeError::Budget(m),
        }
    }
}

/// Which call of a turn this is: lets a backend key its ledger by run and attempt, so a
/// repeated run is a fresh sample and a retry is never answered from the previous attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CallInfo {
    /// Run index (0-based), as recorded in [`TurnScore::run`].
    pub run: u32,
    /// Attempt within the turn (1 = first).
    pub attempt: u32,
}

/// A judgment with what the backend knows about the call that produced it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct JudgeAnswer {
    pub judgment: Judgment,
    /// sha256 (hex) of the exact request body the backend sent (or replayed from its
    /// ledger); `None` for a judge that sends nothing, whose hash is [`TurnRequest::hash`].
    pub prompt_hash: Option<String>,
    /// How the prefix was fitted into the context budget (`None`: every turn whole).
    pub context: Option<ContextUse>,
}

/// A judge scores one turn from a prefix request.
pub trait Judge: Send + Sync {
    fn id(&self) -> JudgeId;
    /// Score the last turn of `req`. Quotes are verified by the caller, not the judge.
    fn judge<'a>(&'a self, req: &'a TurnRequest<'a>)
        -> BoxFuture<'a, Result<Judgment, JudgeError>>;
    /// Score with the call's run and attempt known. Backends that send requests override
    /// this to report the hash of exactly what they sent; the default calls [`Judge::judge`].
    fn judge_call<'a>(
        &'a self,
        req: &'a TurnRequest<'a>,
        call: CallInfo,
    ) -> BoxFuture<'a, Result<JudgeAnswer, JudgeError>> {
        let _ = call;
        Box::pin(async move {
            self.judge(req).await.map(|judgment| JudgeAnswer {
                judgment,
                prompt_hash: None,
                context: None,
            })
        })
    }
    /// A deterministic judge gives the same answer every time, so a rejected answer is not
    /// retried.
    fn deterministic(&self) -> bool {
        false
    }
}
