"""Claims that set the records' GPU beside the post's A100: peak ratios against measured ratios, op counts."""
from __future__ import annotations

from ...analysis import decide, hardware
from ..build import Build
from ..pieces.gpu import name, peaks
from .core import ADAPTS, Flip, Statement, claim
from .edits import each, in_run
from .wording import pct, relation, times


# ---- the A100 beside the records' GPU --------------------------------------------------------------
# A100: NVIDIA's datasheet peaks (its row of the GPU table). The records' GPU: its peaks computed the same way
# from its device query, so that every hardware ratio is peak to peak; the rungs' ratios are measured to
# measured (the post's profiler device time on the A100 over ours).

RATIO_NAMES = {"memory_gbs": "memory-bandwidth", "fp32_tflops": "FP32", "sm_clock": "SMs × clock"}  # peak_ratios' keys


def peak_ratios(build: Build) -> dict:
    """The records' GPU ÷ the post's A100, peak to peak: bandwidth, FP32 on the CUDA cores, SMs × clock."""
    h, a = peaks(build.run("hardware")), hardware.published_peaks(hardware.POST_GPU)
    return {k: h[k] / a[k] for k in RATIO_NAMES}


def rung_ratio(build: Build, stage: str) -> float:
    """The post's A100 forward time (profiler) over our device time per forward (profiler)."""
    return hardware.FIGURES[stage]["forward_us"] / build.summary(stage)["forward_device_us"]


def _where(r: float, lo: float, hi: float) -> str:
    """Where a rung's ratio lies against two peak ratios: 'below', 'between' or 'above' them, each by more than
    decide.A100_BAND of the ratio it passes, else 'at the edge of' them."""
    low, high = (decide.against(r, x, decide.A100_BAND * x) for x in (lo, hi))
    if low == "below" or high == "above":
        return low if low == "below" else high
    return "between" if (low, high) == ("above", "below") else "at the edge of"


def _bandwidth(factor: float, to: str) -> Flip:
    """The device query's memory clock `factor` times its own: the bandwidth ratio moves, the others stay."""
    return Flip("run-hardware.json", in_run("hardware", lambda r: r["query"].update(
        memory_clock_rate=round(factor * r["query"]["memory_clock_rate"]))), ADAPTS, to=to)


@claim("a100-inplace", reads=["run-hardware", "inplace"],
       flip=[_bandwidth(0.8, "above"), _bandwidth(1.1, "below"),  # small moves: the math rung stays between its ratios
             Flip("inplace.json", each("forward_device_us", 3.0))])  # slower than on the A100: not "faster"
def a100_inplace(build: Build) -> Statement:
    """The in-place rung's gain against the bandwidth ratio, the one elementwise passes are expected to follow:
    below, above or near it (decide.against, within decide.A100_BAND of it), whichever the records give; and
    against the SMs × clock ratio, in the evidence. It holds where the rung is faster than on the A100."""
    p, r, gpu = peak_ratios(build), rung_ratio(build, "inplace"), name(build, "inplace")
    bandwidth = p["memory_gbs"]
    where = _where(r, *sorted((p["sm_clock"], bandwidth)))
    outcome = decide.against(r, bandwidth, decide.A100_BAND * bandwidth)
    hw = build.run("hardware")
    of_peak = hw["copy_gbs"] / peaks(hw)["memory_gbs"]
    text = (f"{times(r, 2)}, {where} the SMs × clock ratio ({times(p['sm_clock'], 2)}) and the bandwidth ratio "
            f"({times(bandwidth, 2)}), both peak to peak, and {relation(r, bandwidth, bandwidth)} the bandwidth "
            f"ratio by {pct(abs(1 - r / bandwidth))}: a copy measured on the {gpu} reaches {pct(of_peak)} of its "
            f"peak, and how near its own peak the A100 ran the post's forward is not known")
    lesson = (f"{times(r, 2)} faster on the {gpu} than on the A100, {outcome} the ratio of their memory "
              f"bandwidths ({times(bandwidth, 2)})")
    return Statement(text, r > 1, f"ratio {r:.2f}, hardware {p}", lesson=lesson, outcome=outcome)


@claim("a100-math", reads=["run-hardware", "math"],
       flip=Flip("run-hardware.json", in_run("hardware", lambda r: r["query"].update(memory_clock_rate=4_000_000))))
def a100_math(build: Build) -> Statement:
    p, r = peak_ratios(build), rung_ratio(build, "math")
    where = _where(r, p["memory_gbs"], p["fp32_tflops"])
    text = (f"{times(r, 2)}, {where} the bandwidth ratio ({times(p['memory_gbs'], 2)}) and the FP32 ratio "
            f"({times(p['fp32_tflops'], 2)}), both peak to peak")
    lesson = f"{times(r, 2)} faster on the {name(build, 'math')}, {where} the two GPUs' memory-bandwidth and FP32 ratios"
    return Statement(text, where == "between", f"ratio {r:.2f}, bandwidth {p['memory_gbs']:.2f}, FP32 {p['fp32_tflops']:.2f}",
                     lesson=lesson)


@claim("a100-fused-ampere", reads=["run-hardware", "efficient", "flash"],
       flip=Flip("run-hardware.json", in_run("hardware", lambda r: r["query"].update(multi_processor_count=90))))
def a100_fused_ampere(build: Build) -> Statement:
    p = peak_ratios(build)
    rs = {s: rung_ratio(build, s) for s in ("efficient", "flash")}
    least = min(p, key=p.get)  # the ratio the rungs are held below, named as it is: the smallest of the three
    text = (f"{times(rs['efficient'], 2)} and {times(rs['flash'], 2)}, below even the {RATIO_NAMES[least]} ratio "
            f"({times(p[least], 2)}, peak to peak), the smallest of those three")
    lesson = (f"{times(rs['efficient'], 2)} and {times(rs['flash'], 2)} faster on the {name(build, 'efficient')}, "
              f"below the two GPUs' {RATIO_NAMES[least]} ratio")
    below = decide.against(max(rs.values()), p[least], decide.A100_BAND * p[least]) == "below"
    return Statement(text, below, f"ratios {rs}, hardware {p}", lesson=lesson)


@claim("a100-cudnn", reads=["inplace", "math", "efficient", "flash", "cudnn"],
       flip=Flip("cudnn.json", each("forward_device_us", 3.0)))
def a100_cudnn(build: Build) -> Statement:
    rs = {s: rung_ratio(build, s) for s in ("inplace", "math", "efficient", "flash", "cudnn")}
    gpu = name(build, "cudnn")
    text = f"{times(rs['cudnn'], 2)}, the largest of the rungs (the post's A100 device time over the {gpu}'s, profiler)"
    return Statement(text, max(rs, key=rs.get) == "cudnn" and
                     hardware.FIGURES["cudnn"]["forward_us"] > hardware.FIGURES["flash"]["forward_us"], f"ratios {rs}",
                     lesson=f"{times(rs['cudnn'], 2)} faster on the {gpu}, the largest gain of the rungs")


@claim("math-gap", reads=["math", "inplace"], flip=Flip("math.json", each("forward_device_us", 2.0)))
def math_gap(build: Build) -> Statement:
    """The math forward over the in-place forward: here against the post's A100."""
    ours = build.summary("math")["forward_device_us"] / build.summary("inplace")["forward_device_us"]
    theirs = hardware.FIGURES["math"]["forward_us"] / hardware.FIGURES["inplace"]["forward_us"]
    lesson = f"the math forward takes {ours:.1f} times as long as the in-place one here, against {theirs:.1f} times on the A100"
    return Statement(f"{lesson} (device time per forward on both, profiler)", decide.against(ours, theirs, decide.A100_BAND * theirs) == "below",
                     f"{name(build, 'math')} {ours:.2f}, A100 {theirs:.2f}", lesson=lesson)


@claim("naive-ops-vs-a100", reads=["naive"], flip=Flip("naive.json", lambda s: s.update(ops_per_forward=s["ops_per_forward"] + 1)))
def naive_ops_vs_a100(build: Build) -> Statement:
    """Our naive op count against the post's: the same kernels plus cuBLAS's memset."""
    s = build.summary("naive")
    memsets = sum(op["kind"] == "memset" for op in s["ops"])
    theirs = hardware.FIGURES["naive"]["ops"]
    lesson = f"here the list has {s['ops_per_forward']} entries because the Memset is counted too"
    return Statement(f"{lesson} ({memsets} memset beside the post's {theirs} entries)", lesson=lesson,
                     holds=memsets == 1 and s["ops_per_forward"] == theirs + memsets,
                     rests_on=f"ours {s['ops_per_forward']} with {memsets} memset(s), the post's {theirs}")
