"""Reading a torch.profiler Chrome trace: one annotated forward and the device work it launched.

A forward is the CPU range of the `record_function` annotation; its device work, every kernel, memcpy and
memset launched inside that range on its thread (by correlation id), in launch order. Nothing is ever
divided by a step count. Autograd runs a backward on its own thread: with `follow_autograd`, launches also
come from every thread of the process running autograd's engine inside the range. A capture on several GPUs
is one trace whose events carry their rank (`args.rank`; `rank_trace`); `overlap` measures how much
communication hid behind compute.
"""
from __future__ import annotations

import gzip
import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

DEVICE_KINDS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")
AUTOGRAD_ENGINE = "autograd::engine::evaluate_function"


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
    start_ts: float = 0.0  # the annotation's start in the trace's clock (to line ranks up on one timeline)
    ops: list[DeviceOp] = field(default_factory=list)
    cpu_ops: list[CpuOp] = field(default_factory=list)

    @property
    def device_us(self) -> float:
        # correctly rounded, so one set of durations gives one sum on every Python: 3.12's sum() compensates
        # and 3.11's does not, and two forwards tied to the nanosecond must tie wherever the median is chosen
        return math.fsum(op.duration_us for op in self.ops)


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
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise TraceError(f"trace file {path} has no traceEvents: not a torch.profiler Chrome trace")
    for i, ev in enumerate(trace["traceEvents"]):
        if why := _malformed(ev):
            raise TraceError(f"trace file {path}: traceEvents[{i}] {why}: recapture with `python -m attnprof capture`")
    return trace


def _malformed(ev) -> str | None:
    """Why an event cannot be read (None when it can): a complete event ("X") needs a name, a finite start and
    a finite duration of at least zero."""
    if not isinstance(ev, dict):
        return "is not an object"
    if ev.get("ph") != "X":
        return None
    if not isinstance(ev.get("name"), str):
        return "has no name"
    for key in ("ts", "dur"):
        value = ev.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or (key == "dur" and value < 0):
            return f"{key} is {value!r}, not a finite number{' of at least zero' if key == 'dur' else ''}"
    if not isinstance(ev.get("args", {}), dict):
        return "has args that are not an object"
    return None


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


def _threads_of(events, ann, follow_autograd):
    """(pid, tid) of the threads whose launches are `ann`'s: its own, and autograd's engine's if followed."""
    own = (ann.get("pid"), ann.get("tid"))
    if not follow_autograd:
        return {own}
    start, end = ann["ts"], ann["ts"] + ann["dur"]
    return {own} | {(e.get("pid"), e.get("tid")) for e in events
                    if e.get("cat") == "cpu_op" and e.get("pid") == own[0] and e["name"].startswith(AUTOGRAD_ENGINE)
                    and _within(e, start, end)}


def forwards(trace: dict, label: str, follow_autograd: bool = False) -> list[Forward]:
    """Every annotated forward (or backward) named `label`, in time order, with its device and CPU work."""
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
        threads = _threads_of(events, ann, follow_autograd)
        same_thread = [e for e in events if (e.get("pid"), e.get("tid")) in threads]
        launches = sorted((e for e in same_thread if e.get("cat") in LAUNCH_CATS and _within(e, start, end)),
                          key=lambda e: e["ts"])
        fwd = Forward(cpu_us=ann["dur"], start_ts=ann["ts"])
        for launch in launches:
            for dev in sorted(device_by_corr.get(launch["args"].get("correlation"), []), key=lambda e: e["ts"]):
                a = dev.get("args", {})
                fwd.ops.append(DeviceOp(
                    name=dev["name"], kind=DEVICE_KINDS[dev["cat"]], duration_us=float(dev["dur"]),
                    start_us=dev["ts"] - start, launch=launch["name"], launch_start_us=launch["ts"] - start,
                    grid=a.get("grid"), block=a.get("block"), registers=a.get("registers per thread"),
                    shared_memory=a.get("shared memory"),
                    achieved_occupancy=a.get("est. achieved occupancy %")))
        for thread in sorted(threads, key=str):  # nesting is per thread
            cpu = sorted((e for e in same_thread if (e.get("pid"), e.get("tid")) == thread
                          and e.get("cat") == "cpu_op" and _within(e, start, end)),
                         key=lambda e: (e["ts"], -e.get("dur", 0)))
            for ev, depth in zip(cpu, _nesting_depths(cpu)):
                fwd.cpu_ops.append(CpuOp(ev["name"], ev["ts"] - start, float(ev.get("dur", 0)), depth))
        fwd.cpu_ops.sort(key=lambda c: (c.start_us, c.depth))
        result.append(fwd)
    return result


def median_forward(fwds: list[Forward]) -> Forward:
    """The forward whose device time is the median: a real forward, not an average of several."""
    return sorted(fwds, key=lambda f: f.device_us)[len(fwds) // 2]


def summarize(fwds: list[Forward]) -> dict:
    """What a capture's pages read of its profiled forwards: the median one's ops and device time, and all's."""
    chosen = median_forward(fwds)
    return {
        "ops_per_forward": len(chosen.ops),
        "ops_per_forward_each": [len(f.ops) for f in fwds],  # one entry per profiled forward: they should agree
        "forward_device_us": chosen.device_us,
        "forward_device_us_each": [f.device_us for f in fwds],  # every forward, not only the median one
        "cpu_forward_us_each": [f.cpu_us for f in fwds],
        "cpu_forward_us": statistics.median(f.cpu_us for f in fwds),
        "ops": [dict(op.__dict__) for op in chosen.ops],
        "cpu_ops": [dict(op.__dict__) for op in chosen.cpu_ops],
    }


def summarize_backward(trace: dict, label: str, forward_label: str, bwds: list[Forward] | None = None) -> dict:
    """`summarize` for a backward, counted on autograd's thread (`bwds`, if read) and on the calling one alone."""
    bwds = bwds or forwards(trace, label, follow_autograd=True)
    chosen = median_forward(bwds)
    fwds = forwards(trace, forward_label)
    return {
        "ops_per_backward": len(chosen.ops),
        "ops_per_backward_each": [len(b.ops) for b in bwds],
        "ops_on_calling_thread_each": [len(b.ops) for b in forwards(trace, label)],
        "backward_device_us": chosen.device_us,
        "backward_device_us_each": [b.device_us for b in bwds],
        "cpu_backward_us": statistics.median(b.cpu_us for b in bwds),
        "cpu_backward_us_each": [b.cpu_us for b in bwds],
        "forward_ops_each": [len(f.ops) for f in fwds],
        "forward_device_us": median_forward(fwds).device_us,
        "ops": [dict(op.__dict__) for op in chosen.ops],
        "cpu_ops": [dict(op.__dict__) for op in chosen.cpu_ops],
    }


def rank_trace(trace: dict, rank: int) -> dict:
    """One rank's events of a trace made on several GPUs (each event's `args.rank` says whose it is)."""
    events = [e for e in trace["traceEvents"] if e.get("args", {}).get("rank") == rank]
    if not events:
        raise TraceError(f"no events of rank {rank} in the trace")
    return {**{k: v for k, v in trace.items() if k != "traceEvents"}, "traceEvents": events}


def merge_ranks(traces: list[dict]) -> dict:
    """One trace of the ranks' traces: each event tagged with its rank, each process named and sorted by it, so
    a viewer shows the ranks as lanes of one timeline (rank r runs on GPU r: device pids do not collide)."""
    events = []
    for rank, t in enumerate(traces):
        used = {e.get("pid") for e in t["traceEvents"] if e.get("ph") != "M"}
        cpu_pids = {e.get("pid") for e in t["traceEvents"] if e.get("cat") in ("cpu_op", "user_annotation")}
        for e in t["traceEvents"]:
            if e.get("ph") == "M" and e.get("pid") not in used:
                continue
            e = dict(e, args=dict(e.get("args", {}), rank=rank))
            if e.get("ph") == "M" and e.get("name") == "process_name":
                e["args"]["name"] = f"rank {rank} CPU" if e["pid"] in cpu_pids else f"rank {rank} GPU {e['pid']}"
            if e.get("ph") == "M" and e.get("name") == "process_sort_index":
                e["args"]["sort_index"] = 2 * rank + (0 if e["pid"] in cpu_pids else 1)
            events.append(e)
    first = traces[0]
    return {**{k: v for k, v in first.items() if k != "traceEvents"}, "traceEvents": events,
            "deviceProperties": [p for t in traces for p in t.get("deviceProperties", [])]}


def summarize_rank(merged: dict, rank: int, label: str) -> dict:
    """`summarize` for one rank of the merged trace, and how much communication its compute hid."""
    fwds = forwards(rank_trace(merged, rank), label)
    chosen = median_forward(fwds)
    return {"ops_per_forward": len(chosen.ops), "ops_per_forward_each": [len(f.ops) for f in fwds],
            "forward_device_us": chosen.device_us, "cpu_forward_us": statistics.median(f.cpu_us for f in fwds),
            "overlap": overlap(chosen.ops), "ops": [dict(op.__dict__) for op in chosen.ops]}


def is_communication(name: str) -> bool:
    """NCCL's kernels (all-gather, send/recv, all-to-all) move data between GPUs; everything else computes."""
    return name.startswith("nccl")


def _union(intervals):
    merged = []
    for a, b in sorted(intervals):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return merged


def _length(intervals) -> float:
    return sum(b - a for a, b in intervals)


def overlap(ops: list[DeviceOp]) -> dict:
    """Communication time, and how much of it ran beside a compute kernel on the same GPU, as unions of
    intervals (two NCCL kernels at once count once): `overlap_us` hidden, `exposed_us` the rest."""
    comm = _union((o.start_us, o.start_us + o.duration_us) for o in ops if o.kind == "kernel" and is_communication(o.name))
    comp = _union((o.start_us, o.start_us + o.duration_us) for o in ops if o.kind == "kernel" and not is_communication(o.name))
    both = []
    for a, b in comm:
        for c, d in comp:
            if c < b and a < d:
                both.append((max(a, c), min(b, d)))
    communication, hidden = _length(comm), _length(_union(both))
    return {"communication_us": communication, "overlap_us": hidden, "exposed_us": communication - hidden,
            "compute_us": _length(comp),
            "hidden_fraction": hidden / communication if communication else None}


@dataclass
class Gaps:
    """Where a forward's GPU time went, from the first launch to the last op's end: busy while any op runs,
    else idle. No verdict on what bounds a stream of calls: that is unprofiled timing's (analysis/timing.py)."""
    span_us: float
    busy_us: float
    launch_latency_us: list[float]  # per op: its launch call's start on the CPU → its start on the GPU

    @property
    def idle_us(self) -> float:
        return self.span_us - self.busy_us

    @property
    def idle_share(self) -> float:
        return self.idle_us / self.span_us if self.span_us else 0.0


def idle_intervals(ops: list[DeviceOp]) -> list[tuple[float, float]]:
    """The stretches between a forward's first launch and its last op's end in which none of its ops ran."""
    if not ops:
        return []
    t, idle = min(op.launch_start_us for op in ops), []
    for a, b in _union((op.start_us, op.start_us + op.duration_us) for op in ops):
        if a > t:
            idle.append((t, a))
        t = max(t, b)
    return idle


def gaps(ops: list[DeviceOp]) -> Gaps:
    """The gaps of one forward's device ops (a Forward's `ops`, or a summary's rebuilt as DeviceOps)."""
    if not ops:
        return Gaps(0.0, 0.0, [])
    end = max(op.start_us + op.duration_us for op in ops)
    busy = _length(_union((op.start_us, op.start_us + op.duration_us) for op in ops))
    return Gaps(span_us=end - min(op.launch_start_us for op in ops), busy_us=busy,
                launch_latency_us=[op.start_us - op.launch_start_us for op in ops])


def busy_us(ops: list[dict]) -> float:
    """The time any of a summary's `ops` ran (ops on two streams at once count once)."""
    return _length(_union((o["start_us"], o["start_us"] + o["duration_us"]) for o in ops))
