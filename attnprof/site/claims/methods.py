"""Claims about one quantity by several methods: rates, one call against queued, one call across runs,
what one call adds, where the CPU time goes."""
from __future__ import annotations

import math
import statistics

from ...analysis import decide, summary
from ...analysis.flops import causal_flops, causal_tflops, tflops
from ...model import names
from ...model.stages import DEFAULT_SHAPE, LONG_SHAPE
from ...text import escape, us
from ..build import Build, RecordUnusable, row
from ..words import listed, short
from ..pieces.runs import LAYOUT_TITLES, measured, row_where, steady_rates
from .core import ADAPTS, Flip, Statement, claim
from .edits import each, events, in_first_process, in_run, in_trace, scale
from .wording import held_together, pct


# ---- one quantity, several methods ---------------------------------------------------------------

@claim("rates", reads=lambda stage: [names.record_name(stage, LONG_SHAPE), f"{names.record_name(stage, LONG_SHAPE)}.counters",
                              "run-fastest", "run-sweep", "run-steady"],
       flip=lambda stage: [
           Flip("run-steady.json", in_run("steady", _steady_times(3.0)), ADAPTS, to="alike, one call lower, steady lower"),
           Flip("run-fastest.json", in_run("fastest", _one_call_times(stage, 0.5))),  # one call faster than queued
           Flip("run-fastest.json", in_run("fastest", _one_call_at_queued(stage)), ADAPTS,
                to="alike, one call not told apart, steady not told apart"),
           Flip(f"{names.record_name(stage, LONG_SHAPE)}.json", each("forward_device_us", 0.4), ADAPTS,
                to="kernel, one call lower, steady not told apart")])
def rates(build: Build, stage) -> Statement:
    """A stage's rate at the long shape by every method the site shows it with, the steady run's (back to back
    after seconds of load) among them where that run timed this stage."""
    rec = names.record_name(stage, LONG_SHAPE)
    s = build.summary(rec)
    flops = causal_flops(s["shape"])
    kernel = summary.longest_kernel(s)
    profiler = tflops(flops, kernel["duration_us"])
    counted = build.counters(rec)
    ncu = tflops(flops, sum(k["duration_ns"] or 0 for k in counted["kernels"]) / 1e3) if counted else None
    fastest = {r["layout"]: r for r in build.run("fastest") if r["path"] == stage and "tflops" in r}
    sweep = [r for r in build.run("sweep") if r["path"] == stage and r["shape"][2:] == s["shape"][2:]
             and r.get("tflops_back_to_back")]
    capture = causal_tflops(s)
    steady = _steady(build, stage)  # (its rate, lowest, highest, its range of times, its layout) or None
    f = lambda x: f"{x:.0f}"
    text = (f"{short(stage)} at S={s['shape'][2]:,}, D={s['shape'][3]} appears at several rates on this site, "
            f"one per method and condition: {f(profiler)} TFLOP/s by its kernel's time in the profiler"
            + (f" and {f(ncu)} by Nsight Compute's" if ncu else "")
            + f" (the kernel alone, B={s['shape'][0]}); "
            f"{f(fastest['BSHD']['tflops_back_to_back'])} and {f(fastest['BHSD']['tflops_back_to_back'])} back to back "
            f"(stored [B, S, H, D] and [B, H, S, D], that chapter's table); {f(fastest['BSHD']['tflops'])} and "
            f"{f(fastest['BHSD']['tflops'])} one call at a time in the same run, and {f(capture)} one call at a time "
            f"in the capture's own run ([Fused kernels](fused.md))"
            + "".join(f"; {f(r['tflops_back_to_back'])} back to back at B={r['shape'][0]} in the sweep and the roofline "
                      f"figure" for r in sweep)
            + (f"; {f(steady[0])} (from {f(steady[1])} to {f(steady[2])}) back to back after seconds of load, at steady "
               f"state, stored {_layout(steady[4])} ([Roofline](roofline.md#the-fastest-forward-at-b1-h16-s8192-d128))" if steady else "")
            + ". The kernel-only rates leave out the launches and the gaps between forwards; back to back pays those "
              "once per forward, and one call adds the time from the call to the kernel's start.")
    kernel_only = [profiler] + ([ncu] if ncu else [])
    b2b = [r["tflops_back_to_back"] for r in fastest.values()]
    one_call = [r["tflops"] for r in fastest.values()] + [capture]
    # by the one rule: the kernel alone (the capture's device time per forward) against back to back (another
    # run's processes), and back to back against one call in each layout (the fastest run measures both in turns)
    pick = lambda layout, field: measured(build, "fastest", row_where(path=stage, layout=layout), field)
    alone = decide.samples(s["forward_device_us_each"], decide.DEVICE)
    queued = {l: pick(l, "back_to_back_us_each") for l in fastest}
    apart = [decide.order(alone, q) for q in queued.values()]
    slower = [decide.order(pick(l, "times_us"), queued[l]) for l in fastest]
    outcome = ("alike" if set(apart) == {0} else "kernel" if set(apart) == {-1} else "mixed") + (
        ", one call lower" if set(slower) == {1} else ", one call not told apart")
    # in short runs: the fastest run's tens of milliseconds of queued forwards, apart from the steady run's
    first = {"alike": f"{f(profiler)} TFLOP/s kernel-only and in short back-to-back runs",
             "kernel": f"{f(profiler)} TFLOP/s kernel-only, above back to back in short runs",
             "mixed": f"{f(profiler)} TFLOP/s kernel-only, matched back to back in one layout only"
             }[outcome.split(",")[0]]
    lower = outcome.endswith("lower")
    second = "lower one call at a time" if lower else "as high one call at a time"
    loaded, held, tail = ",", "", ""
    if steady:
        # the steady run's processes against the fastest run's, in the layout both timed: two runs, by the one rule
        layout = steady[4] if steady[4] in queued else next(iter(queued))
        short_run = queued[layout]
        o = decide.order(steady[3], short_run)
        outcome += {1: ", steady lower", 0: ", steady not told apart", -1: ", steady higher"}[o]
        if o == 0:  # no third figure a reader would set against the first: the rule cannot tell them apart
            tail = "; after seconds of load, not told apart from those"
        else:
            loaded = f", {f(steady[0])} after seconds of load,"
        held = (f" After seconds of load it runs at {f(steady[0])} TFLOP/s, "
                + {1: "below", 0: "not told apart from", -1: "above"}[o]
                + f" the short runs' rate stored {_layout(layout)} ({steady[3].text(us)} against {short_run.text(us)} per "
                  f"forward{held_together(steady[3], short_run)}); how much of the difference the clock makes is not "
                  f"measured.")
    lesson = f"{short(stage)} runs {first}{loaded} and {second}{tail}"
    text += (f" Set side by side by the one rule, its rate is {first}, and {second}"
             + (f", down to {f(min(one_call))}." if lower else ".") + held)
    return Statement(text, -1 not in slower, lesson=lesson, outcome=outcome,  # one call never beats its own queue
                     rests_on=f"kernel {kernel_only}, back to back {b2b}, one call {one_call}; kernel alone against "
                              f"back to back {apart}, one call against back to back {slower}")


def _steady(build: Build, stage: str):
    """The steady run's rate of `stage` (pieces.runs.steady_rates: the median of its processes' rates), its lowest
    and highest, the range of its processes' back-to-back times, as the one rule takes it, and the layout its inputs
    were stored in; None where that run timed another stage."""
    r, each = build.run("steady"), steady_rates(build)
    if r["path"] != stage or not each:
        return None
    rates_ = sorted(fwd for fwd, _ in each)
    times = decide.of([rep["back_to_back_us_each"] for rep in r["repeats"] if "error" not in rep],
                      decide.BACK_TO_BACK, "steady")
    return statistics.median(rates_), rates_[0], rates_[-1], times, r["layout"]


def _layout(layout: str) -> str:
    """How the inputs sat in memory, as the roofline's tables say it; a layout they do not name, escaped."""
    return LAYOUT_TITLES.get(layout) or escape(layout)


def _steady_times(factor: float):
    """The steady run with every process's back-to-back samples `factor` times their own."""
    return lambda result: [rep.update(back_to_back_us_each=scale(rep["back_to_back_us_each"], factor))
                           for rep in result["repeats"] if "back_to_back_us_each" in rep]


def _one_call_times(stage: str, factor: float):
    """The fastest run's rows of `stage` with their one-call samples `factor` times their own."""
    return lambda rows: [r.update(times_us=scale(r["times_us"], factor)) for r in rows if r["path"] == stage]


def _one_call_at_queued(stage: str):
    """The fastest run's rows of `stage` with each one-call sample at the row's median queued time."""
    return lambda rows: [r.update(times_us=[statistics.median(r["back_to_back_us_each"])] * len(r["times_us"]))
                         for r in rows if r["path"] == stage and r.get("back_to_back_us_each")]


@claim("queued-vs-one-call", reads=["run-fastest"],
       flip=lambda stage: [Flip("run-fastest.json", in_run("fastest", _one_call_times(stage, 1.5)), ADAPTS, to="apart"),
                           Flip("run-fastest.json", in_first_process("fastest", _one_call_times(stage, 1.5)), ADAPTS,
                                to="near"),
                           Flip("run-fastest.json", in_run("fastest", _one_call_at_queued(stage)), ADAPTS, to="small")])
def queued_vs_one_call(build: Build, stage) -> Statement:
    """At the long shape, how much longer a stage's one call takes than a forward queued back to back, each
    process's own ratio (the fastest run measures both in turns), held to decide.QUEUED_NEAR: below it in
    every process and layout, the launch is small beside the kernel; above it in every process of a layout,
    the host around one call shows; otherwise this run cannot say which."""
    layouts = [r["layout"] for r in build.run("fastest") if r["path"] == stage and r.get("back_to_back_us_each")]
    if not layouts:
        raise RecordUnusable(f"the fastest-forward run has no row of {stage} timed back to back")
    pick = lambda layout, field: measured(build, "fastest", row_where(path=stage, layout=layout), field)
    pairs = {l: (pick(l, "back_to_back_us_each"), pick(l, "times_us")) for l in layouts}
    # one call over queued, each process's own ratio (the run measures both in turns)
    ratios = {l: decide.quotient(one, q) for l, (q, one) in pairs.items()}
    sides = {decide.against(r, 1 + decide.QUEUED_NEAR, decide.POINT_BAND) for r in ratios.values()}
    outcome = "small" if sides == {"below"} else "apart" if "above" in sides else "near"
    said = "; ".join(f"stored {l}, {q.text(us)} queued against {one.text(us)} for one call"
                     for l, (q, one) in pairs.items())
    top, low = (math.ceil(100 * (max(r.hi for r in ratios.values()) - 1)),
                math.floor(100 * (min(r.lo for r in ratios.values()) - 1)))
    how, threshold = next(iter(pairs.values()))[0].how, pct(decide.QUEUED_NEAR)
    small = f"{threshold}, the largest extra this site still calls a small launch"  # decide.QUEUED_NEAR, said plainly
    if outcome == "small":
        text = (f"{short(stage)}'s one call takes at most {top} % longer than a forward queued back to back in every "
                f"process, under {small} ({said}; {how}): beside a forward this long, the launch that one call adds "
                f"is small")
        lesson = f"{short(stage)}'s one call is within {top} % of its queued time: beside a kernel this long, the launch is small"
    elif outcome == "apart":
        text = (f"{short(stage)}'s one call takes up to {top} % longer than a forward queued back to back, more than "
                f"{small}, in every process of a layout ({said}; {how}): even beside a forward this long, what the "
                f"host does around one call shows")
        lesson = f"{short(stage)}'s one call takes up to {top} % longer than its queued time: even here the host around a call shows"
    else:
        text = (f"{short(stage)}'s one call takes {low} % to {top} % longer than a forward queued back to back: more "
                f"than {small}, in some process, less in another ({said}; {how}), so this run cannot say whether the "
                f"launch is small beside a forward this long")
        lesson = (f"{short(stage)}'s one call takes up to {top} % longer than its queued time: whether its launch is "
                  f"small here, this run cannot tell")
    return Statement(text, True, lesson=lesson, outcome=outcome,
                     rests_on=f"one call over queued {', '.join(f'{l} {r.lo:.2f}–{r.hi:.2f}' for l, r in ratios.items())} "
                     f"against {1 + decide.QUEUED_NEAR:.2f}")


def _graphs_row(build: Build, path: str) -> dict | None:
    """The eager row of the graphs run for an SDPA path at the post's shape, where that run has one."""
    try:
        rows = build.run("graphs")
    except RecordUnusable:  # the sentence leaves out what it would have said from the graphs run
        return None
    return next((r for r in rows if r.get("path") == f"SDPA {path}" and r.get("shape") == list(DEFAULT_SHAPE)
                 and "eager" in r), None)


def above(one: decide.Range, device: decide.Range) -> bool:
    """Whether a one-call range lies wholly above a device time's: every call's latency holds its kernels, so
    what is checked is that the range bears it out, not a difference between two like quantities."""
    return decide.against(one, device.hi, decide.POINT_BAND) == "above"


@claim("one-call-runs", reads=["cudnn", "flash", names.record_name("cudnn", LONG_SHAPE), "run-graphs", "run-fastest"],
       flip=Flip("cudnn.json", events(0.5, of="forward_device_us_each")))  # one call below the device time
def one_call_runs(build: Build) -> Statement:
    """One call's CUDA-event median is a latency, above the device time, and it differs between runs; each
    comparison by the one rule."""
    parts, holds, moved = [], True, []
    for stage, label in (("cudnn", "cuDNN"), ("flash", "flash")):
        s, g = build.summary(stage), _graphs_row(build, label if stage == "flash" else "cuDNN")
        own, device = decide.samples(s["event_times_us"], decide.ONE_CALL), decide.samples(s["forward_device_us_each"], decide.DEVICE)
        holds &= above(own, device)
        if g:
            other = measured(build, "graphs", lambda res: row(res, path=g["path"], where=g["where"])["eager"], "times_us")
            parts.append(f"{label}'s is {own.text(us)} in its capture's run and {other.text(us)} in the CUDA-graph run "
                         f"of [What CUDA graphs and compile change](graphs-and-compile.md)")
            holds &= above(other, device)
            moved += [label] if decide.told_apart(own, other) else []
    long = build.summary(names.record_name("cudnn", LONG_SHAPE))
    own, device = decide.samples(long["event_times_us"], decide.ONE_CALL), decide.samples(long["forward_device_us_each"], decide.DEVICE)
    holds &= above(own, device)
    fast = next((r for r in build.run("fastest") if r["path"] == "cudnn" and r.get("layout", "BHSD") == "BHSD"), None)
    if fast:
        other = measured(build, "fastest", row_where(path="cudnn", layout=fast.get("layout")), "times_us")
        holds &= above(other, device)
        moved += ["cuDNN's at the long shape"] if decide.told_apart(own, other) else []
        parts.append(f"cuDNN's at B=1, S=8,192, D=128 is {own.text(us)} in its capture's run and {other.text(us)} in "
                     f"the fastest-forward run of [Roofline](roofline.md), over {device.text(us)} of device time")
    text = ("One call's CUDA-event median is a latency, the kernels plus the launch and whatever the host did "
            "before it, always above the device time, and not a property of the kernels alone: each run measures its "
            "own. At the post's shape " + "; ".join(parts) + " (median and range of each run's calls: p10–p90 of one "
            "process, or across the run's processes). "
            + (f"Of these, {listed(moved)} differ between the two runs by more than their spread. " if moved else
               "No pair of runs is told apart here: one call moves between processes by more than their difference. ")
            + "Each table names the run its numbers come from.")
    lesson = ("One call's time is a latency above the device time, and each run measures its own"
              + (f": {listed(moved)} differ between two runs" if moved else ""))
    return Statement(text, holds, "; ".join(parts), lesson=lesson)


def _extra_near(path: str, against: str, layout: str, factor: float):
    """The fastest run's rows with `against`'s one call in `layout` adding `factor` times what `path`'s adds over
    back to back in the same layout, in each process (its samples shifted, their spread kept)."""
    def edit(rows):
        a, b = row(rows, path=path, layout=layout), row(rows, path=against, layout=layout)
        extra = factor * (statistics.median(a["times_us"]) - statistics.median(a["back_to_back_us_each"]))
        shift = statistics.median(b["back_to_back_us_each"]) + extra - statistics.median(b["times_us"])
        b["times_us"] = [t + shift for t in b["times_us"]]
    return edit


@claim("one-call-extra", reads=["run-fastest"],
       flip=lambda path, against: [
           Flip("run-fastest.json", in_run("fastest", _extra_near(path, against, "BSHD", 0.98)), ADAPTS,
                to=f"{path}: BHSD more, BSHD not told apart"),
           Flip("run-fastest.json", in_run("fastest", _extra_near(path, against, "BSHD", 2.0)), ADAPTS,
                to=f"{path}: BHSD more, BSHD less"),
           Flip("run-fastest.json", in_run("fastest", _one_call_at_queued(path)))])  # its one call adds nothing: false
def one_call_extra(build: Build, path, against) -> Statement:
    """What one call adds over a forward's back-to-back time in the fastest-forward run: `path`'s, in each of its
    layouts, against `against`'s in the same layout by the one rule (process by process); the other paths' extras
    given as numbers, in the run's order. One call's extra moves with the host's CPU from process to process, so
    no ranking of the paths by it is said."""
    keys = [(r["path"], r["layout"]) for r in build.run("fastest") if r.get("back_to_back_us_each") and r.get("times_us")]
    pick = lambda k, f: measured(build, "fastest", row_where(path=k[0], layout=k[1]), f)
    one = {k: pick(k, "times_us") for k in keys}
    queued = {k: pick(k, "back_to_back_us_each") for k in keys}
    extra = {k: decide.difference(one[k], queued[k]) for k in keys}
    own = [k for k in keys if k[0] == path]
    if not own:
        raise KeyError(f"the fastest-forward run has no row of {path!r}")
    versus = {k[1]: decide.order(extra[k], extra[(against, k[1])]) for k in own if (against, k[1]) in extra}
    word, said = {1: "more than", 0: "not told apart from", -1: "less than"}, {1: "more", 0: "not told apart", -1: "less"}
    if len(set(versus.values())) == 1:
        than = (f"{word[next(iter(versus.values()))]} {short(against)}'s"
                + (" in both layouts" if len(versus) > 1 else f" stored {next(iter(versus))}"))
    else:
        than = listed([f"{word[o]} {short(against)}'s stored {l}" for l, o in versus.items()])
    rival = " and ".join(f"{extra[(against, l)].text(us)} stored {l}" for l in versus)
    others = [k for k in keys if k[0] not in (path, against)]  # in the run's order, a fixed one
    lesson = (f"{short(path)}'s one call adds {listed([f'{us(extra[k].median)} stored {k[1]}' for k in own])} over "
              f"back to back, {than}")
    text = (f"{short(path)}'s one call adds "
            + "; ".join(f"{extra[k].text(us)} stored {k[1]} ({one[k].text(us)} one call against {queued[k].text(us)} "
                        f"back to back)" for k in own)
            + f"; {short(against)}'s adds {rival} in the same processes, so {short(path)}'s is {than}, by each "
              f"process's own difference"
            + (". The other paths' extras, in the run's order: " if others else "")
            + "; ".join(f"{short(k[0])} stored {k[1]}, {extra[k].text(us)}" for k in others)
            + f" ({one[own[0]].how}): one call's extra moves with the host's CPU from process to process, so the "
              f"paths are not ranked by it")
    holds = bool(versus) and all(decide.order(one[k], queued[k]) == 1 for k in own)  # what it adds is told from nothing
    outcome = f"{path}: " + ", ".join(f"{l} {said[o]}" for l, o in versus.items())
    return Statement(text, holds, ", ".join(f"{short(k[0])} stored {k[1]} {extra[k].median:.1f}" for k in keys), outcome,
                     lesson)


@claim("cudnn-cpu-inside", reads=["cudnn"], flip=Flip("cudnn.trace.json.gz", in_trace("cpu_op", "aten::_cudnn_attention_forward", 0.1)))
def cudnn_cpu_inside(build: Build) -> Statement:
    """Where cuDNN's forward spends its CPU time: inside `_cudnn_attention_forward`, in the pictured forward."""
    _, shown = build.forwards("cudnn")
    inside = next(c.duration_us for c in shown.cpu_ops if c.name == "aten::_cudnn_attention_forward")
    text = (f"{pct(inside / shown.cpu_us)} of it ({us(inside)} of {us(shown.cpu_us)}, profiler) inside "
            f"`_cudnn_attention_forward`")
    return Statement(text, decide.against(inside / shown.cpu_us, decide.MOST, decide.POINT_BAND) == "above",
                     f"{inside:.1f} of {shown.cpu_us:.1f} µs",
                     lesson=f"{pct(inside / shown.cpu_us)} of it inside `_cudnn_attention_forward`")
