"""Independent repeats of a measurement, each in a process of its own (a fresh CUDA context).

    python -m attnprof.measure.repeat MODULE.FUNCTION OUT_JSON [ARG ...]

runs `attnprof.measure.MODULE.FUNCTION(*ARGS)` and writes its result, as JSON, to OUT_JSON. `Started`
starts one such process per repeat, all at once: each imports what it needs and starts CUDA, and where
FUNCTION is a generator, runs it to its first `yield` (the preparation: inputs, loading, compiling).
Then each says it is ready and waits; only when every one is ready do they measure, one after the other,
so no process measures while another one starts or compiles. What the measuring code prints goes to
this process's output (a regeneration's log). A repeat measures the kernels, not their compilation: the
repeats share this process's compile caches (Inductor's and Triton's folders, as the environment names
them) and FlashAttention-4's on-disk cache of compiled kernels.
"""
from __future__ import annotations

import importlib
import inspect
import json
import os
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..model import store
from ..text import first_line

TIMEOUT_S = 600  # one repeat that takes longer to get ready, or to measure, has hung
READY = "attnprof-repeat: ready"
STARTED = time.time()  # when this process started: with its pid, which process a repeat was


def gpu_state() -> dict | None:
    """The GPU's SM and memory clocks (MHz), the SM clock's maximum, its temperature (°C), power (W) and
    the reasons its clocks are held down (NVML's bitmask) now; None where NVML cannot say (no GPU, no
    nvidia-ml-py). Read just before and just after a process measures, so a record shows the clock its
    samples were taken at."""
    try:
        import pynvml
        import torch
        pynvml.nvmlInit()
        p = torch.cuda.get_device_properties(torch.cuda.current_device())
        gpu = pynvml.nvmlDeviceGetHandleByPciBusId(f"{p.pci_domain_id:08x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0")
    except Exception:
        return None
    reads = {"sm_mhz": lambda: pynvml.nvmlDeviceGetClockInfo(gpu, pynvml.NVML_CLOCK_SM),
             "max_sm_mhz": lambda: pynvml.nvmlDeviceGetMaxClockInfo(gpu, pynvml.NVML_CLOCK_SM),
             "memory_mhz": lambda: pynvml.nvmlDeviceGetClockInfo(gpu, pynvml.NVML_CLOCK_MEM),
             "temperature_c": lambda: pynvml.nvmlDeviceGetTemperature(gpu, pynvml.NVML_TEMPERATURE_GPU),
             "power_w": lambda: pynvml.nvmlDeviceGetPowerUsage(gpu) / 1000,
             "throttle_reasons": lambda: (getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
                                          or pynvml.nvmlDeviceGetCurrentClocksThrottleReasons)(gpu)}
    state = {}
    for name, read in reads.items():
        try:
            state[name] = read()
        except Exception:  # a query this GPU or its driver refuses
            state[name] = None
    return state


def env() -> dict:
    cache = Path(tempfile.gettempdir()) / "attnprof-flash-attn4-cache"
    return dict(os.environ, PYTHONUNBUFFERED="1", FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED="1",
                FLASH_ATTENTION_CUTE_DSL_CACHE_DIR=str(cache))


def measured(function, *args, ready=lambda: None):
    """function(*args), where measuring starts only after `ready()` returns (say, once other processes are
    ready too): a generator function prepares up to its `yield` first, so its preparation (loading,
    compiling) may overlap the others'; a plain function measures from its first line, so it is called after."""
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


def watched(function, *args, ready=lambda: None, order: int = 0) -> tuple:
    """function(*args), measured as `measured` measures it, and this process's identity beside its result:
    its pid and start, its place in the order the processes measured in, when it measured, and the
    GPU's state as it began and as it ended (gpu_state)."""
    began = {}

    def go():
        ready()
        began.update(at=time.time(), gpu=gpu_state())
    value = measured(function, *args, ready=go)
    return value, {"pid": os.getpid(), "started": STARTED, "order": order, "measured": [began["at"], time.time()],
                   "gpu": [began["gpu"], gpu_state()]}


class Started:
    """`times` processes running `function` (MODULE.FUNCTION under attnprof/measure/), started together;
    `ready()` waits until each is ready to measure, `results()` lets them measure one at a time (a
    context manager: a process still running at its end is stopped). `first` is the place in the measuring
    order of the first of them (1 where this process measures first); `identities` holds, after
    `results()`, each one's identity (`watched`), None for one that failed."""

    def __init__(self, function: str, times: int, *args: str, first: int = 0):
        self.folder = tempfile.TemporaryDirectory(prefix="attnprof-repeat-")
        self.processes, self.why, self.first, self.identities = [], {}, first, []
        for i in range(times):
            out, log = (Path(self.folder.name) / f"{i}.{ext}" for ext in ("json", "log"))
            with log.open("w") as err:
                self.processes.append((subprocess.Popen(
                    [sys.executable, "-m", __name__, function, str(out), *args], env=env(),
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err), out, log))

    def ready(self):
        """Wait until every process is ready to measure (or will never be)."""
        deadline = time.monotonic() + TIMEOUT_S
        for i, (process, _, _) in enumerate(self.processes):
            if i not in self.why:
                self.why[i] = self._ready(process, deadline)

    @staticmethod
    def _ready(process, deadline) -> str | None:
        """None once `process` says it is ready; else why it never will be (it ended, or hung). Read
        unbuffered, so that waiting for more output never misses a line already read."""
        said = b""
        while not said.endswith(READY.encode() + b"\n"):
            if not select.select([process.stdout], [], [], max(0.0, deadline - time.monotonic()))[0]:
                return f"was not ready to measure within {TIMEOUT_S} s and was stopped"
            more = os.read(process.stdout.fileno(), 65536)
            if not more:
                print(said.decode(errors="replace"), end="", flush=True)
                return "" if process.wait() else None  # it ended before measuring: its log says why
            said += more
        print(said.decode(errors="replace").removesuffix(READY + "\n"), end="", flush=True)  # printed while preparing
        return None

    def results(self) -> list[dict]:
        """Each process's result, measured one at a time; one that failed is {"error": its last line}."""
        self.ready()
        results = []
        for i, (process, out, log) in enumerate(self.processes):
            why = self.why[i]
            if why is None and process.poll() is None:
                process.stdin.write(f"{self.first + i}\n".encode())  # go, and its place in the order
                process.stdin.close()
                try:
                    process.wait(timeout=TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    process.kill()
                    why = f"gave no result in {TIMEOUT_S} s and was stopped"
            lines = log.read_text().strip().splitlines()
            if lines:
                print("\n".join(lines), file=sys.stderr, flush=True)
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
        self.folder.cleanup()


def in_processes(function: str, times: int, *args: str) -> list[dict]:
    """The result of `function` in each of `times` fresh processes (see Started)."""
    with Started(function, times, *args) as started:
        return started.results()


def main(function: str, out: str, *args: str):
    module, attribute = function.rsplit(".", 1)  # MODULE under attnprof/measure/, or a module's full name
    measure = getattr(importlib.import_module(module if "." in module else f"{__package__}.{module}"), attribute)
    if "torch" in sys.modules and sys.modules["torch"].cuda.is_available():
        sys.modules["torch"].empty(1, device="cuda")  # its CUDA context, made before any process measures

    order = []

    def ready():  # say so, then wait for its turn; from here on, what it prints goes to its log
        print(READY, flush=True)
        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
        order.append(int(sys.stdin.readline()))
    result, process = watched(measure, *args, ready=ready)
    store.write_json(Path(out).parent, Path(out).stem, {"result": result, "process": process | {"order": order[0]}})


if __name__ == "__main__":
    main(*sys.argv[1:])
