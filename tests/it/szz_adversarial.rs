//! The adversarial toy histories (issue 28): each is a small history on which SZZ variants are
//! known to go wrong, run through **every** variant. The expected answer of each variant is
//! derived by hand from the variant's documented rule (`docs/szz.md`) and written beside it.
//!
//! Letters: `c1`, `c2`, … are the commits in order; `fix` is the fixing commit.

use crate::szz::Repo;
use sage_szz::{oracle::LexiconOracle, Options, Variant};

/// The selected (top) answer of every variant, in the order B, AG, MA, R, L, V, agent.
fn answers(repo: &Repo, fix: &str, cve: &str) -> Vec<(Variant, Option<String>)> {
    let git = sage_szz::open(repo.path(), None).unwrap();
    let opts = Options {
        cve: Some(cve.into()),
        ..Options::default()
    };
    ALL.iter()
        .map(|&v| {
            let r = sage_szz::find_inducing(&git, fix, v, &opts, Some(&LexiconOracle::default()))
                .unwrap();
            // B/AG/MA give an unranked set: one candidate each in these histories
            let top = r
                .selected
                .clone()
                .or_else(|| (r.candidates.len() == 1).then(|| r.candidates[0].commit.clone()));
            (v, top)
        })
        .collect()
}

/// Every variant, in the order B, AG, MA, R, L, V, agent.
const ALL: [Variant; 7] = Variant::ALL;

fn check(name: &str, got: Vec<(Variant, Option<String>)>, want: [&str; 7], names: &[(&str, &str)]) {
    let label = |h: &Option<String>| -> String {
        match h {
            None => "none".into(),
            Some(h) => names
                .iter()
                .find(|(_, full)| full == h)
                .map(|(n, _)| n.to_string())
                .unwrap_or_else(|| h.clone()),
        }
    };
    let got: Vec<String> = got.iter().map(|(_, h)| label(h)).collect();
    let want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
    let labels: Vec<&str> = ALL.iter().map(|v| v.label()).collect();
    assert_eq!(got, want, "{name}: variants {labels:?}");
}

/// c1 adds `ping` behind an `isalnum` guard; c2 removes the guard and switches to
/// `shell=True`; the fix restores both.
/// - B/AG/MA: blame the deleted `shell=True` line at fix^ → c2.
/// - R (latest) and L (largest) of that one candidate → c2.
/// - V: walks back through similar lines; c2's line is similar (≥ 0.75) to c1's list-form
///   call, so the earliest chain end is c1 (V-SZZ's documented over-reach).
/// - agent: at c2 the oracle sees c2 delete the fix's guard (`isalnum`, `ValueError`): c2
///   introduced the vulnerability, the walk stops there → c2. (Before the fix it walked on
///   to c1, whose list-form call shares the keywords, and answered c1.)
#[test]
fn remove_guard_then_fix_is_the_guard_removal() {
    let guarded = "import subprocess\n\n\ndef ping(host):\n    if not host.isalnum():\n        raise ValueError(\"bad host\")\n    return subprocess.run([\"ping\", \"-c\", \"1\", host])\n";
    let open = "import subprocess\n\n\ndef ping(host):\n    return subprocess.run(\"ping -c 1 \" + host, shell=True)\n";
    let mut r = Repo::new();
    let c1 = r.commit_file("net.py", guarded, "add ping");
    let c2 = r.commit_file("net.py", open, "simplify ping");
    let fix = r.commit_file("net.py", guarded, "fix command injection in ping");
    let got = answers(&r, &fix, "Command injection in ping: host reaches a shell");
    check(
        "remove guard",
        got,
        ["c2", "c2", "c2", "c2", "c2", "c1", "c2"],
        &[("c1", &c1), ("c2", &c2)],
    );
}

/// c1 adds a vulnerable `os.system` call; c2 replaces it with the safe list form; c3 puts the
/// vulnerable call back word for word; the fix removes it again.
/// - B/AG/MA/R/L: blame at fix^ → c3 (the reinstating commit wrote the line now there).
/// - V: c3's line maps to the most similar line c3 deleted, the safe call, when similar
///   enough; it is not (`os.system("rm " + path)` vs `subprocess.run(["rm", path])`), so the
///   chain ends at c3.
/// - agent: at c3 the statement is present; mapped into c2 by content it is the safe call,
///   which lacks the keywords → absent → answer c3, the commit that brought the flaw back.
#[test]
fn remove_then_reinstate_answers_the_reinstating_commit() {
    let vuln = "import os\n\n\ndef clean(path):\n    os.system(\"rm \" + path)\n";
    let safe = "import os\nimport subprocess\n\n\ndef clean(path):\n    subprocess.run([\"rm\", \"--\", path], check=True)\n";
    let mut r = Repo::new();
    let c1 = r.commit_file("clean.py", vuln, "add clean");
    let c2 = r.commit_file("clean.py", safe, "use subprocess");
    let c3 = r.commit_file("clean.py", vuln, "back to os.system");
    let fix = r.commit_file("clean.py", safe, "fix command injection in clean");
    let got = answers(
        &r,
        &fix,
        "Command injection in clean: os.system runs the path",
    );
    check(
        "remove then reinstate",
        got,
        ["c3", "c3", "c3", "c3", "c3", "c3", "c3"],
        &[("c1", &c1), ("c2", &c2), ("c3", &c3)],
    );
}

/// c1 adds `load` with an unsafe `pickle.loads`; c2 moves the function to the end of the file
/// below a new one, unchanged; the fix replaces the call.
/// - B/AG: blame without move detection → c2, the commit that wrote the moved lines.
/// - MA: blame with move detection (`-M`) sees through the move → c1; R and L build on MA's
///   candidates → c1.
/// - V: the line c2 wrote maps to the identical line c2 deleted (ratio 1) → c1.
/// - agent: the statement at c2 maps by content into c1's version (identical), which c1
///   added with the file → c1.
#[test]
fn a_moved_function_is_traced_to_where_it_was_written() {
    let load = "def load(blob):\n    return pickle.loads(blob)\n";
    let other = "def size(blob):\n    return len(blob)\n";
    let mut r = Repo::new();
    let c1 = r.commit_file(
        "store.py",
        &format!("import pickle\n\n\n{load}\n\n{other}"),
        "add store",
    );
    let c2 = r.commit_file(
        "store.py",
        &format!("import pickle\n\n\n{other}\n\ndef name(blob):\n    return str(blob)\n\n\n{load}"),
        "reorder",
    );
    let fix = r.commit_file(
        "store.py",
        &format!("import pickle\n\n\n{other}\n\ndef name(blob):\n    return str(blob)\n\n\ndef load(blob):\n    return json.loads(blob)\n"),
        "fix unsafe deserialization in load",
    );
    let got = answers(
        &r,
        &fix,
        "Unsafe deserialization: load calls pickle.loads on untrusted blob",
    );
    check(
        "move",
        got,
        ["c2", "c2", "c1", "c1", "c1", "c1", "c1"],
        &[("c1", &c1), ("c2", &c2)],
    );
}

/// c1 adds an unsafe `yaml.load`; c2 only re-indents the file (4 spaces to 2); the fix.
/// - B: plain blame → c2 (it wrote the line's bytes).
/// - AG/MA: blame ignoring whitespace (`-w`) → c1; R/L → c1.
/// - V: ignores whitespace as AG does → c1.
/// - agent: at c2 the statement maps (ratio 1 after trimming) into c1 → c1 added it → c1.
#[test]
fn a_whitespace_only_commit_is_not_the_answer_from_ag_on() {
    let four = "import yaml\n\n\ndef read(text):\n    data = yaml.load(text)\n    return data\n";
    let two = "import yaml\n\n\ndef read(text):\n  data = yaml.load(text)\n  return data\n";
    let fixed = "import yaml\n\n\ndef read(text):\n  data = yaml.safe_load(text)\n  return data\n";
    let mut r = Repo::new();
    let c1 = r.commit_file("conf.py", four, "add read");
    let c2 = r.commit_file("conf.py", two, "reindent");
    let fix = r.commit_file("conf.py", fixed, "fix unsafe yaml load");
    let got = answers(
        &r,
        &fix,
        "Unsafe YAML load in read: yaml.load on untrusted text",
    );
    check(
        "whitespace only",
        got,
        ["c2", "c1", "c1", "c1", "c1", "c1", "c1"],
        &[("c1", &c1), ("c2", &c2)],
    );
}

/// c1 adds `util.py` with an unsafe `eval`; c2 renames it to `calc.py` unchanged; the fix.
/// - every blame-based variant follows the whole-file rename (git blame does) → c1.
/// - MA additionally treats a rename as a meta-change, never an answer → c1.
/// - agent: blame at fix^ reaches c1 under the old path → c1.
#[test]
fn a_renamed_file_is_traced_through_the_rename() {
    let body = "def compute(expr):\n    return eval(expr)\n";
    let fixed = "import ast\n\n\ndef compute(expr):\n    return ast.literal_eval(expr)\n";
    let mut r = Repo::new();
    let c1 = r.commit_file("util.py", body, "add compute");
    r.git(&["mv", "util.py", "calc.py"]);
    let c2 = r.commit("rename util to calc");
    let fix = r.commit_file("calc.py", fixed, "fix code injection in compute");
    let got = answers(&r, &fix, "Code injection: compute passes expr to eval");
    check(
        "rename",
        got,
        ["c1", "c1", "c1", "c1", "c1", "c1", "c1"],
        &[("c1", &c1), ("c2", &c2)],
    );
}
