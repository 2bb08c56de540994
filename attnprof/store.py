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

from . import text
from .stages import DEFAULT_SHAPE, ROOT, SITE_RECORDS, Stage, get_stage

# ATTNPROF_CAPTURES points the CLI and the site build at another folder (tests use it)
CAPTURES = Path(os.environ.get("ATTNPROF_CAPTURES", ROOT / "docs" / "captures"))
DEFAULT_DTYPE = "bf16"
FORMAT = 1  # bump when the capture procedure changes: every capture becomes stale

# How captures are taken; all of it is part of every capture's key.
LABEL = "attention_forward"  # the record_function name around every profiled forward
WARMUP_CALLS = 10
EVENT_REPS = 50
SCHEDULE = dict(wait=1, warmup=1, active=3, repeat=1)


class CaptureMissing(FileNotFoundError):
    pass


class CaptureError(RuntimeError):
    """A capture that cannot be taken here (no GPU, say); the message says why and what to do."""


def settings(shape, dtype_name) -> dict:
    return {"shape": list(shape), "dtype": dtype_name, "causal": True, "schedule": SCHEDULE,
            "warmup_calls": WARMUP_CALLS, "event_reps": EVENT_REPS, "format": FORMAT}


def capture_key(stage: Stage, stage_settings: dict) -> str:
    blob = stage.source_hash() + json.dumps(stage_settings, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def record_name(stage: str, shape=DEFAULT_SHAPE, dtype_name=DEFAULT_DTYPE) -> str:
    """`flash` at the default shape and dtype, `flash-1x16x8192x128` (and `-fp16`) otherwise."""
    name = stage if tuple(shape) == tuple(DEFAULT_SHAPE) else f"{stage}-{text.shape(shape, 'x')}"
    return name if dtype_name == DEFAULT_DTYPE else f"{name}-{dtype_name}"


def parse_record(record: str):
    """The inverse of record_name: (stage, shape, dtype); raises ValueError naming a bad record."""
    parts = record.split("-")
    stage, shape, dtype_name = parts[0], tuple(DEFAULT_SHAPE), DEFAULT_DTYPE
    get_stage(stage)
    for part in parts[1:]:
        if part.count("x") == 3 and all(p.isdigit() for p in part.split("x")):
            shape = tuple(int(p) for p in part.split("x"))
        else:
            dtype_name = part
    if record_name(stage, shape, dtype_name) != record:
        raise ValueError(f"{record!r} is not a capture name: use STAGE or STAGE-BxHxSxD, e.g. flash-1x16x8192x128")
    return stage, shape, dtype_name


def site_records() -> list[str]:
    return [record_name(stage, shape) for stage, shape in SITE_RECORDS]


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


def write_json(folder, name, data: dict):
    _atomic_write(summary_path(folder, name), (json.dumps(data, indent=1) + "\n").encode())


def write_summary(folder, summary: dict):
    write_json(folder, summary["record"], summary)


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


def recapture_command(record: str) -> str:
    stage, shape, dtype_name = parse_record(record)
    extra = "" if tuple(shape) == tuple(DEFAULT_SHAPE) else f" --shape {text.shape(shape, ',')}"
    extra += "" if dtype_name == DEFAULT_DTYPE else f" --dtype {dtype_name}"
    return f"`python -m attnprof capture {stage}{extra}`"


def _read_json(path: Path, what: str, fix: str) -> dict:
    """A committed JSON file; missing or corrupt raises one line naming the file and the fix."""
    if not path.exists():
        raise CaptureMissing(f"no {what} ({path.name} is missing): {fix}")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        kind = what.split()[0]
        raise ValueError(f"{kind} {path.name} is corrupt ({e.msg} at line {e.lineno}): {fix}") from None


def load_summary(record, folder=CAPTURES) -> dict:
    path = summary_path(folder, record)
    fix = f"run {recapture_command(record)} on a CUDA GPU"
    summary = _read_json(path, f"capture {record!r}", fix)
    if not isinstance(summary, dict) or summary.get("record") != record:
        raise ValueError(f"capture {path.name} is not a summary of {record!r}: {fix}")
    return summary


def status(record, folder=CAPTURES) -> str | None:
    """None when the capture `record` is present and current; otherwise one line saying why not."""
    stage_name, shape, dtype_name = parse_record(record)
    stage = get_stage(stage_name)
    try:
        summary = load_summary(record, folder)
    except (CaptureMissing, ValueError) as e:
        return str(e)
    fix = f"run {recapture_command(record)} on a CUDA GPU"
    if summary.get("key") != capture_key(stage, settings(shape, dtype_name)):
        return (f"capture {record!r} is stale (snippets/{stage.snippet}.py or the capture settings "
                f"changed since it was made): {fix}")
    if "unavailable" not in summary and not trace_path(folder, record).exists():
        return f"trace of {record!r} is missing ({trace_path(folder, record).name}): {fix}"
    return None


def stale_records(folder=CAPTURES) -> dict[str, str]:
    return {record: why for record in site_records() if (why := status(record, folder))}


def load_run(name, folder=CAPTURES) -> dict:
    """A committed measurement run (`run-<name>.json`); a missing or corrupt one raises one line naming the fix."""
    fix = f"run `python -m attnprof sweep --only {name}` on a CUDA GPU"
    return _read_json(summary_path(folder, f"run-{name}"), f"record of run {name!r}", fix)
