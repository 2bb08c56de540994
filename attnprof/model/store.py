"""Records on disk: where they live and how they are read and written (atomically, in pairs).

Records live in one set per GPU, `docs/captures/<set>/`, by the GPU table's short name (h200, h100...).
ATTNPROF_GPU picks the set everything reads; without it, this machine's GPU's where nvidia-smi names one, else
the published h200. ATTNPROF_CAPTURES points at another folder altogether (tests). File I/O only.
"""
from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from . import gpus
from .snippets import ROOT

SETS = ROOT / "docs" / "captures"
PUBLISHED = "h200"  # the set the published site is built from


def set_name(device: str) -> str:
    """The set a GPU's records go into: its short name in the GPU table, or, for a GPU the table lacks, its name
    in lower case, words joined by hyphens ("NVIDIA RTX PRO 6000 Blackwell": rtx-pro-6000-blackwell)."""
    row = gpus.row(device)
    return row.short if row else re.sub(r"[^a-z0-9]+", "-", device.lower().removeprefix("nvidia ")).strip("-")


def this_gpu() -> str | None:
    """The name of this machine's first GPU, as nvidia-smi reports it; None without one."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None
    try:
        out = subprocess.run([smi, "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=30).stdout.strip().splitlines()
    except (OSError, subprocess.SubprocessError):
        return None
    return out[0].strip() if out else None


GPU = os.environ.get("ATTNPROF_GPU") or (set_name(name) if (name := this_gpu()) else PUBLISHED)
CAPTURES = Path(os.environ.get("ATTNPROF_CAPTURES", SETS / GPU))


def sets() -> list[Path]:
    """Every committed set of records, the published one first."""
    found = sorted((p for p in SETS.iterdir() if p.is_dir()), key=lambda p: (p.name != PUBLISHED, p.name))
    return found


def link(folder) -> str:
    """Where a set's files lie in the built site: captures/<set>/ (a folder outside the sets: this set's place)."""
    folder = Path(folder)
    return f"captures/{folder.name if folder.parent == SETS else GPU}"


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
