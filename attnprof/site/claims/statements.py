"""Sentences that rank, compare, multiply or judge, each computed from the records and checked by the build.

A chapter asks for one with `<!-- attnprof: say NAME -->`. Each statement is a small function of the
build that returns a `Statement`: its lesson (plain words, at most two numbers, at most LESSON_WORDS words:
what the page says in its prose), its evidence (the numbers filled in from the records, each with its
method, range, processes and shape: what the page folds), and whether the records bear out the words typed
in both. A statement the records contradict stops the build with one line that names it and quotes it.
"""
from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ...analysis import decide, derived, hardware, kernel_names, records, summary, trace
from ...analysis.stats import event_stats
from ...model import names
from ...model.stages import DEFAULT_SHAPE, LONG_SHAPE, select
from ...text import escape, ms, shape as shape_text, us
from ..build import Build, FalseStatement, RecordUnusable, across, row
from ..words import DEVICE, MEDIAN, count, listed, short, title
from ..registry import piece
from ..pieces.runs import measured, row_where
from ..render import tables


LESSON_WORDS, LESSON_NUMBERS = 30, 2  # a lesson a learner can repeat: one short sentence, one or two numbers


@dataclass(frozen=True)
class Statement:
    text: str  # the evidence: the sentence with its ranges, method, processes and shape, folded on a page
    holds: bool  # whether the records bear out its words (the lesson's and the evidence's)
    rests_on: str = ""  # the numbers it rests on, for the one line that says it is false
    outcome: str = ""  # which of its words it chose, for a claim whose words follow the records
    lesson: str = ""  # what the prose says: plain words, at most LESSON_NUMBERS numbers and LESSON_WORDS words


FALSE, ADAPTS = "false", "adapts"


@dataclass(frozen=True)
class Flip:
    """A change to a copy of one record that a claim must answer: by turning false (FALSE), or, for words
    that follow the records, by words for another outcome that still hold (ADAPTS)."""
    file: str  # the file it changes in the captures folder: "fa4-bwd.json", "run-timing.json", "naive.trace.json.gz"
    change: Callable[[dict], None]  # changes the file's JSON in place
    then: str = FALSE
    to: str | None = None  # for ADAPTS, the outcome it leads to where the records' own outcome may be either

    @property
    def record(self) -> str:
        """The record the file belongs to: a capture's trace is part of the capture."""
        return self.file.removesuffix(".gz").removesuffix(".json").removesuffix(".trace")


@dataclass(frozen=True)
class Claim:
    """One checked sentence: the records it reads and the flips that must turn it, for its arguments
    on a page, and `says`, which returns its words for what the records give and whether they hold."""
    name: str
    says: Callable[..., Statement]
    reads: Callable[..., list[str]]
    flips: Callable[..., list[Flip]]


CLAIMS: dict[str, Claim] = {}


def _of_args(x):
    """A claim's `reads` or `flips`: given as is, or as a function of the claim's arguments."""
    if callable(x):
        return lambda *a, **k: (lambda v: list(v) if isinstance(v, (list, tuple)) else [v])(x(*a, **k))
    return lambda *a, **k: list(x) if isinstance(x, (list, tuple)) else [x]


def claim(name: str, reads, flip):
    """Register the function below as the claim `name`: `reads`, the records it reads, and `flip`, one
    Flip or several, each given as is or as a function of the claim's arguments."""
    def register(fn):
        if name in CLAIMS:
            raise ValueError(f"claim {name!r} is registered twice")
        CLAIMS[name] = Claim(name, fn, _of_args(reads), _of_args(flip))
        return fn
    return register


def check(build: Build, name: str, *args, **keywords) -> Statement:
    """The claim `name`, raising FalseStatement when the records contradict it."""
    if name not in CLAIMS:
        raise KeyError(f"unknown statement {name!r} (known: {', '.join(sorted(CLAIMS))})")
    s = CLAIMS[name].says(build, *args, **keywords)
    if not s.holds:
        raise FalseStatement(f"the statement {name!r} is false for the committed records: “{s.lesson}” “{s.text}” "
                             f"({s.rests_on}); rewrite the sentence or find what changed in the records")
    return s


@piece("say", inline=True, conclusion=True)
def say(build: Build, name, *args, **keywords):
    """A computed sentence, checked against the records (see CLAIMS); some take a stage: its lesson in the
    prose, its evidence folded (Build.fold)."""
    s = check(build, name, *args, **keywords)
    return build.fold(s.lesson, s.text)


def false_statements(build: Build, docs: Path) -> list[str]:
    """Every `say` of the chapters under `docs`, and every piece told what to find (`expect=`), that the
    records contradict or that cannot be said, one line each naming its page, as the strict build finds
    them (`check` runs this; a sentence over a record that `check` already lists as unusable is left to
    that line)."""
    from ..registry import directives, expand
    found = []
    for page in sorted(docs.rglob("*.md")):
        for piece_name, args in directives(page.read_text(encoding="utf-8")):
            if piece_name != "say" and not any(a.startswith("expect=") for a in args):
                continue
            try:
                expand(build, piece_name, args)
            except (*records.UNREADABLE, OSError, FalseStatement, RecordUnusable) as e:
                found.append(f"{page.relative_to(docs.parent)}: <!-- attnprof: {piece_name} {' '.join(args)} -->: "
                             f"{records.unreadable(e)}")
    return found


# ---- the decision rule, over captures and runs ---------------------------------------------------

def samples(values, method: str | None = None) -> decide.Range:
    """A capture's samples (one process): their median and p10–p90."""
    return decide.of([values], method)


def front(rows: dict, largest: bool = False) -> list:
    """The key with the smallest median (the largest, with `largest`) and every key not told apart from it,
    in order of their medians: who leads, by the one rule (a ranking's groups can chain much further)."""
    best = (max if largest else min)(rows, key=lambda k: rows[k].median)
    return sorted((k for k in rows if decide.order(rows[k], rows[best]) == 0),
                  key=lambda k: rows[k].median, reverse=largest)


def apart(a: decide.Range, b: decide.Range) -> str:
    """'below', 'above' or 'not told apart from': a against b, by the one rule."""
    return {-1: "below", 1: "above", 0: "not told apart from"}[decide.order(a, b)]


# ---- flips: changes to a copy of a record, each keeping the record consistent in itself --------------

def scale(xs, factor):
    return [factor * x for x in xs]


def events(factor: float, of: str = "event_times_us"):
    """A capture's one-call CUDA-event samples made `factor` times their own (or, with `of`, the median of
    another of its samples: its device time per forward), its statistics redone."""
    def change(s):
        n = len(s["event_times_us"])
        s["event_times_us"] = (scale(s["event_times_us"], factor) if of == "event_times_us"
                               else [factor * statistics.median(s[of])] * n)
        s.update(event_stats(s["event_times_us"]))
    return change


def each(field: str, factor: float):
    """A capture's per-forward samples `field` (`forward_device_us`, `cpu_forward_us` ...) times `factor`."""
    def change(s):
        s[f"{field}_each"] = scale(s[f"{field}_each"], factor)
        s[field] = statistics.median(s[f"{field}_each"])
    return change


def widened(field: str):
    """A capture's per-forward samples `field` spread a hundredfold either side of their median, which stays:
    a spread so wide that nothing is told apart from it."""
    def change(s):
        xs, mid = s[f"{field}_each"], statistics.median(s[f"{field}_each"])
        s[f"{field}_each"] = [x / 100 if x < mid else 100 * x if x > mid else x for x in xs]
        s[field] = statistics.median(s[f"{field}_each"])
    return change


def setting(**values):
    return lambda s: s.update(values)


def in_run(run: str, edit: Callable):
    """`edit(result)` on a run's result and on each of its further repeats (the same change measured in every
    process), their medians and rates then derived again from the samples."""
    def change(record):
        edit(record["result"])
        record["result"] = derived.derive(run, record["result"])
        for i, result in enumerate(record.get("repeats", [])):
            edit(result)
            record["repeats"][i] = derived.derive(run, result)
    return change


def scaled_row(run: str, field: str, factor: float, **match):
    """A run whose rows have a `rows` list, with `field` of the row matching `match` scaled by `factor`, in every
    process."""
    def edit(result):
        r = row(result["rows"], **match)
        r[field] = scale(r[field], factor)
    return in_run(run, edit)


def _halve_longest_grid(s):
    op = summary.longest_kernel(s)
    op["grid"] = [max(1, op["grid"][0] // 2), *op["grid"][1:]]


def _shrink_cpu_op(name: str):
    """Every CPU op `name` of a trace takes a tenth of its time (it still lies inside its caller)."""
    def change(t):
        for e in t["traceEvents"]:
            if e.get("cat") == "cpu_op" and e.get("name") == name:
                e["dur"] /= 10
    return change


def kernels_in_trace(part: str, factor: float):
    """Every kernel of a trace whose name holds `part` takes `factor` times as long."""
    def change(t):
        for e in t["traceEvents"]:
            if e.get("cat") == "kernel" and part in e.get("name", ""):
                e["dur"] *= factor
    return change


# ---- words computed from numbers -----------------------------------------------------------------

def times(x: float, digits: int = 1) -> str:
    return f"{x:.{digits}f}×"


def pct(x: float) -> str:
    return f"{100 * x:.0f} %"


def relation(x: float, lo: float, hi: float) -> str:
    """Where x lies against the range [lo, hi]: 'below', 'between' or 'above'."""
    return "below" if x < lo else "above" if x > hi else "between"


def ordinal(n: int) -> str:
    return {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth", 6: "sixth", 7: "seventh",
            8: "eighth", 9: "ninth", 10: "tenth"}.get(n, f"{n}th")


def ranked(rows: dict[str, float]) -> list[str]:
    """Keys from the smallest value to the largest (the fastest first, for times)."""
    return sorted(rows, key=rows.get)


# ---- the backward pass ---------------------------------------------------------------------------

FUSED_BWD = tuple(select(backward=True, fused=True))
UNFUSED_BWD = tuple(select(backward=True, fused=False))


def _bwd(build: Build, stages) -> dict[str, dict]:
    out = {}
    for stage in stages:
        record = names.backward_record(stage)
        if record in build.problems:  # a sentence over records that cannot be used says nothing
            raise RecordUnusable(build.problems[record])
        if build.is_unavailable(record):
            continue
        out[stage] = build.summary(record)
    return out


def bwd_over_fwd(s: dict) -> float:
    """A backward's device time over its forward's, both from the same trace (profiler)."""
    return s["backward_device_us"] / s["forward_device_us"]


@claim("bwd-over-fwd", reads=[names.backward_record(s) for s in FUSED_BWD + UNFUSED_BWD],
       flip=Flip("fa4-bwd.json", lambda s: s.update(forward_device_us=s["backward_device_us"])))  # 1.0×
def bwd_over_forward(build: Build) -> Statement:
    fused, unfused = ({k: bwd_over_fwd(s) for k, s in _bwd(build, group).items()} for group in (FUSED_BWD, UNFUSED_BWD))
    lo, hi = min(fused, key=fused.get), max(fused, key=fused.get)
    text = (f"By device time (the profiler's sum of kernel durations, forward and backward from the same trace), "
            f"every fused backend's backward costs more than its forward, from {times(fused[lo])} ({title(lo)}) to "
            f"{times(fused[hi])} ({title(hi)}); the unfused ones, whose forward was already slow, "
            f"{times(min(unfused.values()))} to {times(max(unfused.values()))}.")
    lesson = (f"Every fused backend's backward takes {times(fused[lo])} to {times(fused[hi])} the device time of its "
              f"forward, more than any unfused one's")
    return Statement(text, min(fused.values()) > max(unfused.values()) and min(fused.values()) > 1, lesson=lesson,
                     rests_on=f"fused {min(fused.values()):.2f}–{max(fused.values()):.2f}×, "
                     f"unfused {min(unfused.values()):.2f}–{max(unfused.values()):.2f}×")


def _bwd_ranked(build: Build, field: str) -> dict[str, decide.Range]:
    """Each backward's `field` samples in the backward run, over its separate processes (the one rule's range)."""
    stages = [r["stage"] for r in build.run("backward")["rows"] if field in r]
    return {k: across(build, "backward", lambda res, k=k: row(res["rows"], stage=k).get(field, [])) for k in stages}




def _failed_once(stage: str):
    """The backward run with `stage` failing in its last process: the ranking would leave it out there."""
    def change(record):
        last = (record.get("repeats") or [record["result"]])[-1]
        r = row(last["rows"], stage=stage)
        r.clear()
        r.update(stage=stage, error="RuntimeError: out of memory")
    return change


@claim("bwd-fastest", reads=["run-backward"],
       flip=[Flip("run-backward.json", scaled_row("backward", "event_times_us", 3.0, stage="cudnn"), ADAPTS),  # another first, one call
             Flip("run-backward.json", scaled_row("backward", "backward_device_us_each", 0.3, stage="cudnn"), ADAPTS),  # first by device
             Flip("run-backward.json", _failed_once("cudnn"))])  # a ranking without cuDNN's backward in one process
def bwd_fastest(build: Build) -> Statement:
    """The backward ranking by device time and by one call, each by the one rule over the backward run's
    separate processes: backwards that cannot be told apart share a place."""
    device, event = _bwd_ranked(build, "backward_device_us_each"), _bwd_ranked(build, "event_times_us")
    first, first_event = front(device), front(event)
    runner = front({k: r for k, r in device.items() if k not in first})
    some = next(r for r in build.repeats("backward")[0]["rows"] if "event_times_us" in r)
    text = (f"Ranked in a run of its own, {len(build.repeats('backward'))} separate processes each timing every "
            f"backward ({next(iter(device.values())).how}): by device time (profiler, "
            f"{len(some['backward_device_us_each'])} profiled backwards a process), "
            f"{_place('the fastest backward here', first, device)}, then "
            f"{_named(runner, device)}{', not told apart' if len(runner) > 1 else ''}. Timed from the "
            f"CPU, one `backward()` call between CUDA events ({len(some['event_times_us'])} a process), ")
    if first_event == first:
        text += f"{'it comes' if len(first) == 1 else 'they come'} first too ({_named(first, event)})."
    else:
        lead = (f"{_named(first_event, event)} comes first" if len(first_event) == 1 else
                f"{_named(first_event, event)} share the first place, not told apart")
        ahead = [k for k in event if decide.order(event[k], event[first[0]]) < 0]  # decidedly faster by one call
        tied = [k for k in event if k != first[0] and decide.order(event[k], event[first[0]]) == 0]
        text += (f"the order is not the same: {lead}. {short(first[0])}'s {event[first[0]].text(us)} is "
                 + (f"decidedly slower than {listed([short(k) + chr(39) + 's' for k in ahead])}" if ahead else
                    "not decidedly slower than any")
                 + (f", and not told apart from {listed([short(k) + chr(39) + 's' for k in tied])}" if tied else "")
                 + ".")
    outcome = f"device {first}, one call {first_event}"
    lesson = (f"By device time the fastest backward here is {short(first[0])}'s, {us(device[first[0]].median)}"
              if len(first) == 1 else f"By device time no backward leads: {listed([short(k) for k in first])} are "
                                      f"not told apart")
    lesson += ("; by one call too" if first_event == first else
               f"; by one call, {listed([short(k) for k in first_event])} "
               f"{'comes' if len(first_event) == 1 else 'share the'} first{'' if len(first_event) == 1 else ' place'}")
    missing = [r["stage"] for result in build.repeats("backward") for r in result["rows"] if "error" in r]
    return Statement(text, not missing and len(device) == len(FUSED_BWD + UNFUSED_BWD),  # every backward, every process
                     f"{outcome}; failed in a process: {missing or 'none'}", outcome, lesson)


def _named(group: list[str], rows: dict[str, decide.Range]) -> str:
    """'cuDNN's 402.6 µs (325.0 µs–512.2 µs) and flash's …': stages with their ranges."""
    return listed([f"{short(k)}'s {rows[k].text(us)}" for k in group])


def _place(what: str, group: list[str], rows: dict[str, decide.Range]) -> str:
    """One stage in a place, or the leader and those not told apart from it (`front`) sharing it."""
    if len(group) == 1:
        return f"{what} is {_named(group, rows)}"
    return f"{what} is not decided: {_named(group[:1], rows)} is not told apart from {_named(group[1:], rows)}"


@claim("bwd-host", reads=lambda stage: [names.backward_record(stage)],
       flip=lambda stage: Flip(f"{names.backward_record(stage)}.json", setting(cpu_backward_us=100.0)))
def bwd_host(build: Build, stage) -> Statement:
    """Why a backward's one-call time is several times its device time: its host side, not its kernels."""
    s = build.summary(names.backward_record(stage))
    text = (f"The two methods measure different things. Device time adds up the kernels only; one call's CUDA-event "
            f"time also holds everything the GPU waited for, the CPU's work before and between the launches "
            f"included. In its capture (the table above, one process), {short(stage)}'s backward has "
            f"{us(s['backward_device_us'])} of kernels but spends {us(s['cpu_backward_us'])} on the CPU per backward "
            f"under the profiler (median of {len(s['ops_per_backward_each'])}; the profiler's own bookkeeping "
            f"inflates that CPU time, so read it as an upper bound), more than its kernels take, so its one-call "
            f"time there ({us(s['event_p10_us'])} to {us(s['event_p90_us'])}, p10 to p90) follows the CPU, not the "
            f"GPU.")
    lesson = (f"{short(stage)}'s backward spends {us(s['cpu_backward_us'])} on the CPU for {us(s['backward_device_us'])} "
              f"of kernels, so its one-call time follows the CPU")
    return Statement(text, s["cpu_backward_us"] > s["backward_device_us"]
                     and s["event_p10_us"] > 2 * s["backward_device_us"], lesson=lesson,
                     rests_on=f"CPU {s['cpu_backward_us']:.1f} µs, device {s['backward_device_us']:.1f} µs, "
                     f"event p10 {s['event_p10_us']:.1f} µs")


# ---- the A100 beside the H200 --------------------------------------------------------------------
# A100: NVIDIA's datasheet peaks (hardware.HARDWARE). H200: its peaks computed the same way from its device
# query, so that every hardware ratio is peak to peak; the rungs' ratios are measured to measured (the
# post's profiler device time on the A100 over ours on the H200).

def peak_ratios(build: Build) -> dict:
    """H200 ÷ A100, peak to peak: bandwidth, FP32 on the CUDA cores, SMs × clock."""
    h, a = hardware.h200_peaks(build.run("hardware")), hardware.a100_peaks()
    return {k: h[k] / a[k] for k in ("hbm_gbs", "fp32_tflops", "sm_clock")}


def rung_ratio(build: Build, stage: str) -> float:
    """The post's A100 forward time (profiler) over our H200 device time per forward (profiler)."""
    return hardware.FIGURES[stage]["forward_us"] / build.summary(stage)["forward_device_us"]


HW_NAMES = {"hbm_gbs": "memory bandwidth", "fp32_tflops": "FP32 on the CUDA cores", "sm_clock": "SMs × clock"}


@claim("a100-inplace", reads=["run-hardware", "inplace"],
       flip=Flip("run-hardware.json", in_run("hardware", lambda r: r["query"].update(smi_clocks_max_sm_mhz=2_200))))
def a100_inplace(build: Build) -> Statement:
    p, r = peak_ratios(build), rung_ratio(build, "inplace")
    nearest = min(p, key=lambda k: abs(p[k] - r))
    hw = build.run("hardware")
    of_peak = hw["copy_gbs"] / hardware.h200_peaks(hw)["hbm_gbs"]
    text = (f"{times(r, 2)}, of the three ratios a rung can be bound by (bandwidth, FP32, SMs × clock) nearest the bandwidth ratio ({times(p['hbm_gbs'], 2)}, peak to "
            f"peak), and {relation(r, p['hbm_gbs'], p['hbm_gbs'])} it by {pct(abs(1 - r / p['hbm_gbs']))}: a copy "
            f"measured on the H200 reaches {pct(of_peak)} of its peak, and how near its own peak the A100 ran the "
            f"post's forward is not known")
    lesson = (f"{times(r, 2)} faster on the H200 than on the A100, nearest the ratio of their memory bandwidths "
              f"({times(p['hbm_gbs'], 2)})")
    return Statement(text, nearest == "hbm_gbs", f"ratio {r:.2f}, hardware {p}", lesson=lesson)


@claim("a100-math", reads=["run-hardware", "math"],
       flip=Flip("run-hardware.json", in_run("hardware", lambda r: r["query"].update(memory_clock_rate=4_000_000))))
def a100_math(build: Build) -> Statement:
    p, r = peak_ratios(build), rung_ratio(build, "math")
    where = relation(r, p["hbm_gbs"], p["fp32_tflops"])
    text = (f"{times(r, 2)}, {where} the bandwidth ratio ({times(p['hbm_gbs'], 2)}) and the FP32 ratio "
            f"({times(p['fp32_tflops'], 2)}), both peak to peak")
    lesson = f"{times(r, 2)} faster on the H200, {where} the two GPUs' memory-bandwidth and FP32 ratios"
    return Statement(text, where == "between", f"ratio {r:.2f}, bandwidth {p['hbm_gbs']:.2f}, FP32 {p['fp32_tflops']:.2f}",
                     lesson=lesson)


@claim("a100-fused-ampere", reads=["run-hardware", "efficient", "flash"],
       flip=Flip("run-hardware.json", in_run("hardware", lambda r: r["query"].update(multi_processor_count=90))))
def a100_fused_ampere(build: Build) -> Statement:
    p = peak_ratios(build)
    rs = {s: rung_ratio(build, s) for s in ("efficient", "flash")}
    text = (f"{times(rs['efficient'], 2)} and {times(rs['flash'], 2)}, below even the SMs × clock ratio "
            f"({times(p['sm_clock'], 2)}, peak to peak), the smallest of those three")
    lesson = (f"{times(rs['efficient'], 2)} and {times(rs['flash'], 2)} faster on the H200, less than any ratio of the "
              f"two GPUs' hardware")
    return Statement(text, max(rs.values()) < min(p.values()), f"ratios {rs}, hardware {p}", lesson=lesson)


@claim("a100-cudnn", reads=["inplace", "math", "efficient", "flash", "cudnn"],
       flip=Flip("cudnn.json", each("forward_device_us", 3.0)))
def a100_cudnn(build: Build) -> Statement:
    rs = {s: rung_ratio(build, s) for s in ("inplace", "math", "efficient", "flash", "cudnn")}
    text = f"{times(rs['cudnn'], 2)}, the largest of the rungs (the post's A100 device time over the H200's, profiler)"
    return Statement(text, max(rs, key=rs.get) == "cudnn" and
                     hardware.FIGURES["cudnn"]["forward_us"] > hardware.FIGURES["flash"]["forward_us"], f"ratios {rs}",
                     lesson=f"{times(rs['cudnn'], 2)} faster on the H200, the largest gain of the rungs")


@claim("math-gap", reads=["math", "inplace"], flip=Flip("math.json", each("forward_device_us", 2.0)))
def math_gap(build: Build) -> Statement:
    """The math forward over the in-place forward: here against the post's A100."""
    ours = build.summary("math")["forward_device_us"] / build.summary("inplace")["forward_device_us"]
    theirs = hardware.FIGURES["math"]["forward_us"] / hardware.FIGURES["inplace"]["forward_us"]
    text = (f"the math forward takes {ours:.1f} times as long as the in-place one here, against "
            f"{theirs:.1f} times on the A100 (device time per forward on both, profiler)")
    lesson = (f"the math forward takes {ours:.1f} times as long as the in-place one here, against {theirs:.1f} times "
              f"on the A100")
    return Statement(text, ours < theirs, f"H200 {ours:.2f}, A100 {theirs:.2f}", lesson=lesson)


# ---- two GPUs ------------------------------------------------------------------------------------

LINEAR_WITHIN = 0.05  # a speedup within 5 % of the GPU count is "about linear" when no spread is recorded


def scaling_words(speedup: float, gpus: int, spread: float | None) -> str:
    """'superlinear' only when the speedup exceeds the GPU count by more than the spread of the timings;
    with no spread recorded, 'about linear' within LINEAR_WITHIN."""
    margin = spread if spread is not None else LINEAR_WITHIN * gpus
    if speedup > gpus + margin:
        return "superlinear"
    if speedup >= gpus - margin:
        return "about linear"
    return "sublinear"


LONGEST_CP = names.CP_LENGTHS[-1]  # the two-GPU records at the longest length: both rotations, and unbalanced


@claim("cp-scaling", reads=[names.cp_record(LONGEST_CP, rotate=r) for r in ("allgather", "alltoall")],
       flip=Flip(f"{names.cp_record(LONGEST_CP, rotate='allgather')}.json", setting(speedup=2.4)))
def cp_scaling(build: Build) -> Statement:
    runs = [build.summary(names.cp_record(LONGEST_CP, rotate=r)) for r in ("allgather", "alltoall")]
    n = runs[0]["world_size"]
    x = [s["speedup"] for s in runs]
    words = {scaling_words(v, n, None) for v in x}
    text = (f"about linear with either rotation ({x[0]:.2f}× all-gather, {x[1]:.2f}× all-to-all), not more: a "
            f"speedup {100 * (max(x) / n - 1):.1f} % above {n}× is no evidence of superlinear scaling when the "
            f"records keep only the median of each timing, not its spread")
    lesson = f"about linear with either rotation: {x[0]:.2f}× and {x[1]:.2f}× one GPU's speed"
    return Statement(text, words == {"about linear"}, f"speedups {x}", lesson=lesson)


@claim("cp-device-over-event", reads=[names.cp_record(names.CP_LENGTHS[0])],
       flip=Flip(f"{names.cp_record(names.CP_LENGTHS[0])}.json",
                 lambda s: s["ranks"][0].update(event_median_us=s["ranks"][0]["event_median_us"] / 2)))
def cp_device_over_event(build: Build) -> Statement:
    s = build.summary(names.cp_record(names.CP_LENGTHS[0]))
    r = s["ranks"][0]
    union = trace.busy_us(r["ops"])
    text = (f"Rank 0's device time at this length, {us(r['forward_device_us'])} (profiler), is longer than its "
            f"one-call CUDA-event median, {us(r['event_median_us'])}, though the kernels run inside the call. Device "
            f"time adds up every op, and the NCCL kernel runs on its own stream while attention runs, so that "
            f"stretch counts twice; the time at least one op ran, the union of their intervals, is {us(union)}, "
            f"within the call.")
    lesson = (f"The first rank's device time, {us(r['forward_device_us'])}, exceeds its one-call time, "
              f"{us(r['event_median_us'])}, because kernels that overlap are counted twice")
    return Statement(text, r["forward_device_us"] > union and union <= r["event_median_us"] * 1.05, lesson=lesson,
                     rests_on=f"sum {r['forward_device_us']:.1f}, union {union:.1f}, event {r['event_median_us']:.1f}")


# ---- a kernel's launch figures, inline in prose ----------------------------------------------------

KERNEL_FIELDS = {
    "registers": lambda op, s: str(op["registers"]),
    "threads": lambda op, s: str(summary.threads(op)),
    "warpgroups": lambda op, s: str(summary.threads(op) // 128),
    "blocks": lambda op, s: f"{op['grid'][0] * op['grid'][1] * op['grid'][2]:,}",
    "grid": lambda op, s: " × ".join(str(g) for g in op["grid"] if g > 1) or "1",
    "blocks_per_sm": lambda op, s: f"{op['grid'][0] * op['grid'][1] * op['grid'][2] / s['sm_count']:.2f}",
}


@piece("kernel-value", captures=1, inline=True)
def kernel_value(build: Build, record, part, field):
    """One launch figure of the first kernel of `record` whose name holds `part`: registers, threads, blocks ..."""
    if field not in KERNEL_FIELDS:
        raise KeyError(f"unknown kernel field {field!r} (known: {', '.join(KERNEL_FIELDS)})")
    s = build.summary(record)
    op = next((op for op in s["ops"] if op["kind"] == "kernel" and part in op["name"]), None)
    if op is None:
        raise ValueError(f"no kernel of {record!r} has {part!r} in its name")
    return KERNEL_FIELDS[field](op, s)


@claim("grid", reads=lambda stage, tile="128": [names.record_name(stage, LONG_SHAPE)],
       flip=lambda stage, tile="128": Flip(f"{names.record_name(stage, LONG_SHAPE)}.json", _halve_longest_grid))
def grid(build: Build, stage, tile="128") -> Statement:
    """A stage's longest kernel at the long shape: one block per query tile of `tile` rows and head."""
    s = build.summary(names.record_name(stage, LONG_SHAPE))
    op = summary.longest_kernel(s)
    b, h, n, _ = s["shape"]
    rows = int(tile)
    blocks, tiles = summary.blocks(op), n // rows
    text = f"{blocks:,} blocks = {tiles} query tiles of {rows} rows × {h} heads{f' × {b} batches' if b > 1 else ''}"
    return Statement(text, blocks == tiles * h * b, f"grid {op['grid']}, shape {s['shape']}",
                     lesson=f"{blocks:,} blocks, one per query tile and head")


# ---- one quantity, several methods ---------------------------------------------------------------

@claim("rates", reads=lambda stage: [names.record_name(stage, LONG_SHAPE), f"{names.record_name(stage, LONG_SHAPE)}.counters",
                              "run-fastest", "run-sweep"],
       flip=lambda stage: Flip("run-fastest.json", in_run("fastest", lambda rows: [
           r.update(times_us=scale(r["times_us"], 0.5)) for r in rows if r["path"] == stage])))
def rates(build: Build, stage) -> Statement:
    """A stage's rate at the long shape by every method the site shows it with."""
    from ...analysis.flops import causal_flops, causal_tflops, tflops
    rec = names.record_name(stage, LONG_SHAPE)
    s = build.summary(rec)
    flops = causal_flops(s["shape"])
    kernel = summary.longest_kernel(s)
    profiler = tflops(flops, kernel["duration_us"])
    measured = build.counters(rec)
    ncu = tflops(flops, sum(k["duration_ns"] or 0 for k in measured["kernels"]) / 1e3) if measured else None
    fastest = {r["layout"]: r for r in build.run("fastest") if r["path"] == stage and "tflops" in r}
    sweep = [r for r in build.run("sweep") if r["path"] == stage and r["shape"][2:] == s["shape"][2:]
             and r.get("tflops_back_to_back")]
    capture = causal_tflops(s)
    f = lambda x: f"{x:.0f}"
    text = (f"{short(stage)} at S={s['shape'][2]:,}, D={s['shape'][3]} appears at several rates on this site, "
            f"one per method: {f(profiler)} TFLOP/s by its kernel's time in the profiler"
            + (f" and {f(ncu)} by Nsight Compute's" if ncu else "")
            + f" (the kernel alone, B={s['shape'][0]}); "
            f"{f(fastest['BSHD']['tflops_back_to_back'])} and {f(fastest['BHSD']['tflops_back_to_back'])} back to back "
            f"(stored [B, S, H, D] and [B, H, S, D], that chapter's table); {f(fastest['BSHD']['tflops'])} and "
            f"{f(fastest['BHSD']['tflops'])} one call at a time in the same run, and {f(capture)} one call at a time "
            f"in the capture's own run ([Fused kernels](fused.md))"
            + "".join(f"; {f(r['tflops_back_to_back'])} back to back at B={r['shape'][0]} in the sweep and the roofline "
                      f"figure" for r in sweep)
            + ". The kernel-only rates are the highest because they leave out the launches and the gaps between "
              "forwards; back to back pays those once per forward, and one call adds the time from the call to the "
              "kernel's start.")
    kernel_only = [profiler] + ([ncu] if ncu else [])
    b2b = [r["tflops_back_to_back"] for r in fastest.values()]
    one_call = [r["tflops"] for r in fastest.values()] + [capture]
    lesson = (f"{short(stage)}'s rate is highest by its kernel's time alone, {f(profiler)} TFLOP/s, and lowest one "
              f"call at a time, down to {f(min(one_call))}")
    return Statement(text, min(kernel_only) >= max(b2b) and min(b2b) > max(one_call), lesson=lesson,
                     rests_on=f"kernel {kernel_only}, back to back {b2b}, one call {one_call}")


@claim("cpu-saving", reads=lambda stage, against: [stage, against],
       flip=lambda stage, against: [Flip(f"{against}.json", each("cpu_forward_us", 10.0), ADAPTS, "below"),  # a saving
                                    Flip(f"{against}.json", widened("cpu_forward_us"), ADAPTS, "not told apart from"),
                                    Flip(f"{stage}.json", each("cpu_forward_us", 10.0))])  # dearer without the copy
def cpu_saving(build: Build, stage, against) -> Statement:
    """Whether a stage's forward takes less CPU time than another's, by the profiled forwards' spread. It
    may be less or not told apart; decidedly more contradicts the page (dropping a copy adds no CPU work)."""
    a, b = build.summary(stage), build.summary(against)
    ra, rb = samples(a["cpu_forward_us_each"]), samples(b["cpu_forward_us_each"])
    place = decide.order(ra, rb)
    text = (f"The annotated forward takes {ra.text(us)} of CPU time here against {rb.text(us)} for {short(against)} "
            f"(median and p10–p90 of {len(a['cpu_forward_us_each'])} profiled forwards, profiler on)")
    text += {-1: ": less, told apart from the forward-to-forward spread",
             0: ": not told apart, so this profile cannot say whether writing the mask in place saves CPU time; "
                "the forward-to-forward spread is larger than any difference",
             1: ": more"}[place]
    lesson = (f"Its CPU time per forward, {us(ra.median)} against {us(rb.median)} for {short(against)}, is "
              + {-1: "less", 0: "not told apart, so no CPU saving shows", 1: "more"}[place])
    return Statement(text, place <= 0, f"{ra} against {rb}", apart(ra, rb), lesson)


QUEUED_NEAR = 0.10  # a long forward's time queued and its one call lie this close: the launch is small beside it


@claim("queued-vs-one-call", reads=lambda stage: ["run-fastest"],
       flip=lambda stage: Flip("run-fastest.json", in_run("fastest", lambda rows: [
           r.update(times_us=scale(r["times_us"], 0.5)) for r in rows if r["path"] == stage])))
def queued_vs_one_call(build: Build, stage) -> Statement:
    """At the long shape a stage's time per forward queued back to back and its one call at a time lie within
    QUEUED_NEAR of each other in every layout: one call's launch is small beside the kernel. Which of the two
    is lower is not said: it moves from machine to machine by more than the run's own spread."""
    layouts = [r["layout"] for r in build.run("fastest") if r["path"] == stage and r.get("back_to_back_us_each")]
    if not layouts:
        raise RecordUnusable(f"the fastest-forward run has no row of {stage} timed back to back")
    pick = lambda layout, field: across(build, "fastest", lambda res: row(res, path=stage, layout=layout)[field])
    pairs = {l: (pick(l, "back_to_back_us_each"), pick(l, "times_us")) for l in layouts}
    gaps = {l: abs(q.median / one.median - 1) for l, (q, one) in pairs.items()}
    said = "; ".join(f"stored {l}, {q.text(us)} queued against {one.text(us)} for one call"
                     for l, (q, one) in pairs.items())
    text = (f"{short(stage)}'s time per forward queued and its time for one call at a time lie within "
            f"{math.ceil(100 * max(gaps.values()))} % of each other, either way round ({said}; "
            f"{next(iter(pairs.values()))[0].how}): beside a forward this long, the launch that one call adds is too "
            f"small to separate from the other differences between a lone call and a stream")
    lesson = (f"{short(stage)}'s queued and one-call times lie within {math.ceil(100 * max(gaps.values()))} % of each "
              f"other: beside a kernel this long, the launch is small")
    return Statement(text, max(gaps.values()) < QUEUED_NEAR, lesson=lesson,
                     rests_on=f"gaps {', '.join(f'{l} {pct(g)}' for l, g in gaps.items())} against {pct(QUEUED_NEAR)}")


def _graphs_row(build: Build, path: str) -> dict | None:
    """The eager row of the graphs run for an SDPA path at the post's shape, where that run has one."""
    try:
        rows = build.run("graphs")
    except RecordUnusable:  # the sentence leaves out what it would have said from the graphs run
        return None
    return next((r for r in rows if r.get("path") == f"SDPA {path}" and r.get("shape") == list(DEFAULT_SHAPE)
                 and "eager" in r), None)


@claim("one-call-runs", reads=["cudnn", "flash", names.record_name("cudnn", LONG_SHAPE), "run-graphs", "run-fastest"],
       flip=Flip("cudnn.json", events(0.5, of="forward_device_us_each")))  # one call below the device time
def one_call_runs(build: Build) -> Statement:
    """One call's CUDA-event median is a latency, above the device time, and it differs between runs; each
    comparison by the one rule."""
    parts, holds, moved = [], True, []
    for stage, label in (("cudnn", "cuDNN"), ("flash", "flash")):
        s, g = build.summary(stage), _graphs_row(build, label if stage == "flash" else "cuDNN")
        own, device = samples(s["event_times_us"]), samples(s["forward_device_us_each"])
        holds &= decide.order(own, device) == 1
        if g:
            other = across(build, "graphs", lambda res: row(res, path=g["path"], where=g["where"])["eager"]["times_us"])
            parts.append(f"{label}'s is {own.text(us)} in its capture's run and {other.text(us)} in the CUDA-graph run "
                         f"of [What CUDA graphs and compile change](graphs-and-compile.md)")
            holds &= decide.order(other, device) == 1
            moved += [label] if decide.told_apart(own, other) else []
    long = build.summary(names.record_name("cudnn", LONG_SHAPE))
    own, device = samples(long["event_times_us"]), samples(long["forward_device_us_each"])
    holds &= decide.order(own, device) == 1
    fast = next((r for r in build.run("fastest") if r["path"] == "cudnn" and r.get("layout", "BHSD") == "BHSD"), None)
    if fast:
        other = across(build, "fastest", lambda res: row(res, path="cudnn", layout=fast.get("layout"))["times_us"])
        holds &= decide.order(other, device) == 1
        moved += ["cuDNN's at the long shape"] if decide.told_apart(own, other) else []
        parts.append(f"cuDNN's at B=1, S=8,192, D=128 is {own.text(us)} in its capture's run and {other.text(us)} in "
                     f"the fastest-forward run of [Roofline](roofline.md), over {device.text(us)} of device time")
    text = ("One call's CUDA-event median is a latency, the kernels plus the launch and whatever the host did "
            "before it, always above the device time, and not a property of the kernels alone: each run measures its "
            "own. At the post's shape " + "; ".join(parts) + " (median and range of each run's calls: p10–p90 of one "
            "process, or across the run's processes). "
            + (f"Of these, {listed(moved)} differ between the two runs by more than their spread. " if moved else
               "Here each pair agrees within its spread. ")
            + "Each table names the run its numbers come from.")
    lesson = ("One call's time is a latency above the device time, and each run measures its own"
              + (f": {listed(moved)} differ between two runs" if moved else ": here each pair of runs agrees"))
    return Statement(text, holds, "; ".join(parts), lesson=lesson)


def _timed(stage: str, shape=DEFAULT_SHAPE, pick=lambda r: r["one_call_us"]):
    """A stage's samples in the timing run (one call's CUDA-event times, unless `pick` says otherwise)."""
    return lambda result: pick(row(result["rows"], stage=stage, shape=list(shape)))


@claim("cudnn-fastest", reads=["run-timing", "math", "efficient", "flash", "cudnn"],
       flip=[Flip("run-timing.json", scaled_row("timing", "one_call_us", 3.0, stage="cudnn", shape=list(DEFAULT_SHAPE))),
             Flip("cudnn.json", each("forward_device_us", 3.0))])  # the capture's median no longer the fastest
def cudnn_fastest(build: Build) -> Statement:
    """cuDNN is the fastest SDPA backend at the post's shape, by device time and by one call, told apart
    from every other by the one rule over the timing run's separate processes."""
    backends = ("math", "efficient", "flash", "cudnn")
    device = {b: across(build, "timing", _timed(b, pick=lambda r: r["profiled"]["device_us"])) for b in backends}
    event = {b: across(build, "timing", _timed(b)) for b in backends}
    # cuDNN against the fastest of the others, whether or not cuDNN leads
    rival, rival_event = (min((b for b in backends if b != "cudnn"), key=lambda b: rows[b].median)
                          for rows in (device, event))
    first = [decide.ranking(rows)[0] for rows in (device, event)]
    by_call = (f"and by one call's CUDA-event median too ({event['cudnn'].text(us)} against {short(rival_event)}'s "
               f"{event[rival_event].text(us)})" if first[1] == ["cudnn"] else
               f"though by one call's CUDA-event median it is not told apart from "
               f"{' and '.join(short(b) + chr(39) + 's' for b in first[1] if b != 'cudnn')} ({event['cudnn'].text(us)} "
               f"against {event[rival_event].text(us)})")
    text = (f"the fastest SDPA backend by device time in the timing run ({device['cudnn'].text(us)} against "
            f"{short(rival)}'s {device[rival].text(us)}), {by_call}; {device['cudnn'].how}")
    captured = {b: build.summary(b)["forward_device_us"] for b in ("cudnn", rival)}  # as the tables state them
    said = {b: build.number(b, DEVICE, MEDIAN, us(x)) for b, x in captured.items()}
    lesson = (f"the fastest SDPA backend by device time, {said['cudnn']} against {short(rival)}'s "
              f"{said[rival]}, " + ("and by one call too" if first[1] == ["cudnn"] else
                                                  f"though by one call it is not told apart from {listed([short(b) for b in first[1] if b != 'cudnn'])}"))
    return Statement(text, first[0] == ["cudnn"] and "cudnn" in first[1] and captured["cudnn"] < captured[rival],
                     lesson=lesson,
                     rests_on=f"first by device {first[0]}, by one call {first[1]}")


def hopper_kernels(build: Build) -> list[str]:
    """The fused stages whose longest kernel at the long shape is built for Hopper (its name says sm_90)."""
    out = []
    for stage in select(fused=True):
        record = names.record_name(stage, LONG_SHAPE)
        if record in build.problems:
            raise RecordUnusable(build.problems[record])
        if not build.is_unavailable(record):
            if kernel_names.explain(summary.longest_kernel(build.summary(record))["name"])["arch"] == "sm_90":
                out.append(stage)
    return out


@claim("flash-vs-hopper-kernels", reads=[names.record_name(s, LONG_SHAPE) for s in select(fused=True)],
       flip=Flip(f"{names.record_name('flash', LONG_SHAPE)}.json",
                 lambda s: summary.longest_kernel(s).update(duration_us=summary.longest_kernel(s)["duration_us"] / 4)))
def flash_vs_hopper_kernels(build: Build) -> Statement:
    """SDPA's flash kernel at the long shape against the Hopper kernels, by profiled kernel time."""
    def kernel_us(stage):
        return summary.longest_kernel(build.summary(names.record_name(stage, LONG_SHAPE)))["duration_us"]
    ratio = {s: kernel_us(s) / kernel_us("flash") for s in hopper_kernels(build)}  # flash's rate over theirs
    text = ("runs at " + " and ".join(f"{pct(r)} of {short(s)}'s rate" for s, r in ratio.items())
            + " (kernel time in the profiler, the table above)")
    lesson = "runs at " + " and ".join(f"{pct(r)} of {short(s)}'s rate" for s, r in ratio.items())
    return Statement(text, bool(ratio) and max(ratio.values()) < 1, f"{ratio}", lesson=lesson)


@claim("causal-halves", reads=[names.cp_record(LONGEST_CP, balanced=False)],
       flip=Flip(f"{names.cp_record(LONGEST_CP, balanced=False)}.json",
                 lambda s: s["ranks"][1].update(causal_pairs=2 * s["ranks"][0]["causal_pairs"])))
def causal_halves(build: Build) -> Statement:
    """Contiguous halves of a causal sequence: how many more (query, key) pairs the later half holds."""
    s = build.summary(names.cp_record(LONGEST_CP, balanced=False))
    first, last = (r["causal_pairs"] for r in s["ranks"])
    text = (f"{last / first:.0f} times as many keys as rank 0's ({last:,} causal (query, key) pairs against "
            f"{first:,})")
    return Statement(text, abs(last / first - 3) < 0.01, f"pairs {first} and {last}",
                     lesson=f"{last / first:.0f} times as many keys as rank 0's")


# ---- what torch.compile made of the naive forward ----------------------------------------------

def kernels_of(build: Build, record: str) -> list[str]:
    return [op["name"] for op in build.summary(record)["ops"] if op["kind"] == "kernel"]


@claim("inductor-fused", reads=lambda compiled="naive_compiled", eager="naive": [compiled, eager],
       flip=lambda compiled="naive_compiled", eager="naive": Flip(
           f"{compiled}.json", lambda s: s["ops"].append(dict(s["ops"][0], kind="memcpy", name="Memcpy DtoD"))))
def inductor_fused(build: Build, compiled="naive_compiled", eager="naive") -> Statement:
    """Which eager kernels Inductor replaced by generated Triton kernels, and which it left alone."""
    mine, theirs = kernels_of(build, compiled), kernels_of(build, eager)
    generated = [k for k in mine if k.startswith("triton_")]
    kept = [k for k in mine if not k.startswith("triton_")]
    replaced = [kernel_names.label(k) for k in theirs if k not in kept]
    copies = [op for op in build.summary(eager)["ops"] if op["kind"] == "memcpy"]
    copied = f" and {count(len(copies))} cop{'ies' if len(copies) != 1 else 'y'}" if copies else ""
    lists = "; ".join(f"`{m.group(1)}`" for k in generated if (m := re.match(r"triton_[a-z]+_fused_+(.*?)_\d+$", k)))
    text = (f"the {count(len(replaced))} eager kernels{copied} between the matmuls "
            f"({', '.join(f'`{r}`' for r in replaced)}) "
            f"became {count(len(generated))} generated Triton kernel{'s' if len(generated) != 1 else ''} (its name lists "
            f"what it fused: {lists}), and the {count(len(kept))} matmul kernels are the eager forward's own "
            f"({', '.join(sorted({kernel_names.explain(k)['library'] for k in kept}))})")
    gone = not any(op["kind"] == "memcpy" for op in build.summary(compiled)["ops"])
    lesson = (f"the {count(len(replaced))} eager kernels{copied} between the matmuls became {count(len(generated))} "
              f"generated Triton kernel{'s' if len(generated) != 1 else ''}, and the matmuls stayed the eager ones")
    return Statement(text, bool(generated) and all(k in theirs for k in kept) and gone, f"{mine} against {theirs}",
                     lesson=lesson)


@claim("between", reads=lambda stage, slower, faster: [stage, slower, faster],
       flip=lambda stage, slower, faster: Flip(f"{stage}.json", events(10.0)))
def between(build: Build, stage, slower, faster) -> Statement:
    """A stage's one-call time between two others' (CUDA-event samples of the captures), told apart from
    both by the one rule."""
    a, b, c = (samples(build.summary(r)["event_times_us"]) for r in (stage, slower, faster))
    text = (f"{a.text(us)} per forward (CUDA-event median and p10–p90 of one call, {shape_text(DEFAULT_SHAPE)}) "
            f"against {b.text(us)} for {short(slower)} and {c.text(us)} for {short(faster)}: "
            f"{times(b.median / a.median)} faster than the first, {times(a.median / c.median)} slower than the second")
    lesson = (f"{times(b.median / a.median)} faster than {short(slower)} and {times(a.median / c.median)} slower than "
              f"{short(faster)}, one call each")
    return Statement(text, decide.order(c, a) == -1 and decide.order(a, b) == -1, f"{a} between {c} and {b}",
                     lesson=lesson)


def _rename_generated(s):
    next(op for op in s["ops"] if op["name"].startswith("triton_"))["name"] = "triton_red_fused_other_0"


@claim("same-kernels", reads=lambda a, b: [a, b],
       flip=lambda a, b: [Flip(f"{b}.json", _rename_generated, ADAPTS),
                          Flip(f"{b}.json", each("forward_device_us", 1.5), ADAPTS)])
def same_kernels(build: Build, a, b) -> Statement:
    """Whether two compiled variants run the same kernels and, if so, whether those take the same device
    time (the one rule); then their one-call times."""
    ka, kb = kernels_of(build, a), kernels_of(build, b)
    if ka != kb:
        text = (f"generates different kernels ({', '.join(f'`{kernel_names.label(k)}`' for k in kb if k not in ka)} in "
                f"place of {', '.join(f'`{kernel_names.label(k)}`' for k in ka if k not in kb)})")
        return Statement(text, bool(ka) and bool(kb), f"{ka} against {kb}", "different kernels",
                         "generates different kernels")
    sa, sb = build.summary(a), build.summary(b)
    da, db = samples(sa["forward_device_us_each"]), samples(sb["forward_device_us_each"])
    ta, tb = samples(sa["event_times_us"]), samples(sb["event_times_us"])
    same = decide.order(db, da) == 0
    text = (f"generates the same {count(len(kb))} kernels, which take {db.text(us)} against {da.text(us)} of device "
            f"time (profiler, median and p10–p90 of {len(sb['forward_device_us_each'])} forwards)"
            + (": not told apart, so once compiled, the difference between `masked_fill` and `masked_fill_` is gone "
               "from the GPU" if same else f": {'more' if decide.order(db, da) > 0 else 'less'}, told apart")
            + f". One call takes {tb.text(us)} against {ta.text(us)} (CUDA-event median and p10–p90 of "
              f"{len(sb['event_times_us'])} calls), "
            + {0: "not told apart", 1: "longer, told apart", -1: "shorter, told apart"}[decide.order(tb, ta)]
            + ("; as the kernels take the same time, that difference lies outside them"
               if same and decide.told_apart(tb, ta) else ""))
    lesson = (f"generates the same {count(len(kb))} kernels, "
              + ("which take the same device time" if same else
                 f"which take {'more' if decide.order(db, da) > 0 else 'less'} device time"))
    return Statement(text, bool(kb), f"device {db} against {da}, one call {tb} against {ta}",
                     f"same kernels, device {apart(db, da)}, one call {apart(tb, ta)}", lesson)


def point(x: float) -> decide.Range:
    """One measured value, with no spread recorded."""
    return decide.Range(x, x, x, 1, decide.SAMPLES)


@claim("second-compile", reads=lambda first="naive_compiled", second="inplace_compiled": [first, second],
       flip=lambda first="naive_compiled", second="inplace_compiled": [
           Flip(f"{second}.json", setting(first_call_ms=0.05)),  # a first call quicker than a compiled one
           Flip(f"{second}.json", setting(first_call_ms=5000.0), ADAPTS)])  # no cache to infer
def second_compile(build: Build, first="naive_compiled", second="inplace_compiled") -> Statement:
    """The first call of two compiled stages taken one after the other in one process: each pays for its
    compilation (decidedly above its compiled one-call times); the second much less where it runs the
    same kernels."""
    sa, sb = build.summary(first), build.summary(second)
    fa, fb = sa["first_call_ms"], sb["first_call_ms"]
    pays = all(decide.order(point(s["first_call_ms"] * 1e3), samples(s["event_times_us"])) == 1 for s in (sa, sb))
    text = f"{ms(fa)} here, and {ms(fb)} for the second"
    cached = kernels_of(build, first) == kernels_of(build, second) and fb < fa / 2
    if cached:
        text += (": it runs the same kernels, and compiled after the first in the same process (as `regenerate` "
                 "and `capture all` take them) Inductor most likely found their code in its cache (an inference: "
                 "the capture does not record cache hits)")
    lesson = f"{ms(fa)} here, and {ms(fb)} for the second" + (", which most likely found its kernels' code in Inductor's cache" if cached else "")
    return Statement(text, pays, f"{fa:.0f} and {fb:.0f} ms, one call {sa['event_median_us']:.0f} and "
                     f"{sb['event_median_us']:.0f} µs", "cached" if cached else "not cached", lesson)


@claim("graph-gains", reads=["run-graphs"],
       flip=Flip("run-graphs.json", in_run("graphs", lambda rows: [
           r["graph"].update(times_us=scale(r["graph"]["times_us"], 3.0)) for r in rows
           if r.get("path") == "SDPA flash" and r.get("shape") == list(DEFAULT_SHAPE) and "graph" in r])))
def graph_gains(build: Build) -> Statement:
    """What a CUDA graph replay saves one call (CUDA-event samples of the graphs run), at the post's shape
    and at the decode steps, and which path gains most where; each comparison by the one rule."""
    rows = [r for r in build.run("graphs") if "error" not in r]
    pick = lambda r, side: across(build, "graphs", lambda res: row(res, where=r["where"], path=r["path"])[side]["times_us"])
    eager, graph = ({(r["where"], r["path"]): pick(r, side) for r in rows} for side in ("eager", "graph"))
    speedup = {k: _speedup(eager[k], graph[k]) for k in eager}
    places = list(dict.fromkeys(w for w, _ in eager))
    kv = {r["where"]: r.get("kv_len") for r in rows}
    saves = "; ".join(f"{us(eager[k].median - graph[k].median)} of {escape(k[1])}'s {eager[k].text(us)}, "
                      f"{pct(1 - graph[k].median / eager[k].median)}" for k in eager if k[0] == places[0])
    at = lambda w: [v.median for (w2, _), v in speedup.items() if w2 == w]
    replayed = lambda w: min((v for (w2, _), v in graph.items() if w2 == w), key=lambda v: v.median)
    first, last = places[1], places[-1]
    most = {}  # the path that gains most, with those not told apart from it -> where
    for w in places:
        top = front({p: v for (w2, p), v in speedup.items() if w2 == w}, largest=True)
        most.setdefault(tuple(top), []).append(w)
    where = lambda ws: ("every decode step" if ws == places[1:] else listed(
        ["the post's shape"] * (places[0] in ws) + [f"KV {kv[w]:,}" for w in ws if w != places[0]]))
    gains = lambda top: (f"the most is gained by {escape(top[0])}" if len(top) == 1 else
                         f"{escape(top[0])} gains most, not told apart from " + listed([escape(p) for p in top[1:]]))
    text = (f"At {escape(places[0])} a replay saves {saves}, one call each (CUDA events: {next(iter(eager.values())).how}). "
            f"At a decode step "
            f"with a KV cache of {kv[first]:,} the replay is {times(min(at(first)))}–{times(max(at(first)))} faster per "
            f"call; at {kv[last]:,}, {times(min(at(last)))}–{times(max(at(last)))}: the fastest replayed call grows "
            f"from {replayed(first).text(us)} to {replayed(last).text(us)} as the kernel reads more K and V. "
            + "; ".join(f"{'at' if i else 'At'} {where(ws)}, {gains(top)}" for i, (top, ws) in enumerate(most.items())))
    faster = all(decide.order(graph[k], eager[k]) == -1 for k in eager)
    grows = decide.order(replayed(first), replayed(last)) == -1
    saved = [1 - graph[k].median / eager[k].median for k in eager if k[0] == places[0]]
    lesson = (f"A replay saves {pct(min(saved))} to {pct(max(saved))} of one call at the post's shape, and gains most "
              f"at short decode steps, where the launch is most of the call")
    return Statement(text, len(places) > 2 and faster and grows, lesson=lesson,
                     rests_on=f"replay faster everywhere: {faster}, grows: {grows}; "
                     f"{ {k: round(v.median, 2) for k, v in speedup.items()} }", outcome=str(most))


def _speedup(eager: decide.Range, graph: decide.Range) -> decide.Range:
    """Eager over graph, from the two ranges: its extremes pair one's end with the other's start."""
    return decide.Range(eager.median / graph.median, eager.lo / graph.hi, eager.hi / graph.lo,
                        min(eager.n, graph.n), eager.basis)


@claim("reduce-overhead", reads=lambda reduce="naive_reduce", default="naive_compiled": [reduce, default],
       flip=lambda reduce="naive_reduce", default="naive_compiled": [
           Flip(f"{reduce}.json", events(0.5), ADAPTS),  # faster than the default mode
           Flip(f"{reduce}.json", lambda s: s.update(ops=[o for o in s["ops"] if o["kind"] != "memcpy"]))])
def reduce_overhead(build: Build, reduce="naive_reduce", default="naive_compiled") -> Statement:
    """torch.compile's reduce-overhead mode against the default mode per call (the one rule), and the
    share of the difference its input copies account for on the GPU; the copies are work the default mode
    does not do."""
    sr, sd = build.summary(reduce), build.summary(default)
    a, b = samples(sr["event_times_us"]), samples(sd["event_times_us"])
    copies = [op["duration_us"] for op in sr["ops"] if op["kind"] == "memcpy"]
    place = decide.order(a, b)
    text = (f"the graph replay with its copies takes {a.text(us)} per forward against {b.text(us)} for the default "
            f"mode (CUDA-event median and p10–p90 of one call): "
            + {1: "slower", -1: "faster, the copies included", 0: "not told apart"}[place])
    if place == 1:
        share = sum(copies) / (a.median - b.median)
        text += (f"; the {count(len(copies))} copies themselves take {us(sum(copies))} of device time (profiler), "
                 f"{pct(share)} of that difference, so "
                 + ("most of it lies elsewhere, on the host side of the compiled wrapper most likely (an inference: "
                    "the capture does not split it)" if share < 0.5 else "they account for most of it"))
    own = any(op["kind"] == "memcpy" for op in sd["ops"])
    lesson = (f"the graph replay with its copies takes {us(a.median)} per forward against {us(b.median)} for the "
              f"default mode: " + {1: "slower", -1: "faster", 0: "the two are not told apart"}[place])
    return Statement(text, bool(copies) and not own, f"{a} against {b}, copies {sum(copies):.1f} µs, "
                     f"the default mode's own copies: {own}", apart(a, b), lesson)


def _difference(build: Build, key, one: decide.Range, queued: decide.Range) -> decide.Range:
    """One call's time less the back-to-back time, for a path and layout of the fastest-forward run: the
    difference of the medians over all processes, and its range, the span of each process's own difference
    (one process: the widest difference the two p10–p90 ranges allow)."""
    if one.basis != decide.REPEATS:
        return decide.Range(one.median - queued.median, one.lo - queued.hi, one.hi - queued.lo, one.n, one.basis)
    each = [statistics.median(r["times_us"]) - statistics.median(r["back_to_back_us_each"])
            for r in (row(res, path=key[0], layout=key[1]) for res in build.repeats("fastest"))]
    return decide.Range(one.median - queued.median, min(each), max(each), len(each), decide.REPEATS)


@claim("pays-most", reads=["run-fastest"],
       flip=Flip("run-fastest.json", in_run("fastest", lambda rows: [
           r.update(times_us=scale(r["times_us"], 2.0)) for r in rows if r["path"] == "flash"
           and r["layout"] == "BSHD"]), ADAPTS))
def pays_most(build: Build) -> Statement:
    """Which path of the fastest-forward run adds most to one call over its back-to-back time; paths whose
    extra time cannot be told apart (the one rule) share the first place."""
    keys = [(r["path"], r["layout"]) for r in build.run("fastest") if r.get("back_to_back_us_each") and r.get("times_us")]
    pick = lambda k, f: across(build, "fastest", lambda res: row(res, path=k[0], layout=k[1])[f])
    one = {k: pick(k, "times_us") for k in keys}
    queued = {k: pick(k, "back_to_back_us_each") for k in keys}
    extra = {k: _difference(build, k, one[k], queued[k]) for k in keys}
    top = front(extra, largest=True)
    label = lambda k: f"{short(k[0])} stored {k[1]}"
    if len(top) == 1:
        k = top[0]
        rest = max((x for x in keys if x != k), key=lambda x: extra[x].median)
        text = (f"{label(k)} pays most there, {extra[k].text(us)} per call ({one[k].text(us)} one call against "
                f"{queued[k].text(us)} back to back), then {label(rest)}, {extra[rest].text(us)}")
    else:
        k = top[0]
        text = (f"{label(k)} pays most there, {extra[k].text(us)} per call over back to back, though not told apart "
                f"from these: " + "; ".join(f"{label(x)}, {extra[x].text(us)}" for x in top[1:]))
    text += f" ({one[top[0]].how})"
    lesson = (f"{label(top[0])} pays most, {us(extra[top[0]].median)} per call over back to back"
              + (f", not told apart from {count(len(top) - 1)} other{'s' if len(top) > 2 else ''}" if len(top) > 1 else ""))
    holds = len(top) < len(keys) and decide.order(one[top[0]], queued[top[0]]) == 1  # the leader's extra is real
    return Statement(text, holds, ", ".join(f"{label(k)} {extra[k].median:.1f}" for k in keys), str(top), lesson)


@claim("kernel-ahead", reads=lambda a, b: [a, b],
       flip=lambda a, b: [Flip(f"{a}.json", each("forward_device_us", 1.5), ADAPTS),
                          Flip(f"{b}.json", setting(shape=list(DEFAULT_SHAPE)))])  # then the two are not alike
def kernel_ahead(build: Build, a, b) -> Statement:
    """Which of two captures' forwards takes less device time (profiler, the one rule), and by how much: a
    comparison that holds only between forwards of one shape and dtype, which the sentence names once."""
    ra, rb = (samples(build.summary(r)["forward_device_us_each"]) for r in (a, b))
    name = lambda r: short(names.parse_record(r)[0])
    how = (f"profiler, median and p10–p90 of {len(build.summary(a)['forward_device_us_each'])} profiled forwards, "
           f"{shape_text(build.summary(a)['shape'])}")
    place = decide.order(ra, rb)
    if place == 0:
        text = (f"{name(a)}'s and {name(b)}'s forwards are not told apart by device time: {ra.text(us)} against "
                f"{rb.text(us)} ({how})")
    else:
        (first, lo), (second, hi) = sorted(((a, ra), (b, rb)), key=lambda x: x[1].median)
        text = (f"{name(first)}'s forward takes {lo.text(us)} of device time against {hi.text(us)} for "
                f"{name(second)} ({how}), {pct(1 - lo.median / hi.median)} less")
    alike = all(build.summary(a)[k] == build.summary(b)[k] for k in ("shape", "dtype"))
    lesson = (f"{name(a)}'s and {name(b)}'s forwards are not told apart by device time" if place == 0 else
              f"{name(first)}'s forward takes {us(lo.median)} of device time against {us(hi.median)} for {name(second)}")
    return Statement(text, alike and ra.n > 1 and rb.n > 1, f"{ra} against {rb}; alike: {alike}", apart(ra, rb), lesson)


# ---- Nsight Compute's verdicts ------------------------------------------------------------------

@claim("verdict", reads=lambda record, part, expect=None: [f"{record}.counters"],
       flip=lambda record, part, expect=None: Flip(f"{record}.counters.json", _other_verdict(part),
                                                   FALSE if expect else ADAPTS))
def verdict(build: Build, record, part, expect=None) -> Statement:
    """What Nsight Compute's rule makes of the kernels of a record whose name is `part` (or holds it): one
    verdict for them all, and `expect`'s where the page's words around it need that one."""
    from ...analysis import counters
    ks = _kernels_named(build.counters_of(record)["kernels"], part)
    found = sorted({counters.verdict(k) for k in ks})
    both = lambda field: " and ".join(f"{k[field]:.1f} %" for k in ks)
    text = (f"{' and '.join(found)} by Nsight Compute's rule (SM throughput {both('sm_throughput_pct')}, memory "
            f"throughput {both('memory_throughput_pct')} of peak)")
    return Statement(text, len(found) == 1 and (expect is None or found == [expect]),
                     f"{len(ks)} kernel(s) named {part!r}: {found}, the page needs {expect or 'any one'}", str(found),
                     f"{' and '.join(found)} by Nsight Compute's rule")


def _kernels_named(kernels: list[dict], part: str) -> list[dict]:
    from ...analysis import counters
    return [k for k in kernels if counters.base_name(k["name"]) == part] or [k for k in kernels if part in k["name"]]


def _other_verdict(part: str):
    """The counted kernels named `part` made clearly memory-bound, or clearly compute-bound where they were
    memory-bound: another verdict, whatever theirs was."""
    from ...analysis import counters

    def change(c):
        for k in _kernels_named(c["kernels"], part):
            sm, mem = (90.0, 20.0) if counters.verdict(k) == "memory-bound" else (20.0, 90.0)
            k.update(sm_throughput_pct=sm, memory_throughput_pct=mem)
    return change


@claim("cpu-rank", reads=lambda stage, *others: ["run-timing"],
       flip=lambda stage, *others: Flip("run-timing.json", in_run("timing", lambda r: [
           x.update(enqueue_us=scale(x["enqueue_us"], 10.0)) for x in r["rows"]
           if x["stage"] == stage and tuple(x["shape"]) == DEFAULT_SHAPE]), ADAPTS))
def cpu_rank(build: Build, stage, *others) -> Statement:
    """Where a stage's CPU cost per forward ranks among others at the post's shape, by the timing run's
    unprofiled CPU enqueue: above or below each, or not told apart from it (the one rule)."""
    from ...analysis import timing
    enqueue = {s: across(build, "timing", lambda res, s=s: timing.find(res["rows"], s, DEFAULT_SHAPE)["enqueue_us"])
               for s in (stage, *others)}
    mine = enqueue[stage]
    words = {"above": [], "below": [], "not told apart from": []}
    tied = [short(o) for o in others if apart(mine, enqueue[o]) == "not told apart from"]
    for other in others:
        words[apart(mine, enqueue[other])].append(f"{short(other)}'s {enqueue[other].text(us)}")
    said = "; ".join(f"{w} {' and '.join(v)}" for w, v in words.items() if v)
    n = len(others)
    rank = ("the most expensive of these here" if len(words["above"]) == n
            else "the cheapest of these here" if len(words["below"]) == n
            else "not the most expensive of these here" if words["below"]
            else "this run cannot rank it among them" if len(words["not told apart from"]) == n
            else f"tied with {' and '.join(tied)} as the most expensive of these here")
    text = (f"by unprofiled CPU enqueue (host clock, back-to-back calls, per forward, {mine.how}, "
            f"{shape_text(DEFAULT_SHAPE)}), {short(stage)} takes {mine.text(us)}: {said}, so {rank}")
    # the ranking's own groups bear out an outright first or last place
    groups = decide.ranking(enqueue)
    holds = {"the most expensive of these here": groups[-1] == [stage],
             "the cheapest of these here": groups[0] == [stage]}.get(rank, True)
    lesson = f"without the profiler, {short(stage)}'s CPU enqueue takes {us(mine.median)} per forward, so {rank}"
    return Statement(text, holds, f"{ {k: round(v.median, 1) for k, v in enqueue.items()} }, groups {groups}", rank,
                     lesson)


@claim("cudnn-cpu-inside", reads=["cudnn"], flip=Flip("cudnn.trace.json.gz", _shrink_cpu_op("aten::_cudnn_attention_forward")))
def cudnn_cpu_inside(build: Build) -> Statement:
    """Where cuDNN's forward spends its CPU time: inside `_cudnn_attention_forward`, in the pictured forward."""
    _, shown = build.forwards("cudnn")
    inside = next(c.duration_us for c in shown.cpu_ops if c.name == "aten::_cudnn_attention_forward")
    text = (f"{pct(inside / shown.cpu_us)} of it ({us(inside)} of {us(shown.cpu_us)}, profiler) inside "
            f"`_cudnn_attention_forward`")
    return Statement(text, inside / shown.cpu_us > 0.5, f"{inside:.1f} of {shown.cpu_us:.1f} µs",
                     lesson=f"{pct(inside / shown.cpu_us)} of it inside `_cudnn_attention_forward`")


@claim("flash-register-limit", reads=["flash"],
       flip=Flip("flash.json", lambda s: next(o for o in s["ops"] if "flash_fwd" in o["name"]).update(registers=32)))
def flash_register_limit(build: Build) -> Statement:
    """FlashAttention-2's occupancy from its registers: what a warp takes, how many warps and blocks fit."""
    import math
    from ...analysis import occupancy
    s = build.summary("flash")
    op = next(op for op in s["ops"] if "flash_fwd" in op["name"])
    props = build.device_properties("flash")
    threads = summary.threads(op)
    per_warp = math.ceil(op["registers"] * 32 / occupancy.REG_ALLOC_UNIT) * occupancy.REG_ALLOC_UNIT
    t = occupancy.theoretical(op["registers"], threads, op["shared_memory"] or 0, props)
    text = (f"a warp then needs {per_warp:,} of the SM's {props['regsPerMultiprocessor']:,} registers, so only "
            f"{t['warps_per_sm']} warps, {t['blocks_per_sm']} blocks of {threads} threads, fit")
    lesson = f"only {t['warps_per_sm']} warps fit, because a warp then needs {per_warp:,} of the SM's registers"
    return Statement(text, t["limiter"] == "registers", f"{op['registers']} registers, {threads} threads, {t}",
                     lesson=lesson)


def _sweep_ranges(build: Build) -> dict:
    """Each point of the sweep, (head dim, S) -> path -> its time per forward back to back, as a range across
    the sweep's processes; a path that ran in none of them (out of memory) is left out of its point, one that
    ran in some but not all makes the run unusable (`across`)."""
    ranges = {}
    for r in build.run("sweep"):
        try:
            time = measured(build, "sweep", row_where(path=r["path"], shape=r["shape"]))
        except KeyError:
            continue
        ranges.setdefault((r["shape"][3], r["shape"][2]), {})[r["path"]] = time
    return ranges


def _how(ranges: dict) -> str:
    """How the sweep's ranges were had (every one alike): over its processes, or one process's p10–p90."""
    return next(iter(next(iter(ranges.values())).values())).how


def _at(points) -> str:
    """(head dim, S) points in words: "head dim 64, S=4,096, and at head dim 128, S=2,048 and S=4,096"."""
    by_dim = {}
    for d, n in sorted(points):
        by_dim.setdefault(d, []).append(f"S={n:,}")
    return ", and at ".join(f"head dim {d}, {listed(ns)}" for d, ns in by_dim.items())


@claim("leads-long", reads=lambda stage: ["run-sweep"],
       flip=lambda stage: Flip("run-sweep.json", _longest_slower(stage, 10.0)))  # it no longer leads there
def leads_long(build: Build, stage) -> Statement:
    """Where a stage leads the sweep (time per forward back to back, the one rule): from some length up,
    at every head dim; the points where it is not told apart from the fastest other are named, their
    ranges in the table of points (`leads-long-points`)."""
    ranges = _sweep_ranges(build)
    lead = {k: front(v) for k, v in ranges.items()}
    dims = sorted({d for d, _ in lead})
    starts, ties, below, holds = {}, {}, set(), True
    for d in dims:
        ns = sorted(n for dd, n in lead if dd == d)
        alone = [n for n in ns if lead[d, n] == [stage]]
        if not alone:
            holds = False
            continue
        start = alone[0]
        holds &= all(stage in lead[d, n] for n in ns if n >= start) and ns[-1] in alone
        below |= {p for n in ns if n < start and stage not in lead[d, n] for p in lead[d, n]}
        for n in ns:
            if stage in lead[d, n] and n not in alone:
                ties.setdefault(tuple(sorted(p for p in lead[d, n] if p != stage)), []).append((d, n))
        starts.setdefault(start, []).append(d)
    holds &= bool(below)
    parts = [f"from S={n:,} at head dim{'s' if len(ds) > 1 else ''} {listed([str(d) for d in ds])}"
             for n, ds in starts.items()]
    how = _how(ranges)
    text = (f"It leads {' and '.join(parts)}, at every longer sequence"
            + "".join(f"; it is not told apart from {listed([short(p) for p in others])} at {_at(points)}"
                      for others, points in ties.items())
            + f"; at the other, shorter lengths {listed([short(p) for p in sorted(below)]) or 'no one'} "
            f"lead{'s' if len(below) == 1 else ''} (time per forward back to back, {how}: every point in the "
            "table below)") if parts else "It leads nowhere in this sweep"
    lesson = (f"{short(stage)} leads nowhere in this sweep" if not parts else
              f"{short(stage)} is the fastest from S={next(iter(starts)):,} up, at every head dim" if len(starts) == 1
              else f"{short(stage)} is the fastest at the longest sequences, at every head dim")
    if parts:
        lesson += f"; at shorter ones, {listed([short(p) for p in sorted(below)]) or 'no one'} lead{'s' if len(below) == 1 else ''}"
    return Statement(text, holds, f"the paths at the front: { {k: v for k, v in sorted(lead.items())} }",
                     str(sorted(lead.items())), lesson)


@piece("leads-long-points")
def leads_long_points(build: Build, stage, d):
    """The evidence of `leads-long` at one head dim: at each length, the stage's time and the fastest
    other path's, each a range across the sweep's processes, and who is in front by the one rule."""
    points, rows = _sweep_ranges(build), []
    for (dim, n), paths in sorted(points.items()):
        if dim != int(d) or stage not in paths or len(paths) < 2:
            continue
        other = min((p for p in paths if p != stage), key=lambda p: paths[p].median)
        at_front = front(paths)
        rows.append((f"{n:,}", paths[stage].text(us), f"{short(other)} {paths[other].text(us)}",
                     listed([short(p) for p in at_front]) + (" (not told apart)" if len(at_front) > 1 else "")))
    if not rows:
        raise ValueError(f"the sweep has no point at head dim {d} where {stage!r} ran beside another path")
    how = _how(points)
    return tables.table(["S", short(stage), "fastest other", "in front"], rows, "rrrl") + (
        f"\n\nTime per forward back to back at head dim {d}: {how}.")


def _longest_slower(stage: str, factor: float):
    """A run of the sweep with `stage` `factor` times slower back to back at the longest sequence."""
    def edit(rows):
        longest = max(r["shape"][2] for r in rows)
        for r in rows:
            if r["path"] == stage and r["shape"][2] == longest and r.get("back_to_back_us_each"):
                r["back_to_back_us_each"] = scale(r["back_to_back_us_each"], factor)
    return in_run("sweep", edit)


@claim("layout-gap", reads=lambda stage: ["run-fastest"],
       flip=lambda stage: [Flip("run-fastest.json", in_run("fastest", _slower_rows(stage, "BHSD", 0.85)), ADAPTS),
                           Flip("run-fastest.json", in_run("fastest", _slower_rows(stage, "BHSD", 3.0)))])
def layout_gap(build: Build, stage) -> Statement:
    """A stage is the fastest forward stored either way in the fastest-forward run (told apart from the
    next, the one rule), and its two layouts against each other."""
    rows = [r for r in build.run("fastest") if r.get("back_to_back_us_each")]
    at = {(r["path"], r["layout"]): across(build, "fastest", lambda res, r=r: row(
        res, path=r["path"], layout=r["layout"])["back_to_back_us_each"]) for r in rows}
    fastest, nexts = True, []
    for layout in ("BSHD", "BHSD"):
        fastest &= front({p: v for (p, l), v in at.items() if l == layout}) == [stage]
        runner = min(((p, v) for (p, l), v in at.items() if l == layout and p != stage), key=lambda pv: pv[1].median)
        nexts.append(f"{at[stage, layout].text(us)} against {short(runner[0])}'s {runner[1].text(us)} stored {layout}")
    a, b = at[stage, "BSHD"], at[stage, "BHSD"]
    text = (f"In both, {short(stage)} is the fastest forward here ({'; '.join(nexts)}; per forward back to back, "
            f"{a.how}). ")
    if decide.order(a, b) == 0:
        text += (f"Its own two rows are not told apart ({pct(abs(a.median / b.median - 1))} between the medians), so "
                 f"this run cannot separate a layout effect from run-to-run variation")
    else:
        (fast, rf), (slow, rs) = sorted((("BSHD", a), ("BHSD", b)), key=lambda x: x[1].median)
        text += (f"Stored {fast} it runs {pct(1 - rf.median / rs.median)} faster than stored {slow}, told apart by "
                 f"more than the spread")
    lesson = f"{short(stage)} is the fastest forward stored either way" + (
        "; its two layouts are not told apart" if decide.order(a, b) == 0 else
        f"; stored {min((('BSHD', a), ('BHSD', b)), key=lambda x: x[1].median)[0]} it runs "
        f"{pct(1 - min(a.median, b.median) / max(a.median, b.median))} faster")
    return Statement(text, fastest, "; ".join(nexts), apart(a, b), lesson)


def _slower_rows(stage: str, layout: str, factor: float):
    def edit(rows):
        for r in rows:
            if r["path"] == stage and r["layout"] == layout and r.get("back_to_back_us_each"):
                r["back_to_back_us_each"] = scale(r["back_to_back_us_each"], factor)
    return edit


@claim("hopper-compute-bound", reads=[f"{r}.counters" for _, r in names.counted_at(LONG_SHAPE)] + [names.record_name(s, LONG_SHAPE) for s in select(fused=True)],
       flip=Flip(f"{names.record_name('cudnn', LONG_SHAPE)}.counters.json",
                 lambda c: c["kernels"][0].update(sm_throughput_pct=10.0, memory_throughput_pct=90.0)))
def hopper_compute_bound(build: Build) -> Statement:
    """Which fused kernels the counters call compute-bound at the long shape."""
    from ...analysis import counters
    verdicts, kernels = {}, {}
    for stage, record in names.counted_at(LONG_SHAPE):
        if f"{record}.counters" in build.problems:
            raise RecordUnusable(build.problems[f"{record}.counters"])
        measured = build.counters(record)
        if measured:
            kernels[stage] = summary.longest_counted(measured)
            verdicts[stage] = counters.verdict(kernels[stage])
    reach = {s: v for s, v in verdicts.items() if v in ("compute-bound", counters.NEAR, counters.BOTH)}
    busier = {s: max((k.get("sm_throughput_pct") or 0, "SM throughput"), (k.get("memory_throughput_pct") or 0,
                                                                          "memory throughput")) for s, k in kernels.items()}
    hopper = hopper_kernels(build)
    others = {v for s, v in verdicts.items() if s not in reach}
    said = {v: [f"{short(s)}'s" + (f" ({busier[s][1]} {busier[s][0]:.1f} % of peak, Nsight Compute)" if v == counters.NEAR else "")
                for s, w in reach.items() if w == v] for v in dict.fromkeys(reach.values())}
    where = {"compute-bound": "{} into compute-bound", counters.NEAR: "{} near the threshold, within "
             f"{counters.BAND:g} points of {counters.BOUND_AT:g} %", counters.BOTH: "{} into both compute- and memory-bound"}
    parts = [where[v].format(("cross" if len(ks) > 1 else "crosses") if v != counters.NEAR else
                             ("lie" if len(ks) > 1 else "lies")) for v, ks in said.items()]
    text = (f"Only the {len(hopper)} kernels written for Hopper, {' and '.join(short(s) + chr(39) + 's' for s in hopper)}, "
            f"come to the compute-bound threshold: "
            + "; ".join(f"{' and '.join(said[v])} {p}" for v, p in zip(said, parts))
            + f"; the others are {', '.join(sorted(others))}")
    lesson = (f"Only the {count(len(hopper))} kernels written for Hopper, "
              f"{' and '.join(short(s) + chr(39) + 's' for s in hopper)}, come to the compute-bound threshold")
    return Statement(text, sorted(reach) == sorted(hopper) and "compute-bound" in reach.values(), lesson=lesson,
                     rests_on=f"verdicts {verdicts}, Hopper kernels {hopper}")


@claim("causal-tile-work", reads=lambda stage, tile="128": [names.record_name(stage, LONG_SHAPE)],
       flip=lambda stage, tile="128": Flip(f"{names.record_name(stage, LONG_SHAPE)}.json", _halve_longest_grid))
def causal_tile_work(build: Build, stage, tile="128") -> Statement:
    """Under a causal mask a head's last query tile meets every key tile, the first only one."""
    s = build.summary(names.record_name(stage, LONG_SHAPE))
    rows = int(tile)
    tiles = s["shape"][2] // rows
    op = summary.longest_kernel(s)
    blocks = summary.blocks(op)
    text = (f"The last {rows}-row query tile of a head visits all {tiles} tiles of {rows} keys, the first only one "
            f"(the diagonal). With {blocks:,} independent blocks")
    lesson = f"A head's last query tile visits all {tiles} key tiles, the first only one. With {blocks:,} independent blocks"
    return Statement(text, blocks == tiles * s["shape"][1] * s["shape"][0], f"grid {op['grid']}", lesson=lesson)


@claim("rotations-agree", reads=[names.cp_record(LONGEST_CP, rotate=r) for r in ("allgather", "alltoall")],
       flip=Flip(f"{names.cp_record(LONGEST_CP, rotate='alltoall')}.json",
                 lambda s: s.update(cp_event_median_us=1.2 * s["cp_event_median_us"])))
def rotations_agree(build: Build) -> Statement:
    """All-gather and all-to-all at the same length: the slower rank's one-call medians side by side."""
    a, b = (build.summary(names.cp_record(LONGEST_CP, rotate=r))["cp_event_median_us"] for r in ("allgather", "alltoall"))
    text = f"the times agree to within {100 * abs(a / b - 1):.1f} % ({us(a)} and {us(b)}, one-call CUDA-event medians)"
    return Statement(text, abs(a / b - 1) < 0.03, f"{a:.0f} and {b:.0f} µs",
                     lesson=f"the times agree to within {100 * abs(a / b - 1):.1f} %")


@claim("naive-ops-vs-a100", reads=["naive"], flip=Flip("naive.json", lambda s: s.update(ops_per_forward=s["ops_per_forward"] + 1)))
def naive_ops_vs_a100(build: Build) -> Statement:
    """Our naive op count against the post's: the same kernels plus cuBLAS's memset."""
    s = build.summary("naive")
    memsets = sum(op["kind"] == "memset" for op in s["ops"])
    theirs = hardware.FIGURES["naive"]["ops"]
    text = (f"here the list has {s['ops_per_forward']} entries because the Memset is counted too ({memsets} memset "
            f"beside the post's {theirs} entries)")
    return Statement(text, lesson=f"here the list has {s['ops_per_forward']} entries because the Memset is counted too",
                     holds=memsets == 1 and s["ops_per_forward"] == theirs + memsets,
                     rests_on=f"ours {s['ops_per_forward']} with {memsets} memset(s), the post's {theirs}")


# ---- the ladder's guesses, answered from the forward each chapter shows -------------------------------

def _matmuls(s: dict) -> list[tuple[int, dict]]:
    """The cuBLAS kernels of a forward, with their numbers in its op list."""
    return [(i, op) for i, op in enumerate(s["ops"], 1)
            if op["kind"] == "kernel" and kernel_names.explain(op["name"])["library"].startswith("cuBLAS")]


def _aten(s: dict, op: dict) -> str:
    """The innermost aten op that launched a device op (`masked_fill_`, `bmm`, ...)."""
    from ...analysis import oplist
    path = [n for n in oplist.launching_path(s, op) if n.startswith("aten::")]
    return path[-1].removeprefix("aten::") if path else "?"


@claim("longest-op", reads=lambda stage, launched_by: [stage],
       flip=lambda stage, launched_by: Flip(f"{stage}.trace.json.gz", kernels_in_trace("nvjet", 10.0)))
def longest_op(build: Build, stage, launched_by) -> Statement:
    """The longest op of the forward a chapter shows, named by the aten op that launched it, against the
    longer of its matmuls: `say longest-op naive masked_fill_`."""
    s = build.shown(stage)
    i, op = max(enumerate(s["ops"], 1), key=lambda io: io[1]["duration_us"])
    j, mm = max(_matmuls(s), key=lambda jm: jm[1]["duration_us"])
    text = (f"the longest is op {i}, launched by `{_aten(s, op)}`: {us(op['duration_us'])}, "
            f"{times(op['duration_us'] / mm['duration_us'])} the longer matmul (op {j}, {us(mm['duration_us'])})")
    lesson = (f"the longest is op {i}, launched by `{_aten(s, op)}`, {times(op['duration_us'] / mm['duration_us'])} as "
              f"long as the longer matmul")
    return Statement(text, _aten(s, op) == launched_by and op["duration_us"] > mm["duration_us"], lesson=lesson,
                     rests_on=f"longest op {i} launched by {_aten(s, op)}, matmul {mm['duration_us']:.1f} µs")


@claim("copy-cost", reads=lambda stage="naive", against="inplace": [stage, against, "run-hardware"],
       flip=Flip("run-hardware.json", in_run("hardware", lambda r: r.update(copy_us_each=scale(r["copy_us_each"], 2.0)))))
def copy_cost(build: Build, stage="naive", against="inplace") -> Statement:
    """What the out-of-place copy should cost (its bytes in and out over the copy rate measured on the same
    GPU) against what it took, and what dropping it saved: the in-place chapter's arithmetic."""
    s = build.shown(stage)
    i, copy = next((i, op) for i, op in enumerate(s["ops"], 1) if op["kind"] == "memcpy")
    hw = build.run("hardware")
    b, h, n, _ = s["shape"]
    size = b * h * n * n * {"bf16": 2, "fp16": 2, "fp32": 4}[s["dtype"]]
    expected = 2 * size / (hw["copy_gbs"] * 1e3)  # bytes read + written, at the measured rate (GB/s → bytes/µs)
    saved = s["forward_device_us"] - build.shown(against)["forward_device_us"]
    text = (f"{size / 2**20:.0f} MiB in and {size / 2**20:.0f} MiB out at the copy rate measured on the {escape(s['device'])} "
            f"({hw['copy_gbs']:,.0f} GB/s, bytes read + written) should take {us(expected)}; the Memcpy (op {i} of the "
            f"{short(stage)} forward) took {us(copy['duration_us'])}, within {100 * abs(copy['duration_us'] / expected - 1):.1f} % "
            f"of that, and writing the mask in place saved {us(saved)} of device time per forward")
    lesson = (f"the copy took {us(copy['duration_us'])}, within {100 * abs(copy['duration_us'] / expected - 1):.1f} % "
              f"of what its bytes take at the GPU's measured copy rate")
    return Statement(text, abs(copy["duration_us"] / expected - 1) < 0.1 and abs(saved / copy["duration_us"] - 1) < 0.1,
                     lesson=lesson,
                     rests_on=f"expected {expected:.1f} µs, copy {copy['duration_us']:.1f} µs, saved {saved:.1f} µs")


@claim("same-op-time", reads=lambda a, b, launched_by: [a, b],
       flip=lambda a, b, launched_by: Flip(f"{b}.trace.json.gz", kernels_in_trace("at::native::elementwise_kernel", 1.5)))
def same_op_time(build: Build, a, b, launched_by) -> Statement:
    """One kernel in two stages' forwards (named by the aten op that launched it): the same time, within 5 %."""
    ta, tb = ({_aten(s, op): op["duration_us"] for op in s["ops"]}[launched_by]
              for s in (build.shown(a), build.shown(b)))
    text = (f"{short(b)}: {us(tb)}; {short(a)}: {us(ta)}; within {100 * abs(tb / ta - 1):.1f} %, "
            f"the same kernel at the same speed")
    return Statement(text, abs(tb / ta - 1) < 0.05, f"{ta:.1f} and {tb:.1f} µs",
                     lesson=f"{us(tb)} against {us(ta)}: the same kernel at the same speed")


@claim("more-ops", reads=lambda a, b: [a, b], flip=lambda a, b: Flip(f"{a}.json", lambda s: s.update(ops_per_forward=1)))
def more_ops(build: Build, a, b) -> Statement:
    """How many more device ops one forward launches than another."""
    na, nb = build.summary(a)["ops_per_forward"], build.summary(b)["ops_per_forward"]
    text = f"{na} device ops against {nb} for {short(b)}'s forward, {na - nb} more (one forward's op list each)"
    return Statement(text, na > nb, f"{na} and {nb}", lesson=f"{na} device ops against {nb} for {short(b)}'s forward")


@claim("recompile-cliff", reads=["run-recompile"],
       flip=Flip("run-recompile.json", in_run("recompile", lambda r: r["points"][2].update(times_us=scale(r["points"][2]["times_us"], 50.0)))))
def recompile_cliff(build: Build) -> Statement:
    """Where the recompile chart falls off its cliff: the first call past torch.compile's recompile limit."""
    r = build.run("recompile")
    points = [p for p in r["points"] if p.get("tflops")]
    drop = min(range(1, len(points)), key=lambda i: points[i]["tflops"] / points[i - 1]["tflops"])
    before, after = points[drop - 1], points[drop]
    limit = r["recompile_limit"]
    text = (f"The cliff is at S={after['shape'][2]:,}, the {ordinal(drop + 1)} new shape, one past "
            f"`torch.compile`'s limit of {limit} recompiles: that call runs at "
            f"{after['tflops']:.1f} TFLOP/s against {before['tflops']:.1f} at S={before['shape'][2]:,} "
            f"({times(before['tflops'] / after['tflops'], 0)} slower, one call's CUDA-event median), and no "
            f"later shape climbs back.")
    rest = [p["tflops"] for p in points[drop:]]
    lesson = (f"The cliff is at the {ordinal(drop + 1)} new shape, one past `torch.compile`'s limit of {limit} "
              f"recompiles, and no later shape climbs back")
    return Statement(text, drop == limit and max(rest) < min(p["tflops"] for p in points[:drop]),
                     f"the largest drop before point {drop + 1} of {len(points)}, limit {limit}", lesson=lesson)
