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

#[cfg(test)]
mod tests {
    use super::*;

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
