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

from . import text, trace
from .stages import COUNTER_RECORDS, DEFAULT_SHAPE, ROOT, SITE_RECORDS, SNIPPETS, Stage, get_stage

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


def capture_key(stage: Stage, stage_settings: dict, source_hash: str | None = None) -> str:
    blob = (source_hash or stage.source_hash()) + json.dumps(stage_settings, sort_keys=True)
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


def existing_capture(record, folder=CAPTURES) -> dict | None:
    """The capture of `record` already in `folder`, if one is there and readable."""
    try:
        return load_summary(record, folder)
    except (CaptureMissing, ValueError):
        return None


def recapture_command(record: str) -> str:
    stage, shape, dtype_name = parse_record(record)
    extra = "" if tuple(shape) == tuple(DEFAULT_SHAPE) else f" --shape {text.shape(shape, ',')}"
    extra += "" if dtype_name == DEFAULT_DTYPE else f" --dtype {dtype_name}"
    return f"`python -m attnprof capture {stage}{extra}`"


def recapture_fix(record: str) -> str:
    """What to run to retake the capture `record`, and on what machine."""
    from . import own, records  # the backward, two-GPU and readers' captures (they build on this module)
    if own.is_own(record):
        return own.recapture_fix(record)
    if record in records.all_records():
        return records.recapture_fix(record)
    return f"run {recapture_command(record)} on a CUDA GPU"


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
    fix = recapture_fix(record)
    summary = _read_json(path, f"capture {record!r}", fix)
    if not isinstance(summary, dict) or summary.get("record") != record:
        raise ValueError(f"capture {path.name} is not a summary of {record!r}: {fix}")
    return summary


def status(record, folder=CAPTURES) -> str | None:
    """None when the stage capture `record` is present and current; otherwise one line saying why not."""
    stage_name, shape, dtype_name = parse_record(record)
    stage = get_stage(stage_name)
    why = check(record, capture_key(stage, settings(shape, dtype_name)), f"snippets/{stage.snippet}.py", folder)
    if why:
        return why
    summary = load_summary(record, folder)
    return None if "unavailable" in summary else disagreement(record, summary, folder)


def check(record, key: str, source: str, folder=CAPTURES) -> str | None:
    """None when the capture `record` is present, was made under `key` and has its trace; otherwise one
    line saying why not. `source` names the code whose change makes the capture stale."""
    try:
        summary = load_summary(record, folder)
    except (CaptureMissing, ValueError) as e:
        return str(e)
    fix = recapture_fix(record)
    if summary.get("key") != key:
        return f"capture {record!r} is stale ({source} or the capture settings changed since it was made): {fix}"
    if "unavailable" not in summary and not trace_path(folder, record).exists():
        return f"trace of {record!r} is missing ({trace_path(folder, record).name}): {fix}"
    return None


def disagreement(record, summary, folder=CAPTURES) -> str | None:
    """None when the summary is what its committed trace says (ops, their order, kinds and durations,
    device and CPU time, per forward); otherwise one line naming both files, what differs and the fix.
    Numbers in a summary are never edited by hand: the fix is to capture again."""
    fix = recapture_fix(record)
    path = trace_path(folder, record)
    try:
        found = trace.disagreements(summary, trace.load(path))
    except trace.TraceError as e:
        return f"{str(e).replace(str(path), path.name).split(': recapture')[0]} ({record!r}): {fix}"
    if not found:
        return None
    more = f"; and {len(found) - 3} more" if len(found) > 3 else ""
    return (f"capture {summary_path(folder, record).name} disagrees with its trace {path.name}: "
            f"{'; '.join(found[:3])}{more}: {fix}")


def _old_hashes(files) -> list[str]:
    """The older hashes of these snippet files that `rekey` migrates from (see there)."""
    import tokenize
    tokens = []
    for path in files:
        with open(path, "rb") as f:
            tokens += [(t.type, "" if t.type in (tokenize.INDENT, tokenize.NEWLINE) else t.string)
                       for t in tokenize.tokenize(f.readline)
                       if t.type not in (tokenize.COMMENT, tokenize.NL, tokenize.ENCODING)]
    return [hashlib.sha256(b"".join(Path(p).read_bytes() for p in files)).hexdigest()[:16],
            hashlib.sha256(json.dumps(tokens).encode()).hexdigest()[:16]]


def rekey(folder=CAPTURES) -> list[str]:
    """One-off migration of keys made under an older hash of the same snippet: the snippet's bytes
    (before 2026-11-30, so a comment edit made a capture stale), or a first token hash that named
    tokens by this interpreter's numbers (so it differed between Python versions). A capture is
    re-keyed only where its key equals an old key of the snippet as it is now, which proves that the
    code is the code that was profiled. Only `key` and `source_hash` change; no measured number does.
    Counters records, keyed like their capture, are re-keyed the same way. Returns the re-keyed records."""
    from .records import backward_settings
    changed = []
    for path in sorted(Path(folder).glob("*.json")):
        try:
            summary = json.loads(path.read_text())
            record = summary.get("capture", summary["record"])
            backward = record.endswith("-bwd")  # a backward capture, keyed by its own settings
            stage_name, shape, dtype_name = parse_record(record.removesuffix("-bwd"))
        except (ValueError, KeyError, TypeError, AttributeError):
            continue  # a run record, or not a capture (a counters record carries its capture's key)
        stage = get_stage(stage_name)
        stage_settings = (backward_settings if backward else settings)(shape, dtype_name)
        files = [SNIPPETS / f"{name}.py" for name in stage.snippets]
        old = {capture_key(stage, stage_settings, h) for h in _old_hashes(files)}
        new = capture_key(stage, stage_settings)
        if summary.get("key") in old and summary["key"] != new:
            summary.update(key=new, source_hash=stage.source_hash())
            write_json(folder, summary["record"], summary)
            changed.append(summary["record"])
    return changed


def stale_records(folder=CAPTURES) -> dict[str, str]:
    return {record: why for record in site_records() if (why := status(record, folder))}


def counter_records() -> list[str]:
    return [record_name(stage, shape) for stage, shape in COUNTER_RECORDS]


def counters_command(record: str) -> str:
    return recapture_command(record).replace("attnprof capture", "attnprof counters")


def load_counters(record, folder=CAPTURES) -> dict:
    fix = f"run {counters_command(record)} on a CUDA GPU with Nsight Compute"
    return _read_json(summary_path(folder, f"{record}.counters"), f"counters record of {record!r}", fix)


def counters_status(record, folder=CAPTURES) -> str | None:
    """None when the counters of capture `record` are present, current, and agree with the ncu report
    they were parsed from; otherwise one line saying why not and what to run."""
    from . import counters
    fix = f"run {counters_command(record)} on a CUDA GPU with Nsight Compute"
    stage_name, shape, dtype_name = parse_record(record)
    try:
        record_ = load_counters(record, folder)
    except (CaptureMissing, ValueError) as e:
        return str(e)
    if record_.get("key") != capture_key(get_stage(stage_name), settings(shape, dtype_name)):
        return f"counters of {record!r} are stale (the snippet or the capture settings changed): {fix}"
    report = Path(folder) / f"{record}.ncu.csv"
    try:
        parsed = counters.parse_csv(report.read_text())
    except (OSError, ValueError) as e:
        return f"ncu report {report.name} is missing or unreadable ({e}): {fix}"
    if parsed != record_.get("kernels"):
        return f"counters {record}.counters.json disagree with their ncu report {report.name}: {fix}"
    try:
        capture = load_summary(record, folder)
    except (CaptureMissing, ValueError):
        return None  # the capture's own status says what is wrong with it
    if "ops" in capture and not counters.paired(capture["ops"], parsed):
        return f"counters of {record!r} name other kernels than its capture: {fix}"
    return None


def stale_counters(folder=CAPTURES) -> dict[str, str]:
    """Counters records that are missing, stale or disagree with their report, keyed `<record>.counters`."""
    return {f"{record}.counters": why for record in counter_records() if (why := counters_status(record, folder))}


def problems(folder=CAPTURES) -> dict[str, str]:
    """Everything the site reads that is missing, stale or inconsistent: the stage captures, the backward
    and two-GPU captures (records.py; no site build retakes them), the readers' captures the site renders
    (own.py), and the counters records."""
    from . import own, records
    return {**stale_records(folder), **records.stale_records(folder), **own.stale_records(folder),
            **stale_counters(folder)}


def load_run(name, folder=CAPTURES) -> dict:
    """A committed measurement run (`run-<name>.json`); a missing or corrupt one raises one line naming the fix."""
    fix = f"run `python -m attnprof sweep --only {name}` on a CUDA GPU"
    return _read_json(summary_path(folder, f"run-{name}"), f"record of run {name!r}", fix)
