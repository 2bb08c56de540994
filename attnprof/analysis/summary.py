"""A capture's summary, read: each derivation the pages make from one profiled forward, written once.

A summary keeps its median profiled forward as `ops` (dicts with name, kind, duration_us and, for a
kernel, grid, block, registers and shared memory); a counters record keeps Nsight Compute's kernels
(with duration_ns). Pieces and checked sentences read both through these.
"""
from __future__ import annotations

from math import prod


def kernels(summary: dict) -> list[dict]:
    """The forward's kernels, in launch order (no copies or fills)."""
    return [op for op in summary["ops"] if op["kind"] == "kernel"]


def longest(ops: list[dict]) -> dict:
    """The op that ran longest by the profiler."""
    return max(ops, key=lambda op: op["duration_us"])


def longest_kernel(summary: dict) -> dict:
    return longest(kernels(summary))


def threads(op: dict) -> int:
    """Threads per block of a kernel launch."""
    return prod(op["block"])


def blocks(op: dict) -> int:
    """Blocks in a kernel's grid."""
    return prod(op["grid"])


def longest_counted(measured: dict) -> dict:
    """The longest kernel of a counters record, by Nsight Compute's duration."""
    return max(measured["kernels"], key=lambda k: k["duration_ns"] or 0)
