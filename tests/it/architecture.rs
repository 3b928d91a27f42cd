//! The architecture invariants of `docs/architecture.md`, checked on the source tree: the crate
//! graph, that only the CLI parses flags or prints, and that no crate's modules import each
//! other in a cycle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Which sage crates each library crate may depend on (and so, what it must never know).
const ALLOWED: &[(&str, &[&str])] = &[
    ("sage-patch", &[]),
    ("sage-markup", &[]),
    ("sage-trace", &[]),
    ("sage-llm", &[]),
    ("sage-reliability", &["sage-markup"]),
    ("sage-adapters", &["sage-trace", "sage-patch"]),
    ("sage-history", &["sage-trace", "sage-patch"]),
    ("sage-screen", &["sage-trace", "sage-patch", "sage-markup"]),
    ("sage-szz", &["sage-llm", "sage-patch"]),
    ("sage-judge", &["sage-trace", "sage-llm"]),
    (
        "sage-pipeline",
        &[
            "sage-patch",
            "sage-markup",
            "sage-trace",
            "sage-llm",
            "sage-adapters",
            "sage-judge",
            "sage-history",
            "sage-reliability",
            "sage-screen",
        ],
    ),
];

fn crates() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(Path::new(ROOT).join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("Cargo.toml").is_file())
        .collect();
    v.sort();
    v
}

fn manifest(dir: &Path) -> toml::Value {
    toml::from_str(&std::fs::read_to_string(dir.join("Cargo.toml")).unwrap()).unwrap()
}

fn deps(m: &toml::Value, table: &str) -> BTreeSet<String> {
    m.get(table)
        .and_then(|t| t.as_table())
        .map(|t| t.keys().cloned().collect())
        .unwrap_or_default()
}

#[test]
fn every_library_crate_depends_only_on_what_it_may_know() {
    let allowed: BTreeMap<&str, &[&str]> = ALLOWED.iter().copied().collect();
    let found = crates();
    assert_eq!(
        found.len(),
        ALLOWED.len(),
        "a crate without an entry in ALLOWED: {found:?}"
    );
    for dir in found {
        let m = manifest(&dir);
        let name = m["package"]["name"].as_str().unwrap().to_string();
        let may: BTreeSet<String> = allowed
            .get(name.as_str())
            .unwrap_or_else(|| panic!("{name} has no entry in ALLOWED (docs/architecture.md)"))
            .iter()
            .map(|s| s.to_string())
            .collect();
        let normal = deps(&m, "dependencies");
        let sage: BTreeSet<String> = normal
            .iter()
            .filter(|d| d.starts_with("sage-"))
            .cloned()
            .collect();
        let extra: Vec<_> = sage.difference(&may).collect();
        assert!(
            extra.is_empty(),
            "{name} depends on {extra:?}, which it must not know"
        );
        for cli_only in ["clap", "anyhow", "indicatif"] {
            assert!(
                !normal.contains(cli_only),
                "{name} depends on {cli_only}: only the CLI parses flags and draws progress"
            );
        }
    }
}

/// Source lines of a file before its test module.
fn library_part(text: &str) -> &str {
    match text.find("#[cfg(test)]") {
        Some(i) => &text[..i],
        None => text,
    }
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "rs"))
        .map(|e| e.into_path())
        .collect();
    v.sort();
    v
}

#[test]
fn no_library_crate_prints_or_exits() {
    for dir in crates() {
        for f in rust_files(&dir.join("src")) {
            let name = f.file_name().unwrap().to_string_lossy().to_string();
            if name.contains("test") || name == "fake.rs" {
                continue; // compiled only for tests
            }
            let text = std::fs::read_to_string(&f).unwrap();
            for (i, line) in library_part(&text).lines().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                for bad in [
                    "println!(",
                    "eprintln!(",
                    "print!(",
                    "eprint!(",
                    "process::exit(",
                ] {
                    assert!(
                        !code.contains(bad),
                        "{}:{}: `{bad}` in a library crate: return a value and let the CLI print",
                        f.display(),
                        i + 1
                    );
                }
            }
        }
    }
}

/// Name → module for the names a crate root re-exports (`pub use m::{A, b as c}`).
fn reexports(lib: &str) -> BTreeMap<String, String> {
    let re = regex::Regex::new(
        r"(?s)pub(?:\(crate\))? use ([a-z_][a-z0-9_]*)::(\{[^}]*\}|[A-Za-z_][A-Za-z0-9_]*)",
    )
    .unwrap();
    let mut out = BTreeMap::new();
    for c in re.captures_iter(lib) {
        let module = c[1].to_string();
        for item in c[2].trim_matches(['{', '}']).split(',') {
            let item = item.trim();
            let name = item.rsplit(" as ").next().unwrap_or(item).trim();
            if !name.is_empty() && name != "self" {
                out.insert(name.to_string(), module.clone());
            }
        }
    }
    out
}

/// The top-level module a source file belongs to (`src/llm/prompt.rs` → `llm`).
fn module_of(src: &Path, f: &Path) -> String {
    let rel = f.strip_prefix(src).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

#[test]
fn no_module_import_cycle_inside_a_crate() {
    let re = regex::Regex::new(r"crate::([A-Za-z_][A-Za-z0-9_]*)").unwrap();
    let names = regex::Regex::new(r"crate::\{([^}]*)\}").unwrap();
    for dir in crates() {
        let src = dir.join("src");
        let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let files = rust_files(&src);
        let modules: BTreeSet<String> = files.iter().map(|f| module_of(&src, f)).collect();
        // The crate root is a face: it re-exports, it is not a stage. A name it re-exports
        // (`pub use adapter::{Adapter, SourceFile}`) is the module's, so `crate::Adapter`
        // counts as an import of `adapter` (a cycle through the face is still a cycle).
        let reexported = reexports(&std::fs::read_to_string(src.join("lib.rs")).unwrap());
        for f in &files {
            let from = module_of(&src, f);
            if from == "lib" {
                continue;
            }
            let text = std::fs::read_to_string(f).unwrap();
            let code = library_part(&text);
            // `crate::m::...` names module `m`; a bare `crate::Name` a re-exported item.
            let mut targets: Vec<String> = re
                .captures_iter(code)
                .map(|c| {
                    let m = c.get(1).unwrap();
                    let is_path = code[m.end()..].starts_with("::");
                    let name = m.as_str().to_string();
                    if is_path && modules.contains(&name) {
                        format!("{name}::")
                    } else {
                        name
                    }
                })
                .collect();
            for c in names.captures_iter(code) {
                for n in c[1].split(',') {
                    let n = n.trim().split([':', ' ']).next().unwrap_or("");
                    targets.push(n.to_string());
                }
            }
            for t in targets {
                let to = match t.strip_suffix("::") {
                    Some(module) => module.to_string(),
                    None => reexported.get(&t).cloned().unwrap_or(t),
                };
                if to != from && modules.contains(&to) {
                    edges.entry(from.clone()).or_default().insert(to);
                }
            }
        }
        // Depth-first search for a cycle.
        fn visit(
            n: &str,
            edges: &BTreeMap<String, BTreeSet<String>>,
            state: &mut BTreeMap<String, u8>,
            path: &mut Vec<String>,
        ) -> Option<Vec<String>> {
            match state.get(n) {
                Some(1) => {
                    let i = path.iter().position(|p| p == n).unwrap();
                    let mut c = path[i..].to_vec();
                    c.push(n.to_string());
                    return Some(c);
                }
                Some(2) => return None,
                _ => {}
            }
            state.insert(n.to_string(), 1);
            path.push(n.to_string());
            for m in edges.get(n).into_iter().flatten() {
                if let Some(c) = visit(m, edges, state, path) {
                    return Some(c);
                }
            }
            path.pop();
            state.insert(n.to_string(), 2);
            None
        }
        let mut state = BTreeMap::new();
        for n in edges.keys() {
            let cycle = visit(n, &edges, &mut state, &mut Vec::new());
            assert!(
                cycle.is_none(),
                "{}: modules import each other in a cycle: {}",
                dir.display(),
                cycle.unwrap().join(" → ")
            );
        }
    }
}

/// Every library crate: public functions return typed errors only (docs/architecture.md).
const TYPED_ERRORS: &[&str] = &[
    "sage-patch",
    "sage-markup",
    "sage-trace",
    "sage-llm",
    "sage-adapters",
    "sage-judge",
    "sage-history",
    "sage-reliability",
    "sage-screen",
    "sage-szz",
    "sage-pipeline",
];

#[test]
fn typed_crates_return_no_string_errors_from_public_functions() {
    let mut found = Vec::new();
    for name in TYPED_ERRORS {
        let src = Path::new(ROOT).join("crates").join(name).join("src");
        assert!(src.is_dir(), "{name}: no such crate");
        assert!(
            crates().iter().all(|c| TYPED_ERRORS
                .iter()
                .any(|t| c.file_name().is_some_and(|f| f == *t))),
            "a new crate must be listed in TYPED_ERRORS"
        );
        for f in rust_files(&src) {
            let text = std::fs::read_to_string(&f).unwrap();
            let text = library_part(&text);
            for (at, _) in text.match_indices("pub fn ") {
                // the signature: up to the body or the end of a declaration
                let sig = &text[at..];
                let end = sig.find(['{', ';']).unwrap_or(sig.len());
                let sig: String = sig[..end].split_whitespace().collect::<Vec<_>>().join(" ");
                let ret = sig.rsplit_once("->").map_or("", |(_, r)| r.trim());
                if ret.starts_with("Result<") && ret.ends_with(", String>") {
                    found.push(format!("{}: {sig}", f.display()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "public functions returning Result<_, String> (give them a thiserror type):\n{}",
        found.join("\n")
    );
}

/// Issue 29: one output discipline. Every line the CLI prints goes through the sanitizing
/// macros of `src/cli/mod.rs` (`outln!`, `out!`, `errln!`, `errout!`, `note!`),
/// `print_or_write` or a `TerminalWriter`, all of which pass it through
/// `sage_markup::terminal`; a raw print macro or a bare `stdout()` anywhere else would let
/// trace text reach the terminal unsanitized.
#[test]
fn the_cli_prints_only_through_the_terminal_sanitizer() {
    let cli = Path::new(ROOT).join("src");
    for f in rust_files(&cli) {
        let text = std::fs::read_to_string(&f).unwrap();
        let name = f.strip_prefix(ROOT).unwrap().display().to_string();
        // the macro definitions themselves, before the first module
        let body = if name.ends_with("cli/mod.rs") {
            text.split_once("pub mod agree;")
                .map_or(text.as_str(), |x| x.1)
        } else {
            &text
        };
        for (i, line) in body.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for bad in ["println!(", "eprintln!(", "print!(", "eprint!("] {
                let raw = code.match_indices(bad).any(|(at, _)| {
                    !code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_')
                });
                assert!(
                    !raw,
                    "{name}: `{bad}` bypasses the terminal sanitizer; use outln!/errln! \
                     (src/cli/mod.rs): {}",
                    line.trim()
                );
            }
            // clap's generated completions and man page are sage's own text; anything else
            // writes stdout through a TerminalWriter or sage_markup::terminal (within 3 lines)
            // (asking whether stdout is a terminal writes nothing)
            if code.contains("stdout()")
                && !code.contains(".is_terminal()")
                && !name.ends_with("cli/completions.rs")
            {
                let near: Vec<&str> = body.lines().skip(i.saturating_sub(3)).take(4).collect();
                assert!(
                    near.iter().any(|l| l.contains("TerminalWriter::new(")
                        || l.contains("sage_markup::terminal(")),
                    "{name}:{}: stdout written without the terminal sanitizer: {}",
                    i + 1,
                    line.trim()
                );
            }
        }
    }
}
