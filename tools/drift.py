"""How far each timing method moves where nothing differs, measured on the committed regenerations of the
timing run: the margins analysis/decide.py's MARGINS holds (tests/test_decide.py holds them equal to these).

    python tools/drift.py [RUN_RECORD]    (default docs/captures/h200/run-timing.json)

It reads every commit that changed the record (at docs/captures/run-timing.json before the sets of records)
and measured its stages in rounds, once per regeneration (a commit that moved or rewrote the record without
measuring again is the same regeneration), all but the one the working tree holds: a margin never judges the
records it was measured on.
For every timing method, in each regime (analysis/timing.regime: launch-bound where the CPU took as long to
enqueue a call as the GPU took to run it in some process, GPU-bound where the GPU took longer in every one):
  paired  how far apart two identical paths landed in one process, timed in turns: auto-dispatch and cuDNN,
          whose kernel auto runs (analysis/aa.py IDENTICAL), their ratio in each process, round by round
          where the method is timed in rounds (decide.steps); the largest is the margin
  apart   how far one path's median moved between two processes of one regeneration; the largest is the margin
Each is printed as a fraction, with how many ratios or moves it rests on and their 95th percentile, then
MARGINS as decide.py holds it (each rounded up to a whole percent).
"""
from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from attnprof.analysis import aa, decide  # noqa: E402

RUN = "docs/captures/h200/run-timing.json"
BEFORE_SETS = {RUN: "docs/captures/run-timing.json"}  # where the published set's record lay before the sets


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def measurement(record: dict) -> tuple:
    """What tells one regeneration from another: when it was taken and by which processes."""
    return record.get("date"), json.dumps(record.get("processes"), sort_keys=True)


def committed(path: str = RUN) -> list[tuple[str, dict]]:
    """(commit, the record) for every regeneration of the record, the newest first, each once: the commit that
    took it (a later commit that only moved or rewrote the record is the same regeneration)."""
    paths = [path] + ([BEFORE_SETS[path]] if path in BEFORE_SETS else [])  # relative to the repository
    found, seen = [], set()
    for c in git("log", "--reverse", "--format=%h", "--", *paths).split():
        for p in paths:
            try:
                record = json.loads(git("show", f"{c}:{p}"))
            except subprocess.CalledProcessError:  # not there in this commit
                continue
            if measurement(record) not in seen:
                seen.add(measurement(record))
                found.append((c, record))
            break
    return found[::-1]


def regenerations(path: str = RUN) -> list[tuple[str, list]]:
    """(commit, its processes' results) for every regeneration of the record, the newest first, each kept only
    where its stages were measured in rounds."""
    found = []
    for c, record in committed(path):
        processes = [record["result"]] + record.get("repeats", [])
        if all("rounds" in r for p in processes for r in p["rows"] if "error" not in r):
            found.append((c, processes))
    return found


def judged(path: str = RUN) -> str | None:
    """The commit whose record the working tree holds (the records the site shows): left out of its margins."""
    here = measurement(json.loads((ROOT / path).read_text()))
    return next((c for c, record in committed(path) if measurement(record) == here), None)


def regime_of(*ranges) -> str | None:
    """One regime for ranges set side by side: launch-bound where one of them is, GPU-bound where all are."""
    kinds = {r.regime for r in ranges}
    return None if None in kinds else decide.LAUNCH_BOUND if decide.LAUNCH_BOUND in kinds else decide.GPU_BOUND


def moves(path: str = RUN, every: bool = False) -> tuple[dict, dict, list[str]]:
    """({(method, regime): every paired A/A ratio}, {(method, regime): every move between processes}, the
    commits they rest on), as |log| each: over the regenerations before the records the working tree holds, or
    with `every`, over all of them."""
    paired, apart, used = defaultdict(list), defaultdict(list), []
    left_out = None if every else judged(path)
    run = Path(path).stem
    for commit, processes in regenerations(path):
        if commit == left_out or len(processes) < 2:
            continue
        used.append(commit)
        for *_, field, ra, rb in aa.pairs(run, processes, aa.IDENTICAL):
            paired[decide.METHOD_OF[field[-1]], regime_of(ra, rb)] += [abs(x) for x in decide.steps(ra, rb)]
        for found in aa.measured(processes).values():
            for field in set.intersection(*(set(aa.fields(r)) for r in found)):
                r = aa.ranges(run, found, field)
                apart[r.method, r.regime] += [abs(math.log(x / y)) for x, y in itertools.combinations(r.per, 2)]
    return paired, apart, used


def up(x: float) -> float:
    """A move as the fraction decide.py holds: its ratio less one, rounded up to a whole percent."""
    return math.ceil(round(100 * math.expm1(x), 6)) / 100


def margins(path: str = RUN) -> dict:
    """MARGINS as decide.py holds it: {method: {regime: Margin(paired, apart)}}, the largest of each."""
    paired, apart, _ = moves(path)
    methods = dict.fromkeys(m for m, _ in sorted(paired) + sorted(apart))
    return {m: {g: decide.Margin(up(max(paired[m, g])), up(max(apart[m, g])))
                for g in (decide.LAUNCH_BOUND, decide.GPU_BOUND) if paired[m, g] and apart[m, g]} for m in methods}


EFFECT = 0.10  # the least effect a comparison shown in every process is asked to be decided at (the CPU side shows 10-20 %)


def shown(path: str = RUN) -> dict[tuple, int]:
    """The comparisons the committed history shows in every process: two paths at one shape and layout, by one
    method, the same one ahead in every process of every regeneration measured in rounds, and in every process of
    the records the working tree holds by more than EFFECT and than two identical paths have ever been apart by
    that method in that regime. {(shape, layout, a, b, field): 1 where a is the larger, -1 where b is}: the rule
    must decide each so (the power test, tests/test_decide.py)."""
    run, sides = Path(path).stem, defaultdict(set)
    for _, processes in regenerations(path):
        for *key, ra, rb in aa.pairs(run, processes):
            sides[tuple(key)] |= {(x > 0) - (x < 0) for x in decide.steps(ra, rb)}
    identical = moves(path, every=True)[0]
    here = json.loads((ROOT / path).read_text())
    found = {}
    for *key, ra, rb in aa.pairs(run, [here["result"]] + here.get("repeats", [])):
        each, side = decide.steps(ra, rb), sides[tuple(key)]
        bar = max(math.log1p(EFFECT), *identical[decide.METHOD_OF[key[-1][-1]], regime_of(ra, rb)])
        if len(side) == 1 and 0 not in side and all(abs(x) > bar for x in each):
            found[tuple(key)] = side.pop()
    return found


def p95(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, math.ceil(0.95 * len(xs)) - 1)] if xs else float("nan")


def main(path: str = RUN) -> None:
    paired, apart, used = moves(path)
    print(f"{path}: {len(used)} regenerations measured in rounds ({', '.join(used)}); left out, the records the "
          f"working tree holds: {judged(path) or 'none committed'}")
    print(f"{'method':<16} {'regime':<13} {'paired: n':>9} {'p95':>6} {'max':>6} {'apart: n':>9} {'p95':>6} {'max':>6}")
    for (m, g) in sorted(set(paired) | set(apart), key=lambda k: (k[0], k[1] or "")):
        p, a = paired[m, g], apart[m, g]
        print(f"{m:<16} {g or 'not known':<13} {len(p):>9} {math.expm1(p95(p)):>6.3f} {math.expm1(max(p, default=0)):>6.3f} "
              f"{len(a):>9} {math.expm1(p95(a)):>6.3f} {math.expm1(max(a, default=0)):>6.3f}")
    print("\nMARGINS = {" + ",\n           ".join(
        f"{name}: {{" + ", ".join(f"{regime}: Margin({m.paired:.2f}, {m.apart:.2f})" for regime, m in by.items()) + "}"
        for name, by in ((_name(k), {_name(g): m for g, m in v.items()}) for k, v in margins(path).items())) + "}")


def _name(value: str) -> str:
    """decide.py's name for a method or a regime."""
    return next(k for k, v in vars(decide).items() if k.isupper() and v == value and isinstance(v, str))


if __name__ == "__main__":
    main(*sys.argv[1:])
