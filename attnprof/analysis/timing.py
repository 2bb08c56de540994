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
agree, so either can set it. A verdict is the run's where every independent repeat gives it; how far it
reaches beyond this host is its `room`, how many times slower (or faster) another CPU could enqueue and
give the same verdict, a number the pages state rather than a threshold they cross. A sentence that
asserts a verdict needs it `settled`: room of HOST_MARGIN or more in every repeat. Two times agree when their
medians differ by no more than the larger of a floor share of the larger median and half the sum of their
p10–p90 spreads. The floor is REL_TOLERANCE against the GPU-only time and CPU_FLOOR against the CPU
enqueue, whose pace moves more from one round to the next. One call's latency is a separate question: it is the GPU-only time plus the launch overhead that
no stream hides.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

from ..text import us
from . import decide
from .stats import quantile

REL_TOLERANCE = 0.05  # the floor of the tolerance: 5 % of the larger median
# A stream's verdict names the side that sets its pace; it is decided only when that side is slower than
# the other by HOST_MARGIN: then a host whose CPU enqueues twice as fast, or half as fast, gives the same verdict.
# Closer than that, the verdict is this host's (the CPU's enqueue time moves from host to host and run to run).
HOST_MARGIN = 2.0

@dataclass(frozen=True)
class Method:
    """One way to time a forward: its name on the pages, how it is measured ({calls}: the calls of one
    back-to-back run) and why it differs from the others."""
    name: str
    how: str
    why: str


# every timing method the site names, in the order the methods table lists them; the four unprofiled
# ones (UNPROFILED) are the raw samples a verdict rests on
METHODS = {
    "graph_us": Method("GPU only (CUDA-graph replay)", "events around one replay of a graph of the same calls, per call",
                       "the GPU's work alone: no CPU, no launch between calls"),
    "profiled_device": Method("profiled device time (torch.profiler)", "sum of the forward's op durations in the trace",
                              "the same kernels, timed by the profiler; gaps between them are not counted"),
    "back_to_back_us": Method("back to back (CUDA events)", "events around {calls} enqueued calls, per call",
                              "a stream's pace: GPU only plus any time the GPU waits for the next launch"),
    "profiled_span": Method("profiled span (torch.profiler)", "first launch to last op end of one profiled forward",
                            "starts at the first launch call, so the CPU's work before it is left out; that launch "
                            "runs under the profiler"),
    "one_call_us": Method("one call (CUDA events)", "events around one call on an idle GPU, then a synchronize",
                          "GPU only plus the launch: the CPU's work before the first kernel and the launch latency"),
    "one_call_wall_us": Method("one call (host clock)", "wall time of the call and the synchronize after it",
                               "the same interval seen from Python: from the call to the synchronize's return"),
    "enqueue_us": Method("CPU enqueue (host clock)", "wall time to enqueue the {calls} back-to-back calls, per call",
                         "the CPU's pace: dispatch and launch calls, no waiting on the GPU"),
    "profiled_cpu": Method("profiled CPU time (torch.profiler)", "the annotated range on the CPU thread",
                           "the same CPU work with the profiler recording it"),
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
    profiled_device: Stats | None

    @property
    def launch_overhead_us(self) -> float:
        """What one call costs beyond its GPU work: launch latency and the CPU work before the kernels."""
        return self.one_call.median - self.gpu_only.median

    @property
    def decided(self) -> bool:
        """Whether the verdict holds on any host whose CPU enqueues within HOST_MARGIN of this one's: the
        pace-setting side slower than the other by HOST_MARGIN or more."""
        gpu, cpu = self.gpu_only.median, self.enqueue.median
        return (self.stream == "GPU-bound" and gpu >= HOST_MARGIN * cpu
                or self.stream == "launch-bound" and cpu >= HOST_MARGIN * gpu)

    @property
    def profiler_inflation(self) -> float | None:
        """Profiled CPU time per forward over unprofiled CPU enqueue time per call."""
        return self.profiled_cpu.median / self.enqueue.median if self.profiled_cpu else None


def consensus(verdicts: list[Verdict]) -> str | None:
    """The stream verdict every independent repeat gives, or None where they disagree (the pages then state
    the verdict of their samples pooled, beside the repeats' own)."""
    kinds = {v.stream for v in verdicts}
    return kinds.pop() if len(kinds) == 1 else None


def room(verdicts: list[Verdict]) -> float | None:
    """How many times slower (GPU-bound) or faster (launch-bound) a CPU could enqueue and leave the verdict
    every repeat gives as it is: the pace-setting side's time over the other's, in the repeat where the two
    came closest. None where the repeats disagree, or where no one side sets the pace."""
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
                   stats(prof["cpu_us"]) if prof.get("cpu_us") else None,
                   stats(prof["device_us"]) if prof.get("device_us") else None)


def record_verdict(summary: dict) -> Verdict | None:
    """The stream verdict of a capture that kept its timing samples (`timing`, beside its one-call
    `event_times_us`); None for one that did not, or whose forward could not be replayed as a graph."""
    if "timing" not in summary or "graph_us" not in summary["timing"]:
        return None
    return verdict({**summary["timing"], "one_call_us": summary["event_times_us"], "stage": summary["record"],
                    "shape": summary["shape"]})


GRAPH, ESTIMATE = "CUDA-graph replay", "profiler device time"  # how a capture's GPU-only time was had


@dataclass(frozen=True)
class Stream:
    """What a capture's own samples say about a stream of its calls: the verdict, and the GPU-only time it
    rests on (a CUDA-graph replay; where the forward could not be recorded into a graph, the profiler's
    device time per forward, an estimate: the sum of its ops' durations, without the gaps a replay keeps);
    or, where they cannot say, why not."""
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
    """The regime a row's times were had in, over its processes (one row each): GPU-bound where in every process
    the GPU took longer to run a call (GPU only) than the CPU took to enqueue it; launch-bound where in some process
    it did not; None without both samples (which of a method's margins apply: analysis/decide.py)."""
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
