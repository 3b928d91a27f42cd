#!/usr/bin/env python3
"""Regenerate tests/data/l3_reference.tsv from the Python reference scorer.

usage (from the repository root): python3 tests/data/gen_l3_reference.py > tests/data/l3_reference.tsv
Baseline = the dataset's prompt, final = its insecure code, task CWE from the id.
"""
import json, re, sys, os
SHARED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../shared/security")
sys.path.insert(0, os.path.join(SHARED, "l3"))
import l3_score as L  # noqa: E402

D = os.path.join(SHARED, "datasets")


def rows():
    for l in open(os.path.join(D, "SecurityEval/dataset.jsonl")):
        r = json.loads(l)
        yield "securityeval", r["ID"], int(re.match(r"CWE-0*(\d+)", r["ID"]).group(1)), r["Prompt"], r["Insecure_code"]
    for l in open(os.path.join(D, "SALLM/PythonDataset/dataset.jsonl")):
        r = json.loads(l)
        yield "sallm", r["id"], int(re.search(r"cwe0*(\d+)", r["id"]).group(1)), r["prompt"], r["insecure_code"]


print("# L3 reference scores from shared/security/l3/l3_score.py (score_file(insecure, cwe, original=prompt)),")
print("# generated once; the native port must reproduce R and the flag for every row.")
print("dataset\tid\tcwe\tR\tflag")
for ds, i, c, p, ins in rows():
    a = L.score_file(ins, c, p)
    print(f"{ds}\t{i}\t{c}\t{a['R']}\t{a['flag']}")
