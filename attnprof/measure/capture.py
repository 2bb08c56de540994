"""Capture: run one stage on a CUDA GPU under torch.profiler and write its record.

Per stage this writes two files into the captures folder, as a pair (both or neither, each through a
temp file + rename): `<stage>.json` (summary) and `<stage>.trace.json.gz` (the Chrome trace). A stage
that cannot run here keeps its existing capture (it is recorded as unavailable, with the reason, only
where it has none, or when asked); a stage that fails never touches any stage's files.
"""
from __future__ import annotations

import datetime
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from . import bench, dispatch
from .. import store, trace
from ..store import EVENT_REPS, LABEL, SCHEDULE, WARMUP_CALLS, CaptureError
from ..stages import ProviderUnavailable, get_stage
from .. import text
from ..text import first_line
from .numerics import make_inputs, reference, relative_error, torch_dtype



def require_cuda(command="capture"):
    if not torch.cuda.is_available():
        raise CaptureError(f"no CUDA GPU on this machine: `python -m attnprof {command}` needs one; the "
                           "committed captures stay as they are, and the site builds from them")


# --8<-- [start:profile]
def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def profile_forward(forward, trace_path):
    """Warm up, then profile five steps (wait 1, warm-up 1, active 3) of one annotated forward."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    for _ in range(WARMUP_CALLS):
        forward()
    sync()
    with profile(activities=activities, schedule=schedule(**SCHEDULE), record_shapes=True) as prof:
        for _ in range(sum(SCHEDULE[k] for k in ("wait", "warmup", "active"))):
            with torch.no_grad(), record_function(LABEL):
                forward()
            sync()  # keep each forward's GPU work apart in the trace
            prof.step()
    prof.export_chrome_trace(str(trace_path))
    return prof.key_averages()
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


def capture_stage(name, shape, dtype_name, out_dir, record_unavailable=False) -> dict:
    """Capture one stage; returns its summary (also written). Raises nothing for a backend that cannot
    run: that returns what `cannot_run` did."""
    stage = get_stage(name)
    out_dir = Path(out_dir)
    settings = store.settings(shape, dtype_name)
    record = store.record_name(name, shape, dtype_name)
    summary = {"record": record, "stage": name, "title": stage.title, "shape": list(shape), "dtype": dtype_name,
               "provider": stage.provider, "layout": stage.layout,
               "label": LABEL, "settings": settings, "key": store.capture_key(stage, settings),
               **environment(stage)}
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
                torch.cuda.synchronize()
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
        with tempfile.TemporaryDirectory() as tmp:
            raw = Path(tmp) / "trace.json"
            averages = profile_quietly(forward, raw)
            events = json.loads(raw.read_text())
        times = bench.time_forward(forward, reps=EVENT_REPS, warmup=0)
        summary["peak_extra_bytes"] = bench.peak_extra_bytes(forward)

    events = store.scrub(events)  # the summary is computed from exactly what is committed
    summary.update(trace.summarize(events, LABEL))
    summary.update({
        "event_median_us": statistics.median(times),
        "event_p10_us": sorted(times)[len(times) // 10],
        "event_p90_us": sorted(times)[len(times) * 9 // 10],
        "key_averages": key_average_rows(averages),
    })
    store.write_capture(out_dir, summary, events)  # last, so a failure above leaves the old pair intact
    return summary


def plain_reason(provider: str, reason: str) -> str:
    """A missing package said plainly ("SageAttention 1.0.6 is not installed here"); other reasons as recorded."""
    return f"{provider} is not installed here" if "ModuleNotFoundError" in reason else reason


def cannot_run(out_dir, summary, reason, record_unavailable=False) -> dict:
    """A stage that cannot run here. An existing capture of it is kept as it is, and the result says
    so; "unavailable" with the reason is recorded only where none exists, or when asked."""
    existing = store.existing_capture(summary["record"], out_dir)
    if existing is not None and not record_unavailable:
        return {"stage": summary["stage"], "record": summary["record"], "reason": reason,
                "kept": f"kept the capture of {str(existing.get('date', 'unknown date')).split()[0]}: "
                        f"{plain_reason(summary['provider'], reason)}"}
    summary["unavailable"] = reason
    store.write_unavailable(out_dir, summary)
    return summary


def capture(names, shape, dtype_name, out_dir, record_unavailable=False) -> list[dict]:
    for name in names:
        get_stage(name)  # a bad name is reported before anything else
    require_cuda()
    results = []
    for name in names:
        try:
            results.append(capture_stage(name, shape, dtype_name, out_dir, record_unavailable=record_unavailable))
        except Exception as e:  # one broken stage must not cost the others their captures
            if isinstance(e, torch.OutOfMemoryError):
                torch.cuda.empty_cache()
                why = f"out of GPU memory at shape {text.shape(shape, ',')}: try a smaller --shape"
            else:
                why = f"{type(e).__name__}: {first_line(e)}"
            print(f"capture of {name} failed, its old capture is untouched: {why}", flush=True)
            results.append({"stage": name, "record": store.record_name(name, shape, dtype_name), "error": why})
    return results
