"""Timing and memory of a forward, on a GPU with CUDA events or on a CPU with a wall clock.

Every number here is a median over repeated runs after warm-up. `time_forward` times each call on
its own (launch gaps included); `time_back_to_back` times a run of calls and divides, which is the
throughput a stream of forwards gets. An out-of-memory forward is reported, never raised.
"""
from __future__ import annotations

import statistics
import time

import torch


def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _elapsed_us(run) -> float:
    """Microseconds of run(): between CUDA events on the stream, or on the wall clock without a GPU."""
    if torch.cuda.is_available():
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1000.0
    t0 = time.perf_counter()
    run()
    return (time.perf_counter() - t0) * 1e6


def time_forward(forward, reps=50, warmup=5) -> list[float]:
    """Microseconds of each of `reps` calls, after `warmup` calls."""
    for _ in range(warmup):
        forward()
    sync()
    return [_elapsed_us(forward) for _ in range(reps)]


def back_to_back_samples(forward, calls=20, reps=5) -> list[float]:
    """Microseconds per call of each of `reps` runs of `calls` forwards queued back to back."""
    forward()
    sync()

    def run():
        for _ in range(calls):
            forward()
    return [_elapsed_us(run) / calls for _ in range(reps)]


def time_back_to_back(forward, calls=20, reps=5) -> float:
    """Median microseconds per call when `calls` forwards are queued back to back."""
    return statistics.median(back_to_back_samples(forward, calls, reps))


def adaptive_reps(forward, budget_us=300_000.0, lo=5, hi=50) -> int:
    """As many timed calls as fit a time budget, from one timed call."""
    (t,) = time_forward(forward, reps=1, warmup=1)
    return int(max(lo, min(hi, budget_us / max(t, 1.0))))


def peak_extra_bytes(forward) -> int | None:
    """Peak memory a forward allocates beyond what was live before it (output included); GPU only."""
    if not torch.cuda.is_available():
        return None
    sync()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    out = forward()
    sync()
    del out
    return torch.cuda.max_memory_allocated() - before


def measure(forward, budget_us=300_000.0, calls=5) -> dict:
    """Median time per call, back-to-back time (median over 3 runs of `calls` queued forwards) and
    peak memory of one forward, with the raw samples both medians come from; OOM as a result."""
    try:
        with torch.no_grad():
            reps = adaptive_reps(forward, budget_us)
            times = time_forward(forward, reps=reps, warmup=2)
            queued = back_to_back_samples(forward, calls=calls, reps=3)
            return {"median_us": statistics.median(times), "back_to_back_us": statistics.median(queued),
                    "back_to_back_calls": calls,
                    "reps": reps, "peak_extra_bytes": peak_extra_bytes(forward),
                    "samples": {"one_call_us": times, "back_to_back_us": queued}}
    except torch.OutOfMemoryError:
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        return {"oom": True}
