"""Capture: run one stage on a CUDA GPU under torch.profiler and write its record.

Per stage this writes two files into the captures folder, each atomically (temp file + rename):
`<stage>.json` (summary) and `<stage>.trace.json.gz` (the Chrome trace). A stage that fails is
recorded with its reason and never touches another stage's files.
"""
from __future__ import annotations

import datetime
import json
import statistics
import subprocess
import tempfile
import time
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



def require_cuda():
    if not torch.cuda.is_available():
        raise CaptureError("no CUDA GPU on this machine: capture needs one "
                           "(the site builds from the committed captures without it)")


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


def capture_stage(name, shape, dtype_name, out_dir) -> dict:
    """Capture one stage; returns its summary (also written). Raises nothing for a backend that cannot run."""
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
        return _unavailable(out_dir, summary, str(e))
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
            return _unavailable(out_dir, summary, " | ".join(dict.fromkeys(reasons + [first_line(error)])))
        summary["first_call_ms"] = first_ms  # includes any compilation
        summary["rel_err"] = relative_error(out, reference(q, k, v))
        del out
        with tempfile.TemporaryDirectory() as tmp:
            raw = Path(tmp) / "trace.json"
            averages = profile_forward(forward, raw)
            events = json.loads(raw.read_text())
        times = bench.time_forward(forward, reps=EVENT_REPS, warmup=0)
        summary["peak_extra_bytes"] = bench.peak_extra_bytes(forward)

    fwds = trace.forwards(events, LABEL)
    counts = [len(f.ops) for f in fwds]
    chosen = trace.median_forward(fwds)
    summary.update({
        "ops_per_forward": len(chosen.ops),
        "ops_per_forward_each": counts,  # one entry per profiled forward: they should agree
        "forward_device_us": chosen.device_us,
        "cpu_forward_us": statistics.median(f.cpu_us for f in fwds),
        "event_median_us": statistics.median(times),
        "event_p10_us": sorted(times)[len(times) // 10],
        "event_p90_us": sorted(times)[len(times) * 9 // 10],
        "ops": [op.__dict__ for op in chosen.ops],
        "cpu_ops": [op.__dict__ for op in chosen.cpu_ops],
        "key_averages": key_average_rows(averages),
    })
    store.write_trace(out_dir, record, events)  # both files last, so a failure above leaves the old pair intact
    store.write_summary(out_dir, summary)
    return summary


def _unavailable(out_dir, summary, reason) -> dict:
    """Record that this stage cannot run here, with the reason; drop any older trace of it."""
    summary["unavailable"] = reason
    store.write_summary(out_dir, summary)
    store.trace_path(out_dir, summary["record"]).unlink(missing_ok=True)
    return summary


def capture(names, shape, dtype_name, out_dir) -> list[dict]:
    for name in names:
        get_stage(name)  # a bad name is reported before anything else
    require_cuda()
    results = []
    for name in names:
        try:
            results.append(capture_stage(name, shape, dtype_name, out_dir))
        except Exception as e:  # one broken stage must not cost the others their captures
            if isinstance(e, torch.OutOfMemoryError):
                torch.cuda.empty_cache()
                why = f"out of GPU memory at shape {text.shape(shape, ',')}: try a smaller --shape"
            else:
                why = f"{type(e).__name__}: {first_line(e)}"
            print(f"capture of {name} failed, its old capture is untouched: {why}", flush=True)
            results.append({"stage": name, "record": store.record_name(name, shape, dtype_name), "error": why})
    return results
