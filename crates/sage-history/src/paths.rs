//! The path rule: how an artefact path in a trace is compared with a baseline's name
//! (separators, workspace roots, relative forms).

/// An artefact path as compared: `/` separators, no leading `./`, no empty or `.`
/// components.
pub fn normalize_path(p: &str) -> String {
    let s = p.trim().replace('\\', "/");
    let abs = s.starts_with('/');
    let parts: Vec<&str> = s
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    let joined = parts.join("/");
    if abs {
        format!("/{joined}")
    } else {
        joined
    }
}

/// The embedded workspace roots (`crates/sage-history/data/workspace-roots.txt`).
pub const DEFAULT_WORKSPACE_ROOTS: &str = include_str!("../data/workspace-roots.txt");

/// Parse a workspace-roots file: one absolute folder per line, `#` comments.
pub fn parse_workspace_roots(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| l.starts_with('/') && *l != "/")
        .map(|l| format!("{}/", normalize_path(l)))
        .collect()
}

/// The embedded workspace roots, parsed once (a cache of embedded data, not configuration:
/// a user's `SAGE_WORKSPACE_ROOTS` file is a value the caller passes).
static EMBEDDED: std::sync::OnceLock<WorkspaceRoots> = std::sync::OnceLock::new();

/// The workspace roots of the path rule: the embedded list ([`DEFAULT_WORKSPACE_ROOTS`], the
/// default) or a user's (the CLI's `SAGE_WORKSPACE_ROOTS=FILE`), passed by value to
/// [`crate::reconstruct`] and [`match_key`]. Cloning is cheap.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkspaceRoots(std::sync::Arc<Vec<String>>);

impl WorkspaceRoots {
    /// The roots of a workspace-roots file (see [`parse_workspace_roots`]).
    pub fn parse(text: &str) -> WorkspaceRoots {
        WorkspaceRoots(std::sync::Arc::new(parse_workspace_roots(text)))
    }

    /// Each root, `/`-terminated.
    pub fn as_slice(&self) -> &[String] {
        &self.0
    }
}

impl Default for WorkspaceRoots {
    /// The embedded roots.
    fn default() -> Self {
        EMBEDDED
            .get_or_init(|| WorkspaceRoots::parse(DEFAULT_WORKSPACE_ROOTS))
            .clone()
    }
}

/// The relative forms an absolute path may stand for under the workspace-roots rule
/// (`roots`): the path after a root, and after a root plus one folder (the checkout). A
/// relative path stands for itself.
pub fn relative_forms(path: &str, roots: &WorkspaceRoots) -> Vec<String> {
    let p = normalize_path(path);
    if !p.starts_with('/') {
        return vec![p];
    }
    let mut out = Vec::new();
    for root in roots.as_slice() {
        if let Some(tail) = p.strip_prefix(root.as_str()) {
            if tail.is_empty() {
                continue;
            }
            out.push(tail.to_string());
            if let Some((_, rest)) = tail.split_once('/') {
                out.push(rest.to_string());
            }
        }
    }
    out
}

/// The case key that a trace's `path` names under the documented rule
/// (`docs/design-history.md`, "Artefact paths"): equal after normalization; else, when one
/// side is absolute, one of its [`relative_forms`] equals the other side (or a relative form
/// of it); the longest matching key wins. Absolute paths are read with the workspace `roots`.
pub fn match_key<'k>(
    path: &str,
    keys: impl IntoIterator<Item = &'k String>,
    roots: &WorkspaceRoots,
) -> Option<String> {
    let p = normalize_path(path);
    let forms = relative_forms(&p, roots);
    let mut best: Option<(&String, usize)> = None;
    for k in keys {
        let kn = normalize_path(k);
        if kn == p {
            return Some(k.clone());
        }
        if !p.starts_with('/') && !kn.starts_with('/') {
            continue;
        }
        let kforms = relative_forms(&kn, roots);
        let hit = forms
            .iter()
            .filter(|f| kforms.contains(f))
            .map(|f| f.len())
            .max();
        if let Some(len) = hit {
            if best.is_none_or(|(_, l)| len > l) {
                best = Some((k, len));
            }
        }
    }
    best.map(|(k, _)| k.clone())
}

/// The one name among `names` that ends with `/path` (a diff taken inside the checkout, `git
/// -C repo diff`, names `pkg/mod.py` where the trace names `repo/pkg/mod.py`); `None` when no
/// name or more than one does.
pub fn tail_match<'n>(path: &str, names: impl IntoIterator<Item = &'n String>) -> Option<String> {
    let p = normalize_path(path);
    let tail = format!("/{}", p.trim_start_matches('/'));
    let mut hits = names.into_iter().filter(|n| n.ends_with(&tail));
    match (hits.next(), hits.next()) {
        (Some(one), None) => Some(one.clone()),
        _ => None,
    }
}

/// The checkout folder a trace names its files under where the case or the patch does not
/// (`/workspace/requests/requests/sessions.py` read as `requests/requests/sessions.py`, the
/// patch's `requests/sessions.py`): the leading folder `X/` under which the trace writes
/// most keys (`X/P` for a key `P`), when no name the trace writes is a key as it stands.
/// Names outside `X/` (scratch scripts beside the checkout) keep their names. `None` when the
/// names and the keys agree, or no single folder explains them.
pub fn learn_checkout_prefix<'a>(
    written: impl IntoIterator<Item = &'a String>,
    keys: &[String],
) -> Option<String> {
    let written: Vec<String> = written.into_iter().map(|w| normalize_path(w)).collect();
    let keys: Vec<String> = keys.iter().map(|k| normalize_path(k)).collect();
    if written.iter().any(|w| keys.contains(w)) {
        return None;
    }
    // each leading folder, with how many written names it turns into keys
    let mut explained: std::collections::BTreeMap<&str, usize> = Default::default();
    for w in &written {
        if let Some((first, rest)) = w.split_once('/') {
            if !first.is_empty() && keys.iter().any(|k| k == rest) {
                *explained.entry(first).or_default() += 1;
            }
        }
    }
    let best = explained.values().copied().max()?;
    let mut winners = explained.iter().filter(|(_, n)| **n == best);
    match (winners.next(), winners.next()) {
        (Some((x, _)), None) => Some(format!("{x}/")),
        _ => None,
    }
}

/// Remove the checkout folder `prefix` from every name `trace` writes or submits (a case's
/// `trace.checkout`): the trace then names its files as the case does.
pub fn strip_checkout(trace: &mut sage_trace::CanonicalTrace, prefix: &str) {
    for t in &mut trace.turns {
        for w in &mut t.writes {
            w.artefact = without_prefix(&w.artefact, Some(prefix));
        }
    }
    for w in &mut trace.submissions {
        w.artefact = without_prefix(&w.artefact, Some(prefix));
    }
}

/// `name` read without a learnt checkout prefix (see [`learn_checkout_prefix`]).
pub fn without_prefix(name: &str, prefix: Option<&str>) -> String {
    let n = normalize_path(name);
    match prefix.and_then(|p| n.strip_prefix(p)) {
        Some(rest) if !rest.is_empty() => rest.to_string(),
        _ => n,
    }
}

#[cfg(test)]
mod learnt_prefix_tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn the_workspace_roots_are_the_ones_passed() {
        let keys = s(&["app.py"]);
        let embedded = WorkspaceRoots::default();
        assert_eq!(
            match_key("/workspace/app.py", &keys, &embedded).as_deref(),
            Some("app.py")
        );
        assert_eq!(match_key("/srv/box/app.py", &keys, &embedded), None);
        let mine = WorkspaceRoots::parse("# mine\n/srv/box\n");
        assert_eq!(
            match_key("/srv/box/app.py", &keys, &mine).as_deref(),
            Some("app.py")
        );
        assert_eq!(match_key("/workspace/app.py", &keys, &mine), None);
    }

    #[test]
    fn a_checkout_folder_the_patch_does_not_name_is_learnt() {
        let written = s(&[
            "requests/requests/sessions.py",
            "requests/requests/utils.py",
        ]);
        let keys = s(&["requests/sessions.py", "requests/models.py"]);
        assert_eq!(
            learn_checkout_prefix(&written, &keys).as_deref(),
            Some("requests/")
        );
        assert_eq!(
            without_prefix("requests/requests/utils.py", Some("requests/")),
            "requests/utils.py"
        );
    }

    #[test]
    fn no_prefix_when_names_agree_or_writes_lie_outside() {
        // the names agree: nothing to learn
        assert_eq!(
            learn_checkout_prefix(&s(&["pkg/a.py"]), &s(&["pkg/a.py"])),
            None
        );
        // a name that is a key as it stands: the trace is not rooted elsewhere
        assert_eq!(
            learn_checkout_prefix(&s(&["repo/pkg/a.py", "pkg/a.py"]), &s(&["pkg/a.py"])),
            None
        );
        // scratch files beside the checkout do not stop the rule
        assert_eq!(
            learn_checkout_prefix(&s(&["repo/pkg/a.py", "repro.py"]), &s(&["pkg/a.py"])).as_deref(),
            Some("repo/")
        );
        // a folder that explains no key
        assert_eq!(
            learn_checkout_prefix(&s(&["tests/x.py"]), &s(&["pkg/a.py"])),
            None
        );
        assert_eq!(
            tail_match("pkg/a.py", &s(&["repo/pkg/a.py", "other/b.py"])).as_deref(),
            Some("repo/pkg/a.py")
        );
        assert_eq!(tail_match("a.py", &s(&["x/a.py", "y/a.py"])), None);
    }
}
