"""What a record can confirm itself, what bounds the numbers it measured once, and which GPU it names.

Beside its trace and raw samples (trace.py, stats.py, derived.py), a record holds figures that other
fields of the same record decide: a verification row's status is its error against its tolerance, a
fallback case's backend is what its kernels name, a backward record's FLOP factor is the procedure's.
The numbers no data recomputes (procedure.MEASURED_ONCE) are bounded: peak memory holds at least the
output a forward allocates and at most the GPU's memory; an error against float64 lies near what
`verify` measured for the same path and dtype and within its tolerance. And every record names the one
GPU its trace and the rest of the site name. Each check returns lines `FIELD ...: what is wrong`, one per
finding; records.py puts the file and the fix around them. No torch here.
"""
from __future__ import annotations

from collections import Counter
from math import prod

from . import kernel_names, trace
from .flops import causal_flops, tflops
from .walk import dicts
from ..model.procedure import BWD_FLOP_FACTOR
from ..model.stages import ITEMSIZE, STAGES

TIMED = ("median_us", "times_us", "back_to_back_us", "back_to_back_us_each")  # a row that ran has these
REL_ERR_BAND = (0.5, 2.0)  # a capture's error against float64, against what `verify` measured for its path and dtype
RANK_BAND = (0.95, 1.10)  # a rank's CUDA-event median, against the busy time of its profiled median forward
SINGLE_GPU_BAND = (0.9, 1.1)  # the single GPU's rate, against the sweep's flash rate back to back at its longest sequence
REPLAYED = ("graph", "reduce-overhead")  # a replayed forward writes into the graph's pool: no new peak


# ---- which GPU ----------------------------------------------------------------------------------

def device_of(record: dict) -> tuple | None:
    """(name, capability, SMs) a record states, or None where it names no GPU."""
    if "device" not in record:
        return None
    return record["device"], record.get("capability"), record.get("sm_count")


def trace_devices(properties: list[dict]) -> list[tuple]:
    """(name, capability, SMs) of each GPU a trace's deviceProperties lists."""
    return [(p.get("name"), f"sm_{p.get('computeMajor')}{p.get('computeMinor')}", p.get("numSms")) for p in properties]


def device_lines(record: dict, properties: list[dict] | None) -> list[str]:
    """Where a record's GPU (device, capability, sm_count) differs from its trace's, its ranks' or its rows'."""
    mine = device_of(record)
    if mine is None:
        return []
    found = [f"device {mine!r} (its trace: {d!r})" for d in trace_devices(properties or []) if d != mine][:1]
    found += [f"ranks[{r['rank']}].device {r['device']!r} (the record: {mine[0]!r})"
              for r in record.get("ranks", []) if r.get("device") not in (None, mine[0])]
    result = record.get("result")
    query = result.get("query") if isinstance(result, dict) else None
    if query:  # the hardware run's own device query
        asked = (query.get("name"), f"sm_{query.get('major')}{query.get('minor')}", query.get("multi_processor_count"))
        if asked != mine:
            found.append(f"result.query {asked!r} (the record: {mine!r})")
    if isinstance(result, list):
        found += [f"result[{i}].device {r['device']!r} (the record: {mine[0]!r})" for i, r in enumerate(result)
                  if isinstance(r, dict) and r.get("device") not in (None, mine[0])]
    return found


def other_devices(devices: dict[str, tuple]) -> dict[str, str]:
    """The records (of {record: its GPU}) taken on another GPU than most of the site's, each with one line."""
    if len(set(devices.values())) < 2:
        return {}
    (most, n), = Counter(devices.values()).most_common(1)
    return {r: f"was taken on {text(d)}, the site's other {n} records on {text(most)}: one GPU per site"
            for r, d in devices.items() if d != most}


def text(device: tuple) -> str:
    name, capability, sms = device
    return f"{name} ({capability}, {sms} SMs)"


# ---- figures the record decides itself ----------------------------------------------------------

def summary_lines(summary: dict, has_trace: bool, memory=None, tolerance=None, verified=None) -> list[str]:
    """A profiled capture's own figures: unavailable means nothing ran; a backward's FLOP factor is the
    procedure's; auto's dispatcher choice is the backend its kernels name; peak memory and the error
    against float64 within their bounds."""
    found = []
    if "unavailable" in summary:
        if has_trace or summary.get("ops"):
            found.append("unavailable, yet it has a trace and ops: a capture that ran is not unavailable")
        return found
    if "bwd_flop_factor" in summary and summary["bwd_flop_factor"] != BWD_FLOP_FACTOR:
        found.append(f"bwd_flop_factor {summary['bwd_flop_factor']!r} (procedure.BWD_FLOP_FACTOR: {BWD_FLOP_FACTOR!r})")
    stage = STAGES.get(summary.get("stage"))
    if stage and stage.snippet == "sdpa" and stage.backend is None and "sdpa_choice" in summary:
        ran = kernel_names.fingerprint(op["name"] for op in summary.get("ops", []))
        if summary["sdpa_choice"] != ran:
            found.append(f"sdpa_choice {summary['sdpa_choice']!r} (its kernels: {ran!r} ran)")
    if "peak_extra_bytes" in summary and "shape" in summary:
        least = 0 if stage and stage.wrap in REPLAYED else output_bytes(summary["shape"], summary.get("dtype"))
        found += peak_lines("peak_extra_bytes", summary["peak_extra_bytes"], least, memory)
    if tolerance is not None:
        errors = {"rel_err": summary.get("rel_err")} | {f"grad_rel_err.{k}": v for k, v in summary.get("grad_rel_err", {}).items()}
        found += [line for k, v in errors.items() if v is not None for line in error_lines(k, v, tolerance, verified)]
    return found


def output_bytes(shape, dtype) -> int:
    """The size of a forward's output [B, H, S, D] (the shape of q) in its dtype."""
    return prod(shape) * ITEMSIZE.get(dtype or "bf16", 2)


def peak_lines(where: str, peak, least: int, memory: int | None) -> list[str]:
    if peak < least:
        return [f"{where} {peak!r} is less than the output it allocates ({least} bytes)"]
    if memory and peak > memory:
        return [f"{where} {peak!r} is more than the GPU's memory ({memory} bytes)"]
    return []


def error_lines(where: str, err: float, tolerance: float, verified: tuple | None) -> list[str]:
    """An error against float64 within its tolerance and, where `verify` measured the same path and dtype
    (its smallest and largest error), within REL_ERR_BAND of that."""
    if not err <= tolerance:  # NaN fails too
        return [f"{where} {err!r} is above the tolerance {tolerance!r} that `verify` allows its dtype"]
    if verified and not REL_ERR_BAND[0] * verified[0] <= err <= REL_ERR_BAND[1] * verified[1]:
        return [f"{where} {err!r} is not near what `verify` measured for its path and dtype "
                f"({verified[0]:.3g} to {verified[1]:.3g})"]
    return []


def tolerances(verify_rows: list[dict]) -> tuple[dict, dict]:
    """From the verification run: the tolerance of each (tolerance class, dtype), and the smallest and
    largest error of each (path, dtype) on inputs without a fully masked row."""
    allowed, errors = {}, {}
    for r in verify_rows:
        if "tolerance" in r and r["path"] in STAGES:
            allowed[STAGES[r["path"]].tolerance, r["dtype"]] = r["tolerance"]
        if r.get("status") == "pass" and not r.get("fully_masked_row"):
            errors.setdefault((r["path"], r["dtype"]), []).append(r["rel_frobenius"])
    return allowed, {k: (min(v), max(v)) for k, v in errors.items()}


def verified_path(stage_name: str | None) -> str | None:
    """The path `verify` checks that computes what this stage computes: itself, its pinned backend, or its
    snippet's stage (a compiled or replayed stage runs the same attention)."""
    stage = STAGES.get(stage_name)
    if stage is None:
        return None
    for name in (stage.name, stage.backend, stage.snippet):
        if name in STAGES and STAGES[name].verify:
            return name
    return None


def verify_lines(rows: list[dict]) -> list[str]:
    """A verification row's status is its error against its tolerance; rows of one dtype and tolerance
    class share one tolerance."""
    found, seen = [], {}
    for i, r in enumerate(rows):
        if r.get("status") not in ("pass", "fail"):
            continue
        holds = not r.get("nan") and r["rel_frobenius"] <= r["tolerance"]
        if r["status"] != ("pass" if holds else "fail"):
            found.append(f"result[{i}].status {r['status']!r} (rel_frobenius {r['rel_frobenius']!r} against "
                         f"tolerance {r['tolerance']!r})")
        group = (STAGES[r["path"]].tolerance if r["path"] in STAGES else r["path"], r["dtype"])
        if seen.setdefault(group, r["tolerance"]) != r["tolerance"]:
            found.append(f"result[{i}].tolerance {r['tolerance']!r} (its other {r['dtype']} rows: {seen[group]!r})")
    return found


def fallback_lines(rows: list[dict]) -> list[str]:
    """A fallback case's backend is the one its kernels name."""
    return [f"result[{i}].ran {r['ran']!r} (its kernels: {kernel_names.fingerprint(r['kernels'])!r})"
            for i, r in enumerate(rows) if "kernels" in r and r.get("ran") != kernel_names.fingerprint(r["kernels"])]


def varlen_lines(rows: list[dict]) -> list[str]:
    """Useful FLOPs follow the lengths (4·H·D·Σ n², halved when causal, the same H·D in every row), and a
    padded batch computes every sequence at the longest length."""
    def pairs(r):
        return 4 * (0.5 if r["causal"] else 1.0) * sum(n * n for n in r["lengths"])
    found = []
    (per, _), = Counter(r["useful_flops"] / pairs(r) for r in rows).most_common(1)  # H·D, as most rows have it
    for i, r in enumerate(rows):
        half = 0.5 if r["causal"] else 1.0
        if abs(r["useful_flops"] / pairs(r) - per) > 1e-9 * per:
            found.append(f"result[{i}].useful_flops {r['useful_flops']!r} (its lengths: {per * pairs(r)!r})")
        padded = 4 * half * per * len(r["lengths"]) * max(r["lengths"]) ** 2
        wanted = padded if r["way"].startswith("padded") else r["useful_flops"]
        if abs(r["computed_flops"] - wanted) > 1e-9 * wanted:
            found.append(f"result[{i}].computed_flops {r['computed_flops']!r} (its lengths: {wanted!r})")
    return found


def run_lines(name: str, result, memory: int | None) -> list[str]:
    """A run's own figures: its rows that did not run (out of memory, unavailable) hold no timings, every
    peak lies between the output it allocates (where the row gives its shape) and the GPU's memory, and
    what the verification, fallback and varlen runs decide themselves."""
    found = []

    for path, node in dicts(result, "result"):
        timed = [k for k in TIMED if k in node]
        for flag in ("oom", "unavailable"):
            if node.get(flag) and timed:
                found.append(f"{path}.{flag} {node[flag]!r}, yet it has timings ({timed[0]})")
        if "peak_extra_bytes" in node:
            shape = node.get("shape") if len(node.get("shape") or ()) == 4 else None
            least = output_bytes(shape, node.get("dtype")) if shape else 0
            found.extend(peak_lines(f"{path}.peak_extra_bytes", node["peak_extra_bytes"], least, memory))
    found += {"verify": verify_lines, "fallback": fallback_lines, "varlen": varlen_lines}.get(name, lambda r: [])(result)
    return found


# ---- two GPUs -----------------------------------------------------------------------------------

def cp_lines(summary: dict, sweep: list[dict] | None, memory: int | None, tolerance: float | None) -> list[str]:
    """A two-GPU record keeps its CUDA-event medians without their samples (they were measured once):
    each rank's lies within RANK_BAND of the busy time of its own profiled median forward, and the single
    GPU's rate within SINGLE_GPU_BAND of the flash rate the sweep measured at its longest sequence of the
    same head dim; every rank's peak and error are bounded like a capture's."""
    found = []
    for r in summary["ranks"]:
        busy = trace.busy_us(r["ops"])
        if not RANK_BAND[0] * busy <= r["event_median_us"] <= RANK_BAND[1] * busy:
            found.append(f"ranks[{r['rank']}].event_median_us {r['event_median_us']!r} is not within "
                         f"{RANK_BAND[0]}-{RANK_BAND[1]}x the busy time of its profiled forward ({busy:.1f} us)")
        if "peak_extra_bytes" in r:
            found += peak_lines(f"ranks[{r['rank']}].peak_extra_bytes", r["peak_extra_bytes"],
                                output_bytes(r["local_shape"], summary.get("dtype")), memory)
        if tolerance is not None:
            found += [line for k in ("rel_err_rows", "rel_err_vs_single_gpu") if k in r
                      for line in error_lines(f"ranks[{r['rank']}].{k}", r[k], tolerance, None)]
    rate = flash_rate(sweep or [], summary["shape"][-1])
    if rate:
        single = tflops(causal_flops(summary["shape"]), summary["single_gpu"]["event_median_us"])
        if not SINGLE_GPU_BAND[0] * rate <= single <= SINGLE_GPU_BAND[1] * rate:
            found.append(f"single_gpu.event_median_us {summary['single_gpu']['event_median_us']!r} gives "
                         f"{single:.0f} TFLOP/s, not within {SINGLE_GPU_BAND[0]}-{SINGLE_GPU_BAND[1]}x of the "
                         f"sweep's flash back to back at its longest sequence ({rate:.0f} TFLOP/s)")
    return found


def flash_rate(sweep: list[dict], head_dim: int) -> float | None:
    """The flash backend's TFLOP/s back to back at the sweep's longest sequence of this head dim (at tens of
    milliseconds a forward, within a few percent of one call's)."""
    points = [r for r in sweep if r.get("path") == "flash" and r["shape"][-1] == head_dim and "tflops_back_to_back" in r]
    return max(points, key=lambda r: r["shape"][2])["tflops_back_to_back"] if points else None
