#!/usr/bin/env python3
"""Copy the SusVibes silent-failure cases from ../shared/susvibes/cases into this folder.

    python3 corpora/susvibes/import_cases.py           # (re)write the cases
    python3 corpora/susvibes/import_cases.py --check   # only verify the files on disk

Every file is copied byte for byte except case.json, which gains two things (README.md):
`metadata.trace_source = "real"` and an `expected` block for the lexicon judge holding only
what follows from the trace without any judge: the code provenance (SusVibes masked the whole
feature, so every anchor fragment is the agent's) and the introducing write's turn. That turn
is derived here from the shared case's notes.md ("trace event E (assistant message #M)", found
by the reference replay tools/replay.py of the shared data, not by sage) and the turn numbering
of the claude-stream adapter (docs/adapters.md): every record before E that is an assistant
record is an agent turn, every `system`/`result` record and every tool result whose
tool_use_id names no call is an administrative turn. Set SAGE_SHARED if shared/ is not next to
the repository.
"""
import json
import os
import re
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.environ.get("SAGE_SHARED") or os.path.join(HERE, "..", "..", "..", "shared")
SRC = os.path.join(SHARED, "susvibes", "cases")

# Cases whose introducing write is not the write that first puts the fragment in the file:
# gemini-2.5-pro wagtail 5c7a6097 inserts link_entity at event 11, undoes that insert with the
# two undo_edit calls at events 103 and 105 (the fragment is gone after 105), and inserts it
# again at event 109. SAGE: the reinstating write is the introducing write.
REINSTATED_AT_EVENT = {
    "gemini-2.5-pro__wagtail__wagtail_5c7a60977cba478f6a35390ba98cffc2bd41c8a4": 109,
}
# The heredoc write the notes name in prose ("event 53, cat > ... <<EOF").
HEREDOC_AT_EVENT = {
    "gemini-3-pro__wagtail__wagtail_bc96aed6ac53f998b2f4c4bf97e2d4f5fe337e5b": 53,
}


def introducing_event(cid, notes):
    if cid in REINSTATED_AT_EVENT:
        return REINSTATED_AT_EVENT[cid]
    if cid in HEREDOC_AT_EVENT:
        return HEREDOC_AT_EVENT[cid]
    m = re.search(r"trace event (\d+) \(assistant message #\d+\)", notes)
    if not m:
        sys.exit(f"{cid}: notes.md names no introducing event")
    return int(m.group(1))


def turn_of_event(records, event):
    """The canonical turn (1-based) of record `event` under the claude-stream numbering."""
    calls = {b["id"] for r in records if r.get("type") == "assistant"
             for b in r["message"]["content"] if b.get("type") == "tool_use"}
    turn = 0
    for i, r in enumerate(records[: event + 1]):
        t = r.get("type")
        if t in ("system", "result"):
            turn += 1
        elif t == "assistant":
            # One record, one turn (no record of these exports has two text blocks).
            turn += 1
        elif t == "user":
            for b in r["message"]["content"]:
                if b.get("type") == "tool_result" and b.get("tool_use_id") not in calls:
                    turn += 1
    if records[event].get("type") != "assistant":
        sys.exit(f"event {event} is not an assistant record")
    return turn


def build(cid):
    src = os.path.join(SRC, cid)
    manifest = json.load(open(os.path.join(src, "case.json"), encoding="utf-8"))
    records = json.load(open(os.path.join(src, manifest["trace"]["files"][0]), encoding="utf-8"))
    notes = open(os.path.join(src, "notes.md"), encoding="utf-8").read()
    event = introducing_event(cid, notes)
    manifest["metadata"]["trace_source"] = "real"
    manifest["expected"] = {
        "judge": "lexicon",
        "provenance": "agent-introduced",
        "introducing_write_turn": turn_of_event(records, event),
    }
    files = {}
    for root, _, names in os.walk(src):
        for n in names:
            p = os.path.join(root, n)
            rel = os.path.relpath(p, src)
            if rel != "case.json":
                files[rel] = open(p, "rb").read()
    files["case.json"] = json.dumps(manifest, indent=2, ensure_ascii=False).encode("utf-8")
    return files


def main():
    check = "--check" in sys.argv
    if not os.path.isdir(SRC):
        sys.exit(f"{SRC}: not found (set SAGE_SHARED)")
    ids = sorted(d for d in os.listdir(SRC) if os.path.isfile(os.path.join(SRC, d, "case.json")))
    changed = []
    for cid in ids:
        files = build(cid)
        dst = os.path.join(HERE, cid)
        if os.path.isdir(dst):
            on_disk = {os.path.relpath(os.path.join(r, n), dst)
                       for r, _, ns in os.walk(dst) for n in ns}
            for extra in sorted(on_disk - set(files)):
                changed.append(os.path.join(cid, extra))
                if not check:
                    os.remove(os.path.join(dst, extra))
        for rel, data in files.items():
            p = os.path.join(dst, rel)
            old = open(p, "rb").read() if os.path.exists(p) else None
            if old != data:
                changed.append(os.path.join(cid, rel))
                if not check:
                    os.makedirs(os.path.dirname(p), exist_ok=True)
                    with open(p, "wb") as f:
                        f.write(data)
    for d in sorted(os.listdir(HERE)):
        if os.path.isdir(os.path.join(HERE, d)) and d not in ids and d != "LICENSES":
            changed.append(d + "/")
            if not check:
                shutil.rmtree(os.path.join(HERE, d))
    print(f"{len(ids)} cases")
    if changed:
        print(("out of date: " if check else "written: ") + ", ".join(changed))
        if check:
            sys.exit(1)


if __name__ == "__main__":
    main()
