//! The architecture invariants of `docs/architecture.md`, checked on the source tree: the crate
//! graph, that only the CLI parses flags or prints, and that no crate's modules import each
//! other in a cycle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Which sage crates each library crate may depend on (and so, what it must never know).
const ALLOWED: &[(&str, &[&str])] = &[
    ("sage-patch", &[]),
    ("sage-sandbox", &[]),
    ("sage-markup", &[]),
    ("sage-schema", &[]),
    ("sage-trace", &[]),
    ("sage-llm", &[]),
    ("sage-reliability", &["sage-markup", "sage-schema"]),
    ("sage-adapters", &["sage-trace", "sage-patch"]),
    ("sage-history", &["sage-trace", "sage-patch"]),
    (
        "sage-screen",
        &[
            "sage-trace",
            "sage-patch",
            "sage-markup",
            "sage-sandbox",
            "sage-schema",
        ],
    ),
    (
        "sage-szz",
        &["sage-llm", "sage-patch", "sage-sandbox", "sage-schema"],
    ),
    ("sage-judge", &["sage-trace", "sage-llm", "sage-schema"]),
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
            "sage-sandbox",
            "sage-schema",
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

/// A file's production code: the text with every `#[cfg(test)]` item (a test module, inline
/// `mod tests { ... }` or `mod tests;`, or a test-only function or `use`) blanked out, line
/// breaks kept so line numbers stay true. Only the item after the attribute is skipped: code
/// after a test module is production code and is checked (issue 30: stopping at the first
/// `#[cfg(test)]` let ~1,180 production lines escape every check).
fn library_part(text: &str) -> String {
    let spans = lex(text);
    let mut out: Vec<u8> = text.as_bytes().to_vec();
    let b = text.as_bytes();
    let mut from = 0;
    while let Some(at) = find_code(text, &spans, "#[cfg(test)]", from) {
        // the item: up to its first `;` or its first `{` and the matching `}`, at code positions
        let mut i = at + "#[cfg(test)]".len();
        let mut depth = 0usize;
        let mut end = text.len();
        while i < b.len() {
            if let Some(skip) = spans.get(&i) {
                i = *skip;
                continue;
            }
            match b[i] {
                b'{' => depth += 1,
                b'}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                b';' if depth == 0 => {
                    end = i + 1;
                    break;
                }
                _ => {}
            }
            i += 1;
        }
        for c in &mut out[at..end] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
        from = end;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The non-code spans of Rust source (comments, string and char literals), as start → end.
fn lex(text: &str) -> BTreeMap<usize, usize> {
    let b = text.as_bytes();
    let mut spans = BTreeMap::new();
    let mut i = 0;
    while i < b.len() {
        let start = i;
        let rest = &b[i..];
        if rest.starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if rest.starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if (rest.starts_with(b"r#") || rest.starts_with(b"r\"") || rest.starts_with(b"br"))
            && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
            && {
                let j = if rest[0] == b'b' { 2 } else { 1 };
                let hashes = rest[j..].iter().take_while(|&&c| c == b'#').count();
                rest.get(j + hashes) == Some(&b'"')
            }
        {
            let j = if rest[0] == b'b' { 2 } else { 1 };
            let hashes = rest[j..].iter().take_while(|&&c| c == b'#').count();
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            i += j + hashes + 1;
            while i < b.len() && !b[i..].starts_with(&close) {
                i += 1;
            }
            i = (i + close.len()).min(b.len());
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i = (i + 1).min(b.len());
        } else if b[i] == b'\'' {
            // a char literal ('x', '\n', '\u{..}', 'é'), else a lifetime or label
            let next = text[i + 1..].chars().next();
            let after = next.map(|c| i + 1 + c.len_utf8());
            if next == Some('\\') {
                i += 2;
                while i < b.len() && b[i] != b'\'' {
                    i += 1;
                }
                i += 1;
            } else if after.is_some_and(|a| b.get(a) == Some(&b'\'')) {
                i = after.unwrap() + 1;
            } else {
                i += 1;
                continue;
            }
        } else {
            i += 1;
            continue;
        }
        spans.insert(start, i);
    }
    spans
}

/// The first occurrence of `needle` at or after `from` that starts at a code position.
fn find_code(
    text: &str,
    spans: &BTreeMap<usize, usize>,
    needle: &str,
    from: usize,
) -> Option<usize> {
    let mut from = from;
    while let Some(rel) = text.get(from..)?.find(needle) {
        let at = from + rel;
        let inside = spans
            .range(..=at)
            .next_back()
            .is_some_and(|(_, &end)| at < end);
        if !inside {
            return Some(at);
        }
        from = at + 1;
    }
    None
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

/// Lines of a library file's production code that print or exit: (line, what).
fn prints_or_exits(text: &str) -> Vec<(usize, &'static str)> {
    let mut found = Vec::new();
    for (i, line) in library_part(text).lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        for bad in [
            "println!(",
            "eprintln!(",
            "print!(",
            "eprint!(",
            "process::exit(",
        ] {
            if code.contains(bad) {
                found.push((i + 1, bad));
            }
        }
    }
    found
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
            if let Some((line, bad)) = prints_or_exits(&text).first() {
                panic!(
                    "{}:{line}: `{bad}` in a library crate: return a value and let the CLI print",
                    f.display()
                );
            }
        }
    }
}

/// Planted: production code after a test module (and after a test module inside an inline
/// module, as camel.rs's `pyrepr`) is checked; test code, and braces in strings, comments and
/// char literals, do not end a test module early.
#[test]
fn production_code_after_a_test_module_is_checked() {
    let planted = r##"
pub fn a() {}
#[cfg(test)]
mod tests {
    fn t() { println!("{}", '}'); let s = "}}}"; let r = r#"}"#; /* } */ } // }
}
pub fn after() { println!("escaped before issue 30"); }
pub mod inner {
    #[cfg(test)]
    mod tests { fn t() { eprintln!("test"); } }
    pub fn late() { std::process::exit(3) }
}
#[cfg(test)]
fn only_in_tests() { print!("x"); }
"##;
    assert_eq!(
        prints_or_exits(planted),
        vec![(7, "println!("), (11, "process::exit(")]
    );
    // the old rule (stop at the first `#[cfg(test)]`) saw none of them
    let old = &planted[..planted.find("#[cfg(test)]").unwrap()];
    assert!(prints_or_exits(old).is_empty());
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

/// A source file's module path (`src/llm/prompt.rs` → `[llm, prompt]`, `src/llm/mod.rs` →
/// `[llm]`, `src/lib.rs` → `[]`).
fn module_path(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| {
            c.as_os_str()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_string()
        })
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The first path segment of every item of a `use` group (`{a::X, b, c::{D, E}}` → a, b, c).
fn group_heads(group: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0;
    let mut item = String::new();
    for c in group.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                heads.push(std::mem::take(&mut item));
                continue;
            }
            _ => {}
        }
        item.push(c);
    }
    heads.push(item);
    heads
        .iter()
        .map(|i| {
            i.trim()
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .next()
                .unwrap_or("")
                .to_string()
        })
        .filter(|h| !h.is_empty() && h != "self")
        .collect()
}

/// Module → the top-level modules it names, for one crate given as (path under `src/`,
/// source) pairs, the root (`lib.rs`) among them. Followed: `crate::m::...`, a bare
/// `crate::Name` (through the root's re-exports to the module that defines `Name`),
/// `crate::{...}` groups, and `super::` chains that climb to the root (`super::Name` in a
/// top-level module, `super::super::m` in a nested one, counting inline `mod x { }` blocks).
/// Test code is not followed (`library_part`).
fn module_edges(files: &[(PathBuf, String)]) -> BTreeMap<String, BTreeSet<String>> {
    let modules: BTreeSet<String> = files
        .iter()
        .filter_map(|(rel, _)| module_path(rel).first().cloned())
        .collect();
    let lib = files
        .iter()
        .find(|(rel, _)| rel == Path::new("lib.rs"))
        .map_or("", |(_, t)| t.as_str());
    let reexported = reexports(&library_part(lib));
    let path = regex::Regex::new(r"\b(crate|super(?:::super)*)::").unwrap();
    let inline = regex::Regex::new(r"\bmod ([a-z_][a-z0-9_]*)\s*\{").unwrap();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (rel, text) in files {
        let file_path = module_path(rel);
        let Some(from) = file_path.first().cloned() else {
            continue; // the root is a face: it re-exports, it is not a stage
        };
        let code = library_part(text);
        let spans = lex(&code);
        // inline modules of this file, as byte ranges
        let mut blocks: Vec<(usize, usize)> = Vec::new();
        for m in inline.find_iter(&code) {
            if find_code(&code, &spans, m.as_str(), m.start()) != Some(m.start()) {
                continue;
            }
            let b = code.as_bytes();
            let (mut i, mut depth) = (m.end() - 1, 0usize);
            while i < b.len() {
                if let Some(&skip) = spans.get(&i) {
                    i = skip;
                    continue;
                }
                match b[i] {
                    b'{' => depth += 1,
                    b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            blocks.push((m.start(), i));
        }
        for m in path.find_iter(&code) {
            if find_code(&code, &spans, m.as_str(), m.start()) != Some(m.start()) {
                continue; // in a comment or a string
            }
            let head = m.as_str().trim_end_matches("::");
            let climbs_to_root = if head == "crate" {
                true
            } else {
                let supers = head.split("::").count();
                let depth = file_path.len()
                    + blocks
                        .iter()
                        .filter(|(a, z)| *a < m.start() && m.start() < *z)
                        .count();
                supers >= depth
            };
            if !climbs_to_root {
                continue; // a sibling inside the same top-level module
            }
            let rest = &code[m.end()..];
            let names: Vec<String> = if rest.starts_with('{') {
                let mut depth = 0;
                let end = rest
                    .char_indices()
                    .find(|&(_, c)| {
                        match c {
                            '{' => depth += 1,
                            '}' => depth -= 1,
                            _ => {}
                        }
                        depth == 0
                    })
                    .map_or(rest.len(), |(i, _)| i);
                group_heads(&rest[1..end])
            } else {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                vec![name]
            };
            for name in names {
                let to = if modules.contains(&name) {
                    name
                } else {
                    match reexported.get(&name) {
                        Some(m) => m.clone(),
                        None => continue,
                    }
                };
                if to != from {
                    edges.entry(from.clone()).or_default().insert(to);
                }
            }
        }
    }
    edges
}

/// A cycle among the edges, if any (as the path that closes it).
fn find_cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
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
    edges
        .keys()
        .find_map(|n| visit(n, edges, &mut state, &mut Vec::new()))
}

/// A crate's sources as (path under `src/`, text).
fn crate_sources(dir: &Path) -> Vec<(PathBuf, String)> {
    let src = dir.join("src");
    rust_files(&src)
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(&f).unwrap();
            (f.strip_prefix(&src).unwrap().to_path_buf(), text)
        })
        .collect()
}

#[test]
fn no_module_import_cycle_inside_a_crate() {
    for dir in crates() {
        let edges = module_edges(&crate_sources(&dir));
        if let Some(cycle) = find_cycle(&edges) {
            panic!(
                "{}: modules import each other in a cycle: {}",
                dir.display(),
                cycle.join(" → ")
            );
        }
    }
}

/// Planted: cycles the old check missed are found: one through `use super::` from a top-level
/// module (the root's re-export), one through `super::super::` from a nested file, and one
/// whose import sits after a test module; a `super::` between siblings is no edge.
#[test]
fn planted_cycles_through_super_and_after_tests_are_caught() {
    let files = |pairs: &[(&str, &str)]| -> Vec<(PathBuf, String)> {
        pairs
            .iter()
            .map(|(p, t)| (PathBuf::from(p), t.to_string()))
            .collect()
    };
    let root = "mod a; mod b; mod c; pub use b::Thing;";
    let through_super = files(&[
        ("lib.rs", root),
        ("a.rs", "use crate::b::x;"),
        ("b.rs", "pub struct Thing; use super::a::y;"),
    ]);
    assert_eq!(
        find_cycle(&module_edges(&through_super)),
        Some(vec!["a".into(), "b".into(), "a".into()])
    );
    let reexport_by_super = files(&[
        ("lib.rs", root),
        ("a.rs", "use super::{Thing, c::{self, Z}};"),
        ("c.rs", ""),
        ("b/mod.rs", "mod inner;"),
        ("b/inner.rs", "use super::super::a::f; use super::sibling;"),
    ]);
    let edges = module_edges(&reexport_by_super);
    assert_eq!(edges["a"], ["b", "c"].map(String::from).into());
    assert_eq!(edges["b"], ["a"].map(String::from).into());
    assert!(find_cycle(&edges).is_some());
    let after_tests = files(&[
        ("lib.rs", root),
        ("a.rs", "use crate::b::x;"),
        (
            "b.rs",
            "#[cfg(test)]\nmod tests { use crate::c::z; }\nfn late() { crate::a::f() }",
        ),
    ]);
    let edges = module_edges(&after_tests);
    assert!(!edges.contains_key("c") && !edges["b"].contains("c"));
    assert!(find_cycle(&edges).is_some());
    let siblings = files(&[
        ("lib.rs", root),
        ("b/mod.rs", "mod one; mod two;"),
        ("b/one.rs", "use super::two::x;"),
        ("b/two.rs", "use super::one::y;"),
        ("c.rs", ""),
        (
            "a.rs",
            "mod inner { use super::super::c::q; fn f() { super::g() } }",
        ),
    ]);
    let edges = module_edges(&siblings);
    assert!(!edges.contains_key("b"));
    assert_eq!(edges["a"], ["c"].map(String::from).into());
    // and on the real tree: sage-judge's `concurrent` names `score` only as `use super::{..}`
    let judge = module_edges(&crate_sources(&Path::new(ROOT).join("crates/sage-judge")));
    assert!(judge["concurrent"].contains("score") && judge["concurrent"].contains("verify"));
}

/// The trace formats sage-adapters reads: its "one module per format" list.
fn format_names() -> Vec<String> {
    let lib =
        std::fs::read_to_string(Path::new(ROOT).join("crates/sage-adapters/src/lib.rs")).unwrap();
    let (_, list) = lib.split_once("// One module per format.").unwrap();
    let list = list.split("\n\n").next().unwrap();
    let names: Vec<String> = list
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .map(|n| n.trim_end_matches(';').to_string())
        .collect();
    assert!(names.len() >= 10, "the format list moved: {names:?}");
    names
}

/// Format names (`aider`, `swe_agent` also as `swe-agent`, ...) that a file's production code
/// (comments aside) names.
fn formats_named(text: &str, names: &[String]) -> Vec<String> {
    let code = library_part(text);
    let spans = lex(&code);
    let mut bytes = code.clone().into_bytes();
    for (&a, &z) in &spans {
        if code[a..].starts_with('/') {
            bytes[a..z].fill(b' ');
        }
    }
    let code = String::from_utf8_lossy(&bytes).to_lowercase();
    names
        .iter()
        .filter(|n| code.contains(n.as_str()) || code.contains(&n.replace('_', "-")))
        .cloned()
        .collect()
}

/// docs/architecture.md: "sage-history ... knows no trace format" and "sage-screen ...
/// knows no trace format": no format's name in their code (issue 30: the editors' fallbacks
/// are the op's `Tolerance`, set by the adapters).
#[test]
fn history_and_screen_know_no_trace_format() {
    let names = format_names();
    for krate in ["sage-history", "sage-screen"] {
        for (rel, text) in crate_sources(&Path::new(ROOT).join("crates").join(krate)) {
            if rel.to_string_lossy().contains("test") {
                continue;
            }
            let found = formats_named(&text, &names);
            assert!(
                found.is_empty(),
                "{krate}/src/{}: names trace formats {found:?}: make it data on the \
                 canonical trace instead",
                rel.display()
            );
        }
    }
    // planted: a match on the format in code is caught, a mention in a comment is not
    let planted = "// as Aider does\nfn f(via: &str) -> bool { via == \"aider-diff\" }";
    assert_eq!(formats_named(planted, &names), vec!["aider".to_string()]);
    assert!(formats_named("// as Aider and SWE-agent do\nfn f() {}", &names).is_empty());
    assert_eq!(
        formats_named("const X: &str = \"swe-agent\";", &names),
        vec!["swe_agent".to_string()]
    );
}

/// Module → format modules it names, for the modules of sage-adapters that are not formats,
/// except the registry (the one list of the formats).
fn generic_modules_naming_formats(
    edges: &BTreeMap<String, BTreeSet<String>>,
    formats: &[String],
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (from, tos) in edges {
        if formats.contains(from) || from == "registry" {
            continue;
        }
        for to in tos.iter().filter(|t| formats.contains(t)) {
            out.push((from.clone(), to.clone()));
        }
    }
    out
}

/// Issue 30: the `Adapter` trait is the only way to a format. Detection and normalization
/// loop over the registry; no generic module of sage-adapters names a format's module (the
/// registry lists them; formats may share each other's readers).
#[test]
fn formats_are_reached_only_through_the_adapter_trait() {
    let formats = format_names();
    let edges = module_edges(&crate_sources(
        &Path::new(ROOT).join("crates/sage-adapters"),
    ));
    let found = generic_modules_naming_formats(&edges, &formats);
    assert!(
        found.is_empty(),
        "generic modules of sage-adapters name a format (go through the Adapter trait): {found:?}"
    );
    // planted: normalize matching an adapter's name and calling its module is caught
    let planted: Vec<(PathBuf, String)> = [
        ("lib.rs", "pub mod openhands; mod normalize; mod registry;"),
        ("registry.rs", "use crate::openhands;"),
        ("openhands.rs", ""),
        (
            "normalize.rs",
            "fn f(a: &str) { if a == \"openhands\" { crate::openhands::normalize_record(); } }",
        ),
    ]
    .iter()
    .map(|(p, t)| (PathBuf::from(p), t.to_string()))
    .collect();
    assert_eq!(
        generic_modules_naming_formats(&module_edges(&planted), &formats),
        vec![("normalize".to_string(), "openhands".to_string())]
    );
}

/// Lines of a library file's production code (comments aside) that read the process
/// environment: (line, what).
fn env_reads(text: &str) -> Vec<(usize, &'static str)> {
    let code = library_part(text);
    let spans = lex(&code);
    let mut bytes = code.clone().into_bytes();
    for (&a, &z) in &spans {
        if code[a..].starts_with('/') {
            bytes[a..z].fill(b' ');
        }
    }
    let code = String::from_utf8_lossy(&bytes).into_owned();
    let mut found = Vec::new();
    for (i, line) in code.lines().enumerate() {
        for bad in ["env::var(", "env::var_os(", "env::vars(", "env::vars_os("] {
            if line.contains(bad) {
                found.push((i + 1, bad));
            }
        }
    }
    found
}

/// Issue 30: configuration is a value the CLI builds. No library crate reads the process
/// environment (API keys and base URLs arrive as `sage_llm::Env`, a test's `PATH` as
/// `sage_screen::Options::path`, limits and rule files through the CLI).
#[test]
fn no_library_crate_reads_the_environment() {
    for dir in crates() {
        for (rel, text) in crate_sources(&dir) {
            if rel.to_string_lossy().contains("test") {
                continue; // compiled only for tests
            }
            if let Some((line, bad)) = env_reads(&text).first() {
                panic!(
                    "{}/src/{}:{line}: `{bad}` in a library crate: the CLI reads the environment \
                     and passes a value",
                    dir.display(),
                    rel.display()
                );
            }
        }
    }
    // planted: a read after a test module is caught; one in a comment or a test is not
    let planted = "// std::env::var(\"X\")\n#[cfg(test)]\nmod tests { fn t() { std::env::var(\"A\"); } }\nfn key() -> Option<String> { std::env::var(\"KEY\").ok() }\n";
    assert_eq!(env_reads(planted), vec![(4, "env::var(")]);
}

/// Every library crate: public functions return typed errors only (docs/architecture.md).
const TYPED_ERRORS: &[&str] = &[
    "sage-patch",
    "sage-schema",
    "sage-sandbox",
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
            let text = text.as_str();
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

/// The process-wide statics a library crate may hold: none is configuration (a value the
/// user sets for a run), each is named with why it may be process-wide.
const NON_CONFIGURATION_STATICS: &[(&str, &str, &str)] = &[
    (
        "sage-adapters/src/rules.rs",
        "EMBEDDED",
        "the embedded detection rules, parsed once",
    ),
    (
        "sage-history/src/paths.rs",
        "EMBEDDED",
        "the embedded workspace roots, parsed once",
    ),
    (
        "sage-sandbox/src/sandbox.rs",
        "N",
        "a counter that makes scratch-folder names unique within the process",
    ),
    (
        "sage-adapters/src/kinds.rs",
        "EMBEDDED",
        "the embedded turn-kinds file, compiled once",
    ),
    (
        "sage-adapters/src/registry.rs",
        "NAMES",
        "interned adapter names (leaked once each)",
    ),
    (
        "sage-adapters/src/registry.rs",
        "REGISTRY",
        "the adapters, built once from embedded mappings",
    ),
    (
        "sage-adapters/src/mapping.rs",
        "PARSED",
        "the embedded mapping files, parsed once",
    ),
    ("sage-adapters/src/edits.rs", "HEAD", "a compiled pattern"),
    (
        "sage-adapters/src/edits.rs",
        "DIVIDER",
        "a compiled pattern",
    ),
    (
        "sage-adapters/src/edits.rs",
        "UPDATED",
        "a compiled pattern",
    ),
    (
        "sage-adapters/src/edits.rs",
        "HEREDOC",
        "a compiled pattern",
    ),
    ("sage-adapters/src/edits.rs", "SED", "a compiled pattern"),
    (
        "sage-adapters/src/edits.rs",
        "WRITE_LIKE",
        "a compiled pattern",
    ),
    ("sage-adapters/src/edits.rs", "RM", "a compiled pattern"),
    (
        "sage-adapters/src/aider.rs",
        "REVIEW_ASK",
        "a compiled pattern",
    ),
    (
        "sage-history/src/fragment.rs",
        "PARSER",
        "a per-thread tree-sitter parser, reused",
    ),
    (
        "sage-judge/src/config.rs",
        "C",
        "the embedded judge configuration, parsed once",
    ),
    (
        "sage-judge/src/lexicon.rs",
        "EMBEDDED",
        "the embedded lexicon, parsed once (a user's lexicon is a value the CLI passes)",
    ),
    (
        "sage-judge/src/config.rs",
        "W",
        "the embedded context windows, parsed once",
    ),
    (
        "sage-judge/src/lexicon.rs",
        "TASK",
        "a per-thread cache of the last task's text",
    ),
    (
        "sage-llm/src/secrets.rs",
        "SECRETS",
        "the secrets registry: every writer scrubs them",
    ),
    (
        "sage-llm/src/http.rs",
        "ONCE",
        "rustls' crypto provider, installed once",
    ),
    (
        "sage-pipeline/src/sink.rs",
        "RUN_START",
        "when this process started writing (a fact)",
    ),
    (
        "sage-screen/src/l1.rs",
        "M",
        "the embedded distribution-to-module table, parsed once",
    ),
    ("sage-screen/src/l1.rs", "Q", "a compiled tree-sitter query"),
    (
        "sage-screen/src/l1.rs",
        "PROBE",
        "whether this machine can isolate the network (a fact)",
    ),
    ("sage-screen/src/l2.rs", "R", "a compiled pattern"),
    ("sage-screen/src/l2.rs", "Q", "a compiled tree-sitter query"),
    (
        "sage-screen/src/l3/facts.rs",
        "Q",
        "a compiled tree-sitter query",
    ),
    (
        "sage-screen/src/sarif_in.rs",
        "CWE_RX",
        "a compiled pattern",
    ),
    (
        "sage-szz/src/oracle_data.rs",
        "EMBEDDED",
        "the embedded oracle data, parsed once",
    ),
];

/// The `static NAME:` items of a library file's production code (comments aside), with
/// their lines; `&'static` lifetimes are not items.
fn process_statics(text: &str) -> Vec<(usize, String)> {
    let code = library_part(text);
    let spans = lex(&code);
    let mut bytes = code.clone().into_bytes();
    for (&a, &z) in &spans {
        // comments and string literals, keeping their line breaks
        for b in &mut bytes[a..z] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
    }
    let code = String::from_utf8_lossy(&bytes).into_owned();
    let item = regex::Regex::new(r"(?:^|[^'\w])static\s+([A-Za-z_]\w*)\s*:").unwrap();
    let mut found = Vec::new();
    for (i, line) in code.lines().enumerate() {
        for c in item.captures_iter(line) {
            found.push((i + 1, c[1].to_string()));
        }
    }
    found
}

/// Issue 30: configuration is a value the CLI builds and passes by reference. A library
/// crate holds no process-wide static but the named non-configuration ones (compiled
/// patterns, embedded data parsed once, the secrets registry, facts about the machine): no
/// configuration global is left.
#[test]
fn no_library_crate_holds_configuration_in_a_process_global() {
    let allowed = |file: &str, name: &str| {
        NON_CONFIGURATION_STATICS
            .iter()
            .any(|(f, n, _)| *f == file && *n == name)
    };
    let mut seen = BTreeSet::new();
    for dir in crates() {
        let krate = dir.file_name().unwrap().to_string_lossy().into_owned();
        for (rel, text) in crate_sources(&dir) {
            if rel.to_string_lossy().contains("test") {
                continue; // compiled only for tests
            }
            let file = format!("{krate}/src/{}", rel.display());
            for (line, name) in process_statics(&text) {
                assert!(
                    allowed(&file, &name),
                    "{file}:{line}: `static {name}` in a library crate: configuration is a \
                     value the CLI passes; a static that is not configuration goes on \
                     NON_CONFIGURATION_STATICS with its reason"
                );
                seen.insert((file.clone(), name));
            }
        }
    }
    // the lists name only what exists (a static removed leaves the list)
    for (f, n, _) in NON_CONFIGURATION_STATICS {
        assert!(
            seen.contains(&(f.to_string(), n.to_string())),
            "{f}: `static {n}` is listed but no longer exists: take it off the list"
        );
    }
    // planted: a configuration global after a test module is caught; a lifetime, a comment
    // and a test's static are not
    let planted = "pub fn f() -> &'static str { \"x\" }\n// static NOT: u8 = 0;\n#[cfg(test)]\nmod tests { static T: u8 = 0; }\nstatic CURRENT: std::sync::OnceLock<Rules> = std::sync::OnceLock::new();\n";
    assert_eq!(process_statics(planted), vec![(5, "CURRENT".to_string())]);
    assert!(!allowed("sage-adapters/src/rules.rs", "CURRENT"));
}

/// Where a result type serializes other than through its published record in a `schema`
/// module (issue 30): every serde derive of the file (`results.rs` of `sage.results/1`,
/// sage-screen's `report.rs` of `sage.screen/1`) is `into`/`from` a schema type, and no field
/// carries a serde attribute of its own.
fn serde_outside_schema(text: &str) -> Vec<String> {
    // an attribute that rustfmt split over several lines, as one
    let mut lines: Vec<String> = Vec::new();
    let mut open = false;
    for l in text.lines() {
        match lines.last_mut() {
            Some(last) if open => last.push_str(l.trim()),
            _ => lines.push(l.to_string()),
        }
        open = lines
            .last()
            .is_some_and(|x| x.contains("#[") && !x.contains(")]"));
    }
    let mut bad = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let through_schema =
            |l: &str| l.contains("into = \"schema::") && l.contains("from = \"schema::");
        if line.contains("#[derive(") && line.contains("Serialize") {
            if !lines.get(i + 1).is_some_and(|n| through_schema(n)) {
                bad.push(line.trim().to_string());
            }
        } else if line.contains("#[serde(") && !through_schema(line) {
            bad.push(line.trim().to_string());
        }
    }
    bad
}

#[test]
fn the_published_results_format_is_its_own_types() {
    let path = Path::new(ROOT).join("crates/sage-pipeline/src/results.rs");
    let text = library_part(&std::fs::read_to_string(&path).unwrap());
    let bad = serde_outside_schema(&text);
    assert!(
        bad.is_empty(),
        "results.rs serializes outside results::schema (add the field to its published \
         record there): {bad:?}"
    );
    let planted = "#[derive(Debug, Serialize)]\npub struct Row {\n    #[serde(rename = \"n\")]\n    pub count: usize,\n}\n";
    assert_eq!(serde_outside_schema(planted).len(), 2);
    let through = "#[derive(Clone, Serialize, Deserialize)]\n#[serde(into = \"schema::Row\", from = \"schema::Row\")]\npub struct Row;\n";
    assert!(serde_outside_schema(through).is_empty());
}

/// The internal types a `schema` module mirrors (`pub struct Name = path::Type {`, the same
/// with `enum`) that still derive serde of their own in `sources` (file name, text): such a
/// type could be serialized around its published record. A derive that goes `into`/`from` the
/// schema is allowed.
fn mirrored_types_with_serde(schema: &str, sources: &[(String, String)]) -> Vec<String> {
    let mirrored: Vec<&str> = schema
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let rest = l
                .strip_prefix("pub struct ")
                .or_else(|| l.strip_prefix("pub enum "))?;
            let (_, internal) = rest.split_once(" = ")?;
            let internal = internal.trim_end_matches(" {").trim();
            Some(internal.rsplit("::").next().unwrap_or(internal))
        })
        .collect();
    let mut bad = Vec::new();
    for (file, text) in sources {
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let Some(name) = ["pub struct ", "pub enum "].iter().find_map(|k| {
                let rest = line.strip_prefix(k)?;
                Some(rest.split([' ', '{', '(', ';', '<']).next().unwrap_or(rest))
            }) else {
                continue;
            };
            if !mirrored.contains(&name) {
                continue;
            }
            let attrs: Vec<&str> = lines[..i]
                .iter()
                .rev()
                .take_while(|l| l.starts_with("#[") || l.starts_with("///"))
                .copied()
                .collect();
            let serde = attrs
                .iter()
                .any(|a| a.starts_with("#[derive(") && a.contains("Serialize"));
            let through = attrs
                .iter()
                .any(|a| a.contains("into = \"schema::") && a.contains("from = \"schema::"));
            if serde && !through {
                bad.push(format!("{file}: {name}"));
            }
        }
    }
    bad
}

#[test]
fn the_published_screen_format_is_its_own_types() {
    let src = Path::new(ROOT).join("crates/sage-screen/src");
    let read = |rel: &str| library_part(&std::fs::read_to_string(src.join(rel)).unwrap());
    let bad = serde_outside_schema(&read("report.rs"));
    assert!(
        bad.is_empty(),
        "sage-screen's report.rs serializes outside report/schema.rs (add the field to its published \
         record there): {bad:?}"
    );
    // The levels' own types that the report is made of derive no serde: only their
    // published records in report/schema.rs say what sage.screen/1 holds.
    let schema = read("report/schema.rs");
    let sources: Vec<(String, String)> = walkdir::WalkDir::new(&src)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "rs"))
        .filter(|e| !e.path().ends_with("schema.rs"))
        .map(|e| {
            let text = library_part(&std::fs::read_to_string(e.path()).unwrap());
            (e.path().display().to_string(), text)
        })
        .collect();
    assert!(sources.len() > 10, "{}", sources.len());
    let bad = mirrored_types_with_serde(&schema, &sources);
    assert!(
        bad.is_empty(),
        "types that sage.screen/1 publishes through report/schema.rs derive serde of their own: \
         {bad:?}"
    );
    // planted: a level's type that derives Serialize again is caught; the report's derive
    // through the schema, and a type the schema does not mirror, are not
    let schema = "mirror! {\n    pub struct Hit = l3::Hit {\n        line: usize,\n    }\n}\nmirror! {\n    pub struct Report = report::Report {\n    }\n}\n";
    let planted = vec![
        (
            "l3/score.rs".to_string(),
            "/// One rule.\n#[derive(Debug, Clone, Serialize)]\npub struct Hit {\n    pub line: usize,\n}\n#[derive(Deserialize)]\nstruct Raw;\n".to_string(),
        ),
        (
            "report.rs".to_string(),
            "#[derive(Clone, Serialize, Deserialize)]\n#[serde(into = \"schema::Report\", from = \"schema::Report\")]\npub struct Report {}\n".to_string(),
        ),
    ];
    assert_eq!(
        mirrored_types_with_serde(schema, &planted),
        vec!["l3/score.rs: Hit".to_string()]
    );
}

/// `sage.confirm-key/1` (issue 30): `confirm.rs`'s `Key` serializes only through its
/// published record in `confirm/schema.rs`, and the types that record mirrors (`KeyEntry`) derive
/// no serde of their own. Only the key is checked in `confirm.rs`: its summaries and sheet rows
/// are no published format.
#[test]
fn the_published_confirm_key_is_its_own_types() {
    let src = Path::new(ROOT).join("crates/sage-pipeline/src");
    let read = |rel: &str| library_part(&std::fs::read_to_string(src.join(rel)).unwrap());
    let schema = read("confirm/schema.rs");
    let confirm = read("confirm.rs");
    let key_derive = |text: &str| {
        let lines: Vec<&str> = text.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.starts_with("pub struct Key {"))
            .expect("confirm.rs defines `pub struct Key`");
        lines[..at]
            .iter()
            .rev()
            .take_while(|l| l.starts_with("#[") || l.starts_with("///"))
            .any(|l| l.contains("into = \"schema::Key\"") && l.contains("from = \"schema::Key\""))
    };
    assert!(
        key_derive(&confirm),
        "confirm.rs's Key must serialize through confirm/schema.rs \
         (#[serde(into = \"schema::Key\", from = \"schema::Key\")])"
    );
    let mirrored: Vec<&str> = ["Key", "KeyEntry"]
        .into_iter()
        .filter(|n| schema.contains(&format!("pub struct {n} = confirm::{n} {{")))
        .collect();
    assert_eq!(
        mirrored,
        ["Key", "KeyEntry"],
        "confirm/schema.rs mirrors the key"
    );
    let sources = vec![("confirm.rs".to_string(), confirm)];
    let bad = mirrored_types_with_serde(&schema, &sources);
    assert!(
        bad.is_empty(),
        "types that sage.confirm-key/1 publishes through confirm/schema.rs derive serde of \
         their own: {bad:?}"
    );
    // planted: a key entry that derives Serialize again, and a key without the schema, are
    // caught; the key through the schema is not
    let planted = "/// One packet.\n#[derive(Debug, Clone, Serialize, Deserialize)]\npub struct KeyEntry {\n    pub run: String,\n}\n#[derive(Serialize, Deserialize)]\n#[serde(into = \"schema::Key\", from = \"schema::Key\")]\npub struct Key {}\n";
    assert_eq!(
        mirrored_types_with_serde(&schema, &[("confirm.rs".to_string(), planted.to_string())]),
        vec!["confirm.rs: KeyEntry".to_string()]
    );
    assert!(key_derive(planted));
    assert!(!key_derive(
        "#[derive(Serialize, Deserialize)]\npub struct Key {}\n"
    ));
}

/// `sage.replay/1` (issue 30): the replay's values (`trace_replay.rs`) and the execution
/// report (`execute.rs`) derive no serde at all; only their records in
/// `trace_replay/schema.rs` say what `sage replay --format json` prints. Nothing reads the
/// format back, so the CLI converts the report (`From`) and nothing goes `into` the schema.
#[test]
fn the_published_replay_format_is_its_own_types() {
    let src = Path::new(ROOT).join("crates/sage-pipeline/src");
    let read = |rel: &str| library_part(&std::fs::read_to_string(src.join(rel)).unwrap());
    for file in ["trace_replay.rs", "execute.rs"] {
        let bad = serde_outside_schema(&read(file));
        assert!(
            bad.is_empty(),
            "sage-pipeline's {file} serializes outside trace_replay/schema.rs (add the field \
             to its published record there): {bad:?}"
        );
    }
    // Every internal type the schema mirrors, wherever in the crate it is defined, derives
    // no serde of its own (sage case check's report carries the published Counts and Verdict).
    let schema = read("trace_replay/schema.rs");
    let sources: Vec<(String, String)> = walkdir::WalkDir::new(&src)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "rs"))
        .filter(|e| !e.path().ends_with("schema.rs"))
        .map(|e| {
            let text = library_part(&std::fs::read_to_string(e.path()).unwrap());
            (e.path().display().to_string(), text)
        })
        .collect();
    let mirrored = [
        "TraceReplay",
        "Counts",
        "ArtefactReplay",
        "Check",
        "KnownRun",
    ];
    for name in mirrored
        .iter()
        .chain(&["ExecutionReport", "CommandReport", "ExecutedWrite"])
    {
        assert!(schema.contains(&format!("pub struct {name} = ")), "{name}");
    }
    let bad = mirrored_types_with_serde(&schema, &sources);
    assert!(
        bad.is_empty(),
        "types that sage.replay/1 publishes through trace_replay/schema.rs derive serde of \
         their own: {bad:?}"
    );
    // planted: the execution report deriving Serialize again, with a field attribute, is
    // caught in execute.rs and by the mirror; a type the schema does not mirror is not
    let planted = "/// What ran.\n#[derive(Debug, Clone, Serialize, Default)]\npub struct ExecutionReport {\n    #[serde(skip)]\n    pub diverged_naming: u8,\n}\n";
    assert_eq!(serde_outside_schema(planted).len(), 2);
    let schema = "mirror! {\n    pub struct ExecutionReport = execute::ExecutionReport {\n        state: String,\n    } not published { diverged_naming }\n}\n";
    let sources = vec![
        ("execute.rs".to_string(), planted.to_string()),
        (
            "knowledge.rs".to_string(),
            "#[derive(Serialize)]\npub struct Known;\n".to_string(),
        ),
    ];
    assert_eq!(
        mirrored_types_with_serde(schema, &sources),
        vec!["execute.rs: ExecutionReport".to_string()]
    );
}

/// Where production code makes or runs a child process other than through the one bounded
/// runner (`sage_sandbox::child`: `command` makes a `Command`, `run` / `run_fed` run it with
/// a time limit and an output cap). Comments, strings and test code do not count.
fn unbounded_processes(text: &str) -> Vec<(usize, &'static str)> {
    let code = library_part(text);
    let spans = lex(&code);
    let mut bytes = code.clone().into_bytes();
    for (&a, &z) in &spans {
        bytes[a..z].fill(b' ');
    }
    let code = String::from_utf8_lossy(&bytes).into_owned();
    let mut found = Vec::new();
    for (i, line) in code.lines().enumerate() {
        for bad in ["Command::new(", ".spawn()", ".output()", ".status()"] {
            if line.contains(bad) {
                found.push((i + 1, bad));
            }
        }
    }
    found
}

/// Issue 30: every child process sage starts has a time limit. The one runner is
/// `crates/sage-sandbox/src/child.rs`; an HTTP response's `.status()` is not a process.
#[test]
fn every_child_process_goes_through_the_bounded_runner() {
    const RUNNER: &str = "sage-sandbox/src/child.rs";
    const NOT_A_PROCESS: &[(&str, &str)] = &[("sage-llm/src/http.rs", ".status()")];
    let mut files: Vec<(String, String)> = Vec::new();
    for dir in crates() {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        for (rel, text) in crate_sources(&dir) {
            files.push((format!("{name}/src/{}", rel.display()), text));
        }
    }
    for f in rust_files(&Path::new(ROOT).join("src")) {
        let rel = f.strip_prefix(ROOT).unwrap().display().to_string();
        files.push((rel, std::fs::read_to_string(&f).unwrap()));
    }
    assert!(files.iter().any(|(f, _)| f == RUNNER));
    let mut bad = Vec::new();
    for (file, text) in &files {
        if file == RUNNER {
            continue;
        }
        for (line, what) in unbounded_processes(text) {
            if !NOT_A_PROCESS.contains(&(file.as_str(), what)) {
                bad.push(format!("{file}:{line}: {what}"));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "a child process made or run outside sage_sandbox::child (use child::command and \
         child::run, with a time limit): {bad:?}"
    );
    // planted: a command run after a test module is caught; one in a comment, a string or a
    // test is not
    let planted = "// Command::new(\"git\").output()\nconst DOC: &str = \"x.spawn()\";\n#[cfg(test)]\nmod tests { fn t() { std::process::Command::new(\"sh\").status(); } }\nfn show() { let o = std::process::Command::new(\"git\")\n    .output(); }\n";
    assert_eq!(
        unbounded_processes(planted),
        vec![(5, "Command::new("), (6, ".output()")]
    );
}

/// `sage.reliability/1` (issue 30): the report's values (`report.rs`), the measures
/// (`measures.rs`) and the resampling summaries (`resample.rs`) derive no serde; only their
/// records in sage-reliability's `report/schema.rs` say what `reliability.json` holds. Nothing
/// reads the format back, so the CLI converts the report (`From`) and nothing goes `into` the
/// schema.
#[test]
fn the_published_reliability_format_is_its_own_types() {
    let src = Path::new(ROOT).join("crates/sage-reliability/src");
    let read = |rel: &str| library_part(&std::fs::read_to_string(src.join(rel)).unwrap());
    for file in ["report.rs", "measures.rs", "resample.rs"] {
        let bad = serde_outside_schema(&read(file));
        assert!(
            bad.is_empty(),
            "sage-reliability's {file} serializes outside report/schema.rs (add the field to \
             its published record there): {bad:?}"
        );
    }
    // Every internal type the schema mirrors, wherever in the crate it is defined (the level
    // of an alpha is in stats.rs, which deserializes it for the reference vectors), derives no
    // Serialize of its own.
    let schema = read("report/schema.rs");
    let sources: Vec<(String, String)> = walkdir::WalkDir::new(&src)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "rs"))
        .filter(|e| !e.path().ends_with("schema.rs"))
        .map(|e| {
            let text = library_part(&std::fs::read_to_string(e.path()).unwrap());
            (e.path().display().to_string(), text)
        })
        .collect();
    assert!(sources.len() > 5, "{}", sources.len());
    for name in [
        "ReliabilityReport",
        "ConsistencySection",
        "Consistency",
        "Share",
        "Coefficient",
        "ScoreDifferences",
        "HumanComparison",
        "PairAgreement",
        "Resampling",
        "ResamplingField",
        "PartitionSummary",
        "LeaveOneOut",
        "SubgroupTable",
        "SubgroupRow",
    ] {
        assert!(schema.contains(&format!("pub struct {name} = ")), "{name}");
    }
    assert!(schema.contains("pub enum Level = stats::Level {"));
    let bad = mirrored_types_with_serde(&schema, &sources);
    assert!(
        bad.is_empty(),
        "types that sage.reliability/1 publishes through report/schema.rs derive serde of \
         their own: {bad:?}"
    );
    // planted: a share deriving Serialize again, with a field attribute, is caught in
    // measures.rs and by the mirror, and so is the level; the level deserialized for the
    // reference vectors, and a type the schema does not mirror, are not
    let planted = "/// A count.\n#[derive(Debug, Clone, Copy, PartialEq, Serialize)]\npub struct Share {\n    #[serde(rename = \"n\")]\n    pub count: usize,\n}\n#[derive(Serialize)]\npub struct OriginRating;\n";
    assert_eq!(serde_outside_schema(planted).len(), 3);
    let schema = "mirror! {\n    pub struct Share = measures::Share {\n        count: usize,\n    }\n}\nwords! {\n    pub enum Level = stats::Level {\n        Nominal,\n    }\n}\n";
    let sources = vec![
        ("measures.rs".to_string(), planted.to_string()),
        (
            "stats.rs".to_string(),
            "#[derive(Debug, Clone, Copy, Deserialize)]\n#[serde(rename_all = \"lowercase\")]\npub enum Level {\n    Nominal,\n}\n".to_string(),
        ),
        (
            "stats2.rs".to_string(),
            "#[derive(Clone, Copy, Serialize)]\npub enum Level {\n    Nominal,\n}\n".to_string(),
        ),
    ];
    assert_eq!(
        mirrored_types_with_serde(schema, &sources),
        vec![
            "measures.rs: Share".to_string(),
            "stats2.rs: Level".to_string()
        ]
    );
}

/// `sage.annotation-packet/1` (issue 30): in `annotate.rs` the key serializes only through its
/// published record in `annotate/schema.rs` (`#[serde(into, from)]`: `sage annotate import
/// --key` reads keys back) and nothing else derives serde; the packets are written as the
/// schema's `Packets`, and every type the schema mirrors derives no serde of its own.
#[test]
fn the_published_annotation_packets_are_their_own_types() {
    let src = Path::new(ROOT).join("crates/sage-pipeline/src");
    let read = |rel: &str| library_part(&std::fs::read_to_string(src.join(rel)).unwrap());
    let annotate = read("annotate.rs");
    let bad = serde_outside_schema(&annotate);
    assert!(
        bad.is_empty(),
        "annotate.rs serializes outside annotate/schema.rs (add the field to its published \
         record there): {bad:?}"
    );
    assert!(
        annotate
            .contains("#[serde(into = \"schema::Key\", from = \"schema::Key\")]\npub struct Key {"),
        "annotate.rs's Key must serialize through annotate/schema.rs"
    );
    let schema = read("annotate/schema.rs");
    for name in [
        "Packet",
        "PacketWrite",
        "PacketTurn",
        "PacketFinalState",
        "Key",
    ] {
        assert!(
            schema.contains(&format!("pub struct {name} = annotate::{name} {{")),
            "annotate/schema.rs mirrors {name}"
        );
    }
    assert!(schema.contains("pub struct Packets {"));
    let sources: Vec<(String, String)> = walkdir::WalkDir::new(&src)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "rs"))
        .filter(|e| !e.path().ends_with("schema.rs"))
        .map(|e| {
            let text = library_part(&std::fs::read_to_string(e.path()).unwrap());
            (e.path().display().to_string(), text)
        })
        .collect();
    let bad = mirrored_types_with_serde(&schema, &sources);
    assert!(
        bad.is_empty(),
        "types that sage.annotation-packet/1 publishes through annotate/schema.rs derive serde \
         of their own: {bad:?}"
    );
    // planted: a packet deriving serde again, with a field attribute, is caught in
    // annotate.rs and by the mirror; the key through the schema is not
    let planted = "/// One case.\n#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]\npub struct Packet {\n    #[serde(default, skip_serializing_if = \"Option::is_none\")]\n    pub anchor_fragment: Option<String>,\n}\n#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]\n#[serde(into = \"schema::Key\", from = \"schema::Key\")]\npub struct Key {}\n";
    assert_eq!(serde_outside_schema(planted).len(), 2);
    assert_eq!(
        mirrored_types_with_serde(&schema, &[("annotate.rs".to_string(), planted.to_string())]),
        vec!["annotate.rs: Packet".to_string()]
    );
}

/// The internal types a `schema` module converts from, whether with [`mirrored_types_with_serde`]'s
/// `pub struct Name = path::Type {` line or by a hand-written `impl From<path::Type> for`
/// (an enum whose variants carry data), as that function's lines.
fn schema_sources(schema: &str) -> String {
    let mut out = String::new();
    for l in schema.lines() {
        let l = l.trim();
        let hand = l
            .strip_prefix("impl From<")
            .and_then(|r| r.split_once("> for "))
            .filter(|(internal, _)| internal.contains("::"));
        if let Some((internal, _)) = hand {
            let name = internal.rsplit("::").next().unwrap_or(internal);
            out.push_str(&format!("pub enum {name} = {internal} {{\n"));
        } else if l.starts_with("pub struct ") || l.starts_with("pub enum ") {
            out.push_str(l);
            out.push('\n');
        }
    }
    out
}

/// `sage szz`'s and `sage szz eval`'s JSON (`sage.szz/1`, `sage.szz-eval/1`, issue 30): the
/// values of SZZ that reach them (the variants' results, the agent's report, the oracle's
/// answers, the evaluation) derive no `Serialize`; only their records in sage-szz's
/// `schema.rs` say what is printed. The oracle's answers keep `Deserialize` (an LLM's reply),
/// and the CLI prints the published records, deriving no serde of its own.
#[test]
fn the_szz_formats_are_their_own_types() {
    let src = Path::new(ROOT).join("crates/sage-szz/src");
    let schema = schema_sources(&library_part(
        &std::fs::read_to_string(src.join("schema.rs")).unwrap(),
    ));
    let published = [
        "SzzResult",
        "Variant",
        "Candidate",
        "LineRef",
        "Chain",
        "AgentReport",
        "RootCause",
        "Evidence",
        "EvidenceSource",
        "Review",
        "HunkReport",
        "HunkIntent",
        "ChangeCategory",
        "Anchor",
        "AnchorTrace",
        "TraceStep",
        "EvalReport",
        "VariantScore",
        "CaseResult",
        "CaseStatus",
        "BenchRow",
    ];
    for name in published {
        assert!(
            schema
                .lines()
                .any(|l| l.contains(&format!(" {name} = ")) && l.contains(&format!("::{name} {{"))),
            "sage-szz's schema.rs converts from {name}"
        );
    }
    let sources: Vec<(String, String)> = rust_files(&src)
        .into_iter()
        .filter(|p| !p.ends_with("schema.rs"))
        .map(|p| {
            let text = library_part(&std::fs::read_to_string(&p).unwrap());
            (p.display().to_string(), text)
        })
        .collect();
    assert!(sources.len() > 10, "{}", sources.len());
    let bad = mirrored_types_with_serde(&schema, &sources);
    assert!(
        bad.is_empty(),
        "types that sage szz's JSON publishes through sage-szz's schema.rs derive Serialize of \
         their own: {bad:?}"
    );
    let cli =
        library_part(&std::fs::read_to_string(Path::new(ROOT).join("src/cli/szz.rs")).unwrap());
    // (a `json!` document would be a format of the CLI's own, as `szz bench`'s rows were)
    let cli_serde = |text: &str| {
        text.contains("Serialize") || text.contains("#[serde(") || text.contains("json!(")
    };
    assert!(
        !cli_serde(&cli),
        "src/cli/szz.rs serializes a type of its own: print sage_szz::schema's records"
    );
    // planted: a candidate and a case status that derive Serialize again are caught (the
    // status through its hand-written conversion), an oracle answer that only deserializes
    // and a type the schema does not convert from are not; the CLI's old wrapper is caught
    let schema = schema_sources(
        "mirror! {\n    pub struct Candidate = model::Candidate {\n        commit: String,\n    }\n}\nimpl From<eval::CaseStatus> for CaseStatus {\n}\nimpl From<Vec<u8>> for Bytes {\n}\nmirror! {\n    pub struct Anchor = oracle::Anchor {\n    }\n}\n",
    );
    let planted = vec![
        (
            "model.rs".to_string(),
            "/// One candidate.\n#[derive(Debug, Clone, PartialEq, Serialize)]\npub struct Candidate {\n    pub commit: String,\n}\n".to_string(),
        ),
        (
            "eval.rs".to_string(),
            "#[derive(Debug, Clone, PartialEq, Serialize)]\n#[serde(tag = \"status\")]\npub enum CaseStatus {\n    Ok,\n}\n".to_string(),
        ),
        (
            "oracle.rs".to_string(),
            "#[derive(Debug, Clone, PartialEq, Deserialize)]\npub struct Anchor {}\n".to_string(),
        ),
        (
            "bench.rs".to_string(),
            "#[derive(Debug, Clone, Serialize)]\npub struct BenchRow {}\n".to_string(),
        ),
    ];
    assert_eq!(
        mirrored_types_with_serde(&schema, &planted),
        vec![
            "model.rs: Candidate".to_string(),
            "eval.rs: CaseStatus".to_string()
        ]
    );
    assert!(cli_serde(
        "fn run_one() {\n    #[derive(serde::Serialize)]\n    struct Out<'a> {\n        results: &'a [SzzResult],\n    }\n}\n"
    ));
}

/// `sage case check`'s JSON (`sage.case-check/1`, issue 30): the check's values in
/// `authoring/check.rs` (the case's check, its problems, replay verdicts and file verdicts)
/// derive no serde at all; only their records in `authoring/check/schema.rs` say what is
/// printed, with a file's verdict and the counts as `sage.replay/1` publishes them. The CLI
/// prints the report's record and builds no JSON of the check by hand.
#[test]
fn the_case_check_format_is_its_own_types() {
    let src = Path::new(ROOT).join("crates/sage-pipeline/src/authoring");
    let read = |p: &Path| library_part(&std::fs::read_to_string(p).unwrap());
    let bad = serde_outside_schema(&read(&src.join("check.rs")));
    assert!(
        bad.is_empty(),
        "authoring/check.rs serializes outside authoring/check/schema.rs (add the field to its \
         published record there): {bad:?}"
    );
    let schema = schema_sources(&read(&src.join("check/schema.rs")));
    for name in ["CaseCheck", "Problem", "ReplayVerdicts", "FileVerdict"] {
        assert!(
            schema
                .lines()
                .any(|l| l.contains(&format!("pub struct {name} = check::{name} {{"))),
            "authoring/check/schema.rs converts from {name}"
        );
    }
    let sources: Vec<(String, String)> = rust_files(&src)
        .into_iter()
        .filter(|p| !p.ends_with("schema.rs"))
        .map(|p| (p.display().to_string(), read(&p)))
        .collect();
    let bad = mirrored_types_with_serde(&schema, &sources);
    assert!(
        bad.is_empty(),
        "types that sage case check's JSON publishes through authoring/check/schema.rs derive \
         serde of their own: {bad:?}"
    );
    // the check's JSON in the CLI is the report's record, not a map written there
    let cli = read(&Path::new(ROOT).join("src/cli/case.rs"));
    let by_hand = |text: &str| text.contains("\"with_problems\"") || text.contains("\"cases\":");
    assert!(
        !by_hand(&cli) && cli.contains("CaseCheckReport::new("),
        "src/cli/case.rs writes the check's JSON by hand: print check::schema::CaseCheckReport"
    );
    // planted: the file verdict deriving Serialize again, with a field attribute, is caught in
    // check.rs and by the mirror; the CLI's old map is caught
    let planted = "/// One file's verdict.\n#[derive(Debug, Clone, serde::Serialize)]\npub struct FileVerdict {\n    #[serde(skip_serializing_if = \"Option::is_none\")]\n    pub reason: Option<String>,\n}\n";
    assert_eq!(serde_outside_schema(planted).len(), 2);
    assert_eq!(
        mirrored_types_with_serde(&schema, &[("check.rs".to_string(), planted.to_string())]),
        vec!["check.rs: FileVerdict".to_string()]
    );
    assert!(by_hand(
        "let json = || {\n    serde_json::json!({\n        \"cases\": checks,\n        \"with_problems\": n_bad,\n    })\n};\n"
    ));
}

/// `sage.ledger/1` and `sage.batch/1` (issue 30): a ledger entry and a batch record serialize
/// only through `crates/sage-judge/src/llm/ledger/schema.rs`, and the values those records
/// mirror (the entry, the record, the call's key, and sage-llm's token counts) derive no serde
/// of their own, so neither a rename in the judge nor one in the transport can change the
/// files of a user's ledger or make them unreadable.
#[test]
fn the_ledger_formats_are_their_own_types() {
    let root = Path::new(ROOT);
    let read = |rel: &str| library_part(&std::fs::read_to_string(root.join(rel)).unwrap());
    let schema = read("crates/sage-judge/src/llm/ledger/schema.rs");
    let ledger = read("crates/sage-judge/src/llm/ledger.rs");
    let cost = read("crates/sage-llm/src/cost.rs");
    for name in ["LedgerKey", "Usage", "LedgerEntry", "BatchRecord"] {
        assert!(
            schema.contains(&format!("pub struct {name} = ")),
            "ledger/schema.rs mirrors {name}"
        );
    }
    let through = |text: &str, name: &str| {
        let lines: Vec<&str> = text.lines().collect();
        let Some(at) = lines
            .iter()
            .position(|l| l.starts_with(&format!("pub struct {name} {{")))
        else {
            return false;
        };
        lines[..at]
            .iter()
            .rev()
            .take_while(|l| l.starts_with("#[") || l.starts_with("///"))
            .any(|l| {
                l.contains(&format!("into = \"schema::{name}\""))
                    && l.contains(&format!("from = \"schema::{name}\""))
            })
    };
    for name in ["LedgerEntry", "BatchRecord"] {
        assert!(
            through(&ledger, name),
            "ledger.rs's {name} must serialize through ledger/schema.rs"
        );
    }
    let sources = vec![
        ("ledger.rs".to_string(), ledger),
        ("sage-llm cost.rs".to_string(), cost),
    ];
    let bad = mirrored_types_with_serde(&schema, &sources);
    assert!(
        bad.is_empty(),
        "types that sage.ledger/1 and sage.batch/1 publish through ledger/schema.rs derive \
         serde of their own: {bad:?}"
    );
    // planted: token counts that derive Serialize again are caught; a key that does too is
    // caught; an entry through the schema is not, one without it is
    let planted_cost = "/// Token counts.\n#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]\npub struct Usage {\n    pub input_tokens: u64,\n}\n";
    let planted_ledger = "#[derive(Debug, Clone, Hash, Serialize)]\npub struct LedgerKey {}\n#[derive(Serialize, Deserialize)]\n#[serde(into = \"schema::LedgerEntry\", from = \"schema::LedgerEntry\")]\npub struct LedgerEntry {}\n";
    assert_eq!(
        mirrored_types_with_serde(
            &schema,
            &[
                ("cost.rs".to_string(), planted_cost.to_string()),
                ("ledger.rs".to_string(), planted_ledger.to_string()),
            ]
        ),
        vec![
            "cost.rs: Usage".to_string(),
            "ledger.rs: LedgerKey".to_string()
        ]
    );
    assert!(through(planted_ledger, "LedgerEntry"));
    assert!(!through(
        "#[derive(Serialize, Deserialize)]\npub struct LedgerEntry {}\n",
        "LedgerEntry"
    ));
}
