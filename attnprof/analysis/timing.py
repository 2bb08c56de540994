"""The timing vocabulary, and the verdict it supports: pure functions of raw samples (no torch).

A timing run (`python -m attnprof sweep --only timing`) keeps, for each stage and shape, the raw
per-repeat samples of every method; everything a page says is derived from them here, so a check
can derive it again:

    one call       CUDA events around one call on an idle GPU, then a synchronize: launch + kernels
    back to back   CUDA events around N calls enqueued without a synchronize, per call: a stream's pace
    GPU only       CUDA events around one replay of a CUDA graph of the same N calls, per call: no CPU work
    CPU enqueue    host wall time to enqueue those N calls (the back-to-back loop itself), per call
    profiled       torch.profiler, as the captures run it: device time (sum of the forward's ops),
                   CPU time (the annotated range) and span (first launch to last op end)

A stream of calls is launch-bound when its back-to-back time per call runs at the CPU's enqueue pace
rather than at the GPU-only pace; GPU-bound in the opposite case; on the boundary when the two paces
agree, so either can set it. Two times agree when their medians differ by no more than the larger of
REL_TOLERANCE of the larger median and half the sum of their p10–p90 spreads. One call's latency is a
separate question: it is the GPU-only time plus the launch overhead that no stream hides.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

from .stats import quantile

REL_TOLERANCE = 0.05  # the floor of the tolerance: 5 % of the larger median

METHODS = {  # key in a timing row -> (name on the page, how it is measured)
    "one_call_us": ("one call", "CUDA events around one call on an idle GPU, synchronised; per call"),
    "back_to_back_us": ("back to back", "CUDA events around N calls enqueued without a synchronize; per call"),
    "graph_us": ("GPU only", "CUDA events around one replay of a CUDA graph of the same N calls; per call"),
    "enqueue_us": ("CPU enqueue", "host wall time to enqueue the N back-to-back calls; per call"),
}
VERDICTS = ("launch-bound", "GPU-bound", "on the boundary", "neither")


@dataclass(frozen=True)
class Stats:
    median: float
    p10: float
    p90: float
    n: int

    @property
    def spread(self) -> float:
        return self.p90 - self.p10


def stats(samples) -> Stats:
    """Median, p10 and p90 of raw samples; one clear line when there are none."""
    xs = [float(x) for x in samples]
    if not xs:
        raise ValueError("no samples to take statistics of: the timing run recorded none for this method")
    return Stats(statistics.median(xs), quantile(xs, 0.1), quantile(xs, 0.9), len(xs))


def tolerance(a: Stats, b: Stats) -> float:
    return max(REL_TOLERANCE * max(a.median, b.median), (a.spread + b.spread) / 2)


def agree(a: Stats, b: Stats) -> bool:
    """Whether two times are the same within the tolerance their spreads (and the 5 % floor) give."""
    return abs(a.median - b.median) <= tolerance(a, b)


@dataclass(frozen=True)
class Verdict:
    stream: str  # one of VERDICTS
    one_call: Stats
    back_to_back: Stats
    gpu_only: Stats
    enqueue: Stats
    profiled_cpu: Stats | None
    profiled_device: Stats | None

    @property
    def launch_overhead_us(self) -> float:
        """What one call costs beyond its GPU work: launch latency and the CPU work before the kernels."""
        return self.one_call.median - self.gpu_only.median

    @property
    def gpu_idle_per_call_us(self) -> float:
        """How long the GPU waits per call in a stream (back to back minus GPU only)."""
        return self.back_to_back.median - self.gpu_only.median

    @property
    def profiler_inflation(self) -> float | None:
        """Profiled CPU time per forward over unprofiled CPU enqueue time per call."""
        return self.profiled_cpu.median / self.enqueue.median if self.profiled_cpu else None


def stream_verdict(back_to_back: Stats, gpu_only: Stats, enqueue: Stats) -> str:
    """Which pace a stream of calls runs at: the CPU's (launch-bound), the GPU's (GPU-bound), both
    (on the boundary), or neither (something else sets it, e.g. a synchronize inside the call)."""
    at_gpu, at_cpu = agree(back_to_back, gpu_only), agree(back_to_back, enqueue)
    if at_gpu and at_cpu:
        return "on the boundary"
    if at_cpu:
        return "launch-bound"
    if at_gpu:
        return "GPU-bound"
    return "neither"


def verdict(row: dict) -> Verdict:
    """The verdict of one row of a timing run, with the statistics it rests on."""
    missing = [k for k in METHODS if not row.get(k)]
    if missing:
        raise ValueError(f"timing row {row.get('stage')} {row.get('shape')} has no samples for "
                         f"{', '.join(missing)}: retake it with `python -m attnprof sweep --only timing`")
    s = {k: stats(row[k]) for k in METHODS}
    prof = row.get("profiled") or {}
    return Verdict(stream_verdict(s["back_to_back_us"], s["graph_us"], s["enqueue_us"]),
                   s["one_call_us"], s["back_to_back_us"], s["graph_us"], s["enqueue_us"],
                   stats(prof["cpu_us"]) if prof.get("cpu_us") else None,
                   stats(prof["device_us"]) if prof.get("device_us") else None)


def record_verdict(summary: dict) -> Verdict | None:
    """The stream verdict of a capture that kept its timing samples (`timing`, beside its one-call
    `event_times_us`); None for one that did not, or whose forward could not be replayed as a graph."""
    if "timing" not in summary or "graph_us" not in summary["timing"]:
        return None
    return verdict({**summary["timing"], "one_call_us": summary["event_times_us"], "stage": summary["record"],
                    "shape": summary["shape"]})


def find(rows: list[dict], stage: str, shape) -> dict:
    """The row of `stage` at `shape` ((B, H, S, D) or "8x16x1024x64")."""
    if isinstance(shape, str):
        shape = [int(x) for x in shape.split("x")]
    for row in rows:
        if row["stage"] == stage and list(row["shape"]) == list(shape):
            return row
    raise ValueError(f"the timing run has no row for {stage} at {'x'.join(map(str, shape))}: "
                     f"rows are {', '.join(r['stage'] + ' ' + 'x'.join(map(str, r['shape'])) for r in rows)}")
