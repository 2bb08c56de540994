"""Claims about the ladder's forwards, answered from the op list each chapter shows."""
from __future__ import annotations

from ...analysis import decide, kernel_names, oplist
from ...text import escape, us
from ..build import Build
from ..words import listed, short, title
from ..pieces.captures import scores_bytes
from ..pieces.runs import clock_condition, copy_rate
from .core import Flip, Statement, claim
from .edits import in_run, in_trace, no_copies, renamed, scale
from .wording import pct, times


# ---- the ladder's guesses, answered from the forward each chapter shows -------------------------------

def _matmuls(s: dict) -> list[tuple[int, dict]]:
    """The cuBLAS kernels of a forward, with their numbers in its op list."""
    return [(i, op) for i, op in enumerate(s["ops"], 1)
            if op["kind"] == "kernel" and kernel_names.explain(op["name"])["library"].startswith("cuBLAS")]


def _aten(s: dict, op: dict) -> str:
    """The innermost aten op that launched a device op (`masked_fill_`, `bmm`, ...)."""
    path = [n for n in oplist.launching_path(s, op) if n.startswith("aten::")]
    return path[-1].removeprefix("aten::") if path else "?"


@claim("longest-op", reads=lambda stage: [stage],
       flip=lambda stage: Flip(f"{stage}.trace.json.gz", in_trace("kernel", "nvjet", 10.0)))
def longest_op(build: Build, stage, launched_by) -> Statement:
    """The longest op of the forward a chapter shows, named by the aten op that launched it, against the
    longer of its matmuls: `say longest-op naive masked_fill_`."""
    s = build.summary(stage)
    i, op = max(enumerate(s["ops"], 1), key=lambda io: io[1]["duration_us"])
    j, mm = max(_matmuls(s), key=lambda jm: jm[1]["duration_us"])
    text = (f"the longest is op {i}, launched by `{_aten(s, op)}`: {us(op['duration_us'])}, "
            f"{times(op['duration_us'] / mm['duration_us'])} the longer matmul (op {j}, {us(mm['duration_us'])})")
    lesson = (f"the longest is op {i}, launched by `{_aten(s, op)}`, {times(op['duration_us'] / mm['duration_us'])} as "
              f"long as the longer matmul")
    return Statement(text, _aten(s, op) == launched_by and op["duration_us"] > mm["duration_us"], lesson=lesson,
                     rests_on=f"longest op {i} launched by {_aten(s, op)}, matmul {mm['duration_us']:.1f} µs")


@claim("unasked-copy", reads=lambda stage: [stage], flip=lambda stage: Flip(f"{stage}.trace.json.gz", no_copies))
def unasked_copy(build: Build, stage) -> Statement:
    """The device copy no line of a forward's code asks for: the Memcpy an out-of-place op makes through `clone`."""
    s = build.summary(stage)
    copies = [(i, op, oplist.launching_path(s, op)) for i, op in enumerate(s["ops"], 1) if op["kind"] == "memcpy"]
    if len(copies) != 1:
        return Statement(f"{len(copies)} copies in the forward", False, f"{len(copies)} memcpy ops")
    i, op, path = copies[0]
    outer = path[0].removeprefix("aten::") if path else "?"
    lesson = f"`{outer}` copies the scores, a Memcpy no line asks for"
    return Statement(f"op {i}, a Memcpy no line asks for: `{outer}` copying the scores through `clone` "
                     f"({us(op['duration_us'])}; launched from {' → '.join(path)})",
                     "aten::clone" in path, " → ".join(path), lesson=lesson)


def _saved(build: Build, stage: str, against: str):
    """The Memcpy of `stage`'s forward drawn, the device time `against`'s forward saved, and whether, by the one
    rule between processes (the two forwards come from two captures), the saving is that copy's time."""
    s = build.summary(stage)
    i, copy = next((i, op) for i, op in enumerate(s["ops"], 1) if op["kind"] == "memcpy")
    before, after = s["forward_device_us"], build.summary(against)["forward_device_us"]
    less, kept = decide.point(before - copy["duration_us"], decide.DEVICE), decide.point(after, decide.DEVICE)
    return i, copy, before, after, decide.order(less, kept) == 0, decide.margin(less, kept)


@claim("copy-cost", reads=lambda stage, against: [stage, against, "run-hardware"],
       flip=Flip("run-hardware.json", in_run("hardware", lambda r: r.update(copy_us_each=scale(r["copy_us_each"], 2.0)))))
def copy_cost(build: Build, stage="naive", against="inplace") -> Statement:
    """What the out-of-place copy should cost (its bytes in and out over the copy rate measured on the same
    GPU) against what it took, and what dropping it saved: the in-place chapter's arithmetic."""
    s = build.summary(stage)
    i, copy, before, after, is_copy, margin = _saved(build, stage, against)
    hw = build.run("hardware")
    size = scores_bytes(s)
    expected = 2 * size / (copy_rate(build) * 1e3)  # bytes read + written, at the measured rate (GB/s → bytes/µs)
    off = 100 * abs(copy["duration_us"] / expected - 1)
    text = (f"{size / 2**20:.0f} MiB in and {size / 2**20:.0f} MiB out at the copy rate measured on the {escape(s['device'])} "
            f"({copy_rate(build):,.0f} GB/s, bytes read + written, {clock_condition(hw.get('clocks'))}) should take "
            f"{us(expected)}; the Memcpy (op {i} of the "
            f"{short(stage)} forward) took {us(copy['duration_us'])}, within {off:.1f} % of that. Writing the mask in "
            f"place saved {us(before - after)} of device time between the two forwards drawn (those of the op lists): "
            f"the copy's time, within the {pct(margin)} a forward's device time can move between two captures")
    lesson = f"the copy took {us(copy['duration_us'])}, within {off:.1f} % of what its bytes take at the GPU's measured copy rate"
    within = decide.against(abs(copy["duration_us"] / expected - 1), decide.COPY_WITHIN, decide.POINT_BAND) == "below"
    return Statement(text, within and is_copy, lesson=lesson,
                     rests_on=f"expected {expected:.1f} µs, copy {copy['duration_us']:.1f} µs, saved {before - after:.1f} µs, "
                              f"forwards {before:.1f} and {after:.1f} µs")


@claim("copy-saved", reads=lambda stage, against: [stage, against],
       flip=lambda against: Flip(f"{against}.trace.json.gz", in_trace("kernel", "at::native::elementwise_kernel", 0.5)))
def copy_saved(build: Build, stage="naive", against="inplace") -> Statement:
    """What dropping the copy saved of the forward's device time: the copy's time, by the one rule."""
    i, copy, before, after, is_copy, margin = _saved(build, stage, against)
    lesson = f"saving {us(before - after)} of {us(before)}"
    text = (f"device time of the forward drawn: {title(against)} {us(after)}, {title(stage)} {us(before)}; "
            f"{us(before - after)} saved, against the Memcpy's {us(copy['duration_us'])} (op {i} of {short(stage)}'s), "
            f"{'the same' if is_copy else 'not the same'} within the {pct(margin)} a forward's device time can move "
            f"between two captures")
    return Statement(text, is_copy, f"saved {before - after:.1f} µs, copy {copy['duration_us']:.1f} µs", lesson=lesson)


@claim("same-op-time", reads=lambda a, b: [a, b],
       flip=lambda b: Flip(f"{b}.trace.json.gz", in_trace("kernel", "at::native::elementwise_kernel", 0.5)))
def same_op_time(build: Build, a, b, launched_by) -> Statement:
    """One kernel in two stages' forwards (named by the aten op that launched it), each from its own capture:
    by the one rule, not told apart, or slower in `b`; faster in `b` the page does not allow ("no faster")."""
    ta, tb = ({_aten(s, op): op["duration_us"] for op in s["ops"]}[launched_by]
              for s in (build.summary(a), build.summary(b)))
    rb, ra = decide.point(tb, decide.DEVICE), decide.point(ta, decide.DEVICE)
    side = decide.order(rb, ra)
    outcome = {0: "same", 1: "slower", -1: "faster"}[side]
    apart = pct(decide.margin(rb, ra))
    verdict = {"same": "the same kernel, not told apart", "slower": f"slower in the {short(b)} forward",
               "faster": f"faster in the {short(b)} forward"}[outcome]
    text = (f"{short(b)}: {us(tb)}; {short(a)}: {us(ta)}; {100 * abs(tb / ta - 1):.1f} % apart, against the "
            f"{apart} one kernel's time can move between two captures: {verdict}")
    return Statement(text, side != -1, f"{ta:.1f} and {tb:.1f} µs", lesson=f"{us(tb)} against {us(ta)}: {verdict}",
                     outcome=outcome)


@claim("gemm-unit", reads=lambda stage: [stage],
       flip=lambda stage: Flip(f"{stage}.trace.json.gz", renamed("_ffma_", "_hmma_")))
def gemm_unit(build: Build, stage) -> Statement:
    """Which unit a forward's matmuls run on, as their kernel names say: math's guess about Tensor Cores."""
    gemms = [op["name"] for _, op in _matmuls(build.summary(stage))]
    units = {kernel_names.explain(name)["math_unit"] for name in gemms}
    lesson = ("its matmuls in fp32 on CUDA cores, not Tensor Cores" if units == {kernel_names.CUDA_CORES}
              else "its matmuls on Tensor Cores" if units == {kernel_names.TENSOR} else "its matmuls on mixed units")
    text = (f"{lesson}, as the names of its {len(gemms)} cuBLAS kernels mark them (`ffma` for the CUDA cores' fused "
            f"multiply-add, `hmma` for Tensor Cores): {listed([f'<code>{escape(n)}</code>' for n in gemms])}")
    return Statement(text, units == {kernel_names.CUDA_CORES}, ", ".join(sorted(units)), lesson=lesson)


@claim("more-ops", reads=lambda a, b: [a, b], flip=lambda a: Flip(f"{a}.json", lambda s: s.update(ops_per_forward=1)))
def more_ops(build: Build, a, b) -> Statement:
    """How many more device ops one forward launches than another."""
    na, nb = build.summary(a)["ops_per_forward"], build.summary(b)["ops_per_forward"]
    lesson = f"{na} device ops against {nb} for {short(b)}'s forward"
    return Statement(f"{lesson}, {na - nb} more (one forward's op list each)", na > nb, f"{na} and {nb}", lesson=lesson)
