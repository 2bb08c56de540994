"""Flips: changes to a copy of a record, each keeping the record consistent in itself."""
from __future__ import annotations

import statistics
from typing import Callable

from ...analysis import derived, summary
from ...analysis.stats import event_stats
from ..build import row


def scale(xs, factor):
    return [factor * x for x in xs]


def events(factor: float, of: str = "event_times_us"):
    """A capture's one-call CUDA-event samples made `factor` times their own (or, with `of`, the median of
    another of its samples: its device time per forward), its statistics redone."""
    def change(s):
        n = len(s["event_times_us"])
        s["event_times_us"] = (scale(s["event_times_us"], factor) if of == "event_times_us"
                               else [factor * statistics.median(s[of])] * n)
        s.update(event_stats(s["event_times_us"]))
    return change


def each(field: str, factor: float):
    """A capture's per-forward samples `field` (`forward_device_us`, `cpu_forward_us` ...) times `factor`."""
    def change(s):
        s[f"{field}_each"] = scale(s[f"{field}_each"], factor)
        s[field] = statistics.median(s[f"{field}_each"])
    return change


def setting(**values):
    return lambda s: s.update(values)


def in_first_process(run: str, edit: Callable):
    """`edit(result)` on a run's first process alone (a change one process measured and the others did not),
    its medians and rates then derived again from the samples."""
    def change(record):
        edit(record["result"])
        record["result"] = derived.derive(run, record["result"])
    return change


def in_run(run: str, edit: Callable):
    """in_first_process, and the same on each of its further repeats (the same change measured in every process)."""
    def change(record):
        in_first_process(run, edit)(record)
        for i, result in enumerate(record.get("repeats", [])):
            edit(result)
            record["repeats"][i] = derived.derive(run, result)
    return change


def scaled_row(run: str, field: str, factor: float, **match):
    """A run whose rows have a `rows` list, with `field` of the row matching `match` scaled by `factor`, in every
    process."""
    def edit(result):
        r = row(result["rows"], **match)
        r[field] = scale(r[field], factor)
    return in_run(run, edit)


def _halve_longest_grid(s):
    op = summary.longest_kernel(s)
    op["grid"] = [max(1, op["grid"][0] // 2), *op["grid"][1:]]


def in_trace(cat: str, part: str, factor: float):
    """Every event of a trace of category `cat` (kernel, cpu_op) whose name holds `part` takes `factor` times as
    long (a CPU op made shorter still lies inside its caller)."""
    def change(t):
        for e in t["traceEvents"]:
            if e.get("cat") == cat and part in e.get("name", ""):
                e["dur"] *= factor
    return change


def renamed(part: str, to: str):
    """A trace whose kernels' names have `part` replaced by `to` (what a name says, changed)."""
    def change(t):
        for e in t["traceEvents"]:
            if e.get("cat") == "kernel":
                e["name"] = e["name"].replace(part, to)
    return change


def no_copies(t):
    """A trace without its device copies."""
    t["traceEvents"] = [e for e in t["traceEvents"] if e.get("cat") != "gpu_memcpy"]
