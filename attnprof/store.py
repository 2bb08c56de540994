"""The committed captures: where they live, how they are written, and when they are stale.

A capture is keyed by the hash of its snippet's source and of the capture settings, so editing a
snippet or changing how captures are taken marks it stale for `python -m attnprof check`.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import tempfile
from pathlib import Path

from .stages import DEFAULT_SHAPE, ROOT, STAGES, Stage, get_stage

# ATTNPROF_CAPTURES points the CLI and the site build at another folder (tests use it)
CAPTURES = Path(os.environ.get("ATTNPROF_CAPTURES", ROOT / "docs" / "captures"))
DEFAULT_DTYPE = "bf16"
FORMAT = 1  # bump when the capture procedure changes: every capture becomes stale


class CaptureMissing(FileNotFoundError):
    pass


def settings(shape, dtype_name) -> dict:
    from .capture import EVENT_REPS, SCHEDULE, WARMUP_CALLS
    return {"shape": list(shape), "dtype": dtype_name, "causal": True, "schedule": SCHEDULE,
            "warmup_calls": WARMUP_CALLS, "event_reps": EVENT_REPS, "format": FORMAT}


def capture_key(stage: Stage, stage_settings: dict) -> str:
    blob = stage.source_hash() + json.dumps(stage_settings, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def summary_path(folder, name) -> Path:
    return Path(folder) / f"{name}.json"


def trace_path(folder, name) -> Path:
    return Path(folder) / f"{name}.trace.json.gz"


def _atomic_write(path: Path, data: bytes):
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def write_summary(folder, summary: dict):
    _atomic_write(summary_path(folder, summary["stage"]), (json.dumps(summary, indent=1) + "\n").encode())


def scrub(events: dict) -> dict:
    """Drop what names the machine or its paths; the published trace keeps only profiling data."""
    events = {k: v for k, v in events.items()
              if k not in ("distributedInfo", "hostname") and not (isinstance(v, str) and v.startswith("/"))}
    for ev in events.get("traceEvents", []):
        args = ev.get("args")
        if isinstance(args, dict):
            for key in [k for k, v in args.items() if isinstance(v, str) and v.startswith("/")]:
                del args[key]
            if ev.get("ph") == "M" and ev.get("name") == "process_name":
                args["name"] = "process"
    return events


def write_trace(folder, name, events: dict):
    data = gzip.compress(json.dumps(scrub(events), separators=(",", ":")).encode(), mtime=0)
    _atomic_write(trace_path(folder, name), data)


def load_summary(name, folder=CAPTURES) -> dict:
    path = summary_path(folder, name)
    if not path.exists():
        raise CaptureMissing(f"no capture of stage {name!r} ({path.name} is missing): "
                             f"run `python -m attnprof capture {name}` on a CUDA GPU")
    try:
        summary = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"capture {path.name} is corrupt ({e.msg} at line {e.lineno}): "
                         f"run `python -m attnprof capture {name}` on a CUDA GPU") from None
    if not isinstance(summary, dict) or summary.get("stage") != name:
        raise ValueError(f"capture {path.name} is not a summary of stage {name!r}: "
                         f"run `python -m attnprof capture {name}` on a CUDA GPU")
    return summary


def status(name, folder=CAPTURES) -> str | None:
    """None when the capture of `name` is present and current; otherwise one line saying why not."""
    stage = get_stage(name)
    try:
        summary = load_summary(name, folder)
    except (CaptureMissing, ValueError) as e:
        return str(e)
    expected = capture_key(stage, settings(DEFAULT_SHAPE, DEFAULT_DTYPE))
    if summary.get("key") != expected:
        return (f"capture of stage {name!r} is stale (snippets/{stage.snippet}.py or the capture settings "
                f"changed since it was made): run `python -m attnprof capture {name}` on a CUDA GPU")
    if "unavailable" not in summary and not trace_path(folder, name).exists():
        return (f"trace of stage {name!r} is missing ({trace_path(folder, name).name}): "
                f"run `python -m attnprof capture {name}` on a CUDA GPU")
    return None


def stale_stages(folder=CAPTURES) -> dict[str, str]:
    return {name: why for name in STAGES if (why := status(name, folder))}
