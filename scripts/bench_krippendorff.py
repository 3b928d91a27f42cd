#!/usr/bin/env python3
"""Time the Python `krippendorff` package on the CSVs written by
`cargo bench --bench agreement -- --csv DIR`. Usage: bench_krippendorff.py DIR [SCENARIO...]
Run each scenario under /usr/bin/time -v for its peak memory. Skips quietly if the package is
missing (pip install krippendorff)."""
import csv
import sys
import time

try:
    import krippendorff
    import numpy as np
except ImportError:
    print("krippendorff/numpy not installed; skipping the Python comparison")
    sys.exit(0)


def load(path):
    with open(path) as f:
        rows = list(csv.reader(f))[1:]
    # raters x units, NaN = missing
    return np.array([[float(c) if c else np.nan for c in r] for r in rows]).T


def bench(name, fn, reps=3):
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        v = fn()
        best = min(best, time.perf_counter() - t)
    print(f"{name}: {v:.6f}; {best * 1e3:.1f} ms")


def main():
    d = sys.argv[1]
    wanted = sys.argv[2:]
    run = lambda s: not wanted or s in wanted
    if run("nominal") or run("ordinal"):
        x = load(f"{d}/nominal_3x100000.csv")
        for lvl in ("nominal", "ordinal"):
            if run(lvl):
                bench(f"python {lvl} 3 x 100,000", lambda: krippendorff.alpha(x, level_of_measurement=lvl))
    if run("interval50"):
        x = load(f"{d}/interval50_3x100000.csv")
        bench("python interval 3 x 100,000 (50 values)",
              lambda: krippendorff.alpha(x, level_of_measurement="interval"), reps=1)


main()
