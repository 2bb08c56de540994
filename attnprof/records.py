"""Record kinds: every kind of committed record the site reads, in one table.

A kind says which records of it the site renders, what each is called, the key it was made under
(the token hash of the code it ran and its settings: a comment-only edit stales nothing), whether the
committed one is usable (present, current, consistent with the data it was derived from) and the command
that retakes it. `check`, the strict build and `show` walk KINDS; a new kind is one entry.

    stage     `<stage>[-BxHxSxD][-dtype]`: one forward, profiled (measure/capture.py)
    backward  `<stage>-bwd`: forward + backward, profiled (measure/backward.py)
    cp        `cp-<rotation>[-unbalanced]-w<world>-1xHxSxD`: context parallelism, every rank (measure/context_parallel.py)
    counters  `<record>.counters`: Nsight Compute over one forward of a stage record (measure/counters.py)
    run       `run-<name>`: a measurement run (measure/runs.py)
    own       `<file stem>.<function>`: a reader's attention, profiled like a stage (measure/own.py, own.py)
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import derived, stages, stats, store, text, trace
from .procedure import BWD_LABEL, DEFAULT_DTYPE, EVENT_REPS, FORMAT, SCHEDULE, WARMUP_CALLS
from .stages import (DEFAULT_SHAPE, ROOT, STAGES, Stage, code_hash, counter_records, get_stage, select,
                     site_records)

# ---- names, settings and keys -------------------------------------------------------------------


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


def settings(shape, dtype_name) -> dict:
    return {"shape": list(shape), "dtype": dtype_name, "causal": True, "schedule": SCHEDULE,
            "warmup_calls": WARMUP_CALLS, "event_reps": EVENT_REPS, "format": FORMAT}


def _key(source_hash: str, record_settings: dict) -> str:
    return hashlib.sha256((source_hash + json.dumps(record_settings, sort_keys=True)).encode()).hexdigest()[:16]


# ---- the code each record runs --------------------------------------------------------------------
# Paths are relative to the repository (read from stages.SNIPPETS and CODE_ROOT: a test points them at a
# copy). A record's key is the token hash of these files and its settings, so an edit of any of them,
# comments aside, stales it.

CODE_ROOT = ROOT
MEASURE = "attnprof/measure"
FORWARD_CODE = tuple(f"{MEASURE}/{m}.py" for m in ("capture", "bench", "numerics", "dispatch", "timing"))  # the capture path
BACKWARD_CODE = FORWARD_CODE + (f"{MEASURE}/backward.py",)
COUNTERS_CODE = tuple(f"{MEASURE}/{m}.py" for m in ("counters", "numerics", "capture"))
OWN_CODE = (f"{MEASURE}/own.py",) + FORWARD_CODE  # a reader's capture: its own checks, then the capture path
CP_CODE = (f"{MEASURE}/context_parallel.py",)  # as the committed two-GPU records were keyed: kept as it is

# run: (the measuring modules its function runs, the stages it measures as `select` facts or names, other
# snippets it loads); measure/runs.py maps the same names to the functions. Every run's figures are
# computed by derived.py, which keys them too.
RUN_CODE = {
    "ceilings": (("sweep", "bench"), None, ()),
    "hardware": (("sweep", "bench"), None, ()),
    "sweep": (("sweep", "bench", "numerics"), dict(sweep=True), ()),
    "fastest": (("sweep", "bench", "numerics"), dict(fused=True, sweep=True), ()),
    "recompile": (("sweep", "bench", "numerics"), dict(fresh_compile=True), ()),
    "fallback": (("verify", "dispatch", "bench", "numerics"), None, ("sdpa",)),
    "verify": (("verify", "numerics"), dict(verify=True), ("sdpa",)),
    "gqa": (("serving", "bench", "dispatch", "numerics"), None, ()),
    "decode": (("serving", "bench", "dispatch", "numerics"), None, ()),
    "varlen": (("serving", "bench", "dispatch", "numerics"), None, ()),
    "e2e": (("serving", "bench", "numerics"), None, ("inplace",)),
    "decode_step": (("serving", "bench", "numerics"), None, ()),
    "graphs": (("graphs", "bench", "numerics"), None, ("naive", "compiled", "graphed", "sdpa")),
    "timing": (("timing", "bench", "numerics", "capture"), ("naive", "math", "efficient", "flash", "cudnn", "auto"),
               ("graphed",)),
}


def _snippet_paths(names) -> tuple[str, ...]:
    return tuple(f"snippets/{n}.py" for n in dict.fromkeys(names))


def run_stages(name: str) -> list[str]:
    """The stages a measurement run measures (their snippets key it; a provider among them must load)."""
    facts = RUN_CODE[name][1]
    return select(**facts) if isinstance(facts, dict) else list(facts or [])


def run_sources(name: str) -> tuple[str, ...]:
    modules, _, snippets = RUN_CODE[name]
    stage_snippets = [n for s in run_stages(name) for n in STAGES[s].snippets]
    return (tuple(f"{MEASURE}/{m}.py" for m in modules) + ("attnprof/derived.py",)
            + _snippet_paths(stage_snippets + list(snippets)))


def run_settings(name: str) -> dict:
    return {"run": name, "stages": run_stages(name), "format": FORMAT}


def _code_path(path: str) -> Path:
    """Where a file a key hashes lies: snippets under stages.SNIPPETS, the rest under CODE_ROOT."""
    if path.startswith("snippets/"):
        return stages.SNIPPETS / path.removeprefix("snippets/")
    return Path(CODE_ROOT) / path


def source_hash_of(paths) -> str:
    """The token hash of these files (relative to the repository), in this order."""
    return code_hash(*(_code_path(p) for p in paths))


def capture_key(stage: Stage, stage_settings: dict, code=FORWARD_CODE) -> str:
    """The key of a profiled record of `stage`: its snippets and the measuring code, and its settings."""
    return _key(source_hash_of(_snippet_paths(stage.snippets) + tuple(code)), stage_settings)


def backward_record(stage: str, shape=DEFAULT_SHAPE, dtype_name=DEFAULT_DTYPE) -> str:
    return f"{record_name(stage, shape, dtype_name)}-bwd"


def backward_settings(shape, dtype_name) -> dict:
    return {**settings(shape, dtype_name), "pass": "backward", "label": BWD_LABEL}


CP_SOURCE = ROOT / "attnprof" / "measure" / "context_parallel.py"
CP_HEADS, CP_HEAD_DIM, CP_BACKEND = 16, 128, "flash"
CP_WORLD = 2
CP_LENGTHS = (32768, 65536, 131072)
# (length, rotation, load-balanced) of every context-parallel capture the site renders
CP_CONFIGS = [(n, "allgather", True) for n in CP_LENGTHS] + [
    (CP_LENGTHS[-1], "alltoall", True), (CP_LENGTHS[-1], "allgather", False)]


def cp_record(seq_len: int, world: int = CP_WORLD, rotate: str = "allgather", balanced: bool = True) -> str:
    return f"cp-{rotate}{'' if balanced else '-unbalanced'}-w{world}-1x{CP_HEADS}x{seq_len}x{CP_HEAD_DIM}"


def cp_settings(seq_len, world, rotate, balanced) -> dict:
    return {**settings((1, CP_HEADS, seq_len, CP_HEAD_DIM), "bf16"), "world_size": world, "rotate": rotate,
            "load_balance": balanced, "backend": CP_BACKEND}


def cp_source_hash() -> str:
    """The token hash of the context-parallel capture code, as every other key uses."""
    return source_hash_of(CP_CODE)


def cp_key(cp_settings_: dict) -> str:
    return _key(cp_source_hash(), cp_settings_)


def counted_at(shape) -> list[tuple[str, str]]:
    """(stage, capture record) of every stage whose forward at `shape` also ran under Nsight Compute."""
    return [(s, record_name(s, shape)) for s, at in counter_records() if tuple(at) == tuple(shape)]


RUNS = tuple(RUN_CODE)  # every measurement run the site renders (measure/runs.py makes them)

# ---- loading ------------------------------------------------------------------------------------


def load_summary(record, folder=None) -> dict:
    """A committed record's summary; missing or corrupt raises one line naming the file and the fix."""
    folder = folder or store.CAPTURES
    path = store.summary_path(folder, record)
    fix = kind_of(record).fix(record)
    summary = store.read_json(path, f"capture {record!r}", fix)
    if not isinstance(summary, dict) or summary.get("record") != record:
        raise ValueError(f"capture {path.name} is not a summary of {record!r}: {fix}")
    return summary


def existing_capture(record, folder) -> dict | None:
    """The capture of `record` already in `folder`, if one is there and readable."""
    try:
        return load_summary(record, folder)
    except (store.CaptureMissing, ValueError):
        return None


def load_counters(record, folder=None) -> dict:
    """The counters record of the stage capture `record`."""
    name = f"{record}.counters"
    return store.read_json(store.summary_path(folder or store.CAPTURES, name), f"counters record of {record!r}",
                           COUNTERS.fix(name))


def load_run(name, folder=None) -> dict:
    """A committed measurement run (`run-<name>.json`); a missing or corrupt one raises one line naming the fix."""
    record = f"run-{name}"
    return store.read_json(store.summary_path(folder or store.CAPTURES, record), f"record of run {name!r}",
                           RUN.fix(record))

# ---- status: present, current and consistent ----------------------------------------------------


def _stale(record, folder) -> str | None:
    """The one staleness check every status makes first: None when the committed record was made under
    the key its kind gives now (or is missing or unreadable: the status says so); otherwise one line
    naming the code that changed (the files it ran, when the record names them) and the fix."""
    kind = kind_of(record)
    try:
        made = json.loads(store.summary_path(folder, record).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(made, dict) or made.get("key") == kind.key(record):
        return None
    sources = kind.sources(record)
    code = made.get("code")
    if isinstance(code, dict):  # the record names the hash of each file it ran: name those that changed
        changed = [p for p in sources if code.get(p) != source_hash_of([p])]
        if made.get("settings") not in (None, kind.settings(record)):
            changed.append("its settings")
        why = f"{', '.join(changed) or 'the files it ran'} changed since it was made"
    else:
        why = f"made before {', '.join(sources)} or its settings last changed"
    return f"{kind.noun} {record!r} is stale ({why}): {kind.fix(record)}"


def _check(record, folder) -> str | None:
    """None when `record` is present and has its trace; otherwise one line saying why not."""
    try:
        summary = load_summary(record, folder)
    except (store.CaptureMissing, ValueError) as e:
        return str(e)
    fix = kind_of(record).fix(record)
    if "unavailable" not in summary and not store.trace_path(folder, record).exists():
        return f"trace of {record!r} is missing ({store.trace_path(folder, record).name}): {fix}"
    return None


def disagreement(record, summary, folder, differences=trace.disagreements) -> str | None:
    """None when the summary is what its committed trace says (ops, their order, kinds and durations,
    device and CPU time, per forward); otherwise one line naming both files, what differs and the fix.
    Numbers in a summary are never edited by hand: the fix is to capture again."""
    fix = kind_of(record).fix(record)
    path = store.trace_path(folder, record)
    try:
        found = differences(summary, trace.load(path))
    except trace.TraceError as e:
        return f"{str(e).replace(str(path), path.name).split(': recapture')[0]} ({record!r}): {fix}"
    if not found:
        return None
    more = f"; and {len(found) - 3} more" if len(found) > 3 else ""
    return (f"capture {store.summary_path(folder, record).name} disagrees with its trace {path.name}: "
            f"{'; '.join(found[:3])}{more}: {fix}")


def _profiled_status(record, folder) -> str | None:
    """A stage or backward record: present, current, and what its raw samples and its trace say."""
    parse_record(record.removesuffix("-bwd"))  # a bad name is one line naming the forms a name takes
    return _stale(record, folder) or _check(record, folder) or _consistent(record, folder)


def _consistent(record, folder) -> str | None:
    """A profiled record (not one that could not run): its event statistics are its raw samples', and
    everything else is what its trace says."""
    summary = load_summary(record, folder)
    if "unavailable" in summary:
        return None
    if found := stats.samples_disagreements(summary):
        return (f"capture {record}.json disagrees with its own raw samples: {'; '.join(found[:3])}: "
                f"{kind_of(record).fix(record)}")
    return disagreement(record, summary, folder)


def _cp_status(record, folder) -> str | None:
    """A two-GPU record: current, and rank by rank what its merged trace says."""
    return (_stale(record, folder) or _check(record, folder)
            or disagreement(record, load_summary(record, folder), folder, trace.ranks_disagreements))


def _counters_status(name, folder) -> str | None:
    """None when the counters of a stage capture are present, current, and agree with the ncu report
    they were parsed from and with the capture's kernels; otherwise one line saying why not."""
    from . import counters
    if why := _stale(name, folder):
        return why
    record = name.removesuffix(".counters")
    fix = COUNTERS.fix(name)
    try:
        counted = load_counters(record, folder)
    except (store.CaptureMissing, ValueError) as e:
        return str(e)
    report = Path(folder) / f"{record}.ncu.csv"
    try:
        parsed = counters.parse_csv(report.read_text())
    except (OSError, ValueError) as e:
        return f"ncu report {report.name} is missing or unreadable ({e}): {fix}"
    if parsed != counted.get("kernels"):
        return f"counters {record}.counters.json disagree with their ncu report {report.name}: {fix}"
    capture = existing_capture(record, folder)
    if capture and "ops" in capture and not counters.paired(capture["ops"], parsed):
        return f"counters of {record!r} name other kernels than its capture: {fix}"
    return None


def _run_status(record, folder) -> str | None:
    """None when the run's file is there, current, and every figure in it follows from its samples and settings."""
    if why := _stale(record, folder):
        return why
    name = record.removeprefix("run-")
    try:
        run = load_run(name, folder)
    except (store.CaptureMissing, ValueError) as e:
        return str(e)
    found = [line for line in derived.disagreements(name, run.get("result")) if not _is_samples_list(run, line)]
    if found:
        more = f"; and {len(found) - 3} more" if len(found) > 3 else ""
        return f"run {record}.json disagrees with its own samples: {'; '.join(found[:3])}{more}: {RUN.fix(record)}"
    return None


def _is_samples_list(run, line) -> bool:
    """derived.py reads a `median_us` or `back_to_back_us` beside no samples as a median without its samples;
    where that key holds the samples list itself (the timing run's rows), the line says nothing."""
    if " has no samples (" not in line:
        return False
    node = run
    for part in line.split(" ", 1)[0].replace("]", "").replace("[", ".").split("."):
        node = node[int(part)] if part.isdigit() else node[part]
    return isinstance(node, list)


def _own_status(record, folder) -> str | None:
    """A reader's capture the site renders: current, and what its raw samples and its trace say."""
    return _stale(record, folder) or _check(record, folder) or _consistent(record, folder)

# ---- the table ----------------------------------------------------------------------------------


def _capture_command(record: str, verb="capture") -> str:
    stage, shape, dtype_name = parse_record(record)
    extra = "" if tuple(shape) == tuple(DEFAULT_SHAPE) else f" --shape {text.shape(shape, ',')}"
    extra += "" if dtype_name == DEFAULT_DTYPE else f" --dtype {dtype_name}"
    return f"`python -m attnprof {verb} {stage}{extra}`"


def _parsed(record: str):
    """(stage, shape, dtype) of a stage, backward or counters record."""
    return parse_record(record.removesuffix("-bwd").removesuffix(".counters"))


def _profiled_sources(code):
    return lambda r: _snippet_paths(get_stage(_parsed(r)[0]).snippets) + tuple(code)


def _cp_config(record: str):
    """(length, rotation, load-balanced) of a context-parallel record the site renders."""
    for n, rotate, balanced in CP_CONFIGS:
        if cp_record(n, CP_WORLD, rotate, balanced) == record:
            return n, rotate, balanced
    raise ValueError(f"{record!r} is not a context-parallel record the site renders: choose from "
                     f"{', '.join(cp_record(n, CP_WORLD, r, b) for n, r, b in CP_CONFIGS)}")


def _own(record: str):
    """(file, function) of a reader's capture the site renders."""
    from . import own
    for path, function in own.OWN_RECORDS:
        if own.record_name(path, function) == record:
            return path, function
    raise ValueError(f"{record!r} is not a reader's capture the site renders")


def own_settings(record: str) -> dict:
    from . import own
    return own.settings(DEFAULT_SHAPE, DEFAULT_DTYPE, _own(record)[1], None, None)


def counters_settings(shape, dtype_name) -> dict:
    from .counters import METRICS
    return {**settings(shape, dtype_name), "metrics": list(METRICS.values())}


@dataclass(frozen=True)
class Take:
    """What retaking one record of a kind needs beyond a CUDA GPU and PyTorch, and which function of
    attnprof/measure/worker.py retakes it (`python -m attnprof regenerate` and the build use these)."""
    retake: str  # a function of attnprof/measure/worker.py: (record, out_dir) -> outcome
    gpus: int = 1  # GPUs one take holds; more than one: the whole machine, with nothing else running
    ncu: bool = False  # Nsight Compute (`ncu` on PATH)
    together: bool = False  # the records a GPU is given are taken in one go (`retake` gets the list)


@dataclass(frozen=True)
class Kind:
    name: str
    records: Callable[[], list[str]]  # every record of this kind the site renders
    owns: Callable[[str], bool]  # whether a record name is of this kind
    status: Callable[[str, Path], str | None]  # None when usable, else one line: why, and the fix
    fix: Callable[[str], str]  # what to run to retake it, and on what machine
    sources: Callable[[str], tuple[str, ...]]  # the code files it runs (relative to CODE_ROOT), hashed into its key
    settings: Callable[[str], dict]  # the settings hashed into its key
    stages: Callable[[str], list[str]]  # the stages whose code it runs (a provider among them must load to retake it)
    take: Take
    noun: str = "capture"  # what a message calls one record

    def key(self, record: str) -> str:
        """The key a record of this kind is made under now: the token hash of its code, and its settings."""
        return _key(source_hash_of(self.sources(record)), self.settings(record))

    def code(self, record: str) -> dict[str, str]:
        """The token hash of each file the record runs, stored beside its key, so a stale one names what changed."""
        return {p: source_hash_of([p]) for p in self.sources(record)}


STAGE = Kind("stage", lambda: [record_name(s, shape) for s, shape in site_records()],
             lambda r: not r.startswith(("cp-", "run-")) and not r.endswith(("-bwd", ".counters")),
             _profiled_status, lambda r: f"run {_capture_command(r)} on a CUDA GPU",
             _profiled_sources(FORWARD_CODE), lambda r: settings(*_parsed(r)[1:]), lambda r: [_parsed(r)[0]],
             Take("take_stage"))
BACKWARD = Kind("backward", lambda: [backward_record(s) for s in select(backward=True)],
                lambda r: r.endswith("-bwd"), _profiled_status,
                lambda r: f"run `python -m attnprof capture --backward {r.removesuffix('-bwd')}` on a CUDA GPU",
                _profiled_sources(BACKWARD_CODE), lambda r: backward_settings(*_parsed(r)[1:]),
                lambda r: [_parsed(r)[0]], Take("take_backward"))
CP = Kind("cp", lambda: [cp_record(n, CP_WORLD, r, b) for n, r, b in CP_CONFIGS], lambda r: r.startswith("cp-"),
          _cp_status, lambda r: (f"run `python -m attnprof capture cp --world-size {CP_WORLD} --unbalanced` on a "
                                 f"machine with {CP_WORLD} CUDA GPUs"),
          lambda r: CP_CODE, lambda r: cp_settings(_cp_config(r)[0], CP_WORLD, *_cp_config(r)[1:]), lambda r: [],
          Take("take_cp", gpus=CP_WORLD))
COUNTERS = Kind("counters", lambda: [f"{record_name(s, shape)}.counters" for s, shape in counter_records()],
                lambda r: r.endswith(".counters"), _counters_status,
                lambda r: f"run {_capture_command(r.removesuffix('.counters'), 'counters')} on a CUDA GPU with "
                          f"Nsight Compute",
                _profiled_sources(COUNTERS_CODE), lambda r: counters_settings(*_parsed(r)[1:]),
                lambda r: [_parsed(r)[0]], Take("take_counters", ncu=True, together=True), noun="counters record")
RUN = Kind("run", lambda: [f"run-{n}" for n in RUNS], lambda r: r.startswith("run-"), _run_status,
           lambda r: f"run `python -m attnprof sweep --only {r.removeprefix('run-')}` on a CUDA GPU",
           lambda r: run_sources(r.removeprefix("run-")), lambda r: run_settings(r.removeprefix("run-")),
           lambda r: run_stages(r.removeprefix("run-")), Take("take_run"), noun="run record")
def _own_records() -> list[str]:
    from . import own  # own.py names readers' captures with this module's record_name
    return own.site_records()


def _own_fix(record: str) -> str:
    from . import own
    return own.recapture_fix(record)


OWN = Kind("own", _own_records, lambda r: "." in r.split("-")[0] and not r.endswith(".counters"), _own_status,
           _own_fix, lambda r: (_own(r)[0],) + OWN_CODE, own_settings, lambda r: [], Take("take_own"),
           noun="reader's capture")
KINDS = [OWN, STAGE, BACKWARD, CP, COUNTERS, RUN]  # the first whose `owns` matches is a record's kind


def kind_of(record: str) -> Kind:
    return next(k for k in KINDS if k.owns(record))


def status(record: str, folder=None) -> str | None:
    """None when `record` is usable; otherwise one line saying why not and what to run."""
    return kind_of(record).status(record, folder or store.CAPTURES)


def problems(folder=None, kinds=KINDS) -> dict[str, str]:
    """Every record the site reads that is missing, stale or inconsistent, with why and the fix."""
    return {record: why for kind in kinds for record in kind.records() if (why := status(record, folder))}


def site_record_count() -> dict[str, int]:
    return {kind.name: len(kind.records()) for kind in KINDS}
