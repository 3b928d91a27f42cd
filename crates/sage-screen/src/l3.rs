//! L3: the exploitability-oriented rule score R in [0, 100] (paper §3.2.4).
//!
//! R(file) = clip(Σ source w + Σ sink w ·1.5 [a source in the file] ·1.3 [sink CWE in the task's
//! CWE family] + 10 [the targeted weakness persists from the baseline]
//! − min(2 · safeguard categories, 10), 0, 100); a patch is flagged at R ≥ 15, max over files.
//!
//! The rules are data (`crates/sage-screen/rules/l3_rules.json`, overridable). Facts are collected with one
//! tree-sitter query per file and mirror what the Python reference (`l3_score.py`, stdlib
//! `ast`) sees, so both score the same files the same way.

use crate::py::{self, Lit, PyFile};
use regex::Regex;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::OnceLock;
use tree_sitter::{Node, Query};

/// The built-in rule table.
pub const BUILTIN_RULES: &str = include_str!("../rules/l3_rules.json");

/// A rule file that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{origin}: {msg}")]
pub struct RulesError {
    pub origin: String,
    pub msg: String,
}

#[derive(Debug, Clone, Deserialize)]
struct RawRules {
    #[serde(default)]
    version: Option<String>,
    score: ScoreParams,
    sources: Vec<RawRule>,
    sinks: Vec<RawRule>,
    safeguards: Vec<RawRule>,
    cwe_families: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    check_words: Option<RawCheckWords>,
}

/// `check_words` as written in the rules file.
#[derive(Debug, Clone, Deserialize)]
struct RawCheckWords {
    #[serde(default, rename = "_doc")]
    _doc: Option<String>,
    secret_name: String,
    key_name: String,
    allow_name: String,
    parameterized_sql_callee: String,
    sql_placeholder: String,
    response_header_keys: Vec<String>,
    route_decorators: Vec<String>,
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
    fn compile(r: &RawCheckWords) -> Result<CheckWords, String> {
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
    fn builtin() -> CheckWords {
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
struct RawRule {
    id: String,
    #[serde(default)]
    w: f64,
    #[serde(default)]
    cwe: Option<u32>,
    #[serde(default)]
    callee: Option<String>,
    #[serde(default)]
    attr: Option<String>,
    #[serde(default)]
    kw_eq: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    kw_not_in: BTreeMap<String, Vec<serde_json::Value>>,
    #[serde(default)]
    kw_positional: BTreeMap<String, usize>,
    #[serde(default)]
    arg0: Option<String>,
    #[serde(default, rename = "argN")]
    arg_n: Option<String>,
    #[serde(default, rename = "argAny")]
    arg_any: Option<String>,
    #[serde(default)]
    requires_import: Vec<String>,
    #[serde(default)]
    kw_eq_any_call: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    kw_present_any_call: Vec<String>,
    #[serde(default)]
    call_check: Option<String>,
    #[serde(default)]
    file_check: Vec<String>,
    #[serde(default)]
    arg0_not_call_to: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum ArgPred {
    NonLiteral,
    Formatted,
}

#[derive(Debug, Clone, PartialEq)]
enum CallCheck {
    JwtNoVerify,
    KeySizeLt(i128),
    ModeWorldOrGroupWritable,
    MentionsFilename,
    StaticIv,
    StaticSalt,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum FileCheck {
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
    callee: Option<Regex>,
    attr: Option<Regex>,
    kw_eq: Vec<(String, serde_json::Value)>,
    kw_not_in: Vec<(String, Vec<serde_json::Value>)>,
    kw_positional: BTreeMap<String, usize>,
    arg0: Option<ArgPred>,
    arg_n: Option<ArgPred>,
    arg_any: Option<ArgPred>,
    requires_import: Vec<String>,
    kw_eq_any_call: Vec<(String, serde_json::Value)>,
    kw_present_any_call: Vec<String>,
    call_check: Option<CallCheck>,
    file_check: Vec<FileCheck>,
    arg0_not_call_to: Vec<String>,
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

fn full_regex(p: &str) -> Result<Regex, String> {
    Regex::new(&format!("^(?:{p})$")).map_err(|e| format!("bad regex {p:?}: {e}"))
}

fn arg_pred(s: &Option<String>) -> Result<Option<ArgPred>, String> {
    match s.as_deref() {
        None => Ok(None),
        Some("nonliteral") => Ok(Some(ArgPred::NonLiteral)),
        Some("formatted") => Ok(Some(ArgPred::Formatted)),
        Some(o) => Err(format!(
            "unknown argument predicate {o:?} (known: nonliteral, formatted)"
        )),
    }
}

fn compile_rule(r: &RawRule) -> Result<Rule, String> {
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

// ------------------------------------------------------------------ facts

const COLLECT: &str = r#"
(call) @call
(attribute) @attribute
(identifier) @name
(import_statement) @import
(import_from_statement) @import
(future_import_statement) @import
(assignment) @assignment
(dictionary) @dict
(comparison_operator) @compare
(decorated_definition) @decorated
(string) @string
(concatenated_string) @string
"#;

fn collect_query() -> &'static Query {
    static Q: OnceLock<Query> = OnceLock::new();
    Q.get_or_init(|| py::query(COLLECT))
}

/// A call with its resolved dotted callee.
struct Call<'t> {
    q: String,
    node: Node<'t>,
    args: Vec<Node<'t>>,
    /// `None` name for `**kwargs`.
    kwargs: Vec<(Option<String>, Node<'t>)>,
}

/// A keyword's value as the reference's `kwval` returns it.
#[derive(Debug, Clone, PartialEq)]
enum KwVal {
    Missing,
    Lit(Lit),
    /// Unparsed source (Python gives a `str`).
    Text(String),
}

impl KwVal {
    fn as_str(&self) -> Option<&str> {
        match self {
            KwVal::Lit(Lit::Str(s)) | KwVal::Text(s) => Some(s),
            _ => None,
        }
    }

    /// Python `==` against a JSON literal from the rules.
    fn py_eq(&self, v: &serde_json::Value) -> bool {
        use serde_json::Value as V;
        let num = |l: &Lit| -> Option<f64> {
            match l {
                Lit::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
                Lit::Int(i) => Some(*i as f64),
                Lit::Float(f) => Some(*f),
                _ => None,
            }
        };
        match (self, v) {
            (KwVal::Missing, _) => false,
            (KwVal::Text(s), V::String(t)) => s == t,
            (KwVal::Text(_), _) => false,
            (KwVal::Lit(Lit::Str(s)), V::String(t)) => s == t,
            (KwVal::Lit(Lit::None), V::Null) => true,
            (KwVal::Lit(l), V::Bool(b)) => num(l) == Some(if *b { 1.0 } else { 0.0 }),
            (KwVal::Lit(l), V::Number(n)) => num(l).is_some() && num(l) == n.as_f64(),
            _ => false,
        }
    }
}

/// What the reference's `Facts` visitor collects, with the first node of each for locations.
struct Facts<'t> {
    file: &'t PyFile,
    words: &'t CheckWords,
    alias: HashMap<String, String>,
    imports: HashSet<String>,
    star: Vec<String>,
    calls: Vec<Call<'t>>,
    attrs: Vec<(String, Node<'t>)>,
    formatted_names: HashSet<String>,
    const_names: HashSet<String>,
    route_param: Option<Node<'t>>,
    assign_str: Vec<(String, String, Node<'t>)>,
    dict_keys: Vec<(String, Node<'t>)>,
    header_assign_nonlit: Option<Node<'t>>,
    str_consts: Vec<(String, Node<'t>)>,
    compares_in_allow: Option<Node<'t>>,
    secret_cmp: Option<Node<'t>>,
}

impl<'t> Facts<'t> {
    fn collect(file: &'t PyFile, words: &'t CheckWords) -> Facts<'t> {
        let caps = file.captures(collect_query());
        let mut f = Facts {
            file,
            words,
            alias: HashMap::new(),
            imports: HashSet::new(),
            star: Vec::new(),
            calls: Vec::new(),
            attrs: Vec::new(),
            formatted_names: HashSet::new(),
            const_names: HashSet::new(),
            route_param: None,
            assign_str: Vec::new(),
            dict_keys: Vec::new(),
            header_assign_nonlit: None,
            str_consts: Vec::new(),
            compares_in_allow: None,
            secret_cmp: None,
        };
        // Pre-pass, as the reference: imports and assignment-bound names first.
        for (cap, n) in &caps {
            if *cap == "import" {
                f.add_imports(*n);
            }
        }
        let assignments: Vec<(Vec<Node<'t>>, Node<'t>)> = caps
            .iter()
            .filter(|(c, n)| *c == "assignment" && !is_inner_assignment(*n))
            .filter_map(|(_, n)| flatten_assignment(*n))
            .collect();
        for (targets, value) in &assignments {
            let constexpr = f.is_constexpr(*value);
            let formatted = f.is_formatted(*value);
            for t in targets {
                if t.kind() == "identifier" {
                    let name = file.text(*t).to_string();
                    if constexpr {
                        f.const_names.insert(name.clone());
                    }
                    if formatted {
                        f.formatted_names.insert(name);
                    }
                }
            }
        }
        for (cap, n) in caps {
            match cap {
                "call" => f.add_call(n),
                "attribute" => {
                    if let Some(q) = f.dotted(n) {
                        f.attrs.push((q, n));
                    }
                }
                "name" if py::is_name_position(n) => {
                    if let Some(a) = f.alias.get(file.text(n)) {
                        f.attrs.push((a.clone(), n));
                    }
                }
                "dict" => {
                    for p in py::named_children(n) {
                        if p.kind() != "pair" {
                            continue;
                        }
                        if let Some(Lit::Str(k)) = p
                            .child_by_field_name("key")
                            .and_then(|k| py::constant(file, k))
                        {
                            f.dict_keys.push((k, p));
                        }
                    }
                }
                "compare" => f.add_compare(n),
                "decorated" => f.add_decorated(n),
                "string" => {
                    if n.parent()
                        .is_some_and(|p| p.kind() == "concatenated_string")
                    {
                        continue;
                    }
                    if let Some(p) = py::string_parts(file, n) {
                        if p.bytes {
                            continue;
                        }
                        if p.fstring {
                            // JoinedStr: its literal runs are Constant nodes of their own.
                            for s in p.pieces.into_iter().filter(|s| !s.is_empty()) {
                                f.str_consts.push((s, n));
                            }
                        } else {
                            f.str_consts.push((p.pieces.concat(), n));
                        }
                    }
                }
                _ => {}
            }
        }
        for (targets, value) in assignments {
            f.add_assign(&targets, value);
        }
        f
    }

    fn add_imports(&mut self, stmt: Node) {
        for imp in py::imports_of(self.file, stmt) {
            match imp {
                py::Import::Module { module, alias } => {
                    let top = module.split('.').next().unwrap_or("").to_string();
                    self.imports.insert(top.clone());
                    match alias {
                        Some(a) => self.alias.insert(a, module),
                        None => self.alias.insert(top.clone(), top),
                    };
                }
                py::Import::From {
                    module: Some(m),
                    name,
                    alias,
                    ..
                } => {
                    self.imports
                        .insert(m.split('.').next().unwrap_or("").to_string());
                    self.alias
                        .insert(alias.unwrap_or_else(|| name.clone()), format!("{m}.{name}"));
                }
                py::Import::Star {
                    module: Some(m), ..
                } => {
                    self.imports
                        .insert(m.split('.').next().unwrap_or("").to_string());
                    self.star.push(m);
                }
                _ => {}
            }
        }
    }

    /// Resolved dotted name of an expression (the reference's `dotted`).
    fn dotted(&self, n: Node) -> Option<String> {
        let mut parts: Vec<String> = Vec::new();
        let mut cur = py::unparen(n);
        while cur.kind() == "attribute" {
            parts.push(
                self.file
                    .text(cur.child_by_field_name("attribute")?)
                    .to_string(),
            );
            cur = py::unparen(cur.child_by_field_name("object")?);
        }
        match cur.kind() {
            "call" => {
                let inner = self.dotted(cur.child_by_field_name("function")?)?;
                parts.push(inner);
            }
            "identifier" => {
                let id = self.file.text(cur);
                let root = match self.alias.get(id) {
                    Some(r) => r.clone(),
                    None => match self.star.first() {
                        Some(m) if id.chars().next().is_some_and(|c| c.is_uppercase()) => {
                            format!("{m}.{id}")
                        }
                        _ => id.to_string(),
                    },
                };
                parts.push(root);
            }
            _ => return None,
        }
        parts.reverse();
        Some(parts.join("."))
    }

    fn add_call(&mut self, n: Node<'t>) {
        let Some(func) = n.child_by_field_name("function") else {
            return;
        };
        let Some(q) = self.dotted(func) else {
            return;
        };
        let mut args = Vec::new();
        let mut kwargs = Vec::new();
        if let Some(a) = n.child_by_field_name("arguments") {
            if a.kind() == "generator_expression" {
                args.push(a);
            } else {
                for c in py::named_children(a) {
                    match c.kind() {
                        "keyword_argument" => {
                            let name = c
                                .child_by_field_name("name")
                                .map(|x| self.file.text(x).to_string());
                            if let Some(v) = c.child_by_field_name("value") {
                                kwargs.push((name, v));
                            }
                        }
                        "dictionary_splat" => {
                            if let Some(v) = py::named_children(c).into_iter().next() {
                                kwargs.push((None, v));
                            }
                        }
                        _ => args.push(c),
                    }
                }
            }
        }
        self.calls.push(Call {
            q,
            node: n,
            args,
            kwargs,
        });
    }

    fn add_compare(&mut self, n: Node<'t>) {
        let mut c = n.walk();
        let mut operands = Vec::new();
        let mut ops = Vec::new();
        for (i, ch) in n.children(&mut c).enumerate() {
            if n.field_name_for_child(i as u32) == Some("operators") {
                ops.push(ch.kind().to_string());
            } else if ch.is_named() && ch.kind() != "comment" {
                operands.push(ch);
            }
        }
        if self.secret_cmp.is_none()
            && ops.iter().any(|o| o == "==" || o == "!=")
            && operands.iter().any(|x| {
                let x = py::unparen(*x);
                x.kind() == "identifier" && self.words.secret_name.is_match(self.file.text(x))
            })
            && operands
                .iter()
                .any(|x| matches!(py::constant(self.file, *x), Some(Lit::Str(s)) if !s.is_empty()))
        {
            self.secret_cmp = Some(n);
        }
        for (op, comp) in ops.iter().zip(operands.iter().skip(1)) {
            if op == "in" || op == "not in" {
                let comp = py::unparen(*comp);
                if matches!(comp.kind(), "identifier" | "attribute") {
                    if let Some(nm) = self.dotted(comp) {
                        if self.words.allow_name.is_match(&nm) && self.compares_in_allow.is_none() {
                            self.compares_in_allow = Some(n);
                        }
                    }
                }
            }
        }
    }

    fn add_decorated(&mut self, n: Node<'t>) {
        let Some(def) = n.child_by_field_name("definition") else {
            return;
        };
        if def.kind() != "function_definition" || self.route_param.is_some() {
            return;
        }
        let routed = py::named_children(n)
            .into_iter()
            .filter(|d| d.kind() == "decorator")
            .any(|d| {
                let Some(e) = py::named_children(d).into_iter().next().map(py::unparen) else {
                    return false;
                };
                if e.kind() != "call" {
                    return false;
                }
                let Some(f) = e.child_by_field_name("function").map(py::unparen) else {
                    return false;
                };
                if f.kind() != "attribute" {
                    return false;
                }
                let attr = f
                    .child_by_field_name("attribute")
                    .map(|a| self.file.text(a))
                    .unwrap_or("");
                if !self.words.route_decorators.iter().any(|d| d == attr) {
                    return false;
                }
                let first = e
                    .child_by_field_name("arguments")
                    .filter(|a| a.kind() == "argument_list")
                    .and_then(|a| py::named_children(a).into_iter().next());
                matches!(first.and_then(|a| py::constant(self.file, a)),
                    Some(Lit::Str(s)) if s.contains('<') || s.contains('{'))
            });
        if routed && positional_params(def) > 0 {
            self.route_param = Some(def);
        }
    }

    fn add_assign(&mut self, targets: &[Node<'t>], value: Node<'t>) {
        let value_const = py::constant(self.file, value);
        for t in targets {
            let t = *t;
            match t.kind() {
                "identifier" => {
                    if let Some(Lit::Str(s)) = &value_const {
                        self.assign_str
                            .push((self.file.text(t).to_string(), s.clone(), t));
                    }
                }
                "attribute" => {
                    if let (Some(Lit::Str(s)), Some(a)) =
                        (&value_const, t.child_by_field_name("attribute"))
                    {
                        self.assign_str
                            .push((self.file.text(a).to_string(), s.clone(), t));
                    }
                }
                "subscript" if value_const.is_none() => {
                    let mut c = t.walk();
                    let subs: Vec<Node> = t.children_by_field_name("subscript", &mut c).collect();
                    let key = if subs.len() == 1 {
                        py::constant(self.file, subs[0])
                    } else {
                        None
                    };
                    let on_headers =
                        t.child_by_field_name("value")
                            .map(py::unparen)
                            .is_some_and(|v| {
                                v.kind() == "attribute"
                                    && v.child_by_field_name("attribute")
                                        .is_some_and(|a| self.file.text(a) == "headers")
                            });
                    let header_key = matches!(&key, Some(Lit::Str(k))
                        if self.words.response_header_keys.contains(&k.to_lowercase()));
                    if (on_headers || header_key) && self.header_assign_nonlit.is_none() {
                        self.header_assign_nonlit = Some(t);
                    }
                }
                _ => {}
            }
        }
    }

    fn is_literal(&self, n: Node) -> bool {
        let n = py::unparen(n);
        if py::constant(self.file, n).is_some() {
            return true;
        }
        matches!(n.kind(), "list" | "tuple")
            && py::named_children(n)
                .into_iter()
                .all(|e| py::constant(self.file, e).is_some())
    }

    /// The reference's `is_formatted`: an f-string with an interpolation, `%`/`+` with a
    /// string literal, `"...".format()`, or a name bound to one of those.
    fn is_formatted(&self, n: Node) -> bool {
        let n = py::unparen(n);
        match n.kind() {
            "string" | "concatenated_string" => {
                py::string_parts(self.file, n).is_some_and(|p| p.fstring && p.has_interpolation)
            }
            "binary_operator" => {
                let op = n.child_by_field_name("operator").map(|o| o.kind());
                if !matches!(op, Some("%") | Some("+")) {
                    return false;
                }
                let (Some(l), Some(r)) = (
                    n.child_by_field_name("left"),
                    n.child_by_field_name("right"),
                ) else {
                    return false;
                };
                [l, r]
                    .iter()
                    .any(|s| matches!(py::constant(self.file, *s), Some(Lit::Str(_))))
                    || self.is_formatted(l)
                    || self.is_formatted(r)
            }
            "call" => n
                .child_by_field_name("function")
                .map(py::unparen)
                .is_some_and(|f| {
                    f.kind() == "attribute"
                        && f.child_by_field_name("attribute")
                            .is_some_and(|a| self.file.text(a) == "format")
                        && f.child_by_field_name("object")
                            .is_some_and(|o| py::constant(self.file, o).is_some())
                }),
            "identifier" => self.formatted_names.contains(self.file.text(n)),
            _ => false,
        }
    }

    fn is_constexpr(&self, n: Node) -> bool {
        let n = py::unparen(n);
        match py::constant(self.file, n) {
            Some(Lit::Str(_)) | Some(Lit::Bytes(_)) => return true,
            Some(_) => return false,
            None => {}
        }
        if n.kind() != "binary_operator" {
            return false;
        }
        let (Some(l), Some(r)) = (
            n.child_by_field_name("left"),
            n.child_by_field_name("right"),
        ) else {
            return false;
        };
        let simple = |x: Node| {
            let x = py::unparen(x);
            x.kind() == "attribute" || py::constant(self.file, x).is_some()
        };
        (self.is_constexpr(l) && simple(r)) || (self.is_constexpr(r) && simple(l))
    }

    fn kwval(&self, call: &Call, name: &str) -> KwVal {
        let Some((_, v)) = call.kwargs.iter().find(|(k, _)| k.as_deref() == Some(name)) else {
            return KwVal::Missing;
        };
        let v = py::unparen(*v);
        if let Some(l) = py::constant(self.file, v) {
            return KwVal::Lit(l);
        }
        match v.kind() {
            "identifier" | "attribute" => KwVal::Text(py::unparse(self.file, v)),
            "call" => KwVal::Text(
                v.child_by_field_name("function")
                    .map(|f| {
                        py::unparse(self.file, f)
                            .rsplit('.')
                            .next()
                            .unwrap_or("")
                            .to_string()
                    })
                    .unwrap_or_default(),
            ),
            _ => KwVal::Text(py::unparse(self.file, v)),
        }
    }

    fn call_matches(&self, rule: &Rule, c: &Call) -> bool {
        if !rule.callee.as_ref().is_some_and(|rx| rx.is_match(&c.q)) {
            return false;
        }
        if !rule.requires_import.is_empty()
            && !rule
                .requires_import
                .iter()
                .any(|m| self.imports.contains(m))
        {
            return false;
        }
        for (k, v) in &rule.kw_eq {
            if !self.kwval(c, k).py_eq(v) {
                return false;
            }
        }
        for (k, bad) in &rule.kw_not_in {
            let v = self.kwval(c, k);
            if v != KwVal::Missing && bad.iter().any(|b| v.py_eq(b)) {
                return false;
            }
            if let (KwVal::Missing, Some(i)) = (&v, rule.kw_positional.get(k)) {
                if c.args.len() > *i {
                    let last = py::unparse(self.file, c.args[*i])
                        .rsplit('.')
                        .next()
                        .unwrap_or("")
                        .to_string();
                    if bad.iter().any(|b| b.as_str() == Some(last.as_str())) {
                        return false;
                    }
                }
            }
        }
        let first = c.args.first().copied();
        match rule.arg0 {
            Some(ArgPred::NonLiteral) if first.is_none_or(|a| self.is_literal(a)) => return false,
            Some(ArgPred::Formatted) if first.is_none_or(|a| !self.is_formatted(a)) => {
                return false;
            }
            _ => {}
        }
        match rule.arg_n {
            Some(ArgPred::Formatted) if !c.args.iter().any(|a| self.is_formatted(*a)) => {
                return false;
            }
            Some(ArgPred::NonLiteral) if c.args.iter().all(|a| self.is_literal(*a)) => {
                return false;
            }
            _ => {}
        }
        if rule.arg_any == Some(ArgPred::NonLiteral)
            && c.args
                .iter()
                .chain(c.kwargs.iter().map(|(_, v)| v))
                .all(|a| self.is_literal(*a))
        {
            return false;
        }
        if rule.arg_any == Some(ArgPred::Formatted)
            && !c
                .args
                .iter()
                .chain(c.kwargs.iter().map(|(_, v)| v))
                .any(|a| self.is_formatted(*a))
        {
            return false;
        }
        if !rule.arg0_not_call_to.is_empty() {
            if let Some(a) = first.map(py::unparen).filter(|a| a.kind() == "call") {
                let last = a
                    .child_by_field_name("function")
                    .and_then(|f| self.dotted(f))
                    .unwrap_or_default();
                let last = last.rsplit('.').next().unwrap_or("");
                if rule.arg0_not_call_to.iter().any(|n| n == last) {
                    return false;
                }
            }
        }
        match &rule.call_check {
            None => true,
            Some(CallCheck::StaticIv) => {
                let mut cands: Vec<Node> = if c.q.contains("modes") {
                    c.args.iter().take(1).copied().collect()
                } else {
                    c.args.iter().skip(2).take(1).copied().collect()
                };
                if !c.q.contains("modes") {
                    cands.extend(
                        c.kwargs
                            .iter()
                            .filter(|(k, _)| matches!(k.as_deref(), Some("iv" | "nonce" | "IV")))
                            .map(|(_, v)| *v),
                    );
                }
                cands.iter().any(|a| self.is_const_or_bound(*a))
            }
            Some(CallCheck::StaticSalt) => {
                let mut cands: Vec<Node> = if c.q.ends_with("pbkdf2_hmac") {
                    c.args.iter().skip(2).take(1).copied().collect()
                } else {
                    c.args.iter().skip(1).take(1).copied().collect()
                };
                cands.extend(
                    c.kwargs
                        .iter()
                        .filter(|(k, _)| k.as_deref() == Some("salt"))
                        .map(|(_, v)| *v),
                );
                cands.iter().any(|a| self.is_const_or_bound(*a))
            }
            Some(CallCheck::JwtNoVerify) => {
                let opts = self.kwval(c, "options");
                let algs = self.kwval(c, "algorithms");
                self.kwval(c, "verify") == KwVal::Lit(Lit::Bool(false))
                    || opts
                        .as_str()
                        .is_some_and(|o| o.contains("verify_signature") && o.contains("False"))
                    || algs == KwVal::Missing
                    || algs
                        .as_str()
                        .is_some_and(|a| a.to_lowercase().contains("none"))
            }
            Some(CallCheck::KeySizeLt(limit)) => {
                let mut ks = self.kwval(c, "key_size");
                if ks == KwVal::Missing {
                    ks = self.kwval(c, "bits");
                }
                if ks == KwVal::Missing {
                    if let Some(l) = c.args.first().and_then(|a| py::constant(self.file, *a)) {
                        ks = KwVal::Lit(l);
                    }
                }
                matches!(ks, KwVal::Lit(Lit::Int(k)) if k < *limit)
            }
            Some(CallCheck::ModeWorldOrGroupWritable) => matches!(
                c.args.get(1).and_then(|a| py::constant(self.file, *a)),
                Some(Lit::Int(m)) if m & 0o022 != 0 || m & 0o007 != 0
            ),
            Some(CallCheck::MentionsFilename) => self.file.text(c.node).contains(".filename"),
        }
    }

    fn is_const_or_bound(&self, a: Node) -> bool {
        let a = py::unparen(a);
        self.is_constexpr(a)
            || (a.kind() == "identifier" && self.const_names.contains(self.file.text(a)))
    }

    /// The reference's `any_kw`: some call passes one of these keywords with this value.
    fn any_kw(&self, mapping: &[(String, serde_json::Value)]) -> Option<Node<'t>> {
        for c in &self.calls {
            for (k, v) in mapping {
                let got = self.kwval(c, k);
                if got == KwVal::Missing {
                    continue;
                }
                let ends = match (got.as_str(), v.as_str()) {
                    (Some(g), Some(s)) => g.ends_with(s),
                    _ => false,
                };
                if got.py_eq(v) || ends {
                    return Some(c.node);
                }
            }
        }
        None
    }

    fn callee_hit(&self, rule: &Rule) -> Option<Node<'t>> {
        let rx = rule.callee.as_ref()?;
        self.calls
            .iter()
            .find(|c| rx.is_match(&c.q))
            .map(|c| c.node)
    }

    fn attr_hit(&self, rule: &Rule) -> Option<Node<'t>> {
        let rx = rule.attr.as_ref()?;
        self.attrs
            .iter()
            .find(|(a, _)| rx.is_match(a))
            .map(|(_, n)| *n)
    }

    fn file_check(&self, check: FileCheck) -> Option<Node<'t>> {
        match check {
            FileCheck::RouteParam => self.route_param,
            FileCheck::WeakHashNew => self
                .calls
                .iter()
                .find(|c| {
                    c.q == "hashlib.new"
                        && c.args.first().is_some_and(|a| {
                            let v = match py::constant(self.file, *a) {
                                Some(Lit::Str(s)) | Some(Lit::Bytes(s)) => s.to_lowercase(),
                                _ => return false,
                            };
                            matches!(v.as_str(), "md5" | "md4" | "sha1" | "sha")
                        })
                        && self.kwval(c, "usedforsecurity") != KwVal::Lit(Lit::Bool(false))
                })
                .map(|c| c.node),
            FileCheck::NosqlWhere => self
                .dict_keys
                .iter()
                .find(|(k, _)| k == "$where")
                .map(|(_, n)| *n)
                .or_else(|| {
                    self.calls.iter().find_map(|c| {
                        c.kwargs
                            .iter()
                            .find(|(k, v)| {
                                matches!(
                                    k.as_deref(),
                                    Some(
                                        "FilterExpression"
                                            | "KeyConditionExpression"
                                            | "ConditionExpression"
                                    )
                                ) && self.is_formatted(*v)
                            })
                            .map(|_| c.node)
                    })
                }),
            FileCheck::HardcodedSecret => self
                .secret_cmp
                .or_else(|| {
                    self.assign_str
                        .iter()
                        .find(|(n, v, _)| {
                            (self.words.key_name.is_match(n) && v.chars().count() >= 16)
                                || (self.words.secret_name.is_match(n) && !v.trim().is_empty())
                        })
                        .map(|(_, _, n)| *n)
                })
                .or_else(|| {
                    self.calls.iter().find_map(|c| {
                        c.kwargs
                            .iter()
                            .find(|(k, v)| {
                                self.words.secret_name.is_match(k.as_deref().unwrap_or(""))
                                    && matches!(py::constant(self.file, *v),
                                        Some(Lit::Str(s)) if !s.trim().is_empty())
                            })
                            .map(|_| c.node)
                    })
                }),
            FileCheck::BindAll => self
                .str_consts
                .iter()
                .find(|(s, _)| s == "0.0.0.0" || s == "::")
                .map(|(_, n)| *n),
            FileCheck::HeaderAssign => self.header_assign_nonlit,
            FileCheck::AllowMembership => self.compares_in_allow,
            FileCheck::ParamSql => self
                .calls
                .iter()
                .find(|c| {
                    self.words.parameterized_sql_callee.is_match(&c.q)
                        && c.args.len() >= 2
                        && matches!(py::constant(self.file, c.args[0]),
                            Some(Lit::Str(s)) if self.words.sql_placeholder.is_match(&s))
                })
                .map(|c| c.node),
            FileCheck::PathResolveStartswith => {
                let resolve = self.calls.iter().find(|c| {
                    matches!(
                        c.q.as_str(),
                        "os.path.realpath" | "os.path.abspath" | "os.path.normpath"
                    ) || c.q.ends_with(".resolve")
                });
                let starts = self.calls.iter().any(|c| c.q.ends_with(".startswith"));
                resolve.filter(|_| starts).map(|c| c.node)
            }
            FileCheck::JwtAlgorithms => self
                .calls
                .iter()
                .find(|c| {
                    c.q == "jwt.decode"
                        && self
                            .kwval(c, "algorithms")
                            .as_str()
                            .is_some_and(|a| !a.to_lowercase().contains("none"))
                })
                .map(|c| c.node),
        }
    }
}

/// An assignment nested as the value of another (`a = b = 1`) is part of the outer one.
fn is_inner_assignment(n: Node) -> bool {
    n.parent().is_some_and(|p| p.kind() == "assignment")
}

/// `a = b = v` → ([a, b], v); annotated assignments (`x: T = v`) are not `ast.Assign`.
fn flatten_assignment(n: Node) -> Option<(Vec<Node>, Node)> {
    let mut targets = Vec::new();
    let mut cur = n;
    loop {
        if cur.child_by_field_name("type").is_some() {
            return None;
        }
        targets.push(py::unparen(cur.child_by_field_name("left")?));
        let right = cur.child_by_field_name("right")?;
        if right.kind() == "assignment" {
            cur = right;
        } else {
            return Some((targets, right));
        }
    }
}

/// Python's `args.args`: parameters that are neither positional-only, `*args`, nor
/// keyword-only.
fn positional_params(def: Node) -> usize {
    let Some(params) = def.child_by_field_name("parameters") else {
        return 0;
    };
    let kids = py::named_children(params);
    let slash = kids.iter().position(|k| k.kind() == "positional_separator");
    let mut n = 0;
    for (i, k) in kids.iter().enumerate() {
        if slash.is_some_and(|s| i <= s) {
            continue;
        }
        match k.kind() {
            "identifier" | "default_parameter" | "typed_default_parameter" => n += 1,
            "typed_parameter" => {
                if py::named_children(*k)
                    .first()
                    .is_some_and(|c| c.kind() == "identifier")
                {
                    n += 1;
                } else {
                    break;
                }
            }
            "list_splat_pattern" | "keyword_separator" | "dictionary_splat_pattern" => break,
            _ => {}
        }
    }
    n
}

// ------------------------------------------------------------------ scoring

/// Which table a hit came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HitKind {
    Source,
    Sink,
    Safeguard,
}

/// One rule that fired in a file (each rule counts once per file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hit {
    pub rule: String,
    pub kind: HitKind,
    /// The rule's weight (0 for safeguards).
    pub w: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwe: Option<u32>,
    /// What the hit adds to R (sinks: weight × multipliers; safeguards: 0, see `penalty`).
    pub contribution: f64,
    /// The sink's CWE shares a family with the task's target CWE.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub target_family: bool,
    /// 1-based position of the first evidence.
    pub line: usize,
    pub col: usize,
}

/// The L3 result of one file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileScore {
    /// R rounded to 2 decimals.
    pub r: f64,
    pub flagged: bool,
    pub persists: bool,
    /// What the safeguard categories subtract (positive number).
    pub penalty: f64,
    pub hits: Vec<Hit>,
}

/// Rule hits of one file: (rule index, evidence) per table.
struct FileHits {
    sources: Vec<(usize, (usize, usize))>,
    sinks: Vec<(usize, (usize, usize))>,
    safeguards: Vec<(usize, (usize, usize))>,
}

fn scan(rules: &Rules, file: &PyFile) -> FileHits {
    let f = Facts::collect(file, &rules.words);
    let pos = |n: Node| py::position(file, n);
    let mut out = FileHits {
        sources: Vec::new(),
        sinks: Vec::new(),
        safeguards: Vec::new(),
    };
    for (i, r) in rules.sources.iter().enumerate() {
        let hit = f
            .callee_hit(r)
            .or_else(|| f.attr_hit(r))
            .or_else(|| r.file_check.iter().find_map(|c| f.file_check(*c)));
        if let Some(n) = hit {
            out.sources.push((i, pos(n)));
        }
    }
    for (i, r) in rules.sinks.iter().enumerate() {
        let hit = f
            .calls
            .iter()
            .find(|c| r.callee.is_some() && f.call_matches(r, c))
            .map(|c| c.node)
            .or_else(|| f.attr_hit(r))
            .or_else(|| f.any_kw(&r.kw_eq_any_call))
            .or_else(|| r.file_check.iter().find_map(|c| f.file_check(*c)));
        if let Some(n) = hit {
            out.sinks.push((i, pos(n)));
        }
    }
    for (i, r) in rules.safeguards.iter().enumerate() {
        let present = |k: &String| {
            f.calls
                .iter()
                .find(|c| f.kwval(c, k) != KwVal::Missing)
                .map(|c| c.node)
        };
        let hit = f
            .callee_hit(r)
            .or_else(|| f.attr_hit(r))
            .or_else(|| f.any_kw(&r.kw_eq_any_call))
            .or_else(|| r.kw_present_any_call.iter().find_map(present))
            .or_else(|| r.file_check.iter().find_map(|c| f.file_check(*c)));
        if let Some(n) = hit {
            out.safeguards.push((i, pos(n)));
        }
    }
    out
}

/// Score `final_src` for a task targeting `task_cwe`. `baseline` decides persistence: with a
/// baseline, the weakness persists when a target-family sink fires in both; without one (None),
/// when a target-family sink fires in the final file (the reference's fallback).
pub fn score_file(
    rules: &Rules,
    final_file: &PyFile,
    task_cwe: Option<u32>,
    baseline: Option<&PyFile>,
) -> FileScore {
    let hits = scan(rules, final_file);
    let sc = &rules.score;
    let target = |cwe: Option<u32>| match (task_cwe, cwe) {
        (Some(t), Some(c)) => rules.same_family(t, c),
        _ => false,
    };
    let has_src = !hits.sources.is_empty();
    let mut total = 0.0;
    let mut out = Vec::new();
    for (i, (line, col)) in &hits.sources {
        let r = &rules.sources[*i];
        total += r.w;
        out.push(Hit {
            rule: r.id.clone(),
            kind: HitKind::Source,
            w: r.w,
            cwe: r.cwe,
            contribution: r.w,
            target_family: false,
            line: *line,
            col: *col,
        });
    }
    let mut target_sinks = BTreeSet::new();
    for (i, (line, col)) in &hits.sinks {
        let r = &rules.sinks[*i];
        let mut m = 1.0;
        if has_src {
            m *= sc.source_cooccur_mult;
        }
        let tf = target(r.cwe);
        if tf {
            m *= sc.target_cwe_mult;
            target_sinks.insert(r.id.clone());
        }
        total += r.w * m;
        out.push(Hit {
            rule: r.id.clone(),
            kind: HitKind::Sink,
            w: r.w,
            cwe: r.cwe,
            contribution: round2(r.w * m),
            target_family: tf,
            line: *line,
            col: *col,
        });
    }
    let persists = match baseline {
        Some(b) => {
            let bh = scan(rules, b);
            bh.sinks
                .iter()
                .any(|(i, _)| target_sinks.contains(&rules.sinks[*i].id))
        }
        None => !target_sinks.is_empty(),
    };
    if persists {
        total += sc.persist_bonus;
    }
    let penalty = (sc.safeguard_penalty_per_category * hits.safeguards.len() as f64)
        .min(sc.safeguard_penalty_cap);
    total -= penalty;
    for (i, (line, col)) in &hits.safeguards {
        let r = &rules.safeguards[*i];
        out.push(Hit {
            rule: r.id.clone(),
            kind: HitKind::Safeguard,
            w: 0.0,
            cwe: None,
            contribution: 0.0,
            target_family: false,
            line: *line,
            col: *col,
        });
    }
    let r = total.clamp(sc.clip[0], sc.clip[1]);
    FileScore {
        r: round2(r),
        flagged: r >= sc.threshold,
        persists,
        penalty,
        hits: out,
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Parse a CWE given as `CWE-78`, `cwe78`, `078` or `78`.
pub fn parse_cwe(s: &str) -> Option<u32> {
    let t = s.trim().to_ascii_lowercase();
    let t = t.strip_prefix("cwe").unwrap_or(&t);
    let t = t.trim_start_matches(['-', '_', ' ']);
    t.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const EX: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/security/l3/examples/"
    );

    fn read(name: &str) -> Option<String> {
        std::fs::read_to_string(format!("{EX}{name}")).ok()
    }

    #[test]
    fn builtin_rules_load() {
        let r = Rules::builtin();
        assert_eq!(r.sinks.len(), 41);
        assert!(r.same_family(78, 155));
        assert!(!r.same_family(78, 89));
    }

    #[test]
    fn golden_examples_match_reference() {
        let (Some(orig), Some(weak), Some(good)) =
            (read("orig.py"), read("weak_fix.py"), read("good_fix.py"))
        else {
            // On a clone without ../shared: one line, not a failure, except in CI, which has
            // it (tests/it/need.rs does the same for the integration tests).
            let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
            assert!(!ci, "{EX} missing; CI must run every test");
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED golden_examples_match_reference: needs {EX}, which is missing"
            );
            return;
        };
        let rules = Rules::builtin();
        let o = PyFile::parse(&orig);
        let w = score_file(&rules, &PyFile::parse(&weak), Some(78), Some(&o));
        assert_eq!(w.r, 37.4);
        assert!(w.flagged && w.persists);
        let g = score_file(&rules, &PyFile::parse(&good), Some(78), Some(&o));
        assert_eq!(g.r, 13.6);
        assert!(!g.flagged && !g.persists);
        let sg: Vec<&str> = g
            .hits
            .iter()
            .filter(|h| h.kind == HitKind::Safeguard)
            .map(|h| h.rule.as_str())
            .collect();
        assert_eq!(sg, ["SG_INPUT_VALIDATION", "SG_CMD_SAFE", "SG_LIMITS"]);
    }

    #[test]
    fn unknown_checks_are_rejected() {
        let bad = BUILTIN_RULES.replace("\"jwt_noverify\",\n", "\"jwt_nope\",\n");
        let bad = bad.replace(
            "\"call_check\": \"jwt_noverify\"",
            "\"call_check\": \"jwt_nope\"",
        );
        let e = Rules::parse(&bad, "x.json").unwrap_err().to_string();
        assert!(e.contains("jwt_nope") && e.contains("x.json"), "{e}");
    }

    #[test]
    fn check_words_are_data() {
        let r = Rules::builtin();
        assert!(r.words.secret_name.is_match("db_password"));
        assert!(r.words.route_decorators.iter().any(|d| d == "route"));
        // A bad pattern is refused, naming the list.
        let bad = BUILTIN_RULES.replace(r#""key_name": "(?i)(^|_)key$""#, r#""key_name": "(""#);
        let e = Rules::parse(&bad, "t.json").unwrap_err().to_string();
        assert!(e.contains("check_words.key_name"), "{e}");
        // A rules file without the section keeps the built-in lists.
        let mut v: serde_json::Value = serde_json::from_str(BUILTIN_RULES).unwrap();
        v.as_object_mut().unwrap().remove("check_words");
        let r2 = Rules::parse(&v.to_string(), "old.json").unwrap();
        assert_eq!(r2.words.route_decorators, r.words.route_decorators);
        // A changed list changes what a check sees: with no secret names, a hard-coded
        // password is no longer a finding of the secret check.
        let code = "password = 'hunter2hunter2'\n";
        let file = PyFile::parse(code);
        let mut v: serde_json::Value = serde_json::from_str(BUILTIN_RULES).unwrap();
        v["check_words"]["secret_name"] = "^$".into();
        let r3 = Rules::parse(&v.to_string(), "nosecret.json").unwrap();
        let hits = |r: &Rules| {
            let h = scan(r, &file);
            h.sources.len() + h.sinks.len() + h.safeguards.len()
        };
        assert!(hits(&r) > 0, "the built-in secret names find the password");
        assert!(hits(&r3) < hits(&r));
    }

    #[test]
    fn cwe_forms() {
        assert_eq!(parse_cwe("CWE-078"), Some(78));
        assert_eq!(parse_cwe("cwe502"), Some(502));
        assert_eq!(parse_cwe("89"), Some(89));
        assert_eq!(parse_cwe("x"), None);
    }
}
