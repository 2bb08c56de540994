"""Capture: run one stage on a CUDA GPU under torch.profiler and write its record.

The one capture path: the profiling loop, the environment stamp, the keep-the-good-capture rule and
the loop over stages here are what forward captures and backward captures (backward.py) share.
Per record this writes two files into the captures folder, as a pair (both or neither, each through a
temp file + rename): `<record>.json` (summary) and `<record>.trace.json.gz` (the Chrome trace). A stage
that cannot run here keeps its existing capture (it is recorded as unavailable, with the reason, only
where it has none, or when asked); a stage that fails never touches any stage's files.
"""
from __future__ import annotations

import datetime
import json
import re
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from . import bench, dispatch, timing
from .. import records, store, trace
from ..procedure import EVENT_REPS, LABEL, SCHEDULE, WARMUP_CALLS, CaptureError
from ..stages import ProviderUnavailable, get_stage
from ..stats import event_stats
from ..text import first_line
from .bench import sync
from .numerics import make_inputs, reference, relative_error, torch_dtype


def require_cuda(command="capture"):
    if not torch.cuda.is_available():
        raise CaptureError(f"no CUDA GPU on this machine: `python -m attnprof {command}` needs one; the "
                           "committed captures stay as they are, and the site builds from them")


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


def environment(stage=None) -> dict:
    props = torch.cuda.get_device_properties(0)
    try:
        driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=20).stdout.strip().splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        driver = "unknown"
    try:
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    return {"device": torch.cuda.get_device_name(0), "capability": f"sm_{props.major}{props.minor}",
            "sm_count": props.multi_processor_count, "driver": driver, "torch": torch.__version__,
            "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(), "triton": triton_version,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            **({"source_hash": stage.source_hash()} if stage else {})}


def head(stage, record, shape, dtype_name, settings, label) -> dict:
    """What every profiled record starts with: what ran, how it was keyed, and the environment."""
    return {"record": record, "stage": stage.name, "title": stage.title, "shape": list(shape), "dtype": dtype_name,
            "provider": stage.provider, "layout": stage.layout, "label": label, "settings": settings,
            "key": records.kind_of(record).key(record), "code": records.kind_of(record).code(record),
            **(environment(stage) if torch.cuda.is_available() else {"source_hash": stage.source_hash()})}


def capture_stage(name, shape, dtype_name, out_dir, record_unavailable=False) -> dict:
    """Capture one stage; returns its summary (also written). Raises nothing for a backend that cannot
    run: that returns what `cannot_run` did."""
    stage = get_stage(name)
    out_dir = Path(out_dir)
    summary = head(stage, records.record_name(name, shape, dtype_name), shape, dtype_name,
                   records.settings(shape, dtype_name), LABEL)
    q, k, v = make_inputs(shape, torch_dtype(dtype_name), "cuda")
    try:
        forward = stage.prepare(q, k, v)
    except ProviderUnavailable as e:
        return cannot_run(out_dir, summary, str(e), record_unavailable)
    if stage.snippet == "sdpa":  # what the dispatcher picks when free, and why others would not run
        summary["sdpa_choice"] = dispatch.sdpa_choice(q, k, v)
        summary["eligibility"] = dispatch.eligibility(q, k, v)
    with stage.context(), torch.no_grad():
        def first_call():  # a backend that cannot run these inputs raises here, after saying why
            try:
                start = time.perf_counter()
                result = forward()
                sync()
                return result, (time.perf_counter() - start) * 1000, None
            except RuntimeError as e:
                return None, None, e
        (out, first_ms, error), reasons = dispatch.with_reasons(first_call)
        if error is not None:
            reason = " | ".join(dict.fromkeys(reasons + [first_line(error)]))
            return cannot_run(out_dir, summary, reason, record_unavailable)
        summary["first_call_ms"] = first_ms  # includes any compilation
        summary["rel_err"] = relative_error(out, reference(q, k, v))
        del out
        events, averages = profiled(forward_step(forward))
        times = bench.time_forward(forward, reps=EVENT_REPS, warmup=0)
        summary["timing"] = timing.stream(forward)  # what a stream of these calls waits for (attnprof/timing.py)
        summary["peak_extra_bytes"] = bench.peak_extra_bytes(forward)

    summary.update(trace.summarize(events, LABEL))  # from exactly the trace that is committed
    summary.update({**event_stats(times), "event_times_us": times, "key_averages": key_average_rows(averages)})
    store.write_capture(out_dir, summary, events)  # last, so a failure above leaves the old pair intact
    return summary


def plain_reason(provider: str, reason: str) -> str:
    """A missing package said plainly ("SageAttention 1.0.6 is not installed here"); other reasons as recorded."""
    return f"{provider} is not installed here" if "ModuleNotFoundError" in reason else reason


def cannot_run(out_dir, summary, reason, record_unavailable=False) -> dict:
    """A stage that cannot run here. An existing capture of it is kept as it is, and the result says
    so; "unavailable" with the reason is recorded only where none exists (or only an older record of
    its being unavailable), or when asked."""
    existing = records.existing_capture(summary["record"], out_dir)
    if existing is not None and "unavailable" not in existing and not record_unavailable:
        return {"stage": summary["stage"], "record": summary["record"], "reason": reason,
                "kept": f"kept the capture of {str(existing.get('date', 'unknown date')).split()[0]}: "
                        f"{plain_reason(summary['provider'], reason)}"}
    summary["unavailable"] = reason
    store.write_unavailable(out_dir, summary)
    return summary


def each(names, take, record_of, what="capture") -> list[dict]:
    """take(name) for every stage name, after checking them all; one that fails is reported in one
    line and costs no other stage its record, nor itself its old one."""
    for name in names:
        get_stage(name)  # a bad name is reported before anything else
    require_cuda()
    results = []
    for name in names:
        try:
            results.append(take(name))
        except Exception as e:  # one broken stage must not cost the others their captures
            if isinstance(e, torch.OutOfMemoryError):
                torch.cuda.empty_cache()
                why = f"out of GPU memory ({record_of(name)}): try a smaller --shape"
            else:
                why = f"{type(e).__name__}: {first_line(e)}"
            print(f"{what} of {name} failed, its old capture is untouched: {why}", flush=True)
            results.append({"stage": name, "record": record_of(name), "error": why})
    return results


def capture(names, shape, dtype_name, out_dir, record_unavailable=False) -> list[dict]:
    return each(names, lambda name: capture_stage(name, shape, dtype_name, out_dir, record_unavailable=record_unavailable),
                lambda name: records.record_name(name, shape, dtype_name))
