//! The local judge, for real: `sage localize --judge local` against llama.cpp's
//! `llama-server` running Qwen2.5-Coder-0.5B-Instruct (Q4_K_M) on 127.0.0.1, as set up by
//! `bash scripts/local-judge.sh install`. Three cases of three formats (an AG2 group chat, an
//! Aider chat history, a real OpenHands run of SusVibes); every request passes through a
//! recording proxy started by the test, so what the model saw can be checked.
//!
//! What must hold, whatever the small model answers:
//! - every applicable turn of every case is scored or failed with a named reason, and
//!   scoring failures stay under 10 % of them;
//! - every accepted quote is found again, by this test, in the raw record it points to;
//! - prefix-only: the request scoring turn k holds no text that only a later turn has (each
//!   later turn's own words serve as its sentinel) and never the case's anchor fragment.
//!
//! Without the installed local judge (the README's plain `cargo test`) it prints a SKIPPED
//! line and passes; in CI (`.ci/run` installs it) a missing judge fails.

use crate::need;
use crate::support::copy_dir;
use assert_cmd::Command;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const MODEL_ID: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m";

/// Where `scripts/local-judge.sh` keeps its build and weights.
fn local_judge_home() -> PathBuf {
    if let Some(p) = std::env::var_os("SAGE_LOCAL_JUDGE_HOME").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache")
        });
    cache.join("sage/local-judge")
}

/// The server binary and the verified 0.5B weights, or `None` after reporting the skip.
fn installed() -> Option<(PathBuf, PathBuf)> {
    let home = local_judge_home();
    let server = home.join("bin/llama-server");
    let model = home.join(format!("models/{MODEL_ID}.gguf"));
    let verified = home.join(format!("models/{MODEL_ID}.gguf.verified"));
    if server.is_file() && model.is_file() && verified.is_file() {
        return Some((server, model));
    }
    need::skip(&format!(
        "needs the local judge in {} (bash scripts/local-judge.sh install)",
        home.display()
    ));
    None
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port on 127.0.0.1")
}

/// llama-server as a child process, ended when dropped.
struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_server(bin: &Path, model: &Path, log: &Path) -> Server {
    let port = free_port();
    let threads = std::thread::available_parallelism().map_or(2, usize::from);
    let child = std::process::Command::new(bin)
        .args(["-m"])
        .arg(model)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--alias", MODEL_ID, "-c", "8192", "-np", "1", "--no-webui"])
        // the server's KV cache reused past a changed middle (a moved digest boundary), and
        // no busy-polling: other tests of the suite run beside it on the same cores
        .args(["--cache-reuse", "256", "--poll", "0"])
        .args(["-t", &threads.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).expect("server log"))
        .spawn()
        .expect("start llama-server");
    let mut server = Server { child, port };
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        if let Ok(Some(status)) = server.child.try_wait() {
            panic!(
                "llama-server exited at start ({status}): {}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        if let Some((200, _)) = http_get(port, "/v1/models") {
            return server;
        }
        assert!(
            Instant::now() < deadline,
            "llama-server did not answer in 180 s"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let status = out.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, out))
}

/// A forwarding proxy on 127.0.0.1 that keeps every request body it passes on: one request
/// per connection, sent upstream with `Connection: close`, the answer relayed unchanged.
struct Proxy {
    port: u16,
    bodies: Arc<Mutex<Vec<String>>>,
}

fn start_proxy(upstream: u16) -> Proxy {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
    let port = listener.local_addr().expect("proxy address").port();
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let kept = bodies.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let kept = kept.clone();
            std::thread::spawn(move || {
                let _ = relay(conn, upstream, &kept);
            });
        }
    });
    Proxy { port, bodies }
}

fn relay(conn: TcpStream, upstream: u16, kept: &Mutex<Vec<String>>) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut head = Vec::new();
    let mut len = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        if line == "\r\n" {
            break;
        }
        let lower = line.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            len = v.trim().parse().unwrap_or(0);
        }
        if !lower.starts_with("connection:") {
            head.push(line);
        }
    }
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body)?;
    if !head.first().is_some_and(|l| l.starts_with("GET ")) {
        kept.lock()
            .unwrap()
            .push(String::from_utf8_lossy(&body).into_owned());
    }
    let mut up = TcpStream::connect(("127.0.0.1", upstream))?;
    for l in &head {
        up.write_all(l.as_bytes())?;
    }
    up.write_all(b"Connection: close\r\n\r\n")?;
    up.write_all(&body)?;
    let mut answer = Vec::new();
    up.read_to_end(&mut answer)?;
    let mut conn = conn;
    conn.write_all(&answer)?;
    conn.shutdown(std::net::Shutdown::Both)
}

/// The three cases: two constructed ones in two formats and the smallest real one.
const CASES: &[&str] = &[
    "corpora/ag2-fig1a-aes-ecb",
    "corpora/aider-whole-cookie",
    "corpora/susvibes/gemini-2.5-pro__aio-libs__aiohttp-session_1b356f01bbab57d041c9a75bacd72fbbf8524728",
];

/// Text that turn `j` has and no other turn ≤ k, nor the task, has: its sentinel.
fn sentinels(case: &sage_pipeline::localize::PreparedCase) -> Vec<Option<String>> {
    let texts: Vec<String> = case
        .trace
        .turns
        .iter()
        .map(|t| {
            t.message
                .as_ref()
                .map(|m| m.text.clone())
                .unwrap_or_default()
        })
        .collect();
    texts
        .iter()
        .enumerate()
        .map(|(j, t)| {
            // a 48-character run of the turn's own words that appears nowhere before it
            let words: Vec<&str> = t.split_whitespace().collect();
            words.windows(8).map(|w| w.join(" ")).find(|cand| {
                cand.len() >= 40
                    && !cand.contains('\\')
                    && !cand.contains('"')
                    && !texts[..j].iter().any(|e| e.contains(cand.as_str()))
                    && !case.case.task().description.contains(cand.as_str())
            })
        })
        .collect()
}

#[test]
fn local_model_judges_three_formats_prefix_only_with_verified_quotes() {
    let Some((bin, model)) = installed() else {
        return;
    };
    // One model at a time on this machine: two test runs (two checkouts) each starting a
    // server on the same two cores would slow both many times over.
    let run = local_judge_home().join("run");
    std::fs::create_dir_all(&run).unwrap();
    let lock = std::fs::File::create(run.join("test.lock")).unwrap();
    lock.lock().unwrap();
    if CASES.iter().any(|c| !Path::new(c).is_dir()) {
        panic!("the bundled cases are missing");
    }
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("cases");
    for c in CASES {
        copy_dir(
            Path::new(c),
            &corpus.join(Path::new(c).file_name().unwrap()),
        );
    }
    let server = start_server(&bin, &model, &tmp.path().join("server.log"));
    let proxy = start_proxy(server.port);
    let started = Instant::now();
    let out = Command::cargo_bin("sage")
        .unwrap()
        .current_dir(tmp.path())
        .args(["localize", "cases", "--judge", "local", "--no-ledger"])
        .args(["--format", "json", "--no-progress", "--no-write"])
        .env(
            "SAGE_LOCAL_JUDGE_URL",
            format!("http://127.0.0.1:{}/v1", proxy.port),
        )
        .env("SAGE_LOCAL_JUDGE_MODEL", MODEL_ID)
        .env_remove("SAGE_JUDGE")
        .env_remove("SAGE_LOCAL_JUDGE_KEY")
        .timeout(Duration::from_secs(40 * 60))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!(
        "local judge: {} case(s) in {:.0} s; sage said:\n{stderr}",
        CASES.len(),
        started.elapsed().as_secs_f64()
    );
    // exit 1 is allowed (a turn may fail scoring); 2 (a fatal judge error) is not
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "exit {:?}: {stderr}",
        out.status.code()
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("results JSON on stdout");
    let results = doc["results"].as_array().expect("results");
    assert_eq!(results.len(), CASES.len(), "one result per case");

    let bodies = proxy.bodies.lock().unwrap().clone();
    assert!(!bodies.is_empty(), "no request reached the model");
    let (mut applicable, mut failed, mut quotes) = (0usize, 0usize, 0usize);
    for r in results {
        let id = r["case_id"].as_str().expect("case id");
        let dir = corpus.join(id);
        let (prepared, _) = sage_pipeline::localize::prepare(&dir, &Default::default())
            .unwrap_or_else(|e| panic!("{id}: {e:?}"));
        let fragment = prepared.anchor.fragment.clone().unwrap_or_default();
        let marks = sentinels(&prepared);
        assert!(
            marks.iter().skip(1).any(Option::is_some),
            "{id}: no later turn has a sentinel, so prefix-only could not be checked"
        );
        assert!(
            r["judge"]["model"].as_str() == Some(MODEL_ID) && r["run"] == 0,
            "{id}: judged by {} run {}",
            r["judge"],
            r["run"]
        );
        for t in r["scores"].as_array().expect("scores") {
            let k = t["turn"].as_u64().unwrap() as usize;
            match t["status"].as_str().unwrap() {
                "administrative" => continue,
                "scored" => {
                    applicable += 1;
                    let qs = t["quotes"].as_array().map(Vec::as_slice).unwrap_or(&[]);
                    for d in ["TR", "DI", "VR", "SA"] {
                        if t[d]["score"].as_u64().unwrap_or(0) > 0 {
                            assert!(
                                qs.iter().any(|q| q["dimension"] == d),
                                "{id} turn {k}: {d} > 0 without a verified quote"
                            );
                        }
                    }
                    for q in qs {
                        let raw: sage_trace::RawRef =
                            serde_json::from_value(q["raw"].clone()).unwrap();
                        let text = prepared.store.resolve(&raw).unwrap();
                        let quote = q["quote"].as_str().unwrap();
                        assert!(
                            sage_trace::normalize_ws(&text)
                                .contains(&sage_trace::normalize_ws(quote)),
                            "{id} turn {k}: the accepted quote {quote:?} is not in {raw:?}"
                        );
                        quotes += 1;
                    }
                }
                "failed" | "context-overflow" => {
                    applicable += 1;
                    failed += 1;
                    let why = t["reason"].as_str().map(str::to_string).unwrap_or_else(|| {
                        format!("context overflow: {} tokens", t["needed_tokens"])
                    });
                    assert!(
                        !why.trim().is_empty(),
                        "{id} turn {k}: a failure with no reason"
                    );
                    eprintln!("{id} turn {k}: {}", t["status"]);
                }
                other => panic!("{id} turn {k}: unknown status {other}"),
            }
            // prefix-only: the requests for this case's turn k
            let heading = format!("Score turn {k}, the last turn above");
            // the task header names the case's task id (task.txt): which case a body is for
            let task_marker = format!("Task id: {}", prepared.case.task().id);
            let mine: Vec<&String> = bodies
                .iter()
                .filter(|b| b.contains(&heading) && b.contains(&json_str(&task_marker)))
                .collect();
            // a turn that was sent has its requests here, so the checks below are not vacuous
            if t["status"] != "context-overflow" {
                assert!(!mine.is_empty(), "{id} turn {k}: no request found for it");
            }
            for b in mine {
                for (j, m) in marks.iter().enumerate().skip(k) {
                    if let Some(m) = m {
                        assert!(
                            !b.contains(&json_str(m)),
                            "{id}: the request for turn {k} holds turn {}'s text {m:?}",
                            j + 1
                        );
                    }
                }
                if fragment.trim().len() >= 12
                    && !prepared.case.task().description.contains(fragment.trim())
                {
                    let earlier_has = prepared.trace.turns[..k].iter().any(|t| {
                        serde_json::to_string(t)
                            .is_ok_and(|s| s.contains(&json_str(fragment.trim())))
                    });
                    if !earlier_has {
                        assert!(
                            !b.contains(&json_str(fragment.trim())),
                            "{id}: the request for turn {k} holds the anchor fragment"
                        );
                    }
                }
            }
        }
    }
    eprintln!(
        "local judge: {applicable} applicable turns, {failed} failed, {quotes} quotes verified, {} requests",
        bodies.len()
    );
    assert!(applicable > 0);
    assert!(
        failed * 10 < applicable,
        "{failed} of {applicable} turns failed scoring (limit: under 10 %)"
    );
    drop(server);
}

/// `s` as it appears inside a JSON string (the request bodies are JSON).
fn json_str(s: &str) -> String {
    let q = serde_json::to_string(s).unwrap();
    q[1..q.len() - 1].to_string()
}

// Bad input from the server side, against servers started by the tests (no model needed).

fn localize_local(dir: &Path, url: Option<&str>, model: &str) -> std::process::Output {
    let mut c = Command::cargo_bin("sage").unwrap();
    c.current_dir(dir)
        .args(["localize", "case", "--judge", "local", "--no-ledger"])
        .args(["--no-write", "--no-progress"])
        .env("SAGE_LOCAL_JUDGE_MODEL", model)
        .env_remove("SAGE_JUDGE")
        .env_remove("SAGE_LOCAL_JUDGE_URL")
        .timeout(Duration::from_secs(120));
    if let Some(u) = url {
        c.env("SAGE_LOCAL_JUDGE_URL", u);
    }
    c.output().unwrap()
}

fn one_case() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(
        Path::new("corpora/ag2-fig1a-aes-ecb"),
        &tmp.path().join("case"),
    );
    tmp
}

#[test]
fn local_judge_not_started_stops_at_once_naming_the_start_command() {
    let tmp = one_case();
    let out = localize_local(tmp.path(), None, MODEL_ID);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("SAGE_LOCAL_JUDGE_URL is not set"), "{err}");
    assert!(err.contains("bash scripts/local-judge.sh start"), "{err}");
    assert!(
        !err.contains("api.openai.com"),
        "never a remote default: {err}"
    );
}

#[test]
fn local_judge_down_or_serving_another_model_stops_once() {
    let tmp = one_case();
    // down: a port nothing listens on
    let url = format!("http://127.0.0.1:{}/v1", free_port());
    let out = localize_local(tmp.path(), Some(&url), MODEL_ID);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("is the server running"), "{err}");
    assert_eq!(err.matches("unreachable").count(), 1, "one message: {err}");
    // another model: the server lists others only
    let server = sage_llm::fake::FakeServer::start(Duration::ZERO);
    let out = localize_local(tmp.path(), Some(&server.openai_base()), MODEL_ID);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("unknown model") && err.contains(MODEL_ID),
        "{err}"
    );
    assert!(server.requests().is_empty(), "no judgment was requested");
}

#[test]
fn local_judge_answering_garbage_fails_the_case_with_the_reason() {
    use sage_llm::fake::{FakeServer, Fault};
    let tmp = one_case();
    let server = FakeServer::with_faults(Duration::ZERO, Arc::new(|_, _, _| Fault::HtmlBody));
    // the built-in profile with short retries (a sage.toml judge of the same name replaces it)
    std::fs::write(
        tmp.path().join("sage.toml"),
        "[judges.local]\nbackend = \"openai\"\nmodel = \"fake-model\"\n\
         base_url_env = \"SAGE_LOCAL_JUDGE_URL\"\napi_key_optional = true\n\
         cache_prompt = true\nconcurrency = 1\nquote_choices = 48\nmax_retries = 1\n",
    )
    .unwrap();
    let out = localize_local(tmp.path(), Some(&server.openai_base()), "fake-model");
    let err = String::from_utf8_lossy(&out.stderr);
    // the case is skipped with the reason, the rest of a corpus would go on: exit 1
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("skipped case") && err.contains("not JSON"),
        "{err}"
    );
    assert!(!server.requests().is_empty());
}

#[test]
fn weights_that_differ_from_the_pin_are_refused_and_deleted() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("model.gguf");
    std::fs::write(&bad, b"GGUF\x03\x00\x00\x00 not the pinned weights").unwrap();
    let out = std::process::Command::new("bash")
        .arg("scripts/local-judge.sh")
        .arg("verify")
        .arg(&bad)
        .args(["--model", "0.5b"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("refused and deleted"), "{err}");
    assert!(!bad.exists(), "the bad file is deleted");
}
