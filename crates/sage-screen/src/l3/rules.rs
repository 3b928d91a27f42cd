//! The L3 rule table: the data (`rules/l3_rules.json`, overridable) compiled into rules.

use regex::Regex;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The built-in rule table.
pub const BUILTIN_RULES: &str = include_str!("../../rules/l3_rules.json");

/// A rule file that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{origin}: {msg}")]
pub struct RulesError {
    pub origin: String,
    pub msg: String,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct RawRules {
    #[serde(default)]
    pub(super) version: Option<String>,
    pub(super) score: ScoreParams,
    pub(super) sources: Vec<RawRule>,
    pub(super) sinks: Vec<RawRule>,
    pub(super) safeguards: Vec<RawRule>,
    pub(super) cwe_families: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    pub(super) check_words: Option<RawCheckWords>,
}

/// `check_words` as written in the rules file.
#[derive(Debug, Clone, Deserialize)]
pub(super) struct RawCheckWords {
    #[serde(default, rename = "_doc")]
    pub(super) _doc: Option<String>,
    pub(super) secret_name: String,
    pub(super) key_name: String,
    pub(super) allow_name: String,
    pub(super) parameterized_sql_callee: String,
    pub(super) sql_placeholder: String,
    pub(super) response_header_keys: Vec<String>,
    pub(super) route_decorators: Vec<String>,
}

/// The word lists and name patterns of the built-in checks (`check_words` in the rules).
#[derive(Debug, Clone)]
pub struct CheckWords {
    /// A variable or keyword naming a secret (`password`, `api_key`, ...).
    pub secret_name: Regex,
    /// A name ending in `key`.
    pub key_name: Regex,
    /// A name suggesting an allow-list.
    pub allow_name: Regex,
    /// Calls that take a parameterized SQL statement.
    pub parameterized_sql_callee: Regex,
    /// A placeholder in a SQL string.
    pub sql_placeholder: Regex,
    /// Response headers whose value must not come from the request.
    pub response_header_keys: Vec<String>,
    /// Decorator attributes that declare a web route.
    pub route_decorators: Vec<String>,
}

impl CheckWords {
    pub(super) fn compile(r: &RawCheckWords) -> Result<CheckWords, String> {
        let rx = |name: &str, p: &str| {
            Regex::new(p).map_err(|e| format!("check_words.{name}: bad regex {p:?}: {e}"))
        };
        Ok(CheckWords {
            secret_name: rx("secret_name", &r.secret_name)?,
            key_name: rx("key_name", &r.key_name)?,
            allow_name: rx("allow_name", &r.allow_name)?,
            parameterized_sql_callee: rx("parameterized_sql_callee", &r.parameterized_sql_callee)?,
            sql_placeholder: rx("sql_placeholder", &r.sql_placeholder)?,
            response_header_keys: r
                .response_header_keys
                .iter()
                .map(|k| k.to_lowercase())
                .collect(),
            route_decorators: r.route_decorators.clone(),
        })
    }

    /// The built-in table's lists.
    pub(super) fn builtin() -> CheckWords {
        let raw: RawRules = serde_json::from_str(BUILTIN_RULES).expect("built-in L3 rules parse");
        CheckWords::compile(
            &raw.check_words
                .expect("the built-in rules carry check_words"),
        )
        .expect("built-in check words compile")
    }
}

/// The score's constants.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ScoreParams {
    pub clip: [f64; 2],
    pub threshold: f64,
    pub source_cooccur_mult: f64,
    pub target_cwe_mult: f64,
    pub persist_bonus: f64,
    pub safeguard_penalty_per_category: f64,
    pub safeguard_penalty_cap: f64,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct RawRule {
    pub(super) id: String,
    #[serde(default)]
    pub(super) w: f64,
    #[serde(default)]
    pub(super) cwe: Option<u32>,
    #[serde(default)]
    pub(super) callee: Option<String>,
    #[serde(default)]
    pub(super) attr: Option<String>,
    #[serde(default)]
    pub(super) kw_eq: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    pub(super) kw_not_in: BTreeMap<String, Vec<serde_json::Value>>,
    #[serde(default)]
    pub(super) kw_positional: BTreeMap<String, usize>,
    #[serde(default)]
    pub(super) arg0: Option<String>,
    #[serde(default, rename = "argN")]
    pub(super) arg_n: Option<String>,
    #[serde(default, rename = "argAny")]
    pub(super) arg_any: Option<String>,
    #[serde(default)]
    pub(super) requires_import: Vec<String>,
    #[serde(default)]
    pub(super) kw_eq_any_call: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    pub(super) kw_present_any_call: Vec<String>,
    #[serde(default)]
    pub(super) call_check: Option<String>,
    #[serde(default)]
    pub(super) file_check: Vec<String>,
    #[serde(default)]
    pub(super) arg0_not_call_to: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum ArgPred {
    NonLiteral,
    Formatted,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum CallCheck {
    JwtNoVerify,
    KeySizeLt(i128),
    ModeWorldOrGroupWritable,
    MentionsFilename,
    StaticIv,
    StaticSalt,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum FileCheck {
    RouteParam,
    WeakHashNew,
    NosqlWhere,
    HardcodedSecret,
    BindAll,
    HeaderAssign,
    AllowMembership,
    ParamSql,
    PathResolveStartswith,
    JwtAlgorithms,
}

/// One compiled rule.
#[derive(Debug, Clone)]
pub struct Rule {
    pub id: String,
    pub w: f64,
    pub cwe: Option<u32>,
    pub(super) callee: Option<Regex>,
    pub(super) attr: Option<Regex>,
    pub(super) kw_eq: Vec<(String, serde_json::Value)>,
    pub(super) kw_not_in: Vec<(String, Vec<serde_json::Value>)>,
    pub(super) kw_positional: BTreeMap<String, usize>,
    pub(super) arg0: Option<ArgPred>,
    pub(super) arg_n: Option<ArgPred>,
    pub(super) arg_any: Option<ArgPred>,
    pub(super) requires_import: Vec<String>,
    pub(super) kw_eq_any_call: Vec<(String, serde_json::Value)>,
    pub(super) kw_present_any_call: Vec<String>,
    pub(super) call_check: Option<CallCheck>,
    pub(super) file_check: Vec<FileCheck>,
    pub(super) arg0_not_call_to: Vec<String>,
}

/// The whole rule table.
#[derive(Debug, Clone)]
pub struct Rules {
    pub version: String,
    /// Where the rules came from (`built-in` or a file path).
    pub origin: String,
    pub score: ScoreParams,
    pub sources: Vec<Rule>,
    pub sinks: Vec<Rule>,
    pub safeguards: Vec<Rule>,
    /// Family name → CWE ids.
    pub families: BTreeMap<String, BTreeSet<u32>>,
    /// Word lists of the built-in checks.
    pub words: CheckWords,
}

impl Rules {
    /// The built-in table.
    pub fn builtin() -> Rules {
        Rules::parse(
            BUILTIN_RULES,
            "built-in crates/sage-screen/rules/l3_rules.json",
        )
        .expect("built-in L3 rules are valid")
    }

    /// Parse a rule table (JSON) whose origin is named in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Rules, RulesError> {
        let err = |msg: String| RulesError {
            origin: origin.to_string(),
            msg,
        };
        let raw: RawRules = serde_json::from_str(text).map_err(|e| err(e.to_string()))?;
        let mut families = BTreeMap::new();
        for (name, v) in &raw.cwe_families {
            if name.starts_with('_') {
                continue;
            }
            let ids: Vec<u32> = serde_json::from_value(v.clone())
                .map_err(|e| err(format!("cwe_families.{name}: {e}")))?;
            families.insert(name.clone(), ids.into_iter().collect());
        }
        let compile = |rules: &[RawRule], section: &str| -> Result<Vec<Rule>, RulesError> {
            rules
                .iter()
                .map(|r| compile_rule(r).map_err(|m| err(format!("{section} {}: {m}", r.id))))
                .collect()
        };
        Ok(Rules {
            version: raw.version.clone().unwrap_or_else(|| "unversioned".into()),
            origin: origin.to_string(),
            score: raw.score.clone(),
            sources: compile(&raw.sources, "source")?,
            sinks: compile(&raw.sinks, "sink")?,
            safeguards: compile(&raw.safeguards, "safeguard")?,
            families,
            words: match &raw.check_words {
                Some(w) => CheckWords::compile(w).map_err(err)?,
                None => CheckWords::builtin(),
            },
        })
    }

    /// The families a CWE id belongs to.
    pub(crate) fn families_of(&self, cwe: u32) -> BTreeSet<&str> {
        self.families
            .iter()
            .filter(|(_, ids)| ids.contains(&cwe))
            .map(|(f, _)| f.as_str())
            .collect()
    }

    /// Whether two CWE ids share a family.
    pub(crate) fn same_family(&self, a: u32, b: u32) -> bool {
        self.families
            .values()
            .any(|ids| ids.contains(&a) && ids.contains(&b))
    }
}

pub(super) fn full_regex(p: &str) -> Result<Regex, String> {
    Regex::new(&format!("^(?:{p})$")).map_err(|e| format!("bad regex {p:?}: {e}"))
}

pub(super) fn arg_pred(s: &Option<String>) -> Result<Option<ArgPred>, String> {
    match s.as_deref() {
        None => Ok(None),
        Some("nonliteral") => Ok(Some(ArgPred::NonLiteral)),
        Some("formatted") => Ok(Some(ArgPred::Formatted)),
        Some(o) => Err(format!(
            "unknown argument predicate {o:?} (known: nonliteral, formatted)"
        )),
    }
}

pub(super) fn compile_rule(r: &RawRule) -> Result<Rule, String> {
    let call_check = match r.call_check.as_deref() {
        None => None,
        Some("jwt_noverify") => Some(CallCheck::JwtNoVerify),
        Some("mode_world_or_group_writable") => Some(CallCheck::ModeWorldOrGroupWritable),
        Some("mentions_filename") => Some(CallCheck::MentionsFilename),
        Some("static_iv") => Some(CallCheck::StaticIv),
        Some("static_salt") => Some(CallCheck::StaticSalt),
        Some(s) if s.starts_with("key_size_lt:") => Some(CallCheck::KeySizeLt(
            s["key_size_lt:".len()..]
                .parse()
                .map_err(|_| format!("bad call_check {s:?}"))?,
        )),
        Some(s) => return Err(format!("unknown call_check {s:?}")),
    };
    let file_check = r
        .file_check
        .iter()
        .map(|s| {
            Ok(match s.as_str() {
                "route_param" => FileCheck::RouteParam,
                "weak_hash_new" => FileCheck::WeakHashNew,
                "nosql_where" => FileCheck::NosqlWhere,
                "hardcoded_secret" => FileCheck::HardcodedSecret,
                "bind_all" => FileCheck::BindAll,
                "header_assign" => FileCheck::HeaderAssign,
                "allow_membership" => FileCheck::AllowMembership,
                "param_sql" => FileCheck::ParamSql,
                "path_resolve_startswith" => FileCheck::PathResolveStartswith,
                "jwt_algorithms" => FileCheck::JwtAlgorithms,
                o => return Err(format!("unknown file_check {o:?}")),
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(Rule {
        id: r.id.clone(),
        w: r.w,
        cwe: r.cwe,
        callee: r.callee.as_deref().map(full_regex).transpose()?,
        attr: r.attr.as_deref().map(full_regex).transpose()?,
        kw_eq: r.kw_eq.clone().into_iter().collect(),
        kw_not_in: r.kw_not_in.clone().into_iter().collect(),
        kw_positional: r.kw_positional.clone(),
        arg0: arg_pred(&r.arg0)?,
        arg_n: arg_pred(&r.arg_n)?,
        arg_any: arg_pred(&r.arg_any)?,
        requires_import: r.requires_import.clone(),
        kw_eq_any_call: r.kw_eq_any_call.clone().into_iter().collect(),
        kw_present_any_call: r.kw_present_any_call.clone(),
        call_check,
        file_check,
        arg0_not_call_to: r.arg0_not_call_to.clone(),
    })
}
