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
    /// Model-name prefix → context budget in tokens; overrides
    /// `rubrics/context-windows.toml`.
    #[serde(default)]
    pub context_windows: BTreeMap<String, u64>,
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
    /// Tokens one request may fill, prompt and output (default: the model's entry in
    /// `rubrics/context-windows.toml`). Longer prefixes are digested (docs/judges.md).
    #[serde(default)]
    pub context_tokens: Option<u64>,
    /// The environment variable holding the base URL. When named, it must be set: a judge
    /// meant for a local server never falls back to a remote default.
    #[serde(default)]
    pub base_url_env: Option<String>,
    /// The environment variable that, when set, names the model instead of `model`.
    #[serde(default)]
    pub model_env: Option<String>,
    /// The server needs no key (a local server): none is sent when the variable is unset.
    #[serde(default)]
    pub api_key_optional: bool,
    /// OpenAI-compatible only: ask the server to keep the prompt in its KV cache
    /// (llama-server `cache_prompt`), so the next turn's request reuses the shared prefix.
    #[serde(default)]
    pub cache_prompt: Option<bool>,
    /// Requests in flight when `--concurrency` is not given (a one-slot local server: 1).
    #[serde(default)]
    pub concurrency: Option<usize>,
    /// How to bring the judge up, shown when its `base_url_env` is unset.
    #[serde(default)]
    pub setup: Option<String>,
    /// For a server that enforces the schema with a grammar: each quote must be one of at
    /// most this many of the scored turn's own sentences (or null), so a small model cannot
    /// paraphrase. Quotes are still verified.
    #[serde(default)]
    pub quote_choices: Option<usize>,
    /// Cap each rationale at this many characters in the schema (a small model otherwise
    /// repeats itself until the token limit cuts the answer off).
    #[serde(default)]
    pub rationale_max_chars: Option<u32>,
}

/// The built-in named judges (`rubrics/judges.toml`), found when `sage.toml` defines no judge
/// of that name.
pub const EMBEDDED_JUDGES: &str = include_str!("../rubrics/judges.toml");

/// The built-in judges and their prices, parsed once.
pub fn builtin() -> &'static Config {
    static C: std::sync::OnceLock<Config> = std::sync::OnceLock::new();
    C.get_or_init(|| {
        let mut c = Config::parse(EMBEDDED_JUDGES, "embedded judges.toml")
            .expect("the embedded judges parse");
        c.path = None;
        c
    })
}

/// The embedded context budgets of known models (`rubrics/context-windows.toml`).
pub const EMBEDDED_CONTEXT_WINDOWS: &str = include_str!("../rubrics/context-windows.toml");

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ContextWindowsFile {
    default: u64,
    models: BTreeMap<String, u64>,
}

fn embedded_windows() -> &'static ContextWindowsFile {
    static W: std::sync::OnceLock<ContextWindowsFile> = std::sync::OnceLock::new();
    W.get_or_init(|| {
        toml::from_str(EMBEDDED_CONTEXT_WINDOWS).expect("the embedded context windows parse")
    })
}

/// The context budget of `model`: `overrides` (`[context_windows]` in sage.toml) first, then
/// the embedded table, longest model-name prefix wins; the table's `default` otherwise.
pub(crate) fn default_context_tokens(model: &str, overrides: &BTreeMap<String, u64>) -> u64 {
    let bare = model.rsplit('/').next().unwrap_or(model); // openrouter-style `vendor/model`
    let best = |table: &BTreeMap<String, u64>| {
        table
            .iter()
            .filter(|(p, _)| model.starts_with(p.as_str()) || bare.starts_with(p.as_str()))
            .max_by_key(|(p, _)| p.len())
            .map(|(_, v)| *v)
    };
    let w = embedded_windows();
    best(overrides)
        .or_else(|| best(&w.models))
        .unwrap_or(w.default)
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
            if j.concurrency == Some(0) {
                return Err(err(format!(
                    "judges.{name}: concurrency must be at least 1"
                )));
            }
            if j.context_tokens.is_some_and(|t| t < 1024) {
                return Err(err(format!(
                    "judges.{name}: context_tokens must be at least 1024"
                )));
            }
        }
        c.path = Some(PathBuf::from(path));
        Ok(c)
    }

    /// The judge named `name`: this file's, else the built-in one.
    pub fn judge(&self, name: &str) -> Option<&NamedJudge> {
        self.judges.get(name).or_else(|| builtin().judges.get(name))
    }

    /// Every judge name `--judge` accepts from this file and the built-ins, sorted.
    pub fn judge_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .judges
            .keys()
            .chain(builtin().judges.keys())
            .cloned()
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// The price table: this file's `[prices]` over the built-in judges' prices.
    pub fn price_table(&self) -> BTreeMap<String, Price> {
        let mut t = builtin().prices.clone();
        t.extend(self.prices.iter().map(|(k, v)| (k.clone(), *v)));
        t
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
    fn context_budgets_come_from_the_judge_the_table_or_the_default() {
        let c = Config::parse(
            "[judges.g]\nbackend = \"openai\"\nmodel = \"gpt-4o\"\ncontext_tokens = 50000\n\
             [context_windows]\n\"my-local\" = 8192\n",
            "sage.toml",
        )
        .unwrap();
        assert_eq!(c.judges["g"].context_tokens, Some(50000));
        let none = BTreeMap::new();
        assert_eq!(default_context_tokens("gpt-4o-2024-08-06", &none), 100000);
        assert_eq!(default_context_tokens("openai/gpt-4.1-mini", &none), 830000);
        assert_eq!(default_context_tokens("claude-sonnet-4-5", &none), 160000);
        assert_eq!(
            default_context_tokens("my-local-7b", &c.context_windows),
            8192
        );
        assert_eq!(default_context_tokens("something-else", &none), 32000);
        assert!(Config::parse(
            "[judges.g]\nbackend = \"openai\"\nmodel = \"m\"\ncontext_tokens = 10\n",
            "s.toml"
        )
        .is_err());
    }

    #[test]
    fn the_local_judge_is_built_in_and_a_file_replaces_it() {
        let none = Config::default();
        let local = none.judge("local").expect("built-in local judge");
        assert_eq!(local.backend, "openai");
        assert_eq!(local.base_url_env.as_deref(), Some("SAGE_LOCAL_JUDGE_URL"));
        assert!(local.api_key_optional && local.cache_prompt == Some(true));
        assert_eq!(local.concurrency, Some(1));
        assert!(none.judge_names().contains(&"local".to_string()));
        let price = none.price_table()["qwen2.5-coder-0.5b-instruct-q4_k_m"];
        assert_eq!((price.input, price.output), (0.0, 0.0));
        let c = Config::parse(
            "[judges.local]\nbackend = \"openai\"\nmodel = \"mine\"\n",
            "sage.toml",
        )
        .unwrap();
        assert_eq!(c.judge("local").unwrap().model.as_deref(), Some("mine"));
        assert!(c.judge("local").unwrap().base_url_env.is_none());
        assert!(Config::parse(
            "[judges.x]\nbackend = \"openai\"\nmodel = \"m\"\nconcurrency = 0\n",
            "s.toml"
        )
        .is_err());
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
