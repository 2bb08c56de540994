"""Claims about the backward pass: its cost over the forward, its ranking, its host side."""
from __future__ import annotations

from ...analysis import decide
from ...model import names
from ...model.stages import select
from ...text import us
from ..build import Build, RecordUnusable, across, row
from ..words import listed, short, title, within
from .core import ADAPTS, Flip, Statement, claim
from .edits import scaled_row, setting
from .wording import front, times


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
    lesson = (f"A fused backward recomputes the probabilities, so it takes {times(fused[lo])} to {times(fused[hi])} "
              f"its forward's device time, a larger multiple than any unfused backward's")
    holds = (decide.against(min(fused.values()), max(unfused.values()), decide.POINT_BAND) == "above"
             and decide.against(min(fused.values()), decide.BACKWARD_OVER_FORWARD, decide.POINT_BAND) == "above")
    return Statement(text, holds, lesson=lesson,
                     rests_on=f"fused {min(fused.values()):.2f}–{max(fused.values()):.2f}×, "
                     f"unfused {min(unfused.values()):.2f}–{max(unfused.values()):.2f}×")


def _bwd_ranked(build: Build, field: str, method: str) -> dict[str, decide.Range]:
    """Each backward's `field` samples in the backward run, over its separate processes (the one rule's range)."""
    stages = [r["stage"] for r in build.run("backward")["rows"] if field in r]
    return {k: across(build, "backward", lambda res, k=k: row(res["rows"], stage=k).get(field, []), method)
            for k in stages}


def _failed_once(stage: str):
    """The backward run with `stage` failing in its last process: the ranking would leave it out there."""
    def change(record):
        last = (record.get("repeats") or [record["result"]])[-1]
        r = row(last["rows"], stage=stage)
        r.clear()
        r.update(stage=stage, error="RuntimeError: out of memory")
    return change


@claim("bwd-fastest", reads=["run-backward"],
       flip=[Flip("run-backward.json", scaled_row("backward", "event_times_us", 3.0, stage="cudnn"), ADAPTS),  # one call agrees
             Flip("run-backward.json", scaled_row("backward", "backward_device_us_each", 0.3, stage="cudnn"), ADAPTS),  # first by device
             Flip("run-backward.json", _failed_once("cudnn"))])  # a ranking without cuDNN's backward in one process
def bwd_fastest(build: Build) -> Statement:
    """The fastest backward by device time and its runner-up, each by the one rule over the backward run's
    separate processes (backwards that cannot be told apart share a place); then the same two by one call,
    where the host's CPU sets much of the time: the leader and the runner-up, compared process by process.
    The rest of the one-call column is the table's, not ranked here: its neighbours sit within the host's noise."""
    device = _bwd_ranked(build, "backward_device_us_each", decide.DEVICE)
    event = _bwd_ranked(build, "event_times_us", decide.ONE_CALL)
    first = front(device)
    runner = front({k: r for k, r in device.items() if k not in first})
    lead, rival = first[0], runner[0]
    some = next(r for r in build.repeats("backward")[0]["rows"] if "event_times_us" in r)
    by_call = decide.order(event[lead], event[rival])  # -1: the device leader is faster by one call too
    said = lambda k: f"{short(k)}'s {event[k].text(us)}"
    text = (f"Ranked in a run of its own, {len(build.repeats('backward'))} separate processes each timing every "
            f"backward ({next(iter(device.values())).how}; the table above is the captures', another measurement): "
            f"by device time in that run (profiler, {len(some['backward_device_us_each'])} profiled backwards a "
            f"process), {_place('the fastest backward here', first, device)}, then "
            f"{_named(runner, device)}{', not told apart' if len(runner) > 1 else ''}. Timed from the "
            f"CPU in the same run, one `backward()` call between CUDA events ({len(some['event_times_us'])} a process), "
            + {1: f"the order of these two is not the same: {said(rival)} is decidedly faster than {said(lead)}.",
               0: f"these two are not told apart: {said(lead)} against {said(rival)}, "
                  f"{within(event[lead], event[rival])}.",
               -1: f"{said(lead)} is decidedly faster than {said(rival)} too."}[by_call])
    # no time in the lesson: the ranking is the backward run's, and the table and the sentences beside the lesson
    # give each backward's time from its capture, another measurement (the evidence gives the run's, named so)
    lesson = (f"By device time the fastest backward here is {short(lead)}'s"
              if len(first) == 1 else f"By device time no backward leads: {listed([short(k) for k in first])} are "
                                      f"not told apart")
    # one call's order stays in the evidence: it is that run's, and the table beside gives the captures' own
    missing = [r["stage"] for result in build.repeats("backward") for r in result["rows"] if "error" in r]
    return Statement(text, not missing and len(device) == len(FUSED_BWD + UNFUSED_BWD),  # every backward, every process
                     f"device {first}, then {runner}; one call {lead} against {rival}: {by_call}; "
                     f"failed in a process: {missing or 'none'}", f"device {first}, one call {by_call}", lesson)


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
            f"time there ({us(s['event_median_us'])}, p10 to p90 {us(s['event_p10_us'])} to {us(s['event_p90_us'])}) "
            f"follows the CPU, not the GPU.")
    lesson = (f"{short(stage)}'s backward spends more time on the CPU than in its "
              f"{us(s['backward_device_us'])} of kernels, so one call, {us(s['event_median_us'])}, follows the CPU")
    host = decide.against(s["cpu_backward_us"] / s["backward_device_us"], decide.PARITY, decide.POINT_BAND) == "above"
    paced = decide.against(s["event_median_us"] / s["backward_device_us"], decide.HOST_BOUND_CALL, decide.POINT_BAND) == "above"
    return Statement(text, host and paced, lesson=lesson,
                     rests_on=f"CPU {s['cpu_backward_us']:.1f} µs, device {s['backward_device_us']:.1f} µs, "
                     f"one call's median {s['event_median_us']:.1f} µs")
