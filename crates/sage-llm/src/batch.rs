//! The providers' batch APIs, as a transport: hand over many request bodies at once, ask how
//! far they are, fetch the result file.
//!
//! - OpenAI Batch API: the requests are one JSONL file (`{custom_id, method, url, body}` per
//!   line), uploaded with `POST {base}/files` as `multipart/form-data` with `purpose=batch`;
//!   `POST {base}/batches` with `{input_file_id, endpoint: "/v1/chat/completions",
//!   completion_window: "24h"}` starts it; `GET {base}/batches/{id}` reports `status`
//!   (`validating`, `in_progress`, `finalizing`, `cancelling` while running; `completed`,
//!   `expired`, `cancelled` with an `output_file_id` and/or `error_file_id`; `failed`), and
//!   `GET {base}/files/{file_id}/content` is the result JSONL.
//! - Anthropic Message Batches: `POST {base}/v1/messages/batches` with
//!   `{requests: [{custom_id, params}]}`; `GET {base}/v1/messages/batches/{id}` reports
//!   `processing_status` (`in_progress`, `canceling`, `ended`) and, once ended, a
//!   `results_url` whose JSONL has one `{custom_id, result: {type, message|error}}` per
//!   request.
//!
//! Like the rest of this crate it knows nothing of judgments: the caller gives
//! `(custom_id, body)` pairs and reads raw response bodies back by `custom_id`.

use crate::http::Transport;
use crate::{ApiKey, LlmError, LlmSettings, Provider};
use serde_json::{json, Value};

/// Requests one OpenAI batch may hold ("up to 50,000 requests").
pub const OPENAI_MAX_REQUESTS: usize = 50_000;
/// Bytes one OpenAI batch input file may have ("up to 200 MB"); kept a little under.
pub const OPENAI_MAX_BYTES: usize = 190 * 1000 * 1000;
/// Requests one Anthropic message batch may hold.
pub const ANTHROPIC_MAX_REQUESTS: usize = 100_000;
/// Bytes one Anthropic message batch request may have (256 MB); kept a little under.
pub const ANTHROPIC_MAX_BYTES: usize = 240 * 1000 * 1000;
/// Both providers bill batch requests at half the price of the same request sent live.
pub const BATCH_PRICE_FACTOR: f64 = 0.5;

/// The most requests and bytes one batch of `p` may carry.
pub fn limits(p: Provider) -> (usize, usize) {
    match p {
        Provider::OpenAi => (OPENAI_MAX_REQUESTS, OPENAI_MAX_BYTES),
        Provider::Anthropic => (ANTHROPIC_MAX_REQUESTS, ANTHROPIC_MAX_BYTES),
    }
}

/// One line of a batch input (OpenAI: a JSONL line of the input file; Anthropic: one
/// element of `requests`). `body` is inserted byte for byte, so what the provider runs is
/// exactly the request whose hash keys the caller's records.
pub fn request_line(provider: Provider, custom_id: &str, body: &[u8]) -> String {
    let body = String::from_utf8_lossy(body);
    let id = Value::String(custom_id.to_string());
    match provider {
        Provider::OpenAi => format!(
            "{{\"custom_id\":{id},\"method\":\"POST\",\"url\":\"/v1/chat/completions\",\"body\":{body}}}"
        ),
        Provider::Anthropic => format!("{{\"custom_id\":{id},\"params\":{body}}}"),
    }
}

/// A submitted batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submitted {
    /// The provider's batch id (`batch_...`, `msgbatch_...`).
    pub id: String,
    /// The uploaded input file (OpenAI).
    pub input_file_id: Option<String>,
}

/// Where a batch is.
#[derive(Debug, Clone, PartialEq)]
pub enum BatchState {
    /// Still running; `detail` is the provider's status and request counts.
    Running { detail: String },
    /// Processing is over (completed, expired or cancelled): the result files to fetch
    /// (OpenAI: output and error file; Anthropic: the results URL).
    Ended {
        detail: String,
        files: Vec<url::Url>,
    },
    /// The provider refused the batch as a whole (OpenAI `failed`: an invalid input file).
    Failed { detail: String },
}

fn who(s: &LlmSettings) -> String {
    s.who()
}

fn key(s: &LlmSettings) -> Result<&ApiKey, LlmError> {
    s.api_key.as_ref().ok_or_else(|| {
        LlmError::Fatal(format!(
            "{}: {} is not set (needed for the batch API)",
            who(s),
            s.key_var
        ))
    })
}

/// `{base}` + the path segments, parsed like [`crate::endpoint_url`]: Anthropic paths get
/// `/v1` unless the base already ends with it; a query string and credentials stay put.
fn api_url(s: &LlmSettings, segments: &[&str]) -> Result<url::Url, LlmError> {
    let mut u =
        crate::base_url(&s.base_url).map_err(|m| LlmError::Fatal(format!("{}: {m}", who(s))))?;
    let path = u.path().trim_end_matches('/').to_string();
    let v1 = match s.provider {
        Provider::Anthropic if !path.ends_with("/v1") => "/v1",
        _ => "",
    };
    u.set_path(&format!("{path}{v1}"));
    if let Ok(mut seg) = u.path_segments_mut() {
        seg.pop_if_empty();
        for p in segments {
            seg.push(p);
        }
    }
    Ok(u)
}

fn json_of(bytes: &[u8], what: &str, s: &LlmSettings) -> Result<Value, LlmError> {
    serde_json::from_slice(bytes).map_err(|e| {
        LlmError::Transient(format!("{}: {what}: the answer is not JSON ({e})", who(s)))
    })
}

fn str_field(v: &Value, field: &str, what: &str, s: &LlmSettings) -> Result<String, LlmError> {
    v.get(field)
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| {
            LlmError::Fatal(format!(
                "{}: {what}: the answer has no \"{field}\"; is this server's batch API compatible?",
                who(s)
            ))
        })
}

/// A `multipart/form-data` body with the field `purpose=batch` and the file `jsonl`, and its
/// content type. The boundary is drawn until it occurs nowhere in the file.
fn multipart(jsonl: &[u8]) -> (Vec<u8>, String) {
    let boundary = loop {
        let b = format!("sage-batch-{:016x}", rand::random::<u64>());
        if !jsonl.windows(b.len()).any(|w| w == b.as_bytes()) {
            break b;
        }
    };
    let mut body = Vec::with_capacity(jsonl.len() + 400);
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n\
             --{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"sage-batch.jsonl\"\r\n\
             Content-Type: application/jsonl\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(jsonl);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (body, format!("multipart/form-data; boundary={boundary}"))
}

/// Submit one batch of `(custom_id, body)` requests (at most [`limits`] of them).
pub async fn submit(
    s: &LlmSettings,
    t: &Transport,
    requests: &[(String, Vec<u8>)],
) -> Result<Submitted, LlmError> {
    let headers = crate::auth_headers(s, key(s)?);
    let w = who(s);
    match s.provider {
        Provider::OpenAi => {
            let mut jsonl = Vec::new();
            for (id, body) in requests {
                jsonl.extend_from_slice(request_line(s.provider, id, body).as_bytes());
                jsonl.push(b'\n');
            }
            let (body, ctype) = multipart(&jsonl);
            let ok = t
                .post_as(
                    &api_url(s, &["files"])?,
                    &headers,
                    &body,
                    &ctype,
                    &w,
                    &s.key_var,
                )
                .await?;
            let file = str_field(
                &json_of(&ok.body, "file upload", s)?,
                "id",
                "file upload",
                s,
            )?;
            let create = json!({
                "input_file_id": file,
                "endpoint": "/v1/chat/completions",
                "completion_window": "24h",
            });
            let id =
                create_batch(s, t, &headers, &["batches"], create.to_string().as_bytes()).await?;
            Ok(Submitted {
                id,
                input_file_id: Some(file),
            })
        }
        Provider::Anthropic => {
            let mut body = Vec::from(&b"{\"requests\":["[..]);
            for (i, (id, b)) in requests.iter().enumerate() {
                if i > 0 {
                    body.push(b',');
                }
                body.extend_from_slice(request_line(s.provider, id, b).as_bytes());
            }
            body.extend_from_slice(b"]}");
            let id = create_batch(s, t, &headers, &["messages", "batches"], &body).await?;
            Ok(Submitted {
                id,
                input_file_id: None,
            })
        }
    }
}

/// POST a batch creation to the API path `path` and return the batch id the provider gave it
/// (both APIs answer with an object whose `id` names the batch).
async fn create_batch(
    s: &LlmSettings,
    t: &Transport,
    headers: &[(&str, String)],
    path: &[&str],
    body: &[u8],
) -> Result<String, LlmError> {
    let ok = t
        .post(&api_url(s, path)?, headers, body, &who(s), &s.key_var)
        .await?;
    str_field(
        &json_of(&ok.body, "batch creation", s)?,
        "id",
        "batch creation",
        s,
    )
}

fn counts(v: &Value) -> String {
    v.get("request_counts")
        .and_then(Value::as_object)
        .map(|o| {
            o.iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

/// Ask the provider where batch `id` is.
pub async fn status(s: &LlmSettings, t: &Transport, id: &str) -> Result<BatchState, LlmError> {
    let headers = crate::auth_headers(s, key(s)?);
    let w = who(s);
    let url = match s.provider {
        Provider::OpenAi => api_url(s, &["batches", id])?,
        Provider::Anthropic => api_url(s, &["messages", "batches", id])?,
    };
    let ok = t.get(&url, &headers, &w, &s.key_var).await?;
    let v = json_of(&ok.body, "batch status", s)?;
    match s.provider {
        Provider::OpenAi => {
            let st = str_field(&v, "status", "batch status", s)?;
            let detail = format!("{st} ({})", counts(&v));
            match st.as_str() {
                "validating" | "in_progress" | "finalizing" | "cancelling" => {
                    Ok(BatchState::Running { detail })
                }
                "completed" | "expired" | "cancelled" => {
                    let mut files = Vec::new();
                    for f in ["output_file_id", "error_file_id"] {
                        if let Some(fid) = v.get(f).and_then(Value::as_str) {
                            files.push(api_url(s, &["files", fid, "content"])?);
                        }
                    }
                    Ok(BatchState::Ended { detail, files })
                }
                "failed" => {
                    let why: Vec<String> = v
                        .pointer("/errors/data")
                        .and_then(Value::as_array)
                        .map(|a| {
                            a.iter()
                                .filter_map(|e| e.get("message").and_then(Value::as_str))
                                .map(str::to_string)
                                .collect()
                        })
                        .unwrap_or_default();
                    Ok(BatchState::Failed {
                        detail: if why.is_empty() {
                            "failed".into()
                        } else {
                            format!("failed: {}", why.join("; "))
                        },
                    })
                }
                other => Err(LlmError::Fatal(format!(
                    "{w}: batch {id}: unknown status {other:?}"
                ))),
            }
        }
        Provider::Anthropic => {
            let st = str_field(&v, "processing_status", "batch status", s)?;
            let detail = format!("{st} ({})", counts(&v));
            match st.as_str() {
                "in_progress" | "canceling" => Ok(BatchState::Running { detail }),
                "ended" => {
                    let raw = str_field(&v, "results_url", "batch status", s)?;
                    let u = url::Url::parse(&raw).map_err(|e| {
                        LlmError::Fatal(format!("{w}: batch {id}: results_url is not a URL ({e})"))
                    })?;
                    // The key goes with the request: never to another host than the base URL's.
                    let base = crate::base_url(&s.base_url)
                        .map_err(|m| LlmError::Fatal(format!("{w}: {m}")))?;
                    if u.origin() != base.origin() {
                        return Err(LlmError::Fatal(format!(
                            "{w}: batch {id}: results_url {} is on another host than the base URL; \
                             the API key is never sent to another host",
                            crate::secrets::display_url(&u)
                        )));
                    }
                    Ok(BatchState::Ended {
                        detail,
                        files: vec![u],
                    })
                }
                other => Err(LlmError::Fatal(format!(
                    "{w}: batch {id}: unknown processing_status {other:?}"
                ))),
            }
        }
    }
}

/// Fetch one result file (JSONL text).
pub async fn fetch(s: &LlmSettings, t: &Transport, url: &url::Url) -> Result<String, LlmError> {
    let headers = crate::auth_headers(s, key(s)?);
    let ok = t.get_file(url, &headers, &who(s), &s.key_var).await?;
    String::from_utf8(ok.body).map_err(|_| {
        LlmError::Transient(format!(
            "{}: the batch result file {} is not UTF-8",
            who(s),
            crate::secrets::display_url(url)
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(p: Provider, base: &str) -> LlmSettings {
        let mut s = LlmSettings::from_env(p, "m", &crate::Env::default());
        s.base_url = base.into();
        s
    }

    #[test]
    fn batch_urls_follow_each_api() {
        let s = settings(Provider::OpenAi, "https://api.openai.com/v1");
        assert_eq!(
            api_url(&s, &["files", "file-1", "content"])
                .unwrap()
                .as_str(),
            "https://api.openai.com/v1/files/file-1/content"
        );
        let s = settings(Provider::Anthropic, "https://api.anthropic.com");
        assert_eq!(
            api_url(&s, &["messages", "batches", "msgbatch_1"])
                .unwrap()
                .as_str(),
            "https://api.anthropic.com/v1/messages/batches/msgbatch_1"
        );
        let s = settings(Provider::Anthropic, "http://h:1/v1/");
        assert_eq!(
            api_url(&s, &["messages", "batches"]).unwrap().as_str(),
            "http://h:1/v1/messages/batches"
        );
        // an id is one path segment, never a path
        let s = settings(Provider::OpenAi, "http://h/v1");
        assert_eq!(
            api_url(&s, &["batches", "../x"]).unwrap().as_str(),
            "http://h/v1/batches/..%2Fx"
        );
    }

    #[test]
    fn request_lines_embed_the_exact_body() {
        let body = br#"{"model":"m","messages":[]}"#;
        let v: Value = serde_json::from_str(&request_line(Provider::OpenAi, "abc", body)).unwrap();
        assert_eq!(v["url"], "/v1/chat/completions");
        assert_eq!(v["method"], "POST");
        assert_eq!(serde_json::to_vec(&v["body"]).unwrap(), body.to_vec());
        let v: Value =
            serde_json::from_str(&request_line(Provider::Anthropic, "abc", body)).unwrap();
        assert_eq!(v["custom_id"], "abc");
        assert_eq!(v["params"]["model"], "m");
    }

    #[test]
    fn the_multipart_body_has_the_purpose_and_the_file() {
        let (body, ctype) = multipart(b"{\"a\":1}\n");
        let b = ctype
            .strip_prefix("multipart/form-data; boundary=")
            .unwrap();
        let text = String::from_utf8(body).unwrap();
        assert!(text.starts_with(&format!("--{b}\r\n")));
        assert!(text.contains("name=\"purpose\"\r\n\r\nbatch\r\n"));
        assert!(text.contains("filename=\"sage-batch.jsonl\""));
        assert!(text.ends_with(&format!("{{\"a\":1}}\n\r\n--{b}--\r\n")));
    }
}
