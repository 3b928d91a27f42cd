//! Secrets: API keys and the credentials in base URLs. Every secret sage is configured with
//! is registered here once and blanked out of everything sage writes or prints ([`scrub`]):
//! results, pages, packets, the ledger, request bodies and messages. See `docs/security.md`.

use std::borrow::Cow;
use std::sync::RwLock;

static SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Shortest value treated as a secret: shorter ones would blank ordinary words.
pub const MIN_SECRET_LEN: usize = 8;

/// Remember a secret (an API key, a password in a base URL) so [`scrub`] blanks it out of
/// everything sage writes or prints. Values shorter than [`MIN_SECRET_LEN`] are ignored.
pub(crate) fn register_secret(s: &str) {
    let s = s.trim();
    if s.chars().count() < MIN_SECRET_LEN {
        return;
    }
    let mut v = SECRETS.write().unwrap_or_else(|p| p.into_inner());
    let mut forms = vec![s.to_string()];
    // the forms the value takes inside JSON and URLs
    let json = serde_json::to_string(s).unwrap_or_default();
    forms.push(json[1..json.len().saturating_sub(1)].to_string());
    // (the HTML form needs no entry: pages scrub text before escaping it)
    forms.push(
        percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string(),
    );
    for f in forms {
        if f.len() >= MIN_SECRET_LEN && !v.contains(&f) {
            v.push(f);
        }
    }
    // longest first, so a secret that contains another is blanked whole
    v.sort_by_key(|f| std::cmp::Reverse(f.len()));
}

/// Environment variables whose values are secrets: the provider keys and anything named
/// like a key, token, secret or password.
pub(crate) fn is_secret_var(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    [
        "_API_KEY",
        "_APIKEY",
        "_TOKEN",
        "_SECRET",
        "_SECRET_KEY",
        "_PASSWORD",
        "_ACCESS_KEY",
    ]
    .iter()
    .any(|s| n.ends_with(s))
        || n == "API_KEY"
}

/// Register every secret among environment variables `vars` (the CLI passes the process
/// environment; no library reads it): [`is_secret_var`] values and the credentials of
/// `*_BASE_URL` variables.
pub fn register_env_secrets<K: AsRef<std::ffi::OsStr>, V: AsRef<std::ffi::OsStr>>(
    vars: impl IntoIterator<Item = (K, V)>,
) {
    for (k, v) in vars {
        let (Some(k), Some(v)) = (k.as_ref().to_str(), v.as_ref().to_str()) else {
            continue;
        };
        if is_secret_var(k) {
            register_secret(v);
        }
        if k.ends_with("_BASE_URL") {
            for s in url_credentials(v) {
                register_secret(&s);
            }
        }
    }
}

/// The credentials a URL carries: the user name and password of `user:pass@`, and the
/// values of query parameters (`?api-key=...`, `?key=...`).
pub(crate) fn url_credentials(u: &str) -> Vec<String> {
    let Ok(url) = url::Url::parse(u.trim()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let dec = |s: &str| {
        percent_encoding::percent_decode_str(s)
            .decode_utf8_lossy()
            .into_owned()
    };
    if !url.username().is_empty() {
        out.push(dec(url.username()));
    }
    if let Some(p) = url.password() {
        out.push(dec(p));
    }
    for (_, v) in url.query_pairs() {
        out.push(v.into_owned());
    }
    out.retain(|s| !s.is_empty());
    out
}

/// A URL as it may be shown: without user name, password and query values.
pub fn display_url(url: &url::Url) -> String {
    let mut u = url.clone();
    let _ = u.set_username("");
    let _ = u.set_password(None);
    if u.query().is_some() {
        let names: Vec<String> = url
            .query_pairs()
            .map(|(k, _)| format!("{k}=[redacted]"))
            .collect();
        u.set_query(Some(&names.join("&")));
    }
    u.to_string()
}

/// `s` with every registered secret replaced by `[redacted]`.
pub fn scrub(s: &str) -> Cow<'_, str> {
    let v = SECRETS.read().unwrap_or_else(|p| p.into_inner());
    if v.iter().all(|k| !s.contains(k.as_str())) {
        return Cow::Borrowed(s);
    }
    let mut out = s.to_string();
    for k in v.iter() {
        if out.contains(k.as_str()) {
            out = out.replace(k.as_str(), "[redacted]");
        }
    }
    Cow::Owned(out)
}

/// [`scrub`] into an owned string.
pub fn scrubbed(s: impl AsRef<str>) -> String {
    scrub(s.as_ref()).into_owned()
}

/// A writer that blanks every registered secret out of what passes through it, as [`scrub`]
/// does to a whole text: for output too large to hold (a result set of a long trace is tens
/// of megabytes). It holds back the last bytes that could still be the start of a secret
/// until more come or [`ScrubWriter::finish`]; with no secret registered it passes bytes
/// straight through.
pub struct ScrubWriter<W: std::io::Write> {
    inner: W,
    secrets: Vec<Vec<u8>>,
    /// The longest secret's length less one: bytes that may begin a secret not yet complete.
    keep: usize,
    pending: Vec<u8>,
}

impl<W: std::io::Write> ScrubWriter<W> {
    pub fn new(inner: W) -> Self {
        let secrets: Vec<Vec<u8>> = SECRETS
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect();
        let keep = secrets.iter().map(Vec::len).max().unwrap_or(1) - 1;
        ScrubWriter {
            inner,
            secrets,
            keep,
            pending: Vec::new(),
        }
    }

    /// Write what is held back and return the inner writer.
    pub fn finish(mut self) -> std::io::Result<W> {
        self.drain(true)?;
        Ok(self.inner)
    }

    fn drain(&mut self, all: bool) -> std::io::Result<()> {
        loop {
            // The earliest secret, the longest at that position.
            let hit = self
                .secrets
                .iter()
                .filter_map(|s| memchr::memmem::find(&self.pending, s).map(|at| (at, s.len())))
                .min_by_key(|&(at, len)| (at, std::cmp::Reverse(len)));
            // A hit near the end may yet be the start of a longer secret: wait for more.
            let settled = |at: usize| all || at + self.keep < self.pending.len();
            match hit {
                Some((at, len)) if settled(at) => {
                    self.inner.write_all(&self.pending[..at])?;
                    self.inner.write_all(b"[redacted]")?;
                    self.pending.drain(..at + len);
                }
                _ => {
                    let mut safe = if all {
                        self.pending.len()
                    } else {
                        self.pending.len().saturating_sub(self.keep)
                    };
                    if let Some((at, _)) = hit {
                        safe = safe.min(at);
                    }
                    self.inner.write_all(&self.pending[..safe])?;
                    self.pending.drain(..safe);
                    return Ok(());
                }
            }
        }
    }
}

impl<W: std::io::Write> std::io::Write for ScrubWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.secrets.is_empty() {
            return self.inner.write(buf);
        }
        self.pending.extend_from_slice(buf);
        self.drain(false)?;
        Ok(buf.len())
    }

    /// Flushes the inner writer; bytes that may begin a secret stay held until
    /// [`ScrubWriter::finish`].
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scrub_writer_blanks_what_scrub_blanks_however_the_bytes_arrive() {
        use std::io::Write as _;
        register_secret("sk-unit-STREAM-abcdefgh-1");
        register_secret("sk-unit-STREAM-abcdefgh-1-longer");
        let text = "x sk-unit-STREAM-abcdefgh-1 y sk-unit-STREAM-abcdefgh-1-longer z \
                    sk-unit-STREAM-abcdefgh-1sk-unit-STREAM-abcdefgh-1 end sk-unit-STREAM";
        for chunk in [1, 2, 3, 7, 16, 1000] {
            let mut w = ScrubWriter::new(Vec::new());
            for piece in text.as_bytes().chunks(chunk) {
                w.write_all(piece).unwrap();
            }
            let out = String::from_utf8(w.finish().unwrap()).unwrap();
            assert_eq!(out, scrub(text), "chunks of {chunk}");
            assert!(!out.contains("abcdefgh"), "{out}");
            assert!(out.ends_with("end sk-unit-STREAM"), "{out}");
        }
    }

    #[test]
    fn secrets_are_scrubbed_in_every_form() {
        register_secret("sk-unit-SCRUB-\"quoted\"-1234");
        let s = "a sk-unit-SCRUB-\"quoted\"-1234 b sk-unit-SCRUB-\\\"quoted\\\"-1234 c";
        let out = scrub(s);
        assert!(!out.contains("SCRUB"), "{out}");
        register_secret("short");
        assert_eq!(scrub("short"), "short");
        let creds = url_credentials("https://user:p%40ss-word-1@h.example/v1?api-key=k-123456789");
        assert_eq!(creds, ["user", "p@ss-word-1", "k-123456789"]);
        let u =
            url::Url::parse("https://user:pw-secret-1@h.example/v1?api-key=k-123456789").unwrap();
        let d = display_url(&u);
        assert!(
            !d.contains("pw-secret") && !d.contains("k-1234") && d.contains("api-key="),
            "{d}"
        );
    }
}
