//! Scoring one turn: ask, check, ask again with the reason, or record a scoring failure.

use crate::judge::{CallInfo, Judge, JudgeError};
use crate::prefix::PrefixChain;
use crate::request::TurnRequest;
use crate::verify::verify_judgment;
use sage_trace::case::TaskContext;
use sage_trace::score::{Judgment, TurnOutcome, TurnScore, VerifiedQuote};
use sage_trace::{CanonicalTrace, RawStore, Turn};

/// The message sent back to the judge when its answer for turn `k` was rejected.
pub(crate) fn retry_feedback(k: usize, reason: &str) -> String {
    format!("Your previous answer was rejected: {reason}. Answer again, quoting turn {k} verbatim.")
}

/// The kind of a rejected answer, for the run's counts of what a judge gets wrong.
pub fn rejection_kind(reason: &str) -> &'static str {
    let r = reason;
    if r.contains("does not occur verbatim") {
        "quote-not-found"
    } else if r.contains("occurs only in a tool result") {
        "quote-outside-agent-text"
    } else if r.contains("addressed to the judge") {
        "quote-addresses-judge"
    } else if r.contains("has no quote") || r.contains("the quote is empty") {
        "score-without-quote"
    } else if r.contains("cut off") {
        "cut-off"
    } else if r.contains("refused") {
        "refused"
    } else {
        // not one JSON object, a missing or mistyped field, a score outside 0-3
        "schema"
    }
}

/// Score one turn with retries: a malformed answer or a quote that does not verify is sent
/// back with the reason, up to `max_attempts` in all; then the turn is a scoring failure.
/// A transport fault, a fatal or a budget error is returned as `Err` so the caller can stop
/// cleanly (a transport fault is retried by the backend, never by re-asking the model).
/// Quotes are verified against the embedded injection rules (the concurrent scorer takes
/// the run's, [`crate::concurrent::ScoreOptions::injection`]).
pub async fn score_turn(
    judge: &dyn Judge,
    task: &TaskContext,
    trace: &CanonicalTrace,
    store: &mut RawStore,
    k: usize,
    run: u32,
    max_attempts: std::num::NonZeroU32,
) -> Result<TurnOutcome, JudgeError> {
    score_turn_with(
        judge,
        task,
        trace,
        None,
        k,
        run,
        max_attempts,
        None,
        |turn, j| verify_judgment(store, turn, j, &crate::injection::Rules::embedded()),
    )
    .await
}

/// [`score_turn`] with the quote check supplied by the caller (e.g. a raw store behind a
/// lock, shared by the concurrent scorer). `verify` must behave like [`verify_judgment`].
#[allow(clippy::too_many_arguments)] // one call site per engine; a struct would only rename them
pub async fn score_turn_with<V>(
    judge: &dyn Judge,
    task: &TaskContext,
    trace: &CanonicalTrace,
    chain: Option<&PrefixChain>,
    k: usize,
    run: u32,
    max_attempts: std::num::NonZeroU32,
    stats: Option<&sage_llm::cost::RunStats>,
    mut verify: V,
) -> Result<TurnOutcome, JudgeError>
where
    V: FnMut(&Turn, &Judgment) -> Result<Vec<VerifiedQuote>, crate::QuoteRejected>,
{
    let Some(req) = TurnRequest::prefix(task, trace, k) else {
        return Ok(TurnOutcome::Failed {
            turn: k,
            attempts: 0,
            reason: format!("turn {k} is not in the trace"),
        });
    };
    let mut req = match chain {
        Some(c) => req.with_chain(c),
        None => req,
    };
    let turn = req.target();
    if !turn.is_applicable() {
        return Ok(TurnOutcome::Administrative { turn: k });
    }
    let max_attempts = if judge.deterministic() {
        1
    } else {
        max_attempts.get()
    };
    let mut reason = String::new();
    for attempt in 1..=max_attempts {
        let answer = judge.judge_call(&req, CallInfo { run, attempt }).await;
        let rejection = match answer {
            Ok(a) => match verify(turn, &a.judgment) {
                Ok(quotes) => {
                    let prompt_hash = a.prompt_hash.unwrap_or_else(|| req.hash());
                    return Ok(TurnOutcome::Scored(TurnScore {
                        turn: k,
                        judge: judge.id(),
                        run,
                        judgment: a.judgment,
                        quotes,
                        prompt_hash,
                        attempts: attempt,
                        context: a.context,
                    }));
                }
                Err(e) => e.0,
            },
            Err(JudgeError::Invalid(e)) => e,
            Err(JudgeError::ContextOverflow { needed, budget }) => {
                return Ok(TurnOutcome::ContextOverflow {
                    turn: k,
                    needed_tokens: needed,
                    budget_tokens: budget,
                })
            }
            // A transport fault (the backend already retried it) says nothing about the
            // model's answer: it is not fed back as a rejection and uses no attempt; the run
            // stops with it instead.
            Err(e) => return Err(e),
        };
        if let Some(st) = stats {
            st.reject(rejection_kind(&rejection));
        }
        reason = rejection;
        req.feedback = Some(retry_feedback(k, &reason));
    }
    Ok(TurnOutcome::Failed {
        turn: k,
        attempts: max_attempts,
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejections_are_counted_by_kind() {
        let k = |r: &str| rejection_kind(r);
        assert_eq!(
            k("DI: the quote \"x\" does not occur verbatim in turn 3"),
            "quote-not-found"
        );
        assert_eq!(
            k("TR: the quote \"x\" occurs only in a tool result of turn 3, which"),
            "quote-outside-agent-text"
        );
        assert_eq!(
            k("SA: the quote \"x\" is text in turn 2 addressed to the judge (injection rule r)"),
            "quote-addresses-judge"
        );
        assert_eq!(k("VR score 2 has no quote"), "score-without-quote");
        assert_eq!(
            k("the answer was cut off at the token limit (finish_reason=length); answer briefly"),
            "cut-off"
        );
        assert_eq!(
            k("\"DI\".score must be an integer 0-3, got \"high\""),
            "schema"
        );
        assert_eq!(k("the answer is not one JSON object (EOF)"), "schema");
    }
}
