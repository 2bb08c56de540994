"""Regenerate: retake every record the site reads that is stale (or every one), with all the GPUs here.

`python -m attnprof regenerate` and the build (ATTNPROF_RECAPTURE, site/hook.py) both come here. What a
record needs is its kind's `Take` (records.py): one GPU for forward, backward and run records, Nsight
Compute for counters, CP_WORLD GPUs for context parallelism, and the packages of any provider it runs.
What this machine cannot take is named in one line each; the rest is taken by one worker process per GPU
(attnprof/measure/worker.py, CUDA_VISIBLE_DEVICES set), each taking the next record from one queue, the
longest first; a record that needs several GPUs runs first, alone, on all of them. Stage records come
before the rest, in the table's order, and each worker starts with empty compile caches: a stage's first
call then pays its compilation, as it would in a fresh `python -m attnprof capture`. The records of a kind
taken together (counters: one Nsight Compute child starts once for many records) are one job per GPU. Nothing here imports
torch: planning (and `--dry-run`) works on a machine without a GPU.
"""
from __future__ import annotations

import importlib.util
import json
import os
import queue
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .model import store
from .analysis import records
from .model.stages import STAGES
from .model.snippets import ROOT
from .text import first_line, short, text_table

# seconds a record of each kind takes, to hand out the longest first (a run record's own wall_s, where
# it has one, is used instead)
ESTIMATE_S = {"run": 30.0, "cp": 60.0, "counters": 10.0, "backward": 6.0, "stage": 4.0, "own": 6.0}
TAKE_TIMEOUT_S = 1800.0  # one record that takes longer has hung: its worker is stopped, the others go on


@dataclass(frozen=True)
class Machine:
    """What this machine offers to retake records."""
    gpus: tuple[str, ...] = ()  # CUDA device ids a worker may be given
    ncu: str | None = None  # Nsight Compute
    missing: frozenset[str] = frozenset()  # provider packages (import names) not installed here
    no_gpu: str = "needs a CUDA GPU, and this machine has none"  # why nothing can be taken without GPUs


def _nvidia_gpus() -> list[str]:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, line in enumerate(out.splitlines()) if line.startswith("GPU ")]


def detect() -> Machine:
    """This machine: its CUDA GPUs (as CUDA_VISIBLE_DEVICES lists them, if set), Nsight Compute, providers.
    PyTorch is imported only where nvidia-smi shows a GPU."""
    needs = {p for s in STAGES.values() for p in s.needs}
    missing = frozenset(p for p in needs if importlib.util.find_spec(p) is None)
    ncu = shutil.which("ncu")
    gpus = _nvidia_gpus()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        gpus = [g.strip() for g in visible.split(",") if g.strip()] if gpus else []
    if not gpus:
        return Machine((), ncu, missing)
    if importlib.util.find_spec("torch") is None:
        return Machine((), ncu, missing, "needs PyTorch, which is not installed here: pip install -e '.[measure]'")
    import torch
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        return Machine((), ncu, missing, f"needs a CUDA build of PyTorch, and torch {torch.__version__} here has none")
    return Machine(tuple(gpus[:count]), ncu, missing)


def why_not(record: str, machine: Machine) -> str | None:
    """None when this machine can retake `record`; otherwise why not, in a few words."""
    kind = records.kind_of(record)
    if not machine.gpus:
        return machine.no_gpu
    if len(machine.gpus) < kind.take.gpus:
        return f"needs {kind.take.gpus} CUDA GPUs, and this machine has {len(machine.gpus)}"
    if kind.take.ncu and not machine.ncu:
        return "needs Nsight Compute (`ncu` on PATH), and this machine has none"
    for name in kind.stages(record):
        lacking = [p for p in STAGES[name].needs if p in machine.missing]
        if lacking:
            return f"runs {name} ({STAGES[name].provider}), and {', '.join(lacking)} is not installed here"
    return None


@dataclass
class Job:
    record: str  # the record it takes; for several taken together, a label naming them
    kind: str
    gpus: int  # GPUs it holds; more than one: all of them, with nothing else running
    estimate_s: float
    together: tuple[str, ...] = ()  # the records, where one take takes several (a kind's Take.together)

    @property
    def records(self) -> tuple[str, ...]:
        return self.together or (self.record,)


@dataclass
class Result:
    record: str
    kind: str
    devices: tuple[str, ...] = ()
    seconds: float | None = None
    outcome: str = ""
    start: float = 0.0  # time.monotonic() at the start and the end of its take
    end: float = 0.0


def _estimate(record: str, kind: str, folder) -> float:
    if kind == "run":
        try:
            return float(json.loads(store.summary_path(folder, record).read_text())["wall_s"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
    return ESTIMATE_S[kind]


def plan(wanted: list[str], machine: Machine, folder=None) -> tuple[list[Job], dict[str, str]]:
    """The jobs this machine can take, longest first, and why each other record cannot be taken here."""
    folder = folder or store.CAPTURES
    jobs, cannot, together = [], {}, {}
    for record in wanted:
        why = why_not(record, machine)
        if why:
            cannot[record] = why
            continue
        kind = records.kind_of(record)
        if kind.take.together:
            together.setdefault(kind.name, []).append(record)
            continue
        jobs.append(Job(record, kind.name, kind.take.gpus, _estimate(record, kind.name, folder)))
    for name, group in together.items():  # one take per GPU, each of its share of the records
        share = min(len(machine.gpus), len(group))
        for chunk in (tuple(group[i::share]) for i in range(share)):
            label = chunk[0] if len(chunk) == 1 else f"{len(chunk)} {name} records"
            jobs.append(Job(label, name, 1, sum(_estimate(r, name, folder) for r in chunk), chunk))
    # the whole-machine ones first; then the stage records in the table's order, so that a stage's first
    # call compiles it in its worker (no run or backward has compiled it there before); then longest first
    order = {r: i for i, r in enumerate(records.STAGE.records())}
    jobs.sort(key=lambda j: (j.gpus == 1, j.kind != "stage", order.get(j.record, 0), -j.estimate_s))
    return jobs, cannot


def assign(jobs: list[Job], devices) -> list[tuple[Job, tuple[str, ...]]]:
    """Where each job is expected to run, as the queue hands them out when the estimates hold (for
    `--dry-run`): a whole-machine job on every device, each other job on the device that frees first."""
    free = {d: 0.0 for d in devices}
    out = []
    for job in jobs:
        if job.gpus > 1:
            out.append((job, tuple(devices)))
            start = max(free.values())
            free = {d: start + job.estimate_s for d in devices}
            continue
        device = min(free, key=free.get)
        free[device] += job.estimate_s
        out.append((job, (device,)))
    return out


def run_jobs(jobs: list[Job], devices, take: Callable[[Job, tuple[str, ...]], str],
             progress: Callable[[str], None] | None = None) -> list[Result]:
    """Take every job: those that hold several GPUs first, one at a time on all `devices`; then the
    others from one queue, one thread per device, each taking the next job as soon as its device is
    free. `take(job, devices)` returns the outcome in a few words ("retaken", "failed: ..."); an
    exception is a failed outcome, not the end of the others."""
    devices = tuple(devices)
    lock = threading.Lock()
    results: list[Result] = []

    def one(job, on):
        start = time.monotonic()
        try:
            outcome = take(job, on)
        except Exception as e:  # one record that breaks costs no other record its take
            outcome = f"failed: {type(e).__name__}: {first_line(e)}"
        end = time.monotonic()
        with lock:
            results.append(Result(job.record, job.kind, on, end - start, outcome, start, end))
            if progress:
                progress(f"{job.record}: {outcome.split(':')[0]}")

    for job in [j for j in jobs if j.gpus > 1]:
        one(job, devices)
    pending: queue.Queue[Job] = queue.Queue()
    for job in [j for j in jobs if j.gpus <= 1]:
        pending.put(job)

    def worker(device):
        while True:
            try:
                job = pending.get_nowait()
            except queue.Empty:
                return
            one(job, (device,))

    threads = [threading.Thread(target=worker, args=(d,), daemon=True) for d in devices]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    order = {j.record: i for i, j in enumerate(jobs)}
    return sorted(results, key=lambda r: order[r.record])


class Workers:
    """The worker processes of one regeneration (attnprof/measure/worker.py): one per GPU, started when
    its first record comes and kept for the next; a job on several GPUs gets a process of its own. Each
    is handed record names on stdin and answers one JSON line per record on a pipe of its own; what the
    measuring code prints goes to its log in `log_dir`."""

    def __init__(self, out_dir, log_dir):
        self.out_dir, self.log_dir = Path(out_dir).resolve(), Path(log_dir)
        self.procs: dict[tuple[str, ...], tuple[subprocess.Popen, object]] = {}
        self.lock = threading.Lock()

    def log(self, devices) -> Path:
        return self.log_dir / f"gpu{'-'.join(devices)}.log"

    def _start(self, devices):
        read_fd, write_fd = os.pipe()
        path = [str(ROOT)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])
        cache = self.log_dir / f"gpu{'-'.join(devices)}-caches"  # empty compile caches: a first call compiles
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=",".join(devices), PYTHONUNBUFFERED="1",
                   PYTHONPATH=os.pathsep.join(path), TORCHINDUCTOR_CACHE_DIR=str(cache / "inductor"),
                   TRITON_CACHE_DIR=str(cache / "triton"))
        with open(self.log(devices), "ab") as log:
            proc = subprocess.Popen([sys.executable, "-m", "attnprof.measure.worker", str(self.out_dir), str(write_fd)],
                                    stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
                                    pass_fds=(write_fd,), text=True)
        os.close(write_fd)
        return proc, os.fdopen(read_fd, "r")

    def start(self, devices: tuple[str, ...]):
        """A worker on these GPUs, if none is running (it imports PyTorch while others work)."""
        with self.lock:
            if devices not in self.procs:
                self.procs[devices] = self._start(devices)
            return self.procs[devices]

    def take(self, job: Job, devices: tuple[str, ...]) -> str:
        proc, answers = self.start(devices)
        try:
            proc.stdin.write(json.dumps({"records": list(job.records)}) + "\n")
            proc.stdin.flush()
            ready, _, _ = select.select([answers], [], [], TAKE_TIMEOUT_S)
            line = answers.readline() if ready else ""
        except OSError:
            line, ready = "", True
        if not line:  # the worker died (out of memory, a crash in a kernel) or hung: the next job gets a fresh one
            with self.lock:
                self.procs.pop(devices, None)
            proc.kill()
            what = "stopped" if ready else f"gave no answer in {TAKE_TIMEOUT_S:.0f} s and was stopped"
            return f"failed: the worker on GPU {','.join(devices)} {what} (see {self.log(devices)})"
        if len(devices) > 1:  # a whole-machine process ends with its job, freeing the GPUs
            self.close(devices)
        return json.loads(line)["outcome"]

    def close(self, only=None):
        with self.lock:
            chosen = [d for d in self.procs if only is None or d == only]
            procs = [self.procs.pop(d) for d in chosen]
        for proc, answers in procs:
            try:
                proc.stdin.close()
                proc.wait(timeout=120)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
            answers.close()


def wanted_records(kinds=None, every=False, folder=None) -> list[str]:
    """The records of `kinds` (names; all kinds when None) to retake: every one, or those not usable now."""
    chosen = [k for k in records.KINDS if kinds is None or k.name in kinds]
    if every:
        return [r for k in chosen for r in k.records()]
    return list(records.problems(folder, kinds=chosen))


def parse_kinds(text: str | None) -> list[str] | None:
    if not text:
        return None
    names = [n.strip() for n in text.split(",") if n.strip()]
    known = [k.name for k in records.KINDS]
    bad = [n for n in names if n not in known]
    if bad or not names:
        raise ValueError(f"bad --only {text!r}: give record kinds, comma-separated, from {', '.join(known)}")
    return names


def parse_skip(text: str | None, kinds: list[str] | None = None) -> set[str]:
    """The records `--skip` leaves out (say, the sweep, to take it in a call of its own): each one the site
    uses, of the kinds chosen."""
    names = {n.strip() for n in (text or "").split(",") if n.strip()}
    used = records.used_records([k for k in records.KINDS if kinds is None or k.name in kinds])
    if bad := sorted(names - used):
        raise ValueError(f"bad --skip {text!r}: {', '.join(bad)} {'is not a record' if len(bad) == 1 else 'are not records'} "
                         f"the site uses{' of ' + ', '.join(kinds) if kinds else ''} (`python -m attnprof check` counts them by kind)")
    return names


def table(results: list[Result], cannot: dict[str, str]) -> str:
    rows = [(r.record, r.kind, ",".join(r.devices), f"{r.seconds:.1f}", short(r.outcome, 90)) for r in results]
    rows += [(record, records.kind_of(record).name, "-", "-", short(f"not taken: {why}", 90))
             for record, why in cannot.items()]
    return text_table(["record", "kind", "GPU", "seconds", "outcome"], rows)


@dataclass
class Regeneration:
    results: list[Result] = field(default_factory=list)
    cannot: dict[str, str] = field(default_factory=dict)
    wall_s: float = 0.0
    left: dict[str, str] = field(default_factory=dict)  # wanted records still unusable afterwards, with why


def regenerate(wanted: list[str], out_dir=None, machine: Machine | None = None, take=None,
               say: Callable[[str], None] = print, stream=None) -> Regeneration:
    """Retake `wanted` with what this machine has; say (one line each) what it cannot take, and why."""
    out_dir = Path(out_dir or store.CAPTURES)
    machine = machine or detect()
    jobs, cannot = plan(wanted, machine, out_dir)
    for record, why in cannot.items():
        say(f"cannot retake {record} here: {why}; {records.kind_of(record).fix(record)}")
    done = Regeneration(cannot=cannot)
    if not jobs:
        done.left = {r: why for r in wanted if (why := records.status(r, out_dir))}
        return done
    say(f"retaking {len(jobs)} record(s) on {len(machine.gpus)} GPU(s) ({', '.join(machine.gpus)})")
    workers = None
    if take is None:
        log_dir = Path(tempfile.mkdtemp(prefix="attnprof-regenerate-"))
        workers = Workers(out_dir, log_dir)
        take = workers.take
        if any(job.gpus == 1 for job in jobs):  # one per GPU, started now: a record's seconds are its own
            for device in machine.gpus:
                workers.start((device,))
    from .measure.sweep import Progress  # a progress bar needs torch's side: this machine has a GPU
    progress = Progress(len(jobs), stream)
    start = time.monotonic()
    try:
        done.results = run_jobs(jobs, machine.gpus, take, progress)
    finally:
        if workers:
            workers.close()
    done.wall_s = time.monotonic() - start
    done.left = {r: why for r in wanted if (why := records.status(r, out_dir))}
    if workers and any(not r.outcome.startswith(("retaken", "unavailable")) for r in done.results):
        say(f"what the measuring code printed: {workers.log_dir}")
    elif workers:
        shutil.rmtree(workers.log_dir, ignore_errors=True)
    return done


def plan_text(jobs: list[Job], devices) -> str:
    """`--dry-run`: where each record is expected to run, and about how long it all takes."""
    placed = assign(jobs, devices)
    rows = [(job.record, job.kind, ",".join(on), f"{job.estimate_s:.0f}") for job, on in placed]
    load = {d: sum(j.estimate_s for j, on in placed if d in on) for d in devices}
    return (text_table(["record", "kind", "GPU", "estimated s"], rows)
            + f"\nabout {max(load.values()):.0f} s on {len(devices)} GPU(s), by the estimates; the queue hands "
              f"each GPU the next record when it frees")
