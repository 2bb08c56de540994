"""Pieces over the timing run (`run-timing.json`): one forward under every timing method, and the launch-bound
/ GPU-bound verdict of unprofiled measurements (analysis/timing.py). A verdict in prose is a claim:
`<!-- attnprof: verdict cudnn 8x16x1024x64 stream expect=GPU-bound -->` renders the sentence with its numbers,
and fails the build, naming the sentence, when the data give another verdict.
"""
from __future__ import annotations

import math
import re

from ...analysis import aa, decide, oplist, timing
from ...model import names
from ...model.procedure import SCHEDULE, THROTTLE
from ...model.stages import DEFAULT_SHAPE, STAGES
from ...text import escape, shape as shape_text, us
from ..render import tables
from ..build import Build, FalseStatement
from ..words import CAPTURE_RUN, CPU, DEVICE, MEDIAN, ONE_CALL, TIMING_RUN, count, listed, mhz, short, sm_readings, title
from ..registry import piece


def rows(build: Build) -> list[dict]:
    return [r for r in build.run("timing")["rows"] if "error" not in r]


def judged(r: dict) -> bool:
    """Whether a row has every unprofiled method's samples (no GPU only where its CUDA graph failed)."""
    return all(r.get(k) for k in timing.UNPROFILED)


def verdict_rows(build: Build) -> list[dict]:
    return [r for r in rows(build) if judged(r)]


def repeated(build: Build, stage, shape) -> list[timing.Verdict]:
    """The verdict of a stage and shape in each independent repeat of the timing run, the first first."""
    found = [timing.find(rep["rows"], stage, shape) for rep in build.repeats("timing")]
    return [timing.verdict(r) for r in found if "error" not in r and judged(r)]


def timed_range(build: Build, stage, shape, field="enqueue_us") -> decide.Range:
    """A row's `field` (`device_us`, `cpu_us`: its profiled part's) across the run's repeats, in its regime."""
    found = [timing.find(rep["rows"], stage, shape) for rep in build.repeats("timing")]
    at = (aa.PROFILED, field) if field in (found[0].get(aa.PROFILED) or {}) else (field,)
    return aa.ranges("run-timing", [f for f in found if "error" not in f and at in aa.fields(f)], at)


def clock_of(build: Build, shape) -> str:
    """"SM clock 1,830–1,980 MHz over the rounds kept" at `shape` over every process, or that it is unrecorded."""
    sm = sm_readings(r for rep in build.repeats("timing") for r in rep["rows"] if r["shape"] == list(_dims(shape)))
    return f"SM clock {mhz(sm)} over the rounds kept" if sm else "the SM clock unrecorded"


def _dims(shape) -> tuple:
    """A shape of the timing run, given as "8x16x1024x64" or [8, 16, 1024, 64]."""
    return tuple(int(x) for x in (shape.split("x") if isinstance(shape, str) else shape))


def _record(stage: str, shape) -> str:
    return names.record_name(stage, _dims(shape))


def where(s) -> str:
    """A shape as the pages name it."""
    return f"{shape_text(s)}{' (the post’s)' if tuple(s) == DEFAULT_SHAPE else ''}"


def spread(x: timing.Stats) -> str:
    """A median with its p10–p90 range under it, for a table cell (a wide table stays within the column)."""
    if x.median >= 1000:  # the range in the median's unit
        return f"{us(x.median)}<br>({x.p10 / 1000:.3f}–{x.p90 / 1000:.3f})"
    return f"{us(x.median)}<br>({x.p10:.1f}–{x.p90:.1f})"


def _signed(x: float) -> str:
    return ("−" if x < 0 else "+") + us(abs(x))


def _rounds_note(results: list[dict]) -> str:
    """How a shape's stages were measured together in rounds (bench.interleaved), where the run kept them."""
    measured = [r for result in results for r in result["rows"] if "rounds" in r]
    if not measured:
        return ""
    shapes = {(i, tuple(r["shape"])): r for i, result in enumerate(results) for r in result["rows"] if "rounds" in r}
    dropped = sum(r["throttled"] for r in shapes.values())  # one count a shape and process: every stage shares it
    sm = sm_readings(measured)
    clock = f"; the SM clock over the rounds kept: {mhz(sm)}" if sm else ""
    return (f"The stages of each shape were measured together, each once a round in a shuffled order. A round "
            f"whose SM clock, read before and after it, fell below {100 * THROTTLE:.0f} % of the GPU's maximum was "
            f"dropped for all ({dropped} dropped{clock}). ")


def _method_note(build: Build) -> str:
    r, processes = build.run("timing"), len(build.repeats("timing"))
    pooled = f", in each of {processes} separate processes, pooled" if processes > 1 else ""
    return (f"Unprofiled times ({TIMING_RUN}) are medians with p10–p90 in brackets, in the median's unit. One call: over "
            f"{r['one_call_reps']} calls{pooled}. Back to back, GPU only and CPU enqueue: per call, over {r['reps']} runs of "
            f"{r['calls']} calls each{pooled}. {_rounds_note(build.repeats('timing'))}bf16, causal.")


@piece("timing-table")
def timing_table(build: Build):
    """Every stage of the timing run: the four unprofiled methods, the stream's verdict, the launch overhead."""
    out = []
    for r in rows(build):
        one = timing.stats(r["one_call_us"])
        build.number(_record(r["stage"], r["shape"]), ONE_CALL, TIMING_RUN, us(one.median))
        cells = [spread(timing.stats(r[k])) if r.get(k) else "—" for k in ("back_to_back_us", "graph_us", "enqueue_us")]
        if judged(r):  # a row without GPU-only samples (no CUDA graph) has no verdict: shown as measured
            v = timing.verdict(r)
            every = "" if timing.consensus(repeated(build, r["stage"], r["shape"])) else ", not in every process"
            said = (f"**{v.stream}**{every}", _signed(v.launch_overhead_us))
        else:
            said = ("no verdict (no CUDA graph)", "—")
        out.append((short(r["stage"]), shape_text(r["shape"]), spread(one), *cells, *said))
    return (tables.table(["stage", "shape", "one call (events)", "back to back (events)",
                          "GPU only (graph)", "CPU enqueue (host clock)", "a stream is", "launch overhead"], out, "llrrrrlr")
            + "\n\nShape B×H×S×D; medians, p10–p90 in brackets; launch overhead: one call less GPU only.\n\n"
            + '??? note "How the timing run measured"\n    ' + _method_note(build))


def _cell(x: timing.Stats | None) -> str:
    return "—" if x is None else spread(x) if x.n > 3 else us(x.median)


def _cells(build: Build, r: dict) -> dict[str, str]:
    """Each method's cell: the unprofiled ones from a row of the timing run, the profiled ones from the stage's
    capture, as its chapter gives them (device and CPU time: the median of its forwards; span: the forward drawn)."""
    v, record = timing.verdict(r), names.record_name(r["stage"], r["shape"])
    capture = build.summary(record)
    return {"graph_us": _cell(v.gpu_only),
            "profiled_device": build.number(record, DEVICE, MEDIAN, us(capture["forward_device_us"])),
            "back_to_back_us": _cell(v.back_to_back), "profiled_span": us(oplist.gaps(capture).span_us),
            "one_call_us": _cell(v.one_call), "one_call_wall_us": _cell(timing.stats(r["one_call_wall_us"])),
            "enqueue_us": _cell(v.enqueue), "profiled_cpu": build.number(record, CPU, MEDIAN, us(capture["cpu_forward_us"]))}


def _other_runs(build: Build, r: dict, v: timing.Verdict) -> list[tuple]:
    """The same stage and shape timed in other runs: Nsight Compute's counters record, the stage's capture."""
    record = names.record_name(r["stage"], r["shape"])
    lines = []
    measured = build.counters(record)
    if measured:
        ncu_us = sum(k["duration_ns"] or 0 for k in measured["kernels"]) / 1000
        clocks = ("clocks left to the GPU (`--clock-control none`)" if "--clock-control none" in measured["command"]
                  else "clocks locked to base by Nsight Compute (its default)")
        lines.append(("Nsight Compute duration", f"the kernels of one forward replayed under ncu ({escape(measured['date'])})",
                      us(ncu_us), f"another run: each kernel replayed alone, {clocks}"))
    capture = build.summary(record)
    lines.append(("one call (CUDA events), in the stage's capture", f"the capture's own {capture['settings']['event_reps']} "
                  f"calls ({escape(capture['date'])})",
                  f"{build.number(record, ONE_CALL, CAPTURE_RUN, us(capture['event_median_us']))} "
                  f"({capture['event_p10_us']:.1f}–{capture['event_p90_us']:.1f})",
                  "the same method in another run: " + (
                      "inside" if v.one_call.p10 <= capture["event_median_us"] <= v.one_call.p90 else "outside")
                  + " this run's p10–p90 for one call"))
    return lines


@piece("methods")
def methods(build: Build, stage="cudnn", shape=None):
    """One stage at one shape under every method: the unprofiled ones from one timing run, the profiled ones
    from the stage's capture, then Nsight Compute and the capture's own one call."""
    r = timing.find(build.run("timing")["rows"], stage, shape or DEFAULT_SHAPE)
    v = timing.verdict(r)
    cells = _cells(build, r)
    lines = [(m.name, m.how.format(calls=r["calls"]), cells[key], m.why) for key, m in timing.METHODS.items()]
    return (f"{title(stage)}, {where(r['shape'])}, timed by each method:\n\n"
            + tables.table(["method", "what it measures", "time (median, p10–p90 in µs)", "why it differs"],
                           lines + _other_runs(build, r, v), "llrl")
            + f"\n\nUnprofiled rows from one timing run. The profiled rows are the stage's capture, as its chapter "
              f"gives them: device and CPU time the median of its {count(SCHEDULE['active'])} profiled forwards, the "
              f"span that of the forward drawn. " + _method_note(build))


@piece("kernel-clocks", inline=True)
def kernel_clocks(build: Build, stage="cudnn", shape=None):
    """How far apart the three kernel-only times of a stage are: GPU only, profiled device time, Nsight Compute."""
    r = timing.find(build.run("timing")["rows"], stage, shape or DEFAULT_SHAPE)
    v = timing.verdict(r)
    record = names.record_name(r["stage"], r["shape"])
    times = {"GPU only": v.gpu_only.median, "profiled device time": build.summary(record)["forward_device_us"]}
    build.number(record, DEVICE, MEDIAN, us(times["profiled device time"]))
    measured = build.counters(record)
    if measured:
        times["Nsight Compute"] = sum(k["duration_ns"] or 0 for k in measured["kernels"]) / 1000
    apart = 100 * (max(times.values()) - min(times.values())) / min(times.values())  # of the smallest
    return (f"they lie within {math.ceil(apart)} % of each other (" + ", ".join(f"{k} {us(t)}" for k, t in times.items())
            + ")")


def _claim(directive: str, expect: str | None, found: str, sentence: str) -> str:
    if expect is not None and expect != found:
        raise FalseStatement(f"the sentence `{directive}` says {expect!r}, the data say {found!r}: {sentence} "
                         f"(rewrite the sentence, or retake the run with `python -m attnprof sweep --only timing`)")
    return sentence


UNDECIDED_CALL = "launch and kernels not told apart"  # one call within the one rule's reach of twice its GPU work


@piece("verdict", inline=True, conclusion=True)
def verdict_sentence(build: Build, stage, shape, kind="stream", expect=None):
    """A verdict in prose, with its evidence: kind=stream or kind=call (one call's launch overhead). With
    expect=..., the build fails when the data say otherwise."""
    expect = expect.replace("_", " ") if expect else None
    r = timing.find(build.run("timing")["rows"], stage, shape)
    v = timing.verdict(r)
    directive = f"verdict {stage} {shape} {kind}"
    if kind == "stream":
        every, enqueue = repeated(build, stage, shape), timed_range(build, stage, shape)
        said = timing.consensus(every) or v.stream
        if expect == said and not timing.settled(every):
            raise FalseStatement(f"the sentence `{directive}` expects {expect!r}, and the timing run says so, but not "
                                 f"in every repeat by the {timing.HOST_MARGIN:g}× margin that decides it "
                                 f"({', '.join(x.stream for x in every)}; GPU only {us(v.gpu_only.median)}, CPU enqueue "
                                 f"{us(v.enqueue.median)}): drop expect= and let the sentence give its room")
        return _claim(directive, expect, said, build.fold(  # its times folded: the page gives each forward's one
            f"**{said}** in a stream{'' if timing.consensus(every) else ', not in every process'}",
            f"{said} in a stream{_margin(build, every)}: back to back it takes "
            f"{us(v.back_to_back.median)} per call, against {us(v.gpu_only.median)} of GPU work (CUDA-graph "
            f"replay) and {enqueue.text(us)} of CPU enqueue ({enqueue.how}){_room([every])}"))
    if kind == "call":  # launch overhead against GPU work, by the one rule: one call against twice the GPU work
        one, gpu = timed_range(build, stage, shape, "one_call_us"), timed_range(build, stage, shape, "graph_us")
        side = decide.order(one, gpu.scaled(lambda x: 2 * x))
        found = ("launch dominates" if side > 0 else UNDECIDED_CALL if side == 0 else
                 "kernels dominate" if v.launch_overhead_us > 0 else "no launch overhead visible")
        if expect is not None and found == UNDECIDED_CALL:
            raise FalseStatement(f"the sentence `{directive}` expects {expect!r}, but one call ({one.text(us)}) and "
                                 f"twice its GPU work ({gpu.scaled(lambda x: 2 * x).text(us)}) are not told apart "
                                 f"({one.how}): drop expect= and let the numbers speak")
        relation = {"launch dominates": "more than twice", UNDECIDED_CALL: "not told apart from twice",
                    "kernels dominate": "less than twice", "no launch overhead visible": "no more than"}[found]
        return _claim(directive, expect, found, build.fold(
            f"one call takes {build.number(_record(stage, shape), ONE_CALL, TIMING_RUN, us(one.median))}, {relation} "
            f"its GPU work",
            f"it takes {one.text(us)} (CUDA events), {gpu.text(us)} of it GPU work (CUDA-graph replay) "
            f"and {_signed(v.launch_overhead_us)} launch overhead ({100 * v.launch_overhead_us / v.one_call.median:.0f} %"
            f"; {one.how})"))
    raise KeyError(f"unknown verdict kind {kind!r} (known: stream, call)")


def queue_never_full(build: Build) -> list[str]:
    """Rows whose enqueue slowed in its second half (a sign that launches waited for room in the GPU's queue)."""
    return [f"{STAGES[r['stage']].short or title(r['stage'])} at {where(r['shape'])}" for r in rows(build)
            if not timing.agree(timing.stats(r["enqueue_late_us"]), timing.stats(r["enqueue_us"]))]


@piece("queue-check", inline=True)
def queue_check(build: Build):
    slow = queue_never_full(build)
    if slow:
        return ("in " + "; ".join(slow) + " the second half of the enqueue loop ran slower than the whole, so "
                "some launches may have waited for room in the GPU's queue: read their CPU enqueue as an upper bound")
    return ("in every row the enqueue loop's second half ran at the whole loop's pace, so no launch waited for room "
            "in the GPU's queue")


def inflation_range(build: Build) -> tuple[float, float]:
    """Verdict.profiler_inflation's lowest and highest over every row."""
    x = [timing.stats(r["profiled"]["cpu_us"]).median / timing.stats(r["enqueue_us"]).median for r in rows(build)
         if (r.get("profiled") or {}).get("cpu_us") and r.get("enqueue_us")]
    return min(x), max(x)


def _at(build: Build, shape: str) -> list[dict]:
    """The rows at a shape that have a verdict."""
    return [r for r in verdict_rows(build) if "x".join(map(str, r["shape"])) == shape]


def _margin(build: Build, every: list[timing.Verdict]) -> str:
    """Nothing where every process gives the verdict; where they disagree, that it is this run's, not decided."""
    if timing.consensus(every) is not None:
        return ""
    host = re.sub(r"\s+", " ", re.sub(r"\((R|TM)\)", "", build.run_record("timing").get("host_cpu") or "")).strip()
    return (f" in this run{f' (host CPU: {escape(host)})' if host else ''}, not decided: its {len(every)} separate "
            f"processes said {listed([v.stream for v in every])}, so another run or host may give another verdict")


def _room(groups: list[list[timing.Verdict]]) -> str:
    """How far the verdict these stages share (each its processes' verdicts) reaches beyond this host, where the
    two sides came closest (timing.room); nothing where no one side sets the pace in every process."""
    rooms = [(timing.room(every), every) for every in groups]
    if not rooms or any(n is None for n, _ in rooms):
        return ""
    n, every = min(rooms, key=lambda x: x[0])
    close = min(every, key=lambda v: abs(math.log(v.gpu_only.median / v.enqueue.median)))
    gpu = timing.consensus(every) == "GPU-bound"
    return (f"; a CPU that enqueues up to {n:.1f}× {'slower' if gpu else 'faster'} would give the same verdict"
            f"{'' if len(groups) == 1 else ' for every one of them'} (where the two came closest: "
            f"{us(close.gpu_only.median)} GPU only against {us(close.enqueue.median)} of CPU enqueue)")


@piece("verdicts", inline=True, conclusion=True)
def verdicts(build: Build, shape, expect=None):
    """Every stage at one shape in one sentence ("efficient, flash, … are all **GPU-bound** in a stream"), those
    not the same in every repeat said apart; with expect=..., the build fails unless every one settles on it."""
    expect = expect.replace("_", " ") if expect else None
    every = {short(r["stage"]): repeated(build, r["stage"], shape) for r in _at(build, shape)}
    if not every:
        raise ValueError(f"the timing run has no row at {shape}")
    found = {short(r["stage"]): timing.verdict(r) for r in _at(build, shape)}  # over every process, as `verdict` says it
    agreed = {k: timing.consensus(e) for k, e in every.items() if timing.consensus(e)}  # every process says it
    close = {k: v for k, v in found.items() if k not in agreed}
    kinds = sorted(set(agreed.values()))
    group = lambda kind: [t for t, v in agreed.items() if v == kind]
    if len(kinds) == 1:
        lesson = f"{listed(list(agreed))} {'is' if len(agreed) == 1 else 'are all'} **{kinds[0]}** in a stream"
    else:
        lesson = "; ".join(f"{listed(group(k))}: **{k}**" for k in kinds)
    sentence = "; ".join(f"{listed(group(k))}: {k}" + _room([every[t] for t in group(k)]) for k in kinds)
    if close:
        lesson += ("; " if lesson else "") + "; ".join(f"{k} is **{v.stream}** overall, not in every process"
                                                     for k, v in close.items())
        sentence += ("; " if sentence else "") + "; ".join(f"{k}: {v.stream}{_margin(build, every[k])}"
                                                           for k, v in close.items())
    settled = all(timing.settled(e) for e in every.values())
    found_kind = kinds[0] if len(kinds) == 1 and not close else "mixed"
    if expect is not None and expect == found_kind and not settled:
        raise FalseStatement(f"the sentence `verdicts {shape}` expects {expect!r}, and every process says so, but not "
                             f"every stage by the {timing.HOST_MARGIN:g}× margin that decides it: drop expect=")
    return _claim(f"verdicts {shape}", expect, found_kind, build.fold(lesson, sentence))


@piece("lone-call", inline=True)
def lone_call(build: Build):
    """Where one call came out shorter than GPU only per call: decidedly, or not told apart."""
    below = []
    for r in verdict_rows(build):
        one, gpu = (timed_range(build, r["stage"], r["shape"], f) for f in ("one_call_us", "graph_us"))
        if one.median < gpu.median:
            below.append((r, one, gpu, decide.order(one, gpu) < 0))
    if not below:
        return "Everywhere in this run one call took longer than the GPU-only time per call."
    said = lambda group: "; ".join(f"{short(r['stage'])} at {where(r['shape'])}, {one.text(us)} for one call against "
                                   f"{gpu.text(us)}" for r, one, gpu, _ in group)
    shorter, tied = [x for x in below if x[3]], [x for x in below if not x[3]]
    text = []
    if tied:
        text.append(build.fold("A negative overhead means one call and the GPU-only time per call are not told apart: "
                               "beside a kernel this long, the launch is within their spread",
                               f"{said(tied)}; {tied[0][1].how}") + ".")
    if shorter:
        clocks = ("read the SM clock once a round, not during each call, and did not record"
                  if any("clocks" in r for r in rows(build)) else "did not record clocks or")
        text.append(f"One call measured decidedly *shorter* than the GPU-only time per call of a stream of "
                    f"{build.run('timing')['calls']} ({said(shorter)}; {shorter[0][1].how}). The launch overhead is "
                    f"still there, but smaller than the difference between one kernel on an idle GPU and the same "
                    f"kernel inside a sustained stream; this run {clocks} cache state, so it does "
                    f"not say which of them made the lone call faster.")
    return " ".join(text)


@piece("timing-value", inline=True)
def timing_value(build: Build, what, stage=None, shape=None):
    """A figure of the timing run inline: inflation, tolerance, cpu_tolerance, margin, overheads SHAPE (the
    launch overheads' range there), or a row's one_call and enqueue medians."""
    if what == "inflation":  # the sentences around it say the profiler adds CPU time: hold them to it
        lo, hi = inflation_range(build)
        if lo <= 1:
            raise FalseStatement(f"the page says the profiler inflates the CPU side, but one row's profiled CPU time "
                             f"is {lo:.2f}× its unprofiled enqueue")
        return f"{lo:.1f}× to {hi:.1f}×"
    if what == "overheads":
        x = [timing.verdict(r).launch_overhead_us for r in _at(build, stage)]
        return f"{us(min(x))} to {us(max(x))}"
    if what == "tolerance":  # the floor against the GPU-only time
        return f"{100 * timing.REL_TOLERANCE:.0f} %"
    if what == "cpu_tolerance":  # ... and against the CPU enqueue, which moves more between rounds
        return f"{100 * timing.CPU_FLOOR:.0f} %"
    if what == "margin":
        return f"{timing.HOST_MARGIN:g}×"
    if what in ("one_call", "enqueue"):
        return us(getattr(timing.verdict(timing.find(build.run("timing")["rows"], stage, shape)), what).median)
    raise KeyError(f"unknown timing value {what!r}")


def own_stream_line(s: dict) -> str:
    """A reader's capture: what its own unprofiled samples say about a stream of its calls."""
    st = timing.record_stream(s)
    if st.basis != timing.GRAPH:
        return f" Unprofiled, a stream of these forwards (this capture's own samples): {escape(st.note)}."
    return (f" Unprofiled (this capture's own samples, [the rule](launch-bound.md#launch-bound-or-gpu-bound)), a "
            f"stream of these forwards is **{st.verdict}**: {us(st.back_to_back.median)} per call back to back against "
            f"{us(st.gpu_only.median)} GPU only (a CUDA-graph replay) and {us(st.enqueue.median)} CPU enqueue.")
