//! Bounded fuzzing (issues 15 and 18): every adapter on mutated real samples, and the case
//! loader on mutated manifests and files, through the whole pipeline (`sage replay`'s
//! reconstruction included). Nothing may panic; bad input is an error naming its file. Runs
//! under `cargo test` (CI) with a fixed number of cases; `SAGE_FUZZ_CASES=N` runs more.
//! Why proptest and not `cargo fuzz`: docs/security.md, "Fuzzing".

use crate::support::copy_dir;
use proptest::prelude::*;
use sage_adapters::{self as adapters, SourceFile};
use sage_trace::RawStore;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn cases() -> u32 {
    std::env::var("SAGE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(48)
}

/// Per adapter, the smallest real sample it reads: from ../shared/traces when present, the
/// bundled corpus and tests/fixtures otherwise.
fn samples() -> &'static Vec<(String, PathBuf)> {
    static S: OnceLock<Vec<(String, PathBuf)>> = OnceLock::new();
    S.get_or_init(|| {
        let mut files: Vec<(u64, PathBuf)> = Vec::new();
        for dir in [
            root().join("../shared/traces"),
            root().join("corpora"),
            root().join("tests/fixtures"),
        ] {
            for e in walkdir::WalkDir::new(dir)
                .into_iter()
                .filter_map(|e| e.ok())
            {
                if e.file_type().is_file() && e.file_name() != "case.json" {
                    let len = e.metadata().map(|m| m.len()).unwrap_or(u64::MAX);
                    if len < 4 << 20 {
                        files.push((len, e.into_path()));
                    }
                }
            }
        }
        files.sort();
        let mut out = Vec::new();
        for a in adapters::registry() {
            let found = files.iter().find(|(_, p)| {
                let f = SourceFile::new("sample", p);
                adapters::normalize(&[f], &adapters::NormalizeOptions::framework(Some(a.name())))
                    .is_ok_and(|t| !t.turns.is_empty())
            });
            match found {
                Some((_, p)) => out.push((a.name().to_string(), p.clone())),
                None => eprintln!("fuzz: no sample for adapter {} found", a.name()),
            }
        }
        out
    })
}

#[test]
fn every_adapter_has_a_fuzz_sample() {
    let have: Vec<&str> = samples().iter().map(|(n, _)| n.as_str()).collect();
    if !root().join("../shared/traces").is_dir() {
        eprintln!(
            "../shared/traces missing: only adapters with a bundled sample are fuzzed ({have:?})"
        );
        return;
    }
    for a in adapters::registry() {
        assert!(
            have.contains(&a.name()),
            "adapter {} has no sample to fuzz (add one under tests/fixtures)",
            a.name()
        );
    }
}

/// Apply byte-level mutations: set, delete, insert, truncate, duplicate a slice.
fn mutate(bytes: &[u8], ops: &[(u8, usize, u8)]) -> Vec<u8> {
    let mut b = bytes.to_vec();
    for &(kind, pos, byte) in ops {
        if b.is_empty() {
            b.push(byte);
            continue;
        }
        let i = pos % b.len();
        match kind % 6 {
            0 => b[i] = byte,
            1 => {
                b.remove(i);
            }
            2 => b.insert(i, byte),
            3 => b.truncate(i),
            4 => {
                let j = (i + 1 + byte as usize * 7).min(b.len());
                let slice = b[i..j].to_vec();
                b.splice(i..i, slice);
            }
            // a structural character where it hurts most
            _ => {
                let special = b"{}[]\",:\n\\";
                b.insert(i, special[byte as usize % special.len()])
            }
        }
    }
    b
}

/// The whole per-trace pipeline on one file: normalize (forced and detected), the raw
/// pointer check, history replay on an empty baseline, the injection scan, and `sage
/// replay`'s reconstruction and verdicts. Panics are the failure; errors are fine, but each
/// must name the file it is about (the name the file was given, `trace`, or a member of it).
fn pipeline(adapter: &str, path: &Path) {
    let f = SourceFile::new("trace", path);
    let _ = adapters::detect(path, &Default::default());
    for framework in [Some(adapter), None] {
        match adapters::normalize(
            std::slice::from_ref(&f),
            &adapters::NormalizeOptions::framework(framework),
        ) {
            Ok(t) => {
                if let Ok(store) =
                    RawStore::load(&t, Path::new(""), sage_trace::safe::DEFAULT_MAX_INPUT_BYTES)
                {
                    let _ = adapters::verify_raw_refs(&t, &store);
                }
                let _ = sage_history::reconstruct(&Default::default(), &t, &Default::default());
                let _ = sage_judge::injection::Rules::embedded().scan(&t);
            }
            Err(e) => {
                assert!(!e.message.is_empty());
                assert!(e.file.starts_with("trace"), "error without its file: {e}");
            }
        }
        let opts = sage_pipeline::trace_replay::ReplayOptions {
            framework: framework.map(String::from),
            ..Default::default()
        };
        if let Err(e) = sage_pipeline::trace_replay::replay(std::slice::from_ref(&f), &opts) {
            assert!(
                e.to_string().starts_with("trace"),
                "error without its file: {e}"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, .. ProptestConfig::default() })]

    #[test]
    fn every_adapter_survives_mutated_real_samples(
        which in 0usize..64,
        ops in proptest::collection::vec((any::<u8>(), any::<usize>(), any::<u8>()), 1..8),
    ) {
        let s = samples();
        prop_assume!(!s.is_empty());
        let (name, path) = &s[which % s.len()];
        let bytes = std::fs::read(path).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("trace");
        std::fs::write(&p, mutate(&bytes, &ops)).unwrap();
        pipeline(name, &p);
    }
}

// ------------------------------------------------------------------ the case loader

/// Values a hostile manifest puts where a path, an id or a text goes.
const HOSTILE: &[&str] = &[
    "/proc/self/environ",
    "../../../../../../etc/passwd",
    "..",
    "",
    " ",
    "a\u{0}b",
    "dup/x",
    "~",
    "C:\\Windows\\win.ini",
    "\u{202e}gnp.exe",
    "<script>alert(1)</script>",
    "=HYPERLINK(\"x\")",
    "baseline",
    ".",
    "case.json",
];

fn hostile_value(k: u8, n: usize) -> serde_json::Value {
    match k % 6 {
        0 => HOSTILE[n % HOSTILE.len()].into(),
        1 => "x".repeat(n % 2000).into(),
        2 => serde_json::json!(n),
        3 => serde_json::Value::Null,
        4 => serde_json::json!([HOSTILE[n % HOSTILE.len()]]),
        _ => serde_json::json!({ HOSTILE[n % HOSTILE.len()]: HOSTILE[(n + 1) % HOSTILE.len()] }),
    }
}

/// Replace the `n`-th value (in document order) of the manifest by a hostile one.
fn poke(v: &mut serde_json::Value, target: usize, k: u8, n: usize, seen: &mut usize) {
    if *seen == target {
        *v = hostile_value(k, n);
        *seen += 1;
        return;
    }
    *seen += 1;
    match v {
        serde_json::Value::Object(m) => {
            for (_, x) in m.iter_mut() {
                poke(x, target, k, n, seen);
            }
        }
        serde_json::Value::Array(a) => {
            for x in a.iter_mut() {
                poke(x, target, k, n, seen);
            }
        }
        _ => {}
    }
}

const CASES: &[&str] = &[
    "ag2-fig1a-aes-ecb",
    "aider-whole-cookie",
    "ag2-final-only-usermod",
    "aider-remove-reinstate-path",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, .. ProptestConfig::default() })]

    #[test]
    fn the_case_loader_survives_hostile_manifests_and_files(
        which in 0usize..CASES.len(),
        pokes in proptest::collection::vec((any::<usize>(), any::<u8>(), any::<usize>()), 0..4),
        byte_ops in proptest::collection::vec((any::<u8>(), any::<usize>(), any::<u8>()), 0..4),
        mangle_manifest_bytes in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let case = dir.path().join("case");
        copy_dir(&root().join("corpora").join(CASES[which]), &case);
        let mp = case.join("case.json");
        let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&mp).unwrap()).unwrap();
        for &(target, k, n) in &pokes {
            let mut seen = 0;
            poke(&mut v, target % 40, k, n, &mut seen);
        }
        let mut text = serde_json::to_vec_pretty(&v).unwrap();
        if mangle_manifest_bytes {
            text = mutate(&text, &byte_ops);
        } else if !byte_ops.is_empty() {
            // mangle the trace file instead
            if let Some(f) = v.pointer("/trace/files/0").and_then(|f| f.as_str()) {
                let p = case.join(f);
                if p.is_file() && p.starts_with(&case) {
                    let b = std::fs::read(&p).unwrap();
                    std::fs::write(&p, mutate(&b, &byte_ops)).unwrap();
                }
            }
        }
        std::fs::write(&mp, text).unwrap();
        let opts = sage_pipeline::localize::Options::default();
        let out = futures::executor::block_on(sage_pipeline::localize::localize_case(&case, &opts));
        if let Some(s) = &out.skipped {
            // a caught panic is reported as an internal error: that is a bug
            prop_assert!(s.stage != "internal", "{}", s.message);
            prop_assert!(!s.message.is_empty());
        }
        // whatever loaded never names a file outside the case folder
        if let Ok(c) = sage_trace::case::Case::load(&case, &Default::default()) {
            prop_assert!(sage_trace::safe::check_id(&c.id).is_ok());
        }
        let _ = sage_pipeline::replay::units_from_cases(&case, &Default::default());
    }
}
