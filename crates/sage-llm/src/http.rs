//! The HTTP transport: reqwest over rustls (ring), request timeouts, and exponential
//! backoff with jitter on 429, 5xx and timeouts, honouring `Retry-After`. Errors that cannot
//! succeed on retry (bad key, unknown model) come back as [`LlmError::Fatal`] at once.

use crate::cost::RunStats;
use crate::LlmError;
use rand::Rng;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

/// Install rustls' ring provider once; reqwest panics when building a client without one.
pub(crate) fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Err means another provider was installed first, which serves just as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// How transient failures are retried.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first try (so `max_retries + 1` tries in all).
    pub max_retries: u32,
    /// First backoff; doubled on each retry.
    pub base: Duration,
    /// Longest backoff computed by doubling.
    pub cap: Duration,
    /// Longest `Retry-After` honoured; a longer one is treated as this.
    pub max_retry_after: Duration,
    /// The whole-request deadline: every try, wait and retry of one call ends within it. A
    /// server that trickles its answer a
    /// byte at a time is cut off here instead of being retried for as long as it keeps the
    /// connection alive.
    pub deadline: Duration,
}

/// The default whole-request deadline ([`RetryPolicy::deadline`]).
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(300);

/// The default cap on one reply's body: a judgment is a few KiB, a model list a few hundred.
pub const DEFAULT_MAX_REPLY_BYTES: std::num::NonZeroU64 =
    std::num::NonZeroU64::new(32 << 20).unwrap();

/// How many times a reply's cap a batch result file may be (it holds every answer of a batch).
pub const BATCH_FILE_FACTOR: u64 = 16;

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 6,
            base: Duration::from_millis(500),
            cap: Duration::from_secs(60),
            max_retry_after: Duration::from_secs(600),
            deadline: DEFAULT_DEADLINE,
        }
    }
}

impl RetryPolicy {
    /// Backoff before retry number `n` (0-based): `min(cap, base·2^n)`, jittered to between
    /// half and all of it so concurrent callers spread out.
    pub fn backoff(&self, n: u32) -> Duration {
        let full = self
            .base
            .saturating_mul(1u32.checked_shl(n.min(20)).unwrap_or(u32::MAX))
            .min(self.cap);
        let jitter: f64 = rand::thread_rng().gen_range(0.5..=1.0);
        full.mul_f64(jitter)
    }
}

/// A successful (2xx) response.
#[derive(Debug, Clone)]
pub struct HttpOk {
    pub status: u16,
    pub body: Vec<u8>,
    pub latency: Duration,
    pub retries: u32,
}

/// Connection failures retried before the endpoint is declared unreachable: a refused
/// connection rarely heals in seconds, and every turn of every case would wait it out.
pub const CONNECT_RETRIES: u32 = 2;

/// Redirects followed at most (all within the configured origin).
pub const MAX_REDIRECTS: usize = 5;

/// The shared HTTP client of one judge.
#[derive(Clone)]
pub struct Transport {
    client: reqwest::Client,
    retry: RetryPolicy,
    stats: Arc<RunStats>,
    /// The whole-request deadline ([`RetryPolicy::deadline`]).
    deadline: Duration,
    /// The cap on one reply's body ([`crate::LlmSettings::max_reply_bytes`]): a larger reply
    /// is refused while it is read, never held. A batch result file may be
    /// [`BATCH_FILE_FACTOR`] times as large.
    max_reply_bytes: u64,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport")
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

/// Why a single try failed.
enum TryError {
    Retry {
        why: String,
        retry_after: Option<Duration>,
    },
    /// No connection could be made (refused, no route, DNS).
    Unreachable(String),
    Stop(LlmError),
}

/// The redirect policy: follow only within the origin (scheme, host, port) of the request,
/// at most [`MAX_REDIRECTS`] times. reqwest strips `Authorization` across hosts but not
/// `x-api-key` (Anthropic's key header), so a redirect off the origin is refused outright:
/// no credential ever leaves for another host.
fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let first = attempt.previous().first().map(|u| u.origin());
        if first.is_some_and(|o| o != attempt.url().origin()) {
            let to = crate::secrets::display_url(attempt.url());
            attempt.error(format!(
                "refused a redirect to another origin ({to}): the API key is never sent to another host"
            ))
        } else if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error("too many redirects")
        } else {
            attempt.follow()
        }
    })
}

impl Transport {
    pub fn new(
        timeout: Duration,
        retry: RetryPolicy,
        stats: Arc<RunStats>,
        secrets: Vec<String>,
        max_reply_bytes: std::num::NonZeroU64,
    ) -> Result<Transport, LlmError> {
        install_crypto_provider();
        // Registered once for the whole process: scrubbed from everything sage writes.
        for s in &secrets {
            crate::secrets::register_secret(s);
        }
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(30)))
            .user_agent(concat!("sage/", env!("CARGO_PKG_VERSION")))
            .redirect(same_origin_redirects())
            .build()
            .map_err(|e| LlmError::Fatal(format!("cannot build the HTTP client: {e}")))?;
        Ok(Transport {
            client,
            retry,
            stats,
            deadline: retry.deadline,
            max_reply_bytes: max_reply_bytes.get(),
        })
    }

    /// Blank out secrets (an API key echoed by a server's error message, say): every secret
    /// registered with [`crate::secrets::register_secret`].
    pub fn scrub(&self, s: &str) -> String {
        crate::secrets::scrubbed(s)
    }

    /// The retry policy (callers retry unusable 200 answers with it too).
    pub fn retry_policy(&self) -> RetryPolicy {
        self.retry
    }

    /// POST `body` to `url`, retrying transient failures. `who` names the backend in
    /// messages (e.g. `openai:gpt-4o`), `key_var` the variable holding the key. A server that
    /// cannot be reached after [`CONNECT_RETRIES`] retries is a fatal error: the run stops
    /// once instead of every turn waiting out its retries.
    pub async fn post(
        &self,
        url: &url::Url,
        headers: &[(&str, String)],
        body: &[u8],
        who: &str,
        key_var: &str,
    ) -> Result<HttpOk, LlmError> {
        self.send(
            url,
            headers,
            Some((body, "application/json")),
            who,
            key_var,
            self.max_reply_bytes,
        )
        .await
    }

    /// POST `body` with its own content type (a batch file upload is `multipart/form-data`),
    /// retried like [`Transport::post`].
    pub async fn post_as(
        &self,
        url: &url::Url,
        headers: &[(&str, String)],
        body: &[u8],
        content_type: &str,
        who: &str,
        key_var: &str,
    ) -> Result<HttpOk, LlmError> {
        self.send(
            url,
            headers,
            Some((body, content_type)),
            who,
            key_var,
            self.max_reply_bytes,
        )
        .await
    }

    /// GET `url` (a model lookup before any scoring), retrying transient failures like
    /// [`Transport::post`].
    pub async fn get(
        &self,
        url: &url::Url,
        headers: &[(&str, String)],
        who: &str,
        key_var: &str,
    ) -> Result<HttpOk, LlmError> {
        self.send(url, headers, None, who, key_var, self.max_reply_bytes)
            .await
    }

    /// GET a batch result file: like [`Transport::get`], with room for every answer of a
    /// batch ([`BATCH_FILE_FACTOR`] times the reply cap).
    pub async fn get_file(
        &self,
        url: &url::Url,
        headers: &[(&str, String)],
        who: &str,
        key_var: &str,
    ) -> Result<HttpOk, LlmError> {
        let cap = self.max_reply_bytes.saturating_mul(BATCH_FILE_FACTOR);
        self.send(url, headers, None, who, key_var, cap).await
    }

    async fn send(
        &self,
        url: &url::Url,
        headers: &[(&str, String)],
        body: Option<(&[u8], &str)>,
        who: &str,
        key_var: &str,
        cap: u64,
    ) -> Result<HttpOk, LlmError> {
        let started = Instant::now();
        let deadline = started + self.deadline;
        let past_deadline = || {
            LlmError::Transient(format!(
                "{who}: no complete answer within the whole-request deadline of {} s \
                 (every try and retry of one call; --deadline changes it)",
                self.deadline.as_secs()
            ))
        };
        let mut retries = 0u32;
        let mut unreachable = 0u32;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let tried =
                tokio::time::timeout(left, self.try_once(url, headers, body, who, key_var, cap))
                    .await;
            let Ok(tried) = tried else {
                return Err(past_deadline());
            };
            match tried {
                Ok((status, bytes)) => {
                    return Ok(HttpOk {
                        status,
                        body: bytes,
                        latency: started.elapsed(),
                        retries,
                    })
                }
                Err(TryError::Stop(e)) => return Err(e),
                Err(TryError::Unreachable(why)) => {
                    if unreachable >= CONNECT_RETRIES.min(self.retry.max_retries) {
                        return Err(LlmError::Fatal(format!(
                            "{who}: the endpoint is unreachable after {} tries: {why}; is the server running, and is the base URL right?",
                            unreachable + 1
                        )));
                    }
                    let wait = self.retry.backoff(unreachable);
                    if Instant::now() + wait >= deadline {
                        return Err(past_deadline());
                    }
                    unreachable += 1;
                    retries += 1;
                    self.stats.http_retries.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(wait).await;
                }
                Err(TryError::Retry { why, retry_after }) => {
                    if retries >= self.retry.max_retries {
                        return Err(LlmError::Transient(format!(
                            "{who}: gave up after {} tries: {why}",
                            retries + 1
                        )));
                    }
                    let mut wait = self.retry.backoff(retries);
                    if let Some(ra) = retry_after {
                        wait = wait.max(ra.min(self.retry.max_retry_after));
                    }
                    if Instant::now() + wait >= deadline {
                        return Err(past_deadline());
                    }
                    retries += 1;
                    self.stats.http_retries.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    async fn try_once(
        &self,
        url: &url::Url,
        headers: &[(&str, String)],
        body: Option<(&[u8], &str)>,
        who: &str,
        key_var: &str,
        cap: u64,
    ) -> Result<(u16, Vec<u8>), TryError> {
        let shown = crate::secrets::display_url(url);
        let mut rb = match body {
            Some((body, content_type)) => self
                .client
                .post(url.clone())
                .header("content-type", content_type)
                .body(body.to_vec()),
            None => self.client.get(url.clone()),
        };
        for (k, v) in headers {
            rb = rb.header(*k, v.as_str());
        }
        let resp = match rb.send().await {
            Ok(r) => r,
            Err(e) => {
                // reqwest's messages name the URL, credentials and all: never shown as is
                let detail = self.scrub(&error_chain(&e));
                if e.is_redirect() {
                    return Err(TryError::Stop(LlmError::Fatal(format!(
                        "{who}: {shown}: {detail}; set the base URL to the final address"
                    ))));
                }
                if e.is_timeout() {
                    return Err(TryError::Retry {
                        why: "request timed out".to_string(),
                        retry_after: None,
                    });
                }
                if e.is_connect() {
                    return Err(TryError::Unreachable(format!(
                        "cannot connect to {shown}: {detail}"
                    )));
                }
                return Err(TryError::Retry {
                    why: detail,
                    retry_after: None,
                });
            }
        };
        let status = resp.status().as_u16();
        let retry_after = retry_after(resp.headers());
        // Read at most `cap` bytes: a server that answers with gigabytes is refused while
        // it is read, never held (`SAGE_MAX_REPLY_MB`).
        let too_big = || {
            TryError::Stop(LlmError::Fatal(format!(
                "{who}: the reply from {shown} is larger than {} (SAGE_MAX_REPLY_MB); an \
                 answer is a few KiB: is the base URL right?",
                human_bytes(cap)
            )))
        };
        if resp.content_length().is_some_and(|n| n > cap) {
            return Err(too_big());
        }
        let mut bytes: Vec<u8> = Vec::new();
        let mut resp = resp;
        loop {
            match resp.chunk().await {
                Ok(Some(chunk)) => {
                    if (bytes.len() + chunk.len()) as u64 > cap {
                        return Err(too_big());
                    }
                    bytes.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) => {
                    let why = if e.is_timeout() {
                        "timed out reading the response".to_string()
                    } else {
                        format!("reading the response: {}", self.scrub(&error_chain(&e)))
                    };
                    return Err(TryError::Retry {
                        why,
                        retry_after: None,
                    });
                }
            }
        }
        if (200..300).contains(&status) {
            return Ok((status, bytes));
        }
        let msg = self.scrub(&provider_message(&bytes));
        match status {
            401 | 403 => Err(TryError::Stop(LlmError::Fatal(format!(
                "{who}: HTTP {status}: the API key was refused ({msg}); check {key_var}"
            )))),
            404 => Err(TryError::Stop(LlmError::Fatal(format!(
                "{who}: HTTP 404 at {shown}: unknown model or endpoint ({msg}); check the model name and the base URL"
            )))),
            300..=399 => Err(TryError::Stop(LlmError::Fatal(format!(
                "{who}: HTTP {status} redirect from {shown} not followed; set the base URL to the final address"
            )))),
            408 | 409 | 425 | 429 | 500..=599 => Err(TryError::Retry {
                why: format!("HTTP {status}: {msg}"),
                retry_after,
            }),
            // The request itself was refused (too long, a parameter the server lacks): this
            // turn cannot be scored as sent; the caller decides whether to stop.
            400 | 413 | 422 => Err(TryError::Stop(LlmError::Invalid(format!(
                "{who}: the provider refused the request (HTTP {status}): {msg}"
            )))),
            _ => Err(TryError::Stop(LlmError::Fatal(format!(
                "{who}: HTTP {status}: {msg}"
            )))),
        }
    }
}

/// `n` bytes for a message: `32 MiB`, `1.5 KiB`, `12 bytes`.
fn human_bytes(n: u64) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else {
        format!("{n} bytes")
    }
}

/// An error and its sources, without the URL reqwest puts in its own message (that URL
/// may carry credentials; callers show the redacted one).
fn error_chain(e: &reqwest::Error) -> String {
    let own = match e.url() {
        Some(u) => e
            .to_string()
            .replace(u.as_str(), &crate::secrets::display_url(u)),
        None => e.to_string(),
    };
    let mut parts = vec![own];
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        let t = s.to_string();
        if !parts.iter().any(|p| p.contains(&t)) {
            parts.push(t);
        }
        src = s.source();
    }
    parts.join(": ")
}

/// `Retry-After` (seconds or an HTTP date) or OpenAI's `retry-after-ms`.
fn retry_after(h: &reqwest::header::HeaderMap) -> Option<Duration> {
    if let Some(ms) = h
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
    {
        return Some(Duration::from_secs_f64(ms.max(0.0) / 1000.0));
    }
    let v = h.get("retry-after")?.to_str().ok()?.trim();
    if let Ok(secs) = v.parse::<f64>() {
        return Some(Duration::from_secs_f64(secs.max(0.0)));
    }
    parse_http_date(v).map(|t| {
        t.duration_since(std::time::SystemTime::now())
            .unwrap_or(Duration::ZERO)
    })
}

/// Parse an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the only form servers send now.
fn parse_http_date(s: &str) -> Option<std::time::SystemTime> {
    let parts: Vec<&str> = s.split_whitespace().collect();
    if parts.len() != 6 || parts[5] != "GMT" {
        return None;
    }
    let day: u64 = parts[1].parse().ok()?;
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|m| *m == parts[2])? as u64
        + 1;
    let year: i64 = parts[3].parse().ok()?;
    let hms: Vec<u64> = parts[4]
        .split(':')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    if hms.len() != 3 {
        return None;
    }
    // days from civil (Howard Hinnant's algorithm)
    let (y, m) = if month <= 2 {
        (year - 1, month + 9)
    } else {
        (year, month - 3)
    };
    let era = y.div_euclid(400);
    let yoe = (y - era * 400) as u64;
    let doy = (153 * m + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146097 + doe as i64 - 719468;
    let secs = days * 86400 + (hms[0] * 3600 + hms[1] * 60 + hms[2]) as i64;
    u64::try_from(secs)
        .ok()
        .map(|s| std::time::UNIX_EPOCH + Duration::from_secs(s))
}

/// The error message a provider put in its body (`{"error":{"message":..}}`), or the body's
/// start.
fn provider_message(body: &[u8]) -> String {
    let v: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let m = v.as_ref().and_then(|v| {
        v.pointer("/error/message")
            .or_else(|| v.pointer("/error"))
            .or_else(|| v.pointer("/message"))
            .and_then(|m| m.as_str().map(str::to_string))
    });
    let s = m.unwrap_or_else(|| String::from_utf8_lossy(body).into_owned());
    let s = s.trim();
    if s.chars().count() > 300 {
        format!("{}…", s.chars().take(300).collect::<String>())
    } else if s.is_empty() {
        "no message".into()
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_and_caps() {
        let p = RetryPolicy {
            max_retries: 5,
            base: Duration::from_millis(100),
            cap: Duration::from_millis(350),
            max_retry_after: Duration::from_secs(1),
            deadline: DEFAULT_DEADLINE,
        };
        for _ in 0..20 {
            let b0 = p.backoff(0);
            assert!(b0 >= Duration::from_millis(50) && b0 <= Duration::from_millis(100));
            let b2 = p.backoff(2);
            assert!(b2 >= Duration::from_millis(175) && b2 <= Duration::from_millis(350));
            assert!(p.backoff(40) <= Duration::from_millis(350));
        }
    }

    #[test]
    fn http_dates_parse() {
        let t = parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(
            t.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs(),
            784111777
        );
        assert!(parse_http_date("soon").is_none());
    }

    #[test]
    fn provider_messages_are_extracted() {
        assert_eq!(
            provider_message(br#"{"error":{"message":"bad model"}}"#),
            "bad model"
        );
        assert_eq!(provider_message(b"oops"), "oops");
    }
}
