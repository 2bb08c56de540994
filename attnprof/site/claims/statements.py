"""Sentences that rank, compare, multiply or judge, each computed from the records and checked by the build.

A chapter asks for one with `<!-- attnprof: say NAME -->`. Each statement is a small function of the
build that returns a `Statement`: the sentence as the page shows it (its numbers filled in from the
records, each with its method and shape) and whether the records bear out the words typed in it. A
statement the records contradict stops the build with one line that names it and quotes the sentence.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ...analysis import hardware, kernel_names, summary, trace
from ...model import names
from ...model.stages import DEFAULT_SHAPE, LONG_SHAPE, select
from ...text import ms, shape as shape_text, us
from ..build import Build, FalseStatement, RecordUnusable
from ..words import count, short, title
from ..registry import piece


@dataclass(frozen=True)
class Statement:
    text: str  # the sentence as the page shows it
    holds: bool  # whether the records bear out its words
    rests_on: str = ""  # the numbers it rests on, for the one line that says it is false


STATEMENTS: dict[str, Callable[[Build], Statement]] = {}


def statement(name: str):
    def register(fn):
        if name in STATEMENTS:
            raise ValueError(f"statement {name!r} is registered twice")
        STATEMENTS[name] = fn
        return fn
    return register


def check(build: Build, name: str, *args, **keywords) -> Statement:
    """The statement `name`, raising FalseStatement when the records contradict it."""
    if name not in STATEMENTS:
        raise KeyError(f"unknown statement {name!r} (known: {', '.join(sorted(STATEMENTS))})")
    s = STATEMENTS[name](build, *args, **keywords)
    if not s.holds:
        raise FalseStatement(f"the statement {name!r} is false for the committed records: “{s.text}” "
                             f"({s.rests_on}); rewrite the sentence or find what changed in the records")
    return s


@piece("say", inline=True, conclusion=True)
def say(build: Build, name, *args, **keywords):
    """A computed sentence, checked against the records (see STATEMENTS); some take a stage."""
    return check(build, name, *args, **keywords).text


def false_statements(build: Build, docs: Path) -> list[str]:
    """Every `say` of the chapters under `docs` that the records contradict or that cannot be said, one
    line each naming its page, as the strict build finds them (`check` runs this; a sentence over a record
    that `check` already lists as unusable is left to that line)."""
    from ..registry import directives, expand
    found = []
    for page in sorted(docs.rglob("*.md")):
        for piece_name, args in directives(page.read_text(encoding="utf-8")):
            if piece_name != "say":
                continue
            try:
                expand(build, piece_name, args)
            except (KeyError, TypeError, ValueError, OSError, FalseStatement, RecordUnusable) as e:
                found.append(f"{page.relative_to(docs.parent)}: <!-- attnprof: say {' '.join(args)} -->: {e}")
    return found


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


@statement("bwd-over-fwd")
def bwd_over_forward(build: Build) -> Statement:
    fused, unfused = ({k: bwd_over_fwd(s) for k, s in _bwd(build, group).items()} for group in (FUSED_BWD, UNFUSED_BWD))
    lo, hi = min(fused, key=fused.get), max(fused, key=fused.get)
    text = (f"By device time (the profiler's sum of kernel durations, forward and backward from the same trace), "
            f"every fused backend's backward costs more than its forward, from {times(fused[lo])} ({title(lo)}) to "
            f"{times(fused[hi])} ({title(hi)}); the unfused ones, whose forward was already slow, "
            f"{times(min(unfused.values()))} to {times(max(unfused.values()))}.")
    return Statement(text, min(fused.values()) > max(unfused.values()) and min(fused.values()) > 1,
                     f"fused {min(fused.values()):.2f}–{max(fused.values()):.2f}×, "
                     f"unfused {min(unfused.values()):.2f}–{max(unfused.values()):.2f}×")


@statement("bwd-fastest")
def bwd_fastest(build: Build) -> Statement:
    runs = _bwd(build, FUSED_BWD + UNFUSED_BWD)
    by_device = ranked({k: s["backward_device_us"] for k, s in runs.items()})
    by_event = ranked({k: s["event_median_us"] for k, s in runs.items()})
    first, second = by_device[0], by_device[1]
    d = lambda k: us(runs[k]["backward_device_us"])
    e = lambda k: us(runs[k]["event_median_us"])
    text = (f"By device time, the fastest backward here is {short(first)}'s ({d(first)}), then {short(second)}'s "
            f"({d(second)}). Timed from the CPU, one `backward()` call between CUDA events (median of "
            f"{runs[first]['settings']['event_reps']}), the order is not the same: {short(by_event[0])}'s comes first "
            f"({e(by_event[0])}) and {short(first)}'s is {ordinal(by_event.index(first) + 1)} ({e(first)}).")
    if by_event[0] == first:
        text = (f"By device time, the fastest backward here is {short(first)}'s ({d(first)}), then "
                f"{short(second)}'s ({d(second)}); timed from the CPU, one `backward()` call between CUDA events, it "
                f"comes first too ({e(first)}).")
    return Statement(text, True)


@statement("bwd-host")
def bwd_host(build: Build, stage) -> Statement:
    """Why a backward's one-call time is several times its device time: its host side, not its kernels."""
    s = build.summary(names.backward_record(stage))
    text = (f"The two methods measure different things. Device time adds up the kernels only; one call's CUDA-event "
            f"time also holds everything the GPU waited for, the CPU's work before and between the launches "
            f"included. {short(stage)}'s backward has {us(s['backward_device_us'])} of kernels but spends "
            f"{us(s['cpu_backward_us'])} on the CPU per backward (profiled, median of "
            f"{len(s['ops_per_backward_each'])}; the profiler inflates CPU time), more than its kernels take, so its "
            f"one-call time ({us(s['event_p10_us'])} to {us(s['event_p90_us'])}, p10 to p90) follows the CPU, "
            f"not the GPU.")
    return Statement(text, s["cpu_backward_us"] > s["backward_device_us"]
                     and s["event_p10_us"] > 2 * s["backward_device_us"],
                     f"CPU {s['cpu_backward_us']:.1f} µs, device {s['backward_device_us']:.1f} µs, "
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


@statement("a100-inplace")
def a100_inplace(build: Build) -> Statement:
    p, r = peak_ratios(build), rung_ratio(build, "inplace")
    nearest = min(p, key=lambda k: abs(p[k] - r))
    hw = build.run("hardware")
    of_peak = hw["copy_gbs"] / hardware.h200_peaks(hw)["hbm_gbs"]
    text = (f"{times(r, 2)}, of the three hardware ratios nearest the bandwidth ratio ({times(p['hbm_gbs'], 2)}, peak to "
            f"peak), and {relation(r, p['hbm_gbs'], p['hbm_gbs'])} it by {pct(abs(1 - r / p['hbm_gbs']))}: a copy "
            f"measured on the H200 reaches {pct(of_peak)} of its peak, and how near its own peak the A100 ran the "
            f"post's forward is not known")
    return Statement(text, nearest == "hbm_gbs", f"ratio {r:.2f}, hardware {p}")


@statement("a100-math")
def a100_math(build: Build) -> Statement:
    p, r = peak_ratios(build), rung_ratio(build, "math")
    where = relation(r, p["hbm_gbs"], p["fp32_tflops"])
    text = (f"{times(r, 2)}, {where} the bandwidth ratio ({times(p['hbm_gbs'], 2)}) and the FP32 ratio "
            f"({times(p['fp32_tflops'], 2)}), both peak to peak")
    return Statement(text, where == "between", f"ratio {r:.2f}, bandwidth {p['hbm_gbs']:.2f}, FP32 {p['fp32_tflops']:.2f}")


@statement("a100-fused-ampere")
def a100_fused_ampere(build: Build) -> Statement:
    p = peak_ratios(build)
    rs = {s: rung_ratio(build, s) for s in ("efficient", "flash")}
    text = (f"{times(rs['efficient'], 2)} and {times(rs['flash'], 2)}, below even the SMs × clock ratio "
            f"({times(p['sm_clock'], 2)}, peak to peak), the smallest of the three")
    return Statement(text, max(rs.values()) < min(p.values()), f"ratios {rs}, hardware {p}")


@statement("a100-cudnn")
def a100_cudnn(build: Build) -> Statement:
    rs = {s: rung_ratio(build, s) for s in ("inplace", "math", "efficient", "flash", "cudnn")}
    text = f"{times(rs['cudnn'], 2)}, the largest of the rungs"
    return Statement(text, max(rs, key=rs.get) == "cudnn" and
                     hardware.FIGURES["cudnn"]["forward_us"] > hardware.FIGURES["flash"]["forward_us"], f"ratios {rs}")


@statement("math-gap")
def math_gap(build: Build) -> Statement:
    """The math forward over the in-place forward: here against the post's A100."""
    ours = build.summary("math")["forward_device_us"] / build.summary("inplace")["forward_device_us"]
    theirs = hardware.FIGURES["math"]["forward_us"] / hardware.FIGURES["inplace"]["forward_us"]
    text = (f"the math forward takes {ours:.1f} times as long as the in-place one here, against "
            f"{theirs:.1f} times on the A100 (device time per forward on both, profiler)")
    return Statement(text, ours < theirs, f"H200 {ours:.2f}, A100 {theirs:.2f}")


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


@statement("cp-scaling")
def cp_scaling(build: Build) -> Statement:
    runs = [build.summary(names.cp_record(LONGEST_CP, rotate=r)) for r in ("allgather", "alltoall")]
    n = runs[0]["world_size"]
    x = [s["speedup"] for s in runs]
    words = {scaling_words(v, n, None) for v in x}
    text = (f"about linear with either rotation ({x[0]:.2f}× all-gather, {x[1]:.2f}× all-to-all), not more: a "
            f"speedup {100 * (max(x) / n - 1):.1f} % above {n}× is no evidence of superlinear scaling when the "
            f"records keep only the median of each timing, not its spread")
    return Statement(text, words == {"about linear"}, f"speedups {x}")


@statement("cp-device-over-event")
def cp_device_over_event(build: Build) -> Statement:
    s = build.summary(names.cp_record(names.CP_LENGTHS[0]))
    r = s["ranks"][0]
    union = trace.busy_us(r["ops"])
    text = (f"Rank 0's device time at this length, {us(r['forward_device_us'])} (profiler), is longer than its "
            f"one-call CUDA-event median, {us(r['event_median_us'])}, though the kernels run inside the call. Device "
            f"time adds up every op, and the NCCL kernel runs on its own stream while attention runs, so that "
            f"stretch counts twice; the time at least one op ran, the union of their intervals, is {us(union)}, "
            f"within the call.")
    return Statement(text, r["forward_device_us"] > union and union <= r["event_median_us"] * 1.05,
                     f"sum {r['forward_device_us']:.1f}, union {union:.1f}, event {r['event_median_us']:.1f}")


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


@statement("grid")
def grid(build: Build, stage, tile="128") -> Statement:
    """A stage's longest kernel at the long shape: one block per query tile of `tile` rows and head."""
    s = build.summary(names.record_name(stage, LONG_SHAPE))
    op = summary.longest_kernel(s)
    b, h, n, _ = s["shape"]
    rows = int(tile)
    blocks, tiles = summary.blocks(op), n // rows
    text = f"{blocks:,} blocks = {tiles} query tiles of {rows} rows × {h} heads{f' × {b} batches' if b > 1 else ''}"
    return Statement(text, blocks == tiles * h * b, f"grid {op['grid']}, shape {s['shape']}")


# ---- one quantity, several methods ---------------------------------------------------------------

@statement("rates")
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
    return Statement(text, min(kernel_only) >= max(b2b) and min(b2b) > max(one_call),
                     f"kernel {kernel_only}, back to back {b2b}, one call {one_call}")


@statement("cpu-saving")
def cpu_saving(build: Build, stage, against) -> Statement:
    """Whether a stage's forward takes less CPU time than another's, by the profiled forwards' spread."""
    a, b = build.summary(stage), build.summary(against)
    ea, eb = a["cpu_forward_us_each"], b["cpu_forward_us_each"]
    spread = lambda e: f"{us(min(e))} to {us(max(e))}"
    head = (f"The annotated forward takes {us(a['cpu_forward_us'])} of CPU time here against "
            f"{us(b['cpu_forward_us'])} for {short(against)} (median of {len(ea)} profiled forwards, profiler on")
    if max(ea) < min(eb):
        text = f"{head}): every profiled forward of {short(stage)} took less than every one of {short(against)}'s"
    else:
        text = (f"{head}; {spread(ea)} and {spread(eb)}): the ranges overlap, so this profile cannot tell the "
                f"saving on the CPU apart from the forward-to-forward spread")
    return Statement(text, bool(ea) and bool(eb), f"{ea} against {eb}")


@statement("queued-vs-one-call")
def queued_vs_one_call(build: Build, stage) -> Statement:
    """A stage's time per forward queued back to back against one call at a time, in the fastest-forward run."""
    rows = [r for r in build.run("fastest") if r["path"] == stage and "back_to_back_us" in r]
    faster = [r["back_to_back_us"] < r["median_us"] for r in rows]
    pairs = "; ".join(f"{us(r['back_to_back_us'])} against {us(r['median_us'])}" for r in rows)
    if all(faster):
        text = (f"{short(stage)} ran faster per forward queued than one call at a time ({pairs}), as a stream "
                f"should: the queue hides each launch behind the previous forward's kernels")
    elif not any(faster):
        text = (f"{short(stage)} ran slower per forward queued than one call at a time ({pairs}); the GPU's clocks "
                f"were not read during the run, so this run cannot say why")
    else:
        text = f"{short(stage)}'s queued and one-call times fall on either side of each other ({pairs})"
    return Statement(text, bool(rows), "; ".join(f"{r['back_to_back_us']:.1f} vs {r['median_us']:.1f}" for r in rows))


def _graphs_row(build: Build, path: str) -> dict | None:
    """The eager row of the graphs run for an SDPA path at the post's shape, where that run has one."""
    try:
        rows = build.run("graphs")
    except RecordUnusable:  # the sentence leaves out what it would have said from the graphs run
        return None
    return next((r for r in rows if r.get("path") == f"SDPA {path}" and r.get("shape") == list(DEFAULT_SHAPE)
                 and "eager" in r), None)


@statement("one-call-runs")
def one_call_runs(build: Build) -> Statement:
    """One call's CUDA-event median is a latency, and it differs between runs far more than device time."""
    parts, holds = [], True
    for stage, label in (("cudnn", "cuDNN"), ("flash", "flash")):
        s, g = build.summary(stage), _graphs_row(build, label if stage == "flash" else "cuDNN")
        if g:
            parts.append(f"{label}'s is {us(s['event_median_us'])} in its capture's run and "
                         f"{us(g['eager']['median_us'])} in the CUDA-graph run of "
                         f"[When the GPU waits for Python](launch-bound.md)")
            holds &= g["eager"]["median_us"] > s["forward_device_us"] and s["event_median_us"] > s["forward_device_us"]
    long = build.summary(names.record_name("cudnn", LONG_SHAPE))
    fast = next((r for r in build.run("fastest") if r["path"] == "cudnn" and r.get("layout", "BHSD") == "BHSD"), None)
    holds &= long["event_median_us"] > long["forward_device_us"]
    if fast:
        holds &= fast["median_us"] > long["forward_device_us"]
        parts.append(f"cuDNN's at B=1, S=8,192, D=128 is {us(long['event_median_us'])} in its capture's run and "
                     f"{us(fast['median_us'])} in the fastest-forward run of [Roofline](roofline.md), over "
                     f"{us(long['forward_device_us'])} of device time")
    text = ("One call's CUDA-event median is a latency, the kernels plus the launch and whatever the host did "
            "before it, always above the device time, and it moves from one run to the next. At the post's shape "
            + "; ".join(parts) + ". Each table names the run its numbers come from.")
    return Statement(text, holds and bool(parts), "; ".join(parts))


@statement("cudnn-fastest")
def cudnn_fastest(build: Build) -> Statement:
    """cuDNN is the fastest SDPA backend at the post's shape, by device time and by one call."""
    backends = ("math", "efficient", "flash", "cudnn")
    runs = {b: build.summary(b) for b in backends}
    by_device = ranked({b: s["forward_device_us"] for b, s in runs.items()})
    by_event = ranked({b: s["event_median_us"] for b, s in runs.items()})
    # cuDNN against the fastest of the others, whether or not cuDNN leads
    rival, rival_event = (next(b for b in order if b != "cudnn") for order in (by_device, by_event))
    text = (f"the fastest SDPA backend, by device time ({us(runs['cudnn']['forward_device_us'])} against "
            f"{short(rival)}'s {us(runs[rival]['forward_device_us'])}) and by one call's CUDA-event median "
            f"({us(runs['cudnn']['event_median_us'])} against {short(rival_event)}'s "
            f"{us(runs[rival_event]['event_median_us'])})")
    return Statement(text, by_device[0] == by_event[0] == "cudnn", f"by device {by_device}, by one call {by_event}")


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


@statement("flash-vs-hopper-kernels")
def flash_vs_hopper_kernels(build: Build) -> Statement:
    """SDPA's flash kernel at the long shape against the Hopper kernels, by profiled kernel time."""
    def kernel_us(stage):
        return summary.longest_kernel(build.summary(names.record_name(stage, LONG_SHAPE)))["duration_us"]
    ratio = {s: kernel_us(s) / kernel_us("flash") for s in hopper_kernels(build)}  # flash's rate over theirs
    text = ("runs at " + " and ".join(f"{pct(r)} of {short(s)}'s rate" for s, r in ratio.items())
            + " (kernel time in the profiler, the table above)")
    return Statement(text, bool(ratio) and max(ratio.values()) < 1, f"{ratio}")


@statement("causal-halves")
def causal_halves(build: Build) -> Statement:
    """Contiguous halves of a causal sequence: how many more (query, key) pairs the later half holds."""
    s = build.summary(names.cp_record(LONGEST_CP, balanced=False))
    first, last = (r["causal_pairs"] for r in s["ranks"])
    text = f"{last / first:.0f} times as many keys as rank 0's"
    return Statement(text, abs(last / first - 3) < 0.01, f"pairs {first} and {last}")


# ---- what torch.compile made of the naive forward ----------------------------------------------

def kernels_of(build: Build, record: str) -> list[str]:
    return [op["name"] for op in build.summary(record)["ops"] if op["kind"] == "kernel"]


@statement("inductor-fused")
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
    return Statement(text, bool(generated) and all(k in theirs for k in kept) and gone, f"{mine} against {theirs}")


@statement("between")
def between(build: Build, stage, slower, faster) -> Statement:
    """A stage's one-call time between two others' (CUDA-event medians of the captures)."""
    a, b, c = (build.summary(r)["event_median_us"] for r in (stage, slower, faster))
    text = (f"{us(a)} per forward (CUDA-event median of one call, {shape_text(DEFAULT_SHAPE)}) against "
            f"{us(b)} for {short(slower)} and {us(c)} for {short(faster)}: {times(b / a)} faster than the first, "
            f"{times(a / c)} slower than the second")
    return Statement(text, c < a < b, f"{a:.1f} between {c:.1f} and {b:.1f}")


@statement("same-kernels")
def same_kernels(build: Build, a, b) -> Statement:
    """Whether two compiled variants run the same kernels, and their one-call times."""
    ka, kb = kernels_of(build, a), kernels_of(build, b)
    ta, tb = (build.summary(r)["event_median_us"] for r in (a, b))
    if ka == kb:
        text = (f"generates the same {count(len(kb))} kernels ({us(tb)} against {us(ta)} per forward, CUDA-event medians "
                f"of one call): once compiled, the difference between `masked_fill` and `masked_fill_` is gone")
    else:
        text = (f"generates different kernels ({', '.join(f'`{kernel_names.label(k)}`' for k in kb if k not in ka)} in "
                f"place of {', '.join(f'`{kernel_names.label(k)}`' for k in ka if k not in kb)})")
    return Statement(text, bool(ka) and bool(kb), f"{ka} against {kb}")


@statement("second-compile")
def second_compile(build: Build, first="naive_compiled", second="inplace_compiled") -> Statement:
    """The first call of two compiled stages taken one after the other in one process."""
    fa, fb = (build.summary(r)["first_call_ms"] for r in (first, second))
    text = f"{ms(fa)} here, and {ms(fb)} for the second"
    if kernels_of(build, first) == kernels_of(build, second) and fb < fa / 2:
        text += (": it runs the same kernels, and compiled after the first in the same process (as a regeneration "
                 "and `capture all` take them) Inductor most likely found their code in its cache (an inference: "
                 "the capture does not record cache hits)")
    return Statement(text, True, f"{fa:.0f} and {fb:.0f} ms")


@statement("graph-gains")
def graph_gains(build: Build) -> Statement:
    """What a CUDA graph replay saves one call (CUDA-event medians of the graphs run), at the post's shape
    and at the decode steps, and which path gains most where."""
    rows = [r for r in build.run("graphs") if "error" not in r]
    places = list(dict.fromkeys(r["where"] for r in rows))
    kv = {r["where"]: r.get("kv_len") for r in rows}
    speedup = {(r["where"], r["path"]): r["eager"]["median_us"] / r["graph"]["median_us"] for r in rows}
    saves = ", ".join(f"{us(r['eager']['median_us'] - r['graph']['median_us'])} of {r['path']}'s "
                      f"{us(r['eager']['median_us'])} ({pct(1 - r['graph']['median_us'] / r['eager']['median_us'])})"
                      for r in rows if r["where"] == places[0])
    at = lambda w: [v for (w2, _), v in speedup.items() if w2 == w]
    replayed = lambda w: min(r["graph"]["median_us"] for r in rows if r["where"] == w)
    first, last = places[1], places[-1]
    gains = {}
    for w in places:
        gains.setdefault(max((p for (w2, p) in speedup if w2 == w), key=lambda p: speedup[(w, p)]), []).append(w)
    where = lambda ws: ("every decode step" if ws == places[1:] else ", ".join(
        "the post's shape" if w == places[0] else f"KV {kv[w]:,}" for w in ws))
    text = (f"At {places[0]} a replay saves {saves}, one call each (CUDA-event medians). At a decode step with a "
            f"KV cache of {kv[first]:,} the replay is {times(min(at(first)))}–{times(max(at(first)))} faster per "
            f"call; at {kv[last]:,}, {times(min(at(last)))}–{times(max(at(last)))}: the fastest replayed call grows "
            f"from {us(replayed(first))} to {us(replayed(last))} as the kernel reads more K and V. The path that "
            f"gains most is " + "; ".join(f"{p} at {where(ws)}" for p, ws in gains.items()))
    return Statement(text, len(places) > 2, f"{ {k: round(v, 2) for k, v in speedup.items()} }")


@statement("reduce-overhead")
def reduce_overhead(build: Build, reduce="naive_reduce", default="naive_compiled") -> Statement:
    """torch.compile's reduce-overhead mode against the default mode per call, and the share of the
    difference its input copies account for on the GPU."""
    a, b = (build.summary(r)["event_median_us"] for r in (reduce, default))
    copies = [op["duration_us"] for op in build.summary(reduce)["ops"] if op["kind"] == "memcpy"]
    text = (f"the graph replay with its copies takes {us(a)} per forward against {us(b)} for the default mode "
            f"(CUDA-event medians of one call)")
    if a > b:
        text += (f"; the {count(len(copies))} copies themselves take {us(sum(copies))} of device time (profiler), "
                 f"{pct(sum(copies) / (a - b))} of that difference, so most of it lies elsewhere, on the host side "
                 f"of the compiled wrapper most likely (an inference: the capture does not split it)")
    return Statement(text, bool(copies), f"{a:.1f} against {b:.1f}, copies {sum(copies):.1f}")


@statement("pays-most")
def pays_most(build: Build) -> Statement:
    """Which path of the fastest-forward run adds most to one call over its back-to-back time."""
    rows = [r for r in build.run("fastest") if "back_to_back_us" in r and "median_us" in r]
    extra = lambda r: r["median_us"] - r["back_to_back_us"]
    top = sorted(rows, key=extra, reverse=True)
    label = lambda r: f"{short(r['path'])} ({r['layout']})"
    text = (f"{label(top[0])} pays most there, {us(extra(top[0]))} per call ({us(top[0]['median_us'])} one call "
            f"against {us(top[0]['back_to_back_us'])} back to back), then {label(top[1])}, {us(extra(top[1]))}")
    return Statement(text, len(rows) > 1, ", ".join(f"{label(r)} {extra(r):.1f}" for r in top))


@statement("kernel-ahead")
def kernel_ahead(build: Build, a, b) -> Statement:
    """Which of two captures' forwards takes less device time (profiler), and by how much."""
    ta, tb = (build.summary(r)["forward_device_us"] for r in (a, b))
    first, second = (a, b) if ta <= tb else (b, a)
    lo, hi = min(ta, tb), max(ta, tb)
    text = (f"{short(names.parse_record(first)[0])}'s forward takes {us(lo)} of device time against {us(hi)} for "
            f"{short(names.parse_record(second)[0])} (profiler, {shape_text(build.summary(a)['shape'])}), "
            f"{pct(1 - lo / hi)} less")
    return Statement(text, True, f"{ta:.1f} against {tb:.1f}")


# ---- Nsight Compute's verdicts ------------------------------------------------------------------

@statement("verdict")
def verdict(build: Build, record, part) -> Statement:
    """What Nsight Compute's rule makes of the kernels of a record whose name is `part` (or holds it)."""
    from ...analysis import counters
    measured = build.counters_of(record)
    ks = [k for k in measured["kernels"] if counters.base_name(k["name"]) == part] or \
        [k for k in measured["kernels"] if part in k["name"]]
    found = sorted({counters.verdict(k) for k in ks})
    both = lambda field: " and ".join(f"{k[field]:.1f} %" for k in ks)
    text = (f"{' and '.join(found)} by Nsight Compute's rule (SM throughput {both('sm_throughput_pct')}, memory "
            f"throughput {both('memory_throughput_pct')} of peak)")
    return Statement(text, bool(ks), f"{len(ks)} kernel(s) named {part!r}")


@statement("cpu-rank")
def cpu_rank(build: Build, stage, *others) -> Statement:
    """Where a stage's CPU cost per forward ranks among others at the post's shape, by the timing run's
    unprofiled CPU enqueue: above or below each, or not told apart from it (timing.agree)."""
    from ...analysis import timing
    from ..pieces.timing import rows, spread
    enqueue = {r["stage"]: timing.verdict(r).enqueue for r in rows(build)
               if r["stage"] in (stage, *others) and tuple(r["shape"]) == DEFAULT_SHAPE}
    mine = enqueue[stage]
    words = {"above": [], "below": [], "not told apart from": []}
    for other in others:
        theirs = enqueue[other]
        place = ("not told apart from" if timing.agree(mine, theirs)
                 else "above" if mine.median > theirs.median else "below")
        words[place].append(f"{short(other)}'s {spread(theirs)}")
    said = "; ".join(f"{w} {' and '.join(v)}" for w, v in words.items() if v)
    n = len(others)
    rank = ("the most expensive of these here" if len(words["above"]) == n
            else "the cheapest of these here" if len(words["below"]) == n
            else "not the most expensive of these here" if words["below"]
            else "this run cannot rank it among them" if len(words["not told apart from"]) == n
            else "the most expensive here, with those it is not told apart from")
    text = (f"by unprofiled CPU enqueue (host clock, back-to-back calls, per forward, median and p10–p90, "
            f"{shape_text(DEFAULT_SHAPE)}), {short(stage)} takes {spread(mine)}: {said}, so {rank}")
    return Statement(text, all(o in enqueue for o in others), f"{ {k: v.median for k, v in enqueue.items()} }")


@statement("cudnn-cpu-inside")
def cudnn_cpu_inside(build: Build) -> Statement:
    """Where cuDNN's forward spends its CPU time: inside `_cudnn_attention_forward`, in the pictured forward."""
    _, shown = build.forwards("cudnn")
    inside = next(c.duration_us for c in shown.cpu_ops if c.name == "aten::_cudnn_attention_forward")
    text = (f"{pct(inside / shown.cpu_us)} of it ({us(inside)} of {us(shown.cpu_us)}, profiler) inside "
            f"`_cudnn_attention_forward`")
    return Statement(text, inside / shown.cpu_us > 0.5, f"{inside:.1f} of {shown.cpu_us:.1f} µs")


@statement("flash-register-limit")
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
    return Statement(text, t["limiter"] == "registers", f"{op['registers']} registers, {threads} threads, {t}")


@statement("leads-long")
def leads_long(build: Build, stage) -> Statement:
    """Where a stage leads the sweep (back-to-back TFLOP/s): from some length up, at every head dim."""
    rows = [r for r in build.run("sweep") if r.get("tflops_back_to_back")]
    lead = {}
    for d in sorted({r["shape"][3] for r in rows}):
        for n in sorted({r["shape"][2] for r in rows}):
            pts = {r["path"]: r["tflops_back_to_back"] for r in rows if r["shape"][3] == d and r["shape"][2] == n}
            if pts:
                lead[(d, n)] = max(pts, key=pts.get)
    dims = sorted({d for d, _ in lead})
    starts = {d: min((n for (dd, n), p in lead.items() if dd == d and p == stage), default=None) for d in dims}
    below = sorted({p for (d, n), p in lead.items() if starts[d] is not None and n < starts[d]})
    where = " and ".join(f"from S={starts[d]:,} at head dim {d}" for d in dims if starts[d] is not None)
    text = (f"It leads {where}, at every longer sequence, and trails {' and '.join(short(p) for p in below) or 'no one'} "
            f"below that (back-to-back TFLOP/s, the figures above)") if where else "It leads nowhere in this sweep"
    holds = (all(s is not None for s in starts.values()) and bool(below)
             and all(p == stage for (d, n), p in lead.items() if n >= starts[d]))
    return Statement(text, holds, f"leaders {lead}")


@statement("layout-gap")
def layout_gap(build: Build, stage) -> Statement:
    """A stage's two layouts in the fastest-forward run, and what one run cannot tell."""
    rows = {r["layout"]: r for r in build.run("fastest") if r["path"] == stage and "tflops_back_to_back" in r}
    a, b = rows["BSHD"]["tflops_back_to_back"], rows["BHSD"]["tflops_back_to_back"]
    text = (f"Do not read much into the gap between its two rows ({pct(abs(a / b - 1))}): the run keeps one median "
            f"per row, not the spread between runs, so it cannot separate a layout effect from run-to-run variation")
    return Statement(text, abs(a / b - 1) < 0.25, f"{a:.0f} and {b:.0f} TFLOP/s")


@statement("hopper-compute-bound")
def hopper_compute_bound(build: Build) -> Statement:
    """Which fused kernels the counters call compute-bound at the long shape."""
    from ...analysis import counters
    verdicts = {}
    for stage, record in names.counted_at(LONG_SHAPE):
        if f"{record}.counters" in build.problems:
            raise RecordUnusable(build.problems[f"{record}.counters"])
        measured = build.counters(record)
        if measured:
            verdicts[stage] = counters.verdict(summary.longest_counted(measured))
    bound = [s for s, v in verdicts.items() if v == "compute-bound"]
    hopper = hopper_kernels(build)
    others = {v for s, v in verdicts.items() if s not in bound}
    text = (f"Only the {len(hopper)} kernels written for Hopper, {' and '.join(short(s) + chr(39) + 's' for s in hopper)}, "
            f"cross into compute-bound; the others are {', '.join(sorted(others))}")
    return Statement(text, sorted(bound) == sorted(hopper), f"verdicts {verdicts}, Hopper kernels {hopper}")


@statement("causal-tile-work")
def causal_tile_work(build: Build, stage, tile="128") -> Statement:
    """Under a causal mask a head's last query tile meets every key tile, the first only one."""
    s = build.summary(names.record_name(stage, LONG_SHAPE))
    rows = int(tile)
    tiles = s["shape"][2] // rows
    op = summary.longest_kernel(s)
    blocks = summary.blocks(op)
    text = (f"The last {rows}-row query tile of a head visits all {tiles} tiles of {rows} keys, the first only one "
            f"(the diagonal). With {blocks:,} independent blocks")
    return Statement(text, blocks == tiles * s["shape"][1] * s["shape"][0], f"grid {op['grid']}")


@statement("rotations-agree")
def rotations_agree(build: Build) -> Statement:
    """All-gather and all-to-all at the same length: the slower rank's one-call medians side by side."""
    a, b = (build.summary(names.cp_record(LONGEST_CP, rotate=r))["cp_event_median_us"] for r in ("allgather", "alltoall"))
    text = f"the times agree to within {100 * abs(a / b - 1):.1f} % ({us(a)} and {us(b)}, one-call CUDA-event medians)"
    return Statement(text, abs(a / b - 1) < 0.03, f"{a:.0f} and {b:.0f} µs")


@statement("naive-ops-vs-a100")
def naive_ops_vs_a100(build: Build) -> Statement:
    """Our naive op count against the post's: the same kernels plus cuBLAS's memset."""
    s = build.summary("naive")
    memsets = sum(op["kind"] == "memset" for op in s["ops"])
    theirs = hardware.FIGURES["naive"]["ops"]
    text = (f"here the list has {s['ops_per_forward']} entries because the Memset is counted too")
    return Statement(text, memsets == 1 and s["ops_per_forward"] == theirs + memsets,
                     f"ours {s['ops_per_forward']} with {memsets} memset(s), the post's {theirs}")


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


@statement("longest-op")
def longest_op(build: Build, stage, launched_by) -> Statement:
    """The longest op of the forward a chapter shows, named by the aten op that launched it, against the
    longer of its matmuls: `say longest-op naive masked_fill_`."""
    s = build.shown(stage)
    i, op = max(enumerate(s["ops"], 1), key=lambda io: io[1]["duration_us"])
    j, mm = max(_matmuls(s), key=lambda jm: jm[1]["duration_us"])
    text = (f"the longest is op {i}, launched by `{_aten(s, op)}`: {us(op['duration_us'])}, "
            f"{times(op['duration_us'] / mm['duration_us'])} the longer matmul (op {j}, {us(mm['duration_us'])})")
    return Statement(text, _aten(s, op) == launched_by and op["duration_us"] > mm["duration_us"],
                     f"longest op {i} launched by {_aten(s, op)}, matmul {mm['duration_us']:.1f} µs")


@statement("copy-cost")
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
    text = (f"{size / 2**20:.0f} MiB in and {size / 2**20:.0f} MiB out at the copy rate measured on the {s['device']} "
            f"({hw['copy_gbs']:,.0f} GB/s, bytes read + written) should take {us(expected)}; the Memcpy (op {i} of the "
            f"{short(stage)} forward) took {us(copy['duration_us'])}, within {pct(abs(copy['duration_us'] / expected - 1))} "
            f"of that, and writing the mask in place saved {us(saved)} of device time per forward")
    return Statement(text, abs(copy["duration_us"] / expected - 1) < 0.1 and abs(saved / copy["duration_us"] - 1) < 0.1,
                     f"expected {expected:.1f} µs, copy {copy['duration_us']:.1f} µs, saved {saved:.1f} µs")


@statement("same-op-time")
def same_op_time(build: Build, a, b, launched_by) -> Statement:
    """One kernel in two stages' forwards (named by the aten op that launched it): the same time, within 5 %."""
    ta, tb = ({_aten(s, op): op["duration_us"] for op in s["ops"]}[launched_by]
              for s in (build.shown(a), build.shown(b)))
    text = (f"{short(b)}: {us(tb)}; {short(a)}: {us(ta)}; within {100 * abs(tb / ta - 1):.1f} %, "
            f"the same kernel at the same speed")
    return Statement(text, abs(tb / ta - 1) < 0.05, f"{ta:.1f} and {tb:.1f} µs")


@statement("more-ops")
def more_ops(build: Build, a, b) -> Statement:
    """How many more device ops one forward launches than another."""
    na, nb = build.summary(a)["ops_per_forward"], build.summary(b)["ops_per_forward"]
    text = f"{na} device ops against {nb} for {short(b)}'s forward, {na - nb} more"
    return Statement(text, na > nb, f"{na} and {nb}")


@statement("recompile-cliff")
def recompile_cliff(build: Build) -> Statement:
    """Where the recompile chart falls off its cliff: the first call past torch.compile's recompile limit."""
    r = build.run("recompile")
    points = [p for p in r["points"] if p.get("tflops")]
    drop = min(range(1, len(points)), key=lambda i: points[i]["tflops"] / points[i - 1]["tflops"])
    before, after = points[drop - 1], points[drop]
    limit = r["recompile_limit"]
    text = (f"The cliff is at S = {after['shape'][2]:,}, the {ordinal(drop + 1)} new shape, one past "
            f"`torch.compile`'s limit of {limit} recompiles: that call runs at "
            f"{after['tflops']:.1f} TFLOP/s against {before['tflops']:.1f} at S = {before['shape'][2]:,} "
            f"({times(before['tflops'] / after['tflops'], 0)} slower, one call's CUDA-event median), and no "
            f"later shape climbs back.")
    rest = [p["tflops"] for p in points[drop:]]
    return Statement(text, drop == limit and max(rest) < min(p["tflops"] for p in points[:drop]),
                     f"the largest drop before point {drop + 1} of {len(points)}, limit {limit}")
