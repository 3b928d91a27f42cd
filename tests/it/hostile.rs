//! Issue 29, "Hostile input, second round": the attacks that broke on landed main, each
//! driving the real binary (docs/security.md lists each defence with its test). Network
//! tests talk only to servers on 127.0.0.1 that the test starts itself.

use crate::support::copy_dir;
use assert_cmd::Command;
use serde_json::Value;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

const KEY: &str = "sk-hostile-SENTINEL-4e2b77a1";

fn sage() -> Command {
    let mut c = Command::cargo_bin("sage").unwrap();
    // a hang would be a regression too; no assertion depends on time
    c.timeout(Duration::from_secs(240));
    c
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Every control character (C0, DEL, C1), the bidirectional overrides, an OSC title and a
/// screen clear, and every character that means something in HTML, Markdown, CSV or a URI.
fn hostile() -> String {
    let mut s: String = (0u32..0x20)
        .chain(0x7f..0xa0)
        .filter_map(char::from_u32)
        .collect();
    s.push_str("\u{1b}]0;TITLE\u{7}\u{1b}[2J\u{202e}\u{2066}\u{200f}\u{61c}");
    s.push_str("<script>alert(1)</script><!-- &amp; \"'` | *x* _y_ [l](javascript:alert(1)) # =1+1 @x %2e%2e/ \\");
    s
}

/// An artefact name that carries escapes, markup and a NUL, on one line.
const EVIL_NAME: &str = "w\u{1b}]0;TITLE\u{7}\u{1b}[2J<b>|&\u{202e}\u{0}\u{7f}\u{9b}31mx.py";

/// `cases/hostile`: the AG2 Figure 1a case with [`hostile`] text in the task, the anchor's
/// description and every message, one message by an actor whose name is hostile, and a
/// `# filename:` block that writes [`EVIL_NAME`].
fn hostile_case(cases: &Path) -> PathBuf {
    let dir = cases.join("hostile");
    copy_dir(&root().join("corpora/ag2-fig1a-aes-ecb"), &dir);
    let h = hostile();
    let p = dir.join("case.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    v.as_object_mut().unwrap().remove("expected");
    v["id"] = "hostile<i>&'\"|#`*".into();
    let d = v["task"]["description"].as_str().unwrap().to_string();
    v["task"]["description"] = format!("{d}\n{h}").into();
    let d = v["anchor"]["description"].as_str().unwrap().to_string();
    v["anchor"]["description"] = format!("{d} {h}").into();
    std::fs::write(&p, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    let p = dir.join("chat.json");
    let mut c: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    let msgs = c["chat_history"].as_array_mut().unwrap();
    for m in msgs.iter_mut() {
        let t = m["content"].as_str().unwrap().to_string();
        m["content"] = format!("{t}\n{h}").into();
    }
    let one_line: String = h.chars().filter(|c| *c != '\n' && *c != '\r').collect();
    msgs.insert(
        msgs.len() - 1,
        serde_json::json!({
            "content": format!("Also saving a helper:\n\n```python\n# filename: {EVIL_NAME}\nprint(1)  # {one_line}\n```\n"),
            "role": "user",
            "name": "engineer",
        }),
    );
    msgs.push(serde_json::json!({
        "content": format!("done {h}"),
        "role": "user",
        "name": format!("exec<b>\u{1b}[31m{}", '\u{202e}'),
    }));
    std::fs::write(&p, serde_json::to_string_pretty(&c).unwrap()).unwrap();
    dir
}

/// The characters a medium may hold raw: `None` when `s` holds none other.
fn raw_unsafe(s: &str, allowed: &[char]) -> Option<String> {
    let bad: Vec<String> = s
        .chars()
        .filter(|c| sage_markup::is_unsafe_char(*c) && !allowed.contains(c))
        .map(|c| format!("U+{:04X}", c as u32))
        .collect();
    (!bad.is_empty()).then(|| {
        let mut uniq = bad.clone();
        uniq.sort();
        uniq.dedup();
        format!("{} raw character(s): {}", bad.len(), uniq.join(" "))
    })
}

/// Terminal output: nothing but newline and tab.
fn check_terminal(what: &str, bytes: &[u8]) -> Vec<String> {
    raw_unsafe(&text(bytes), &['\n', '\t'])
        .map(|m| format!("{what}: {m}"))
        .into_iter()
        .collect()
}

/// Every artifactLocation URI of a SARIF log: relative, with a declared base, staying under
/// it once resolved (the check of scripts/validate_sarif.py, in Rust).
fn check_sarif(what: &str, log: &Value) -> Vec<String> {
    let mut bad = Vec::new();
    fn walk<'a>(v: &'a Value, out: &mut Vec<&'a Value>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    if k == "artifactLocation" {
                        out.push(x);
                    }
                    walk(x, out);
                }
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    for run in log["runs"].as_array().into_iter().flatten() {
        let bases = &run["originalUriBaseIds"];
        let mut locs = Vec::new();
        walk(run, &mut locs);
        for loc in locs {
            let Some(uri) = loc["uri"].as_str() else {
                continue;
            };
            let Some(base_id) = loc["uriBaseId"].as_str() else {
                bad.push(format!("{what}: {uri:?} has no uriBaseId"));
                continue;
            };
            if bases.get(base_id).is_none() {
                bad.push(format!("{what}: {uri:?}: base {base_id} is not declared"));
            }
            let base = url::Url::parse("file:///base/dir/").unwrap();
            match base.join(uri) {
                Ok(u) if u.as_str().starts_with(base.as_str()) && !uri.starts_with('/') => {}
                Ok(u) => bad.push(format!("{what}: {uri:?} leaves its base ({u})")),
                Err(e) => bad.push(format!("{what}: {uri:?} does not parse: {e}")),
            }
            if url::Url::parse(uri).is_ok() {
                bad.push(format!("{what}: {uri:?} is an absolute URI"));
            }
        }
    }
    bad
}

/// Every file under `dir`, checked by its medium.
fn check_tree(dir: &Path) -> Vec<String> {
    let mut bad = Vec::new();
    for e in walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
    {
        if !e.file_type().is_file() {
            continue;
        }
        let p = e.path();
        let what = p.strip_prefix(dir).unwrap_or(p).display().to_string();
        let Ok(s) = std::fs::read_to_string(p) else {
            continue;
        };
        let ext = p.extension().and_then(|x| x.to_str()).unwrap_or("");
        let problem = match ext {
            "html" | "svg" | "csv" | "tsv" | "md" | "txt" => raw_unsafe(&s, &['\n', '\t', '\r']),
            "json" | "jsonl" | "sarif" => {
                // serde escapes C0; DEL, C1 and overrides are data inside JSON strings
                let c0 = s
                    .chars()
                    .any(|c| (c as u32) < 0x20 && !matches!(c, '\n' | '\t' | '\r'));
                if ext == "sarif" {
                    bad.extend(check_sarif(&what, &serde_json::from_str(&s).unwrap()));
                }
                c0.then(|| "a raw C0 control character".to_string())
            }
            _ => None,
        };
        if let Some(m) = problem {
            bad.push(format!("{what}: {m}"));
        }
    }
    bad
}

#[test]
fn every_command_output_is_inert_in_its_medium() {
    // Before: `sage explain` printed a `# filename:` name raw (title changed, screen
    // cleared), and `sage view` wrote NULs from artefact names into its pages.
    let w = tempfile::tempdir().unwrap();
    let cases = w.path().join("cases");
    let case = hostile_case(&cases);
    let run = |args: &[&str]| {
        let out = sage().current_dir(w.path()).args(args).output().unwrap();
        let mut bad = check_terminal(&format!("sage {} (stdout)", args.join(" ")), &out.stdout);
        bad.extend(check_terminal(
            &format!("sage {} (stderr)", args.join(" ")),
            &out.stderr,
        ));
        (out, bad)
    };
    let mut bad = Vec::new();
    let trace = case.join("chat.json");
    let trace = trace.to_str().unwrap();
    let case_s = case.to_str().unwrap();
    // localize first: the other commands read its results
    let (out, b) = run(&[
        "localize",
        "cases",
        "--out-dir",
        "out",
        "--sarif",
        "out/loc.sarif",
        "--no-progress",
        "-v",
    ]);
    assert!(
        out.status.code().is_some_and(|c| c < 2),
        "{}",
        text(&out.stderr)
    );
    bad.extend(b);
    for args in [
        vec!["normalize", trace],
        vec!["normalize", trace, "--format", "summary"],
        vec!["normalize", trace, "--format", "json"],
        vec!["localize", "cases", "--no-write", "--format", "json"],
        vec!["explain", case_s],
        vec!["explain", case_s, "--full"],
        vec!["explain", case_s, "--format", "json"],
        vec!["case", "show", case_s, "--write", "1"],
        vec!["case", "show", case_s, "--write", "2", "--diff"],
        vec!["case", "check", case_s],
        vec!["replay", trace],
        vec!["view", "out", "--out", "site"],
        vec![
            "annotate",
            "export",
            "out",
            "--out",
            "packets",
            "--annotator",
            "R1",
        ],
    ] {
        let (out, b) = run(&args);
        assert!(
            out.status.code().is_some_and(|c| c < 2),
            "sage {}: {}",
            args.join(" "),
            text(&out.stderr)
        );
        bad.extend(b);
    }
    for d in ["out", "site", "packets"] {
        assert!(w.path().join(d).is_dir(), "{d} was not written");
        bad.extend(check_tree(&w.path().join(d)));
    }
    // the attack did reach the outputs (as inert text)
    let explained = run(&["explain", case_s, "--full"]).0;
    assert!(text(&explained.stdout).contains("\\u001b]0;TITLE"));
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn attack_filename_line_retitles_the_terminal_through_explain() {
    // Before: `write 2 → w<ESC>]0;TITLE<BEL><ESC>[2J…` reached the terminal raw.
    let w = tempfile::tempdir().unwrap();
    let case = hostile_case(&w.path().join("cases"));
    let out = sage().arg("explain").arg(&case).output().unwrap();
    let stdout = text(&out.stdout);
    assert!(
        out.status.code().is_some_and(|c| c < 2),
        "{}",
        text(&out.stderr)
    );
    assert!(stdout.contains("write"), "{stdout}");
    assert!(
        !stdout.contains('\u{1b}') && !stdout.contains('\u{7}'),
        "{stdout:?}"
    );
    assert!(check_terminal("explain", &out.stdout).is_empty());
}

#[test]
fn attack_control_characters_in_artefact_names_reach_html() {
    // Before: a NUL in an artefact name was written into the page raw, once per mention.
    let w = tempfile::tempdir().unwrap();
    hostile_case(&w.path().join("cases"));
    sage()
        .current_dir(w.path())
        .args(["localize", "cases", "--out-dir", "out", "--no-progress"])
        .output()
        .unwrap();
    let out = sage()
        .current_dir(w.path())
        .args(["view", "out", "--out", "site"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut pages = 0;
    for e in walkdir::WalkDir::new(w.path().join("site")) {
        let e = e.unwrap();
        if e.path().extension().is_some_and(|x| x == "html") {
            pages += 1;
            let s = std::fs::read_to_string(e.path()).unwrap();
            assert_eq!(
                raw_unsafe(&s, &['\n', '\t', '\r']),
                None,
                "{}",
                e.path().display()
            );
        }
    }
    assert!(pages >= 2, "index and one case page");
}

// ------------------------------------------------------------------ SARIF URIs

#[test]
fn attack_sarif_uri_is_a_scheme_or_leaves_its_base() {
    // Before: the anchor's artefact name was the URI, raw and without a uriBaseId.
    let w = tempfile::tempdir().unwrap();
    let names = [
        "javascript:alert(1)",
        "/etc/passwd",
        "../../../etc/passwd",
        "C:\\evil\\x.py",
        "a b%20#?x.py",
    ];
    for (i, name) in names.iter().enumerate() {
        let dir = w.path().join(format!("cases/c{i}"));
        copy_dir(&root().join("corpora/ag2-fig1a-aes-ecb"), &dir);
        let p = dir.join("case.json");
        let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        v.as_object_mut().unwrap().remove("expected");
        v["id"] = format!("c{i}").into();
        v["anchor"]["artefact"] = (*name).into();
        v["baseline"] = serde_json::json!({ *name: "baseline/app.py" });
        std::fs::write(&p, serde_json::to_string_pretty(&v).unwrap()).unwrap();
        // the trace writes (or, for the name with a space, mentions) that artefact
        let p = dir.join("chat.json");
        let chat = std::fs::read_to_string(&p).unwrap();
        let name_json = serde_json::to_string(name).unwrap();
        let name_json = &name_json[1..name_json.len() - 1];
        std::fs::write(&p, chat.replace("app.py", name_json)).unwrap();
    }
    let out = sage()
        .current_dir(w.path())
        .args(["localize", "cases", "--no-write", "--sarif", "loc.sarif"])
        .arg("--no-progress")
        .output()
        .unwrap();
    assert!(
        out.status.code().is_some_and(|c| c < 2),
        "{}",
        text(&out.stderr)
    );
    let log: Value =
        serde_json::from_str(&std::fs::read_to_string(w.path().join("loc.sarif")).unwrap())
            .unwrap();
    let results = log["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), names.len(), "{log:#}");
    assert_eq!(check_sarif("loc.sarif", &log), Vec::<String>::new());
    let uris: Vec<&str> = results
        .iter()
        .filter_map(|r| r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].as_str())
        .collect();
    for want in ["javascript%3Aalert(1)", "a%20b%2520%23%3Fx.py"] {
        assert!(uris.contains(&want), "{uris:?}");
    }
    // the three absolute or climbing names are kept as text, not as a location
    let texts = results
        .iter()
        .filter(|r| r["locations"][0]["physicalLocation"].is_null())
        .count();
    assert_eq!(texts, 3, "{uris:?}");
    // and the script's own check agrees (the schema part needs jsonschema; the URI part
    // runs on the standard library alone)
    let py = std::process::Command::new("python3")
        .arg(root().join("scripts/validate_sarif.py"))
        .arg(w.path().join("loc.sarif"))
        .output();
    match py {
        Ok(o) if o.status.code() == Some(0) || o.status.code() == Some(3) => {}
        Ok(o) => panic!("validate_sarif.py: {}{}", text(&o.stdout), text(&o.stderr)),
        Err(e) => super::need::skip(&format!("needs python3 ({e})")),
    }
}

// ------------------------------------------------------------------ judge replies

/// A server on 127.0.0.1 that lists `gpt-4.1-mini` at `GET …/models` and answers every POST
/// with `answer(stream)`; returns its base URL and the bytes written to POST answers.
fn raw_server(
    answer: impl Fn(&mut std::net::TcpStream, &AtomicU64) + Send + Sync + 'static,
) -> (String, Arc<AtomicU64>) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1", l.local_addr().unwrap());
    let written = Arc::new(AtomicU64::new(0));
    let answer = Arc::new(answer);
    let w = written.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let (answer, w) = (answer.clone(), w.clone());
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut b = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if s.read(&mut b).unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(b[0]);
                }
                let head = String::from_utf8_lossy(&head).to_lowercase();
                let len: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|n| n.trim().parse().ok())
                    .unwrap_or(0);
                let mut body = vec![0u8; len];
                let _ = s.read_exact(&mut body);
                if head.starts_with("get") {
                    let list = r#"{"object":"list","data":[{"id":"gpt-4.1-mini"}]}"#;
                    let _ = write!(
                        s,
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{list}",
                        list.len()
                    );
                } else {
                    answer(&mut s, &w);
                }
            });
        }
    });
    (base, written)
}

fn llm_localize(dir: &Path, base: &str, extra: &[&str]) -> std::process::Output {
    copy_dir(
        &root().join("corpora/ag2-fig1a-aes-ecb"),
        &dir.join("cases/one"),
    );
    sage()
        .current_dir(dir)
        .env("OPENAI_BASE_URL", base)
        .env("OPENAI_API_KEY", KEY)
        .args(["localize", "cases", "--judge", "openai:gpt-4.1-mini"])
        .args(["--no-progress", "--no-ledger", "--out-dir", "out"])
        .args(["--max-attempts", "1"])
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn attack_judge_reply_is_gigabytes() {
    // Before: the body was read whole, with no limit (2 GiB drove sage to 5.57 GB). The
    // server offers 256 MiB with no Content-Length (the cap must hold while reading) and
    // 2 GiB declared (refused before reading).
    for declared in [false, true] {
        let (base, written) = raw_server(move |s, w| {
            let head = if declared {
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2147483648\r\n\r\n"
            } else {
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n"
            };
            if s.write_all(head.as_bytes()).is_err() {
                return;
            }
            let chunk = vec![b' '; 1 << 20];
            for _ in 0..256 {
                if s.write_all(&chunk).is_err() {
                    return;
                }
                w.fetch_add(chunk.len() as u64, Ordering::Relaxed);
            }
        });
        let w = tempfile::tempdir().unwrap();
        let out = llm_localize(w.path(), &base, &["--concurrency", "1"]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("larger than 32 MiB"), "{stderr}");
        assert!(stderr.contains("SAGE_MAX_REPLY_MB"), "{stderr}");
        let sent = written.load(Ordering::Relaxed);
        assert!(sent < 200 << 20, "the client read {sent} bytes");
    }
}

#[test]
fn attack_judge_trickles_one_byte_a_second() {
    // Before: only the per-try timeout (120 s) bounded a try, and a try that timed out was
    // retried six times; there was no whole-request deadline (no --deadline either).
    let (base, _) = raw_server(|s, _| {
        let _ = s.write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n",
        );
        for _ in 0..600 {
            if s.write_all(b" ").is_err() {
                return;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    });
    let w = tempfile::tempdir().unwrap();
    let out = llm_localize(w.path(), &base, &["--deadline", "2"]);
    let stderr = text(&out.stderr);
    assert!(stderr.contains("whole-request deadline of 2 s"), "{stderr}");
    // every turn failed scoring: that is not a success
    assert_eq!(out.status.code(), Some(1), "{stderr}");
}

#[test]
fn the_default_request_deadline_is_finite() {
    let p = sage_llm::http::RetryPolicy::default();
    assert_eq!(p.deadline, sage_llm::http::DEFAULT_DEADLINE);
    assert!(p.deadline <= Duration::from_secs(600));
    let s =
        sage_llm::LlmSettings::from_env(sage_llm::Provider::OpenAi, "m", &sage_llm::Env::default());
    assert!(s.max_reply_bytes.get() <= 64 << 20);
}

#[test]
fn attack_every_turn_fails_scoring_and_the_run_exits_0() {
    // Before: a judge whose every answer was unusable left every turn unscored, and
    // `sage localize` still exited 0 ("3 scoring failures" in a table nobody scripts on).
    let (base, _) = raw_server(|s, _| {
        let body = r#"{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"not json at all"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}"#;
        let _ = write!(
            s,
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
    });
    let w = tempfile::tempdir().unwrap();
    let out = llm_localize(w.path(), &base, &[]);
    let stderr = text(&out.stderr);
    assert!(
        text(&out.stdout).contains("0 scored"),
        "{}",
        text(&out.stdout)
    );
    assert!(stderr.contains("turn(s) failed scoring"), "{stderr}");
    assert_eq!(out.status.code(), Some(1), "{stderr}");
}

// ------------------------------------------------------------------ sheets

#[test]
fn attack_a_large_sheet_makes_annotate_import_quadratic() {
    // Before: every row's line number was counted from the start of the file, so the import
    // was quadratic (20,000 rows 4 s, 1,000,000 rows never finished); 100,000 rows hit this
    // test's hang guard. `cargo bench --bench annotate_import` prints rows/s at 10k-1M.
    let w = tempfile::tempdir().unwrap();
    let rows = 100_000;
    let mut s = String::from("case_id,annotator,provenance,introducing_write\n");
    for i in 0..rows {
        s.push_str(&format!("case-{i:06},R1,inherited,none\n"));
    }
    // one bad row at the end: its line is still right
    s.push_str("case-x,R1,bogus,none\n");
    std::fs::write(w.path().join("sheet.csv"), s).unwrap();
    let out = sage()
        .current_dir(w.path())
        .args(["annotate", "import", "sheet.csv", "--store", "store"])
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert!(
        text(&out.stdout).contains(&format!("{rows} annotation(s) stored")),
        "{}",
        text(&out.stdout)
    );
    assert!(
        stderr.contains(&format!("sheet.csv:{}:", rows + 2)),
        "{stderr}"
    );
    assert_eq!(out.status.code(), Some(1), "{stderr}");
}

// ------------------------------------------------------------------ detection

/// A Moatless-shaped trajectory (a format sage does not list): `name` at the top and on each
/// transition, `role` and `content` on the completion messages nested under them, no AG2
/// `chat_history`. `tool_message` adds one nested message that has all three keys.
fn moatless(tool_message: bool) -> String {
    let last = if tool_message {
        r#"{"role": "tool", "name": "SearchCode", "content": "found parser.py"}"#
    } else {
        r#"{"role": "user", "content": "plan the change"}"#
    };
    format!(
        r#"{{"name": "MoatlessTools", "initial_message": "Fix the parser",
  "workspace": {{"repository": {{"type": "git", "repo_path": "/tmp/repo"}}}},
  "transitions": [
    {{"id": 1, "name": "SearchCode", "state": {{"name": "SearchCode", "max_tokens": 8000}},
     "actions": [{{"request": {{"scratch_pad": "look", "search_requests": [{{"query": "parse"}}]}},
       "completion": {{"model": "gpt-4o", "input": [
          {{"role": "system", "content": "You are an autonomous AI assistant."}},
          {{"role": "user", "content": "Fix the parser"}}],
        "response": {{"choices": [{{"message": {{"role": "assistant", "content": "I search."}}}}]}}}}}}]}},
    {{"id": 2, "name": "PlanToCode", "state": {{"name": "PlanToCode"}},
     "actions": [{{"request": {{"action": "modify", "file_path": "parser.py"}},
       "completion": {{"model": "gpt-4o", "input": [{last}]}}}}]}}
  ],
  "info": {{"session_id": "s1"}}}}
"#
    )
}

#[test]
fn attack_moatless_trajectory_is_read_as_ag2() {
    // Before: AG2's rule matched `name`, `role` and `content` anywhere in the file, so a
    // Moatless trajectory was detected as AG2 and refused as "no agent-authored turn in this
    // ag2 trace". Now the keys must be on one object; weak evidence that reads nothing is
    // "format not recognized"; a case's trace.framework is not called a --framework flag.
    let w = tempfile::tempdir().unwrap();
    for (name, nested) in [("spread.json", false), ("nested.json", true)] {
        std::fs::write(w.path().join(name), moatless(nested)).unwrap();
        let out = sage()
            .current_dir(w.path())
            .args(["normalize", name])
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {err}");
        assert!(out.stdout.is_empty(), "{name}: printed a trace");
        assert!(err.contains(&format!("{name} (whole file)")), "{err}");
        assert!(err.contains("format not recognized"), "{name}: {err}");
        assert!(!err.contains("ag2 trace"), "{name}: {err}");
        assert!(!err.contains("--framework ag2 refused"), "{name}: {err}");
    }
    // Keys spread over objects: AG2 does not score at all.
    let out = sage()
        .current_dir(w.path())
        .args(["adapters", "detect", "spread.json"])
        .output()
        .unwrap();
    assert!(!text(&out.stdout).contains("ag2"), "{}", text(&out.stdout));
    // One nested message with all three keys: weak evidence, named as such.
    let out = sage()
        .current_dir(w.path())
        .args(["normalize", "nested.json"])
        .output()
        .unwrap();
    assert!(
        text(&out.stderr).contains("only weak evidence (ag2 scores 30"),
        "{}",
        text(&out.stderr)
    );
    // A case built when the file was taken for AG2 names its manifest, not a flag.
    let cases = w.path().join("cases");
    copy_dir(
        &root().join("corpora/ag2-fig1a-aes-ecb"),
        &cases.join("moatless"),
    );
    std::fs::write(cases.join("moatless/chat.json"), moatless(false)).unwrap();
    let out = sage()
        .current_dir(w.path())
        .args(["localize", "cases"])
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert!(err.contains("skipped"), "{err}");
    assert!(
        err.contains("framework ag2 (the manifest's trace.framework) refused"),
        "{err}"
    );
    assert!(!err.contains("--framework"), "{err}");
}

// ------------------------------------------------------------------ szz

#[test]
fn attack_repository_makes_git_print_more_than_the_cap() {
    // Before: `sage szz` read every git child's stdout whole, so a repository whose fix
    // rewrites a huge file (or whose blame is huge) made sage hold gigabytes. Now each call
    // stops at --git-max-output-mb: git is killed and the error names the command and the
    // cap. A 2 MiB rewrite against a 1 MiB cap stands in for gigabytes.
    let mut r = crate::szz::Repo::new();
    let pad = "x".repeat(400);
    let old: String = (0..2_000)
        .map(|i| format!("int v{i} = {i}; // {pad}\n"))
        .collect();
    r.commit_file("big.c", &old, "add big.c");
    r.write("big.c", &old.replace(" = ", " = 1 + "));
    let fix = r.commit("fix every line");
    let szz = |extra: &[&str]| {
        let out = sage()
            .args(["szz", "--repo"])
            .arg(r.path())
            .args(["--fix", &fix, "--format", "json"])
            .args(extra)
            .output()
            .unwrap();
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    };
    let (code, out, err) = szz(&["--git-max-output-mb", "1"]);
    let all = format!("{out}{err}");
    assert!(
        all.contains("printed more than 1048576 bytes") && all.contains("--git-max-output-mb"),
        "{code:?}\n{all}"
    );
    assert!(
        all.contains("git ") && (all.contains("diff") || all.contains("blame")),
        "{all}"
    );
    assert_ne!(code, Some(0), "{all}");
    // The same repository under the default cap is read.
    let (code, _, err) = szz(&[]);
    assert_eq!(code, Some(0), "{err}");
}

// ------------------------------------------------------------------ output files

#[test]
fn attack_killed_runs_leave_temporaries_beside_an_output_file() {
    // Before: a run killed while writing `-o FILE` left `.tmp-PID-FILE` beside it for good
    // (only the results folder was cleaned). Now the atomic writer removes its own stale
    // temporaries of that file: its exact name pattern, another (dead) process, older than
    // the run. Anything else stays.
    let w = tempfile::tempdir().unwrap();
    let keep = [
        ".tmp-999999-other.1",    // another target's
        ".tmp-x-sage.1",          // not a pid
        ".tmp-999999-sage.1.bak", // not this name
        "sage.1.tmp-999999",
    ];
    for f in keep
        .iter()
        .chain([&".tmp-999999-sage.1", &".tmp-4000001-sage.1"])
    {
        std::fs::write(w.path().join(f), "partial").unwrap();
    }
    let out = sage()
        .current_dir(w.path())
        .args(["man", "-o", "sage.1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let mut names: Vec<String> = std::fs::read_dir(w.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut want: Vec<String> = keep.iter().map(|s| s.to_string()).collect();
    want.push("sage.1".into());
    want.sort();
    assert_eq!(names, want);
}

#[test]
fn docs_security_names_every_attack_test() {
    // Every defence is listed with its test: each `attack_*` test of this file and of
    // security.rs is named in docs/security.md.
    let doc = std::fs::read_to_string(root().join("docs/security.md")).unwrap();
    let mut missing = Vec::new();
    for f in [
        "tests/it/hostile.rs",
        "tests/it/security.rs",
        "crates/sage-pipeline/src/sink.rs",
        "crates/sage-markup/src/lib.rs",
    ] {
        let src = std::fs::read_to_string(root().join(f)).unwrap();
        for l in src.lines() {
            if let Some(rest) = l.trim_start().strip_prefix("fn attack_") {
                let name = format!("attack_{}", rest.split('(').next().unwrap());
                if !doc.contains(&name) {
                    missing.push(name);
                }
            }
        }
    }
    assert!(missing.is_empty(), "not in docs/security.md: {missing:?}");
}
