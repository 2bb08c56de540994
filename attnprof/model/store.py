"""Records on disk: where they live and how they are read and written (atomically, in pairs).

File I/O only; what a record is called, what keys it and when it is stale is `records.py`.
"""
from __future__ import annotations

import gzip
import json
import os
import tempfile
from pathlib import Path

from .snippets import ROOT

# ATTNPROF_CAPTURES points the CLI and the site build at another folder (tests use it)
CAPTURES = Path(os.environ.get("ATTNPROF_CAPTURES", ROOT / "docs" / "captures"))


class CaptureMissing(FileNotFoundError):
    pass


def summary_path(folder, name) -> Path:
    return Path(folder) / f"{name}.json"


def trace_path(folder, name) -> Path:
    return Path(folder) / f"{name}.trace.json.gz"


def _staged(path: Path, data: bytes) -> str:
    """`data` in a temporary file beside `path`, ready to be renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    except BaseException:
        os.unlink(tmp)
        raise
    return tmp


def _atomic_write(path: Path, data: bytes):
    tmp = _staged(path, data)
    try:
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _json_bytes(data: dict) -> bytes:
    return (json.dumps(data, indent=1) + "\n").encode()


def write_json(folder, name, data: dict):
    _atomic_write(summary_path(folder, name), _json_bytes(data))


def write_text(folder, file_name, text: str):
    _atomic_write(Path(folder) / file_name, text.encode())


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
            if ev.get("ph") == "M" and ev.get("name") == "process_name":  # a rank's lane keeps its rank's name
                args["name"] = args["name"] if "rank" in args and str(args["name"]).startswith("rank ") else "process"
    return events


def _trace_bytes(events: dict) -> bytes:
    return gzip.compress(json.dumps(scrub(events), separators=(",", ":")).encode(), mtime=0)


def write_trace(folder, name, events: dict):
    _atomic_write(trace_path(folder, name), _trace_bytes(events))


def write_capture(folder, summary: dict, events: dict):
    """A capture's summary and trace, both or neither. Both are written to temporary files first;
    the trace is renamed into place, then the summary; should that fail, the old trace goes back."""
    name = summary["record"]
    trace_file, summary_file = trace_path(folder, name), summary_path(folder, name)
    old_trace = trace_file.read_bytes() if trace_file.exists() else None
    tmp_trace = _staged(trace_file, _trace_bytes(events))
    try:
        tmp_summary = _staged(summary_file, _json_bytes(summary))
    except BaseException:
        os.unlink(tmp_trace)
        raise
    try:
        os.replace(tmp_trace, trace_file)
        os.replace(tmp_summary, summary_file)
    except BaseException:
        for tmp in (tmp_trace, tmp_summary):
            Path(tmp).unlink(missing_ok=True)
        if old_trace is None:
            trace_file.unlink(missing_ok=True)
        else:
            _atomic_write(trace_file, old_trace)
        raise


def write_unavailable(folder, summary: dict):
    """Record that a stage cannot run here (the summary says why) and drop any older trace of it."""
    write_json(folder, summary["record"], summary)
    trace_path(folder, summary["record"]).unlink(missing_ok=True)


def read_json(path: Path, what: str, fix: str) -> dict:
    """A committed JSON file; missing or corrupt raises one line naming the file and the fix."""
    if not path.exists():
        raise CaptureMissing(f"no {what} ({path.name} is missing): {fix}")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        kind = what.split()[0]
        raise ValueError(f"{kind} {path.name} is corrupt ({e.msg} at line {e.lineno}): {fix}") from None
