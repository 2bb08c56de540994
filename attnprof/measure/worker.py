"""A worker of `python -m attnprof regenerate` (attnprof/regenerate.py): retakes one record at a time on
the GPUs it is given (CUDA_VISIBLE_DEVICES), through the same code as `capture`, `counters` and `sweep`.

    python -m attnprof.measure.worker OUT_DIR FD

It reads a JSON line per take on stdin ({"records": [NAME, ...]}: one, or several of a kind taken together)
and answers each on file descriptor FD ({"records": [...], "outcome": ...}); its output goes to its log. The
outcome is "retaken", "unavailable here: why" (a record of why, under the current key), "kept the old record:
why" or "failed: why". Each kind's `Take.retake` (analysis/records.py) names its function here.

A GPU's workers each measure holding it alone (gpulock.py): a run in its processes' measuring parts, a stage's
capture from its first call (compile included) to its last sample, every other take whole (Nsight Compute
locks the clocks while it profiles). "-- " lines say each take's start and end (the regeneration relays
them); on SIGUSR1 faulthandler writes every thread's stack into the log (before a hung worker is stopped).
"""
from __future__ import annotations

import faulthandler
import gc
import json
import os
import signal
import sys
import time

faulthandler.register(signal.SIGUSR1, all_threads=True)  # first, so a hang while importing torch shows too

import torch  # noqa: E402

from ..model import names, own
from ..analysis import records
from ..model.procedure import DEFAULT_DTYPE
from ..model.stages import DEFAULT_SHAPE, ROOT
from ..text import first_line
from . import gpulock


def outcome(result: dict) -> str:
    """A capture function's result in a few words."""
    if "error" in result:
        return f"failed: {result['error']}"
    if "kept" in result:
        return f"kept the old record: {result['kept']}"
    if "unavailable" in result:
        return f"unavailable here: {result['unavailable']}"
    return "retaken"


def take_stage(record, out_dir) -> str:
    from .capture import capture
    stage, shape, dtype_name = names.parse_record(record)
    return outcome(capture([stage], shape, dtype_name, out_dir)[0])


def take_backward(record, out_dir) -> str:
    from .backward import capture
    stage, shape, dtype_name = names.parse_record(record.removesuffix("-bwd"))
    return outcome(capture([stage], shape, dtype_name, out_dir)[0])


def take_counters(record_names, out_dir) -> str:
    """Every record in `record_names` under one Nsight Compute child."""
    from .counters import collect
    results = collect([r.removesuffix(".counters") for r in record_names], out_dir)
    outcomes = {f"{r['record'].removesuffix('.counters')}.counters": outcome(r) for r in results}
    bad = {r: o for r, o in outcomes.items() if o != "retaken"}
    if not bad:
        return "retaken"
    return f"retaken {len(outcomes) - len(bad)} of {len(outcomes)}; " + "; ".join(f"{r} {o}" for r, o in bad.items())


def take_run(record, out_dir) -> str:
    from .runs import run
    status = run([record.removeprefix("run-")], out_dir)[record.removeprefix("run-")]
    return "retaken" if status == "ok" else f"failed: {status}"


def take_own(record, out_dir) -> str:
    from .own import capture_own
    path, function = own.target(record)
    target = f"{os.path.relpath(ROOT / path)}:{function}"  # as the reader would name it, from here
    capture_own(target, DEFAULT_SHAPE, DEFAULT_DTYPE, out_dir=out_dir)
    return "retaken"


def take_cp(record, out_dir) -> str:
    from .context_parallel import capture
    results = capture([names.cp_config(record)], names.CP_WORLD, out_dir)
    return outcome(results[0]) if results else "failed: the context-parallel run wrote nothing (see the log)"


def take(record_names: list[str], out_dir) -> str:
    kind = records.kind_of(record_names[0])
    # each record starts afresh: after an earlier record's compile, torch.compile would compile sizes as dynamic
    torch._dynamo.reset()
    what = record_names[0] if len(record_names) == 1 else f"{len(record_names)} {kind.name} records"
    try:
        retake = globals()[kind.take.retake]
        if kind.name in ("run", "stage"):  # each of a run's processes, and a capture, hold the GPU as they measure
            return retake(record_names[0], out_dir)
        # Nsight Compute times nothing on the CPU: its child may use every core
        with gpulock.measuring(what, cpu_timed=kind.name != "counters"):
            return retake(record_names if kind.take.together else record_names[0], out_dir)
    except Exception as e:  # one record that breaks is its outcome; the worker goes on with the next
        return f"failed: {type(e).__name__}: {first_line(e)}"[:400]
    finally:
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def main(out_dir: str, fd: str):
    answers = os.fdopen(int(fd), "w")
    gpulock.pin(gpulock.PREPARE_CPUS_ENV)
    for line in sys.stdin:
        record_names = json.loads(line)["records"]
        what = ", ".join(record_names)
        print(f"== {what}", flush=True)
        print(f"-- {what}: started", flush=True)
        start = time.monotonic()
        result = take(record_names, out_dir)
        print(f"-- {what}: {result.split(':')[0]}, {time.monotonic() - start:.0f} s", flush=True)
        answers.write(json.dumps({"records": record_names, "outcome": result}) + "\n")
        answers.flush()


if __name__ == "__main__":
    main(*sys.argv[1:3])
