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

A stream of calls is launch-bound when its back-to-back time per call runs at the CPU's enqueue pace, GPU-bound
when at the GPU-only pace, on the boundary when the two agree. A verdict is the run's where every independent
repeat gives it; its `room` is how many times slower (or faster) another CPU could enqueue and give the same
verdict, a number the pages state; a sentence asserting a verdict needs it `settled` (room of HOST_MARGIN or
more). Two times agree when their medians differ by at most the larger of a floor share of the larger median
(REL_TOLERANCE; CPU_FLOOR against the enqueue, whose pace moves more) and half their p10–p90 spreads' sum.
One call's latency is another question: the GPU-only time plus the launch overhead no stream hides.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

from ..text import us
from . import decide
from .stats import quantile

REL_TOLERANCE = 0.05  # the floor of the tolerance: 5 % of the larger median
# A verdict is decided only where the pace-setting side is slower by HOST_MARGIN: a host enqueueing twice or half
# as fast gives the same one. Closer, the verdict is this host's (enqueue times move from host to host).
HOST_MARGIN = 2.0

@dataclass(frozen=True)
class Method:
    """A way to time a forward: its name, how ({calls}: one back-to-back run's calls), why it differs."""
    name: str
    how: str
    why: str


# every timing method the site names, in the methods table's order; a verdict rests on the UNPROFILED ones
METHODS = {
    "graph_us": Method("GPU only (CUDA-graph replay)", "events around one replay of a graph of the same calls, per call",
                       "the GPU's work alone, no launches"),
    "profiled_device": Method("profiled device time (torch.profiler)", "sum of the forward's op durations in the trace",
                              "the same kernels, gaps not counted"),
    "back_to_back_us": Method("back to back (CUDA events)", "events around {calls} enqueued calls, per call",
                              "GPU only, plus waits for the next launch"),
    "profiled_span": Method("profiled span (torch.profiler)", "first launch to last op end of one profiled forward",
                            "from the first launch, under the profiler"),
    "one_call_us": Method("one call (CUDA events)", "events around one call on an idle GPU, then a synchronize",
                          "GPU only, plus the CPU's work and the launch before the first kernel"),
    "one_call_wall_us": Method("one call (host clock)", "wall time of the call and the synchronize after it",
                               "seen from Python, from the call on: it can come out shorter than the events' time"),
    "enqueue_us": Method("CPU enqueue (host clock)", "wall time to enqueue the {calls} back-to-back calls, per call",
                         "the CPU's pace, no waiting on the GPU"),
    "profiled_cpu": Method("profiled CPU time (torch.profiler)", "the annotated range on the CPU thread",
                           "the same CPU work, the profiler recording it"),
}
UNPROFILED = ("one_call_us", "back_to_back_us", "graph_us", "enqueue_us")
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


def tolerance(a: Stats, b: Stats, floor: float = REL_TOLERANCE) -> float:
    return max(floor * max(a.median, b.median), (a.spread + b.spread) / 2)


def agree(a: Stats, b: Stats, floor: float = REL_TOLERANCE) -> bool:
    """Whether two times are the same within the tolerance their spreads (and the floor, 5 % unless given) give."""
    return abs(a.median - b.median) <= tolerance(a, b, floor)


# How far a stream may run from the CPU's pace: the enqueue's own pace moves from one round to the next, its p90 17 %
# above its median in the middle row and process of the committed timing runs measured in rounds (561 of them)
CPU_FLOOR = 0.17


@dataclass(frozen=True)
class Verdict:
    stream: str  # one of VERDICTS
    one_call: Stats
    back_to_back: Stats
    gpu_only: Stats
    enqueue: Stats
    profiled_cpu: Stats | None

    @property
    def launch_overhead_us(self) -> float:
        """What one call costs beyond its GPU work: launch latency and the CPU work before the kernels."""
        return self.one_call.median - self.gpu_only.median

    @property
    def decided(self) -> bool:
        """Whether the pace-setting side is slower by HOST_MARGIN: the verdict holds on hosts that close."""
        gpu, cpu = self.gpu_only.median, self.enqueue.median
        return (self.stream == "GPU-bound" and gpu >= HOST_MARGIN * cpu
                or self.stream == "launch-bound" and cpu >= HOST_MARGIN * gpu)

    @property
    def profiler_inflation(self) -> float | None:
        """Profiled CPU time per forward over unprofiled CPU enqueue time per call."""
        return self.profiled_cpu.median / self.enqueue.median if self.profiled_cpu else None


def consensus(verdicts: list[Verdict]) -> str | None:
    """The stream verdict every independent repeat gives, or None where they disagree."""
    kinds = {v.stream for v in verdicts}
    return kinds.pop() if len(kinds) == 1 else None


def room(verdicts: list[Verdict]) -> float | None:
    """How many times slower (GPU-bound) or faster (launch-bound) a CPU could enqueue and keep the verdict: the
    closest repeat's pace-setting time over the other; None where repeats disagree or no side sets the pace."""
    kind = consensus(verdicts) if verdicts else None
    if kind == "GPU-bound":
        return min(v.gpu_only.median / v.enqueue.median for v in verdicts)
    if kind == "launch-bound":
        return min(v.enqueue.median / v.gpu_only.median for v in verdicts)
    return None


def settled(verdicts: list[Verdict]) -> bool:
    """A stream verdict decided across repeats: every repeat gives it, each by HOST_MARGIN (Verdict.decided)."""
    return (room(verdicts) or 0) >= HOST_MARGIN


def stream_verdict(back_to_back: Stats, gpu_only: Stats, enqueue: Stats) -> str:
    """Which pace a stream of calls runs at: the CPU's (launch-bound), the GPU's (GPU-bound), both
    (on the boundary), or neither (something else sets it, e.g. a synchronize inside the call)."""
    at_gpu, at_cpu = agree(back_to_back, gpu_only), agree(back_to_back, enqueue, CPU_FLOOR)
    if at_gpu and at_cpu:
        return "on the boundary"
    if at_cpu:
        return "launch-bound"
    if at_gpu:
        return "GPU-bound"
    return "neither"


def verdict(row: dict) -> Verdict:
    """The verdict of one row of a timing run, with the statistics it rests on."""
    missing = [k for k in UNPROFILED if not row.get(k)]
    if missing:
        raise ValueError(f"timing row {row.get('stage')} {row.get('shape')} has no samples for "
                         f"{', '.join(missing)}: retake it with `python -m attnprof sweep --only timing`")
    s = {k: stats(row[k]) for k in UNPROFILED}
    prof = row.get("profiled") or {}
    return Verdict(stream_verdict(s["back_to_back_us"], s["graph_us"], s["enqueue_us"]),
                   s["one_call_us"], s["back_to_back_us"], s["graph_us"], s["enqueue_us"],
                   stats(prof["cpu_us"]) if prof.get("cpu_us") else None)


def record_verdict(summary: dict) -> Verdict | None:
    """The stream verdict of a capture's `timing` samples; None without them or a graph replay."""
    if "timing" not in summary or "graph_us" not in summary["timing"]:
        return None
    return verdict({**summary["timing"], "one_call_us": summary["event_times_us"], "stage": summary["record"],
                    "shape": summary["shape"]})


GRAPH, ESTIMATE = "CUDA-graph replay", "profiler device time"  # how a capture's GPU-only time was had


@dataclass(frozen=True)
class Stream:
    """A capture's stream verdict and the GPU-only time it rests on: a graph replay, else an estimate (the
    profiler's device time: its ops' durations, without the gaps a replay keeps); or why there is none."""
    verdict: str | None  # one of VERDICTS; None: not measured
    basis: str | None  # GRAPH or ESTIMATE
    back_to_back: Stats | None = None
    gpu_only: Stats | None = None
    enqueue: Stats | None = None
    reason: str = ""  # why GPU only is an estimate (the graph's error), or why there is no verdict

    @property
    def label(self) -> str:
        """For a table cell: the verdict, marked where GPU only is an estimate."""
        if self.verdict is None:
            return "not measured"
        return self.verdict if self.basis == GRAPH else f"{self.verdict} (estimate)"

    @property
    def note(self) -> str | None:
        """One line for what a cell cannot say: the estimate and why, or why there is no verdict."""
        if self.verdict is None:
            return f"not measured: {self.reason}"
        if self.basis == GRAPH:
            return None
        return (f"{self.verdict} by an estimate: back to back {us(self.back_to_back.median)} per call, CPU enqueue "
                f"{us(self.enqueue.median)}, and for GPU only the profiler's device time, {us(self.gpu_only.median)} "
                f"per forward, since the forward could not be recorded into a CUDA graph ({self.reason})")


def record_stream(summary: dict) -> Stream:
    """The stream verdict a capture's own unprofiled samples support (see Stream)."""
    row = summary.get("timing")
    if not row:
        return Stream(None, None, reason="the capture kept no unprofiled timing samples")
    if "graph_us" in row:
        v = record_verdict(summary)
        return Stream(v.stream, GRAPH, v.back_to_back, v.gpu_only, v.enqueue)
    device = [x for x in summary.get("forward_device_us_each") or [] if x > 0]
    if not (row.get("back_to_back_us") and row.get("enqueue_us") and device):
        return Stream(None, None, reason="the capture kept no back-to-back, CPU-enqueue or device-time samples")
    if "graph_error" not in row:
        return Stream(None, None, reason="no CUDA-graph replay was tried (no CUDA GPU where it was captured)")
    b2b, enqueue, gpu = stats(row["back_to_back_us"]), stats(row["enqueue_us"]), stats(device)
    return Stream(stream_verdict(b2b, gpu, enqueue), ESTIMATE, b2b, gpu, enqueue, row["graph_error"])


def regime(rows: list[dict]) -> str | None:
    """A row's regime over its processes (one row each; decide.py's margins): GPU-bound where GPU only exceeds the
    CPU enqueue in every process, else launch-bound; None without both samples."""
    if not rows or not all(r and r.get("graph_us") and r.get("enqueue_us") for r in rows):
        return None
    gpu_longer = all(statistics.median(r["graph_us"]) > statistics.median(r["enqueue_us"]) for r in rows)
    return decide.GPU_BOUND if gpu_longer else decide.LAUNCH_BOUND


def find(rows: list[dict], stage: str, shape) -> dict:
    """The row of `stage` at `shape` ((B, H, S, D) or "8x16x1024x64")."""
    if isinstance(shape, str):
        shape = [int(x) for x in shape.split("x")]
    for row in rows:
        if row["stage"] == stage and list(row["shape"]) == list(shape):
            return row
    raise ValueError(f"the timing run has no row for {stage} at {'x'.join(map(str, shape))}: "
                     f"rows are {', '.join(r['stage'] + ' ' + 'x'.join(map(str, r['shape'])) for r in rows)}")
