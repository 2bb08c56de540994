"""Scaling sweeps on a GPU: every attention path over sequence length and head dim, the two ceilings that
bound them (bf16 matmul rate, copy bandwidth), and the fastest forward we can find. An out-of-memory point
is recorded as OOM; a path that cannot load, with its reason.
"""
from __future__ import annotations

import contextlib
import sys

import torch

from . import bench
from ..analysis import derived
from ..model.stages import LONG_SHAPE, STAGES, ProviderUnavailable, select
from ..text import first_line
from .numerics import default_device, make_inputs

SEQ_LENS = (512, 1024, 2048, 4096, 8192, 16384, 32768)
HEAD_DIMS = (64, 128)
HEADS = 16
TOKENS = 16384  # batch × seq kept constant, so every point does comparable work per token
# How q, k, v sit in memory; every path is handed [B, H, S, D]-shaped tensors (views for "BSHD").
LAYOUTS = {"BHSD": "contiguous [batch, heads, seq, dim]", "BSHD": "stored [batch, seq, heads, dim], viewed as [B, H, S, D]"}


class Progress:
    """A one-line progress bar on stderr: [#####.....] 12/98 flash S=4096 D=128"""

    def __init__(self, total, stream=None):
        self.total, self.done, self.stream = total, 0, stream or sys.stderr  # sys.stderr as it is now

    def __call__(self, label):
        self.done += 1
        filled = int(30 * self.done / self.total)
        self.stream.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {self.done}/{self.total} {label:<40}")
        self.stream.flush()
        if self.done == self.total:
            self.stream.write("\n")


CEILING_ROUNDS = 5  # the ceilings' rounds: one back-to-back run of each rate a round


def _each(run, calls: int, tf32: bool | None = None):
    """One round's back-to-back run of `calls` (per call, µs), TF32 for float32 matmuls set as `tf32` says."""
    def measure() -> dict:
        old = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = old if tf32 is None else tf32
        try:
            return {"us_each": bench.back_to_back_each(run, calls=calls, reps=1)}
        finally:
            torch.backends.cuda.matmul.allow_tf32 = old
    return measure


def _rates(arms: dict, rounds: int, seed, settle=None) -> dict:
    """The rates' samples, `arms` interleaved and every round kept (a ceiling compares no rounds; its clock is its
    caption): with `settle`, at the clock the GPU holds under its power cap, `settle` run until that clock settles;
    without, each arm run once first and then in short rounds, as the sweep's forwards are timed."""
    settled = bench.settle(settle) if settle else {}
    measured = bench.interleaved(arms, rounds, seed=seed, warm=settle is None, drop=False)
    failed = next((m["error"] for m in measured.values() if "error" in m), None)
    if failed:
        raise RuntimeError(failed)
    first = next(iter(measured.values()))
    return {**{f"{name}_us_each": m["us_each"] for name, m in measured.items()},
            **{k: first[k] for k in ("rounds", "throttled", "clocks", "seed")}, **settled}


def ceilings(device="cuda", rounds=CEILING_ROUNDS, seed=None) -> dict:
    """bf16 matmul TFLOP/s on random 8192³ operands, each round a run of a few milliseconds, as the sweep times its
    forwards: the roof and the points it bounds meet the GPU in like bursts, not one after seconds of load (the SM
    clock it ran at kept beside it: `clocks`). The memory roof is the hardware run's copy rate."""
    n = 8192
    a, b = (torch.randn(n, n, device=device, dtype=torch.bfloat16) for _ in range(2))
    rates = _rates({"matmul": _each(lambda: a @ b, calls=3)}, rounds, seed)
    return {"matmul_shape": [n, n, n], **rates}  # rates: derived.py


def hardware(device="cuda", rounds=CEILING_ROUNDS, seed=None) -> dict:
    """This GPU's device query and the rates that explain the math backend against the naive forward: FP32 GEMM
    (TF32 off), the same at math's batched shape, the bf16 one at naive's, and copy bandwidth; as `ceilings`."""
    import subprocess
    props = torch.cuda.get_device_properties(device)
    query = {k: getattr(props, k) for k in ("name", "major", "minor", "multi_processor_count", "total_memory",
                                             "L2_cache_size", "max_threads_per_multi_processor",
                                             "regs_per_multiprocessor", "clock_rate", "memory_clock_rate",
                                             "memory_bus_width") if hasattr(props, k)}
    try:  # clocks as the driver reports them (MHz)
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.max.sm,clocks.max.memory,clocks.sm",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=20).stdout
        query["smi_clocks_max_sm_mhz"], query["smi_clocks_max_mem_mhz"], query["smi_clocks_sm_mhz"] = (
            int(x) for x in out.splitlines()[0].split(","))
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        pass
    n = 8192
    a, b = (torch.randn(n, n, device=device) for _ in range(2))
    bh, s, d = 8 * 16, 1024, 64  # the math backend's Q·Kᵀ at the post's shape, batched over B×H
    q, k = torch.randn(bh, s, d, device=device), torch.randn(bh, d, s, device=device)
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # FP32 on CUDA cores, as the math backend's GEMMs run
    try:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            torch.bmm(q, k)
            torch.cuda.synchronize()
        longest = max((e for e in prof.key_averages() if e.device_time_total > 0),
                      key=lambda e: e.device_time_total, default=None)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    qh, kh = q.bfloat16(), k.bfloat16()
    src = torch.randn(2**30 // 2, device=device, dtype=torch.bfloat16)  # 1 GiB
    dst = torch.empty_like(src)
    rates = _rates({"fp32_matmul": _each(lambda: a @ b, calls=5, tf32=False),
                          "fp32_bmm": _each(lambda: torch.bmm(q, k), calls=20, tf32=False),
                          "bf16_bmm": _each(lambda: torch.bmm(qh, kh), calls=20),
                          "copy": _each(lambda: dst.copy_(src), calls=10)}, rounds, seed,
                   settle=_each(lambda: a @ b, calls=5, tf32=False))
    return {"query": query, "fp32_matmul_shape": [n, n, n], "bmm_shape": [bh, s, d, s],
            "fp32_bmm_kernel": longest.key if longest else None, "copy_bytes": src.numel() * src.element_size(),
            **rates}


def inputs(shape, dtype, layout="BHSD"):
    """Fresh random q, k, v of shape [B, H, S, D], laid out in memory as `layout` says."""
    device = default_device()
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}: choose from {', '.join(LAYOUTS)}")
    if layout == "BHSD":
        return make_inputs(shape, dtype, device)
    b, h, s, d = shape
    return [t.transpose(1, 2) for t in make_inputs((b, s, h, d), dtype, device)]


def prepared(path: str, shape, dtype=torch.bfloat16, layout="BHSD", fresh: bool = True):
    """One path at one shape made ready to time (loaded, compiled, called once): (row, forward), or (row, None)
    where it cannot run. A per-shape compile starts from nothing unless `fresh` is False (the sweep's)."""
    stage = STAGES[path]
    row = {"path": path, "shape": list(shape), "layout": layout}
    if stage.fresh_compile and fresh:  # past torch.compile's recompile limit it would run eagerly
        torch._dynamo.reset()
    try:
        q, k, v = inputs(shape, dtype, layout)
        with stage.context():
            forward = stage.prepare(q, k, v)
            with torch.no_grad():
                forward()  # compile / autotune outside the timing
        return row, forward
    except ProviderUnavailable as e:
        row["unavailable"] = str(e)
    except torch.OutOfMemoryError:
        row["oom"] = True
    except RuntimeError as e:
        row["unavailable"] = first_line(e)[:300]
    q = k = v = forward = None
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return row, None


def _failed(row: dict, why: str) -> dict:
    """A path that failed while being timed: out of memory, or unavailable with the reason."""
    return {**row, "oom": True} if why.startswith("OutOfMemoryError") else {**row, "unavailable": why[:300]}


def timed_together(ready: list, calls: int, rounds: int = bench.TOGETHER_ROUNDS, seed=None,
                   one_call: bool = True) -> list[dict]:
    """`prepared`'s (row, forward) pairs timed interleaved (bench.together), each under its stage's context,
    with TFLOP/s; a path that could not be prepared keeps its row."""
    forwards = {i: forward for i, (_, forward) in enumerate(ready) if forward is not None}
    contexts = {i: STAGES[ready[i][0]["path"]].context for i in forwards}
    measured = bench.together(forwards, calls, rounds, seed, contexts, one_call=one_call)
    rows = [row for row, _ in ready]
    for i, m in measured.items():
        if "oom" in m or "error" in m:
            rows[i] = _failed(rows[i], m.get("error", "OutOfMemoryError"))
        else:
            rows[i] = derived.DERIVE["sweep"]([{**rows[i], **m}])[0]
    return rows


def point(path: str, shape, dtype=torch.bfloat16, layout="BHSD", calls=5) -> dict:
    """One path at one shape: time, TFLOP/s, peak memory; OOM or unavailability as results."""
    ready = [prepared(path, shape, dtype, layout)]
    try:
        return timed_together(ready, calls)[0]
    finally:
        ready = None
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def loads(path: str) -> bool:
    """Whether preparing a path compiles or loads a kernel, which the sweep does with the GPU let go."""
    return STAGES[path].fresh_compile or STAGES[path].provider != "PyTorch"


@contextlib.contextmanager
def static_compiles(shapes: int):
    """torch.compile keeping a static compile of every shape, under a recompile limit that leaves room."""
    config = torch._dynamo.config
    limit = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"
    with config.patch({"automatic_dynamic_shapes": False, limit: max(getattr(config, limit), 2 * shapes + 8)}):
        yield


def sweep(paths=None, seq_lens=SEQ_LENS, head_dims=HEAD_DIMS, tokens=TOKENS, heads=HEADS, seed=None):
    """Every path at every shape, a shape at a time, timed back to back and interleaved (timed_together). A
    generator (repeat.py): the paths that compile or load (`loads`) are prepared at every shape before its
    `yield`, while others measure, each compile kept; a compile while timing fails the point. The memory-hungry
    paths (naive, in-place, math: up to 69 GB) prepare at their shape holding the GPU, as an OOM point depends
    on what else holds memory; their verdicts have a wide margin (in-place at S=32768 fits with ~70 GB to
    spare, math needs more than the GPU), far beyond what the prepared paths and other processes hold."""
    paths = paths or select(sweep=True)
    shapes = [(max(1, tokens // s), heads, s, d) for d in head_dims for s in seq_lens]
    with static_compiles(len(shapes)):
        torch._dynamo.reset()
        loaded = {(path, shape): prepared(path, shape, fresh=False) for shape in shapes for path in paths if loads(path)}
        yield  # every compiled and loaded path ready
        progress, rows = Progress(len(shapes)), []
        with torch.compiler.set_stance("fail_on_recompile"):
            for i, shape in enumerate(shapes):
                progress(f"S={shape[2]} D={shape[3]}")
                ready = [loaded.pop((path, shape)) if loads(path) else prepared(path, shape) for path in paths]
                try:
                    # back to back only: the pages read the sweep's queued times, never its one-call ones
                    rows += timed_together(ready, calls=5, seed=None if seed is None else seed + i, one_call=False)
                finally:
                    ready = None
                    if torch.cuda.is_available():
                        torch.cuda.empty_cache()
    return rows


# not quiet (gpulock.py): the GPU sets its back-to-back times' pace, and quiet would pause the others for minutes
sweep.quiet = False

FASTEST_ROUNDS = bench.TOGETHER_ROUNDS  # the fastest run's rounds (bench.together's)


def fastest(shape=LONG_SHAPE, paths=None, bshd_paths=None, calls=50, rounds=FASTEST_ROUNDS, seed=None):
    """Every fused path at the target shape, `calls` queued back to back (the first launch spread thin), all
    interleaved, on contiguous [B, H, S, D] inputs and, for some, stored [B, S, H, D] (FlashAttention-4's layout;
    SDPA reads transposed views). A generator (repeat.py): every path is loaded and compiled before any is timed."""
    paths = paths or select(fused=True, sweep=True)
    bshd_paths = bshd_paths or select(fused=True, sweep=True, bshd_too=True)
    ready = ([prepared(path, shape, layout="BHSD") for path in paths]
             + [prepared(path, shape, layout="BSHD") for path in bshd_paths])
    yield  # every path loaded and compiled: a generator for measure/repeat.py
    return timed_together(ready, calls, rounds, seed)


def recompile_limit(seq_lens=(256, 384, 512, 640, 768, 896, 1024, 1152, 1280, 1408, 1536), heads=16, d=64) -> dict:
    """FlexAttention at one new shape after another, never reset: each recompiles until the recompile limit,
    past which dynamo quietly runs it eagerly (flex_attention then materialises the scores)."""
    torch._dynamo.reset()
    config = torch._dynamo.config
    limit = getattr(config, "recompile_limit", getattr(config, "cache_size_limit", None))
    rows = []
    for s in seq_lens:
        shape = (TOKENS // s, heads, s, d)
        q, k, v = make_inputs(shape, torch.bfloat16, default_device())
        forward = STAGES[select(fresh_compile=True)[0]].prepare(q, k, v)  # FlexAttention
        with torch.no_grad():
            forward()
        rows.append({"shape": list(shape), **bench.measure(forward)})
    torch._dynamo.reset()
    return {"recompile_limit": limit, "points": rows}
