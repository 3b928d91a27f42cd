//! The facts L3 scores: one tree-sitter query per file, mirroring what the Python reference
//! (`l3_score.py`, stdlib `ast`) sees.

use super::rules::*;
use crate::py::{self, Lit, PyFile};
use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;
use tree_sitter::{Node, Query};

pub(super) const COLLECT: &str = r#"
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

pub(super) fn collect_query() -> &'static Query {
    static Q: OnceLock<Query> = OnceLock::new();
    Q.get_or_init(|| py::query(COLLECT))
}

/// A call with its resolved dotted callee.
pub(super) struct Call<'t> {
    pub(super) q: String,
    pub(super) node: Node<'t>,
    pub(super) args: Vec<Node<'t>>,
    /// `None` name for `**kwargs`.
    pub(super) kwargs: Vec<(Option<String>, Node<'t>)>,
}

/// A keyword's value as the reference's `kwval` returns it.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum KwVal {
    Missing,
    Lit(Lit),
    /// Unparsed source (Python gives a `str`).
    Text(String),
}

impl KwVal {
    pub(super) fn as_str(&self) -> Option<&str> {
        match self {
            KwVal::Lit(Lit::Str(s)) | KwVal::Text(s) => Some(s),
            _ => None,
        }
    }

    /// Python `==` against a JSON literal from the rules.
    pub(super) fn py_eq(&self, v: &serde_json::Value) -> bool {
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
pub(super) struct Facts<'t> {
    pub(super) file: &'t PyFile,
    pub(super) words: &'t CheckWords,
    pub(super) alias: HashMap<String, String>,
    pub(super) imports: HashSet<String>,
    pub(super) star: Vec<String>,
    pub(super) calls: Vec<Call<'t>>,
    pub(super) attrs: Vec<(String, Node<'t>)>,
    pub(super) formatted_names: HashSet<String>,
    pub(super) const_names: HashSet<String>,
    pub(super) route_param: Option<Node<'t>>,
    pub(super) assign_str: Vec<(String, String, Node<'t>)>,
    pub(super) dict_keys: Vec<(String, Node<'t>)>,
    pub(super) header_assign_nonlit: Option<Node<'t>>,
    pub(super) str_consts: Vec<(String, Node<'t>)>,
    pub(super) compares_in_allow: Option<Node<'t>>,
    pub(super) secret_cmp: Option<Node<'t>>,
}

impl<'t> Facts<'t> {
    pub(super) fn collect(file: &'t PyFile, words: &'t CheckWords) -> Facts<'t> {
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

    pub(super) fn add_imports(&mut self, stmt: Node) {
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
    pub(super) fn dotted(&self, n: Node) -> Option<String> {
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

    pub(super) fn add_call(&mut self, n: Node<'t>) {
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

    pub(super) fn add_compare(&mut self, n: Node<'t>) {
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

    pub(super) fn add_decorated(&mut self, n: Node<'t>) {
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

    pub(super) fn add_assign(&mut self, targets: &[Node<'t>], value: Node<'t>) {
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

    pub(super) fn is_literal(&self, n: Node) -> bool {
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
    pub(super) fn is_formatted(&self, n: Node) -> bool {
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

    pub(super) fn is_constexpr(&self, n: Node) -> bool {
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

    pub(super) fn kwval(&self, call: &Call, name: &str) -> KwVal {
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

    pub(super) fn call_matches(&self, rule: &Rule, c: &Call) -> bool {
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

    pub(super) fn is_const_or_bound(&self, a: Node) -> bool {
        let a = py::unparen(a);
        self.is_constexpr(a)
            || (a.kind() == "identifier" && self.const_names.contains(self.file.text(a)))
    }

    /// The reference's `any_kw`: some call passes one of these keywords with this value.
    pub(super) fn any_kw(&self, mapping: &[(String, serde_json::Value)]) -> Option<Node<'t>> {
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

    pub(super) fn callee_hit(&self, rule: &Rule) -> Option<Node<'t>> {
        let rx = rule.callee.as_ref()?;
        self.calls
            .iter()
            .find(|c| rx.is_match(&c.q))
            .map(|c| c.node)
    }

    pub(super) fn attr_hit(&self, rule: &Rule) -> Option<Node<'t>> {
        let rx = rule.attr.as_ref()?;
        self.attrs
            .iter()
            .find(|(a, _)| rx.is_match(a))
            .map(|(_, n)| *n)
    }

    pub(super) fn file_check(&self, check: FileCheck) -> Option<Node<'t>> {
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
pub(super) fn is_inner_assignment(n: Node) -> bool {
    n.parent().is_some_and(|p| p.kind() == "assignment")
}

/// `a = b = v` → ([a, b], v); annotated assignments (`x: T = v`) are not `ast.Assign`.
pub(super) fn flatten_assignment(n: Node) -> Option<(Vec<Node>, Node)> {
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
pub(super) fn positional_params(def: Node) -> usize {
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
