"""Measurement runs beyond the ladder (sweeps, serving shapes, verification), each written as
one stamped JSON record in the captures folder: `python -m attnprof sweep [--only NAME,...]`. A run whose
numbers a page compares is taken several times (model/names.py's RUN_CODE says how many), each in a
fresh process (measure/repeat.py), the first as `result` and the others beside it as `repeats`. A
run's function may be a generator: its `yield` marks the end of its preparation (measure/repeat.py).
Each process measures holding the GPU alone (measure/gpulock.py), but for the runs in NOT_ALONE."""
from __future__ import annotations

import importlib
import platform
import time
from pathlib import Path
import traceback

import torch

from . import repeat
from ..analysis import derived
from ..model import names, store
from ..analysis import records
from ..text import first_line

# runs whose first process measures without holding the GPU alone, and why that is safe
NOT_ALONE = {
    # errors against float64, which no neighbour moves; and its GPU work, 72 forwards and references at
    # 2x4x256x64 and 1x8x1024x128, is milliseconds among ~50 s of loading and compiling, as a preparation is
    "verify": "its numbers are errors against float64, which no neighbour moves",
    "steady": "its function only starts its own processes, and each of those holds the GPU as it measures",
}


def function(name: str):
    """The function that makes run `name` (model/names.py's RUN_CODE says which)."""
    module, attribute = names.RUN_CODE[name].function.split(".")
    return getattr(importlib.import_module(f"{__package__}.{module}"), attribute)


def host_cpu() -> str | None:
    """The host CPU's model name: a stream's verdict within the margin that decides it is this CPU's."""
    try:
        return next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith("model name")), None) or platform.processor() or None
    except OSError:
        return platform.processor() or None


def _failed(result) -> bool:
    return isinstance(result, dict) and set(result) == {"error"}


def _taken(name: str) -> tuple[list[tuple], list[str]]:
    """Run `name`'s processes: [(its result, its process's identity), ...] in the order they measured, and
    the repeats stopped for making no progress. A run taken once measures in this process; a run whose
    numbers a page compares is taken in RUN_CODE's repeats of fresh processes, this one only starting them,
    so that none of them has profiled or compiled anything else before (this process, a regeneration's
    worker, has: its CPU-side times ran 1.2-1.6x a fresh process's in every committed timing run)."""
    code = names.RUN_CODE[name]
    if code.repeats == 1:
        result, identity = repeat.watched(function(name), what=f"run-{name}", alone=name not in NOT_ALONE)
        print(f"-- run-{name} repeat 0: measured, {identity['measured'][1] - identity['measured'][0]:.0f} s", flush=True)
        torch.cuda.empty_cache()
        return [(result, identity)], []
    with repeat.Started(code.function, code.repeats, what=f"run-{name}") as processes:
        results = processes.results()
    return list(zip(results, processes.identities)), processes.stopped


def run(chosen, out_dir=store.CAPTURES) -> dict[str, str]:
    """Run each named measurement and write `run-<name>.json`; a failing run is reported and the
    others go on. Returns {name: "ok" | error line}."""
    from .capture import environment, require_cuda
    require_cuda("sweep")
    status = {}
    for name in chosen:
        if name not in names.RUNS:
            raise ValueError(f"unknown run {name!r}: choose from {', '.join(names.RUNS)}")
    for name in chosen:
        print(f"== {name}", flush=True)
        print(f"-- run-{name}: started", flush=True)
        start = time.perf_counter()
        try:
            made, stopped = _taken(name)
        except Exception as e:
            traceback.print_exc()
            status[name] = f"{type(e).__name__}: {first_line(e)}"
            torch.cuda.empty_cache()
            continue
        if stopped:  # a repeat that hung: the record as it was stays, whole
            status[name] = f"{', '.join(stopped)} made no progress and was stopped; the old record is kept"
            print(f"-- run-{name}: {status[name]}", flush=True)
            continue
        kept = [(r, p) for r, p in made if not _failed(r)]
        if not kept:
            status[name] = made[0][0]["error"]
            continue
        (result, first), more = kept[0], kept[1:]
        record = {"record": f"run-{name}", "run": name, "key": records.RUN.key(f"run-{name}"),
                  "code": records.RUN.code(f"run-{name}"), "settings": records.RUN.settings(f"run-{name}"),
                  "wall_s": time.perf_counter() - start, **environment(), "host_cpu": host_cpu(),
                  "result": derived.measured(result)}
        if names.RUN_CODE[name].repeats > 1:  # the further independent repeats; one that failed says why
            record["repeats"] = [derived.measured(r) for r, _ in more]
            record["repeat_errors"] = [r["error"] for r, _ in made if _failed(r)]
            record["processes"] = [first] + [p for _, p in more]
        store.write_json(out_dir, f"run-{name}", record)
        status[name] = "ok"
        print(f"   {name}: {record['wall_s']:.0f} s", flush=True)
        print(f"-- run-{name}: written, {record['wall_s']:.0f} s", flush=True)
    return status
