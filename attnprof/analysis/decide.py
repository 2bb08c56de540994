"""The one rule that decides every comparison and threshold a page states (pure, no torch).

A quantity is a `Range`: measured in several independent repeats (separate processes, a fresh CUDA
context each), the median of all their samples and the span of the repeats' medians, each repeat's median
kept; measured in one process only, the median and p10–p90 of that process's samples.

Two quantities of one run, measured in the same processes (interleaved, so a host's or a GPU's drift falls
on both), are compared process by process: they are told apart when, in every process, one is beyond the
other by its method's paired margin, on the same side. Where the run took its samples in rounds, each
process's ratio is the median of its rounds' own ratios, the two samples of a round set against each other.
Two quantities that were not measured together (two captures, two runs) are told apart only when their
ranges do not overlap and their medians differ by the method's margin between processes besides, which is
far wider for what the host's CPU sets. Otherwise a page says "not told apart" (within ±margin) and gives
both ranges, words that hold whichever way a regeneration falls. A value set against a threshold is "near"
it when its range reaches within the threshold's band, and is never flipped across it by a few tenths of a
point.
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
# The methods a run measured in rounds (measure/bench.py interleaved) takes a round at a time; the profiler's
# (device time, CPU time) profile each path once, after its rounds
IN_ROUNDS = (ONE_CALL, WALL, BACK_TO_BACK, ENQUEUE, GRAPH)
# The regime a time was had in (analysis/timing.regime): launch-bound where, in some process, the CPU took as long
# to enqueue a call as the GPU took to run it, or longer; GPU-bound where the GPU took longer in every process.
# The host sets the pace of the first and the GPU that of the second, and a method moves by its own amount in each.
LAUNCH_BOUND, GPU_BOUND = "launch-bound", "GPU-bound"


@dataclass(frozen=True)
class Margin:
    paired: float  # two paths timed in turns in the same processes: how far apart two identical paths landed
    apart: float  # two figures from different processes: how far one path's median moved between two processes


# Each method's margins in each regime, as `python tools/drift.py` computes them from the regenerations of the
# timing run measured in rounds, all but the one its record holds (a margin never judges the records it was
# measured on; tests/test_decide.py holds these equal to drift.py's). Paired: the largest ratio, in one process,
# between auto-dispatch and cuDNN, whose kernel auto runs (analysis/aa.py IDENTICAL), round by round where the
# method is timed in rounds. Apart: the largest move of one path's median between two processes of one
# regeneration. On the GPU's clock (device time, graph replay) a time moves by a few percent; what the host's CPU
# sets (one call, CPU enqueue, CPU time) moves far more, most of all between processes, which is why those
# comparisons are made in pairs, within each process.
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
    rounds: tuple[tuple[float, ...], ...] = field(default=(), repr=False)  # each process's samples as its rounds
    #                                                                          took them (a run in rounds)

    def text(self, fmt: Callable[[float], str]) -> str:
        """'12.3 µs [11.9–12.8 µs]': the median, then the range in brackets (a sentence often holds it in
        parentheses), each through `fmt`, a unit once."""
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
    """One value per independent repeat (each repeat's median): their median and their span. A single
    repeat has no spread across repeats: use of_samples on its samples instead."""
    xs = [float(x) for x in values]
    if len(xs) < 2:
        raise ValueError(f"a range across repeats needs at least 2 repeats, and {len(xs)} were given")
    return Range(statistics.median(xs), min(xs), max(xs), len(xs), REPEATS)


def of(repeats: list, method: str | None = None, run: str | None = None, regime: str | None = None) -> Range:
    """The range a comparison uses, from the samples of each repeat: where there are two or more repeats,
    the median of all their samples (the median a table over the pooled repeats shows) and the span of
    the repeats' own medians, each repeat's median kept (`per`) so that two ranges of one `run` are
    compared process by process, and each repeat's samples too where that run took them in rounds; else the
    median and p10–p90 of the one repeat's samples. `method` says how the samples were had (DEVICE, ONE_CALL,
    ...), `regime` in which regime (LAUNCH_BOUND, GPU_BOUND), where known."""
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
    """The margin that decides a against b: the paired one of their methods in their regimes, or the one
    between processes; MARGIN where neither says how it was had."""
    kinds = [margins_of(r.method, r.regime) for r in (a, b) if r.method in MARGINS]
    if not kinds:
        return MARGIN
    return max(k.paired if paired(a, b) else k.apart for k in kinds)


def steps(a: Range, b: Range) -> list[float]:
    """Each process's own step from b to a, for two ranges of one run: the log of their ratio, the median of its
    rounds' own where both kept a sample a round alike (the two samples of a round were taken moments apart);
    for values of either sign (differences), their difference as a share of the larger."""
    if a.rounds and b.rounds and all(len(x) == len(y) for x, y in zip(a.rounds, b.rounds)):
        return [statistics.median(math.log(x / y) for x, y in zip(xs, ys)) for xs, ys in zip(a.rounds, b.rounds)]
    if min(a.per + b.per) > 0:
        return [math.log(x / y) for x, y in zip(a.per, b.per)]
    return [(x - y) / max(abs(x), abs(y)) if x != y else 0.0 for x, y in zip(a.per, b.per)]


def order(a: Range, b: Range, margin_: float | None = None) -> int:
    """-1 when a is decidedly below b, 1 when decidedly above, 0 when they are not told apart (the rule in
    this module's docstring); `margin_` overrides the methods' margin."""
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
    """Where a and b are not told apart though their ranges do not overlap, which happens only to two paths
    measured in separate processes: the margin that holds them together (how far one path's median has moved
    between processes by their method). None wherever the ranges alone say it."""
    if order(a, b) or paired(a, b) or not (a.hi < b.lo or b.hi < a.lo):
        return None
    return margin(a, b)


def told_apart(a: Range, b: Range, margin_: float | None = None) -> bool:
    return order(a, b, margin_) != 0


def ranking(rows: dict[str, Range], margin_: float | None = None) -> list[list[str]]:
    """Groups from the smallest to the largest, such that every name is told apart from every name of
    another group; names not told apart (even through a chain of neighbours) share a group."""
    groups: list[list[str]] = []
    for name in sorted(rows, key=lambda k: rows[k].median):
        tied = [i for i, g in enumerate(groups) if any(order(rows[m], rows[name], margin_) == 0 for m in g)]
        if tied:
            groups[tied[0]:] = [[m for g in groups[tied[0]:] for m in g] + [name]]
        else:
            groups.append([name])
    return groups


def against(value: Range | float, threshold: float, band: float) -> str:
    """'above', 'below' or 'near' a threshold: near when the value's range reaches within `band`
    (absolute) of it, on either side."""
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
    """a ÷ b (a speedup, a share): the quotient of the medians, as a reader divides the two a table shows. Two
    ranges of one run's processes give each process's own quotient (`per`), their span its range, reaching
    to the quotient of the pooled medians where that falls just outside (a median is never shown outside its
    brackets); otherwise the widest the quotient can be, from the ends of the two ranges. A ratio of two
    times has no time method of its own."""
    if paired(a, b):
        per, q = tuple(x / y for x, y in zip(a.per, b.per)), a.median / b.median
        return Range(q, min(*per, q), max(*per, q), len(per), REPEATS, None, per, a.run)
    return Range(a.median / b.median, a.lo / b.hi, a.hi / b.lo, min(a.n, b.n), a.basis)


def difference(a: Range, b: Range) -> Range:
    """a − b: the difference of the medians, as a reader subtracts the two a table shows. Two ranges of one
    run's processes give each process's own difference (`per`), their span its range, reaching to the
    difference of the pooled medians where that falls outside (a median is never shown outside its
    brackets); otherwise the widest the difference can be, from the ends of the two ranges. The method and
    the regime are theirs where they share them."""
    method = a.method if a.method == b.method else None
    regime = a.regime if a.regime == b.regime else None
    if paired(a, b):
        per, d = tuple(x - y for x, y in zip(a.per, b.per)), a.median - b.median
        return Range(d, min(*per, d), max(*per, d), len(per), REPEATS, method, per, a.run, regime)
    return Range(a.median - b.median, a.lo - b.hi, a.hi - b.lo, min(a.n, b.n), a.basis, method, regime=regime)


# Thresholds a claim holds a value to (attnprof/site/claims), each through `against`. A value recorded without a
# spread (one figure, one ratio of figures) is held to its threshold as it is (POINT_BAND); where it has a
# range, the range decides.
POINT_BAND = 0.0  # a figure with no spread recorded crosses its threshold or does not: no band to be near in
PARITY = 1.0  # a ratio of two times at parity: below it the first is faster, above it slower
MOST = 0.5  # "most of": more than half
QUEUED_NEAR = 0.25  # a long forward's one call within a quarter of its time queued: the launch is small beside it
#                     (what one call adds over a queued forward moves with the host's CPU, by up to ~19 % of a
#                     490 µs forward between processes; "small" means under a quarter of the forward)
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
STEADY_WITHIN = MARGIN  # a steady-state rate stands as one number when every process lies this close to the median
