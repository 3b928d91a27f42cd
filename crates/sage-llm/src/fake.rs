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
    flight: Arc<Flight>,
    batch: Arc<BatchState>,
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
    batch: Arc<BatchState>,
    flight: Arc<Flight>,
}

/// Scoring requests (POSTs) in flight: how many at once at most, and a gate that holds every
/// answer until a number of them have arrived.
#[derive(Default)]
struct Flight {
    now: AtomicUsize,
    peak: AtomicUsize,
    arrived: AtomicUsize,
    /// Answers wait until this many POSTs have arrived (0: no gate), at most `gate_wait`.
    gate: AtomicUsize,
    gate_wait: Mutex<Duration>,
    opened: tokio::sync::Notify,
    /// POSTs that had arrived when the first one was answered (usize::MAX: none answered).
    before_first_answer: AtomicUsize,
}

/// The batch side of the server (both providers' batch APIs).
#[derive(Default)]
struct BatchState {
    /// Status requests answered "still running" before a batch ends (default 1).
    polls: AtomicUsize,
    files: Mutex<std::collections::HashMap<String, String>>,
    batches: Mutex<std::collections::HashMap<String, FakeBatch>>,
    /// Every request line a batch carried, as if it had been sent on its own.
    lines: Mutex<Vec<Captured>>,
    ids: AtomicUsize,
}

struct FakeBatch {
    anthropic: bool,
    polls_left: usize,
    input_file_id: String,
    output_file_id: Option<String>,
    error_file_id: Option<String>,
    total: usize,
    succeeded: usize,
}

impl FakeServer {
    /// Start a server that answers every request honestly after `latency`.
    pub fn start(latency: Duration) -> FakeServer {
        FakeServer::with_faults(latency, Arc::new(|_, _, _| Fault::None))
    }

    /// Start a server with a fault plan.
    pub fn with_faults(latency: Duration, plan: FaultPlan) -> FakeServer {
        let captured = Arc::new(Mutex::new(Vec::new()));
        let batch = Arc::new(BatchState::default());
        batch.polls.store(1, Ordering::SeqCst);
        let flight = Arc::new(Flight {
            before_first_answer: AtomicUsize::new(usize::MAX),
            ..Flight::default()
        });
        let state = Arc::new(State {
            flight: flight.clone(),
            batch: batch.clone(),
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
            flight,
            batch,
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

    /// Every request line of every batch submitted so far, with the path it stands for
    /// (`/v1/chat/completions` or `/v1/messages`).
    pub fn batch_requests(&self) -> Vec<Captured> {
        self.batch
            .lines
            .lock()
            .map(|c| c.clone())
            .unwrap_or_default()
    }

    /// The most scoring requests (POSTs) that were in flight at once: received and not yet
    /// answered.
    pub fn peak_in_flight(&self) -> usize {
        self.flight.peak.load(Ordering::SeqCst)
    }

    /// How many POSTs had arrived when the first was answered (0 before any answer).
    pub fn arrived_before_first_answer(&self) -> usize {
        match self.flight.before_first_answer.load(Ordering::SeqCst) {
            usize::MAX => 0,
            n => n,
        }
    }

    /// Hold every answer to a POST until `n` POSTs have arrived (or `wait` has passed since
    /// the request came, so a client that never sends them all is not stalled for good):
    /// with it, [`FakeServer::peak_in_flight`] reaches `n` exactly when the client has `n`
    /// requests out before it needs any answer.
    pub fn hold_answers_until(&self, n: usize, wait: Duration) {
        *self
            .flight
            .gate_wait
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = wait;
        self.flight.gate.store(n, Ordering::SeqCst);
    }

    /// How many status requests a new batch answers "still running" before it ends.
    pub fn set_batch_polls(&self, n: usize) {
        self.batch.polls.store(n, Ordering::SeqCst);
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
    let batch = match &fault {
        // an injected status answers a batch request too (a refused key, an outage)
        Fault::Status(..) => None,
        _ => batch_route(&st, get, &req).await,
    };
    let (status, extra, body) = if let Some(r) = batch {
        r
    } else if get {
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
        let f = &st.flight;
        let now = f.now.fetch_add(1, Ordering::SeqCst) + 1;
        f.peak.fetch_max(now, Ordering::SeqCst);
        let arrived = f.arrived.fetch_add(1, Ordering::SeqCst) + 1;
        let gate = f.gate.load(Ordering::SeqCst);
        if gate > 0 {
            if arrived >= gate {
                f.opened.notify_waiters();
            } else {
                let wait = *f.gate_wait.lock().unwrap_or_else(|p| p.into_inner());
                let _ = tokio::time::timeout(wait, async {
                    while f.arrived.load(Ordering::SeqCst) < gate {
                        let opened = f.opened.notified();
                        if f.arrived.load(Ordering::SeqCst) >= gate {
                            break;
                        }
                        opened.await;
                    }
                })
                .await;
            }
        }
        tokio::time::sleep(st.latency).await;
        f.now.fetch_sub(1, Ordering::SeqCst);
        let _ = f.before_first_answer.compare_exchange(
            usize::MAX,
            f.arrived.load(Ordering::SeqCst),
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
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

/// Answer a request of either batch API, or `None` when it is not one.
async fn batch_route(st: &State, get: bool, req: &Captured) -> Option<(u16, String, String)> {
    let path = req.path.split('?').next().unwrap_or_default();
    let seg: Vec<&str> = path.trim_matches('/').split('/').collect();
    let bad = |msg: String| {
        Some((
            400,
            String::new(),
            json!({"error": {"type": "invalid_request_error", "message": msg}}).to_string(),
        ))
    };
    let ok = |v: Value| Some((200, String::new(), v.to_string()));
    let b = &st.batch;
    match (get, seg.as_slice()) {
        // OpenAI: upload the input file
        (false, [.., "v1", "files"]) => {
            let (purpose, file) = match multipart_fields(req) {
                Ok(f) => f,
                Err(m) => return bad(m),
            };
            if purpose.as_deref() != Some("batch") {
                return bad(format!("purpose must be \"batch\", got {purpose:?}"));
            }
            let Some(file) = file else {
                return bad("no file part".into());
            };
            let id = format!("file-{}", b.ids.fetch_add(1, Ordering::SeqCst));
            let bytes = file.len();
            lock(&b.files).insert(id.clone(), file);
            ok(
                json!({"id": id, "object": "file", "bytes": bytes, "created_at": 0,
                      "filename": "sage-batch.jsonl", "purpose": "batch"}),
            )
        }
        // OpenAI: create a batch from an uploaded file
        (false, [.., "v1", "batches"]) => {
            let v: Value = serde_json::from_str(&req.body).unwrap_or(Value::Null);
            if v["endpoint"] != "/v1/chat/completions" || v["completion_window"] != "24h" {
                return bad(format!(
                    "endpoint must be /v1/chat/completions and completion_window 24h, got {} and {}",
                    v["endpoint"], v["completion_window"]
                ));
            }
            let fid = v["input_file_id"].as_str().unwrap_or_default().to_string();
            let Some(input) = lock(&b.files).get(&fid).cloned() else {
                return Some((
                    404,
                    String::new(),
                    json!({"error": {"message": format!("no file {fid}")}}).to_string(),
                ));
            };
            let mut out = String::new();
            let mut err = String::new();
            let (mut total, mut succeeded) = (0, 0);
            for (i, line) in input.lines().filter(|l| !l.trim().is_empty()).enumerate() {
                let l: Value = match serde_json::from_str(line) {
                    Ok(l) => l,
                    Err(e) => return bad(format!("line {}: not JSON ({e})", i + 1)),
                };
                if l["method"] != "POST" || l["url"] != "/v1/chat/completions" {
                    return bad(format!(
                        "line {}: method/url must be POST /v1/chat/completions",
                        i + 1
                    ));
                }
                let Some(id) = l["custom_id"].as_str() else {
                    return bad(format!("line {}: no custom_id", i + 1));
                };
                let (status, body) = answer_line(st, req, "/v1/chat/completions", &l["body"]).await;
                total += 1;
                let body_v = serde_json::from_str::<Value>(&body).unwrap_or(Value::String(body));
                let rec = json!({"id": format!("batch_req_{i}"), "custom_id": id,
                    "response": {"status_code": status, "request_id": format!("req_{i}"), "body": body_v},
                    "error": null});
                if status == 200 {
                    succeeded += 1;
                    out.push_str(&rec.to_string());
                    out.push('\n');
                } else {
                    err.push_str(&rec.to_string());
                    err.push('\n');
                }
            }
            let n = b.ids.fetch_add(1, Ordering::SeqCst);
            let store = |text: String, tag: &str| {
                (!text.is_empty()).then(|| {
                    let id = format!("file-{tag}-{n}");
                    lock(&b.files).insert(id.clone(), text);
                    id
                })
            };
            let batch = FakeBatch {
                anthropic: false,
                polls_left: b.polls.load(Ordering::SeqCst),
                input_file_id: fid,
                output_file_id: store(out, "out"),
                error_file_id: store(err, "err"),
                total,
                succeeded,
            };
            let id = format!("batch_{n}");
            let v = openai_batch(&id, &batch);
            lock(&b.batches).insert(id, batch);
            ok(v)
        }
        (true, [.., "v1", "batches", id]) => {
            let mut all = lock(&b.batches);
            let Some(batch) = all.get_mut(*id).filter(|x| !x.anthropic) else {
                return Some((
                    404,
                    String::new(),
                    json!({"error": {"message": "no such batch"}}).to_string(),
                ));
            };
            let v = openai_batch(id, batch);
            batch.polls_left = batch.polls_left.saturating_sub(1);
            ok(v)
        }
        (true, [.., "v1", "files", id, "content"]) => match lock(&b.files).get(*id) {
            Some(t) => Some((200, String::new(), t.clone())),
            None => Some((
                404,
                String::new(),
                json!({"error": {"message": "no such file"}}).to_string(),
            )),
        },
        // Anthropic: create a message batch
        (false, [.., "v1", "messages", "batches"]) => {
            let v: Value = serde_json::from_str(&req.body).unwrap_or(Value::Null);
            let Some(reqs) = v["requests"].as_array() else {
                return bad("requests: expected an array".into());
            };
            let mut seen = std::collections::HashSet::new();
            let mut out = String::new();
            let mut succeeded = 0;
            for (i, r) in reqs.iter().enumerate() {
                let id = r["custom_id"].as_str().unwrap_or_default();
                let valid = (1..=64).contains(&id.len())
                    && id
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                if !valid {
                    return bad(format!(
                        "requests.{i}.custom_id: must match ^[a-zA-Z0-9_-]{{1,64}}$"
                    ));
                }
                if !seen.insert(id.to_string()) {
                    return bad(format!("requests.{i}.custom_id: {id} is not unique"));
                }
                let (status, body) = answer_line(st, req, "/v1/messages", &r["params"]).await;
                let result = if status == 200 {
                    succeeded += 1;
                    match serde_json::from_str::<Value>(&body) {
                        Ok(m) => json!({"type": "succeeded", "message": m}),
                        // a provider's batch never holds a broken envelope; count it errored
                        Err(_) => {
                            json!({"type": "errored", "error": {"type": "error", "error": {"type": "api_error", "message": body}}})
                        }
                    }
                } else {
                    json!({"type": "errored", "error": {"type": "error", "error": {"type": "api_error", "message": format!("HTTP {status}")}}})
                };
                out.push_str(&json!({"custom_id": id, "result": result}).to_string());
                out.push('\n');
            }
            let n = b.ids.fetch_add(1, Ordering::SeqCst);
            let fid = format!("results-{n}");
            lock(&b.files).insert(fid.clone(), out);
            let batch = FakeBatch {
                anthropic: true,
                polls_left: b.polls.load(Ordering::SeqCst),
                input_file_id: String::new(),
                output_file_id: Some(fid),
                error_file_id: None,
                total: reqs.len(),
                succeeded,
            };
            let id = format!("msgbatch_{n}");
            let v = anthropic_batch(&id, &batch, req);
            lock(&b.batches).insert(id, batch);
            ok(v)
        }
        (true, [.., "v1", "messages", "batches", id]) => {
            let mut all = lock(&b.batches);
            let Some(batch) = all.get_mut(*id).filter(|x| x.anthropic) else {
                return Some((
                    404,
                    String::new(),
                    json!({"error": {"type": "not_found_error", "message": "no such batch"}})
                        .to_string(),
                ));
            };
            let v = anthropic_batch(id, batch, req);
            batch.polls_left = batch.polls_left.saturating_sub(1);
            ok(v)
        }
        (true, [.., "v1", "messages", "batches", id, "results"]) => {
            let all = lock(&b.batches);
            let file = all
                .get(*id)
                .filter(|x| x.anthropic && x.polls_left == 0)
                .and_then(|x| x.output_file_id.clone());
            match file.and_then(|f| lock(&b.files).get(&f).cloned()) {
                Some(t) => Some((200, String::new(), t)),
                None => Some((
                    404,
                    String::new(),
                    json!({"error": {"message": "results not available"}}).to_string(),
                )),
            }
        }
        _ => None,
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Answer one batch request line as if it had been sent alone (the fault plan sees it with
/// the path it stands for).
async fn answer_line(st: &State, outer: &Captured, path: &str, body: &Value) -> (u16, String) {
    let line = Captured {
        path: path.to_string(),
        headers: outer.headers.clone(),
        body: body.to_string(),
    };
    let n = st.n.fetch_add(1, Ordering::SeqCst);
    let times = {
        let mut seen = lock(&st.seen);
        let c = seen.entry(line.body.clone()).or_insert(0);
        *c += 1;
        *c - 1
    };
    lock(&st.batch.lines).push(line.clone());
    let fault = (st.plan)(&line, n, times);
    let (status, _, text) = respond(&line, &fault).await;
    (status, text)
}

fn openai_batch(id: &str, b: &FakeBatch) -> Value {
    let done = b.polls_left == 0;
    json!({
        "id": id, "object": "batch", "endpoint": "/v1/chat/completions",
        "input_file_id": b.input_file_id, "completion_window": "24h",
        "status": if done { "completed" } else { "in_progress" },
        "output_file_id": if done { json!(b.output_file_id) } else { Value::Null },
        "error_file_id": if done { json!(b.error_file_id) } else { Value::Null },
        "created_at": 0,
        "request_counts": {"total": b.total,
                           "completed": if done { b.succeeded } else { 0 },
                           "failed": if done { b.total - b.succeeded } else { 0 }},
    })
}

fn anthropic_batch(id: &str, b: &FakeBatch, req: &Captured) -> Value {
    let done = b.polls_left == 0;
    let host = req.header("host").unwrap_or("127.0.0.1");
    json!({
        "id": id, "type": "message_batch",
        "processing_status": if done { "ended" } else { "in_progress" },
        "request_counts": {"processing": if done { 0 } else { b.total },
                           "succeeded": if done { b.succeeded } else { 0 },
                           "errored": if done { b.total - b.succeeded } else { 0 },
                           "canceled": 0, "expired": 0},
        "ended_at": null, "created_at": "2026-12-01T00:00:00Z",
        "expires_at": "2026-12-02T00:00:00Z", "cancel_initiated_at": null,
        "results_url": if done { json!(format!("http://{host}/v1/messages/batches/{id}/results")) } else { Value::Null },
    })
}

/// The `purpose` field and the `file` part of a `multipart/form-data` body.
fn multipart_fields(req: &Captured) -> Result<(Option<String>, Option<String>), String> {
    let ctype = req.header("content-type").unwrap_or_default();
    let boundary = ctype
        .split(';')
        .find_map(|p| p.trim().strip_prefix("boundary="))
        .ok_or("not multipart/form-data with a boundary")?;
    let delim = format!("--{boundary}");
    let (mut purpose, mut file) = (None, None);
    for part in req.body.split(&delim).skip(1) {
        if part.starts_with("--") {
            break;
        }
        let part = part.strip_prefix("\r\n").unwrap_or(part);
        let (head, content) = part
            .split_once("\r\n\r\n")
            .ok_or("a part without headers")?;
        let content = content.strip_suffix("\r\n").unwrap_or(content).to_string();
        if head.contains("name=\"purpose\"") {
            purpose = Some(content);
        } else if head.contains("name=\"file\"") {
            file = Some(content);
        }
    }
    Ok((purpose, file))
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
