"""The pieces of the chapters on the backward pass and on attention across two GPUs.

A backward capture (`<stage>-bwd`) holds one annotated backward, its device work counted on the
calling thread and on autograd's engine thread; a context-parallel capture (`cp-...`) holds every
rank. Their stamp, kernels and footprint are the stage pieces' own (`stamp flash-bwd`).
"""
from __future__ import annotations

from ...analysis import kernel_names, oplist, trace
from ...analysis.flops import causal_flops, tflops
from ...analysis.oplist import KIND_LABEL
from ...model.procedure import BWD_FLOP_FACTOR, MEASURED_ONCE_TWO_GPU
from ...model.stages import STAGES
from ...text import dims, escape, shape, size, us
from ..render import plots, tables
from ..build import Build
from ..words import listed, title
from .captures import trace_controls
from ..registry import ALL, one_of, piece

GRADIENTS = ("dq", "dk", "dv")


def bwd_tflops(s: dict) -> float:
    """Backward TFLOP/s: the causal forward's FLOPs times the backward's factor, over the backward's device time
    (the median profiled one's), the time the table ranks backwards by."""
    return tflops(BWD_FLOP_FACTOR * causal_flops(s["shape"]), s["backward_device_us"])


def grad_error(s: dict) -> float:
    return max(s["grad_rel_err"][g] for g in GRADIENTS)


# ---- the backward pass ---------------------------------------------------------------------------

@piece("compare", captures=ALL, unavailable=True, kind="backward")
def compare_backward(build: Build, *records):
    """Every backend's backward side by side: ops, threads, time, TFLOP/s, gradients' error."""
    rows, forwards = [], []
    for record in records:
        s = build.summary(record)
        link = f"[{title(s)}]({'fused' if STAGES[s['stage']].group == 'provider' else s['stage']}.md)"
        if "unavailable" in s:
            rows.append((link, f"{tables.NOT_RUN}: {tables.why_unavailable(s['unavailable'])}",
                         *["—"] * 6))
            continue
        rows.append((link, s["ops_per_backward"], s["ops_on_calling_thread_each"][0], us(s["backward_device_us"]),
                     f"{us(s['event_median_us'])}<br>({us(s['event_p10_us'])}–{us(s['event_p90_us'])})",
                     f"{bwd_tflops(s):.0f}",
                     f"{s['backward_device_us'] / s['forward_device_us']:.1f}×",
                     f"{grad_error(s):.1e}"))
        forwards.append(f"    - {title(s)}: {us(s['forward_device_us'])}")
    reps = build.summary(records[0])["settings"]["event_reps"]
    return (tables.table(["stage", "device ops / backward", "of them launched from the calling thread",
                          "device time / backward (profiler, sum of kernels)",
                          "one call: CUDA-event median (p10–p90)", f"TFLOP/s ({BWD_FLOP_FACTOR}× causal fwd FLOPs, device time)",
                          "backward ÷ forward (device time, same trace)",
                          "worst grad error vs fp64"], rows, "lrrrrrrr")
            + f"\n\nShape {dims(build.summary(records[0])['shape'])}, bf16, causal; each backward the median profiled one."
              + '\n\n??? note "How the columns were measured, and the forwards the ratios divide by"\n'
              f"    *Device time*: the durations of the backward's device ops added up, from the profiler's trace. "
              f"*Backward ÷ forward*: over the device time of the forwards profiled before the backwards in that trace "
              f"(the median of them), so that both sides of the ratio come from one run. *One call*: CUDA events "
              f"around one `backward()` call, synchronised, {reps} calls, each after a fresh forward (no profiler). The "
              f"backward's FLOPs are counted as {BWD_FLOP_FACTOR} times the causal forward's (two matmuls forward; five "
              f"backward, one of them recomputing QKᵀ), a convention, not a count of what each kernel does. The "
              f"forwards' device time in each backward's trace:\n\n" + "\n".join(forwards))


@piece("saved", captures=ALL, unavailable=True, kind="backward")
def saved(build: Build, *records):
    """What each backend's forward hands to autograd for the backward (saved_tensors_hooks, in order), and
    the memory that holds it."""
    rows = []
    for record in records:
        s = build.summary(record)
        if "unavailable" in s or "saved" not in s:
            rows.append((title(s), escape(s.get("unavailable") or s.get("saved_unavailable")), *["—"] * 3))
            continue
        big = [r for r in s["saved"] if r["what"] not in ("q", "k", "v", "output", "scalar")]
        items = "<br>".join(f"{'' if r['what'] == 'intermediate' else escape(r['what']) + ' '}"  # the header says what
                            f"{shape(r['shape']) or 'scalar'} {escape(r['dtype'])} ({size(r['bytes'])})" for r in big) or "—"
        inputs = ", ".join(sorted({r["what"] for r in s["saved"] if r["what"] in ("q", "k", "v", "output")}))
        m = s["memory"]
        rows.append((title(s), items, inputs or "—", size(m["held_after_forward_bytes"]), size(m["peak_backward_bytes"])))
    return tables.table(["stage", "saved besides the inputs and output (shape, dtype, size)", "inputs / output saved",
                         "held from forward to backward", "peak during backward"], rows, "lllrr") + (
        "\n\nA tensor saved under two shapes (a view for the batched matmul) is listed twice but occupies memory "
        "once. *Held from forward to backward*: memory allocated by the forward and still live when it returns (the "
        "output and what autograd saved). *Peak during backward*: the most allocated during `backward()` beyond what "
        "was live before the forward, the three gradients included (the list: `torch.autograd.graph."
        "saved_tensors_hooks`).")


@piece("ops", captures=1, kind="backward")
def ops_backward(build: Build, record):
    """One backward's device ops in launch order, with the autograd node that launched each: the backward the
    trace figure draws (Build.shown)."""
    s = build.summary(record)
    rows = []
    for i, op in enumerate(s["ops"], 1):
        nodes = [n.removeprefix(trace.AUTOGRAD_ENGINE + ": ") for n in oplist.launching_path(s, op)
                 if n.startswith(trace.AUTOGRAD_ENGINE)]
        info = kernel_names.explain(op["name"])
        rows.append((i, KIND_LABEL[op["kind"]], us(op["duration_us"]), tables.kernel(op["name"]), info["library"],
                     tables.unit(info["math_unit"]), f"{tables.code(' › '.join(nodes)) if nodes else '—'} › {op['launch']}"))
    each = ", ".join(map(str, s["ops_per_backward_each"]))
    return tables.table(["#", "kind", "time", "kernel (hover for the full name)", "library", "math unit",
                         "autograd node › launch"], rows, "rlr") + (
        f"\n\n{s['ops_per_backward']} device ops in one backward ({each} in the {len(s['ops_per_backward_each'])} "
        f"profiled backwards), {us(s['backward_device_us'])} of device time (sum of their durations, profiler); "
        f"CUDA-event median of `backward()` {us(s['event_median_us'])} over {s['settings']['event_reps']} runs. "
        f"Launched from the thread that called `backward()`: {s['ops_on_calling_thread_each'][0]}.")


BWD_VALUES = {
    "ops": lambda s: str(s["ops_per_backward"]),
    "calling_thread": lambda s: str(s["ops_on_calling_thread_each"][0]),
    "device_time": lambda s: us(s["backward_device_us"]),
    "event_median": lambda s: us(s["event_median_us"]),
    "largest_saved": lambda s: size(max(r["bytes"] for r in s["saved"] if r["what"] == "intermediate")),
    "row_stats": lambda s: size(next(r["bytes"] for r in s["saved"] if r["what"] == "intermediate"
                                     and len(r["shape"]) == 3)),  # one float per query row: B×H×S
}


@piece("value", captures=1, unavailable=True, inline=True, kind="backward")
def value_backward(build: Build, record, field):
    """One number of a backward capture, inline in prose."""
    return one_of(BWD_VALUES, field, "value")(build.summary(record))


@piece("key-averages", captures=1, kind="backward")
def key_averages_backward(build: Build, record):
    s = build.summary(record)
    steps = len(s["ops_per_backward_each"])
    return tables.key_averages(s) + (f"\n\n`key_averages()` over the whole profile: {steps} forwards and {steps} "
                                     f"backwards, autograd's thread included.")


@piece("download", captures=1, inline=True, kind="backward")
def download_backward(build: Build, record):
    at = build.link(record)
    return (f"[:material-download: {record}.trace.json.gz]({at}/{record}.trace.json.gz) · "
            f"[summary&nbsp;JSON]({at}/{record}.json)")


# ---- two GPUs ------------------------------------------------------------------------------------

def per_rank(s: dict, value) -> str:
    """`value` of each rank in one table cell, a line per rank."""
    return "<br>".join(f"{r['rank']}:&nbsp;{value(r)}" for r in s["ranks"])


@piece("compare", captures=ALL, kind="cp")
def compare_cp(build: Build, *records):
    """Context-parallel captures side by side: one GPU against the ring, communication hidden, correctness."""
    rows = []
    for record in records:
        s = build.summary(record)
        shard = "head-and-tail" if s["load_balance"] else "contiguous halves"
        rows.append((f"{s['shape'][2]:,}", f"{escape(s['rotate'])}, {shard}", us(s["single_gpu"]["event_median_us"]),
                     us(s["cp_event_median_us"]), f"**{s['speedup']:.2f}×**",
                     per_rank(s, lambda r: us(r["forward_device_us"])),
                     per_rank(s, lambda r: f"{us(r['overlap']['overlap_us'])} of {us(r['overlap']['communication_us'])}"),
                     f"{max(r['rel_err_rows'] for r in s['ranks']):.1e}"))
    s = build.summary(records[0])
    return tables.table(["sequence length", "rotation, causal shard", "one GPU (one call: CUDA-event median)",
                         f"{s['world_size']} GPUs (slower rank's CUDA-event median)", "speedup",
                         "device time, per rank (profiler, sum of ops)",
                         "NCCL time hidden behind compute, per rank", "rel. error vs fp64 (sampled rows)"],
                        rows, "rlrrrrrr") + (
        f"\n\nB=1, H={s['shape'][1]}, D={s['shape'][3]}, bf16, causal, SDPA's {escape(s['backend'])} backend on every rank and "
        f"for the one-GPU run (same inputs, same run). Times are CUDA-event medians of {s['settings']['event_reps'] // 2} "
        f"calls after warm-up, each call started on every rank together after a barrier; the {s['world_size']}-GPU time "
        f"is the slower rank's median. The error is measured on 32 query rows spread over the sequence, against "
        f"float64 attention over all keys.")


@piece("ranks", captures=1, kind="cp")
def ranks(build: Build, record):
    """Per rank: which positions it holds, its causal work, its forward, and its communication."""
    s = build.summary(record)
    total = sum(r["causal_pairs"] for r in s["ranks"])
    rows = []
    for r in s["ranks"]:
        o = r["overlap"]
        held = ", ".join(f"{a:,}–{b:,}" for a, b in r["positions"])
        flash = [op for op in r["ops"] if op["kind"] == "kernel" and kernel_names.fingerprint([op["name"]]) == "flash"]
        rows.append((r["rank"], held, f"{r['causal_pairs'] / total:.1%}", r["ops_per_forward"],
                     " + ".join(us(op["duration_us"]) for op in flash), us(r["forward_device_us"]),
                     us(trace.busy_us(r["ops"])),
                     f"{us(o['communication_us'])}: {us(o['overlap_us'])} hidden, {us(o['exposed_us'])} exposed",
                     us(r["event_median_us"])))
    return tables.table(["rank", "query positions held", "share of the causal (query, key) pairs",
                         "device ops / forward", "attention kernels", "device time / forward (profiler, sum of ops)",
                         "GPU busy / forward (profiler, union of ops)", "NCCL time",
                         "one call: CUDA-event median"], rows, "rlrrlrrlr") + (
        f"\n\nRotation {s['rotate']}, load balancer {'on' if s['load_balance'] else 'off'}; shape {shape(s['shape'])} "
        f"in all, bf16, causal. *Device time* adds up the durations of the rank's "
        "ops in its median profiled forward; ops on two streams at once count twice, so it can exceed the time "
        "the call took. *GPU busy* counts the time at least one op ran (the union of their intervals). "
        "*NCCL time* is the time any NCCL kernel ran on that GPU during the forward; *hidden* is the part of it "
        "during which a compute kernel ran too (on another stream), *exposed* the rest. Counted per rank by "
        "correlation inside that rank's annotated forward.")


@piece("ops", captures=1, kind="cp")
def ops_cp(build: Build, record, rank="0"):
    """One rank's forward, in launch order."""
    r = build.summary(record)["ranks"][int(rank)]
    rows = [(i, us(op["start_us"]), us(op["duration_us"]), tables.kernel(op["name"]), kernel_names.explain(op["name"])["library"],
             shape(op["grid"]) if op.get("grid") else "—") for i, op in enumerate(r["ops"], 1)]
    return tables.table(["#", "starts at", "time", "kernel (hover for the full name)", "library", "grid"], rows,
                        "rrr") + (
        f"\n\nRank {r['rank']}: {r['ops_per_forward']} device ops in one forward "
        f"({', '.join(map(str, r['ops_per_forward_each']))} in the profiled forwards). *Starts at*: from the start "
        f"of the annotated forward on the CPU.")


@piece("stamp", captures=1, kind="cp")
def stamp_cp(build: Build, record):
    """Which GPUs and software took a two-GPU capture, as a closed box whose title names the GPU."""
    s = build.summary(record)
    detail = (f"{s['world_size']} ranks, shape {tuple(s['shape'])} bf16, causal, rotation {escape(s['rotate'])}, "
              f"{'head-and-tail' if s['load_balance'] else 'no'} load balance · code hash `{s['source_hash']}`")
    medians = [what for key, what in MEASURED_ONCE_TWO_GPU.items()
               if any(key in p and "event_times_us" not in p for p in [*s["ranks"], s["single_gpu"]])]
    return tables.closed(tables.environment(s, "Captured", detail + tables.measured_once(
        [*s["ranks"], s["single_gpu"]], medians, "the merged trace and these medians")))


RANK_VALUES = {  # value CP-RECORD rank0.exposed, rank1.hidden_pct ...
    "exposed": lambda r: us(r["overlap"]["exposed_us"]),
    "hidden_pct": lambda r: f"{100 * r['overlap']['hidden_fraction']:.0f} %",
}
def _pair_shares(s: dict) -> list[str]:
    """Each rank's share of the causal (query, key) pairs, as a page gives it."""
    total = sum(r["causal_pairs"] for r in s["ranks"])
    return [f"{100 * r['causal_pairs'] / total:.0f} %" for r in s["ranks"]]


CP_VALUES = {
    "speedup": lambda s: f"{s['speedup']:.2f}×",
    "pair_shares": lambda s: " and ".join(_pair_shares(s)),
    "last_share": lambda s: _pair_shares(s)[-1],
    "single": lambda s: us(s["single_gpu"]["event_median_us"]),
    "cp": lambda s: us(s["cp_event_median_us"]),
}


@piece("value", captures=1, inline=True, kind="cp")
def value_cp(build: Build, record, field):
    """One number of a context-parallel capture, inline in prose: a run's (speedup) or a rank's (rank0.exposed)."""
    s = build.summary(record)
    if field.startswith("rank") and "." in field:
        rank, what = field.removeprefix("rank").split(".", 1)
        if what in RANK_VALUES:
            return RANK_VALUES[what](s["ranks"][int(rank)])
    elif field in CP_VALUES:
        return CP_VALUES[field](s)
    raise KeyError(f"unknown value {field!r} (known: {', '.join(CP_VALUES)}, rankN.{{{','.join(RANK_VALUES)}}})")


@piece("trace", captures=1, kind="cp")
def trace_cp(build: Build, record, axis=None):
    """The ranks of one step on one timeline; `axis=A,B`: one time axis with A's and B's, so their lengths compare."""
    s = build.summary(record)
    others = [r for r in (axis or "").split(",") if r and r != record]
    span = max((plots.rank_forwards(build.summary(r), build.trace(r))[2] for r in others), default=0)
    balance = "" if s["load_balance"] else ", load balancer off"
    label = f"{s['title']}{balance}: {s['world_size']} × {s['device']}, {' × '.join(map(str, s['shape']))}, {s['dtype']}"
    step = plots.rank_forwards(s, build.trace(record))  # the trace walked once, for the figure and its idle shares
    idle = [100 * x for x in plots.rank_idle_shares(step)]
    shares = [f"Rank 0's GPU sat idle for {idle[0]:.0f} % of this step"] + [
        f"rank {r['rank']}'s for {x:.0f} %" for r, x in zip(s["ranks"][1:], idle[1:])]
    named = lambda o: (f"the {'balanced' if o['load_balance'] else 'unbalanced'} {o['rotate']} step at "
                       f"S={o['shape'][2]:,}")
    scaled = (f"*Drawn on one time axis with {listed([named(build.summary(r)) for r in others])}, so their lengths "
              f"compare.*\n\n"
              if others else "")
    return (f"{plots.ranks_timeline(s, step, axis_us=span)}\n\n{scaled}"
            f"{listed(shares)} (the empty stretches of their lanes, from the first rank's annotation to the last "
            f"GPU op).\n\n"
            f"*Hover a bar for its name and duration. The file holds every rank (Perfetto shows them as processes "
            f"*rank 0* and *rank 1*).*\n\n" + trace_controls(build, record, label))
