"""Physical bounds from the GPU's specification (hardware.SPECS), whatever a record says of itself.

A record names its GPU (`device`); the table's entry for that name bounds it, and its trace's
deviceProperties, the hardware run's device query and its own capability and SM count must be that GPU's,
so no field of the record can raise its own bounds. Then every rate the site shows is at most the peak
(TFLOP/s at most the dense peak of the unit its inputs can run on; GB/s, bytes read plus written, at
most the HBM bandwidth), every time is finite and positive, every size at most the GPU's memory (peak
memory: confirm.peak_lines, given `memory`), every kernel's footprint within the SM's limits. Each check
returns lines `FIELD ...: what is wrong`; records.py puts the file and the fix around them. No torch here.
"""
from __future__ import annotations

import csv
import io
import math
import statistics
from math import prod

from .counters import _number
from .flops import causal_flops, tflops
from .hardware import QUERY_NAMES, SPECS, TABLE, Spec
from .walk import dicts
from ..model.procedure import BWD_FLOP_FACTOR, RAW_SAMPLES
from ..model.stages import STAGES

# times that may be zero (a key_averages column where nothing was charged; communication fully hidden) or
# either sign (a difference of two medians)
MAY_BE_ZERO = ("self_cpu_us", "cpu_total_us", "self_device_us", "device_total_us", "overlap_us", "exposed_us",
               "communication_us", "start_us", "launch_start_us")
EITHER_SIGN = ("saved_us",)


def spec_of(record: dict) -> Spec | None:
    return SPECS.get(record.get("device"))


def unknown(record: dict) -> str | None:
    """One line where a record's GPU is not in the table (nothing would bound it), else None."""
    if "device" not in record or spec_of(record):
        return None
    return (f"device {record['device']!r} is not in the GPU specification table, so nothing bounds its numbers: "
            f"add the GPU, with the sources of its figures, to {TABLE}")


def device_lines(record: dict, properties: list[dict] | None = None, query: dict | None = None) -> list[str]:
    """Where the record's capability and SMs, its trace's deviceProperties or the device query are not
    those of the GPU its name picks in the table."""
    spec, name = spec_of(record), record.get("device")
    if spec is None:
        return []
    found = [f"{k} {record[k]!r} (the {name}'s: {v!r})" for k, v in (("capability", spec.capability),
                                                                       ("sm_count", spec.sms))
             if k in record and record[k] != v]
    wanted = dict(spec.per_sm, numSms=spec.sms)
    for i, p in enumerate(properties or []):
        found += [f"deviceProperties[{i}].{k} {p.get(k)!r} in its trace (the {name}'s: {v!r})"
                  for k, v in wanted.items() if p.get(k) != v]
        found += memory_lines(f"deviceProperties[{i}].totalGlobalMem in its trace", p.get("totalGlobalMem"), spec)
    if query:
        found += [f"result.query.{k} {query.get(k)!r} (the {name}'s: {wanted[ours]!r})"
                  for k, ours in QUERY_NAMES.items() if query.get(k) != wanted[ours]]
        if query.get("multi_processor_count") != spec.sms:
            found.append(f"result.query.multi_processor_count {query.get('multi_processor_count')!r} "
                         f"(the {name}'s: {spec.sms!r})")
        found += memory_lines("result.query.total_memory", query.get("total_memory"), spec)
    return found


def memory_lines(where: str, value, spec: Spec, zero=False) -> list[str]:
    if not isinstance(value, (int, float)) or not (0 <= value if zero else 0 < value) or value > spec.memory_bytes:
        return [f"{where} {value!r} is not within the GPU's memory ({spec.memory_bytes} bytes)"]
    return []


def sizes_lines(node, path: str, spec: Spec) -> list[str]:
    """Every size in bytes a record holds (`*_bytes`, `bytes`; not DRAM traffic) within the GPU's memory,
    and every kernel's footprint (`registers` per thread, `shared_memory` per block, `block` threads)
    within the SM's limits."""
    found = []
    most = {"registers": spec.registers_per_thread, "shared_memory": spec.per_sm["sharedMemPerBlockOptin"]}

    def walk(node, where, key=None):
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{where}.{k}" if where else k, k)
            block = node.get("block")
            if _numbers(block) and block and prod(block) > spec.per_sm["maxThreadsPerBlock"]:
                found.append(f"{where}.block {block!r}: more threads than a block holds ({spec.per_sm['maxThreadsPerBlock']})")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{where}[{i}]", key)
        elif isinstance(node, (int, float)) and not isinstance(node, bool) and key:
            if (key == "bytes" or key.endswith("_bytes")) and key != "dram_bytes":
                found.extend(memory_lines(where, node, spec, zero=True))
            elif key in most and not 0 <= node <= most[key]:
                found.append(f"{where} {node!r} is more than the SM allows ({most[key]})")
    walk(node, path)
    return found[:3]


def peak(spec: Spec, dtype: str | None, path: str | None = None) -> float | None:
    """The dense TFLOP/s of the fastest unit a forward of this dtype (and path) can run on: a stage that
    quantizes its inputs (the stage table's `tolerance`, "int8") runs on that unit. None for a dtype the
    table gives no peak for."""
    quantized = STAGES[path].tolerance if path in STAGES else None
    return spec.tflops.get(quantized or dtype or "bf16")


def rate_lines(where: str, value, bound: float | None, unit: str, zero=False) -> list[str]:
    if bound is None:
        return [f"{where}: the table gives no peak for its dtype"]
    if not isinstance(value, (int, float)) or not (0 <= value if zero else 0 < value):
        return [f"{where} gives {value!r} {unit}, not a rate"]
    return [f"{where} gives {value:,.0f} {unit}, above the GPU's peak of {bound:,g} {unit}"] if value > bound else []


def time_lines(node, path: str) -> list[str]:
    """Every time in a record (a key ending `_us`, `_us_each`, `_ms` or `_s`, or a list of raw samples)
    finite, and positive where it measured something."""
    found = []

    def check(key, value, where, sample):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            if sample:  # a raw sample that is no number
                found.append(f"{where} {value!r} is not a time")
            return
        ok = math.isfinite(value) and (value >= 0 if key in MAY_BE_ZERO else True if key in EITHER_SIGN else value > 0)
        if not ok:
            found.append(f"{where} {value!r} is not a {'finite' if key in EITHER_SIGN else 'positive finite'} time")

    def walk(node, where, key=None, timed=False, sample=False):
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{where}.{k}" if where else k, k, timed or k in RAW_SAMPLES)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{where}[{i}]", key, timed, sample=timed)
        elif timed or (key and key.endswith(("_us", "_us_each", "_ms", "_s"))):
            check(key, node, where, sample)
    walk(node, path)
    return found[:3]


def _numbers(value) -> bool:
    return isinstance(value, list) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value)


def _shape(value):
    """A [B, H, S, D] shape, or None."""
    return value if _numbers(value) and len(value) == 4 else None


def _median(samples):
    return statistics.median(samples) if isinstance(samples, list) and samples else None


def summary_lines(summary: dict) -> list[str]:
    """A profiled capture's (a stage's, a backward's, a reader's): its times, and the rates the site shows
    of it (causal FLOPs, times the backward's factor, over its CUDA-event median and over each profiled
    forward's device time) at most the peak; its peak memory at most the GPU's."""
    spec = spec_of(summary)
    mine = {k: v for k, v in summary.items() if k not in ("settings", "code")}
    found = time_lines(mine, "") + (sizes_lines(mine, "", spec) if spec else [])
    if spec is None or found or summary.get("stage") not in STAGES or not _shape(summary.get("shape")):
        return found  # (a reader's attention may do less than causal attention's work)
    bound = peak(spec, summary.get("dtype"), summary.get("stage"))
    flops = causal_flops(summary["shape"]) * summary.get("bwd_flop_factor", 1)
    what = summary.get("pass", "forward")
    times = [("event_median_us", summary.get("event_median_us"))]
    times += [(f"{what}_device_us_each[{i}]", t) for i, t in enumerate(summary.get(f"{what}_device_us_each", []))]
    return found + [line for where, t in times if t for line in rate_lines(where, tflops(flops, t), bound, "TFLOP/s")]


def cp_lines(summary: dict) -> list[str]:
    """A two-GPU record: its times, the single GPU's rate and each GPU's share of the work at most the peak."""
    spec = spec_of(summary)
    mine = {k: v for k, v in summary.items() if k not in ("settings", "code")}
    found = time_lines(mine, "") + (sizes_lines(mine, "", spec) if spec else [])
    if spec is None or found or not _shape(summary.get("shape")):
        return found
    flops, bound = causal_flops(summary["shape"]), peak(spec, summary.get("dtype"))
    single, slowest = (summary.get("single_gpu") or {}).get("event_median_us"), summary.get("cp_event_median_us")
    if single:
        found += rate_lines("single_gpu.event_median_us", tflops(flops, single), bound, "TFLOP/s")
    if slowest and summary.get("ranks"):
        found += rate_lines("cp_event_median_us", tflops(flops / len(summary["ranks"]), slowest), bound, "TFLOP/s per GPU")
    return found


def clock_lines(node, path: str, spec: Spec) -> list[str]:
    """Every `clocks` a run keeps (measure/bench.py: the SM clock over the rounds kept): its SM clocks positive
    and at most the GPU's maximum SM clock, in order (min, median, max)."""
    found = []
    for where, obj in dicts(node, path):
        c, where = obj.get("clocks"), f"{where}.clocks"
        if not isinstance(c, dict):
            continue
        out = [f"{where}.{k} {c[k]!r} MHz is not within the GPU's maximum SM clock ({spec.max_sm_mhz} MHz)"
               for k in ("sm_mhz_min", "sm_mhz_median", "sm_mhz_max", "sm_mhz_limit")
               if c.get(k) is not None and not (_numbers([c[k]]) and 0 < c[k] <= (spec.max_sm_mhz or math.inf))]
        sm = [c.get(k) for k in ("sm_mhz_min", "sm_mhz_median", "sm_mhz_max")]
        if not out and all(x is not None for x in sm) and not sm[0] <= sm[1] <= sm[2]:
            out.append(f"{where}.sm_mhz_min, _median and _max {sm!r} are not in order")
        found += out
    return found[:3]


def run_lines(name: str, run: dict) -> list[str]:
    """A measurement run, every process: its times; every rate it stores (`*tflops*`, `*gbs`) and the ones
    the site computes from its medians (an attention forward's, a backward's, a matmul's) at most the peak;
    every peak memory at most the GPU's."""
    spec = spec_of(run)
    results = [("result", run.get("result"))] + [(f"repeats[{i}]", r) for i, r in enumerate(run.get("repeats", []))]
    found = [line for where, result in results for line in time_lines(result, where)
             + (sizes_lines(result, where, spec) + clock_lines(result, where, spec) if spec else [])]
    if spec is None or found:
        return found

    def walk(node, where, shape, dtype, path):
        if isinstance(node, list):
            for i, item in enumerate(node):
                walk(item, f"{where}[{i}]", shape, dtype, path)
            return
        if not isinstance(node, dict):
            return
        shape = _shape(node.get("shape")) or shape
        dtype, path = node.get("dtype", dtype), node.get("path", node.get("stage", path))
        bound = peak(spec, dtype, path)
        for k, v in node.items():
            if k.endswith("gbs"):
                found.extend(rate_lines(f"{where}.{k}", v, spec.hbm_gbs, "GB/s"))
            elif "tflops" in k and isinstance(v, (int, float)):
                found.extend(rate_lines(f"{where}.{k}", v, spec.fp32_cuda_core_tflops if k.startswith("fp32_")
                                        else peak(spec, "bf16" if k.startswith(("bf16_", "matmul_")) else dtype, path),
                                        "TFLOP/s"))
        if shape and name != "decode":  # a decode row's shape is one query against a cache its shape omits
            factor = BWD_FLOP_FACTOR if name == "backward" else 1
            for k in ("times_us", "back_to_back_us_each", "one_call_us", "graph_us", "event_times_us", "back_to_back_us"):
                t = _median(node.get(k))
                if t:
                    found.extend(rate_lines(f"{where}.{k} (median)", tflops(factor * causal_flops(shape), t), bound,
                                            "TFLOP/s"))
        if _numbers(node.get("matmul_shape")) and _median(node.get("matmul_us_each")):
            found.extend(rate_lines(f"{where}.matmul_us_each (median)",
                                    tflops(2 * prod(node["matmul_shape"]), _median(node["matmul_us_each"])),
                                    spec.tflops["bf16"], "TFLOP/s"))
        for k, v in node.items():
            if isinstance(v, (dict, list)):
                walk(v, f"{where}.{k}", shape, dtype, path)
    for where, result in results:
        walk(result, where, None, None, None)
    return found


# Nsight Compute's device attributes (every row of its raw report) for the table's figures
NCU_ATTRIBUTES = {"multiprocessor_count": lambda s: s.sms, "max_blocks_per_multiprocessor": lambda s: s.blocks_per_sm,
                  "max_registers_per_thread": lambda s: s.registers_per_thread,
                  "max_threads_per_multiprocessor": lambda s: s.per_sm["maxThreadsPerMultiprocessor"],
                  "max_registers_per_multiprocessor": lambda s: s.per_sm["regsPerMultiprocessor"],
                  "max_shared_memory_per_multiprocessor": lambda s: s.per_sm["sharedMemPerMultiprocessor"],
                  "max_shared_memory_per_block_optin": lambda s: s.per_sm["sharedMemPerBlockOptin"],
                  "max_threads_per_block": lambda s: s.per_sm["maxThreadsPerBlock"],
                  "max_registers_per_block": lambda s: s.per_sm["regsPerBlock"], "warp_size": lambda s: s.per_sm["warpSize"]}


def report_lines(counted: dict, report: str) -> list[str]:
    """The device attributes in every row of an ncu raw report are those of the GPU its record names."""
    spec = spec_of(counted)
    rows = list(csv.reader(io.StringIO(report)))
    start = next((i for i, r in enumerate(rows) if r[:1] == ["ID"]), None)
    if spec is None or start is None:
        return []
    found = []
    for r in rows[start + 1:]:
        if not (r and r[0].strip().isdigit()):
            continue
        row = dict(zip(rows[start], r))
        found += [f"its ncu report's device__attribute_{a} {_number(row[f'device__attribute_{a}'])!r} "
                  f"(the {counted['device']}'s: {want(spec)!r})" for a, want in NCU_ATTRIBUTES.items()
                  if f"device__attribute_{a}" in row and _number(row[f"device__attribute_{a}"]) != want(spec)]
        if "device__attribute_total_memory" in row:
            found += memory_lines("its ncu report's device__attribute_total_memory",
                                  _number(row["device__attribute_total_memory"]), spec)
        if row.get("device__attribute_display_name", counted["device"]) != counted["device"]:
            found.append(f"its ncu report's device__attribute_display_name {row['device__attribute_display_name']!r}")
    return list(dict.fromkeys(found))


def counters_lines(counted: dict, report: str = "") -> list[str]:
    """A counters record: its ncu report's device attributes the GPU's; each kernel's duration positive, its
    percentages of peak within 0-100, its DRAM traffic over its own duration at most the HBM bandwidth, its
    resident blocks at most the SM's."""
    spec, found = spec_of(counted), report_lines(counted, report)
    for i, k in enumerate(counted.get("kernels", [])):
        where = f"kernels[{i}]"
        d = k.get("duration_ns")
        if not (isinstance(d, (int, float)) and math.isfinite(d) and d > 0):
            found.append(f"{where}.duration_ns {d!r} is not a positive finite time")
            continue
        found += [f"{where}.{m} {v!r} is not a percentage (0 to 100)" for m, v in k.items()
                  if m.endswith("_pct") and v is not None and not 0 <= v <= 100]
        if spec and k.get("dram_bytes") is not None:
            found += rate_lines(f"{where}.dram_bytes over its duration_ns", k["dram_bytes"] / d, spec.hbm_gbs, "GB/s",
                                zero=True)
        if spec and k.get("limit_blocks") is not None and not 0 < k["limit_blocks"] <= spec.blocks_per_sm:
            found.append(f"{where}.limit_blocks {k['limit_blocks']!r} (the {counted['device']}'s most: {spec.blocks_per_sm})")
    total = sum(k["duration_ns"] for k in counted.get("kernels", []) if isinstance(k.get("duration_ns"), (int, float)))
    if spec and not found and total and counted.get("stage") in STAGES and _shape(counted.get("shape")):
        # the roofline page's rate: the forward's causal FLOPs over its kernels' time under ncu
        found += rate_lines("kernels[].duration_ns (their sum)", tflops(causal_flops(counted["shape"]), total / 1e3),
                            peak(spec, counted.get("dtype"), counted["stage"]), "TFLOP/s")
    return found


def memory(record: dict) -> int | None:
    """The memory of the GPU a record names, from the table (None for a GPU it does not know: `unknown`)."""
    spec = spec_of(record)
    return spec.memory_bytes if spec else None
