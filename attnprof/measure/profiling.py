"""The one profiled loop every capture runs: warm up, profile five steps, keep the trace and key_averages.

A forward capture (capture.py), a backward capture (backward.py), a reader's capture (own.py) and the
timing run's profiled samples (timing.py) all profile through here, so what the profiler saw is taken
the same way everywhere.
"""
from __future__ import annotations

import json
import re
import sys
import tempfile
import warnings
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from . import dispatch
from ..model import store
from ..model.procedure import LABEL, SCHEDULE, WARMUP_CALLS
from .bench import sync


# --8<-- [start:profile]
def profile_steps(step, trace_path):
    """Warm up, then profile five steps (wait 1, warm-up 1, active 3). Each step() runs the annotated
    work once (a forward; or a forward and a backward) and waits for the GPU, so that each step's
    GPU work stays apart from the next one's in the trace."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    for _ in range(WARMUP_CALLS):
        step()
    with profile(activities=activities, schedule=schedule(**SCHEDULE), record_shapes=True) as prof:
        for _ in range(sum(SCHEDULE[k] for k in ("wait", "warmup", "active"))):
            step()
            prof.step()
    prof.export_chrome_trace(str(trace_path))
    return prof.key_averages()


def forward_step(forward):
    """One step: one annotated forward, then wait for the GPU."""
    def step():
        with torch.no_grad(), record_function(LABEL):
            forward()
        sync()
    return step


def profile_forward(forward, trace_path):
    return profile_steps(forward_step(forward), trace_path)
# --8<-- [end:profile]


# What the profiler itself says on every start and stop (Kineto's USDT/STAGE lines on the stderr file,
# torch.profiler's note on cycles); nothing a reader of the terminal or of a build log needs.
PROFILER_CHATTER = re.compile(r"^(USDT|STAGE):|profiler_(start|stop)\b|Profiler clears events|Completed Stage")


def quietly(profiling, *args):
    """profiling(*args) with the profiler's chatter kept off the terminal; anything else it says
    (a warning from the code being profiled) is passed on to stderr."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Profiler clears events")
        with dispatch.captured_stderr() as printed:
            result = profiling(*args)
    for line in printed:
        if not PROFILER_CHATTER.search(line):
            print(line, file=sys.stderr)
    return result


def profile_quietly(forward, trace_path):
    return quietly(profile_forward, forward, trace_path)


def profiled(step) -> tuple[dict, object]:
    """Profile `step` (see profile_steps) quietly; returns the trace as committed (scrubbed) and the
    profiler's key_averages."""
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "trace.json"
        averages = quietly(profile_steps, step, raw)
        return store.scrub(json.loads(raw.read_text())), averages


def key_average_rows(averages, limit=25):
    def us(ev, name):
        return float(getattr(ev, name, 0.0) or 0.0)
    rows = [{"name": ev.key, "calls": ev.count,
             "self_cpu_us": us(ev, "self_cpu_time_total"), "cpu_total_us": us(ev, "cpu_time_total"),
             "self_device_us": us(ev, "self_device_time_total"), "device_total_us": us(ev, "device_time_total")}
            for ev in averages]
    rows.sort(key=lambda r: (r["self_device_us"], r["cpu_total_us"]), reverse=True)
    return rows[:limit]
