"""Independent repeats of a measurement, each in a process of its own (a fresh CUDA context).

    python -m attnprof.measure.repeat MODULE.FUNCTION OUT_JSON [ARG ...]

runs `attnprof.measure.MODULE.FUNCTION(*ARGS)` and writes its result, as JSON, to OUT_JSON. `Started` starts
one such process per repeat, all at once; each starts CUDA and prepares (a generator FUNCTION: up to its first
`yield`), says it is ready and waits. Only when all are ready do they measure, one after the other, each
holding its GPU alone (gpulock.py), so none measures while another starts or compiles. A process whose log
does not grow for STALL_S seconds is stopped (SIGUSR1 first: faulthandler logs its stacks) and named in one
line, its log kept. A repeat measures the kernels, not their compilation: the repeats share this process's
compile caches (Inductor's, Triton's) and FlashAttention-4's on-disk cache of compiled kernels.
"""
from __future__ import annotations

import contextlib
import faulthandler
import importlib
import inspect
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import clock, gpulock
from ..model import store
from ..text import first_line

# a repeat silent this long has hung (the longest silence seen: a cold FlexAttention compile, ~30 s; a wait for
# the GPU says so every gpulock.WAIT_SAY_S); a regeneration's take waits longer (regenerate.TAKE_STALL_S)
STALL_S = 150.0
STOP_GRACE_S = 3.0  # between SIGUSR1 (the stack into the log) and SIGKILL
SAY_EVERY_S = 30.0  # a line while waiting on the repeats, so the log is never silent for long
LOG_DIR_ENV = "ATTNPROF_LOG_DIR"  # where the repeats' logs go under `regenerate` (kept when one hung)
READY = "attnprof-repeat: ready"
STARTED = time.time()  # when this process started: with its pid, which process a repeat was


def env() -> dict:
    cache = Path(tempfile.gettempdir()) / "attnprof-flash-attn4-cache"
    return dict(os.environ, PYTHONUNBUFFERED="1", FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED="1",
                FLASH_ATTENTION_CUTE_DSL_CACHE_DIR=str(cache))


def measured(function, *args, ready=lambda: None):
    """function(*args), measuring only after `ready()` returns: a generator prepares up to its `yield` first
    (overlapping the others' preparation); a plain function measures from its first line, so runs after."""
    if not inspect.isgeneratorfunction(function):
        ready()
        return function(*args)
    made = function(*args)
    next(made)  # prepared
    ready()
    try:
        next(made)
    except StopIteration as done:
        return done.value
    raise RuntimeError(f"{function.__name__} yields more than once: its one `yield` ends its preparation")


def watched(function, *args, ready=lambda: None, order: int = 0, what: str = "", alone: bool = True) -> tuple:
    """(`measured`'s result, this process's identity: pid, start, place in the order, when it measured, the
    GPU's state before and after). It holds the GPU alone unless `alone` is False (a run no neighbour moves, or
    whose own processes take the GPU), and quiet unless the function says `quiet = False`."""
    began = {}
    what = what or getattr(function, "__name__", "a measurement")
    with contextlib.ExitStack() as hold:
        def go():
            ready()
            if alone:
                hold.enter_context(gpulock.measuring(what, quiet=getattr(function, "quiet", None)))
            began.update(at=time.time(), gpu=clock.read())
        value = measured(function, *args, ready=go)
        ended = time.time(), clock.read()
    return value, {"pid": os.getpid(), "started": STARTED, "order": order, "measured": [began["at"], ended[0]],
                   "gpu": [began["gpu"], ended[1]]}


def stop(pid: int, why: str, log, what: str) -> str:
    """Stop a hung process (SIGUSR1: its stacks into its log; then SIGKILL) and say so; why, in a few words."""
    try:
        os.kill(pid, signal.SIGUSR1)
        time.sleep(STOP_GRACE_S)
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    print(f"-- stopped {what} (pid {pid}): {why}; its stack is in {log}", flush=True)
    return f"{why} and was stopped (its stack: {log})"


def _size(path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return -1


class Started:
    """`times` processes running `function` (MODULE.FUNCTION under measure/), started together; `ready()` waits
    for all, `results()` lets them measure one at a time (a context manager: stops any left). `first` is the
    first one's place in the order; `identities`, after `results()`, each one's (`watched`'s, None: failed);
    `what` names them in the log; `stopped` lists those stopped for making no progress (logs kept)."""

    def __init__(self, function: str, times: int, *args: str, first: int = 0, what: str = ""):
        self.folder = Path(tempfile.mkdtemp(prefix="attnprof-repeat-", dir=os.environ.get(LOG_DIR_ENV) or None))
        self.processes, self.why, self.first, self.identities = [], {}, first, []
        self.what, self.stopped = what or function, []
        for i in range(times):
            out, log = (self.folder / f"{i}.{ext}" for ext in ("json", "log"))
            with log.open("w") as err:
                self.processes.append((subprocess.Popen(
                    [sys.executable, "-m", __name__, function, str(out), *args], env=env(),
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err), out, log))
        self.begun = time.monotonic()

    def name(self, i: int) -> str:
        return f"{self.what} repeat {self.first + i}"

    def ready(self):
        """Wait until every process is ready to measure (or never will be), stopping any silent for STALL_S."""
        said = {i: b"" for i in range(len(self.processes)) if i not in self.why}
        last = {i: (time.monotonic(), _size(self.processes[i][2])) for i in said}
        told, quiet = time.monotonic(), gpulock.quieted()
        while said:
            streams = {self.processes[i][0].stdout.fileno(): i for i in said}
            for fd in select.select(list(streams), [], [], 1.0)[0]:
                i = streams[fd]
                more = os.read(fd, 65536)  # unbuffered: waiting for more never misses a line already read
                last[i] = (time.monotonic(), last[i][1])
                if not more:  # it ended before measuring: its log says why
                    print(said.pop(i).decode(errors="replace"), end="", flush=True)
                    self.why[i] = "" if self.processes[i][0].wait() else None
                    continue
                said[i] += more
                if said[i].endswith(READY.encode() + b"\n"):  # printed while preparing, then ready
                    print(said.pop(i).decode(errors="replace").removesuffix(READY + "\n"), end="", flush=True)
                    print(f"-- {self.name(i)}: ready in {time.monotonic() - self.begun:.0f} s", flush=True)
                    self.why[i] = None
            now, marked = time.monotonic(), gpulock.quieted()
            for i in list(said):
                process, _, log = self.processes[i]
                size = _size(log)
                if size != last[i][1] or marked != quiet:  # paused by a quiet measurement: waiting, not hung
                    last[i] = (now, size)
                elif now - last[i][0] > STALL_S:
                    said.pop(i)
                    self.why[i] = stop(process.pid, f"made no progress preparing for {STALL_S:.0f} s", log,
                                       self.name(i))
                    self.stopped.append(self.name(i))
            quiet = marked
            if said and now - told >= SAY_EVERY_S:
                told = now
                print(f"-- {self.what}: waiting {now - self.begun:.0f} s for "
                      f"{', '.join(self.name(i) for i in said)} to be ready", flush=True)

    def _measure(self, i: int) -> str | None:
        """Let process i measure and wait for it to end; why it failed to, where it was stopped."""
        process, _, log = self.processes[i]
        try:
            process.stdin.write(f"{self.first + i}\n".encode())  # go, and its place in the order
            process.stdin.close()
        except BrokenPipeError:  # it ended meanwhile: its log says why
            pass
        start = told = last = time.monotonic()
        size, quiet = _size(log), gpulock.quieted()
        while process.poll() is None:
            time.sleep(0.2)
            now, marked = time.monotonic(), gpulock.quieted()
            if _size(log) != size or marked != quiet:  # paused by a quiet measurement: waiting, not hung
                size, last, quiet = _size(log), now, marked
            elif now - last > STALL_S:
                self.stopped.append(self.name(i))
                why = stop(process.pid, f"made no progress measuring for {STALL_S:.0f} s", log, self.name(i))
                process.wait()
                return why
            if now - told >= SAY_EVERY_S:
                told = now
                print(f"-- {self.name(i)}: measuring, {now - start:.0f} s", flush=True)
        print(f"-- {self.name(i)}: measured, {time.monotonic() - start:.0f} s", flush=True)
        return None

    def results(self) -> list[dict]:
        """Each process's result, measured one at a time; one that failed is {"error": its last line}."""
        self.ready()
        results = []
        for i, (process, out, log) in enumerate(self.processes):
            why = self.why[i]
            if why is None and process.poll() is None:
                why = self._measure(i)
            lines = log.read_text(errors="replace").strip().splitlines()
            if lines:  # its log, after the fact: its "-- " lines were news when it wrote them, not now
                print("\n".join(("   " + l[3:]) if l.startswith("-- ") else l for l in lines), file=sys.stderr, flush=True)
            if not why:
                why = first_line(lines[-1]) if lines else f"exit status {process.returncode}"
            made = json.loads(out.read_text()) if out.exists() else {"result": {"error": why[:300]}, "process": None}
            results.append(made["result"])
            self.identities.append(made["process"])
        return results

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for process, _, _ in self.processes:
            if process.poll() is None:
                process.kill()
                process.wait()
        if not self.stopped:  # a stopped one's log keeps its stack
            shutil.rmtree(self.folder, ignore_errors=True)


def in_processes(function: str, times: int, *args: str) -> list[dict]:
    """The result of `function` in each of `times` fresh processes (see Started)."""
    with Started(function, times, *args) as started:
        return started.results()


def main(function: str, out: str, *args: str):
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)  # a hang's stack, into its log
    gpulock.pin(gpulock.PREPARE_CPUS_ENV)
    module, attribute = function.rsplit(".", 1)  # MODULE under attnprof/measure/, or a module's full name
    measure = getattr(importlib.import_module(module if "." in module else f"{__package__}.{module}"), attribute)
    if "torch" in sys.modules and sys.modules["torch"].cuda.is_available():
        sys.modules["torch"].empty(1, device="cuda")  # its CUDA context, made before any process measures

    order = []

    def ready():  # say so, then wait for its turn; from here on, what it prints goes to its log
        print(READY, flush=True)
        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
        order.append(int(sys.stdin.readline()))
    result, process = watched(measure, *args, ready=ready, what=f"{function} repeat")
    store.write_json(Path(out).parent, Path(out).stem, {"result": result, "process": process | {"order": order[0]}})


if __name__ == "__main__":
    main(*sys.argv[1:])
