"""Claims that set the H200 beside the post's A100: peak ratios against measured ratios, op counts."""
from __future__ import annotations

from ...analysis import decide, hardware
from ..build import Build
from .core import ADAPTS, Flip, Statement, claim
from .edits import each, in_run
from .wording import pct, relation, times


# ---- the A100 beside the H200 --------------------------------------------------------------------
# A100: NVIDIA's datasheet peaks (hardware.HARDWARE). H200: its peaks computed the same way from its device
# query, so that every hardware ratio is peak to peak; the rungs' ratios are measured to measured (the
# post's profiler device time on the A100 over ours on the H200).

RATIO_NAMES = {"hbm_gbs": "memory-bandwidth", "fp32_tflops": "FP32", "sm_clock": "SMs × clock"}  # peak_ratios' keys


def peak_ratios(build: Build) -> dict:
    """H200 ÷ A100, peak to peak: bandwidth, FP32 on the CUDA cores, SMs × clock."""
    h, a = hardware.h200_peaks(build.run("hardware")), hardware.a100_peaks()
    return {k: h[k] / a[k] for k in RATIO_NAMES}


def rung_ratio(build: Build, stage: str) -> float:
    """The post's A100 forward time (profiler) over our H200 device time per forward (profiler)."""
    return hardware.FIGURES[stage]["forward_us"] / build.summary(stage)["forward_device_us"]


def _where(r: float, lo: float, hi: float) -> str:
    """Where a rung's ratio lies against two peak ratios: 'below', 'between' or 'above' them, each by more than
    decide.A100_BAND of the ratio it passes, else 'at the edge of' them."""
    low, high = (decide.against(r, x, decide.A100_BAND * x) for x in (lo, hi))
    if low == "below" or high == "above":
        return low if low == "below" else high
    return "between" if (low, high) == ("above", "below") else "at the edge of"


@claim("a100-inplace", reads=["run-hardware", "inplace"],
       flip=[Flip("run-hardware.json", in_run("hardware", lambda r: r["query"].update(memory_clock_rate=1_000_000))),
             Flip("run-hardware.json", in_run("hardware", lambda r: r["query"].update(smi_clocks_max_sm_mhz=2_600)),
                  ADAPTS, to="below")])
def a100_inplace(build: Build) -> Statement:
    """The in-place rung's gain against the SMs × clock and the bandwidth ratios; the lesson (and the page)
    read it as below the bandwidth ratio, the one elementwise passes are expected to follow."""
    p, r = peak_ratios(build), rung_ratio(build, "inplace")
    where = _where(r, p["sm_clock"], p["hbm_gbs"])
    below = decide.against(r, p["hbm_gbs"], decide.A100_BAND * p["hbm_gbs"]) == "below"
    hw = build.run("hardware")
    of_peak = hw["copy_gbs"] / hardware.h200_peaks(hw)["hbm_gbs"]
    text = (f"{times(r, 2)}, {where} the SMs × clock ratio ({times(p['sm_clock'], 2)}) and the bandwidth ratio "
            f"({times(p['hbm_gbs'], 2)}), both peak to peak, and {relation(r, p['hbm_gbs'], p['hbm_gbs'])} the "
            f"bandwidth ratio by {pct(abs(1 - r / p['hbm_gbs']))}: a copy measured on the H200 reaches "
            f"{pct(of_peak)} of its peak, and how near its own peak the A100 ran the post's forward is not known")
    lesson = (f"{times(r, 2)} faster on the H200 than on the A100, below the ratio of their memory bandwidths "
              f"({times(p['hbm_gbs'], 2)})")
    return Statement(text, below, f"ratio {r:.2f}, hardware {p}", lesson=lesson, outcome=where)


@claim("a100-math", reads=["run-hardware", "math"],
       flip=Flip("run-hardware.json", in_run("hardware", lambda r: r["query"].update(memory_clock_rate=4_000_000))))
def a100_math(build: Build) -> Statement:
    p, r = peak_ratios(build), rung_ratio(build, "math")
    where = _where(r, p["hbm_gbs"], p["fp32_tflops"])
    text = (f"{times(r, 2)}, {where} the bandwidth ratio ({times(p['hbm_gbs'], 2)}) and the FP32 ratio "
            f"({times(p['fp32_tflops'], 2)}), both peak to peak")
    lesson = f"{times(r, 2)} faster on the H200, {where} the two GPUs' memory-bandwidth and FP32 ratios"
    return Statement(text, where == "between", f"ratio {r:.2f}, bandwidth {p['hbm_gbs']:.2f}, FP32 {p['fp32_tflops']:.2f}",
                     lesson=lesson)


@claim("a100-fused-ampere", reads=["run-hardware", "efficient", "flash"],
       flip=Flip("run-hardware.json", in_run("hardware", lambda r: r["query"].update(multi_processor_count=90))))
def a100_fused_ampere(build: Build) -> Statement:
    p = peak_ratios(build)
    rs = {s: rung_ratio(build, s) for s in ("efficient", "flash")}
    least = min(p, key=p.get)  # the ratio the rungs are held below, named as it is: the smallest of the three
    text = (f"{times(rs['efficient'], 2)} and {times(rs['flash'], 2)}, below even the {RATIO_NAMES[least]} ratio "
            f"({times(p[least], 2)}, peak to peak), the smallest of those three")
    lesson = (f"{times(rs['efficient'], 2)} and {times(rs['flash'], 2)} faster on the H200, below the two GPUs' "
              f"{RATIO_NAMES[least]} ratio")
    below = decide.against(max(rs.values()), p[least], decide.A100_BAND * p[least]) == "below"
    return Statement(text, below, f"ratios {rs}, hardware {p}", lesson=lesson)


@claim("a100-cudnn", reads=["inplace", "math", "efficient", "flash", "cudnn"],
       flip=Flip("cudnn.json", each("forward_device_us", 3.0)))
def a100_cudnn(build: Build) -> Statement:
    rs = {s: rung_ratio(build, s) for s in ("inplace", "math", "efficient", "flash", "cudnn")}
    text = f"{times(rs['cudnn'], 2)}, the largest of the rungs (the post's A100 device time over the H200's, profiler)"
    return Statement(text, max(rs, key=rs.get) == "cudnn" and
                     hardware.FIGURES["cudnn"]["forward_us"] > hardware.FIGURES["flash"]["forward_us"], f"ratios {rs}",
                     lesson=f"{times(rs['cudnn'], 2)} faster on the H200, the largest gain of the rungs")


@claim("math-gap", reads=["math", "inplace"], flip=Flip("math.json", each("forward_device_us", 2.0)))
def math_gap(build: Build) -> Statement:
    """The math forward over the in-place forward: here against the post's A100."""
    ours = build.summary("math")["forward_device_us"] / build.summary("inplace")["forward_device_us"]
    theirs = hardware.FIGURES["math"]["forward_us"] / hardware.FIGURES["inplace"]["forward_us"]
    text = (f"the math forward takes {ours:.1f} times as long as the in-place one here, against "
            f"{theirs:.1f} times on the A100 (device time per forward on both, profiler)")
    lesson = (f"the math forward takes {ours:.1f} times as long as the in-place one here, against {theirs:.1f} times "
              f"on the A100")
    return Statement(text, decide.against(ours, theirs, decide.A100_BAND * theirs) == "below",
                     f"H200 {ours:.2f}, A100 {theirs:.2f}", lesson=lesson)


@claim("naive-ops-vs-a100", reads=["naive"], flip=Flip("naive.json", lambda s: s.update(ops_per_forward=s["ops_per_forward"] + 1)))
def naive_ops_vs_a100(build: Build) -> Statement:
    """Our naive op count against the post's: the same kernels plus cuBLAS's memset."""
    s = build.summary("naive")
    memsets = sum(op["kind"] == "memset" for op in s["ops"])
    theirs = hardware.FIGURES["naive"]["ops"]
    text = (f"here the list has {s['ops_per_forward']} entries because the Memset is counted too ({memsets} memset "
            f"beside the post's {theirs} entries)")
    return Statement(text, lesson=f"here the list has {s['ops_per_forward']} entries because the Memset is counted too",
                     holds=memsets == 1 and s["ops_per_forward"] == theirs + memsets,
                     rests_on=f"ours {s['ops_per_forward']} with {memsets} memset(s), the post's {theirs}")
