//! `sage.toml`: named judges and the price table (see `docs/judges.md`).
//!
//! ```toml
//! [judges.gpt]                 # --judge gpt
//! backend = "openai"           # openai | anthropic | lexicon
//! model = "gpt-4.1-mini"
//! base_url = "https://openrouter.ai/api/v1"   # default: $OPENAI_BASE_URL or the official URL
//! api_key_env = "OPENROUTER_API_KEY"          # default: OPENAI_API_KEY / ANTHROPIC_API_KEY
//!
//! [prices."gpt-4.1-mini"]      # USD per million tokens
//! input = 0.40
//! cached_input = 0.10
//! output = 1.60
//! ```
//!
//! Keys never go in this file: a judge names the variable that holds its key. Sections this
//! module does not know are kept for other stages.

use sage_llm::cost::Price;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The config file's default name, looked up in the working directory.
pub const CONFIG_FILE: &str = "sage.toml";

/// The parsed `sage.toml`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Config {
    #[serde(default)]
    pub judges: BTreeMap<String, NamedJudge>,
    /// Model-name prefix → price; overrides the built-in table.
    #[serde(default)]
    pub prices: BTreeMap<String, Price>,
    /// Other sections, for other stages.
    #[serde(flatten)]
    pub other: BTreeMap<String, toml::Value>,
    /// Where the config was read from (`None`: defaults).
    #[serde(skip)]
    pub path: Option<PathBuf>,
}

/// A judge defined in `sage.toml`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NamedJudge {
    /// `openai`, `anthropic` or `lexicon`.
    pub backend: String,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub base_url: Option<String>,
    /// The environment variable holding the key.
    #[serde(default)]
    pub api_key_env: Option<String>,
    #[serde(default)]
    pub temperature: Option<f64>,
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// OpenAI-compatible only: request `response_format: json_schema` (default true).
    #[serde(default)]
    pub json_schema: Option<bool>,
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    #[serde(default)]
    pub max_retries: Option<u32>,
}

/// A config file that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {msg}")]
pub struct ConfigError {
    pub path: String,
    pub msg: String,
}

impl Config {
    pub fn parse(text: &str, path: &str) -> Result<Config, ConfigError> {
        let err = |msg: String| ConfigError {
            path: path.to_string(),
            msg,
        };
        let raw: toml::Value = toml::from_str(text).map_err(|e| err(e.to_string()))?;
        if let Some(judges) = raw.get("judges").and_then(toml::Value::as_table) {
            for (name, j) in judges {
                if j.get("api_key").is_some() {
                    return Err(err(format!(
                        "judges.{name}: api_key is not allowed here (keys never go in files); \
                         set the key in an environment variable and name it with api_key_env"
                    )));
                }
            }
        }
        let mut c: Config = raw.try_into().map_err(|e| err(e.to_string()))?;
        for (name, j) in &c.judges {
            if !matches!(j.backend.as_str(), "openai" | "anthropic" | "lexicon") {
                return Err(err(format!(
                    "judges.{name}: backend {:?} is not one of openai, anthropic, lexicon",
                    j.backend
                )));
            }
            if j.backend != "lexicon" && j.model.as_deref().is_none_or(str::is_empty) {
                return Err(err(format!("judges.{name}: model is missing")));
            }
        }
        c.path = Some(PathBuf::from(path));
        Ok(c)
    }

    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            path: path.display().to_string(),
            msg: format!("cannot read: {e}"),
        })?;
        Config::parse(&text, &path.display().to_string())
    }

    /// `explicit` if given (it must exist), else `./sage.toml` if present, else defaults.
    pub fn discover(explicit: Option<&Path>) -> Result<Config, ConfigError> {
        match explicit {
            Some(p) => Config::load(p),
            None if Path::new(CONFIG_FILE).is_file() => Config::load(Path::new(CONFIG_FILE)),
            None => Ok(Config::default()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_judges_prices_and_keeps_other_sections() {
        let c = Config::parse(
            r#"
[judges.gpt]
backend = "openai"
model = "gpt-4.1-mini"
api_key_env = "OPENROUTER_API_KEY"

[prices."gpt-4.1-mini"]
input = 0.4
output = 1.6

[screen]
level = 2
"#,
            "sage.toml",
        )
        .unwrap();
        assert_eq!(c.judges["gpt"].model.as_deref(), Some("gpt-4.1-mini"));
        assert_eq!(c.prices["gpt-4.1-mini"].output, 1.6);
        assert!(c.other.contains_key("screen"));
    }

    #[test]
    fn a_key_in_the_file_is_refused() {
        let e = Config::parse(
            "[judges.x]\nbackend = \"openai\"\nmodel = \"m\"\napi_key = \"sk-1\"\n",
            "sage.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("api_key_env") && !e.contains("sk-1"), "{e}");
        let e = Config::parse("[judges.x]\nbackend = \"gemini\"\n", "s.toml").unwrap_err();
        assert!(e.to_string().contains("gemini"));
    }
}
