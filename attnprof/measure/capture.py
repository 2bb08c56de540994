"""Capture: run one stage on a CUDA GPU under torch.profiler and write its record.

The stamp, `measure_forward`, the keep-the-good-capture rule and the loop over stages here are what forward,
backward and readers' captures share; the profiled loop is profiling.py. A capture holds its GPU alone
(gpulock.py) and writes `<record>.json` and `<record>.trace.json.gz` as a pair (both or neither). A stage
that cannot run keeps its existing capture (recorded unavailable only where it has none, or when asked); one
that fails touches no stage's files.
"""
from __future__ import annotations

import datetime
import subprocess
import time
from pathlib import Path

import torch

from . import bench, dispatch, gpulock, timing
from ..model import names, store
from ..analysis import records
from ..model.procedure import EVENT_REPS, LABEL, CaptureError
from ..model.stages import ProviderUnavailable, get_stage
from ..text import first_line
from .bench import sync
from .numerics import make_inputs, reference, relative_error, torch_dtype
from .profiling import forward_step, key_average_rows, profiled


def require_cuda(command="capture"):
    if not torch.cuda.is_available():
        raise CaptureError(f"no CUDA GPU on this machine: `python -m attnprof {command}` needs one; the "
                           "committed captures stay as they are, and the site builds from them")


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
    """Capture one stage; its summary (also written), or `cannot_run`'s for a backend that cannot run."""
    stage = get_stage(name)
    out_dir = Path(out_dir)
    summary = head(stage, names.record_name(name, shape, dtype_name), shape, dtype_name,
                   names.settings(shape, dtype_name), LABEL)
    q, k, v = make_inputs(shape, torch_dtype(dtype_name), "cuda")
    try:
        forward = stage.prepare(q, k, v)
    except ProviderUnavailable as e:
        return cannot_run(out_dir, summary, str(e), record_unavailable)
    if stage.snippet == "sdpa":  # what the dispatcher picks when free, and why others would not run
        summary["sdpa_choice"] = dispatch.sdpa_choice(q, k, v)
        summary["eligibility"] = dispatch.eligibility(q, k, v)
    # from the first call (its compile is timed) to the last sample, this GPU alone (gpulock); the inputs,
    # the kernel's loading and writing the trace are no measurement
    with gpulock.measuring(summary["record"]), stage.context(), torch.no_grad():
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
        events, measured = measure_forward(forward)
    summary.update(measured)
    store.write_capture(out_dir, summary, events)  # last, so a failure above leaves the old pair intact
    return summary


def measure_forward(forward) -> tuple[dict, dict]:
    """(trace, measured) of a checked forward: the profiled trace, CUDA-event samples, the stream's samples,
    the allocator's peak and the profiler's key_averages."""
    events, averages = profiled(forward_step(forward))
    times = bench.time_forward(forward, reps=EVENT_REPS, warmup=0)
    return events, {"timing": timing.stream(forward), "peak_extra_bytes": bench.peak_extra_bytes(forward),
                    "event_times_us": times, "key_averages": key_average_rows(averages)}


def plain_reason(provider: str, reason: str) -> str:
    """A missing package said plainly ("SageAttention 1.0.6 is not installed here"); other reasons as recorded."""
    return f"{provider} is not installed here" if "ModuleNotFoundError" in reason else reason


def cannot_run(out_dir, summary, reason, record_unavailable=False) -> dict:
    """A stage that cannot run here: an existing capture is kept (the result says so); "unavailable" with the
    reason is recorded only where none, or only an unavailable one, exists, or when asked."""
    existing = records.existing_capture(summary["record"], out_dir)
    if existing is not None and "unavailable" not in existing and not record_unavailable:
        return {"stage": summary["stage"], "record": summary["record"], "reason": reason,
                "kept": f"kept the capture of {str(existing.get('date', 'unknown date')).split()[0]}: "
                        f"{plain_reason(summary['provider'], reason)}"}
    summary["unavailable"] = reason
    store.write_unavailable(out_dir, summary)
    return summary


def each(stage_names, take, record_of, what="capture") -> list[dict]:
    """take(name) for every stage, names checked first; one that fails is one line and costs no record."""
    for name in stage_names:
        get_stage(name)  # a bad name is reported before anything else
    require_cuda()
    results = []
    for name in stage_names:
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


def capture(stage_names, shape, dtype_name, out_dir, record_unavailable=False) -> list[dict]:
    return each(stage_names, lambda name: capture_stage(name, shape, dtype_name, out_dir, record_unavailable=record_unavailable),
                lambda name: names.record_name(name, shape, dtype_name))
