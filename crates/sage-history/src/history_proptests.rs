//! Generated histories: random baselines and write sequences built against a model of
//! the artefact, with the anchor fragment inserted and removed at random points.
use crate::checks::*;
use crate::provenance::*;
use crate::reconstruct::*;
use proptest::prelude::*;
use sage_trace::case::DeficiencyCategory;
use sage_trace::case::FailureAnchor;
use sage_trace::{Actor, Turn, TurnKind, Write};
use sage_trace::{CanonicalTrace, RawRef, WriteOp};
use std::collections::BTreeMap;

/// [`crate::reconstruct`] with the embedded workspace roots.
fn reconstruct(b: &BTreeMap<String, String>, t: &CanonicalTrace) -> ArtefactHistory {
    crate::reconstruct(b, t, &Default::default())
}

/// The fragment as the anchor states it, and the ways a write may spell it.
const FRAGMENT: &str = "cipher = AES.new(key, AES.MODE_ECB)";
const SPELLINGS: [&str; 4] = [
    "cipher = AES.new(key, AES.MODE_ECB)",
    "cipher = AES.new(\n    key,\n    AES.MODE_ECB,\n)",
    "cipher=AES.new(key,AES.MODE_ECB)  # fast",
    "cipher = AES.new(key,  # the key\n                 AES.MODE_ECB)",
];

#[derive(Debug, Clone, PartialEq)]
enum Item {
    Plain(usize),
    Frag(usize),
    Safe,
}

impl Item {
    fn text(&self) -> String {
        match self {
            Item::Plain(i) => format!("v{i} = {i}"),
            Item::Frag(s) => SPELLINGS[*s].to_string(),
            Item::Safe => "cipher = AES.new(key, AES.MODE_GCM)".to_string(),
        }
    }
    fn lines(&self) -> usize {
        self.text().lines().count()
    }
}

fn render(items: &[Item]) -> String {
    items.iter().map(|i| i.text() + "\n").collect()
}

fn has_fragment(items: &[Item]) -> bool {
    items.iter().any(|i| matches!(i, Item::Frag(_)))
}

/// An abstract action; the numbers pick positions and items modulo the current state.
#[derive(Debug, Clone)]
enum Action {
    Full(Vec<u8>),
    Insert(usize, u8),
    StrReplace(usize, u8),
    ReplaceLines(usize, u8),
    SearchReplace(usize, u8),
    Diff(Vec<u8>),
}

/// 0..=3: a fragment spelling, 4: the safe variant, else a fresh plain line.
fn pick(code: u8, next: &mut usize) -> Item {
    match code % 8 {
        c @ 0..=3 => Item::Frag(c as usize),
        4 => Item::Safe,
        _ => {
            *next += 1;
            Item::Plain(*next)
        }
    }
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..6).prop_map(Action::Full),
        (any::<usize>(), any::<u8>()).prop_map(|(a, b)| Action::Insert(a, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(a, b)| Action::StrReplace(a, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(a, b)| Action::ReplaceLines(a, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(a, b)| Action::SearchReplace(a, b)),
        prop::collection::vec(any::<u8>(), 0..6).prop_map(Action::Diff),
    ]
}

fn write(op: WriteOp) -> Write {
    Write {
        artefact: "app.py".into(),
        op,
        via: "generated".into(),
        final_state: false,
        raw: RawRef::synthetic("t", "generated"),
    }
}

/// Turn the actions into concrete writes, returning them with the model state after each.
fn build(base: &[u8], actions: &[Action]) -> (Vec<Item>, Vec<(Write, Vec<Item>)>) {
    let mut next = 0;
    let baseline: Vec<Item> = base.iter().map(|c| pick(*c, &mut next)).collect();
    let mut cur = baseline.clone();
    let mut out = Vec::new();
    for a in actions {
        let before = render(&cur);
        let op = match a {
            Action::Full(codes) | Action::Diff(codes) => {
                let new: Vec<Item> = codes.iter().map(|c| pick(*c, &mut next)).collect();
                let after = render(&new);
                cur = new;
                match a {
                    Action::Full(_) => WriteOp::FullContent { content: after },
                    _ => WriteOp::UnifiedDiff {
                        diff: unified_diff(&before, &after, "a/app.py", "b/app.py"),
                    },
                }
            }
            Action::Insert(at, code) => {
                let j = at % (cur.len() + 1);
                let item = pick(*code, &mut next);
                let after_line = cur[..j].iter().map(Item::lines).sum();
                let text = item.text() + "\n";
                cur.insert(j, item);
                WriteOp::Insert { after_line, text }
            }
            Action::StrReplace(at, code)
            | Action::ReplaceLines(at, code)
            | Action::SearchReplace(at, code) => {
                if cur.is_empty() {
                    let item = pick(*code, &mut next);
                    let text = item.text() + "\n";
                    cur.push(item);
                    WriteOp::Insert {
                        after_line: 0,
                        text,
                    }
                } else {
                    let j = at % cur.len();
                    let item = pick(*code, &mut next);
                    let old = cur[j].text();
                    let new = item.text();
                    let op = match a {
                        Action::StrReplace(..) => {
                            // Equal items are all replaced (`all`), as the model does.
                            let all = cur.iter().filter(|i| **i == cur[j]).count() > 1;
                            let target = cur[j].clone();
                            for i in cur.iter_mut().filter(|i| **i == target) {
                                *i = item.clone();
                            }
                            WriteOp::StrReplace {
                                old: old + "\n",
                                new: new + "\n",
                                all,
                                tolerance: sage_trace::Tolerance::TrimmedRetry,
                            }
                        }
                        Action::ReplaceLines(..) => {
                            let start = cur[..j].iter().map(Item::lines).sum::<usize>() + 1;
                            let end = start + cur[j].lines() - 1;
                            cur[j] = item;
                            WriteOp::ReplaceLines {
                                start,
                                end,
                                text: new + "\n",
                            }
                        }
                        _ => {
                            // Search/replace hits the first equal item.
                            let first = cur.iter().position(|i| *i == cur[j]).unwrap_or(j);
                            cur[first] = item;
                            WriteOp::SearchReplace {
                                search: old + "\n",
                                replace: new + "\n",
                                tolerance: sage_trace::Tolerance::LinesThenElision,
                            }
                        }
                    };
                    op
                }
            }
        };
        out.push((write(op), cur.clone()));
    }
    (baseline, out)
}

fn trace_of(writes: &[(Write, Vec<Item>)]) -> CanonicalTrace {
    let mut t = CanonicalTrace::new("generated", vec![]);
    for (w, _) in writes {
        let mut turn = Turn::new(Actor::new("engineer", None), TurnKind::Implementation);
        turn.writes.push(w.clone());
        t.push_turn(turn);
    }
    t
}

fn anchor() -> FailureAnchor {
    FailureAnchor {
        artefact: "app.py".into(),
        fragment: Some(FRAGMENT.into()),
        category: DeficiencyCategory::VulnerabilityIntroduced,
        cwe: "CWE-327".into(),
        description: "ECB mode".into(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn generated_histories_keep_the_invariants(
        base in prop::collection::vec(any::<u8>(), 0..6),
        actions in prop::collection::vec(action(), 0..8),
    ) {
        let (baseline, writes) = build(&base, &actions);
        let baselines = BTreeMap::from([("app.py".to_string(), render(&baseline))]);
        let h = reconstruct(&baselines, &trace_of(&writes));
        // Every generated write applies, and each snapshot is the model's state.
        prop_assert!(h.failures.is_empty(), "{:?}", h.failures);
        prop_assert_eq!(h.snapshots.len(), writes.len());
        for (s, (_, model)) in h.snapshots.iter().zip(&writes) {
            let want = render(model);
            prop_assert_eq!(s.content.as_deref(), Some(want.as_str()), "write {}", s.write);
        }
        let model: Vec<bool> = std::iter::once(has_fragment(&baseline))
            .chain(writes.iter().map(|(_, m)| has_fragment(m)))
            .collect();

        let r = provenance(&anchor(), &h);
        let seen: Vec<bool> = r.presence.iter().map(|p| p.present).collect();
        prop_assert_eq!(&seen, &model, "token matching disagrees with the model");
        match r.provenance {
            Provenance::Inherited => {
                prop_assert!(r.introducing_write.is_none());
                prop_assert!(model.iter().all(|p| *p));
            }
            Provenance::NoCodeLocation => {
                prop_assert!(r.introducing_write.is_none());
                prop_assert!(!model[model.len() - 1]);
            }
            Provenance::AgentIntroduced => {
                let iw = r.introducing_write.expect("agent-introduced has an introducing write");
                let idx = iw.write; // one write per turn, every write to app.py
                prop_assert_eq!(iw.turn, iw.write);
                prop_assert!(!model[idx - 1], "present just before the introducing write");
                prop_assert!(model[idx..].iter().all(|p| *p), "absent after the introducing write");
                prop_assert_eq!(iw.reinstated, model[..idx - 1].iter().any(|p| *p));
                if model[0] {
                    prop_assert!(iw.reinstated, "baseline fragment must have been eliminated");
                }
            }
        }
        let c = checks(&anchor(), &h, &r);
        prop_assert!(c.iter().all(|c| c.passed), "{:#?}", c);
    }
}
