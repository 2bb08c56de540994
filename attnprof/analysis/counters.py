"""Hardware counters of a forward's kernels, read by Nsight Compute (`ncu`), and what they say.

A counters record is made on a GPU by `python -m attnprof counters` (attnprof/measure/counters.py):
ncu profiles every kernel of one forward and prints its raw page as CSV; that CSV is committed
beside the record (`<record>.ncu.csv`), and the record's kernels are parsed from it here, so the
record can always be checked against the report it came from.
"""
from __future__ import annotations

import csv
import io
import re

from ..model.procedure import METRICS
from . import decide

MARKER = "spin_kernel"  # torch.cuda._sleep's kernel: in a report of several forwards, one opens each forward's rows
BOUND_AT = 60.0  # % of peak: a unit this busy is what limits the kernel (Nsight Compute's own rule of thumb)
# points of peak either side of BOUND_AT (and between the SMs' and memory's throughput) within which a verdict
# is "near the threshold": one regeneration moved kernels' throughput by up to 0.7 points, and a verdict
# must not cross the threshold on that
BAND = 2.0
NEAR, BOTH = "near the threshold", "compute- and memory-bound"


def version(ncu: str) -> str:
    """Nsight Compute's version number out of its `--version` line ("Version 2025.3.1.0 (build …)")."""
    found = re.search(r"\d+(?:\.\d+)+", ncu)
    return found.group(0) if found else ncu


def _number(text: str):
    text = text.strip().replace(",", "")
    if text in ("", "n/a"):
        return None
    try:
        return float(text)
    except ValueError:
        return None


def parse_csv(text: str) -> list[dict]:
    """Kernels of an `ncu --csv --page raw --print-units base` report, in launch order: name, grid,
    block, and every metric of METRICS that the report holds (None where ncu printed n/a)."""
    rows = list(csv.reader(io.StringIO(text)))
    start = next((i for i, r in enumerate(rows) if r[:1] == ["ID"]), None)
    if start is None:
        raise ValueError("not an ncu raw CSV report: no header row starting with \"ID\"")
    header, body = rows[start], rows[start + 1:]
    if body and not body[0][0].strip().isdigit():  # the units row
        body = body[1:]
    col = {name: i for i, name in enumerate(header)}
    kernels = []
    for r in body:
        if len(r) != len(header):
            continue
        k = {"name": r[col["Kernel Name"]], "grid": r[col.get("Grid Size", -1)], "block": r[col.get("Block Size", -1)]}
        for ours, metric in METRICS.items():
            k[ours] = _number(r[col[metric]]) if metric in col else None
        kernels.append(k)
    if not kernels:
        raise ValueError("the ncu report holds no kernel")
    return kernels


def split_report(text: str, forwards: int) -> list[str]:
    """An ncu raw CSV report of several forwards, each opened by a MARKER kernel, as one report per
    forward: the header (and units) rows, then that forward's rows as ncu printed them."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        raise ValueError("not an ncu raw CSV report: no header row starting with \"ID\"")
    name = next(csv.reader([lines[start]])).index("Kernel Name")
    head, body = lines[start:start + 1], lines[start + 1:]
    if body and not next(csv.reader([body[0]]))[0].strip().isdigit():  # the units row
        head, body = head + body[:1], body[1:]
    parts: list[list[str]] = []
    for line in body:
        if base_name(next(csv.reader([line]))[name]) == MARKER:
            parts.append([])
        elif not parts:
            raise ValueError("a kernel before the first marker: not a report of `python -m attnprof counters`")
        else:
            parts[-1].append(line)
    if len(parts) != forwards:
        raise ValueError(f"{len(parts)} forwards in the report, {forwards} expected")
    return ["".join(head + part) for part in parts]


def base_name(name: str) -> str:
    """A kernel's function name without namespaces, template arguments or parameters: ncu and the
    profiler spell the rest differently (ncu drops some namespaces)."""
    name = re.sub(r"<unnamed>::|\(anonymous namespace\)::", "", name)  # ncu and the profiler's anonymous namespaces
    name = name.removeprefix("void ").split("<")[0].split("(")[0]
    return name.split("::")[-1].strip()


def paired(capture_ops: list[dict], kernels: list[dict]) -> list[tuple[dict, dict]] | None:
    """The capture's kernel ops beside the counters' kernels, in launch order; None unless the two
    lists name the same kernels."""
    ops = [op for op in capture_ops if op["kind"] == "kernel"]
    if len(ops) != len(kernels) or any(base_name(o["name"]) != base_name(k["name"]) for o, k in zip(ops, kernels)):
        return None
    return list(zip(ops, kernels))


def limiter(k: dict) -> str | None:
    """Which resource caps the blocks per SM: the smallest of ncu's occupancy limits."""
    limits = {name: k.get(f"limit_{name}") for name in ("registers", "shared_memory", "warps", "blocks")}
    limits = {n: v for n, v in limits.items() if v is not None}
    return min(limits, key=limits.get).replace("_", " ") if limits else None


def verdict(k: dict) -> str:
    """compute-bound, memory-bound or latency-bound, from SM and memory throughput (% of peak); NEAR when the
    busier of the two lies within BAND of BOUND_AT, BOTH when both are above it and within BAND of each other
    (decide.against: a verdict never crosses the threshold by a few tenths of a point)."""
    sm, mem = k.get("sm_throughput_pct") or 0.0, k.get("memory_throughput_pct") or 0.0
    where = decide.against(max(sm, mem), BOUND_AT, BAND)
    if where != "above":
        return NEAR if where == "near" else "latency-bound"
    if decide.against(sm - mem, 0.0, BAND) == "near":
        return BOTH
    return "compute-bound" if sm > mem else "memory-bound"
