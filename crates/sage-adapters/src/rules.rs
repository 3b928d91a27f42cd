//! Detection rules as data: what a rule says of a file's [`Shape`], and the rules of the
//! adapters that are code (`mappings/detect.toml`, replaceable with `SAGE_DETECT_RULES`).

use crate::shape::Shape;
use crate::AdapterError;

/// The embedded detection rules of the adapters that are code (mapping-backed adapters keep
/// theirs in their mapping file, in the same form).
pub const DEFAULT_DETECT_RULES: &str = include_str!("../mappings/detect.toml");

/// [`DEFAULT_DETECT_RULES`] as JSON (converted by `build.rs`), read at start-up without the
/// TOML parser.
const DEFAULT_DETECT_RULES_JSON: &str = include_str!(concat!(env!("OUT_DIR"), "/detect.json"));

/// One detection rule: when every condition holds, the file scores `score` for the adapter.
///
/// Structural conditions (`has`, `has_any`, `lacks`) name key paths of the parsed JSON
/// (`/a/*/b`, `*` any one segment, `**` any number) optionally with a test on the string value
/// there (`PATH = V`, `PATH ^= PREFIX`, `PATH *= PART`), or keys that must be on one object
/// (`/**/{name,role,content}`: some object at a path matching `/**` has all three; keys
/// spread over different objects or records do not count); `lines` are regular expressions each
/// of which some line of the sampled text must match; `all` / `any` / `none` are plain
/// substrings of the sampled text, the form older mapping files use.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DetectRule {
    /// The adapter the rule is for (in `mappings/detect.toml`; a mapping's own rules omit it).
    #[serde(default)]
    pub adapter: Option<String>,
    /// The file forms the rule applies to (`document`, `lines`, `zip`, `text`); any if empty.
    #[serde(default)]
    pub form: Vec<String>,
    /// Conditions that must all hold.
    #[serde(default)]
    pub has: Vec<String>,
    /// Conditions of which one must hold (if any are given).
    #[serde(default)]
    pub has_any: Vec<String>,
    /// Conditions none of which may hold.
    #[serde(default)]
    pub lacks: Vec<String>,
    /// Regular expressions each matched by some sampled line.
    #[serde(default)]
    pub lines: Vec<LineRegex>,
    /// Substrings that must all be in the sampled text.
    #[serde(default)]
    pub all: Vec<String>,
    /// Substrings one of which must be in the sampled text (if any are given).
    #[serde(default)]
    pub any: Vec<String>,
    /// Substrings none of which may be in the sampled text.
    #[serde(default)]
    pub none: Vec<String>,
    /// The score (0-100) the rule gives.
    pub score: u8,
    /// What the rule recognises, in a few words (shown as evidence).
    #[serde(default)]
    pub why: Option<String>,
}

/// A line pattern of a rule, compiled the first time a rule asks it (only rules whose
/// structural conditions hold do); a user's rules file compiles, and so checks, every
/// pattern when it is read ([`DetectRules::parse`], `Mapping::parse`).
#[derive(Clone)]
pub struct LineRegex {
    pattern: String,
    compiled: std::sync::Arc<std::sync::OnceLock<Result<regex::Regex, String>>>,
}

impl LineRegex {
    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.pattern
    }

    fn compiled(&self) -> &Result<regex::Regex, String> {
        self.compiled.get_or_init(|| {
            regex::RegexBuilder::new(&self.pattern)
                .multi_line(true)
                .build()
                .map_err(|e| e.to_string())
        })
    }

    /// Why the pattern does not compile, if it does not.
    pub fn problem(&self) -> Option<String> {
        self.compiled()
            .as_ref()
            .err()
            .map(|e| format!("lines {:?}: {e}", self.pattern))
    }

    /// Whether some line of `text` matches (a pattern that does not compile matches nothing;
    /// a rules file read by a user is refused before).
    pub fn is_match(&self, text: &str) -> bool {
        self.compiled().as_ref().is_ok_and(|r| r.is_match(text))
    }
}

impl std::fmt::Debug for LineRegex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("LineRegex").field(&self.pattern).finish()
    }
}

impl<'de> serde::Deserialize<'de> for LineRegex {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(LineRegex {
            pattern: String::deserialize(d)?,
            compiled: Default::default(),
        })
    }
}

/// A condition of a rule, parsed.
enum Cond<'a> {
    Path(&'a str),
    Eq(&'a str, &'a str),
    Prefix(&'a str, &'a str),
    Contains(&'a str, &'a str),
}

fn cond(c: &str) -> Cond<'_> {
    if let Some((p, v)) = c.split_once(" ^= ") {
        Cond::Prefix(p.trim(), v)
    } else if let Some((p, v)) = c.split_once(" *= ") {
        Cond::Contains(p.trim(), v)
    } else if let Some((p, v)) = c.split_once(" = ") {
        Cond::Eq(p.trim(), v)
    } else {
        Cond::Path(c.trim())
    }
}

/// `PARENT/{k1,k2,...}`: the parent pattern and the keys that must be on one object there.
fn keys_together(p: &str) -> Option<(&str, Vec<&str>)> {
    let (parent, group) = p.rsplit_once('/')?;
    let inner = group.strip_prefix('{')?.strip_suffix('}')?;
    Some((parent, inner.split(',').map(str::trim).collect()))
}

/// Why condition `c` is malformed, if it is.
fn cond_problem(c: &str) -> Option<String> {
    let braces = |p: &str| p.contains('{') || p.contains('}');
    match cond(c) {
        Cond::Path(p) if braces(p) => match keys_together(p) {
            Some((parent, keys))
                if !braces(parent) && keys.iter().all(|k| !k.is_empty() && !braces(k)) =>
            {
                None
            }
            _ => Some(format!(
                "condition {c:?}: keys that must be on one object are written as the last \
                 segment, PATH/{{key1,key2,...}}"
            )),
        },
        Cond::Eq(p, _) | Cond::Prefix(p, _) | Cond::Contains(p, _) if braces(p) => Some(format!(
            "condition {c:?}: a value test takes a key path, not a {{key,...}} group"
        )),
        _ => None,
    }
}

fn holds(shape: &Shape, c: &str) -> bool {
    match cond(c) {
        Cond::Path(p) => match keys_together(p) {
            Some((parent, keys)) => shape.has_keys_together(parent, &keys),
            None => shape.count(p) > 0,
        },
        Cond::Eq(p, v) => shape.has_value(p, |x| x == v),
        Cond::Prefix(p, v) => shape.has_value(p, |x| x.starts_with(v)),
        Cond::Contains(p, v) => shape.has_value(p, |x| x.contains(v)),
    }
}

impl DetectRule {
    /// Why the rule is malformed, if it is (a `{key,...}` group out of place).
    pub fn problem(&self) -> Option<String> {
        self.has
            .iter()
            .chain(&self.has_any)
            .chain(&self.lacks)
            .find_map(|c| cond_problem(c))
    }

    /// Why one of the rule's line patterns does not compile, if one does not (compiling them
    /// all: for a user's file, read once).
    pub fn lines_problem(&self) -> Option<String> {
        self.lines.iter().find_map(LineRegex::problem)
    }

    /// Whether the rule holds for `shape`.
    pub fn matches(&self, shape: &Shape) -> bool {
        (self.form.is_empty() || self.form.iter().any(|f| f == shape.form.name()))
            && self.has.iter().all(|c| holds(shape, c))
            && (self.has_any.is_empty() || self.has_any.iter().any(|c| holds(shape, c)))
            && !self.lacks.iter().any(|c| holds(shape, c))
            && self.lines.iter().all(|r| r.is_match(&shape.text))
            && self.all.iter().all(|n| shape.text.contains(n.as_str()))
            && (self.any.is_empty() || self.any.iter().any(|n| shape.text.contains(n.as_str())))
            && !self.none.iter().any(|n| shape.text.contains(n.as_str()))
    }

    /// The rule as evidence: what it recognises and the conditions that held.
    pub fn evidence(&self, shape: &Shape) -> String {
        let mut parts = Vec::new();
        if !self.form.is_empty() {
            parts.push(format!("form {}", shape.form.name()));
        }
        if !self.has.is_empty() {
            parts.push(format!("has {}", self.has.join(", ")));
        }
        let any: Vec<&str> = self
            .has_any
            .iter()
            .filter(|c| holds(shape, c))
            .map(String::as_str)
            .collect();
        if !any.is_empty() {
            parts.push(format!("has {}", any.join(", ")));
        }
        if !self.lacks.is_empty() {
            parts.push(format!("lacks {}", self.lacks.join(", ")));
        }
        if !self.lines.is_empty() {
            let l: Vec<&str> = self.lines.iter().map(LineRegex::as_str).collect();
            parts.push(format!("lines {}", l.join(", ")));
        }
        if !self.all.is_empty() {
            parts.push(format!("text holds {:?}", self.all));
        }
        let why = self.why.as_deref().unwrap_or("rule");
        format!("{why}: {}", parts.join("; "))
    }
}

/// The best rule of `rules` for `shape`: its score and evidence.
pub fn best_rule<'a>(
    rules: impl IntoIterator<Item = &'a DetectRule>,
    shape: &Shape,
) -> Option<(u8, String)> {
    rules
        .into_iter()
        .filter(|r| r.score > 0 && r.matches(shape))
        .max_by_key(|r| r.score)
        .map(|r| (r.score, r.evidence(shape)))
}

/// The rules file of the code adapters.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DetectRules {
    /// The rules' version (`detect-N`), reported by `sage adapters`.
    pub version: String,
    /// Every rule, each naming its adapter.
    pub rule: Vec<DetectRule>,
}

/// The embedded rules, parsed once (a cache of embedded data, not configuration: a user's
/// `SAGE_DETECT_RULES` file is a value the caller passes, in [`Rules::detect`]).
static EMBEDDED: std::sync::OnceLock<std::sync::Arc<DetectRules>> = std::sync::OnceLock::new();

impl DetectRules {
    /// Parse a rules file; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<DetectRules, AdapterError> {
        let r: DetectRules = toml::from_str(text).map_err(|e| {
            AdapterError::new(origin, None, format!("invalid detection rules: {e}"))
        })?;
        if let Some((rule, why)) = r
            .rule
            .iter()
            .find_map(|x| x.lines_problem().map(|p| (x, p)))
        {
            return Err(AdapterError::new(
                origin,
                None,
                format!(
                    "invalid detection rule of {}: {why}",
                    rule.adapter.as_deref().unwrap_or("?")
                ),
            ));
        }
        DetectRules::checked(r, origin)
    }

    /// `r` if every rule names its adapter and no condition is malformed.
    fn checked(r: DetectRules, origin: &str) -> Result<DetectRules, AdapterError> {
        if let Some(bad) = r.rule.iter().find(|x| x.adapter.is_none()) {
            return Err(AdapterError::new(
                origin,
                None,
                format!("a rule names no adapter (score {})", bad.score),
            ));
        }
        if let Some((rule, why)) = r.rule.iter().find_map(|x| x.problem().map(|p| (x, p))) {
            return Err(AdapterError::new(
                origin,
                None,
                format!(
                    "invalid detection rule of {}: {why}",
                    rule.adapter.as_deref().unwrap_or("?")
                ),
            ));
        }
        Ok(r)
    }

    /// The adapters the rules name that are not in `known` (a misspelt name would leave its
    /// rules silently unused).
    pub fn unknown_adapters<'a>(&'a self, known: &[&str]) -> Vec<&'a str> {
        let mut out: Vec<&str> = self
            .rule
            .iter()
            .filter_map(|r| r.adapter.as_deref())
            .filter(|a| !known.contains(a))
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The embedded rules (`mappings/detect.toml`).
    pub fn embedded() -> &'static DetectRules {
        Self::embedded_arc()
    }

    /// The embedded rules as a run's configuration holds them: shared, not copied.
    pub fn embedded_arc() -> &'static std::sync::Arc<DetectRules> {
        EMBEDDED.get_or_init(|| {
            let origin = "mappings/detect.toml (embedded)";
            serde_json::from_str(DEFAULT_DETECT_RULES_JSON)
                .map_err(|e| AdapterError::new(origin, None, e.to_string()))
                .and_then(|r| DetectRules::checked(r, origin))
                .map(std::sync::Arc::new)
                .unwrap_or_else(|e| panic!("embedded detection rules are invalid: {e}"))
        })
    }

    /// The best rule for `adapter` on `shape`.
    pub fn best(&self, adapter: &str, shape: &Shape) -> Option<(u8, String)> {
        best_rule(
            self.rule
                .iter()
                .filter(|r| r.adapter.as_deref() == Some(adapter)),
            shape,
        )
    }
}

impl Default for DetectRules {
    /// The embedded rules.
    fn default() -> Self {
        DetectRules::embedded().clone()
    }
}

/// How a run reads traces, as the user set it: the turn classifier (`SAGE_TURN_KINDS`), the
/// detection rules of the code adapters (`SAGE_DETECT_RULES`) and the input limits
/// (`SAGE_MAX_INPUT_MB`, `SAGE_CASE_ROOTS`). Built once by the CLI and passed down by
/// reference (in [`crate::NormalizeOptions::rules`] and the pipeline's options); the default
/// is the embedded data and the default limits. Cloning is cheap.
#[derive(Debug, Clone)]
pub struct Rules {
    /// The turn classifier.
    pub kinds: std::sync::Arc<crate::kinds::Classifier>,
    /// The detection rules of the adapters that are code.
    pub detect: std::sync::Arc<DetectRules>,
    /// The size limit of an input file and the folders a case may point into.
    pub limits: sage_trace::safe::Limits,
}

impl Default for Rules {
    /// The embedded classifier and rules, shared with every other default (not copied).
    fn default() -> Self {
        Rules {
            kinds: crate::kinds::Classifier::embedded_arc().clone(),
            detect: DetectRules::embedded_arc().clone(),
            limits: Default::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The JSON copy read at start-up is the TOML file, value for value.
    #[test]
    fn the_embedded_json_is_the_toml_file() {
        let from_toml = DetectRules::parse(DEFAULT_DETECT_RULES, "detect.toml").unwrap();
        assert_eq!(
            format!("{:?}", DetectRules::embedded()),
            format!("{from_toml:?}")
        );
    }

    #[test]
    fn a_key_group_must_be_the_last_segment_and_take_no_value() {
        let rules = |has: &str| {
            format!("version = \"t\"\n[[rule]]\nadapter = \"ag2\"\nhas = [{has:?}]\nscore = 30\n")
        };
        assert!(DetectRules::parse(&rules("/**/{name,role}"), "t").is_ok());
        let bad_line = "version = \"t\"\n[[rule]]\nadapter = \"ag2\"\nlines = ['(']\nscore = 30\n";
        let e = DetectRules::parse(bad_line, "t").unwrap_err().to_string();
        assert!(
            e.contains("lines \"(\"") && e.contains("unclosed group"),
            "{e}"
        );
        for bad in ["/{a,b}/c", "/**/{a,}", "/x/{a,b} = v", "/x/{a"] {
            let e = DetectRules::parse(&rules(bad), "t")
                .unwrap_err()
                .to_string();
            assert!(e.contains(bad), "{bad}: {e}");
        }
    }
}
