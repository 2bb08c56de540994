"""Truth conditions of the conclusion pieces whose words follow the records (`decode-error`, `steady`,
`verdict` and `verdicts` where a page gives no `expect=`): what the page around each relies on,
which `check` holds (core.hold), and a flip of a copy of a record that changes what the piece states."""
from __future__ import annotations

import statistics
from collections import Counter

from ...analysis import decide, timing
from ...model.stages import DEFAULT_SHAPE, SHAPES
from ...text import us
from ..build import Build
from ..pieces.runs import concat_against_in_place, decode_steps, steady_rates
from ..pieces.timing import UNDECIDED_CALL, repeated, timed_range
from ..registry import expand
from .core import ADAPTS, Flip, Statement, condition
from .edits import in_run

B = decide.POINT_BAND


def _said(build: Build, piece: str, *args) -> str:
    """What the piece renders for these arguments (the words a flip must change)."""
    return expand(build, piece, [str(a) for a in args])


# ---- decode-error ---------------------------------------------------------------------------------

def _concat(factor: float | None):
    """The decode-step run with every row's concatenating step `factor` times its own time, or (None) at the
    in-place step's own samples: concatenating costs nothing measurable."""
    def edit(rows):
        for r in rows:
            c = r.get("concat", {})
            if "back_to_back_us_each" in c and "back_to_back_us_each" in r:
                c["back_to_back_us_each"] = ([factor * x for x in c["back_to_back_us_each"]] if factor
                                             else list(r["back_to_back_us_each"]))
                c["back_to_back_us"] = statistics.median(c["back_to_back_us_each"])
    return in_run("decode_step", edit)


@condition("decode-error", reads=["run-decode_step"],
           flip=[Flip("run-decode_step.json", _concat(None)),  # no cost to concatenating
                 Flip("run-decode_step.json", _concat(3.0), ADAPTS)])  # a cost even where the cache is small
def decode_error(build: Build) -> Statement:
    """The page's point: building the cache with `torch.cat` on every step costs time. It holds where, at the
    largest ratio, the concatenating step is decidedly slower than the in-place one (the one rule)."""
    worst = max(decode_steps(build), key=lambda r: r["ratio"])
    best = min(decode_steps(build), key=lambda r: r["ratio"])
    o, ob = concat_against_in_place(build, worst)[0], concat_against_in_place(build, best)[0]
    return Statement(_said(build, "decode-error"), o > 0, f"at batch {worst['batch']} order {o}, at batch "
                     f"{best['batch']} order {ob}", f"largest {o}, smallest {ob}")


# ---- steady ---------------------------------------------------------------------------------------

def _slower(factor: float, only_first: bool = False):
    """The steady run with the back-to-back samples of every process that finished (or of the first) `factor`
    times their own."""
    def change(record):
        for i, rep in enumerate(r for r in record["result"]["repeats"] if "error" not in r):
            if i == 0 or not only_first:
                rep["back_to_back_us_each"] = [factor * x for x in rep["back_to_back_us_each"]]
                rep["back_to_back_us"] = statistics.median(rep["back_to_back_us_each"])
    return change


@condition("steady", reads=["run-steady"],
           flip=[Flip("run-steady.json", _slower(1.25, only_first=True)),  # one process throttled: no one rate
                 Flip("run-steady.json", _slower(1.25), ADAPTS)])  # every process slower: another rate
def steady(build: Build) -> Statement:
    """The page gives one steady-state rate: it holds where every process that finished lies within
    decide.STEADY_WITHIN of their median."""
    fwd = sorted(f for f, _ in steady_rates(build))
    mid = statistics.median(fwd)
    spread = max(abs(f / mid - 1) for f in fwd)
    return Statement(_said(build, "steady"), decide.against(spread, decide.STEADY_WITHIN, B) != "above",
                     f"rates {[round(f) for f in fwd]} TFLOP/s, {100 * spread:.1f} % from their median against "
                     f"{100 * decide.STEADY_WITHIN:.0f} %", f"{mid:.0f} TFLOP/s")


# ---- verdict (the timing run's), where the page expects none --------------------------------------

def _rows(keep, edit):
    """The timing run with `edit(row)` on every row `keep(row)` picks, in every process."""
    def change(record):
        for result in [record["result"], *record.get("repeats", [])]:
            for row in filter(keep, result["rows"]):
                edit(row)
    return change


def _at(shape: str, stage: str | None = None):
    """A picker for `_rows`: the row of `stage` at `shape`, or every row at `shape` that has GPU-only samples."""
    return lambda row: "x".join(map(str, row["shape"])) == shape and (
        row["stage"] == stage if stage else bool(row.get("graph_us")))


def _launch_bound(row):  # the stream at the CPU's pace, far from the GPU's (as tests/test_claims.py's)
    row["graph_us"], row["enqueue_us"] = [0.3 * x for x in row["back_to_back_us"]], list(row["back_to_back_us"])


def _gpu_bound(row):  # the stream at the GPU's pace, the CPU enqueuing far faster: GPU-bound in every process
    row["back_to_back_us"], row["enqueue_us"] = list(row["graph_us"]), [0.2 * x for x in row["graph_us"]]


def _no_overhead(row):  # one call no longer than its GPU work: no launch overhead visible
    row["one_call_us"] = list(row["graph_us"])


def _mostly_launch(row):  # one call three times its GPU work
    row["one_call_us"] = [3 * x for x in row["graph_us"]]


def _verdict_flips(stage, shape, kind="stream"):
    edits = {"stream": (_launch_bound, _gpu_bound), "call": (_no_overhead, _mostly_launch)}[kind]
    to = {"stream": "GPU-bound, settled"}.get(kind)  # where the records may already give it
    return [Flip("run-timing.json", _rows(_at(shape, stage), edits[0])),
            Flip("run-timing.json", _rows(_at(shape, stage), edits[1]), ADAPTS, to)]


POST_SHAPE = "x".join(map(str, DEFAULT_SHAPE))


@condition("verdict", reads=["run-timing"], flip=_verdict_flips)
def verdict(build: Build, stage, shape, kind="stream") -> Statement:
    """What the page around a timing verdict relies on. A stream at the post's shape is not launch-bound
    (the chapter's premise: there the GPU sets the pace; elsewhere a stream's verdict is what the processes
    gave, whichever). One call takes decidedly more than its GPU work (the launch overhead its sentence
    gives shows, by the one rule)."""
    v = timing.verdict(timing.find(build.run("timing")["rows"], stage, shape))
    said = _said(build, "verdict", stage, shape, kind)
    if kind == "stream":
        every = repeated(build, stage, shape)
        settled = timing.settled(every)
        stream = timing.consensus(every) or v.stream
        holds = shape != POST_SHAPE or stream != "launch-bound"
        return Statement(said, holds, f"{stream}; processes {dict(Counter(x.stream for x in every))}",
                         f"{stream}{', settled' if settled else ''}")
    if kind == "call":
        one, gpu = timed_range(build, stage, shape, "one_call_us"), timed_range(build, stage, shape, "graph_us")
        side = decide.order(one, gpu.scaled(lambda x: 2 * x))
        found = ("launch dominates" if side > 0 else UNDECIDED_CALL if side == 0 else "kernels dominate")
        return Statement(said, decide.order(one, gpu) == 1, f"one call {one.text(us)}, GPU work {gpu.text(us)}", found)
    raise KeyError(f"unknown verdict kind {kind!r} (known: stream, call)")


# ---- verdicts (every stage of the timing run at one shape), where the page expects none -----------------

SHORT_SHAPE = "x".join(map(str, SHAPES["short"]))  # the chapter's short shape: its kernels short, the CPU near the pace
PREMISE = {POST_SHAPE: "launch-bound", SHORT_SHAPE: "GPU-bound"}  # the verdict the page around rules out there


def _verdicts_flips(shape):
    against = PREMISE.get(shape)
    make = {"launch-bound": _launch_bound, "GPU-bound": _gpu_bound}
    other = _gpu_bound if against == "launch-bound" else _launch_bound
    after = "all GPU-bound, settled" if other is _gpu_bound else "all launch-bound, settled"
    return ([Flip("run-timing.json", _rows(_at(shape), make[against]))] if against else []) + [
        Flip("run-timing.json", _rows(_at(shape), other), ADAPTS, after)]


@condition("verdicts", reads=["run-timing"], flip=_verdicts_flips)
def verdicts(build: Build, shape) -> Statement:
    """What the page around the verdicts of every stage at one shape relies on: at the post's shape none is
    launch-bound (there the GPU sets the pace); at the short shape none is GPU-bound (its kernels are short, the
    CPU sets the pace or comes close); elsewhere the sentence is what the processes gave, whichever."""
    rows = [r for r in build.run("timing")["rows"]
            if "x".join(map(str, r["shape"])) == shape and "error" not in r and r.get("graph_us")]
    every = {r["stage"]: repeated(build, r["stage"], shape) for r in rows}
    streams = {r["stage"]: timing.consensus(every[r["stage"]]) or timing.verdict(r).stream for r in rows}
    settled = all(timing.settled(e) for e in every.values())
    kinds = set(streams.values())
    outcome = f"all {kinds.pop()}{', settled' if settled else ''}" if len(kinds) == 1 else "mixed"
    return Statement(_said(build, "verdicts", shape), PREMISE.get(shape) not in streams.values(),
                     f"streams {streams}", outcome)
