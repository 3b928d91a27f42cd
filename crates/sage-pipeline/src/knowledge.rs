//! What a trace shows of its files, fed into the one store of file knowledge
//! ([`sage_history::knowledge::FileKnowledge`]) that every history starts from: `localize`,
//! `sage replay`, `sage case check` / `case init`, the screening replay and `sage view`.

use std::collections::BTreeMap;

use sage_adapters::seen::Seen;
use sage_history::knowledge::FileKnowledge;
use sage_history::WorkspaceRoots;
use sage_trace::case::Case;

/// A case's baselines, whole, each named by the file the case gives it in; paths named under
/// the workspace `roots`.
pub fn of_case(case: &Case, roots: &WorkspaceRoots) -> FileKnowledge {
    FileKnowledge::of_whole(&case.baselines, roots, |name| {
        match case.manifest.baseline.get(name) {
            Some(file) => format!("case baseline {file}"),
            None => "case baseline".to_string(),
        }
    })
}

/// Learn what the trace shows, after every source already in `k` (they are trusted more):
/// each file shown whole before the agent first writes it, then the numbered lines shown
/// before that first write, then the views after writes (used only where nothing else tells
/// of their lines). `name` gives the name the history uses for a path of the trace
/// (e.g. the case's checkout folder taken off, as it is taken off the trace's writes).
pub fn learn_from_trace(k: &mut FileKnowledge, seen: &Seen, name: &dyn Fn(&str) -> String) {
    for (a, f) in &seen.full {
        k.add_whole(
            &name(a),
            f.content.clone(),
            format!("shown whole by the trace ({})", f.how),
        );
    }
    // `after_writes == 0`: the view comes before any write to its file, so it shows the
    // baseline (a later view shows the agent's own lines).
    let mut lines: BTreeMap<String, Vec<(usize, String)>> = BTreeMap::new();
    for v in seen.views.iter().filter(|v| v.after_writes == 0) {
        let e = lines.entry(name(&v.artefact)).or_default();
        e.extend(v.lines.iter().map(|(n, l)| (*n, l.clone())));
    }
    for (a, ls) in lines {
        k.add_lines(&a, ls, "lines shown by the trace");
    }
    // A view after writes to its file (a later view, an editor's snippet after an edit) tells
    // what the file held then: the history puts it in where nothing else tells of its lines.
    for v in seen.views.iter().filter(|v| v.after_writes > 0) {
        k.add_later_view(&name(&v.artefact), v.after_writes, v.lines.clone());
    }
}

/// The knowledge of a case: its baselines, then what its trace shows.
pub fn of_case_and_trace(case: &Case, seen: &Seen, roots: &WorkspaceRoots) -> FileKnowledge {
    let mut k = of_case(case, roots);
    let checkout = case.manifest.trace.checkout.as_deref();
    learn_from_trace(&mut k, seen, &|a| sage_history::without_prefix(a, checkout));
    k
}
