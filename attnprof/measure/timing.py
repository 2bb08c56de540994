"""One forward under every timing method, in one run: unprofiled (one call, back to back, GPU only,
CPU enqueue) and profiled (device time, CPU time, span), with the raw samples of each.

The forwards are the stage table's own. A shape's stages are measured interleaved, in rounds, so that drift
falls on every stage alike, then each is profiled; a capture's own `stream` samples are taken alone. The
verdicts are analysis/timing.py's (no torch). Without a CUDA GPU it runs on the CPU (wall clock, no graph).
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path

import torch

from . import bench
from ..analysis import trace
from ..model.stages import STAGES, load_snippet, timing_points
from ..model.procedure import LABEL
from ..text import first_line
from .numerics import default_device, make_inputs
from .profiling import profile_quietly

CALLS, REPS, ONE_CALL_REPS = 20, 30, 50


def queued(forward, calls: int, reps: int) -> tuple[list[float], list[float], list[float]]:
    """`reps` runs of `calls` forwards enqueued on an idle GPU without a synchronize, per call: CUDA-event time
    (back to back), the enqueue loop's wall time (CPU enqueue), and its second half's (slower were the GPU's
    queue to fill and late launches to wait for it)."""
    per_call, enqueue, late = [], [], []
    half = calls // 2
    for _ in range(reps):
        bench.sync()
        if torch.cuda.is_available():
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        t0 = time.perf_counter()
        for i in range(calls):
            if i == half:
                t_half = time.perf_counter()
            forward()
        t1 = time.perf_counter()
        if torch.cuda.is_available():
            end.record()
            end.synchronize()
            per_call.append(start.elapsed_time(end) * 1000.0 / calls)
        else:
            per_call.append((time.perf_counter() - t0) * 1e6 / calls)
        enqueue.append((t1 - t0) * 1e6 / calls)
        late.append((t1 - t_half) * 1e6 / (calls - half))
    return per_call, enqueue, late


def wall_one_call(forward, reps: int) -> list[float]:
    """Host wall time of one call and the synchronize after it: what a Python caller waits for."""
    out = []
    for _ in range(reps):
        bench.sync()
        t0 = time.perf_counter()
        forward()
        bench.sync()
        out.append((time.perf_counter() - t0) * 1e6)
    return out


def graph_only(forward, calls: int, reps: int) -> list[float]:
    """Per call, one replay of a CUDA graph of `calls` forwards: the GPU's work, no CPU work between calls."""
    replay = load_snippet("graphed").graphed(lambda: [forward() for _ in range(calls)])  # as the graph stages do
    replay()
    return [t / calls for t in bench.time_forward(replay, reps=reps, warmup=1)]


def profiled(forward) -> dict:
    """Per forward profiled as a capture profiles it: device time, CPU time and span."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        profile_quietly(forward, path)
        fwds = trace.forwards(trace.load(path), LABEL)
    return {"device_us": [f.device_us for f in fwds], "cpu_us": [f.cpu_us for f in fwds],
            "span_us": [trace.gaps(f.ops).span_us for f in fwds], "ops": [len(f.ops) for f in fwds]}


def stream(forward, calls=CALLS, reps=REPS) -> dict:
    """The samples a stream verdict rests on (attnprof/analysis/timing.py): back to back, CPU enqueue (and its
    second half), and GPU only where the forward can be recorded into a CUDA graph."""
    row = dict(zip(("back_to_back_us", "enqueue_us", "enqueue_late_us"), queued(forward, calls, reps)))
    if torch.cuda.is_available():
        try:
            row["graph_us"] = graph_only(forward, calls, reps)
        except RuntimeError as e:  # a forward that cannot be recorded into a graph
            row["graph_error"] = f"{type(e).__name__}: {first_line(e)}"[:300]
    return row


ROUNDS, ONE_CALL_PER_ROUND = 25, 2  # the timing run: per round and stage, 2 one-call samples, 1 queued run, 1 replay


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {first_line(e)}"[:300]


def _prepared(name: str, shape, calls: int):
    """(row, forward, replay): one stage at one shape prepared and called 5 times, and GPU only's graph of
    `calls` forwards recorded where it can be; forward None where it could not be prepared (the row says why)."""
    stage = STAGES[name]
    row = {"stage": name, "shape": list(shape), "dtype": "bf16", "calls": calls}
    try:
        q, k, v = make_inputs(shape, torch.bfloat16, default_device())
        with stage.context(), torch.no_grad():
            forward = stage.prepare(q, k, v)
            for _ in range(5):
                forward()
            bench.sync()
            replay = None
            if torch.cuda.is_available():
                try:  # recorded as the graph stages record (snippets/graphed.py)
                    replay = load_snippet("graphed").graphed(lambda: [forward() for _ in range(calls)])
                    replay()
                    bench.sync()
                except Exception as e:  # a forward that cannot be recorded into a graph
                    row["graph_error"], replay = _error(e), None
        return row, forward, replay
    except (RuntimeError, torch.OutOfMemoryError) as e:  # ProviderUnavailable included
        row["error"] = _error(e)
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        return row, None, None


def _arm(stage, forward, replay, calls: int, one_call: int):
    """One round's samples of one stage, under its context: `one_call` one-call samples, one queued run and,
    where it has a graph, one replay."""
    def measure() -> dict:
        with stage.context(), torch.no_grad():
            out = {"one_call_us": bench.time_forward(forward, reps=one_call, warmup=1),
                   "one_call_wall_us": wall_one_call(forward, one_call)}
            out.update(zip(("back_to_back_us", "enqueue_us", "enqueue_late_us"), queued(forward, calls, 1)))
            if replay is not None:
                out["graph_us"] = [t / calls for t in bench.time_forward(replay, reps=1, warmup=0)]
        return out
    return measure


def timing(points=None, calls=CALLS, rounds=ROUNDS, one_call_per_round=ONE_CALL_PER_ROUND, seed=None):
    """Every (stage, shape) of `points` under every timing method, a shape's stages interleaved in `rounds`
    rounds (bench.interleaved), then each profiled. A generator (repeat.py): it yields once all are prepared."""
    points = points or timing_points()
    ready = {}
    for name, shape in points:
        print(f"   timing: preparing {name} {'x'.join(map(str, shape))}", flush=True)
        ready.setdefault(tuple(shape), []).append(_prepared(name, shape, calls))
    yield
    done = {}
    for shape, group in ready.items():
        print(f"   timing {'x'.join(map(str, shape))}: {len(group)} stages, {rounds} rounds", flush=True)
        arms = {row["stage"]: _arm(STAGES[row["stage"]], forward, replay, calls, one_call_per_round)
                for row, forward, replay in group if forward is not None}
        measured = bench.interleaved(arms, rounds, seed=seed)
        for row, forward, replay in group:
            if forward is not None:
                row.update(measured[row["stage"]])  # its samples, rounds, throttled, clocks and seed; or its error
            if "error" not in row:
                try:
                    with STAGES[row["stage"]].context(), torch.no_grad():
                        row["profiled"] = profiled(forward)
                except (RuntimeError, torch.OutOfMemoryError) as e:
                    row["error"] = _error(e)
            if "error" in row:  # an error row keeps no samples
                row = {k: row[k] for k in ("stage", "shape", "dtype", "calls", "error")}
            done[(row["stage"], shape)] = row
        group.clear()
        arms = measured = forward = replay = None
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    return {"calls": calls, "reps": rounds, "one_call_reps": rounds * one_call_per_round,
            "rows": [done[(name, tuple(shape))] for name, shape in points]}
