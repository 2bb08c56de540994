"""The fastest forward at steady state, repeated in separate processes.

The stage table's `steady` stage at the long shape, in each of REPEATS fresh processes (repeat.py): warmed up
back to back for WARMUP_S seconds so the clocks settle, then RUNS runs of CALLS forwards queued back to back,
and a bf16 matmul's back-to-back rate beside it, the peak it is set against. Only raw samples are kept.
"""
from __future__ import annotations

import time

import torch

from . import bench, repeat
from .sweep import inputs
from ..model.procedure import STEADY_REPEATS
from ..model.stages import LONG_SHAPE, STAGES, select

REPEATS, CALLS, RUNS, WARMUP_S = STEADY_REPEATS, 200, 5, 2.0
MATMUL_N = 8192


def once(path: str):
    """One process's samples (a generator: it yields once prepared): the forward back to back after the warm-up, and the matmul."""
    stage = STAGES[path]
    q, k, v = inputs(LONG_SHAPE, torch.bfloat16, stage.layout)
    with stage.context(), torch.no_grad():
        forward = stage.prepare(q, k, v)
        forward()  # compile outside the timing
        yield  # prepared: the processes wait here, then measure one at a time (measure/repeat.py)
        start = time.perf_counter()
        while time.perf_counter() - start < WARMUP_S:  # back to back until the clocks settle
            bench.back_to_back_each(forward, calls=CALLS, reps=1)
        each = bench.back_to_back_each(forward, calls=CALLS, reps=RUNS)
    a, b = (torch.randn(MATMUL_N, MATMUL_N, device=q.device, dtype=torch.bfloat16) for _ in range(2))
    matmul = bench.back_to_back_each(lambda: a @ b, calls=10, reps=RUNS)
    return {"back_to_back_us_each": each, "back_to_back_calls": CALLS, "matmul_shape": [MATMUL_N] * 3,
            "matmul_us_each": matmul}


def steady() -> dict:
    """REPEATS separate processes, each running `once`; a process that fails is kept with its reason, and
    each one's identity beside it (None for one that failed)."""
    (path,) = select(steady=True)
    with repeat.Started("steady.once", REPEATS, path) as started:
        repeats = started.results()
    return {"path": path, "layout": STAGES[path].layout, "shape": list(LONG_SHAPE), "warmup_s": WARMUP_S,
            "repeats": repeats, "processes": started.identities}
