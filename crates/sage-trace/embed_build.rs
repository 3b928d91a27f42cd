//! What the build scripts of `sage-adapters` and `sage-judge` share (each includes this file
//! with `#[path]`, next to `src/required.rs`): their embedded data files as JSON in `OUT_DIR`,
//! since the TOML files stay the versioned source (and a user's override is TOML, parsed and
//! checked at run time) while reading the embedded copy with serde_json costs a tenth of
//! parsing the TOML; and the literals each pattern needs (`sage_trace::required`), a table the
//! crates' pattern lists are built with, so a tiny input need not parse or compile a pattern
//! its text cannot match.

use crate::required;

/// Write each of `files` (TOML, relative to the crate) as JSON into `OUT_DIR`, and
/// `OUT_DIR/needs.rs`: the literals every string of theirs needs.
pub fn embed(files: &[&str]) {
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo:rerun-if-changed=../sage-trace/src/required.rs");
    let mut strings = std::collections::BTreeSet::new();
    for path in files {
        println!("cargo:rerun-if-changed={path}");
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        // (`preserve_order`: tables keep their order, as the TOML parser hands them over)
        let value: toml::Value = toml::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
        let json = serde_json::to_string(&value).expect("a TOML value is JSON");
        let name = std::path::Path::new(path).with_extension("json");
        let name = name.file_name().expect("a file name");
        std::fs::write(out.join(name), json).unwrap_or_else(|e| panic!("{path}: {e}"));
        collect_strings(&value, &mut strings);
    }
    std::fs::write(out.join("needs.rs"), needs_table(&strings)).expect("write needs.rs");
}

/// Every string of a file: which fields are patterns is the crate's business, and a table
/// keyed by the text is right for whichever strings are looked up.
fn collect_strings(v: &toml::Value, into: &mut std::collections::BTreeSet<String>) {
    match v {
        toml::Value::String(s) => {
            into.insert(s.clone());
        }
        toml::Value::Array(a) => a.iter().for_each(|v| collect_strings(v, into)),
        toml::Value::Table(t) => t.values().for_each(|v| collect_strings(v, into)),
        _ => {}
    }
}

/// `sage_trace::pattern::Needs` of the strings that need a literal, sorted by text.
fn needs_table(strings: &std::collections::BTreeSet<String>) -> String {
    let mut out = String::from("sage_trace::pattern::Needs(&[\n");
    for s in strings {
        let clauses = required::required(s);
        if clauses.is_empty() {
            continue;
        }
        let clauses: Vec<String> = clauses.iter().map(|c| format!("&{c:?}")).collect();
        let exact = match required::exact(s) {
            (_, true) => "Yes",
            (true, false) => "IfCaseInsensitive",
            _ => "No",
        };
        out.push_str(&format!(
            "    ({s:?}, &[{}], sage_trace::pattern::Exact::{exact}),\n",
            clauses.join(", ")
        ));
    }
    out.push_str("])\n");
    out
}
