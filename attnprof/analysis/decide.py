"""The one rule that decides every comparison and threshold a page states (pure, no torch).

A quantity is a `Range`: over several independent repeats (separate processes), the median of all their
samples and the span of the repeats' medians, each kept; in one process, the median and p10–p90.

Two quantities of one run measured in the same processes (interleaved: drift falls on both) are told apart
when, in every process, one is beyond the other by its method's paired margin, on the same side (in rounds:
by the median of the rounds' own ratios). Two not measured together are told apart only when their ranges
do not overlap and their medians differ by the method's margin between processes, far wider for what the
host's CPU sets. Otherwise a page says "not told apart" and gives both ranges: words that hold whichever
way a regeneration falls. A value is "near" a threshold when its range reaches within its band, so a few
tenths of a point never flip it across.
"""
from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field
from typing import Callable

from ..model.names import RUN_CODE
from .stats import quantile

MARGIN = 0.03  # beyond non-overlapping ranges, medians 3 % apart: a host or a day can move a time this much
REPEATS, SAMPLES = "repeats", "samples"  # a Range's basis

# How a time was had: each method has margins of its own (MARGINS), since each moves by its own amount
DEVICE, ONE_CALL, BACK_TO_BACK, ENQUEUE, GRAPH, CPU, WALL = (
    "device time", "one call", "back to back", "CPU enqueue", "graph replay", "CPU time", "host wall time")
# The methods a run in rounds (measure/bench.py interleaved) takes a round at a time; the profiler's come after
IN_ROUNDS = (ONE_CALL, WALL, BACK_TO_BACK, ENQUEUE, GRAPH)
# The regime (analysis/timing.regime): launch-bound where, in some process, enqueueing a call took the CPU at least
# as long as the GPU took to run it; else GPU-bound. Each sets the pace its way, so each has margins of its own.
LAUNCH_BOUND, GPU_BOUND = "launch-bound", "GPU-bound"


@dataclass(frozen=True)
class Margin:
    paired: float  # two paths timed in turns in the same processes: how far apart two identical paths landed
    apart: float  # two figures from different processes: how far one path's median moved between two processes


# Each method's margins per regime, from `python tools/drift.py` over the timing run's regenerations but the one
# its record holds (a margin never judges the records it was measured on; tests/test_decide.py holds them equal).
# Paired: the largest ratio in one process between auto-dispatch and cuDNN, which run one kernel (aa.py IDENTICAL).
# Apart: the largest move of a path's median between two processes. The GPU's clock moves a few percent; what the
# host's CPU sets moves far more, most of all between processes: hence comparisons in pairs, within each process.
MARGINS = {ENQUEUE: {LAUNCH_BOUND: Margin(0.04, 1.08), GPU_BOUND: Margin(0.06, 0.93)},
           CPU: {LAUNCH_BOUND: Margin(1.22, 1.53), GPU_BOUND: Margin(1.88, 2.21)},
           BACK_TO_BACK: {LAUNCH_BOUND: Margin(0.04, 1.03), GPU_BOUND: Margin(0.02, 0.06)},
           DEVICE: {LAUNCH_BOUND: Margin(0.02, 0.04), GPU_BOUND: Margin(0.02, 0.11)},
           GRAPH: {LAUNCH_BOUND: Margin(0.04, 0.10), GPU_BOUND: Margin(0.02, 0.04)},
           WALL: {LAUNCH_BOUND: Margin(0.04, 1.22), GPU_BOUND: Margin(0.04, 0.26)},
           ONE_CALL: {LAUNCH_BOUND: Margin(0.08, 1.24), GPU_BOUND: Margin(0.04, 0.31)}}


def margins_of(method: str, regime: str | None = None) -> Margin:
    """A method's margins in a regime; where the regime is not known, the wider of its regimes' margins."""
    by = MARGINS[method]
    if regime in by:
        return by[regime]
    return Margin(max(m.paired for m in by.values()), max(m.apart for m in by.values()))


def in_rounds(run: str | None) -> bool:
    """Whether a run measures its paths in rounds (measure/bench.py interleaved): those that read the clock a round."""
    found = RUN_CODE.get((run or "").removeprefix("run-"))
    return bool(found) and found.rounds


@dataclass(frozen=True)
class Range:
    median: float
    lo: float
    hi: float
    n: int  # repeats, or samples of the one process
    basis: str  # REPEATS or SAMPLES
    method: str | None = None  # DEVICE, ONE_CALL, ...: which margins apply
    per: tuple[float, ...] = ()  # each process's median, in its run's process order (REPEATS only)
    run: str | None = None  # the run whose processes measured it: two ranges of one run are compared in pairs
    regime: str | None = None  # LAUNCH_BOUND or GPU_BOUND, where known: which of its method's margins apply
    rounds: tuple[tuple[float, ...], ...] = field(default=(), repr=False)  # each process's samples by round

    def text(self, fmt: Callable[[float], str]) -> str:
        """'12.3 µs [11.9–12.8 µs]' (brackets: a sentence often has parentheses around it), a unit once."""
        minus = lambda t: re.sub(r"(?<!\w)-(?=\d)", "−", t)  # a minus sign, not a hyphen, before a negative
        if self.lo == self.hi:
            return minus(fmt(self.median))
        lo, hi = minus(fmt(self.lo)), minus(fmt(self.hi))
        unit = re.search(r"\s\D+$", hi)  # " µs" (any space, a no-break one too)
        if unit and lo.endswith(unit.group()):  # one unit for the range: 33.9–42.1 µs
            lo = lo.removesuffix(unit.group())
        to = " to " if lo.startswith("−") else "–"  # "−1.1–28.5" would read as a subtraction
        return f"{minus(fmt(self.median))} [{lo}{to}{hi}]"

    @property
    def how(self) -> str:
        """What the range is, for the sentence or the details that give it."""
        return how(self.n if self.basis == REPEATS else 1)

    def scaled(self, f: Callable[[float], float]) -> "Range":
        """The same range through a monotonic function (a time to a rate flips lo and hi)."""
        a, b = f(self.lo), f(self.hi)
        return Range(f(self.median), min(a, b), max(a, b), self.n, self.basis, self.method,
                     tuple(f(x) for x in self.per), self.run, self.regime,
                     tuple(tuple(f(x) for x in r) for r in self.rounds))


def how(processes: int) -> str:
    """What a range of a quantity measured in this many separate processes is."""
    return (f"median over {processes} separate processes, and the range of their medians" if processes > 1
            else "median and p10–p90 of one process")


def of_samples(samples) -> Range:
    """One process's samples: their median and p10–p90."""
    xs = [float(x) for x in samples]
    if not xs:
        raise ValueError("no samples to make a range of")
    return Range(statistics.median(xs), quantile(xs, 0.1), quantile(xs, 0.9), len(xs), SAMPLES)


def of_repeats(values) -> Range:
    """Each independent repeat's median: their median and span (one repeat: use of_samples instead)."""
    xs = [float(x) for x in values]
    if len(xs) < 2:
        raise ValueError(f"a range across repeats needs at least 2 repeats, and {len(xs)} were given")
    return Range(statistics.median(xs), min(xs), max(xs), len(xs), REPEATS)


def of(repeats: list, method: str | None = None, run: str | None = None, regime: str | None = None) -> Range:
    """The range a comparison uses, from each repeat's samples: with two or more, their pooled median (what a
    table shows) and the span of the repeats' medians, kept (`per`, and each repeat's rounds where `run` took
    them) so that two ranges of one run compare process by process; else one repeat's median and p10–p90.
    `method` (DEVICE, ONE_CALL, ...) and `regime` say how they were had, where known."""
    repeats = [list(r) for r in repeats if r]
    if len(repeats) >= 2:
        per = tuple(statistics.median(r) for r in repeats)
        spread = of_repeats(per)
        rounds = (tuple(tuple(float(x) for x in r) for r in repeats) if method in IN_ROUNDS and in_rounds(run)
                  else ())
        return Range(statistics.median([x for r in repeats for x in r]), spread.lo, spread.hi, spread.n, REPEATS,
                     method, per, run, regime, rounds)
    if repeats:
        one = of_samples(repeats[0])
        return Range(one.median, one.lo, one.hi, one.n, SAMPLES, method, regime=regime)
    raise ValueError("no repeats with samples to make a range of")


def paired(a: Range, b: Range) -> bool:
    """Whether a and b were measured in the same processes of one run: compared process by process."""
    return a.run is not None and a.run == b.run and len(a.per) == len(b.per) >= 2


def margin(a: Range, b: Range) -> float:
    """The margin deciding a against b: their methods' paired or between-process one; else MARGIN."""
    kinds = [margins_of(r.method, r.regime) for r in (a, b) if r.method in MARGINS]
    if not kinds:
        return MARGIN
    return max(k.paired if paired(a, b) else k.apart for k in kinds)


def steps(a: Range, b: Range) -> list[float]:
    """Each process's step from b to a (one run): the log of their ratio, its rounds' median where both have
    rounds (a round's two samples were moments apart); for signed values, the difference over the larger."""
    if a.rounds and b.rounds and all(len(x) == len(y) for x, y in zip(a.rounds, b.rounds)):
        return [statistics.median(math.log(x / y) for x, y in zip(xs, ys)) for xs, ys in zip(a.rounds, b.rounds)]
    if min(a.per + b.per) > 0:
        return [math.log(x / y) for x, y in zip(a.per, b.per)]
    return [(x - y) / max(abs(x), abs(y)) if x != y else 0.0 for x, y in zip(a.per, b.per)]


def order(a: Range, b: Range, margin_: float | None = None) -> int:
    """-1 (a decidedly below b), 1 (above) or 0 (not told apart), by this module's rule; `margin_` overrides."""
    m = margin(a, b) if margin_ is None else margin_
    if paired(a, b):
        each, bar = steps(a, b), math.log1p(m) if min(a.per + b.per) > 0 else m
        if all(x < -bar for x in each):
            return -1
        if all(x > bar for x in each):
            return 1
        return 0
    if (abs(math.log(a.median / b.median)) < math.log1p(m) if min(a.median, b.median) > 0
            else abs(a.median - b.median) < m * max(abs(a.median), abs(b.median))):
        return 0
    if a.hi < b.lo:
        return -1
    if b.hi < a.lo:
        return 1
    return 0


def held_by_margin(a: Range, b: Range) -> float | None:
    """The margin that holds a and b together though their ranges do not overlap (only unpaired ranges);
    None wherever the ranges alone say it."""
    if order(a, b) or paired(a, b) or not (a.hi < b.lo or b.hi < a.lo):
        return None
    return margin(a, b)


def told_apart(a: Range, b: Range, margin_: float | None = None) -> bool:
    return order(a, b, margin_) != 0


def ranking(rows: dict[str, Range], margin_: float | None = None) -> list[list[str]]:
    """Groups, smallest first: names not told apart (even through a chain of neighbours) share a group."""
    groups: list[list[str]] = []
    for name in sorted(rows, key=lambda k: rows[k].median):
        tied = [i for i, g in enumerate(groups) if any(order(rows[m], rows[name], margin_) == 0 for m in g)]
        if tied:
            groups[tied[0]:] = [[m for g in groups[tied[0]:] for m in g] + [name]]
        else:
            groups.append([name])
    return groups


def against(value: Range | float, threshold: float, band: float) -> str:
    """'above', 'below' or 'near' (the range reaches within `band`, absolute) a threshold."""
    r = value if isinstance(value, Range) else Range(value, value, value, 1, SAMPLES)
    if r.lo - band > threshold:
        return "above"
    if r.hi + band < threshold:
        return "below"
    return "near"


# The raw sample fields of the records, by the method that had them (model/procedure.RAW_SAMPLES lists them)
METHOD_OF = {"one_call_us": ONE_CALL, "event_times_us": ONE_CALL, "times_us": ONE_CALL, "one_call_wall_us": WALL,
             "back_to_back_us": BACK_TO_BACK, "back_to_back_us_each": BACK_TO_BACK, "enqueue_us": ENQUEUE,
             "enqueue_late_us": ENQUEUE, "graph_us": GRAPH, "device_us": DEVICE, "forward_device_us_each": DEVICE,
             "backward_device_us_each": DEVICE, "cpu_us": CPU, "cpu_forward_us_each": CPU}


# ---- ranges made from ranges, and the thresholds the claims hold values to --------------------------
# (attnprof/site/claims: each claim compares through these, so a threshold is named once, with its why)

def samples(values, method: str | None = None) -> Range:
    """A capture's samples (one process): their median and p10–p90."""
    return of([values], method)


def point(x: float, method: str | None = None) -> Range:
    """One measured value, with no spread recorded."""
    return Range(x, x, x, 1, SAMPLES, method)


def quotient(a: Range, b: Range) -> Range:
    """a ÷ b, the medians' quotient as a reader divides them. Paired: each process's quotient (`per`), their span
    stretched to hold the median (never shown outside its brackets); else the widest from the ranges' ends.
    A ratio of two times has no time method of its own."""
    if paired(a, b):
        per, q = tuple(x / y for x, y in zip(a.per, b.per)), a.median / b.median
        return Range(q, min(*per, q), max(*per, q), len(per), REPEATS, None, per, a.run)
    return Range(a.median / b.median, a.lo / b.hi, a.hi / b.lo, min(a.n, b.n), a.basis)


def difference(a: Range, b: Range) -> Range:
    """a − b, the medians' difference, with its range as `quotient` makes one; their method and regime where
    they share them."""
    method = a.method if a.method == b.method else None
    regime = a.regime if a.regime == b.regime else None
    if paired(a, b):
        per, d = tuple(x - y for x, y in zip(a.per, b.per)), a.median - b.median
        return Range(d, min(*per, d), max(*per, d), len(per), REPEATS, method, per, a.run, regime)
    return Range(a.median - b.median, a.lo - b.hi, a.hi - b.lo, min(a.n, b.n), a.basis, method, regime=regime)


# Thresholds a claim holds a value to (site/claims), each through `against`: its range, or a figure as it is.
POINT_BAND = 0.0  # a figure with no spread recorded crosses its threshold or does not: no band to be near in
PARITY = 1.0  # a ratio of two times at parity: below it the first is faster, above it slower
MOST = 0.5  # "most of": more than half
QUEUED_NEAR = 0.25  # a long forward's one call within a quarter of its time queued: the launch is small beside it
#                     (what one call adds moves with the host's CPU, by up to ~19 % of a 490 µs forward)
LINEAR_WITHIN = 0.05  # a speedup within 5 % of the GPU count is "about linear" when no spread is recorded
ROTATIONS_AGREE_WITHIN = 0.03  # two rotations' medians "agree" this close: MARGIN, what a host or a day moves a time
UNION_WITHIN_CALL = 0.05  # the kernels' busy time lies "within" one call up to this much over the call's median (another call)
COPY_WITHIN = 0.10  # a copy's time, and what dropping it saved, this close to its bytes at the measured copy rate
BACKWARD_OVER_FORWARD = PARITY  # a fused backward "costs more than its forward": its device time over the forward's above 1
HOST_BOUND_CALL = 2.0  # one call's median at least twice the kernels' time: the host, not the GPU, sets the call's pace
CAUSAL_LATER_HALF = 3.0  # the later half of a causal sequence holds 3× the earlier's (query, key) pairs: (3/8) / (1/8)
COUNT_WITHIN = 0.01  # counted pairs are exact: within 1 % of the arithmetic
A100_BAND = MARGIN  # a rung's ratio (the A100's time ÷ ours) lies beyond a peak ratio only by more than this share of it: one figure
#                     each side (the post's time, our median), so the band is what a host or a day moves a time
RECOMPILE_CLIFF = 2.0  # the cliff: a call at half the rate of the shape before, or less (a recompile, not drift)
FMA_OVER_TENSOR = 10.0  # FP32 matmuls "on the CUDA cores": the FMA pipe at least 10× as busy as the tensor pipe
TENSOR_PIPE_FLOOR = 0.1  # % of the tensor pipe below which a counter reads as idle (its own noise)
ACHIEVED_NEAR_THEORETICAL = 0.9  # achieved occupancy "near" its theoretical: at least 90 % of it (warps retire unevenly)
DECODE_AT_COPY = 0.8  # a decode step that reads its cache at 80 % of the copy rate or more is bound by those bytes
STEADY_WITHIN = MARGIN  # a steady-state rate stands as one number when every process lies this close to the median
