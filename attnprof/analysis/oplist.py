"""The per-forward op list of a capture: where each op was launched from, what changes between two
lists, and each kernel's footprint on the GPU."""
from __future__ import annotations

from difflib import SequenceMatcher

from . import occupancy, trace
from .summary import threads as threads_of

KIND_LABEL = {"kernel": "kernel", "memcpy": "Memcpy", "memset": "Memset"}  # how a device op's kind reads
KEY_AVERAGES_HEADERS = ["Name", "Calls", "Self CPU", "CPU total", "Self CUDA", "CUDA total"]  # key_averages().table()'s


def launching_path(summary, op) -> list[str]:
    """The aten ops enclosing a device op's launch, outermost first (e.g. masked_fill > clone > copy_)."""
    t = op["launch_start_us"]
    return [c["name"] for c in summary["cpu_ops"] if c["start_us"] <= t <= c["start_us"] + c["duration_us"]]


def ops_diff(a, b):
    """Edit script between two op lists, compared by (kind, name): what b drops from a and adds."""
    key = lambda s: [(op["kind"], op["name"]) for op in s["ops"]]
    ka, kb = key(a), key(b)
    removed, added = [], []
    for tag, i1, i2, j1, j2 in SequenceMatcher(a=ka, b=kb, autojunk=False).get_opcodes():
        if tag in ("delete", "replace"):
            removed += [(i + 1, a["ops"][i]) for i in range(i1, i2)]
        if tag in ("insert", "replace"):
            added += [(j + 1, b["ops"][j]) for j in range(j1, j2)]
    return removed, added


def footprint_rows(summary, props: dict):
    """Per kernel: grid, block, registers, shared memory, and theoretical occupancy from `props`."""
    rows = []
    for i, op in enumerate(summary["ops"], 1):
        if op["kind"] != "kernel":
            continue
        threads = threads_of(op)
        occ = occupancy.theoretical(op["registers"], threads, op["shared_memory"], props)
        rows.append({"index": i, "name": op["name"], "grid": op["grid"], "block": op["block"], "threads": threads,
                     "registers": op["registers"], "shared_memory": op["shared_memory"],
                     "achieved_occupancy": op.get("achieved_occupancy"), **occ})
    return rows


def gaps(summary) -> trace.Gaps:
    """The gaps of a capture's chosen forward, from the ops its summary keeps."""
    return trace.gaps([trace.DeviceOp(**op) for op in summary["ops"]])
