//! A fake LLM server on 127.0.0.1 speaking both APIs (OpenAI Chat Completions and Anthropic
//! Messages), with scripted faults: for the tests and the throughput benchmark, so neither
//! ever needs the network. Plain HTTP/1.1 over a tokio `TcpListener`, one request per
//! connection.
//!
//! The honest answer quotes the first words of the scored turn as rendered in the prompt, so
//! its quotes verify whenever the prompt carries the turn's raw text.

use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One request as the server received it.
#[derive(Debug, Clone)]
pub struct Captured {
    pub path: String,
    /// Header names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Captured {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What the server does with one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// Answer honestly.
    None,
    /// An error status, with an optional `Retry-After` in seconds.
    Status(u16, Option<u64>),
    /// Wait this long before answering (longer than the client's timeout: a timeout).
    Hang(Duration),
    /// A 200 whose body is cut mid-JSON (a broken API envelope).
    TruncatedBody,
    /// A complete envelope whose answer text is cut mid-JSON.
    TruncatedJson,
    /// A well-formed answer that breaks the schema (score "high").
    SchemaInvalid,
    /// A well-formed answer whose quote is not in the turn.
    FabricatedQuote,
    /// Answer honestly after an extra delay.
    Slow(Duration),
    /// Answer with this judgment (a scripted judge: chosen scores and quotes).
    Answer(Value),
    /// A 200 whose body is an HTML page (a proxy's error page), not an API envelope.
    HtmlBody,
    /// A 200 with an empty body.
    EmptyBody,
    /// An honest answer that echoes the request's credentials (its `authorization` or
    /// `x-api-key` header) in the response id and a rationale.
    EchoKey,
    /// A `307` redirect to this URL.
    Redirect(String),
}

/// Decides the fault for a request: `(request, n-th request overall from 0, how many times
/// this exact body was seen before)`.
pub type FaultPlan = Arc<dyn Fn(&Captured, usize, usize) -> Fault + Send + Sync>;

/// A running fake server. Dropping it stops the server thread's runtime.
pub struct FakeServer {
    pub addr: std::net::SocketAddr,
    captured: Arc<Mutex<Vec<Captured>>>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

struct State {
    /// Hashes of every request-body prefix seen, at [`CACHE_STEP`]-byte boundaries: the
    /// simulated prefix cache.
    prefixes: Mutex<std::collections::HashSet<u64>>,
    captured: Arc<Mutex<Vec<Captured>>>,
    seen: Mutex<std::collections::HashMap<String, usize>>,
    n: AtomicUsize,
    latency: Duration,
    plan: FaultPlan,
}

impl FakeServer {
    /// Start a server that answers every request honestly after `latency`.
    pub fn start(latency: Duration) -> FakeServer {
        FakeServer::with_faults(latency, Arc::new(|_, _, _| Fault::None))
    }

    /// Start a server with a fault plan.
    pub fn with_faults(latency: Duration, plan: FaultPlan) -> FakeServer {
        let captured = Arc::new(Mutex::new(Vec::new()));
        let state = Arc::new(State {
            captured: captured.clone(),
            seen: Mutex::default(),
            n: AtomicUsize::new(0),
            prefixes: Mutex::default(),
            latency,
            plan,
        });
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime for the fake server");
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                    .await
                    .expect("bind 127.0.0.1");
                addr_tx
                    .send(listener.local_addr().expect("local addr"))
                    .expect("send addr");
                loop {
                    tokio::select! {
                        _ = &mut stop_rx => break,
                        acc = listener.accept() => {
                            if let Ok((sock, _)) = acc {
                                let st = state.clone();
                                tokio::spawn(async move { let _ = serve(sock, st).await; });
                            }
                        }
                    }
                }
            });
            rt.shutdown_background();
        });
        let addr = addr_rx.recv().expect("the fake server started");
        FakeServer {
            addr,
            captured,
            shutdown: Some(stop_tx),
            thread: Some(thread),
        }
    }

    /// Base URL for `OPENAI_BASE_URL` (`http://127.0.0.1:PORT/v1`).
    pub fn openai_base(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Base URL for `ANTHROPIC_BASE_URL`.
    pub fn anthropic_base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request received so far (POSTs: model lookups are not kept).
    pub fn requests(&self) -> Vec<Captured> {
        self.captured.lock().map(|c| c.clone()).unwrap_or_default()
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        if let Some(s) = self.shutdown.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn serve(mut sock: tokio::net::TcpStream, st: Arc<State>) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16384];
    let head_end = loop {
        let n = sock.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let path = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("/")
        .to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + len {
        let n = sock.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = String::from_utf8_lossy(&buf[head_end..head_end + len]).into_owned();
    let req = Captured {
        path,
        headers,
        body,
    };
    let n = st.n.fetch_add(1, Ordering::SeqCst);
    let times = {
        let mut seen = st.seen.lock().unwrap_or_else(|p| p.into_inner());
        let c = seen.entry(req.body.clone()).or_insert(0);
        *c += 1;
        *c - 1
    };
    if let Ok(mut c) = st.captured.lock() {
        if !head.starts_with("GET ") {
            c.push(req.clone());
        }
    }
    let fault = (st.plan)(&req, n, times);
    let get = head.starts_with("GET ");
    let (status, extra, body) = if get {
        // A model lookup before scoring: answered at once, faults by status only.
        match fault {
            Fault::Status(code, _) => (
                code,
                String::new(),
                json!({"error": {"message": format!("injected HTTP {code}")}}).to_string(),
            ),
            _ => model_lookup(&req.path),
        }
    } else {
        tokio::time::sleep(st.latency).await;
        let (status, extra, body) = respond(&req, &fault).await;
        let cached = cached_prefix(&st, req.body.as_bytes());
        (status, extra, with_cached_tokens(body, cached))
    };
    let ctype = if fault == Fault::HtmlBody {
        "text/html"
    } else {
        "application/json"
    };
    let reason = match status {
        200 => "OK",
        307 => "Temporary Redirect",
        401 => "Unauthorized",
        404 => "Not Found",
        429 => "Too Many Requests",
        _ => "Error",
    };
    let resp = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\nconnection: close\r\n{extra}\r\n",
        body.len()
    );
    sock.write_all(resp.as_bytes()).await?;
    sock.write_all(body.as_bytes()).await?;
    sock.shutdown().await
}

/// The simulated prefix cache works in steps of this many bytes (about 1,024 tokens, the
/// OpenAI minimum), from the first step on.
pub const CACHE_STEP: usize = 4096;

/// Bytes of `body` served from the simulated cache: the longest prefix, in whole steps, that
/// an earlier request also began with. Every step of `body` is then cached.
fn cached_prefix(st: &State, body: &[u8]) -> usize {
    use std::hash::Hasher;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let mut cached = 0;
    let mut set = st.prefixes.lock().unwrap_or_else(|p| p.into_inner());
    let mut hit = true;
    for (i, chunk) in body.chunks(CACHE_STEP).enumerate() {
        if chunk.len() < CACHE_STEP {
            break;
        }
        h.write(chunk);
        let key = h.finish();
        if hit && set.contains(&key) {
            cached = (i + 1) * CACHE_STEP;
        } else {
            hit = false;
            set.insert(key);
        }
    }
    cached
}

/// Put the cached share of the prompt into a 200 answer's usage, as each API reports it.
fn with_cached_tokens(body: String, cached_bytes: usize) -> String {
    let Ok(mut v) = serde_json::from_str::<Value>(&body) else {
        return body;
    };
    let cached = (cached_bytes / 4) as u64;
    if let Some(u) = v.get_mut("usage").and_then(Value::as_object_mut) {
        if let Some(total) = u.get("prompt_tokens").and_then(Value::as_u64) {
            u.insert(
                "prompt_tokens_details".into(),
                json!({"cached_tokens": cached.min(total)}),
            );
        } else if let Some(total) = u.get("input_tokens").and_then(Value::as_u64) {
            let c = cached.min(total);
            u.insert("input_tokens".into(), json!(total - c));
            u.insert("cache_read_input_tokens".into(), json!(c));
        } else {
            return body;
        }
        return v.to_string();
    }
    body
}

/// Models the fake server knows (any other name is unknown to it).
pub const FAKE_MODELS: &[&str] = &["fake-model", "gpt-4.1-mini", "gpt-4o-mini", "claude-fake"];

/// `GET /v1/models` (OpenAI-compatible list) or `GET /v1/models/{id}` (Anthropic).
fn model_lookup(path: &str) -> (u16, String, String) {
    if path.ends_with("/models") {
        let data: Vec<Value> = FAKE_MODELS.iter().map(|m| json!({"id": m})).collect();
        return (200, String::new(), json!({"data": data}).to_string());
    }
    let id = path.rsplit('/').next().unwrap_or_default();
    if FAKE_MODELS.contains(&id) {
        (
            200,
            String::new(),
            json!({"id": id, "type": "model"}).to_string(),
        )
    } else {
        (
            404,
            String::new(),
            json!({"error": {"type": "not_found_error", "message": format!("model: {id}")}})
                .to_string(),
        )
    }
}

async fn respond(req: &Captured, fault: &Fault) -> (u16, String, String) {
    let anthropic = req.path.ends_with("/messages");
    let v: Value = serde_json::from_str(&req.body).unwrap_or(Value::Null);
    let user = user_text(&v, anthropic);
    let honest = honest_judgment(&user);
    let judgment = match fault {
        Fault::Status(code, ra) => {
            let extra = ra
                .map(|s| format!("retry-after: {s}\r\n"))
                .unwrap_or_default();
            let msg =
                json!({"error": {"message": format!("injected HTTP {code}"), "type": "fault"}});
            return (*code, extra, msg.to_string());
        }
        Fault::Hang(d) | Fault::Slow(d) => {
            tokio::time::sleep(*d).await;
            honest
        }
        Fault::TruncatedBody => {
            let full = envelope(anthropic, &honest, &v, req.body.len());
            return (200, String::new(), full[..full.len() / 2].to_string());
        }
        Fault::TruncatedJson => {
            let s = honest.to_string();
            return (
                200,
                String::new(),
                envelope_text(anthropic, &s[..s.len() / 2], req.body.len()),
            );
        }
        Fault::SchemaInvalid => {
            let mut j = honest;
            j["TR"]["score"] = json!("high");
            j
        }
        Fault::FabricatedQuote => {
            let mut j = honest;
            j["DI"] = json!({"score": 2, "quote": "we validate every origin header against an allow-list", "rationale": "invented"});
            j
        }
        Fault::Answer(j) => j.clone(),
        Fault::HtmlBody => {
            return (
                200,
                String::new(),
                "<html><body><h1>502 Bad Gateway</h1></body></html>".into(),
            )
        }
        Fault::EmptyBody => return (200, String::new(), String::new()),
        Fault::Redirect(to) => {
            return (307, format!("location: {to}\r\n"), String::new());
        }
        Fault::EchoKey => {
            let key = req
                .header("x-api-key")
                .or_else(|| req.header("authorization"))
                .unwrap_or("")
                .trim_start_matches("Bearer ")
                .to_string();
            let mut j = honest;
            j["TR"]["rationale"] = json!(format!("the key is {key}"));
            let env = envelope(anthropic, &j, &v, req.body.len());
            let mut e: Value = serde_json::from_str(&env).unwrap_or(Value::Null);
            e["id"] = json!(format!("id-{key}"));
            return (200, String::new(), e.to_string());
        }
        Fault::None => honest,
    };
    (
        200,
        String::new(),
        envelope(anthropic, &judgment, &v, req.body.len()),
    )
}

/// The honest answer to a request body, as the server would send it (for building batch
/// result files in tests).
pub fn honest_response(body: &str, anthropic: bool) -> String {
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let j = honest_judgment(&user_text(&v, anthropic));
    envelope(anthropic, &j, &v, body.len())
}

/// The user-visible prompt text of either API's body.
pub fn user_text(v: &Value, anthropic: bool) -> String {
    if anthropic {
        v.pointer("/messages/0/content")
            .and_then(Value::as_array)
            .map(|blocks| {
                blocks
                    .iter()
                    .filter_map(|b| b["text"].as_str())
                    .collect::<String>()
            })
            .unwrap_or_default()
    } else {
        v.pointer("/messages/1/content")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    }
}

/// Score the turn named by the instruction: TR 1 quoting its first words, the rest 0.
fn honest_judgment(user: &str) -> Value {
    let zero = json!({"score": 0, "quote": null, "rationale": "no security reasoning"});
    let quote = target_turn_quote(user);
    let tr = match &quote {
        Some(q) => json!({"score": 1, "quote": q, "rationale": "fake judge"}),
        None => zero.clone(),
    };
    json!({"applicable": true, "security_opportunity": quote.is_some(),
           "TR": tr, "DI": zero, "VR": zero, "SA": zero})
}

/// The turn a request asks to score (`Score turn K` in the instruction), for fault plans.
pub fn scored_turn(body: &str) -> Option<usize> {
    let at = body.rfind("Score turn ")?;
    body[at + 11..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .ok()
}

fn target_turn_quote(user: &str) -> Option<String> {
    let at = user.rfind("Score turn ")?;
    let k: String = user[at + 11..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    let head = format!("## Turn {k} (");
    let start = user.find(&head)?;
    let after = &user[start..];
    let body_start = after.find('\n')? + 1;
    let body = &after[body_start..];
    let end = ["\n<<<END TRACE DATA", "\n## Turn ", "\n# Your task"]
        .iter()
        .filter_map(|m| body.find(m))
        .min()
        .unwrap_or(body.len());
    let line = body[..end]
        .lines()
        .find(|l| !l.trim().is_empty() && !l.starts_with('[') && !l.starts_with("<<<"))?;
    let words: Vec<&str> = line.split_whitespace().take(6).collect();
    (!words.is_empty()).then(|| words.join(" "))
}

fn envelope(anthropic: bool, judgment: &Value, _req: &Value, req_len: usize) -> String {
    if anthropic {
        json!({
            "id": "msg_fake", "type": "message", "role": "assistant", "model": "fake",
            "content": [{"type": "tool_use", "id": "toolu_fake", "name": "record_turn_score", "input": judgment}],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": req_len / 4, "output_tokens": 60,
                      "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
        })
        .to_string()
    } else {
        envelope_text(false, &judgment.to_string(), req_len)
    }
}

fn envelope_text(anthropic: bool, text: &str, req_len: usize) -> String {
    if anthropic {
        json!({
            "id": "msg_fake", "type": "message", "role": "assistant", "model": "fake",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": req_len / 4, "output_tokens": 60},
        })
        .to_string()
    } else {
        json!({
            "id": "chatcmpl-fake", "object": "chat.completion", "model": "fake",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": req_len / 4, "completion_tokens": 60,
                      "prompt_tokens_details": {"cached_tokens": 0}},
        })
        .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_honest_judge_quotes_the_target_turn() {
        let user = "# Task\n\n## Turn 1 (planning, by a)\nfirst turn words here\n\n## Turn 2 (implementation, by a)\n[tool call x]\nUse parameterized queries for every lookup now please\n\n# Your task\nScore turn 2, the last";
        assert_eq!(
            target_turn_quote(user).unwrap(),
            "Use parameterized queries for every lookup"
        );
    }
}
