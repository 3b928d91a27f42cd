//! Tokens, prices, the budget and the counters behind the progress bar and cost summary.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Token counts of one call, from the API's usage fields (kept in a ledger entry as
/// `sage-judge`'s `ledger::schema::Usage`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// All prompt tokens, cached or not.
    pub input_tokens: u64,
    /// Prompt tokens read from the provider's prefix cache.
    pub cached_input_tokens: u64,
    /// Prompt tokens written to the provider's cache (Anthropic bills these higher).
    pub cache_write_tokens: u64,
    pub output_tokens: u64,
}

/// USD per million tokens.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input: f64,
    /// Cached prompt tokens; defaults to `input`.
    #[serde(default)]
    pub cached_input: Option<f64>,
    /// Cache writes; defaults to `input`.
    #[serde(default)]
    pub cache_write: Option<f64>,
    pub output: f64,
}

impl Price {
    const fn new(input: f64, cached: f64, write: f64, output: f64) -> Price {
        Price {
            input,
            cached_input: Some(cached),
            cache_write: Some(write),
            output,
        }
    }

    pub fn cost(&self, u: &Usage) -> f64 {
        let cached = u.cached_input_tokens.min(u.input_tokens);
        let write = u.cache_write_tokens.min(u.input_tokens - cached);
        let plain = u.input_tokens - cached - write;
        (plain as f64 * self.input
            + cached as f64 * self.cached_input.unwrap_or(self.input)
            + write as f64 * self.cache_write.unwrap_or(self.input)
            + u.output_tokens as f64 * self.output)
            / 1e6
    }
}

/// Built-in list prices (USD per million tokens; public list prices when this table was
/// written; `[prices]` in `sage.toml` overrides or extends them). Matched by the longest
/// model-name prefix.
pub const DEFAULT_PRICES: &[(&str, Price)] = &[
    ("gpt-4o-mini", Price::new(0.15, 0.075, 0.15, 0.60)),
    ("gpt-4o", Price::new(2.50, 1.25, 2.50, 10.0)),
    ("gpt-4.1-nano", Price::new(0.10, 0.025, 0.10, 0.40)),
    ("gpt-4.1-mini", Price::new(0.40, 0.10, 0.40, 1.60)),
    ("gpt-4.1", Price::new(2.0, 0.50, 2.0, 8.0)),
    ("gpt-5-nano", Price::new(0.05, 0.005, 0.05, 0.40)),
    ("gpt-5-mini", Price::new(0.25, 0.025, 0.25, 2.0)),
    ("gpt-5", Price::new(1.25, 0.125, 1.25, 10.0)),
    ("o4-mini", Price::new(1.10, 0.275, 1.10, 4.40)),
    ("claude-3-5-haiku", Price::new(0.80, 0.08, 1.0, 4.0)),
    ("claude-haiku-4", Price::new(1.0, 0.10, 1.25, 5.0)),
    ("claude-sonnet-4", Price::new(3.0, 0.30, 3.75, 15.0)),
    ("claude-3-7-sonnet", Price::new(3.0, 0.30, 3.75, 15.0)),
    ("claude-opus-4", Price::new(15.0, 1.50, 18.75, 75.0)),
];

/// The price of `model`: the config table first, then the built-in one, longest prefix wins.
pub fn price_for(model: &str, table: &BTreeMap<String, Price>) -> Option<Price> {
    let bare = model.rsplit('/').next().unwrap_or(model); // openrouter-style `vendor/model`
    let best = |it: &mut dyn Iterator<Item = (&str, Price)>| {
        it.filter(|(p, _)| model.starts_with(p) || bare.starts_with(p))
            .max_by_key(|(p, _)| p.len())
            .map(|(_, pr)| pr)
    };
    best(&mut table.iter().map(|(k, v)| (k.as_str(), *v)))
        .or_else(|| best(&mut DEFAULT_PRICES.iter().map(|(k, v)| (*k, *v))))
}

/// Counters shared by every judge of one session: what the progress bar and the cost
/// summary show. Costs are kept in micro-dollars so they can be atomics.
#[derive(Debug, Default)]
pub struct RunStats {
    pub turns_scored: AtomicU64,
    pub turns_failed: AtomicU64,
    /// Turns that could not fit the judge's context budget (outcome context-overflow).
    pub turns_overflowed: AtomicU64,
    pub api_calls: AtomicU64,
    pub ledger_hits: AtomicU64,
    pub batch_hits: AtomicU64,
    /// HTTP retries (429, 5xx, timeouts) plus judgment retries (invalid output, bad quotes).
    pub http_retries: AtomicU64,
    pub judgment_retries: AtomicU64,
    pub input_tokens: AtomicU64,
    pub cached_input_tokens: AtomicU64,
    pub output_tokens: AtomicU64,
    pub cost_micro_usd: AtomicU64,
    /// Calls whose model has no known price (their cost is counted as 0).
    pub unpriced_calls: AtomicU64,
    /// Warnings raised during the run (each once), printed with the summary by the caller.
    pub warnings: Mutex<Vec<String>>,
    /// Rejected judge answers by kind (`schema`, `quote-not-found`, ...): what a judge gets
    /// wrong, counted per attempt.
    pub rejections: Mutex<std::collections::BTreeMap<&'static str, u64>>,
}

impl RunStats {
    pub fn add_usage(&self, u: &Usage, cost: Option<f64>) {
        self.input_tokens
            .fetch_add(u.input_tokens, Ordering::Relaxed);
        self.cached_input_tokens
            .fetch_add(u.cached_input_tokens, Ordering::Relaxed);
        self.output_tokens
            .fetch_add(u.output_tokens, Ordering::Relaxed);
        match cost {
            Some(c) => {
                self.cost_micro_usd
                    .fetch_add((c * 1e6).round() as u64, Ordering::Relaxed);
            }
            None => {
                self.unpriced_calls.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Count one rejected answer of `kind`.
    pub fn reject(&self, kind: &'static str) {
        *self
            .rejections
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(kind)
            .or_insert(0) += 1;
    }

    /// Record a warning once (a repeated warning is not added again).
    pub fn warn(&self, message: impl Into<String>) {
        let m = message.into();
        let mut w = self.warnings.lock().unwrap_or_else(|p| p.into_inner());
        if !w.contains(&m) {
            w.push(m);
        }
    }

    pub fn cost_usd(&self) -> f64 {
        self.cost_micro_usd.load(Ordering::Relaxed) as f64 / 1e6
    }

    fn get(a: &AtomicU64) -> u64 {
        a.load(Ordering::Relaxed)
    }

    /// The one-line progress message.
    pub fn progress_line(&self) -> String {
        format!(
            "cache hits {} · api calls {} · retries {} · ${:.4}",
            Self::get(&self.ledger_hits) + Self::get(&self.batch_hits),
            Self::get(&self.api_calls),
            Self::get(&self.http_retries) + Self::get(&self.judgment_retries),
            self.cost_usd()
        )
    }
}

/// The cost summary printed after a run.
impl fmt::Display for RunStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let g = Self::get;
        writeln!(
            f,
            "judge calls: {} to the API, {} replayed from the ledger, {} from a batch import",
            g(&self.api_calls),
            g(&self.ledger_hits),
            g(&self.batch_hits)
        )?;
        writeln!(
            f,
            "turns: {} scored, {} scoring failures, {} context-overflow; retries: {} transport, {} judgment",
            g(&self.turns_scored),
            g(&self.turns_failed),
            g(&self.turns_overflowed),
            g(&self.http_retries),
            g(&self.judgment_retries)
        )?;
        writeln!(
            f,
            "tokens (new calls): {} prompt ({} cached), {} output",
            g(&self.input_tokens),
            g(&self.cached_input_tokens),
            g(&self.output_tokens)
        )?;
        let rejected = self.rejections.lock().unwrap_or_else(|p| p.into_inner());
        if !rejected.is_empty() {
            let by: Vec<String> = rejected.iter().map(|(k, n)| format!("{n} {k}")).collect();
            writeln!(f, "rejected answers: {}", by.join(", "))?;
        }
        drop(rejected);
        write!(f, "cost of new calls: ${:.4}", self.cost_usd())?;
        if g(&self.unpriced_calls) > 0 {
            write!(
                f,
                " (+ {} calls of a model with no known price; add it under [prices] in sage.toml)",
                g(&self.unpriced_calls)
            )?;
        }
        for w in self
            .warnings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            write!(f, "\nwarning: {w}")?;
        }
        Ok(())
    }
}

/// The spending limit: a call reserves its estimated cost before it is sent and settles the
/// real cost after, so concurrent calls cannot overshoot the budget by more than estimates
/// miss.
#[derive(Debug)]
pub struct CostMeter {
    budget_usd: Option<f64>,
    state: Mutex<(f64, f64)>, // (spent, reserved)
}

impl CostMeter {
    pub fn new(budget_usd: Option<f64>) -> Self {
        CostMeter {
            budget_usd,
            state: Mutex::new((0.0, 0.0)),
        }
    }

    pub fn budget(&self) -> Option<f64> {
        self.budget_usd
    }

    /// Reserve `estimate` USD; `Err` when the budget would be exceeded.
    pub fn reserve(&self, estimate: f64) -> Result<(), BudgetExceeded> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(b) = self.budget_usd {
            if st.0 + st.1 + estimate > b {
                return Err(BudgetExceeded(format!(
                    "budget ${b:.4} reached (spent ${:.4}, in flight ${:.4}, next call ~${estimate:.4})",
                    st.0, st.1
                )));
            }
        }
        st.1 += estimate;
        Ok(())
    }

    /// Replace a reservation by the real cost (`None`: the call was not made).
    pub fn settle(&self, estimate: f64, actual: Option<f64>) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.1 = (st.1 - estimate).max(0.0);
        if let Some(a) = actual {
            st.0 += a;
        }
    }

    pub fn spent(&self) -> f64 {
        self.state.lock().map(|s| s.0).unwrap_or(0.0)
    }
}

/// A call that would take the spending past `--budget` (the message gives the budget, what
/// is spent, what is in flight and the call's estimate).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct BudgetExceeded(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_match_longest_prefix_and_config_wins() {
        let t = BTreeMap::new();
        assert_eq!(price_for("gpt-4o-mini-2024-07-18", &t).unwrap().input, 0.15);
        assert_eq!(price_for("gpt-4o-2024-08-06", &t).unwrap().input, 2.5);
        assert_eq!(price_for("openai/gpt-4.1-mini", &t).unwrap().input, 0.4);
        assert!(price_for("llama3", &t).is_none());
        let mut t = BTreeMap::new();
        t.insert(
            "gpt-4o".to_string(),
            Price {
                input: 1.0,
                cached_input: None,
                cache_write: None,
                output: 2.0,
            },
        );
        assert_eq!(price_for("gpt-4o-2024", &t).unwrap().input, 1.0);
    }

    #[test]
    fn cost_counts_cached_tokens_at_their_price() {
        let p = Price::new(2.0, 0.5, 2.0, 8.0);
        let u = Usage {
            input_tokens: 1_000_000,
            cached_input_tokens: 500_000,
            cache_write_tokens: 0,
            output_tokens: 100_000,
        };
        assert!((p.cost(&u) - (1.0 + 0.25 + 0.8)).abs() < 1e-9);
    }

    #[test]
    fn budget_reserves_and_settles() {
        let m = CostMeter::new(Some(1.0));
        m.reserve(0.6).unwrap();
        assert!(m.reserve(0.6).is_err());
        m.settle(0.6, Some(0.3));
        m.reserve(0.6).unwrap();
        assert!((m.spent() - 0.3).abs() < 1e-12);
        assert!(CostMeter::new(None).reserve(1e9).is_ok());
    }
}
