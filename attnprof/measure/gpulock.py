"""One measurement at a time on a GPU, machine-wide: `with measuring("run-timing"):` around every section
whose numbers the GPU's being alone decides (a run's measuring part, repeat.py `watched`; a capture, a
counters take, worker.py).

The lock is an flock on a file in tempfile.gettempdir() named by the GPU's PCI bus id: every process that
measures on that GPU takes turns, and one that dies lets go with its file descriptors. Only other
processes' preparation (imports, kernel loading, compiles) overlaps a measurement.

- Re-entrant; a child started under its parent's hold (Nsight Compute, steady's repeats) measures under it
  (HELD_ENV).
- Under `regenerate` (MEASURE_CPUS_ENV, PREPARE_CPUS_ENV) a process measures on cores of its own and
  prepares on the others, so a neighbour's compile never moves CPU-timed numbers by running on its cores.
- Cores still share caches, the memory bus and clock boost (and a VM's unseen cores), so with QUIET_ENV a
  CPU-timed measurement also pauses (SIGSTOP) every other process sharing its GPU, its own ancestors and
  descendants aside, until it ends or lets go, at most QUIET_MAX_S (a paused process may hold a lock it
  waits for). Watchdogs read `quieted()` as progress, since a paused process prints nothing.
- With HOLDS_ENV each stretch the GPU was held is written down as it ends (`holds`).
- A process waiting for the lock names the holder every WAIT_SAY_S seconds: a wait is not a hang.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

HELD_ENV = "ATTNPROF_GPU_LOCK_HELD"  # set while held: a process started then measures under this hold
ID_ENV = "ATTNPROF_GPU_ID"  # the GPU's id, where the caller knows it better (tests: a fake GPU)
MEASURE_CPUS_ENV, PREPARE_CPUS_ENV = "ATTNPROF_MEASURE_CPUS", "ATTNPROF_PREPARE_CPUS"  # "0,1,2,3"
QUIET_ENV = "ATTNPROF_QUIET_PIDS"  # a file of the pids of the processes sharing this GPU (its workers), one a line
HOLDS_ENV = "ATTNPROF_GPU_HOLDS"  # a file each hold is written to as it ends: "what<TAB>start<TAB>end" (time.time())
QUIET_MAX_S = 40.0
WAIT_SAY_S = 30.0
POLL_S = 0.05

_held = {"depth": 0, "file": None, "what": "", "quiet": False, "paused": None, "since": 0.0}


def gpu_id() -> str:
    """This process's GPU's PCI bus id (unique on the machine), or "none"; asks torch only if imported."""
    if os.environ.get(ID_ENV):
        return os.environ[ID_ENV]
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_available():
            p = torch.cuda.get_device_properties(torch.cuda.current_device())
            return f"{p.pci_domain_id:08x}-{p.pci_bus_id:02x}-{p.pci_device_id:02x}"
    except Exception:
        pass
    return "none"


def path() -> Path:
    return Path(tempfile.gettempdir()) / f"attnprof-gpu-{gpu_id()}.lock"


def _cpus(env: str) -> set[int] | None:
    text = os.environ.get(env, "")
    return {int(c) for c in text.split(",") if c.strip()} or None


def pin(env: str, also: str | None = None):
    """Every thread of this process onto the cores `env` (and `also`) names (nothing when it names none)."""
    cpus = (_cpus(env) or set()) | ((_cpus(also) or set()) if also else set())
    if not cpus or not hasattr(os, "sched_setaffinity"):
        return
    try:
        threads = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        threads = [0]
    for tid in threads:
        try:
            os.sched_setaffinity(tid, cpus)
        except OSError:  # a thread that ended meanwhile
            pass


def holder() -> str:
    try:
        return path().read_text().strip() or "another process"
    except OSError:
        return "another process"


def _acquire(what: str):
    file = open(path(), "a+")
    start = said = time.monotonic()
    while True:
        try:
            fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            time.sleep(POLL_S)
            if time.monotonic() - said >= WAIT_SAY_S:
                said = time.monotonic()
                print(f"-- {what}: waiting {said - start:.0f} s for GPU {gpu_id()}, measuring: {holder()}", flush=True)
    file.seek(0)
    file.truncate()
    file.write(f"{what} (pid {os.getpid()})\n")
    file.flush()
    _held["since"] = time.time()
    return file


def _let_go(file, what: str):
    """Unlock the GPU, writing down the stretch it was held (HOLDS_ENV)."""
    fcntl.flock(file, fcntl.LOCK_UN)
    file.close()
    if os.environ.get(HOLDS_ENV):
        try:
            with open(os.environ[HOLDS_ENV], "a") as f:  # one short line, appended at once
                f.write(f"{what.replace(chr(9), ' ')}\t{_held['since']:.3f}\t{time.time():.3f}\n")
        except OSError:
            pass


def stretches(path_: str | os.PathLike) -> list[tuple[str, float, float]]:
    """From a HOLDS_ENV file: each stretch the GPU was held, (what held it, start, end) in time.time()."""
    try:
        lines = Path(path_).read_text().splitlines()
    except OSError:
        lines = []
    out = []
    for line in lines:
        try:
            what, start, end = line.rsplit("\t", 2)
            out.append((what, float(start), float(end)))
        except ValueError:  # a line torn by a process killed while writing it
            continue
    return out


def holds(path_: str | os.PathLike) -> tuple[float, dict[str, float]]:
    """From a HOLDS_ENV file: the seconds the GPU was held in all, and by what was held."""
    by: dict[str, float] = {}
    for what, start, end in stretches(path_):
        by[what] = by.get(what, 0.0) + end - start
    return sum(by.values()), by


def parents() -> dict[int, int]:
    """Every process on the machine and its parent, from /proc (empty where there is none)."""
    out = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return out
    for name in entries:
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    stat = f.read()
                out[int(name)] = int(stat[stat.rindex(")") + 2:].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    return out


def descendants(pid: int, of: dict[int, int] | None = None) -> list[int]:
    """Every process under `pid` (its repeats, an Nsight Compute child, compile workers)."""
    children = {}
    for child, parent in (parents() if of is None else of).items():
        children.setdefault(parent, []).append(child)
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def neighbours() -> list[int]:
    """Whom a quiet measurement pauses: QUIET_ENV's pids and all under them, but this process's own line."""
    try:
        roots = [int(p) for p in Path(os.environ[QUIET_ENV]).read_text().split()]
    except (KeyError, OSError, ValueError):
        return []
    of, me = parents(), os.getpid()
    mine, up = {me, *descendants(me, of)}, of.get(me)
    while up:
        mine.add(up)
        up = of.get(up)
    return [p for root in roots for p in [root, *descendants(root, of)] if p not in mine]


def quieted(pids_file: str | None = None) -> float:
    """When (time.time()) a quiet measurement on this GPU last began or ended (a watchdog's progress); 0: never."""
    try:
        return os.stat(f"{pids_file or os.environ[QUIET_ENV]}.quiet").st_mtime
    except (KeyError, OSError):
        return 0.0


def _mark():
    try:
        Path(f"{os.environ[QUIET_ENV]}.quiet").touch()
    except (KeyError, OSError):
        pass


def _signal(pids, sig) -> list[int]:
    sent = []
    for pid in pids:
        try:
            os.kill(pid, sig)
            sent.append(pid)
        except (ProcessLookupError, PermissionError):
            pass
    return sent


def _pause():
    """Pause the neighbours for one quiet stretch (at most QUIET_MAX_S); nothing where there are none."""
    _mark()  # first: a regeneration that is letting paused processes go sees a stretch begin (regenerate.resume)
    paused = _signal(neighbours(), signal.SIGSTOP)
    if not paused:
        return None
    timer = threading.Timer(QUIET_MAX_S, _signal, (paused, signal.SIGCONT))
    timer.daemon = True
    timer.start()
    return paused, timer


def _resume(paused):
    if paused:
        paused[1].cancel()
        _signal(paused[0], signal.SIGCONT)
        _mark()


@contextlib.contextmanager
def measuring(what: str, cpu_timed: bool = True, quiet: bool | None = None):
    """Hold this GPU alone for a measurement, on the measuring cores, and quiet unless `quiet` says otherwise,
    where it times anything on the CPU (`cpu_timed`); on every core where not (Nsight Compute's child)."""
    if _held["depth"]:
        _held["depth"] += 1
        try:
            yield
        finally:
            _held["depth"] -= 1
        return
    inherited = bool(os.environ.get(HELD_ENV))
    file = None if inherited else _acquire(what)
    quiet = cpu_timed if quiet is None else quiet
    _held.update(depth=1, file=file, what=what, quiet=quiet and not inherited,
                 paused=_pause() if quiet and not inherited else None)
    os.environ[HELD_ENV] = os.environ.get(HELD_ENV) or str(os.getpid())
    pin(MEASURE_CPUS_ENV, also=None if cpu_timed else PREPARE_CPUS_ENV)
    try:
        yield
    finally:
        _resume(_held["paused"])
        pin(PREPARE_CPUS_ENV)
        file = _held["file"]  # `released` may have taken the GPU again through another file
        _held.update(depth=0, file=None, what="", paused=None)
        if not inherited:
            os.environ.pop(HELD_ENV, None)
            _let_go(file, what)


@contextlib.contextmanager
def released():
    """Inside `measuring`: let go of the GPU while nothing is measured (a compile), then take it again; nothing
    under a parent's hold."""
    file, what = _held["file"], _held["what"]
    if file is None:
        yield
        return
    depth = _held["depth"]
    _resume(_held["paused"])
    pin(PREPARE_CPUS_ENV)
    os.environ.pop(HELD_ENV, None)
    _let_go(file, what)
    _held.update(depth=0, file=None, paused=None)
    try:
        yield
    finally:
        _held.update(depth=depth, file=_acquire(what), what=what)
        _held["paused"] = _pause() if _held.get("quiet") else None
        os.environ[HELD_ENV] = str(os.getpid())
        pin(MEASURE_CPUS_ENV)


TOPOLOGY = Path("/sys/devices/system/cpu")  # cpuN/topology/thread_siblings_list: the threads of one core


def siblings(cpu: int, topology: Path | None = None) -> set[int]:
    """The hardware threads of `cpu`'s core, itself included (itself alone where Linux cannot say)."""
    try:
        text = ((topology or TOPOLOGY) / f"cpu{cpu}" / "topology" / "thread_siblings_list").read_text().strip()
    except OSError:
        return {cpu}
    out = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out |= set(range(int(lo), int(hi or lo) + 1))
    return out | {cpu}


def split_cpus(cpus, topology: Path | None = None) -> tuple[list[int], list[int]]:
    """The cores split: whole cores, a quarter (at least 2), to measure on, their other threads left idle so
    no compile shares one; the rest to prepare on. All to both where there are fewer than 8."""
    cpus = sorted(cpus)
    if len(cpus) < 8:
        return cpus, cpus
    cores = []  # each core's threads among `cpus`, in the order of their first thread
    for cpu in cpus:
        if not any(cpu in core for core in cores):
            cores.append(sorted(siblings(cpu, topology) & set(cpus)))
    n = max(2, len(cpus) // 4)
    measure, taken = [], 0
    for core in reversed(cores):  # the last cores, as many threads' worth as a quarter of them
        if taken >= n:
            break
        measure.append(core[0])
        taken += len(core)
    idle = {c for core in cores if core[0] in measure for c in core}
    return sorted(measure), [c for c in cpus if c not in idle]
