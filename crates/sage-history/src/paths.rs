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

static WORKSPACE_ROOTS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

/// Use `roots` instead of the embedded list for the rest of the process (the CLI's
/// `SAGE_WORKSPACE_ROOTS=FILE`). False when the roots were already in use.
pub fn override_workspace_roots(roots: Vec<String>) -> bool {
    WORKSPACE_ROOTS.set(roots).is_ok()
}

/// The workspace roots in use: an override, else the embedded list.
pub(crate) fn workspace_roots() -> &'static [String] {
    WORKSPACE_ROOTS.get_or_init(|| parse_workspace_roots(DEFAULT_WORKSPACE_ROOTS))
}

/// The relative forms an absolute path may stand for under the workspace-roots rule: the
/// path after a root, and after a root plus one folder (the checkout). A relative path stands
/// for itself.
pub fn relative_forms(path: &str) -> Vec<String> {
    let p = normalize_path(path);
    if !p.starts_with('/') {
        return vec![p];
    }
    let mut out = Vec::new();
    for root in workspace_roots() {
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
/// of it); the longest matching key wins.
pub fn match_key<'k>(path: &str, keys: impl IntoIterator<Item = &'k String>) -> Option<String> {
    let p = normalize_path(path);
    let forms = relative_forms(&p);
    let mut best: Option<(&String, usize)> = None;
    for k in keys {
        let kn = normalize_path(k);
        if kn == p {
            return Some(k.clone());
        }
        if !p.starts_with('/') && !kn.starts_with('/') {
            continue;
        }
        let kforms = relative_forms(&kn);
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
