"""Claims of the chapter "Same chip, less memory": two GPUs of one chip, kernel by kernel (pieces/same_chip.py).

A flip changes this set's records (the other set is committed beside it, read as it is): it lengthens or shortens
a kernel of this set's trace in the direction that undoes what the claim says, whichever of the two GPUs this set's is.
"""
from __future__ import annotations

from ...analysis import decide, hardware, kernel_names
from ...model import gpus, store
from ..build import Build
from ..pieces.same_chip import LONG_ENOUGH_US, STAGES, STAGES_TITLE, Op, Pair, ops
from .core import Flip, Statement, claim
from .edits import in_trace
from .wording import pct, times

UNFUSED = ("naive", "inplace", "math")  # the forwards that write their scores to memory
MEMORY_BOUND_AT = 80.0  # % of DRAM peak on the GPU with more bandwidth: a kernel that mostly moves bytes
COMPUTE_AT = 30.0  # ... under which a kernel mostly computes (or waits), its bytes a small part of its time
WHOLE_RATIO_NEAR = 0.1  # "about the whole bandwidth ratio": within a tenth of it
# what every claim here reads of this set (the other set is read as committed): its captures, their counters, its GPU
READS = [*STAGES, *(f"{s}.counters" for s in STAGES), "run-hardware"]


def _this_set_is_slow() -> bool:
    """Whether this build's set is the GPU with less memory bandwidth of its pair (for the flips' direction)."""
    mine = gpus.by_short(store.GPU)
    others = [g for p in store.sets() if p.name != store.GPU and (g := gpus.by_short(p.name))
              and mine and (g.capability, g.sms) == (mine.capability, mine.sms)]
    return bool(mine and others and mine.memory_gbs < others[0].memory_gbs)


def _undo(factor: float) -> float:
    """A factor on this set's kernels that moves them toward the other GPU's times by `factor` (slower ones faster)."""
    return 1 / factor if _this_set_is_slow() else factor


def _ratio(o: Op) -> str:
    return o.ratio.text(lambda x: f"{x:.2f}×")


def _names(rows: list[Op]) -> str:
    return "; ".join(f"{STAGES_TITLE[o.stage]}'s `{kernel_names.label(o.name)}` {_ratio(o)}" for o in rows)


@claim("same-chip-fused", reads=READS, flip=lambda: Flip("flash.trace.json.gz", in_trace("kernel", "flash_fwd", _undo(1.5))))
def fused(build: Build) -> Statement:
    """Every fused attention kernel takes the same time on both GPUs (none told apart)."""
    p, rows = ops(build)
    fused_ = [o for o in rows if o.fused]
    moved = [o for o in fused_ if o.slower]
    text = (f"each fused attention kernel's time on the {p.slow_gpu.display} over its time on the {p.fast_gpu.display} "
            f"(profiler, median and p10–p90 of the profiled forwards of each): {_names(fused_)}; not told apart, "
            f"within the {pct(decide.margins_of(decide.DEVICE).apart)} a kernel's time can move between two machines")
    lesson = "every fused attention kernel takes the same time on both GPUs"
    return Statement(text, bool(fused_) and not moved, lesson=lesson,
                     rests_on=f"moved: {', '.join(o.stage for o in moved) or 'none'}")


def _forward(build: Build, stage: str) -> decide.Range:
    return decide.samples(build.summary(stage)["forward_device_us_each"], decide.DEVICE)


@claim("same-chip-unfused", reads=READS, flip=lambda: Flip("naive.trace.json.gz", in_trace("kernel", "", _undo(1.5))))
def unfused(build: Build) -> Statement:
    """The unfused forwards (naive, in place, math) each take longer on the GPU with less memory bandwidth."""
    p, _ = ops(build)
    ratios = {s: decide.quotient(_forward(p.slow, s), _forward(p.fast, s)) for s in UNFUSED}
    slower = {s: decide.order(_forward(p.slow, s), _forward(p.fast, s)) == 1 for s in UNFUSED}
    lo, hi = min(r.median for r in ratios.values()), max(r.median for r in ratios.values())
    text = (f"device time per forward on the {p.slow_gpu.display} over the {p.fast_gpu.display} (profiler): "
            + "; ".join(f"{STAGES_TITLE[s]} {r.text(lambda x: f'{x:.2f}×')}" for s, r in ratios.items())
            + f"; each decidedly slower, by more than the {pct(decide.margins_of(decide.DEVICE).apart)} a forward's "
              f"device time can move between two machines")
    lesson = f"naive, in place and math take {lo:.2f}–{hi:.2f}× as long with less memory"
    return Statement(text, all(slower.values()), lesson=lesson, rests_on=f"slower: {slower}")


def _bound(rows: list[Op]) -> tuple[list[Op], list[Op]]:
    counted = [o for o in rows if o.dram_pct is not None and o.kind == "kernel" and o.fast.median >= LONG_ENOUGH_US]
    return ([o for o in counted if o.dram_pct >= MEMORY_BOUND_AT], [o for o in counted if o.dram_pct < COMPUTE_AT])


@claim("same-chip-dram", reads=READS,
       flip=lambda: Flip("naive.trace.json.gz", in_trace("kernel", "vectorized_elementwise_kernel", _undo(1.4))))
def follows_dram(build: Build) -> Statement:
    """A kernel slows by as much of the bandwidth ratio as it spends on memory: those at MEMORY_BOUND_AT % of DRAM peak
    or more by about the whole ratio, those under COMPUTE_AT % by well under half of it."""
    p, rows = ops(build)
    busy, idle = _bound(rows)
    r = p.bandwidth_ratio
    whole = [decide.against(o.ratio, r, WHOLE_RATIO_NEAR * r) == "near" for o in busy]
    small = [o.ratio.hi < 1 + (r - 1) / 2 for o in idle]
    text = (f"of the kernels of {LONG_ENOUGH_US:.0f} µs or more, those at {MEMORY_BOUND_AT:.0f} % of DRAM peak or more on "
            f"the {p.fast_gpu.display} (Nsight Compute): "
            f"{_names(busy)}, each within a tenth of the bandwidth ratio ({times(r, 2)}); kernels under {COMPUTE_AT:.0f} %: "
            f"{_names(idle)}, each under {times(1 + (r - 1) / 2, 2)}, half of the step")
    lesson = (f"A kernel slows as far as memory bounds it: those that use most of the bandwidth by about the whole "
              f"{times(r, 2)}, the rest by less")
    return Statement(text, bool(busy) and bool(idle) and all(whole) and all(small), lesson=lesson,
                     rests_on=f"busy {len(busy)}, near {sum(whole)}; idle {len(idle)}, small {sum(small)}")


# ---- what the two GPUs predict for the post's A100 ------------------------------------------------------

A100_WITHIN = 0.10  # a prediction "lands within" the post's figure: a tenth either side


def predicted_a100(p: Pair, rows: list[Op], stage: str) -> float:
    """A forward's device time on the post's A100, predicted kernel by kernel from the GPU with more memory: the
    share of each op's time that memory bounds (its slowdown with less bandwidth over the whole ratio) scaled by the
    bandwidths, the rest by the compute the op runs on (Tensor Core peaks for a Tensor Core kernel, else SMs × clock)."""
    a100, fast, r = hardware.POST_GPU, p.fast_gpu, p.bandwidth_ratio
    total = 0.0
    for o in (o for o in rows if o.stage == stage):
        share = min(max((o.ratio.median - 1) / (r - 1), 0.0), 1.0)
        tensor = o.kind == "kernel" and kernel_names.explain(o.name)["math_unit"] == "tensor cores"
        compute = (fast.tensor_tflops["bf16"] / a100.tensor_tflops["bf16"] if tensor
                   else fast.sms * fast.max_sm_mhz / (a100.sms * a100.max_sm_mhz))
        total += o.fast.median * (share * fast.memory_gbs / a100.memory_gbs + (1 - share) * compute)
    return total


@claim("same-chip-a100", reads=READS,
       flip=lambda: Flip("inplace.trace.json.gz", in_trace("kernel", "softmax", _undo(0.4))))
def a100(build: Build, stage: str = "inplace") -> Statement:
    """What the two GPUs predict for the post's A100 (its bandwidth, SMs and clock; hardware.POST_GPU) lands within
    A100_WITHIN of what the post measured there (hardware.FIGURES)."""
    p, rows = ops(build)
    said = hardware.FIGURES[stage]["forward_us"]
    guess = predicted_a100(p, rows, stage)
    text = (f"{STAGES_TITLE[stage]}'s forward on the post's A100, predicted kernel by kernel from the two GPUs: "
            f"{guess:,.0f} µs, {times(guess / said, 2)} the {said:,.0f} µs the post measured, within "
            f"{pct(A100_WITHIN)}; each op's time on the {p.fast_gpu.display}, its memory-bound share (its slowdown over "
            f"the bandwidth ratio) scaled by the bandwidths, the rest by Tensor Core peaks or SMs × clock")
    lesson = f"they predict {guess:,.0f} µs for the post's A100, close to the {said:,.0f} µs it measured"
    return Statement(text, decide.against(guess / said, 1.0, A100_WITHIN) == "near", lesson=lesson,
                     rests_on=f"{guess:.0f} µs predicted, {said:.0f} µs measured")
