"""How far each timing method moves, measured on the committed regenerations of the timing run: the
figures analysis/decide.py's MARGINS rest on.

    python tools/drift.py [RUN_RECORD]    (default docs/captures/run-timing.json)

For every commit that changed the record (each one a regeneration on an H200), and every timing method:
  paired  how far the ratio of two stages at one shape, measured in the same processes, moved between
          two regenerations (|log| of its change, every two regenerations): the paired rule's margin
  apart   how far one stage's median moved between two processes of one regeneration: the margin two
          single-process figures must clear
Each is printed as the 95th percentile (and the largest) of the moves, as a fraction: over every
regeneration, then over those measured in rounds (the stages of a shape interleaved in each process), whose
paired moves are the paired margins.
"""
from __future__ import annotations

import itertools
import json
import math
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
METHODS = {"one call": "one_call_us", "CPU enqueue": "enqueue_us", "back to back": "back_to_back_us",
           "graph replay": "graph_us", "host wall time": "one_call_wall_us",
           "device time": ("profiled", "device_us"), "CPU time": ("profiled", "cpu_us")}


def samples(row, field):
    value = row[field[0]][field[1]] if isinstance(field, tuple) else row.get(field)
    return value if isinstance(value, list) and value else None


def regenerations(path: str):
    commits = subprocess.run(["git", "log", "--format=%h", "--", path], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    for c in commits:
        record = json.loads(subprocess.run(["git", "show", f"{c}:{path}"], cwd=ROOT, capture_output=True,
                                           text=True, check=True).stdout)
        yield c, [record["result"]] + record.get("repeats", [])


def p95(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, math.ceil(0.95 * len(xs)) - 1)] if xs else float("nan")


def interleaved(processes) -> bool:
    return all("rounds" in row for p in processes for row in p["rows"] if "error" not in row)


def report(path, regenerations):
    ratios = defaultdict(list)  # (method, shape, a, b) -> one median log-ratio per regeneration
    apart = defaultdict(list)  # method -> |log| between two processes of one regeneration
    used = []
    for commit, processes in regenerations:
        used.append(f"{commit} ({len(processes)})")
        for method, field in METHODS.items():
            per = defaultdict(dict)  # (shape) -> stage -> [median per process]
            for p in processes:
                for row in p["rows"]:
                    xs = samples(row, field) if "error" not in row else None
                    if xs:
                        per["x".join(map(str, row["shape"]))].setdefault(row["stage"], []).append(statistics.median(xs))
            for shape, stages in per.items():
                for meds in stages.values():
                    apart[method] += [abs(math.log(x / y)) for x, y in itertools.combinations(meds, 2)]
                for a, b in itertools.combinations(sorted(stages), 2):
                    if len(stages[a]) == len(stages[b]):
                        ratios[(method, shape, a, b)].append(
                            statistics.median(math.log(x / y) for x, y in zip(stages[a], stages[b])))
    print(f"{path}: regenerations (processes) {', '.join(used)}")
    print(f"{'method':<16} {'paired p95':>10} {'max':>7} {'apart p95':>10} {'max':>7}")
    for method in METHODS:
        moves = [abs(x - y) for (m, *_), xs in ratios.items() if m == method for x, y in itertools.combinations(xs, 2)]
        print(f"{method:<16} {math.expm1(p95(moves)):>10.3f} {math.expm1(max(moves, default=0)):>7.3f} "
              f"{math.expm1(p95(apart[method])):>10.3f} {math.expm1(max(apart[method], default=0)):>7.3f}")


def main(path="docs/captures/run-timing.json"):
    every = list(regenerations(path))
    report(path, every)
    print()
    report(path, [(c, p) for c, p in every if interleaved(p)])


if __name__ == "__main__":
    main(*sys.argv[1:])
