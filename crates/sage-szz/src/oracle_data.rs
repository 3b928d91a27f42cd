//! The oracle's words and prompts as data (`data/oracle.toml`, embedded; `--oracle-data FILE`
//! replaces it).

use serde::Deserialize;
use std::sync::{Arc, LazyLock};

/// The embedded oracle data.
pub const EMBEDDED_ORACLE_DATA: &str = include_str!("../data/oracle.toml");

/// The oracle's words and the LLM oracle's prompt templates.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OracleData {
    pub version: String,
    /// Never keywords.
    pub stop_words: Vec<String>,
    /// Substrings of tokens that mark a guard or check.
    pub guard_hints: Vec<String>,
    pub prompts: Prompts,
}

/// Prompt templates: `{{name}}` is filled in, single braces are literal.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prompts {
    pub system: String,
    pub root_cause: String,
    pub hunk_intent: String,
    pub anchors: String,
    pub present: String,
}

/// Why an oracle data file cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("oracle data {source_name}: {msg}")]
pub struct OracleDataError {
    pub source_name: String,
    pub msg: String,
}

static EMBEDDED: LazyLock<Arc<OracleData>> = LazyLock::new(|| {
    Arc::new(
        OracleData::parse(EMBEDDED_ORACLE_DATA, "embedded data/oracle.toml")
            .expect("the embedded oracle data is valid (checked by a unit test)"),
    )
});

/// The placeholders each template must use, so a replacement file cannot silently drop one.
const PLACEHOLDERS: &[(&str, &[&str])] = &[
    ("root_cause", &["cve", "message", "hunks", "feedback"]),
    ("hunk_intent", &["root_cause", "path", "hunk"]),
    ("anchors", &["root_cause", "statements", "max"]),
    (
        "present",
        &[
            "root_cause",
            "anchor",
            "commit",
            "subject",
            "path",
            "line",
            "deleted",
            "added",
        ],
    ),
];

impl OracleData {
    /// The embedded data (parsed once).
    pub fn embedded() -> Arc<OracleData> {
        EMBEDDED.clone()
    }

    pub fn parse(text: &str, source_name: &str) -> Result<OracleData, OracleDataError> {
        let err = |msg: String| OracleDataError {
            source_name: source_name.to_string(),
            msg,
        };
        let d: OracleData = toml::from_str(text).map_err(|e| err(e.to_string()))?;
        for (name, needed) in PLACEHOLDERS {
            let t = d.prompts.template(name);
            for p in *needed {
                if !t.contains(&format!("{{{{{p}}}}}")) {
                    return Err(err(format!("prompts.{name} does not use {{{{{p}}}}}")));
                }
            }
        }
        Ok(d)
    }

    pub fn load(path: &std::path::Path) -> Result<OracleData, OracleDataError> {
        let text = std::fs::read_to_string(path).map_err(|e| OracleDataError {
            source_name: path.display().to_string(),
            msg: e.to_string(),
        })?;
        OracleData::parse(&text, &path.display().to_string())
    }

    pub fn is_stop_word(&self, t: &str) -> bool {
        self.stop_words.iter().any(|s| s == t)
    }

    pub fn is_guard(&self, token: &str) -> bool {
        self.guard_hints.iter().any(|g| token.contains(g.as_str()))
    }
}

impl Prompts {
    fn template(&self, name: &str) -> &str {
        match name {
            "root_cause" => &self.root_cause,
            "hunk_intent" => &self.hunk_intent,
            "anchors" => &self.anchors,
            "present" => &self.present,
            _ => &self.system,
        }
    }
}

/// Fill `{{name}}` placeholders of `template` in one pass (a value is never re-scanned, so
/// text from a commit cannot inject a placeholder).
pub fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len() + 256);
    let mut rest = template;
    while let Some(i) = rest.find("{{") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        match after.find("}}") {
            Some(j) => {
                let name = &after[..j];
                match values.iter().find(|(k, _)| *k == name) {
                    Some((_, v)) => out.push_str(v),
                    None => out.push_str(&rest[i..i + 2 + j + 2]),
                }
                rest = &after[j + 2..];
            }
            None => {
                out.push_str(&rest[i..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_data_parses_and_fills() {
        let d = OracleData::embedded();
        assert!(d.is_stop_word("the") && !d.is_stop_word("memcpy"));
        assert!(d.is_guard("bounds_check"));
        let p = fill(
            &d.prompts.anchors,
            &[("root_cause", "rc"), ("statements", "0: x"), ("max", "3")],
        );
        assert!(p.starts_with("Root cause: rc\nPre-fix statements:\n0: x\nPick up to 3"));
        assert!(p.contains("{\"picks\": [index, ...]}"), "{p}");
    }

    #[test]
    fn a_value_is_not_rescanned_and_a_missing_placeholder_is_refused() {
        assert_eq!(fill("a {{x}} b", &[("x", "{{x}}")]), "a {{x}} b");
        let bad = EMBEDDED_ORACLE_DATA.replace("{{max}}", "five");
        let e = OracleData::parse(&bad, "t").unwrap_err().to_string();
        assert!(e.contains("prompts.anchors does not use {{max}}"), "{e}");
    }
}
