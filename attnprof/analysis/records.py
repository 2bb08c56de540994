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

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import bounds, confirm, counts, derived, processes, stats, trace
from ..model import own, store
from ..model.names import (BACKWARD_CODE, COUNTERS_CODE, CP_CODE, CP_CONFIGS, CP_WORLD, FORWARD_CODE, OWN_CODE, RUNS,
                    backward_record, backward_settings, capture_command, counters_settings, cp_config, cp_record,
                    cp_settings, make_key, parse_record, parsed, profiled_sources, record_name, run_settings,
                    row_hash, run_sources, run_stages, settings, source_hash_of)
from ..model.stages import counter_records, select, site_records

# ---- loading: once per build ----------------------------------------------------------------------
# A build checks every record (`problems`) and then renders from the same files; while it reads
# (`reading`, with the memo of its Build), each file is read and decoded once. Outside, every read reads.

_memo: dict | None = None


@contextlib.contextmanager
def reading(memo: dict | None = None):
    """Files read within this block are kept in `memo` (a Build's: made anew for every build, so nothing
    read survives a rebuild); without one, in the memo already in use or else a new one."""
    global _memo
    outer = _memo
    _memo = memo if memo is not None else outer if outer is not None else {}
    try:
        yield
    finally:
        _memo = outer


def _once(key, read):
    """read(); while a build is reading, what it gave the first time for `key`. A read that raises is
    not kept (the next one raises again). What it gives is shared: never change it."""
    if _memo is None:
        return read()
    if key not in _memo:
        _memo[key] = read()
    return _memo[key]


def _json(path, what="record", fix="") -> dict:
    """store.read_json, once per file while a build reads."""
    return _once(("json", str(path)), lambda: store.read_json(path, what, fix))


def load_trace(path) -> dict:
    """trace.load, once per file while a build reads."""
    return _once(("trace", str(path)), lambda: trace.load(path))


def load_summary(record, folder=None) -> dict:
    """A committed record's summary; missing or corrupt raises one line naming the file and the fix."""
    folder = folder or store.CAPTURES
    path = store.summary_path(folder, record)
    fix = kind_of(record).fix(record)
    summary = _json(path, f"capture {record!r}", fix)
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
    return _json(store.summary_path(folder or store.CAPTURES, name), f"counters record of {record!r}", COUNTERS.fix(name))


def load_run(name, folder=None) -> dict:
    """A committed measurement run (`run-<name>.json`); a missing or corrupt one raises one line naming the fix."""
    record = f"run-{name}"
    return _json(store.summary_path(folder or store.CAPTURES, record), f"record of run {name!r}", RUN.fix(record))

# ---- status: present, current and consistent ----------------------------------------------------


def _stale(record, folder) -> str | None:
    """The one staleness check every status makes first: None when the committed record was made under
    the key its kind gives now (or is missing or unreadable: the status says so); otherwise one line
    naming the code that changed (the files it ran, when the record names them) and the fix."""
    kind = kind_of(record)
    try:
        made = _json(store.summary_path(folder, record))
    except (OSError, ValueError):
        return None
    if not isinstance(made, dict):
        return None
    if made.get("key") == kind.key(record):
        return _mislabelled(record, made, kind)
    code = made.get("code")
    if isinstance(code, dict):  # the record names the hash of each file it ran: name those that changed
        changed = [p for p, now in kind.code(record).items() if code.get(p) != now]
        if made.get("settings") not in (None, kind.settings(record)):
            changed.append("its settings")
        why = f"{', '.join(changed) or 'the files it ran'} changed since it was made"
    else:
        why = f"made before {', '.join(kind.sources(record))} or its settings last changed"
    return f"{kind.noun} {record!r} is stale ({why}): {kind.fix(record)}"


ECHOED = ("shape", "dtype", "world_size", "rotate", "load_balance", "backend", "run")  # settings a record repeats


def _mislabelled(record, made, kind) -> str | None:
    """None when the settings a current record states (its `settings`, and the shape, dtype... it repeats
    at the top) are those its name and key stand for; otherwise one line naming the field."""
    expected = kind.settings(record)
    stated = [("settings", made["settings"], expected)] if "settings" in made else []
    stated += [(k, made[k], expected[k]) for k in ECHOED if k in made and k in expected]
    for field_name, value, wanted in stated:
        if value != wanted:
            return (f"{kind.noun} {record}.json says {field_name} {value!r}, but its name and key stand for "
                    f"{wanted!r}: {kind.fix(record)}")
    return None


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
        found = differences(summary, load_trace(path))
    except trace.TraceError as e:
        return f"{str(e).replace(str(path), path.name).split(': recapture')[0]} ({record!r}): {fix}"
    if not found:
        return None
    more = f"; and {len(found) - 3} more" if len(found) > 3 else ""
    return (f"capture {store.summary_path(folder, record).name} disagrees with its trace {path.name}: "
            f"{'; '.join(found[:3])}{more}: {fix}")


def _profiled_status(record, folder) -> str | None:
    """A profiled capture (a stage's, a backward's, a reader's): present, current, and what its raw
    samples and its trace say."""
    return _stale(record, folder) or _check(record, folder) or _consistent(record, folder)


def _stage_status(record, folder) -> str | None:
    parse_record(record.removesuffix("-bwd"))  # a bad name is one line naming the forms a name takes
    return _profiled_status(record, folder)


def _consistent(record, folder) -> str | None:
    """A profiled record (not one that could not run): its event statistics are its raw samples', and
    everything else is what its trace says; what it decides itself and its measured-once numbers hold."""
    summary = load_summary(record, folder)
    fix = kind_of(record).fix(record)
    properties = []
    if "unavailable" not in summary:
        if found := stats.samples_disagreements(summary):
            return f"capture {record}.json disagrees with its own raw samples: {'; '.join(found[:3])}: {fix}"
        if why := disagreement(record, summary, folder, _with_device(trace.disagreements, properties)):
            return why
    allowed, errors = _verified(folder)
    stage = summary.get("stage")
    tolerance = allowed.get((confirm.STAGES[stage].tolerance if stage in confirm.STAGES else None, summary.get("dtype")))
    found = confirm.summary_lines(summary, store.trace_path(folder, record).exists(), bounds.memory(summary), tolerance,
                                  errors.get((confirm.verified_path(stage), summary.get("dtype"))))
    return (_contradiction(kind_of(record).noun, record, found, fix) or _counted(record, _safely(counts.summary_lines, summary))
            or _physical(record, summary, _safely(bounds.summary_lines, summary), properties))


def _with_device(differences, properties: list):
    """`differences` (summary, trace) -> lines, and where the record's GPU is not its trace's; the trace's
    deviceProperties are kept in `properties` for the bounds that need the GPU's memory."""
    def both(summary, loaded):
        properties[:] = loaded.get("deviceProperties", [])
        return differences(summary, loaded) + confirm.device_lines(summary, properties)
    return both


def _safely(lines, *args) -> list[str]:
    """lines(*args); a record too malformed to be bounded or counted is one line, never a traceback."""
    try:
        return lines(*args)
    except (KeyError, TypeError, ValueError, AttributeError, ZeroDivisionError) as e:
        return [f"cannot be read where {lines.__module__.rsplit('.', 1)[-1]}.py looks ({type(e).__name__}: {e})"]


def _counted(record, found) -> str | None:
    """None when a record keeps as many samples and profiled forwards as its settings say (counts.py)."""
    if not found:
        return None
    kind = kind_of(record)
    more = f"; and {len(found) - 3} more" if len(found) > 3 else ""
    return f"{kind.noun} {record}.json keeps other counts than it was taken with: {'; '.join(found[:3])}{more}: {kind.fix(record)}"


def _physical(record, made, found, properties=None, query=None) -> str | None:
    """None when a record is within the specification of the GPU it names (bounds.py), its trace's
    deviceProperties (and the device query) are that GPU's, and `found` (its bounds' lines) is empty;
    otherwise one line: a GPU the table does not know names the table as the fix."""
    kind = kind_of(record)
    if "device" not in made:
        return f"{kind.noun} {record}.json names no GPU (no `device`), so nothing bounds its numbers: {kind.fix(record)}"
    if why := bounds.unknown(made):
        return f"{kind.noun} {record}.json: {why}"
    found = _safely(bounds.device_lines, made, properties, query) + found
    if not found:
        return None
    more = f"; and {len(found) - 3} more" if len(found) > 3 else ""
    return (f"{kind.noun} {record}.json is beyond the specification of its GPU ({made['device']}, {bounds.TABLE}): "
            f"{'; '.join(found[:3])}{more}: {kind.fix(record)}")


def _contradiction(noun, record, found, fix) -> str | None:
    if not found:
        return None
    more = f"; and {len(found) - 3} more" if len(found) > 3 else ""
    return f"{noun} {record}.json contradicts itself: {'; '.join(found[:3])}{more}: {fix}"


def _run_result(name, folder):
    """A run's result as committed, or None where it cannot be read (its own status says why)."""
    try:
        return load_run(name, folder)["result"]
    except (store.CaptureMissing, ValueError, KeyError):
        return None


def _verified(folder) -> tuple[dict, dict]:
    """Tolerances and measured errors from the committed verification run (confirm.tolerances)."""
    rows = _run_result("verify", folder)
    return confirm.tolerances(rows) if isinstance(rows, list) else ({}, {})


def _cp_status(record, folder) -> str | None:
    """A two-GPU record: current, rank by rank what its merged trace says, and its measured-once medians
    within their bounds."""
    if why := _stale(record, folder) or _check(record, folder):
        return why
    summary, properties = load_summary(record, folder), []
    if why := disagreement(record, summary, folder, _with_device(trace.ranks_disagreements, properties)):
        return why
    sweep = _run_result("sweep", folder)
    found = confirm.cp_lines(summary, sweep if isinstance(sweep, list) else None, bounds.memory(summary),
                             _verified(folder)[0].get((None, summary.get("dtype"))))
    return (_contradiction(CP.noun, record, found, CP.fix(record)) or _counted(record, _safely(counts.summary_lines, summary))
            or _physical(record, summary, _safely(bounds.cp_lines, summary), properties))


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
        text = report.read_text()
        parsed = counters.parse_csv(text)
    except (OSError, ValueError) as e:
        return f"ncu report {report.name} is missing or unreadable ({e}): {fix}"
    if parsed != counted.get("kernels"):
        return f"counters {record}.counters.json disagree with their ncu report {report.name}: {fix}"
    capture = existing_capture(record, folder)
    if capture and "ops" in capture and not counters.paired(capture["ops"], parsed):
        return f"counters of {record!r} name other kernels than its capture: {fix}"
    return _physical(name, counted, _safely(bounds.counters_lines, counted, text))


def _run_status(record, folder) -> str | None:
    """None when the run's file is there, current, and every figure in it follows from its samples and settings."""
    if why := _stale(record, folder):
        return why
    name = record.removeprefix("run-")
    try:
        run = load_run(name, folder)
    except (store.CaptureMissing, ValueError) as e:
        return str(e)
    found = []
    for where, result in [("result", run.get("result"))] + [(f"repeats[{i}]", r) for i, r in enumerate(run.get("repeats", []))]:
        found += [line.replace("result", where, 1) for line in derived.disagreements(name, result)
                  if not _is_samples_list({"result": result}, line)]
    if found:
        more = f"; and {len(found) - 3} more" if len(found) > 3 else ""
        return f"run {record}.json disagrees with its own samples: {'; '.join(found[:3])}{more}: {RUN.fix(record)}"
    found = (processes.lines(name, run, RUN.settings(record)) + confirm.device_lines(run, None)
             + [line for result in [run.get("result")] + run.get("repeats", [])
                for line in confirm.run_lines(name, result, bounds.memory(run))])
    result = run.get("result")
    query = result.get("query") if isinstance(result, dict) else None  # the hardware run's device query
    return (_contradiction("run", record, found, RUN.fix(record)) or _counted(record, _safely(counts.run_lines, name, run))
            or _physical(record, run, _safely(bounds.run_lines, name, run), query=query))


def _is_samples_list(run, line) -> bool:
    """derived.py reads a `median_us` or `back_to_back_us` beside no samples as a median without its samples;
    where that key holds the samples list itself (the timing run's rows), the line says nothing."""
    if " has no samples (" not in line:
        return False
    node = run
    for part in line.split(" ", 1)[0].replace("]", "").replace("[", ".").split("."):
        node = node[int(part)] if part.isdigit() else node[part]
    return isinstance(node, list)


# ---- the table ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Take:
    """What retaking one record of a kind needs beyond a CUDA GPU and PyTorch, and which function of
    attnprof/measure/worker.py retakes it (`python -m attnprof regenerate` and the build use these)."""
    retake: str  # a function of attnprof/measure/worker.py: (record, out_dir) -> outcome
    gpus: int = 1  # GPUs one take holds; more than one: the whole machine, with nothing else running
    ncu: bool = False  # Nsight Compute (`ncu` on PATH)
    together: bool = False  # the records a GPU is given are taken in one go (`retake` gets the list)


@dataclass(frozen=True, kw_only=True)
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
        """The key a record of this kind is made under now: the token hash of its code, the rows of the
        stage table it runs, and its settings."""
        return make_key(source_hash_of(self.sources(record)) + row_hash(self.stages(record)), self.settings(record))

    def code(self, record: str) -> dict[str, str]:
        """The token hash of each file the record runs, and the hash of each stage table row, stored beside
        its key, so a stale one names what changed."""
        return ({p: source_hash_of([p]) for p in self.sources(record)}
                | {f"the stage table's {s!r} row": row_hash([s]) for s in self.stages(record)})


def _stage_of(record: str) -> list[str]:
    return [parsed(record)[0]]


STAGE = Kind(
    name="stage", records=lambda: [record_name(s, shape) for s, shape in site_records()],
    owns=lambda r: not r.startswith(("cp-", "run-")) and not r.endswith(("-bwd", ".counters")),
    status=_stage_status, fix=lambda r: f"run {capture_command(r)} on a CUDA GPU",
    sources=profiled_sources(FORWARD_CODE), settings=lambda r: settings(*parsed(r)[1:]), stages=_stage_of,
    take=Take("take_stage"))
BACKWARD = Kind(
    name="backward", records=lambda: [backward_record(s) for s in select(backward=True)],
    owns=lambda r: r.endswith("-bwd"), status=_stage_status,
    fix=lambda r: f"run `python -m attnprof capture --backward {r.removesuffix('-bwd')}` on a CUDA GPU",
    sources=profiled_sources(BACKWARD_CODE), settings=lambda r: backward_settings(*parsed(r)[1:]),
    stages=_stage_of, take=Take("take_backward"))
CP = Kind(
    name="cp", records=lambda: [cp_record(n, CP_WORLD, r, b) for n, r, b in CP_CONFIGS],
    owns=lambda r: r.startswith("cp-"), status=_cp_status,
    fix=lambda r: (f"run `python -m attnprof capture cp --world-size {CP_WORLD} --unbalanced` on a machine with "
                   f"{CP_WORLD} CUDA GPUs"),
    sources=lambda r: CP_CODE, settings=lambda r: cp_settings(cp_config(r)[0], CP_WORLD, *cp_config(r)[1:]),
    stages=lambda r: [], take=Take("take_cp", gpus=CP_WORLD))
COUNTERS = Kind(
    name="counters", records=lambda: [f"{record_name(s, shape)}.counters" for s, shape in counter_records()],
    owns=lambda r: r.endswith(".counters"), status=_counters_status,
    fix=lambda r: f"run {capture_command(r.removesuffix('.counters'), 'counters')} on a CUDA GPU with Nsight Compute",
    sources=profiled_sources(COUNTERS_CODE), settings=lambda r: counters_settings(*parsed(r)[1:]),
    stages=_stage_of, take=Take("take_counters", ncu=True, together=True), noun="counters record")
RUN = Kind(
    name="run", records=lambda: [f"run-{n}" for n in RUNS], owns=lambda r: r.startswith("run-"), status=_run_status,
    fix=lambda r: f"run `python -m attnprof sweep --only {r.removeprefix('run-')}` on a CUDA GPU",
    sources=lambda r: run_sources(r.removeprefix("run-")), settings=lambda r: run_settings(r.removeprefix("run-")),
    stages=lambda r: run_stages(r.removeprefix("run-")), take=Take("take_run"), noun="run record")
OWN = Kind(
    name="own", records=own.site_records, owns=lambda r: "." in r.split("-")[0] and not r.endswith(".counters"),
    status=_profiled_status, fix=own.recapture_fix, sources=lambda r: (own.target(r)[0],) + OWN_CODE,
    settings=own.record_settings, stages=lambda r: [], take=Take("take_own"), noun="reader's capture")
KINDS = [OWN, STAGE, BACKWARD, CP, COUNTERS, RUN]  # the first whose `owns` matches is a record's kind


def kind_of(record: str) -> Kind:
    return next(k for k in KINDS if k.owns(record))


def status(record: str, folder=None) -> str | None:
    """None when `record` is usable; otherwise one line saying why not and what to run."""
    return kind_of(record).status(record, folder or store.CAPTURES)


def problems(folder=None, kinds=KINDS) -> dict[str, str]:
    """Every record the site reads that is missing, stale or inconsistent, with why and the fix; and,
    where the usable ones were taken on more than one GPU, those taken on another than most. Each file
    is read once (`reading`)."""
    with reading():
        return _problems(folder or store.CAPTURES, kinds)


def _problems(folder, kinds) -> dict[str, str]:
    found = {record: why for kind in kinds for record in kind.records() if (why := status(record, folder))}
    devices = {}
    for kind in kinds:
        for record in kind.records():
            if record not in found and (made := _device_stated(record, folder)):
                devices[record] = made
    for record, why in confirm.other_devices(devices).items():
        found[record] = f"{kind_of(record).noun} {record}.json {why}: {kind_of(record).fix(record)}"
    return found


def _device_stated(record, folder) -> tuple | None:
    try:
        return confirm.device_of(_json(store.summary_path(folder, record)))
    except (OSError, ValueError, AttributeError):
        return None


def used_records(kinds=KINDS) -> set[str]:
    """Every record the site uses (of `kinds`)."""
    return {r for kind in kinds for r in kind.records()}


def site_record_count() -> dict[str, int]:
    return {kind.name: len(kind.records()) for kind in KINDS}
