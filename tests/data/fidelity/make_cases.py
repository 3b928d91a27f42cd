#!/usr/bin/env python3
"""Write the golden method-fidelity cases of issue 12 (`tests/data/fidelity/<case>/`).

Each case is constructed, not collected: a small baseline written for the case and a trace
hand-written in a framework's real on-disk format (OpenHands V0 evaluation record, SWE-agent
1.x `.traj`, Claude Code session JSONL, Aider chat history, AG2 ChatResult JSON). Every
expected output (provenance, introducing write, reconstruction condition, origin, missed
detection opportunities, turn kinds, links, checks) is written here by hand, from the rules of
`../shared/method/SAGE.md` and `docs/design.md`, with the derivation in the case's README.md.
Nothing is computed from sage's output; the script only applies the trace's own edits (to
write the submitted patches and final files) and checks that those edits apply.

    python3 tests/data/fidelity/make_cases.py          # rewrite every case folder
    python3 tests/data/fidelity/make_cases.py --check  # verify the files on disk match

`tests/it/fidelity.rs` runs `sage localize` on every case and asserts every expectation.
"""

import difflib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
NOTE = ("Constructed for sage's method-fidelity tests (issue 12), not collected from a real "
        "agent run: the baseline is written for the case and the trace is hand-written in the "
        "framework's native format.")
OUT = {}


def emit(case, rel, text):
    OUT[os.path.join(case, rel)] = text


def patch(path, old, new):
    """A `git diff` of one file."""
    body = "".join(difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True),
        "a/" + path, "b/" + path, n=3))
    return f"diff --git a/{path} b/{path}\nindex 1a2b3c4..5d6e7f8 100644\n" + body


def str_replace(text, old, new):
    assert text.count(old) == 1, (old, text)
    return text.replace(old, new, 1)


def manifest(cid, trace, framework, baselines, task, anchor, expected, final_state=None):
    m = {
        "schema": "sage.case/1",
        "id": cid,
        "trace": {"files": [trace], "framework": framework},
        "baseline": {k: "baseline/" + k for k in baselines},
        "task": task,
        "anchor": anchor,
        "metadata": {"framework": framework, "base_model": "nominal-model",
                     "task_id": task["id"], "dataset": "constructed"},
        "expected": dict({"judge": "lexicon"}, **expected),
        "note": NOTE,
    }
    if final_state:
        m["final_state"] = {k: "final/" + k for k in final_state}
    return m


def write_case(cid, trace_name, trace_text, framework, baselines, task, anchor, expected,
               readme, final_state=None):
    emit(cid, trace_name, trace_text)
    for k, v in baselines.items():
        emit(cid, "baseline/" + k, v)
    for k, v in (final_state or {}).items():
        emit(cid, "final/" + k, v)
    m = manifest(cid, trace_name, framework, baselines, task, anchor, expected, final_state)
    emit(cid, "case.json", json.dumps(m, indent=2) + "\n")
    emit(cid, "README.md", readme.strip() + "\n")


# ------------------------------------------------------------------------- OpenHands V0

class OpenHands:
    """An OpenHands V0 evaluation record (Feb 2025 on: `str_replace_editor` edits whose
    observation carries a zero-context `diff`)."""

    def __init__(self, instruction):
        self.events = [
            {"id": 0, "timestamp": "2026-03-01T10:00:00", "source": "agent",
             "message": "You are OpenHands agent, a helpful AI assistant.", "action": "system",
             "args": {"content": "You are OpenHands agent, a helpful AI assistant.",
                      "tools": [], "openhands_version": "0.35.0", "agent_class": "CodeActAgent"}},
            {"id": 1, "timestamp": "2026-03-01T10:00:01", "source": "user",
             "message": instruction, "action": "message",
             "args": {"content": instruction, "image_urls": None, "wait_for_response": False}},
        ]
        self.n = 2
        self.instruction = instruction

    def _meta(self, fn, k):
        return {"function_name": fn, "tool_call_id": f"toolu_{k:02d}",
                "model_response": {"id": f"gen-{k:04d}", "object": "chat.completion",
                                   "choices": []},
                "total_calls_in_response": 1}

    def _action(self, action, fn, message, args):
        k = self.n
        self.events.append({"id": k, "timestamp": f"2026-03-01T10:00:{k:02d}",
                            "source": "agent", "message": message, "action": action,
                            "tool_call_metadata": self._meta(fn, k), "args": args})
        self.n += 1
        return k

    def _obs(self, cause, fn, obs, content, extras, success=None):
        k = self.n
        e = {"id": k, "timestamp": f"2026-03-01T10:00:{k:02d}", "source": "agent",
             "message": content[:60], "cause": cause, "observation": obs,
             "tool_call_metadata": self._meta(fn, cause), "content": content, "extras": extras}
        if success is not None:
            e["success"] = success
        self.events.append(e)
        self.n += 1

    def run(self, thought, command, output, exit_code=0):
        a = self._action("run", "execute_bash", f"Running command: {command}",
                         {"command": command, "is_input": False, "thought": thought,
                          "blocking": False, "hidden": False,
                          "confirmation_state": "confirmed"})
        self._obs(a, "execute_bash", "run", output,
                  {"command": command,
                   "metadata": {"exit_code": exit_code, "pid": -1, "username": "root",
                                "hostname": "sandbox", "working_dir": "/workspace",
                                "py_interpreter_path": "/usr/bin/python", "prefix": "",
                                "suffix": f"\n[The command completed with exit code {exit_code}.]"}},
                  success=exit_code == 0)

    def str_replace(self, thought, path, old, new, before, after):
        a = self._action("edit", "str_replace_editor", "",
                         {"path": path, "command": "str_replace", "file_text": None,
                          "old_str": old, "new_str": new, "insert_line": None, "content": "",
                          "start": 1, "end": -1, "thought": thought, "impl_source": "oh_aci"})
        diff = "".join(difflib.unified_diff(
            [l.rstrip() + "\n" for l in before.splitlines()],
            [l.rstrip() + "\n" for l in after.splitlines()], path, path, n=0))
        self._obs(a, "str_replace_editor", "edit",
                  f"The file {path} has been edited. Review the changes and make sure they are "
                  f"as expected. Edit the file again if necessary.",
                  {"path": path, "prev_exist": False, "old_content": old, "new_content": new,
                   "impl_source": "oh_aci", "diff": diff})

    def finish(self, text):
        self._action("finish", "finish", text,
                     {"outputs": {}, "thought": "", "final_thought": text,
                      "task_completed": "true"})

    def record(self, instance, git_patch):
        return json.dumps({
            "instance_id": instance,
            "test_result": {"git_patch": git_patch},
            "instruction": self.instruction,
            "metadata": {"agent_class": "CodeActAgent", "max_iterations": 30,
                         "llm_config": {"model": "nominal-model"}},
            "history": self.events,
            "metrics": {"accumulated_cost": 0.01},
            "error": None,
        }, indent=1) + "\n"


LEXICON_RULES = """The lexicon judge (`rubrics/lexicon.toml`, lexicon-4) scores each sentence of the turn's
agent-authored text (message, tool-call arguments, new text of its writes; never tool
results): a cue of the dimension with a term of the task CWE's vocabulary is 2 (3 with
completeness words), with a generic security term 1, else 0. A turn has a security
opportunity when it is a planning or review turn, writes an artefact, or uses a CWE or
generic security term."""


def section(title, body):
    return f"\n## {title}\n\n{body.strip()}\n"


# ------------------------------------------------------------------ A: OpenHands, git_patch

REDIRECT_BASE = """from flask import Flask, request, redirect

app = Flask(__name__)


@app.route('/go')
def go():
    target = request.args.get('target', '/')
    return redirect(target)
"""


def openhands_submission_not_a_write():
    cid = "openhands-submission-not-a-write"
    base = REDIRECT_BASE
    old = "    return redirect(target)"
    new = ("    if target.startswith('/'):\n"
           "        return redirect(target)\n"
           "    return redirect('/')")
    after = str_replace(base, old, new)
    task = {"id": "constructed-cwe601-go", "cwe": "CWE-601",
            "description": "Fix the open redirect in go() in app.py."}
    oh = OpenHands(task["description"])
    oh.run("I will check that the redirect target is a relative path before redirecting.",
           "cat /workspace/app.py", base)
    oh.str_replace("Adding it now.", "/workspace/app.py", old, new, base, after)
    oh.run("Running the tests.", "python -m pytest -q", "2 passed in 0.03s")
    oh.finish("The handler now redirects only to relative paths.")
    trace = oh.record("constructed__go-601", patch("app.py", base, after))
    anchor = {"artefact": "app.py", "fragment": "if target.startswith('/'):",
              "category": "defence-insufficient", "cwe": "CWE-601",
              "description": "A protocol-relative target such as //evil.example starts with '/' "
                             "and still redirects off-site."}
    expected = {
        "provenance": "agent-introduced", "introducing_write": "turn:3",
        "introducing_write_turn": 3, "reconstruction_condition": "single-write",
        "outcome": "localized", "origin_turn": 2, "origin_type": "inadequate-defence-selected",
        "undetermined_reason": None, "missed_opportunities": [3],
        "turn_kinds": ["administrative", "planning", "implementation", "verification",
                       "planning"],
        "linked_turns": [2], "scoring_failures": [],
        "checks": {"final-state-matches-replay": True, "every-write-applied": True,
                   "introducing-write-is-a-write-of-the-trace": True,
                   "origin-not-after-introducing-write": True,
                   "fragment-absent-from-baseline": True},
        "failed_checks": [],
    }
    readme = f"# {cid} — OpenHands V0 evaluation record\n\n" \
        "Issue 12, causes 1 (a submission is no turn's write), 2 (one classifier), 3 (missed " \
        "opportunities) and 9 (`final-state-matches-replay`). The agent reads `app.py`, adds a " \
        "`startswith('/')` test (an insufficient open-redirect defence), runs the tests and " \
        "finishes; `test_result.git_patch` is the run's own submission, equal to the edit.\n"
    readme += section("Canonical turns", """
| turn | event | kind | why |
|---|---|---|---|
| 1 | `system` | administrative | framework bookkeeping, never scored |
| 2 | `run cat /workspace/app.py`, thought "I will check that the redirect target is a relative path before redirecting." | planning | reads before any write |
| 3 | `str_replace` on `/workspace/app.py` (write 1), thought "Adding it now." | implementation | writes |
| 4 | `run python -m pytest -q`, thought "Running the tests." | verification | runs the tests |
| 5 | `finish` "The handler now redirects only to relative paths." | planning | a `finish` call: no write, edit, test or inspection |

The task message is not a turn (not agent-authored). The `git_patch` is **no turn's write**:
before the fix it was write 2, attached to turn 5.
""")
    readme += section("Scores (lexicon judge)", LEXICON_RULES + """

- Turn 2: "I will check that the redirect target …": DI cue `check` + CWE-601 term `redirect`
  → **DI 2**; no TR, VR or SA cue → 0. Planning → opportunity.
- Turn 3: message "Adding it now." scores 0. Its tool-call arguments are one JSON sentence
  holding `file_text` (SA cue `file*`) and `redirect` (CWE term) → **SA 2**; no TR, DI or VR
  cue → 0. It writes → opportunity.
- Turn 4: "Running the tests." has the VR cue `test*` but no security term → 0; `pytest`
  is not the word `test`. No opportunity (verification, no write, no term).
- Turn 5: `handler` is an SA cue without a security term; `redirects` is not the term
  `redirect` → all 0. Planning → opportunity.
""")
    readme += section("Derivation", """
- **Provenance**: `if target.startswith('/'):` is absent from the baseline and present after
  write 1 (turn 3), through the end → **agent-introduced**, introducing write **turn 3**.
- **Condition**: one write of a turn → **single-write** (the submission is not a write;
  before the fix: per-write).
- **Linking** (turn 2's DI quote): names `redirect`, a term of CWE-601 that is not a common
  word → linked (`quote-names-weakness`).
- **Rule**: (i) strictly before turn 3 → turn 2. (ii) first opportunity with TR = DI = 0 up to
  turn 3 → turn 3. Earliest: **turn 2, inadequate defence selected**.
- **Missed opportunities** (implementation or review after turn 2, applicable, security
  opportunity, VR ≤ 1 or SA ≤ 1): turn 3 (VR 0) → **[3]**. Turn 4 is verification, turn 5
  planning. Before the fix turn 5 held the patch, was an implementation turn and was flagged.
- **Checks**: the replayed `app.py` equals baseline + `git_patch` → `final-state-matches-replay`
  passes; every write applied; write 1 of the trace is turn 3's edit; origin 2 ≤ 3.
""")
    write_case(cid, "output.json", trace, "openhands", {"app.py": base}, task, anchor,
               expected, readme)


# --------------------------------------------------------------- B: SWE-agent, submission

class SweAgent:
    """A SWE-agent 1.x `.traj` (function-calling `history`, `trajectory`, `info`)."""

    def __init__(self, task, working_dir="/testbed"):
        self.history = [
            {"role": "system", "content": "SETTING: You are an autonomous programmer.",
             "agent": "main", "message_type": "system_prompt"},
            {"role": "user", "content": task, "agent": "main", "message_type": "observation"},
        ]
        self.trajectory = []
        self.working_dir = working_dir
        self.k = 0

    def step(self, thought, name, args, observation):
        self.k += 1
        cid = f"call_{self.k:02d}"
        arguments = json.dumps(args)
        self.history.append({
            "role": "assistant", "content": thought, "thought": thought,
            "action": f"{name} {arguments}", "agent": "main",
            "tool_calls": [{"function": {"arguments": arguments, "name": name}, "id": cid,
                            "type": "function"}],
            "message_type": "action"})
        self.history.append({"role": "tool", "content": observation, "agent": "main",
                             "tool_call_ids": [cid], "message_type": "observation"})
        if self.working_dir:
            self.trajectory.append({
                "action": f"{name} {arguments}", "observation": observation,
                "response": thought, "thought": thought, "execution_time": 0.1,
                "state": json.dumps({"open_file": "n/a", "working_dir": self.working_dir})})

    def traj(self, submission):
        info = {"exit_status": "submitted"}
        if submission is not None:
            info["submission"] = submission
        return json.dumps({"environment": "swe_main", "trajectory": self.trajectory,
                           "history": self.history, "info": info,
                           "replay_config": "{}"}, indent=1) + "\n"


PING_BASE = """import subprocess


def ping(host):
    return subprocess.run("ping -c 1 " + host, shell=True)
"""


def swe_agent_submission_not_a_write():
    cid = "swe-agent-submission-not-a-write"
    base = PING_BASE
    old = '    return subprocess.run("ping -c 1 " + host, shell=True)'
    new = "    host = host.replace(';', '')\n" + old
    after = str_replace(base, old, new)
    task = {"id": "constructed-cwe78-ping", "cwe": "CWE-78",
            "description": "Fix the OS command injection in ping() in app.py."}
    sw = SweAgent(task["description"])
    view = "Here's the result of running `cat -n` on /testbed/app.py:\n" + "".join(
        f"{i:6}\t{l}\n" for i, l in enumerate(base.splitlines(), 1))
    sw.step("The host reaches a shell command, so shell injection is a risk here.",
            "str_replace_editor", {"command": "view", "path": "/testbed/app.py"}, view)
    sw.step("I will strip semicolons from the host before the shell command runs.",
            "str_replace_editor",
            {"command": "str_replace", "path": "/testbed/app.py", "old_str": old, "new_str": new},
            "The file /testbed/app.py has been edited. Review the changes and make sure they "
            "are as expected.")
    sw.step("Let me view the edited function.", "str_replace_editor",
            {"command": "view", "path": "/testbed/app.py"},
            "Here's the result of running `cat -n` on /testbed/app.py:\n" + "".join(
                f"{i:6}\t{l}\n" for i, l in enumerate(after.splitlines(), 1)))
    sub = patch("app.py", base, after)
    sw.step("Submitting the change.", "submit", {}, sub)
    trace = sw.traj(sub)
    anchor = {"artefact": "app.py", "fragment": "host = host.replace(';', '')",
              "category": "defence-insufficient", "cwe": "CWE-78",
              "description": "Only ';' is removed; '&&', '|' and '$(...)' still inject commands."}
    expected = {
        "provenance": "agent-introduced", "introducing_write": "turn:3",
        "introducing_write_turn": 3, "reconstruction_condition": "single-write",
        "outcome": "localized", "origin_turn": 3, "origin_type": "defect-in-code-change",
        "undetermined_reason": None, "missed_opportunities": [4],
        "turn_kinds": ["administrative", "planning", "implementation", "review", "planning"],
        "linked_turns": [3], "scoring_failures": [],
        "checks": {"final-state-matches-replay": True, "every-write-applied": True,
                   "introducing-write-is-a-write-of-the-trace": True,
                   "defect-in-code-change-only-for-agent-introduced": True},
        "failed_checks": [],
    }
    readme = f"# {cid} — SWE-agent 1.x trajectory\n\n" \
        "Issue 12, causes 1, 2, 3 and 9. The agent views `app.py`, strips `;` from the host " \
        "(an insufficient command-injection defence), views the file again and submits; " \
        "`info.submission` equals the edit.\n"
    readme += section("Canonical turns", """
| turn | message | kind | why |
|---|---|---|---|
| 1 | system prompt | administrative | never scored |
| 2 | view `/testbed/app.py`, "The host reaches a shell command, so shell injection is a risk here." | planning | reads before any write |
| 3 | `str_replace` (write 1), "I will strip semicolons from the host before the shell command runs." | implementation | writes |
| 4 | view `/testbed/app.py`, "Let me view the edited function." | **review** | inspects the written artefact after the write (before the fix: planning) |
| 5 | `submit`, "Submitting the change." | planning | before the fix the submission was attached here (implementation) |
""")
    readme += section("Scores (lexicon judge)", LEXICON_RULES + """

- Turn 2: TR cues `injection`, `risk` with CWE-78 term `shell` → **TR 2**; no DI cue → DI 0.
- Turn 3: DI cue `strip` with `shell` → **DI 2** (main quote, the message); the arguments
  sentence has the DI cue `replace` (`host.replace(`) with `subprocess`/`shell` → DI 2 too
  (a further quote). TR, VR, SA 0.
- Turn 4: `function` is an SA cue without a security term → all 0; review → opportunity.
- Turn 5: no cue → all 0.
""")
    readme += section("Derivation", """
- **Provenance**: `host = host.replace(';', '')` absent from the baseline, present from write 1
  (turn 3) → **agent-introduced**, introducing write **turn 3**; **single-write**.
- **Linking** (turn 3): its DI quotes name `shell` (CWE-78, not a common word) → linked.
- **Rule**: (i) strictly before turn 3: turn 2 has DI 0 → none. (ii) up to turn 3: turn 2 has
  TR 2, turn 3 DI 2 → none. (iii) turn 3 expresses DI → **turn 3, defect in the code change**.
- **Missed**: turn 4 (review, opportunity, VR 0) → **[4]**; turn 5 is planning.
  Before the fix: turn 4 was planning and turn 5 an implementation turn → [5].
- **Checks**: replay equals baseline + `info.submission`; write 1 is turn 3's edit.
""")
    write_case(cid, "app.traj", trace, "swe-agent", {"app.py": base}, task, anchor,
               expected, readme)


# --------------------------------------------- C: Claude Code, review turns and linking

class ClaudeCode:
    def __init__(self, task, cwd="/home/dev/proj"):
        self.cwd = cwd
        self.lines = []
        self.k = 0
        self.parent = None
        self.user(task)

    def _base(self, kind):
        self.k += 1
        uid = f"00000000-0000-0000-0000-{self.k:012d}"
        d = {"parentUuid": self.parent, "isSidechain": False, "userType": "external",
             "cwd": self.cwd, "sessionId": "11111111-2222-3333-4444-555555555555",
             "version": "2.1.14", "gitBranch": "", "type": kind, "uuid": uid,
             "timestamp": f"2026-03-01T10:00:{self.k:02d}.000Z"}
        self.parent = uid
        return d

    def user(self, text):
        d = self._base("user")
        d["message"] = {"role": "user", "content": text}
        self.lines.append(d)

    def turn(self, text, tool, args, result_text, tool_use_result):
        d = self._base("assistant")
        content = [{"type": "text", "text": text}]
        tid = f"toolu_{self.k:04d}"
        if tool:
            content.append({"type": "tool_use", "id": tid, "name": tool, "input": args})
        d["message"] = {"model": "nominal-model", "id": f"msg_{self.k:04d}", "type": "message",
                        "role": "assistant", "content": content, "stop_reason": None,
                        "usage": {"input_tokens": 1, "output_tokens": 1}}
        self.lines.append(d)
        if tool:
            r = self._base("user")
            r["message"] = {"role": "user", "content": [
                {"tool_use_id": tid, "type": "tool_result", "content": result_text}]}
            r["toolUseResult"] = tool_use_result
            self.lines.append(r)

    def jsonl(self):
        return "".join(json.dumps(x) + "\n" for x in self.lines)


READ_BASE = """import os

BASE_DIR = '/srv/files'


def read_file(name):
    path = os.path.join(BASE_DIR, name)
    with open(path) as f:
        return f.read()
"""


def claude_code_review_and_linking():
    cid = "claude-code-review-and-linking"
    base = READ_BASE
    old = "    path = os.path.join(BASE_DIR, name)\n"
    new = old + "    print('reading', path)\n"
    after = str_replace(base, old, new)
    task = {"id": "constructed-cwe22-read", "cwe": "CWE-22",
            "description": "Fix the path traversal in read_file() in app.py."}
    cc = ClaudeCode(task["description"])
    fp = "/home/dev/proj/app.py"
    lines = base.count("\n")

    def read_result(text):
        n = text.count("\n")
        return {"type": "text", "file": {"filePath": fp, "content": text, "numLines": n,
                                          "startLine": 1, "totalLines": n}}
    cc.turn("I will validate the path target before opening it.", "Read", {"file_path": fp},
            base, read_result(base))
    cc.turn("Adding a log line.", "Edit",
            {"file_path": fp, "old_string": old, "new_string": new},
            f"The file {fp} has been updated.",
            {"filePath": fp, "oldString": old, "newString": new, "originalFile": base,
             "structuredPatch": [], "userModified": False, "replaceAll": False})
    cc.turn("Running the tests.", "Bash", {"command": "python -m pytest -q"}, "3 passed",
            {"stdout": "3 passed", "stderr": "", "interrupted": False, "isImage": False})
    cc.turn("Reading the edited file.", "Read", {"file_path": fp}, after, read_result(after))
    cc.turn("The change is done: reads are logged.", None, None, None, None)
    assert lines > 0
    anchor = {"artefact": "app.py", "fragment": "path = os.path.join(BASE_DIR, name)",
              "category": "defence-absent", "cwe": "CWE-22",
              "description": "name is joined to BASE_DIR unchecked: '../' escapes the folder."}
    expected = {
        "provenance": "inherited", "introducing_write": "none", "introducing_write_turn": None,
        "reconstruction_condition": "single-write", "outcome": "localized", "origin_turn": 2,
        "origin_type": "unaddressed-requirement", "undetermined_reason": None,
        "missed_opportunities": [4, 5],
        "turn_kinds": ["planning", "implementation", "verification", "review", "review"],
        "linked_turns": [], "scoring_failures": [],
        "checks": {"fragment-present-in-baseline": True,
                   "fragment-present-in-every-snapshot": True, "every-write-applied": True,
                   "fragment-in-baseline-literal-and-tokens": True},
        "failed_checks": [],
    }
    readme = f"# {cid} — Claude Code session JSONL\n\n" \
        "Issue 12, causes 2 (review and verification turns in an event-stream format), 3 and " \
        "4 (linking must concern the anchor's weakness). The agent only adds a log line: the " \
        "unchecked `os.path.join` is inherited.\n"
    readme += section("Canonical turns", """
| turn | message, tool | kind | why |
|---|---|---|---|
| 1 | "I will validate the path target before opening it.", `Read app.py` | planning | reads before any write |
| 2 | "Adding a log line.", `Edit` (write 1) | implementation | writes |
| 3 | "Running the tests.", `Bash python -m pytest -q` | verification | runs the tests |
| 4 | "Reading the edited file.", `Read app.py` | **review** | reads the written artefact after the write (before the fix: planning) |
| 5 | "The change is done: reads are logged." | **review** | message only, after a write, comments on the change (before the fix: planning) |
""")
    readme += section("Scores (lexicon judge)", LEXICON_RULES + """

- Turn 1: DI cue `validate` with the CWE-22 term `path` → **DI 2**; the arguments
  (`file_path`) hold no term. Planning → opportunity.
- Turn 2: the message scores 0; the `Edit` arguments hold `file_path` (SA cue `file*`) and
  `os.path.join` (CWE-22 term) → **SA 2**; TR = DI = VR = 0. Writes → opportunity.
- Turn 3: VR cue `test*` without a security term → 0; not an opportunity.
- Turns 4, 5: no cue with a security term → 0; review → opportunity.
""")
    readme += section("Derivation", """
- **Provenance**: the fragment is in the baseline and in the snapshot after write 1 →
  **inherited**, no introducing write; **single-write**.
- **Linking** (turn 1, the only DI > 0): the quote shares `path` with the fragment and with
  CWE-22's vocabulary, and `target` is an everyday word; `path` and `target` are common words
  (`[linking] common`), and no distinctive identifier (`join`, `BASE_DIR`) or weakness term
  (`path traversal`, `normpath`, ...) occurs → **not linked**. Before the fix it linked on
  `path`, making turn 1 an inadequate defence.
- **Rule** (inherited: (i) at or before the last write, turn 2; (ii) anywhere): (i) none.
  (ii) turn 1 has DI 2; turn 2 is an opportunity with TR = DI = 0 → **turn 2, unaddressed
  requirement**.
- **Missed** (after turn 2; implementation or review; applicable; opportunity; VR ≤ 1 or SA ≤ 1):
  turn 3 is verification; turns 4 and 5 are review turns with VR 0 → **[4, 5]**. Before the
  fix: origin 1 and missed [2] (turns 4 and 5 were planning).
- **Checks**: present in the baseline and in every snapshot; the write applied; the
  fragment's text is literally in the baseline and the tokens find it.
""")
    write_case(cid, "session.jsonl", cc.jsonl(), "claude-code", {"app.py": base}, task, anchor,
               expected, readme)


# ----------------------------------------------------------- D: Aider, `...` elision

HASH_BASE = """import hashlib


def store_password(db, user, password):
    salt = 'static'
    digest = hashlib.md5((salt + password).encode()).hexdigest()
    db.save(user, digest)
    return True
"""


def aider_elision():
    cid = "aider-elision"
    base = HASH_BASE
    after = base.replace("hashlib.md5(", "hashlib.sha1(")
    task = {"id": "constructed-cwe327-hash", "cwe": "CWE-327",
            "description": "Fix the weak password hashing in store_password() in app.py."}
    history = f"""
# aider chat started at 2026-03-01 10:00:00

> /usr/local/bin/aider --model openai/nominal-model app.py  
> Aider v0.82.2  
> Main model: openai/nominal-model with diff edit format  
> Git repo: .git with 1 files  
> Added app.py to the chat.  

#### {task['description']}  

MD5 is weak for passwords, so I will switch to SHA1.

app.py
```python
<<<<<<< SEARCH
def store_password(db, user, password):
...
    digest = hashlib.md5((salt + password).encode()).hexdigest()
=======
def store_password(db, user, password):
...
    digest = hashlib.sha1((salt + password).encode()).hexdigest()
>>>>>>> REPLACE
```

> Tokens: 1.0k sent, 120 received.  
> Applied edit to app.py  
> Commit 1a2b3c4 fix: Use SHA1 for password digests  
"""
    anchor = {"artefact": "app.py",
              "fragment": "digest = hashlib.sha1((salt + password).encode()).hexdigest()",
              "category": "defence-insufficient", "cwe": "CWE-327",
              "description": "SHA1 with a static salt is still a fast, broken password hash."}
    expected = {
        "provenance": "agent-introduced", "introducing_write": "turn:2",
        "introducing_write_turn": 2, "reconstruction_condition": "single-write",
        "outcome": "localized", "origin_turn": 2, "origin_type": "defect-in-code-change",
        "undetermined_reason": None, "missed_opportunities": [],
        "turn_kinds": ["administrative", "implementation"], "linked_turns": [2],
        "scoring_failures": [],
        "checks": {"every-write-applied": True, "fragment-absent-from-baseline": True,
                   "fragment-present-after-introducing-write": True,
                   "introducing-write-is-a-write-of-the-trace": True},
        "failed_checks": [],
    }
    readme = f"# {cid} — Aider chat history (diff edit format)\n\n" \
        "Issue 12, cause 5: Aider's `...` elision inside a SEARCH/REPLACE block. Aider applies " \
        "the block (exact, then whitespace-tolerant, then `...` pieces: each piece between " \
        "`...` lines must occur once and is replaced by its REPLACE piece) and logs " \
        "`Applied edit to app.py`. Before the fix sage could not apply it: a write failure, the " \
        "fragment found nowhere, and the case silently **no-code-location**.\n"
    readme += section("Canonical turns", """
| turn | text | kind |
|---|---|---|
| 1 | the session header (`> Aider v0.82.2`, ...) | administrative |
| 2 | "MD5 is weak for passwords, so I will switch to SHA1." + the block (write 1) | implementation |
""")
    readme += section("Scores (lexicon judge)", LEXICON_RULES + """

- Turn 2: "MD5 is weak for passwords, so I will switch to SHA1.": TR cue `weak` with CWE-327
  terms `MD5`, `SHA1` → **TR 2**; DI cue `switch to` with them → **DI 2**. The block's code
  lines have no cue. Writes → opportunity.
""")
    readme += section("Derivation", """
- **Replay**: the pieces are `def store_password(db, user, password):` (occurs once, replaced
  by itself) and the `digest = hashlib.md5(...)` line (occurs once, becomes `sha1`) → the
  snapshot is the baseline with `md5` → `sha1`.
- **Provenance**: the `sha1` line is absent from the baseline, present after write 1 →
  **agent-introduced**, introducing write **turn 2**; **single-write**.
- **Rule**: (i) strictly before turn 2: only the administrative turn → none. (ii) up to turn 2:
  turn 2 has TR 2 → none. (iii) turn 2 expresses TR and DI → **turn 2, defect in the code
  change**. No turn after it → no missed opportunity.
- **Linking**: turn 2's DI quote names `MD5`/`SHA1` (CWE-327) → linked (not used: (i) needs a
  turn before the write).
- **Checks**: the write applied (before the fix: failed); absent from the baseline, present
  after the introducing write.
""")
    write_case(cid, ".aider.chat.history.md", history.lstrip("\n"), "aider", {"app.py": base},
               task, anchor, expected, readme)
    # the replay this case expects, checked here so the expectation is not wishful
    assert after.count("sha1") == 1


# -------------------------------------------------------------------------- AG2 helpers

def ag2(messages, summary):
    return json.dumps({
        "chat_id": None, "chat_history": messages, "summary": summary,
        "cost": {"usage_including_cached_inference": {"total_cost": 0.001},
                 "usage_excluding_cached_inference": {"total_cost": 0.001}},
        "human_input": []}, indent=2) + "\n"


def msg(name, content, role="user"):
    return {"content": content, "role": role, "name": name}


# ------------------------------------------- E: AG2 final-only, cannot determine the write

PICKLE_BASE = """import pickle


def load_config(data):
    return pickle.loads(data)
"""

YAML_FINAL = """import yaml


def load_config(data):
    return yaml.load(data, Loader=yaml.Loader)
"""


def ag2_final_only_cannot_determine():
    cid = "ag2-final-only-cannot-determine"
    task = {"id": "constructed-cwe502-config", "cwe": "CWE-502",
            "description": "Fix the unsafe deserialization in load_config() in app.py."}
    chat = ag2([
        msg("Admin", task["description"], role="assistant"),
        msg("planner", "Replace pickle with yaml for the config loader."),
        msg("engineer", "The loader now reads YAML."),
        msg("reviewer", "Approved."),
    ], "Approved.")
    anchor = {"artefact": "app.py", "fragment": "return yaml.load(data, Loader=yaml.Loader)",
              "category": "vulnerability-introduced", "cwe": "CWE-502",
              "description": "yaml.Loader constructs arbitrary Python objects from the input."}
    expected = {
        "provenance": "agent-introduced", "introducing_write": "cannot-determine",
        "introducing_write_turn": None, "reconstruction_condition": "final-only",
        "outcome": "localized", "origin_turn": 1, "origin_type": "inadequate-defence-selected",
        "undetermined_reason": None, "missed_opportunities": [3],
        "turn_kinds": ["planning", "implementation", "review"], "linked_turns": [1],
        "scoring_failures": [],
        "checks": {"fragment-absent-from-baseline": True,
                   "fragment-present-after-introducing-write": True,
                   "every-write-applied": True},
        "failed_checks": [],
    }
    readme = f"# {cid} — AG2 group chat, final file only\n\n" \
        "Issue 12, causes 1 (a final-only trace: the introducing write is cannot-determine " \
        "unless the trace shows the turn) and 3 (a turn without a security opportunity is no " \
        "missed opportunity). The chat never writes or edits `app.py`; the case supplies the " \
        "final file. Before the fix sage attached the final file to the last implementation " \
        "turn (the engineer's), which became the introducing write although it changed " \
        "nothing the trace shows.\n"
    readme += section("Canonical turns", """
| turn | agent | text | kind |
|---|---|---|---|
| 1 | planner | "Replace pickle with yaml for the config loader." | planning |
| 2 | engineer | "The loader now reads YAML." | implementation (AG2 role) |
| 3 | reviewer | "Approved." | review (AG2 role) |

The initiating `Admin` message is the task, not a turn.
""")
    readme += section("Scores (lexicon judge)", LEXICON_RULES + """

- Turn 1: DI cue `replace` with the CWE-502 term `pickle` → **DI 2**. Planning → opportunity.
- Turn 2: no cue, no term (`YAML` is not the term `yaml.load`) → 0; implementation without a
  write or a term → **no security opportunity**.
- Turn 3: 0; review → opportunity.
""")
    readme += section("Derivation", """
- **History**: no turn writes → the final state is known only from `final/app.py` →
  **final-only**.
- **Provenance**: the fragment is absent from the baseline, present in the final file →
  **agent-introduced**. No turn records a change to `app.py` (no write, no edit command) →
  introducing write **cannot-determine**.
- **Rule with the uncertainty recorded**: the introducing write is unknown, so (i) and (ii)
  are sought over every scored turn and (iii) is unavailable. (i): turn 1's DI quote names
  `pickle` (CWE-502) → linked → turn 1. (ii): turn 3. Earliest: **turn 1, inadequate
  defence selected**, with `uncertainty` saying the origin may follow the unknown write.
- **Missed** (after turn 1): turn 2 is an implementation turn without a security opportunity
  → not flagged (cause 3); turn 3 (review, VR 0) → **[3]**. Before the fix: the engineer held
  the attached final file (an opportunity by its write) → [2, 3], introducing write turn 2.
- **Checks**: absent from the baseline, present in the final state; no write failed; there is
  no origin/write order to check.
""")
    write_case(cid, "chat.json", chat, "ag2", {"app.py": PICKLE_BASE}, task, anchor, expected,
               readme, final_state={"app.py": YAML_FINAL})


# -------------------------------------- F: AG2 with a write and a case final file that differs

TOKEN_BASE = """import random


def make_token():
    return str(random.random())
"""

TOKEN_WRITTEN = """import secrets


def make_token():
    return secrets.token_hex(16)
"""

TOKEN_FINAL = """import random


def make_token():
    return '%06d' % random.randint(0, 999999)
"""


def ag2_final_file_differs():
    cid = "ag2-final-file-differs"
    task = {"id": "constructed-cwe330-token", "cwe": "CWE-330",
            "description": "Fix the predictable token in make_token() in app.py."}
    chat = ag2([
        msg("Admin", task["description"], role="assistant"),
        msg("planner", "Use the secrets module for tokens."),
        msg("engineer", "Writing app.py:\n\n```python\n# filename: app.py\n" + TOKEN_WRITTEN
            + "```"),
        msg("executor", "exitcode: 0 (execution succeeded)\nCode output: \n"),
        msg("reviewer", "Approved."),
    ], "Approved.")
    anchor = {"artefact": "app.py", "fragment": "return '%06d' % random.randint(0, 999999)",
              "category": "vulnerability-introduced", "cwe": "CWE-330",
              "description": "A six-digit token from the random module is guessable."}
    expected = {
        "provenance": "agent-introduced", "introducing_write": "cannot-determine",
        "introducing_write_turn": None, "reconstruction_condition": "single-write",
        "outcome": "localized", "origin_turn": 1, "origin_type": "inadequate-defence-selected",
        "undetermined_reason": None, "missed_opportunities": [2, 3],
        "turn_kinds": ["planning", "implementation", "review"], "linked_turns": [1],
        "scoring_failures": [],
        "checks": {"final-state-matches-replay": False, "every-write-applied": True},
        "failed_checks": ["final-state-matches-replay"],
    }
    readme = f"# {cid} — AG2 group chat whose final file is not what it wrote\n\n" \
        "Issue 12, causes 5 (a case's `final_state` silently ignored when the trace writes the " \
        "file) and 9 (`final-state-matches-replay` can fail). The engineer writes a " \
        "`secrets`-based `app.py`; the delivered file (the case's final file) uses " \
        "`random.randint`. Before the fix the final file was ignored because the trace wrote " \
        "`app.py`, the fragment was found nowhere and the case was silently " \
        "**no-code-location**.\n"
    readme += section("Canonical turns", """
| turn | agent | kind |
|---|---|---|
| 1 | planner "Use the secrets module for tokens." | planning |
| 2 | engineer: a `# filename: app.py` block (write 1), run by the executor (its reply is the tool result) | implementation |
| 3 | reviewer "Approved." | review |
""")
    readme += section("Scores (lexicon judge)", LEXICON_RULES + """

- Turn 1: DI cue `use` with the CWE-330 term `secrets` → **DI 2**.
- Turn 2: "Writing app.py:" and the code lines carry no cue → 0; writes → opportunity.
- Turn 3: 0; review → opportunity.
""")
    readme += section("Derivation", """
- **History**: write 1 (turn 2) gives the `secrets` file; the case's final file differs →
  the recorded final state joins the presence list after the replayed snapshot.
- **Provenance**: the fragment is absent from the baseline and from write 1, present only in
  the final file → **agent-introduced**; no turn after write 1 records a change to `app.py`
  → introducing write **cannot-determine**. Condition **single-write** (one turn write).
- **Checks**: `final-state-matches-replay` **fails**: the replay ends with the engineer's file
  (AutoGen saves the whole block, so line 1 is `# filename: app.py`), the final file starts
  `import random` and returns `random.randint(...)`; every write applied.
- **Rule** (introducing write unknown: every turn): (i) turn 1 (`secrets` names CWE-330) →
  **turn 1, inadequate defence selected**, uncertainty recorded.
- **Missed** (after 1): turn 2 (implementation, opportunity, VR 0), turn 3 (review, VR 0) →
  **[2, 3]**.
""")
    write_case(cid, "chat.json", chat, "ag2", {"app.py": TOKEN_BASE}, task, anchor, expected,
               readme, final_state={"app.py": TOKEN_FINAL})


# ----------------------------------------------------------- G: OpenHands, CRLF baseline

HELLO_BASE = ("from flask import Flask, request\r\n\r\napp = Flask(__name__)\r\n\r\n\r\n"
              "@app.route('/hello')\r\ndef hello():\r\n"
              "    name = request.args.get('name', '')\r\n"
              "    return '<p>Hello ' + name + '</p>'\r\n")


def openhands_crlf_edit():
    cid = "openhands-crlf-edit"
    base = HELLO_BASE
    old = "    name = request.args.get('name', '')\n    return '<p>Hello ' + name + '</p>'"
    new = ("    name = request.args.get('name', '')\n"
           "    name = name.replace('<', '&lt;')\n"
           "    return '<p>Hello ' + name + '</p>'")
    # The editor reads with universal newlines and writes LF.
    after = str_replace(base.replace("\r\n", "\n"), old, new)
    task = {"id": "constructed-cwe79-hello", "cwe": "CWE-79",
            "description": "Fix the cross-site scripting in hello() in app.py."}
    oh = OpenHands(task["description"])
    oh.str_replace("I will escape the name before it goes into the HTML.", "/workspace/app.py",
                   old, new, base.replace("\r\n", "\n"), after)
    oh.finish("Done.")
    trace = oh.record("constructed__hello-79", patch("app.py", base, after))
    anchor = {"artefact": "app.py", "fragment": "name = name.replace('<', '&lt;')",
              "category": "defence-insufficient", "cwe": "CWE-79",
              "description": "Only '<' is escaped; attribute and entity contexts remain open."}
    expected = {
        "provenance": "agent-introduced", "introducing_write": "turn:2",
        "introducing_write_turn": 2, "reconstruction_condition": "single-write",
        "outcome": "localized", "origin_turn": 2, "origin_type": "defect-in-code-change",
        "undetermined_reason": None, "missed_opportunities": [],
        "turn_kinds": ["administrative", "implementation", "planning"], "linked_turns": [2],
        "scoring_failures": [],
        "checks": {"every-write-applied": True, "final-state-matches-replay": True,
                   "introducing-write-is-a-write-of-the-trace": True},
        "failed_checks": [],
    }
    readme = f"# {cid} — OpenHands V0, an LF edit on a CRLF file\n\n" \
        "Issue 12, causes 1 and 5 (a multi-line LF `str_replace` on a CRLF file). OpenHands' " \
        "editor reads files with universal newlines, so the LF `old_str` matches, and writes " \
        "the file back with LF line ends (the `git_patch` shows every line changed). Before " \
        "the fix the edit failed to apply and the case came out **no-code-location**.\n"
    readme += section("Canonical turns", """
| turn | event | kind |
|---|---|---|
| 1 | `system` | administrative |
| 2 | `str_replace` (write 1), thought "I will escape the name before it goes into the HTML." | implementation |
| 3 | `finish` "Done." | planning |
""")
    readme += section("Scores (lexicon judge)", LEXICON_RULES + """

- Turn 2: DI cue `escape` with CWE-79 terms `escape`, `HTML` → **DI 2**; the arguments
  sentence adds `file_text` (SA cue) with `HTML` → **SA 2**; TR = VR = 0. Writes → opportunity.
- Turn 3: "Done." → 0; planning → opportunity.
""")
    readme += section("Derivation", """
- **Replay**: the LF `old_str` is not in the CRLF file verbatim; read as LF it occurs once →
  applied, the snapshot has LF line ends (`crlf_normalized`).
- **Provenance**: `name = name.replace('<', '&lt;')` absent from the baseline, present from
  write 1 → **agent-introduced**, introducing write **turn 2**; **single-write**.
- **Rule**: (i) before turn 2: only the administrative turn. (ii) up to turn 2: turn 2 has
  DI 2 → none. (iii) → **turn 2, defect in the code change**. Missed: turn 3 is planning → [].
- **Checks**: the `git_patch` (whose CRLF the export turned into LF) applies to the baseline
  read as LF; replay (LF) = baseline + `git_patch` → passes. Before the fix: write 1 failed,
  the patch (attached to turn 3 as write 2) failed too, the fragment was found nowhere →
  no-code-location, per-write, origin turn 2 "inadequate defence", turn 3 a missed
  opportunity, and two write problems.
""")
    write_case(cid, "output.json", trace, "openhands", {"app.py": base}, task, anchor,
               expected, readme)


# ------------------------------------------------------- H: SWE-agent, workspace paths

DEBUG_BASE = """from flask import Flask

app = Flask(__name__)


@app.route('/')
def index():
    return 'ok'


if __name__ == '__main__':
    app.run()
"""


def swe_agent_workspace_paths():
    cid = "swe-agent-workspace-paths"
    base = DEBUG_BASE
    old = "    app.run()"
    new = "    app.run(debug=True)"
    task = {"id": "constructed-cwe215-debug", "cwe": "CWE-215",
            "description": "Fix the failing request in src/app.py."}
    # No working directory in the steps and no submission: the adapter cannot learn the
    # repository root, so the trace names /testbed/src/app.py.
    sw = SweAgent(task["description"], working_dir=None)
    sw.step("I will turn on debug output to see the failing request.", "str_replace_editor",
            {"command": "str_replace", "path": "/testbed/src/app.py", "old_str": old,
             "new_str": new},
            "The file /testbed/src/app.py has been edited. Review the changes and make sure "
            "they are as expected.")
    sw.step("Running the app to look at the fix.", "bash",
            {"command": "python /testbed/src/app.py"}, " * Running on http://127.0.0.1:5000")
    trace = sw.traj(None)
    anchor = {"artefact": "src/app.py", "fragment": "app.run(debug=True)",
              "category": "vulnerability-introduced", "cwe": "CWE-215",
              "description": "The Werkzeug debugger is enabled: remote code execution."}
    expected = {
        "provenance": "agent-introduced", "introducing_write": "turn:2",
        "introducing_write_turn": 2, "reconstruction_condition": "single-write",
        "outcome": "localized", "origin_turn": 2, "origin_type": "unaddressed-requirement",
        "undetermined_reason": None, "missed_opportunities": [],
        "turn_kinds": ["administrative", "implementation", "verification"], "linked_turns": [],
        "scoring_failures": [],
        "checks": {"every-write-applied": True, "introducing-write-is-a-write-of-the-trace": True,
                   "origin-not-after-introducing-write": True},
        "failed_checks": [],
    }
    readme = f"# {cid} — SWE-agent 1.x, absolute sandbox paths\n\n" \
        "Issue 12, cause 5 (artefact paths): the trace names `/testbed/src/app.py`, the case " \
        "names `src/app.py`. The documented rule (`adapters/workspace-roots.txt`, " \
        "`docs/design-history.md`) matches them: `/testbed/` is a workspace root and " \
        "`src/app.py` follows it. Before the fix the write was applied to a file called " \
        "`/testbed/src/app.py` (and failed: no such artefact), the anchor's artefact had no " \
        "write, and the case came out **no-code-location**.\n"
    readme += section("Canonical turns", """
| turn | message | kind |
|---|---|---|
| 1 | system prompt | administrative |
| 2 | "I will turn on debug output to see the failing request.", `str_replace` on `/testbed/src/app.py` (write 1) | implementation |
| 3 | "Running the app to look at the fix.", `bash python /testbed/src/app.py` | verification (runs the program) |
""")
    readme += section("Scores (lexicon judge)", LEXICON_RULES + """

- Turn 2: `debug` is a CWE-215 term but no sentence has a cue (`str_replace` is not the word
  `replace`) → all 0. Writes → opportunity.
- Turn 3: `fix` is a DI cue without a security term → 0; not an opportunity.
""")
    readme += section("Derivation", """
- **Paths**: `/testbed/src/app.py` → `src/app.py` (root `/testbed/`), noted in the result.
- **Provenance**: `app.run(debug=True)` absent from the baseline, present after write 1 →
  **agent-introduced**, introducing write **turn 2**; **single-write**.
- **Rule**: (i) before turn 2: none. (ii) up to turn 2: turn 2 is an opportunity with TR =
  DI = 0 → **turn 2, unaddressed requirement** (possibly the introducing write itself).
  Missed: turn 3 is verification → [].
""")
    write_case(cid, "app.traj", trace, "swe-agent", {"src/app.py": base}, task, anchor,
               expected, readme)


CASES = [
    openhands_submission_not_a_write,
    swe_agent_submission_not_a_write,
    claude_code_review_and_linking,
    aider_elision,
    ag2_final_only_cannot_determine,
    ag2_final_file_differs,
    openhands_crlf_edit,
    swe_agent_workspace_paths,
]


def main():
    check = "--check" in sys.argv
    for c in CASES:
        c()
    bad = []
    for rel, text in sorted(OUT.items()):
        path = os.path.join(HERE, rel)
        if check:
            try:
                with open(path, encoding="utf-8", newline="") as f:
                    if f.read() != text:
                        bad.append(rel)
            except FileNotFoundError:
                bad.append(rel)
        else:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(text)
    if bad:
        sys.exit("out of date: " + ", ".join(bad))
    print(f"{'checked' if check else 'wrote'} {len(OUT)} files in {len(CASES)} cases")


if __name__ == "__main__":
    main()
