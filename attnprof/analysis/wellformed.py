"""The shape every committed record has, checked once where it is read (records._json), so that a field
removed, emptied, of the wrong type or not a finite number is one line naming the file, the field and the fix,
never a traceback from whichever check or piece reads it first.

The rules follow the records' own naming, one for every kind: a field named for a unit (`_us`, `_bytes`,
`_pct`, ...) holds a finite number of at least zero (a difference, any sign; or null: not measured), or a non-empty list of them (raw
samples); a `..._each` field such a list; a shape a list of whole numbers; the ops, kernels,
ranks and rows lists; names strings. Whether a number is right is for the checks that recompute it."""
from __future__ import annotations

import math

UNITS = ("_us", "_ms", "_s", "_bytes", "_pct", "_gbs", "tflops", "_flops", "_each")
MAY_BE_NAN = {"rel_err", "rel_frobenius", "max_abs"}  # an error over a fully masked row is NaN, as measured
SIGNED = {"saved_us", "throughput_gain_pct"}  # differences (a graph that saves nothing, a layer that gains nothing)
LISTS = {"ops", "cpu_ops", "key_averages", "ranks", "kernels", "saved", "rows"}
NON_EMPTY = {"result", "rows", "ranks", "kernels", "repeats"}  # never empty where present
STRINGS = {"record", "stage", "dtype", "device", "name", "kind", "path", "layout", "label", "title", "date", "launch"}
COUNTS = {"rounds", "throttled", "seed"}  # a measurement in rounds (measure/bench.py interleaved): whole numbers
CLOCKS = ("_mhz", "_mhz_min", "_mhz_median", "_mhz_max", "_mhz_limit", "_c_max", "_w_max")  # NVML's readings, or null


class Malformed(ValueError):
    pass


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _whole(value) -> bool:
    """A whole number of at least zero (a bool is not one)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def problem(record: dict) -> str | None:
    """None when `record` has the shape every record has; otherwise its first field that does not, and why."""
    if not isinstance(record, dict):
        return "the file holds no object"
    return _walk(record, "")


def _walk(node, where: str) -> str | None:
    if isinstance(node, dict):
        for key, value in node.items():
            here = f"{where}.{key}" if where else str(key)
            if why := _field(key, value, here) or _walk(value, here):
                return why
    elif isinstance(node, list):
        if all(type(v) is float or type(v) is int for v in node) and all(map(math.isfinite, node)):
            return None  # raw samples, the usual case: checked at once
        for i, value in enumerate(node):
            if why := _walk(value, f"{where}[{i}]"):
                return why
    elif _number(node) and not math.isfinite(node) and not (math.isnan(node) and where.rsplit(".", 1)[-1] in MAY_BE_NAN):
        return f"{where} is {node}, not a finite number"
    return None


def _field(key, value, here: str) -> str | None:
    key = str(key)
    if key in MAY_BE_NAN and value is not None and not _number(value):
        return f"{here} is {value!r}, not a number"
    if key in STRINGS and not isinstance(value, str):
        return f"{here} is {value!r}, not a string"
    if key in COUNTS and not _whole(value):
        return f"{here} is {value!r}, not a whole number of at least zero"
    if key.endswith(CLOCKS) and value is not None and not (_number(value) and value >= 0):
        return f"{here} is {value!r}, not a number of at least zero (or null: NVML could not say)"
    if key == "clocks" and not isinstance(value, dict):
        return f"{here} is {value!r}, not the GPU's clocks over the rounds kept"
    if key == "throttle_reasons" and value is not None and not _whole(value):
        return f"{here} is {value!r}, not NVML's bitmask of throttle reasons (or null)"
    if key in LISTS and not isinstance(value, list):
        return f"{here} is {value!r}, not a list"
    if key in NON_EMPTY and value in ([], {}):
        return f"{here} is empty"
    if key == "shape" and not (isinstance(value, list) and all(map(_whole, value))):
        return f"{here} is {value!r}, not a list of whole numbers"
    if key.endswith(UNITS) and value is not None:  # None: not measured (a counter ncu printed as n/a, a CPU's memory)
        values = value if isinstance(value, list) else [value]
        if isinstance(value, list) and not value:
            return f"{here} is empty: raw samples are never empty"
        if key.endswith("_each") and not isinstance(value, list):
            return f"{here} is {value!r}, not a list of numbers"
        bad = next((v for v in values if not (_number(v) and (v >= 0 or math.isnan(v) or key in SIGNED))), "ok")
        if bad != "ok":
            return f"{here} holds {bad!r}, not a number of at least zero"
    return None
