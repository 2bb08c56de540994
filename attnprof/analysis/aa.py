"""The one rule (analysis/decide.py) where nothing differs: its A/A test, on real records (pure, no torch).

Identical arms are set against each other, and every comparison should come out "not told apart":
  paired  two paths that run the same kernel, timed in turns in the same processes (IDENTICAL), compared
          process by process, by every method both kept samples of;
  apart   each measurement of a run taken in several processes against itself in another of its processes.
tools/drift.py measures the margins on the regenerations before the one whose records the site shows, so the
test on those records can fail; its power test beside it asks the rule to decide what every process shows
(tests/test_decide.py holds both).
"""
from __future__ import annotations

import itertools
import json

from . import decide, timing

# Two paths that run the same kernel wherever the runs time both: auto-dispatch runs cuDNN's attention on this GPU at
# every shape the timing run measures (the fallback run's `ran` at the post's inputs; auto's device time within 2 % of
# cuDNN's in every process of every regeneration measured in rounds)
IDENTICAL = (("auto", "cudnn"),)
AT_LEAST = 0.95  # an A/A comparison must come out "not told apart" this often, or the rule decides on noise
NAMES = ("stage", "path")  # the field a row names its path by
PROFILED = "profiled"  # the part of a timing row the profiler's samples sit in


def rows(result) -> dict[tuple, dict]:
    """Every row of one process's result that names its path: {(its shape, its layout, its name): row}."""
    found = {}

    def walk(node):
        if isinstance(node, list):
            for item in node:
                walk(item)
        elif isinstance(node, dict):
            name = next((node[k] for k in NAMES if isinstance(node.get(k), str)), None)
            if name is not None:
                found[(json.dumps(node.get("shape")), node.get("layout"), name)] = node
            else:
                for value in node.values():
                    walk(value)
    walk(result)
    return found


def _samples(v) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0
                                                   for x in v)


def fields(row: dict) -> dict[tuple, list]:
    """A row's timed samples by where they lie in it ((field,) or (PROFILED, field)), every field decide.METHOD_OF
    names that holds samples (positive numbers)."""
    parts = [((), row)] + ([((PROFILED,), row[PROFILED])] if isinstance(row.get(PROFILED), dict) else [])
    return {at + (k,): v for at, part in parts for k, v in part.items() if k in decide.METHOD_OF and _samples(v)}


def measured(processes: list) -> dict[tuple, list[dict]]:
    """{(shape, layout, name): its row in each process} for every row every process holds."""
    each = [rows(p) for p in processes]
    return {key: [r[key] for r in each] for key in each[0] if all(key in r for r in each[1:])} if each else {}


def ranges(run: str, found: list[dict], field: tuple) -> decide.Range:
    """One row's samples of `field` over its processes (`found`, one row each), as the pages compare them."""
    samples = [r[PROFILED][field[1]] if field[0] == PROFILED else r[field[0]] for r in found]
    return decide.of(samples, decide.METHOD_OF[field[-1]], run, timing.regime(found))


def pairs(run: str, processes: list, names=None):
    """Every two paths measured side by side (the same shape and layout) in every process of a run, by every
    method both kept samples of: (shape, layout, a, b, field, a's range, b's range); `names` keeps the pairs it
    lists (as (a, b))."""
    found = measured(processes)
    for (sa, la, a), (sb, lb, b) in itertools.combinations(sorted(found), 2):
        if (sa, la) != (sb, lb) or (names is not None and (a, b) not in names and (b, a) not in names):
            continue
        common = set(fields(found[sa, la, a][0])) & set(fields(found[sb, lb, b][0]))
        for field in sorted(common):
            if all(set(fields(r)) >= {field} for r in found[sa, la, a] + found[sb, lb, b]):
                yield sa, la, a, b, field, ranges(run, found[sa, la, a], field), ranges(run, found[sb, lb, b], field)


def _timed(node, at=(), row=None):
    """(where, the row it lies in, samples) for every timed sample list inside one process's result: a field
    decide.METHOD_OF names, holding positive numbers."""
    if isinstance(node, dict):
        holder = node if "enqueue_us" in node else row  # a timing row, or the row a profiled part lies in
        for k, v in node.items():
            if k in decide.METHOD_OF and _samples(v):
                yield at + (k,), holder, v
            elif isinstance(v, (dict, list)):
                yield from _timed(v, at + (k,), holder)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _timed(v, at + (i,), row)


def aa(run: str, processes: list) -> tuple[list[int], list[int]]:
    """The rule applied where nothing differs, on one run's processes: paired, the IDENTICAL paths against each
    other by every method; apart, every timed measurement in one process against itself in another, each by its
    own samples. Returns each comparison's order, paired and apart: 0 is right."""
    paired = [decide.order(ra, rb) for *_, ra, rb in pairs(run, processes, IDENTICAL)]
    each = [{at: (row, v) for at, row, v in _timed(p)} for p in processes]
    apart = []
    for at in [at for at in each[0] if all(at in e for e in each[1:])] if each else []:
        regime = timing.regime([e[at][0] for e in each])
        one = [decide.of([e[at][1]], decide.METHOD_OF[at[-1]], regime=regime) for e in each]
        apart += [decide.order(x, y) for x, y in itertools.combinations(one, 2)]
    return paired, apart
