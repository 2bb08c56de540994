"""Regenerate: retake every record the site reads that is stale (or every one), with all the GPUs here.

`python -m attnprof regenerate` and the build (ATTNPROF_RECAPTURE, site/hook.py) both come here. A record
needs its kind's `Take` (records.py): GPUs, Nsight Compute, the packages of any provider it runs; what this
machine cannot take is named in one line each. WORKERS_PER_GPU worker processes per GPU (measure/worker.py)
take the rest from one queue, longest first; a record needing several GPUs runs first, alone on all of them.
A GPU's workers never measure at once (measure/gpulock.py): while one measures, the others import, load
kernels and compile, on cores of their own. Stage records come first, in the table's order, all in each GPU's
slot-0 worker, whose empty compile caches make a stage's first call pay its compilation as a fresh `capture`
would. A kind taken together (counters: one Nsight Compute child for many) is one job per GPU. A worker whose
log does not grow for TAKE_STALL_S (counters: NCU_STALL_S) is stopped, its stacks written first (SIGUSR1),
and named in one line; its record keeps its capture. The workers' "-- " lines are relayed, so the output is
never silent for long. Nothing here imports torch: planning (and `--dry-run`) works without a GPU.
"""
from __future__ import annotations

import importlib.util
import json
import os
import queue
import select
import shutil
import signal
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
from .measure import gpulock
from .model.stages import STAGES
from .model.snippets import ROOT
from .text import first_line, short, text_table

# seconds a record of each kind takes, to hand out the longest first (a run record's own wall_s overrides)
ESTIMATE_S = {"run": 30.0, "cp": 60.0, "counters": 10.0, "backward": 6.0, "stage": 4.0, "own": 6.0}
# one measures while the others prepare; more would only wait for the GPU, each holding a context and compile pool
WORKERS_PER_GPU = 3
# a worker whose log does not grow this long has hung: every wait says so within it (gpulock.WAIT_SAY_S,
# repeat.SAY_EVERY_S; a hung repeat is stopped first, repeat.STALL_S); the longest silence seen is ~80 s
TAKE_STALL_S = 180.0
# Nsight Compute's child prints to its pipe, not the log, until it ends (~80 s, longer beside compiles)
NCU_STALL_S = 360.0
STOP_GRACE_S = 3.0  # between SIGUSR1 (the stacks into the logs) and SIGKILL
SAY_EVERY_S = 45.0  # a line of what is running when nothing else has been said for this long
slot = threading.local()  # which of its GPU's workers a queue thread feeds (run_jobs sets it)


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
    """This machine's CUDA GPUs (CUDA_VISIBLE_DEVICES's), Nsight Compute, providers; torch only where GPUs are."""
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
    """Where each job would run if the estimates hold (`--dry-run`): on the device that frees first, or all."""
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
             progress: Callable[[str], None] | None = None, per_device: int = 1) -> list[Result]:
    """Take every job: the several-GPU ones first, on all `devices`; then the rest from one queue, `per_device`
    threads per device (slot.index), stage records only in slot 0, before any other. `take(job, devices)` gives
    the outcome in a few words ("retaken", "failed: ..."); an exception is a failed outcome, not the end."""
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
    stages: queue.Queue[Job] = queue.Queue()
    pending: queue.Queue[Job] = queue.Queue()
    for job in [j for j in jobs if j.gpus <= 1]:
        (stages if job.kind == "stage" and per_device > 1 else pending).put(job)

    def worker(device, index):
        slot.index = index
        while True:
            job = None
            if index == 0:  # the stage records first, in the table's order, in a worker that took nothing else
                try:
                    job = stages.get_nowait()
                except queue.Empty:
                    pass
            if job is None:
                try:
                    job = pending.get_nowait()
                except queue.Empty:
                    return
            one(job, (device,))

    threads = [threading.Thread(target=worker, args=(d, i), daemon=True) for d in devices for i in range(per_device)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    order = {j.record: i for i, j in enumerate(jobs)}
    return sorted(results, key=lambda r: order[r.record])


def tree(pid: int, of: dict[int, int] | None = None) -> list[int]:
    """A process and every process under it."""
    return [pid, *gpulock.descendants(pid, of)]


def stop_tree(pid: int):
    """SIGUSR1 to a process and all under it (faulthandler logs each stack), then SIGKILL to all of them."""
    everyone = tree(pid)
    for sig in (signal.SIGUSR1, signal.SIGKILL):
        for p in everyone:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
        if sig == signal.SIGUSR1:
            time.sleep(STOP_GRACE_S)


class Workers:
    """A regeneration's worker processes (measure/worker.py): WORKERS_PER_GPU per GPU, kept between records,
    one of its own for a job on several GPUs. Each reads record names on stdin and answers a JSON line each on
    its own pipe; its output goes to its log in `log_dir`, whose "-- " lines are relayed through `say`."""

    module = "attnprof.measure.worker"  # what each worker runs (a test's fake speaks the same protocol)

    def __init__(self, out_dir, log_dir):
        self.out_dir, self.log_dir = Path(out_dir).resolve(), Path(log_dir)
        self.procs: dict[tuple, tuple[subprocess.Popen, object]] = {}
        self.lock = threading.Lock()
        self.say: Callable[[str], None] = print
        self.began = time.monotonic()
        self.began_at = time.time()  # the same moment on the clock the holds are written in
        self.said = time.monotonic()  # when the last line was said
        self.busy: dict[tuple, tuple[str, float]] = {}  # worker -> (record, its start)
        self.done = threading.Event()
        self.heartbeat = None
        measure_cpus, prepare_cpus = gpulock.split_cpus(os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity")
                                                        else range(os.cpu_count() or 1))
        self.cpus = {gpulock.MEASURE_CPUS_ENV: ",".join(map(str, measure_cpus)),
                     gpulock.PREPARE_CPUS_ENV: ",".join(map(str, prepare_cpus))}

    @staticmethod
    def name(key) -> str:
        devices, index = key
        return f"gpu{'-'.join(devices)}" + (f"-w{index}" if len(devices) == 1 else "")

    def log(self, devices, index: int = 0) -> Path:
        return self.log_dir / f"{self.name((devices, index))}.log"

    def tell(self, line: str):
        self.said = time.monotonic()
        self.say(f"[{self.said - self.began:5.0f} s] {line}")

    def pids(self, devices) -> Path:
        """These GPUs' workers' pids, one a line (gpulock.QUIET_ENV: whom a quiet measurement pauses)."""
        return self.log_dir / f"{self.name((devices, 0)).removesuffix('-w0')}.pids"

    def holds(self, devices) -> Path:
        """The file each stretch these GPUs were held for measuring is written to (gpulock.HOLDS_ENV)."""
        return self.pids(devices).with_suffix(".holds")

    def busy_text(self, devices, wall_s: float) -> str:
        """How much of the time these GPUs spent measuring, on what most, and a table of every take that held
        them by when it first did: what a shorter regeneration would have to cut."""
        total, by = gpulock.holds(self.holds(devices))
        top = sorted(by.items(), key=lambda kv: -kv[1])[:3]
        first, count = {}, {}
        for what, start, _ in gpulock.stretches(self.holds(devices)):
            first[what], count[what] = min(first.get(what, start), start), count.get(what, 0) + 1
        rows = [(what, f"{first[what] - self.began_at:.0f}", f"{by[what]:.1f}", str(count[what]))
                for what in sorted(first, key=first.get)]
        return (f"GPU {','.join(devices)}: held for measuring {total:.0f} s of {wall_s:.0f} s "
                f"({100 * total / max(wall_s, 1e-9):.0f} %); most by " + ", ".join(f"{w} {s:.0f} s" for w, s in top)
                + ("\n" + text_table(["held by", "first at s", "held s", "stretches"], rows) if rows else ""))

    def resume(self, devices, unless_marked_since: float | None = None):
        """SIGCONT to everything under these GPUs' workers, so that a killed quiet measurement leaves none
        paused; none where a quiet stretch has marked since `unless_marked_since` (it began meanwhile)."""
        with self.lock:
            roots = [proc.pid for (d, _), (proc, _) in self.procs.items() if d == devices]
        of = gpulock.parents()
        everyone = [p for r in roots for p in tree(r, of)]
        if unless_marked_since is None or gpulock.quieted(self.pids(devices)) == unless_marked_since:
            gpulock._signal(everyone, signal.SIGCONT)

    def _unpause(self, resumed: dict):
        """Let go (once a mark) what a quiet stretch paused, once its mark is older than gpulock.QUIET_MAX_S."""
        with self.lock:
            devices = {d for d, _ in self.procs}
        for d in devices:
            marked = gpulock.quieted(self.pids(d))
            if marked and marked != resumed.get(d) and time.time() - marked > gpulock.QUIET_MAX_S + 5:
                resumed[d] = marked
                self.resume(d, unless_marked_since=marked)

    def _start(self, devices, index: int = 0):
        read_fd, write_fd = os.pipe()
        path = [str(ROOT)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])
        cache = self.log_dir / f"{self.name((devices, index))}-caches"  # empty compile caches: a first call compiles
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=",".join(devices), PYTHONUNBUFFERED="1",
                   PYTHONPATH=os.pathsep.join(path), TORCHINDUCTOR_CACHE_DIR=str(cache / "inductor"),
                   TRITON_CACHE_DIR=str(cache / "triton"), ATTNPROF_LOG_DIR=str(self.log_dir), **self.cpus,
                   **{gpulock.QUIET_ENV: str(self.pids(devices)), gpulock.HOLDS_ENV: str(self.holds(devices))})
        env.pop(gpulock.HELD_ENV, None)
        with open(self.log(devices, index), "ab") as log:
            proc = subprocess.Popen([sys.executable, "-m", self.module, str(self.out_dir), str(write_fd)],
                                    stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
                                    pass_fds=(write_fd,), text=True)
        os.close(write_fd)
        live = [p.pid for (d, i), (p, _) in self.procs.items() if d == devices and i != index]  # a replaced one: gone
        self.pids(devices).write_text("".join(f"{pid}\n" for pid in live + [proc.pid]))
        return proc, os.fdopen(read_fd, "r")

    def start(self, devices: tuple[str, ...]):
        """Start these GPUs' missing workers (one for several GPUs), to import PyTorch while others work."""
        with self.lock:
            for index in range(1 if len(devices) > 1 else WORKERS_PER_GPU):
                if (devices, index) not in self.procs:
                    self.procs[(devices, index)] = self._start(devices, index)
            if self.heartbeat is None:
                self.heartbeat = threading.Thread(target=self._heartbeat, daemon=True)
                self.heartbeat.start()
            return self.procs[(devices, 0)]

    def _heartbeat(self):
        """Say what is running when nothing was said for SAY_EVERY_S; unpause what a quiet stretch left paused."""
        resumed = {}
        while not self.done.wait(5.0):
            self._unpause(resumed)
            if time.monotonic() - self.said >= SAY_EVERY_S:
                now = time.monotonic()
                with self.lock:
                    busy = [f"{self.name(k)} {record} ({now - t:.0f} s)" for k, (record, t) in sorted(self.busy.items())]
                self.tell("working: " + ("; ".join(busy) or "nothing"))

    def _relay(self, key, log: Path, offset: int) -> int:
        """Say the "-- " lines the worker's log gained since `offset`; the new offset."""
        try:
            with open(log, "rb") as f:
                f.seek(offset)
                more = f.read()
        except OSError:
            return offset
        complete = more[:more.rfind(b"\n") + 1]
        for line in complete.decode(errors="replace").splitlines():
            line = line.rsplit("\r", 1)[-1]  # past a progress bar's carriage returns
            if line.startswith("-- "):
                self.tell(f"{self.name(key)} {line[3:]}")
        return offset + len(complete)

    def take(self, job: Job, devices: tuple[str, ...]) -> str:
        key = (devices, getattr(slot, "index", 0) if len(devices) == 1 else 0)
        with self.lock:
            if key not in self.procs:
                self.procs[key] = self._start(*key)
            proc, answers = self.procs[key]
        log = self.log(*key)
        offset = log.stat().st_size if log.exists() else 0
        with self.lock:
            self.busy[key] = (job.record, time.monotonic())
        line, stalled = "", False
        limit = NCU_STALL_S if job.kind == "counters" else TAKE_STALL_S
        try:
            proc.stdin.write(json.dumps({"records": list(job.records)}) + "\n")
            proc.stdin.flush()
            last, size, quiet = time.monotonic(), offset, gpulock.quieted(self.pids(devices))
            while True:
                ready, _, _ = select.select([answers], [], [], 1.0)
                offset = self._relay(key, log, offset)
                if ready:
                    line = answers.readline()
                    break
                now, grown = time.monotonic(), log.stat().st_size if log.exists() else 0
                marked = gpulock.quieted(self.pids(devices))
                if grown != size or marked != quiet:  # a quiet measurement's pause is a wait, not a hang
                    last, size, quiet = now, grown, marked
                elif now - last > limit:
                    stalled = True
                    break
        except OSError:
            line = ""
        finally:
            with self.lock:
                self.busy.pop(key, None)
        if not line:  # the worker died (out of memory, a crash in a kernel) or hung: the next job gets a fresh one
            with self.lock:
                self.procs.pop(key, None)
            if stalled:
                stop_tree(proc.pid)
                self._relay(key, log, offset)
                self.tell(f"stopped {job.record}: worker {self.name(key)} (pid {proc.pid}) made no progress for "
                          f"{limit:.0f} s; its stack is in {log} (its repeats': {self.log_dir}/attnprof-repeat-*); "
                          f"the existing record is kept")
            else:
                proc.kill()
            proc.wait()
            answers.close()
            what = f"made no progress for {limit:.0f} s and was stopped" if stalled else "stopped"
            return f"failed: the worker {self.name(key)} (pid {proc.pid}) {what} (see {log})"
        if len(devices) > 1:  # a whole-machine process ends with its job, freeing the GPUs
            self.close(devices)
        return json.loads(line)["outcome"]

    def close(self, only=None):
        with self.lock:
            chosen = [k for k in self.procs if only is None or k[0] == only]
            procs = [self.procs.pop(k) for k in chosen]
        if only is None:
            self.done.set()
        for proc, _ in procs:  # none of them, nor what runs under them, left paused while they end
            gpulock._signal(tree(proc.pid), signal.SIGCONT)
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
    """The records `--skip` leaves out: each one the site uses, of the kinds chosen."""
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
    per_device = 1 if take is not None else WORKERS_PER_GPU
    say(f"retaking {len(jobs)} record(s) on {len(machine.gpus)} GPU(s) ({', '.join(machine.gpus)})"
        + (f", {per_device} workers each, one measuring at a time" if per_device > 1 else ""))
    workers = None
    start = time.monotonic()
    if take is None:
        log_dir = Path(tempfile.mkdtemp(prefix="attnprof-regenerate-"))
        say(f"the workers' logs: {log_dir}")
        workers = Workers(out_dir, log_dir)
        workers.say = say
        take = workers.take
        if any(job.gpus == 1 for job in jobs):  # started now: they import PyTorch while the first record is taken
            for device in machine.gpus:
                workers.start((device,))
        count = {"done": 0}

        def progress(label):  # one line per record, as it ends, with the seconds since the start
            count["done"] += 1
            say(f"[{time.monotonic() - start:5.0f} s] {count['done']}/{len(jobs)} {label}")
    else:
        from .measure.sweep import Progress  # a progress bar needs torch's side: this machine has a GPU
        progress = Progress(len(jobs), stream)
    stopped = _stop_on_term()
    try:
        done.results = run_jobs(jobs, machine.gpus, take, progress, per_device)
    except BaseException:  # stopped from outside (SIGTERM, Ctrl-C): no worker outlives the regeneration
        for proc, _ in list(getattr(workers, "procs", {}).values()):
            stop_tree(proc.pid)
        raise
    finally:
        if workers:
            workers.close()
        _stop_on_term(stopped)
    done.wall_s = time.monotonic() - start
    for device in machine.gpus if workers else ():
        say(workers.busy_text((device,), done.wall_s))
    done.left = {r: why for r in wanted if (why := records.status(r, out_dir))}
    if workers and any(not r.outcome.startswith(("retaken", "unavailable")) for r in done.results):
        say(f"what the measuring code printed: {workers.log_dir}")
    elif workers:
        shutil.rmtree(workers.log_dir, ignore_errors=True)
    return done


def _stop_on_term(previous=None):
    """Make SIGTERM (a `timeout`) stop the workers as Ctrl-C does; given what it returned, undo it. Main thread only."""
    if threading.current_thread() is not threading.main_thread():
        return None
    if previous is not None:
        signal.signal(signal.SIGTERM, previous[0])
        return None

    def end(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: a second one would break the stopping
        raise KeyboardInterrupt("SIGTERM")
    return (signal.signal(signal.SIGTERM, end),)


def summary(done: Regeneration, machine: Machine, total_s: float) -> str:
    """The regeneration in one line: what was taken, how it ended, and the seconds it took in all."""
    outcomes = [r.outcome for r in done.results]
    hung = sum("made no progress" in o for o in outcomes)
    ok = sum(o.startswith(("retaken", "unavailable", "kept")) for o in outcomes)
    return (f"regenerate: {len(outcomes)} record(s) taken on {len(machine.gpus)} GPU(s): {ok} retaken or kept, "
            f"{len(outcomes) - ok - hung} failed, {hung} stopped for making no progress; {len(done.left)} still not "
            f"usable; {done.wall_s:.0f} s taking them, {total_s:.0f} s in all")


def plan_text(jobs: list[Job], devices) -> str:
    """`--dry-run`: where each record is expected to run, and about how long it all takes."""
    placed = assign(jobs, devices)
    rows = [(job.record, job.kind, ",".join(on), f"{job.estimate_s:.0f}") for job, on in placed]
    load = {d: sum(j.estimate_s for j, on in placed if d in on) for d in devices}
    return (text_table(["record", "kind", "GPU", "estimated s"], rows)
            + f"\nabout {max(load.values()):.0f} s on {len(devices)} GPU(s), by the estimates; the queue hands "
              f"each GPU the next record when it frees")
