"""Reading a torch.profiler Chrome trace: one annotated forward and the device work it launched.

A forward is the CPU range of the `record_function` annotation. Its device work is every kernel,
memcpy and memset whose correlation id matches a runtime/driver launch made inside that range on
the same thread, in launch order. Nothing is ever divided by a step count.
"""
from __future__ import annotations

import gzip
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path

DEVICE_KINDS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")


class TraceError(ValueError):
    pass


@dataclass
class DeviceOp:
    name: str
    kind: str  # kernel | memcpy | memset
    duration_us: float
    start_us: float  # relative to the start of the forward's CPU range
    launch: str  # the runtime/driver call that launched it, e.g. cudaLaunchKernel
    launch_start_us: float
    grid: list | None = None
    block: list | None = None
    registers: int | None = None  # per thread
    shared_memory: int | None = None  # bytes per block
    achieved_occupancy: float | None = None  # the trace's "est. achieved occupancy %", as recorded


@dataclass
class CpuOp:
    name: str
    start_us: float
    duration_us: float
    depth: int  # 1 = called directly inside the annotation


@dataclass
class Forward:
    cpu_us: float
    ops: list[DeviceOp] = field(default_factory=list)
    cpu_ops: list[CpuOp] = field(default_factory=list)

    @property
    def device_us(self) -> float:
        return sum(op.duration_us for op in self.ops)


def load(path: str | Path) -> dict:
    """Read a Chrome trace, gzipped or plain; a damaged file raises TraceError naming it."""
    path = Path(path)
    if not path.exists():
        raise TraceError(f"trace file {path} is missing: recapture with `python -m attnprof capture`")
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt") as f:
            trace = json.load(f)
    except (OSError, EOFError, json.JSONDecodeError) as e:
        raise TraceError(f"trace file {path} is unreadable ({e}): recapture with `python -m attnprof capture`")
    if "traceEvents" not in trace:
        raise TraceError(f"trace file {path} has no traceEvents: not a torch.profiler Chrome trace")
    return trace


def _within(ev, start, end):
    return start <= ev["ts"] <= end


def _nesting_depths(events):
    """Depth of each complete event among the others (1 = outermost)."""
    depths, stack = [], []
    for ev in events:
        while stack and ev["ts"] >= stack[-1]:
            stack.pop()
        stack.append(ev["ts"] + ev.get("dur", 0))
        depths.append(len(stack))
    return depths


def forwards(trace: dict, label: str) -> list[Forward]:
    """Every annotated forward named `label`, in time order, with its device and CPU work."""
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    annotations = sorted((e for e in events if e.get("cat") == "user_annotation" and e.get("name") == label),
                         key=lambda e: e["ts"])
    if not annotations:
        raise TraceError(f"no forward annotated {label!r} in the trace")
    device_by_corr: dict[int, list] = {}
    for e in events:
        if e.get("cat") in DEVICE_KINDS and "correlation" in e.get("args", {}):
            device_by_corr.setdefault(e["args"]["correlation"], []).append(e)

    result = []
    for ann in annotations:
        start, end = ann["ts"], ann["ts"] + ann["dur"]
        same_thread = [e for e in events if e.get("tid") == ann.get("tid") and e.get("pid") == ann.get("pid")]
        launches = sorted((e for e in same_thread if e.get("cat") in LAUNCH_CATS and _within(e, start, end)),
                          key=lambda e: e["ts"])
        fwd = Forward(cpu_us=ann["dur"])
        for launch in launches:
            for dev in sorted(device_by_corr.get(launch["args"].get("correlation"), []), key=lambda e: e["ts"]):
                a = dev.get("args", {})
                fwd.ops.append(DeviceOp(
                    name=dev["name"], kind=DEVICE_KINDS[dev["cat"]], duration_us=float(dev["dur"]),
                    start_us=dev["ts"] - start, launch=launch["name"], launch_start_us=launch["ts"] - start,
                    grid=a.get("grid"), block=a.get("block"), registers=a.get("registers per thread"),
                    shared_memory=a.get("shared memory"),
                    achieved_occupancy=a.get("est. achieved occupancy %")))
        cpu = sorted((e for e in same_thread if e.get("cat") == "cpu_op" and _within(e, start, end)),
                     key=lambda e: (e["ts"], -e.get("dur", 0)))
        for ev, depth in zip(cpu, _nesting_depths(cpu)):
            fwd.cpu_ops.append(CpuOp(ev["name"], ev["ts"] - start, float(ev.get("dur", 0)), depth))
        result.append(fwd)
    return result


def median_forward(fwds: list[Forward]) -> Forward:
    """The forward whose device time is the median: a real forward, not an average of several."""
    return sorted(fwds, key=lambda f: f.device_us)[len(fwds) // 2]


def summarize(trace: dict, label: str) -> dict:
    """What a capture's summary says about its trace: the median forward's device ops (in launch
    order) and CPU ops, its device time, the op count of every forward and their median CPU time.
    Capture writes exactly this; `check` recomputes it from the committed trace and compares."""
    fwds = forwards(trace, label)
    chosen = median_forward(fwds)
    return {
        "ops_per_forward": len(chosen.ops),
        "ops_per_forward_each": [len(f.ops) for f in fwds],  # one entry per profiled forward: they should agree
        "forward_device_us": chosen.device_us,
        "cpu_forward_us": statistics.median(f.cpu_us for f in fwds),
        "ops": [dict(op.__dict__) for op in chosen.ops],
        "cpu_ops": [dict(op.__dict__) for op in chosen.cpu_ops],
    }


def _same(a, b) -> bool:
    """Equal, up to the last bits of a float (a sum taken in another order)."""
    if isinstance(a, float) or isinstance(b, float):
        return (isinstance(a, (int, float)) and isinstance(b, (int, float))
                and abs(a - b) <= 1e-9 * max(1.0, abs(b)))
    return a == b


def _differences(mine, theirs, path):
    if isinstance(mine, dict) and isinstance(theirs, dict):
        for key in sorted(set(mine) | set(theirs)):
            yield from _differences(mine.get(key), theirs.get(key), f"{path}.{key}")
    elif isinstance(mine, list) and isinstance(theirs, list) and len(mine) == len(theirs):
        for i, (a, b) in enumerate(zip(mine, theirs)):
            yield from _differences(a, b, f"{path}[{i}]")
    elif isinstance(mine, list) and isinstance(theirs, list) and path in ("ops", "cpu_ops"):
        yield f"{path}: {len(mine)} entries (the trace: {len(theirs)})"
    elif not _same(mine, theirs):
        yield f"{path} {mine!r} (the trace: {theirs!r})"


def disagreements(summary: dict, trace: dict) -> list[str]:
    """Where a summary differs from what its trace says (empty when it is derivable from it), e.g.
    `forward_device_us 194.847 (the trace: 94.847)` or `ops[1].duration_us 20.0 (the trace: 2.1)`."""
    derived = summarize(trace, summary.get("label", ""))
    return [line for key, value in derived.items() for line in _differences(summary.get(key), value, key)]


@dataclass
class Gaps:
    """Where one forward's GPU time went, read off its trace. The span runs from the first launch
    on the CPU to the end of the last device op; the GPU is busy while any of the forward's ops
    runs and idle for the rest of the span, waiting for the CPU to launch more work."""
    span_us: float
    busy_us: float
    launch_latency_us: list[float]  # per op: its launch call's start on the CPU → its start on the GPU

    @property
    def idle_us(self) -> float:
        return self.span_us - self.busy_us

    @property
    def idle_share(self) -> float:
        return self.idle_us / self.span_us if self.span_us else 0.0

    @property
    def launch_bound(self) -> bool:
        """The GPU spends more of the span waiting for launches than running the forward's ops."""
        return self.idle_us > self.busy_us


def gaps(ops: list[DeviceOp]) -> Gaps:
    """The gaps of one forward's device ops (a Forward's `ops`, or a summary's rebuilt as DeviceOps)."""
    if not ops:
        return Gaps(0.0, 0.0, [])
    busy, end = 0.0, float("-inf")
    for op in sorted(ops, key=lambda op: op.start_us):  # union of the ops' intervals
        op_end = op.start_us + op.duration_us
        busy += max(0.0, op_end - max(op.start_us, end))
        end = max(end, op_end)
    first_launch = min(op.launch_start_us for op in ops)
    return Gaps(span_us=end - first_launch, busy_us=busy,
                launch_latency_us=[op.start_us - op.launch_start_us for op in ops])
