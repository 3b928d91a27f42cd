//! Redacted traces: placeholders that publishers write in place of personal data
//! (`/home/USER/`), and the comparison of a replay with a result up to them. The rules are
//! data (`data/redactions.toml`, embedded, versioned, overridable).

use regex::Regex;

/// The embedded rules.
pub const EMBEDDED: &str = include_str!("../data/redactions.toml");

/// One placeholder and the personal text it stands for.
#[derive(Debug, Clone)]
struct Redaction {
    name: String,
    placeholder: String,
    stands_for: Regex,
}

/// The redaction rules of a replay.
#[derive(Debug, Clone)]
pub struct Redactions {
    rules: Vec<Redaction>,
}

impl Default for Redactions {
    fn default() -> Self {
        Redactions::embedded()
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    version: u32,
    #[serde(default)]
    redaction: Vec<Entry>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    placeholder: String,
    stands_for: String,
}

/// A redactions file that cannot be used: what is wrong, naming the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RedactionsError(String);

impl Redactions {
    /// The embedded rules (`data/redactions.toml`).
    pub fn embedded() -> Redactions {
        Redactions::parse(EMBEDDED).expect("the embedded redactions.toml is valid")
    }

    /// Rules from a file of the schema of `data/redactions.toml`; the error names the rule.
    pub fn parse(text: &str) -> Result<Redactions, RedactionsError> {
        let bad = RedactionsError;
        let f: File = toml::from_str(text).map_err(|e| bad(e.to_string()))?;
        if f.version != 1 {
            return Err(bad(format!(
                "version {} is not a redactions version this sage reads (1)",
                f.version
            )));
        }
        let mut rules = Vec::new();
        for e in f.redaction {
            if e.placeholder.is_empty() {
                return Err(bad(format!("redaction {:?}: empty placeholder", e.name)));
            }
            let stands_for = Regex::new(&e.stands_for)
                .map_err(|x| bad(format!("redaction {:?}: stands_for: {x}", e.name)))?;
            rules.push(Redaction {
                name: e.name,
                placeholder: e.placeholder,
                stands_for,
            });
        }
        Ok(Redactions { rules })
    }

    /// When `got` (the replay) and `want` (a result) differ only where `got` holds a
    /// placeholder and `want` the personal text it stands for: the names of the redactions
    /// that make them equal. `None` when they are not equal up to the redactions (or no
    /// placeholder is involved).
    pub fn equal_up_to(&self, got: &str, want: &str) -> Option<Vec<String>> {
        let mut w = want.to_string();
        let mut used = Vec::new();
        for r in &self.rules {
            if !got.contains(&r.placeholder) {
                continue;
            }
            let next = r
                .stands_for
                .replace_all(&w, regex::NoExpand(&r.placeholder));
            if next != w {
                used.push(r.name.clone());
                w = next.into_owned();
            }
        }
        (!used.is_empty() && w == got).then_some(used)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redacted_home_folder_equals_the_real_one_and_nothing_else_does() {
        let r = Redactions::embedded();
        let got = "cwd: \"/home/USER/project\"\n";
        assert_eq!(
            r.equal_up_to(got, "cwd: \"/home/alice/project\"\n"),
            Some(vec!["home folder".to_string()])
        );
        // Another difference beside the redaction: not equal.
        assert_eq!(r.equal_up_to(got, "cwd: \"/home/alice/projects\"\n"), None);
        // No placeholder in the replay: the comparison is left as it was.
        assert_eq!(r.equal_up_to("/home/bob/x\n", "/home/alice/x\n"), None);
    }

    #[test]
    fn rules_are_versioned_and_checked() {
        assert!(Redactions::parse("version = 2\n")
            .unwrap_err()
            .to_string()
            .contains("version 2"));
        let bad =
            "version = 1\n[[redaction]]\nname = \"x\"\nplaceholder = \"P\"\nstands_for = \"(\"\n";
        assert!(Redactions::parse(bad)
            .unwrap_err()
            .to_string()
            .contains("redaction \"x\""));
        assert!(Redactions::parse("version = 1\n").is_ok());
    }
}
