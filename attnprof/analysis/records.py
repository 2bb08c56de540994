"""Record kinds: every kind of committed record the site reads, in one table, and the one facade over a record.

A record holds what was measured (traces, raw samples, Nsight Compute's report, the stamp, the clocks); reading
one (`load_summary`, `load_run`, `load_counters`) adds every figure derived from it, once while a build reads.
A kind (stage, backward, cp, counters, run, own: model/names.py names each) says which records of it the site
renders, their names and key, whether the committed one is usable (present, well formed, current) and what
retakes it. `check`, the build and `show` walk KINDS.
"""
from __future__ import annotations

import contextlib
import copy
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import derived, stats, trace, wellformed
from ..model import own, store
from ..text import first_line
from ..model.names import (CP_CONFIGS, CP_WORLD, PROFILED_LOOP, BACKWARD_LOOP, RUNS, backward_record,
                           backward_settings, capture_command, counters_settings, cp_config, cp_record, cp_settings,
                           make_key, parse_record, parsed, profiled_sources, record_name, row_hash, run_settings,
                           run_sources, run_stages, settings, source_hash_of)
from ..model.stages import counter_records, select, site_records

# ---- reading: once per build ----------------------------------------------------------------------
# While a build reads (`reading`, its Build's memo), each file is read and each record derived once.

_memo: dict | None = None


@contextlib.contextmanager
def reading(memo: dict | None = None):
    """Keep what is read in this block in `memo` (a Build's, new each build), or the memo in use, or a new one."""
    global _memo
    outer = _memo
    _memo = memo if memo is not None else outer if outer is not None else {}
    try:
        yield
    finally:
        _memo = outer


def _once(key, read):
    """read(), once per `key` while a build reads (a raise is not kept); what it gives is shared: never change it."""
    if _memo is None:
        return read()
    if key not in _memo:
        _memo[key] = read()
    return _memo[key]


def _json(path, what="record", fix="") -> dict:
    """store.read_json, once per file while a build reads; a malformed record raises one line with the fix."""
    def read():
        data = store.read_json(path, what, fix)
        if why := wellformed.problem(data):
            raise wellformed.Malformed(f"{Path(path).name} is malformed: {why}: {fix}")
        return data
    return _once(("json", str(path)), read)


def load_trace(path) -> dict:
    """trace.load, once per file while a build reads."""
    return _once(("trace", str(path)), lambda: trace.load(path))


def folder_of(record, folder=None) -> Path:
    """`folder` (this set), or for a two-GPU record it lacks, the first set holding it (its page names its GPU)."""
    folder = Path(folder or store.CAPTURES)
    if kind_of(record).take.gpus == 1 or folder.parent != store.SETS or store.summary_path(folder, record).exists():
        return folder
    return next((s for s in store.sets() if store.summary_path(s, record).exists()), folder)


def forwards(record, folder=None) -> list[trace.Forward]:
    """The profiled forwards (or backwards) of a profiled capture, read off its trace once."""
    folder = folder_of(record, folder)
    stored = _stored(record, folder)

    def read():
        try:
            return trace.forwards(load_trace(store.trace_path(folder, record)), stored["label"],
                                  stored.get("follow_autograd", False))
        except trace.TraceError as e:
            raise trace.TraceError(f"{str(e).split(': recapture')[0]} ({record!r}): {kind_of(record).fix(record)}") from None
    return _once(("forwards", str(folder), record), read)


def _stored(record, folder) -> dict:
    """A record's file as committed; missing or corrupt raises one line naming the file and the fix."""
    path = store.summary_path(folder, record)
    fix = kind_of(record).fix(record)
    stored = _json(path, f"capture {record!r}", fix)
    if stored.get("record") != record:
        raise ValueError(f"capture {path.name} is not a summary of {record!r}: {fix}")
    return stored


# A flip (site/claims/core.py): `changed` edits a record as the build reads it, every figure derived, in its block.
_changes: dict[tuple[str, str], Callable[[dict], None]] = {}


@contextlib.contextmanager
def changed(folder, record: str, change: Callable[[dict], None]):
    _changes[str(folder), record] = change
    try:
        yield
    finally:
        del _changes[str(folder), record]


def _as_changed(folder, record, view: dict) -> dict:
    if (change := _changes.get((str(folder), record))) is None:
        return view
    view = copy.deepcopy(view)
    change(view)
    return view


def load_summary(record, folder=None) -> dict:
    """A profiled or two-GPU record as the pages read it, with every figure derived from its trace and samples."""
    folder = folder_of(record, folder)
    stored = _stored(record, folder)
    derive = {CP: _derive_cp, STAGE: _derive_profiled, BACKWARD: _derive_profiled, OWN: _derive_profiled}.get(kind_of(record))
    if derive is None or "unavailable" in stored:  # a run's or a counters record's file, or a stage that did not run
        return _as_changed(folder, record, stored)
    return _once(("summary", str(folder), record), lambda: _as_changed(folder, record, derive(record, stored, folder)))


def _derive_profiled(record, stored, folder) -> dict:
    fwds = forwards(record, folder)
    if stored.get("pass") == "backward":
        made = trace.summarize_backward(load_trace(store.trace_path(folder, record)), stored["label"],
                                        stored["forward_label"], fwds)
    else:
        made = trace.summarize(fwds)
    return stored | made | stats.event_stats(stored["event_times_us"])


def _derive_cp(record, stored, folder) -> dict:
    merged = load_trace(store.trace_path(folder, record))
    ranks = [r | trace.summarize_rank(merged, r["rank"], stored["label"])
             # the (query, key) pairs its queries see under the causal mask, from the positions it holds
             | {"causal_pairs": sum((a + b + 2) * (b - a + 1) // 2 for a, b in r["positions"])} for r in stored["ranks"]]
    slowest = max(r["event_median_us"] for r in ranks)  # the forward is done when the slowest rank is
    return stored | {"ranks": ranks, "cp_event_median_us": slowest,
                     "speedup": stored["single_gpu"]["event_median_us"] / slowest}


def existing_capture(record, folder) -> dict | None:
    """The capture of `record` already in `folder`, if one is there and readable."""
    try:
        return _stored(record, folder)
    except (store.CaptureMissing, ValueError):
        return None


def load_counters(record, folder=None) -> dict:
    """The counters record of the stage capture `record`, with the kernels of the Nsight Compute report it keeps."""
    from . import counters
    folder = folder or store.CAPTURES
    name = f"{record}.counters"
    stored = _json(store.summary_path(folder, name), f"counters record of {record!r}", COUNTERS.fix(name))
    report = Path(folder) / f"{record}.ncu.csv"

    def read():
        try:
            return _as_changed(folder, name, stored | {"kernels": counters.parse_csv(report.read_text())})
        except (OSError, ValueError) as e:
            raise ValueError(f"ncu report {report.name} is missing or unreadable ({e}): {COUNTERS.fix(name)}") from None
    return _once(("counters", str(folder), record), read)


def load_run(name, folder=None) -> dict:
    """A committed run (`run-<name>.json`), each process's result with its figures derived from its samples."""
    record = f"run-{name}"
    folder = folder or store.CAPTURES
    stored = _json(store.summary_path(folder, record), f"record of run {name!r}", RUN.fix(record))

    def read():
        return stored | {"result": derived.derive(name, stored["result"]),
                         **({"repeats": [derived.derive(name, r) for r in stored["repeats"]]} if "repeats" in stored else {})}
    return _once(("run", str(folder), name), read)

# ---- status: present, of the right shape, current -------------------------------------------------


def _stale(record, folder) -> str | None:
    """None when the record is current (or unreadable: its status says so); else what changed, and the fix."""
    kind = kind_of(record)
    try:
        made = _json(store.summary_path(folder, record))
    except (OSError, ValueError):
        return None
    if made.get("key") == _once(("key", record), lambda: kind.key(record)):
        return _mislabelled(record, made, kind)
    code = made.get("code") if isinstance(made.get("code"), dict) else {}
    changed = [p for p, now in kind.code(record).items() if code.get(p) != now]
    if made.get("settings") != kind.settings(record):
        changed.append("its settings")
    why = f"{', '.join(changed)} changed since it was made" if changed else "made under another key"
    return f"{kind.noun} {record!r} is stale ({why}): {kind.fix(record)}"


ECHOED = ("shape", "dtype", "world_size", "rotate", "load_balance", "backend", "run")  # settings a record repeats


def _mislabelled(record, made, kind) -> str | None:
    """One line naming a setting a record repeats (ECHOED) that its name and key do not stand for; else None."""
    expected = kind.settings(record)
    for field_name in ECHOED:
        if field_name in made and field_name in expected and made[field_name] != expected[field_name]:
            return (f"{kind.noun} {record}.json says {field_name} {made[field_name]!r}, but its name and key stand "
                    f"for {expected[field_name]!r}: {kind.fix(record)}")
    return None


def _profiled_status(record, folder) -> str | None:
    """Present, current, with its trace, and read as its pages read it."""
    if why := _stale(record, folder):
        return why
    kind = kind_of(record)
    if kind in (STAGE, BACKWARD):
        parse_record(record.removesuffix("-bwd"))  # a bad name is one line naming the forms a name takes
    try:
        stored = _stored(record, folder)
    except (store.CaptureMissing, ValueError) as e:
        return str(e)
    if "unavailable" not in stored and not store.trace_path(folder, record).exists():
        return f"trace of {record!r} is missing ({store.trace_path(folder, record).name}): {kind.fix(record)}"
    load_summary(record, folder)
    return None


def _counters_status(name, folder) -> str | None:
    if why := _stale(name, folder):
        return why
    load_counters(name.removesuffix(".counters"), folder)
    return None


def _run_status(record, folder) -> str | None:
    if why := _stale(record, folder):
        return why
    load_run(record.removeprefix("run-"), folder)
    return None


# ---- the table ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Take:
    """What retaking a record of a kind needs beyond a CUDA GPU and PyTorch (`regenerate` reads it)."""
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
    sources: Callable[[str], tuple[str, ...]]  # the code it runs that keys it (relative to CODE_ROOT)
    settings: Callable[[str], dict]  # the settings hashed into its key
    stages: Callable[[str], list[str]]  # the stages whose code it runs (a provider among them must load to retake it)
    take: Take
    noun: str = "capture"  # what a message calls one record

    def key(self, record: str) -> str:
        """A record's key now: the token hash of the code and stage-table rows it runs, and its settings."""
        return make_key(source_hash_of(self.sources(record)) + row_hash(self.stages(record)), self.settings(record))

    def code(self, record: str) -> dict[str, str]:
        """Each hashed file's (section's, row's) hash, stored beside the key: a stale record names what changed."""
        return ({p: source_hash_of([p]) for p in self.sources(record)}
                | {f"the stage table's {s!r} row": row_hash([s]) for s in self.stages(record)})


def _stage_of(record: str) -> list[str]:
    return [parsed(record)[0]]


STAGE = Kind(
    name="stage", records=lambda: [record_name(s, shape) for s, shape in site_records()],
    owns=lambda r: not r.startswith(("cp-", "run-")) and not r.endswith(("-bwd", ".counters")),
    status=_profiled_status, fix=lambda r: f"run {capture_command(r)} on a CUDA GPU",
    sources=profiled_sources((PROFILED_LOOP,)), settings=lambda r: settings(*parsed(r)[1:]), stages=_stage_of,
    take=Take("take_stage"))
BACKWARD = Kind(
    name="backward", records=lambda: [backward_record(s) for s in select(backward=True)],
    owns=lambda r: r.endswith("-bwd"), status=_profiled_status,
    fix=lambda r: f"run `python -m attnprof capture --backward {r.removesuffix('-bwd')}` on a CUDA GPU",
    sources=profiled_sources((PROFILED_LOOP, BACKWARD_LOOP)), settings=lambda r: backward_settings(*parsed(r)[1:]),
    stages=_stage_of, take=Take("take_backward"))
CP = Kind(
    name="cp", records=lambda: [cp_record(n, CP_WORLD, r, b) for n, r, b in CP_CONFIGS],
    owns=lambda r: r.startswith("cp-"), status=_profiled_status,
    fix=lambda r: (f"run `python -m attnprof capture cp --world-size {CP_WORLD} --unbalanced` on a machine with "
                   f"{CP_WORLD} CUDA GPUs"),
    sources=lambda r: (), settings=lambda r: cp_settings(cp_config(r)[0], CP_WORLD, *cp_config(r)[1:]),
    stages=lambda r: [], take=Take("take_cp", gpus=CP_WORLD))
COUNTERS = Kind(
    name="counters", records=lambda: [f"{record_name(s, shape)}.counters" for s, shape in counter_records()],
    owns=lambda r: r.endswith(".counters"), status=_counters_status,
    fix=lambda r: f"run {capture_command(r.removesuffix('.counters'), 'counters')} on a CUDA GPU with Nsight Compute",
    sources=profiled_sources(()), settings=lambda r: counters_settings(*parsed(r)[1:]),
    stages=_stage_of, take=Take("take_counters", ncu=True, together=True), noun="counters record")
RUN = Kind(
    name="run", records=lambda: [f"run-{n}" for n in RUNS], owns=lambda r: r.startswith("run-"), status=_run_status,
    fix=lambda r: f"run `python -m attnprof sweep --only {r.removeprefix('run-')}` on a CUDA GPU",
    sources=lambda r: run_sources(r.removeprefix("run-")), settings=lambda r: run_settings(r.removeprefix("run-")),
    stages=lambda r: run_stages(r.removeprefix("run-")), take=Take("take_run"), noun="run record")
OWN = Kind(
    name="own", records=own.site_records, owns=lambda r: "." in r.split("-")[0] and not r.endswith(".counters"),
    status=_profiled_status, fix=own.recapture_fix, sources=lambda r: (own.target(r)[0], PROFILED_LOOP),
    settings=own.record_settings, stages=lambda r: [], take=Take("take_own"), noun="reader's capture")
KINDS = [OWN, STAGE, BACKWARD, CP, COUNTERS, RUN]  # the first whose `owns` matches is a record's kind


def kind_of(record: str) -> Kind:
    return next(k for k in KINDS if k.owns(record))


# what reading a missing or unexpected field raises: one line through `status`, never a traceback
UNREADABLE = (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError, StopIteration, AttributeError)


def status(record: str, folder=None) -> str | None:
    """None when `record` is usable; otherwise one line saying why not and what to run."""
    kind = kind_of(record)
    try:
        return kind.status(record, folder_of(record, folder))
    except store.CaptureMissing as e:
        return str(e)
    except UNREADABLE as e:
        return f"{kind.noun} {record}.json cannot be read ({unreadable(e)}): {kind.fix(record)}"


def unreadable(error: BaseException) -> str:
    """An error's one line: a missing field by its name (a KeyError of one word; the code's own KeyErrors
    are sentences), an exhausted list as such, otherwise its message's first line."""
    if isinstance(error, KeyError) and error.args and " " not in str(error.args[0]):
        return f"its field {error.args[0]!r} is missing"
    if isinstance(error, (StopIteration, IndexError)) and not str(error):
        return "a list it reads holds no such entry"
    return first_line(error) or type(error).__name__


def problems(folder=None, kinds=KINDS) -> dict[str, str]:
    """Every record the site reads that is missing, stale or unreadable, with why and the fix, and any taken on
    another GPU than most of its set (one GPU per set). Each file is read once (`reading`)."""
    folder = Path(folder or store.CAPTURES)
    with reading():
        found = {record: why for kind in kinds for record in kind.records() if (why := status(record, folder))}
        devices = {r: made["device"] for kind in kinds for r in kind.records()  # of this set's records
                   if r not in found and folder_of(r, folder) == folder
                   and "device" in (made := _json(store.summary_path(folder, r)))}
    if len(set(devices.values())) > 1:
        (most, n), = Counter(devices.values()).most_common(1)
        for r, device in devices.items():
            if device != most:
                found[r] = (f"{kind_of(r).noun} {r}.json was taken on {device}, the set's other {n} records on {most}: "
                            f"one GPU per set of records: {kind_of(r).fix(r)}")
    return found


def used_records(kinds=KINDS) -> set[str]:
    """Every record the site uses (of `kinds`)."""
    return {r for kind in kinds for r in kind.records()}


def site_record_count() -> dict[str, int]:
    return {kind.name: len(kind.records()) for kind in KINDS}
