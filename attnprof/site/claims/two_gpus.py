"""Claims about context parallelism on two GPUs: scaling, the rotations, causal halves, overlap."""
from __future__ import annotations

from ...analysis import decide, trace
from ...model import names
from ...text import us
from ..build import Build
from .core import Flip, Statement, claim
from .edits import setting


# ---- two GPUs ------------------------------------------------------------------------------------

def scaling_words(speedup: float, gpus: int, spread: float | None) -> str:
    """'superlinear' only when the speedup exceeds the GPU count by more than the spread of the timings;
    with no spread recorded, 'about linear' within decide.LINEAR_WITHIN."""
    margin = spread if spread is not None else decide.LINEAR_WITHIN * gpus
    return {"above": "superlinear", "near": "about linear", "below": "sublinear"}[decide.against(speedup, gpus, margin)]


LONGEST_CP = names.CP_LENGTHS[-1]  # the two-GPU records at the longest length: both rotations, and unbalanced


@claim("cp-scaling", reads=[names.cp_record(LONGEST_CP, rotate=r) for r in ("allgather", "alltoall")],
       flip=Flip(f"{names.cp_record(LONGEST_CP, rotate='allgather')}.json", setting(speedup=2.4)))
def cp_scaling(build: Build) -> Statement:
    runs = [build.summary(names.cp_record(LONGEST_CP, rotate=r)) for r in ("allgather", "alltoall")]
    n = runs[0]["world_size"]
    x = [s["speedup"] for s in runs]
    words = {scaling_words(v, n, None) for v in x}
    text = (f"about linear with either rotation ({x[0]:.2f}× all-gather, {x[1]:.2f}× all-to-all), not more: a "
            f"speedup {100 * (max(x) / n - 1):.1f} % above {n}× is no evidence of superlinear scaling when the "
            f"records keep only the median of each timing, not its spread")
    lesson = f"about linear with either rotation: {x[0]:.2f}× and {x[1]:.2f}× one GPU's speed"
    return Statement(text, words == {"about linear"}, f"speedups {x}", lesson=lesson)


@claim("cp-device-over-event", reads=[names.cp_record(names.CP_LENGTHS[0])],
       flip=Flip(f"{names.cp_record(names.CP_LENGTHS[0])}.json",
                 lambda s: s["ranks"][0].update(event_median_us=s["ranks"][0]["event_median_us"] / 2)))
def cp_device_over_event(build: Build) -> Statement:
    s = build.summary(names.cp_record(names.CP_LENGTHS[0]))
    r = s["ranks"][0]
    union = trace.busy_us(r["ops"])
    text = (f"Rank 0's device time at this length, {us(r['forward_device_us'])} (profiler), is longer than its "
            f"one-call CUDA-event median, {us(r['event_median_us'])}, though the kernels run inside the call. Device "
            f"time adds up every op, and the NCCL kernel runs on its own stream while attention runs, so that "
            f"stretch counts twice; the time at least one op ran, the union of their intervals, is {us(union)}, "
            f"within the call.")
    lesson = (f"The first rank's device time, {us(r['forward_device_us'])}, exceeds its one-call time, "
              f"{us(r['event_median_us'])}, because kernels that overlap are counted twice")
    counted_twice = decide.against(r["forward_device_us"], union, decide.POINT_BAND) == "above"
    within = decide.against(union, r["event_median_us"] * (1 + decide.UNION_WITHIN_CALL), decide.POINT_BAND) != "above"
    return Statement(text, counted_twice and within, lesson=lesson,
                     rests_on=f"sum {r['forward_device_us']:.1f}, union {union:.1f}, event {r['event_median_us']:.1f}")


@claim("causal-halves", reads=[names.cp_record(LONGEST_CP, balanced=False)],
       flip=Flip(f"{names.cp_record(LONGEST_CP, balanced=False)}.json",
                 lambda s: s["ranks"][1].update(causal_pairs=2 * s["ranks"][0]["causal_pairs"])))
def causal_halves(build: Build) -> Statement:
    """Contiguous halves of a causal sequence: how many more (query, key) pairs the later half holds."""
    s = build.summary(names.cp_record(LONGEST_CP, balanced=False))
    first, last = (r["causal_pairs"] for r in s["ranks"])
    lesson = f"{last / first:.0f} times as many keys as rank 0's"
    return Statement(f"{lesson} ({last:,} causal (query, key) pairs against {first:,})",
                     decide.against(last / first, decide.CAUSAL_LATER_HALF, decide.COUNT_WITHIN) == "near",
                     f"pairs {first} and {last}", lesson=lesson)


@claim("rotations-agree", reads=[names.cp_record(LONGEST_CP, rotate=r) for r in ("allgather", "alltoall")],
       flip=Flip(f"{names.cp_record(LONGEST_CP, rotate='alltoall')}.json",
                 lambda s: s.update(cp_event_median_us=1.2 * s["cp_event_median_us"])))
def rotations_agree(build: Build) -> Statement:
    """All-gather and all-to-all at the same length: the slower rank's one-call medians side by side."""
    a, b = (build.summary(names.cp_record(LONGEST_CP, rotate=r))["cp_event_median_us"] for r in ("allgather", "alltoall"))
    lesson = f"the times agree to within {100 * abs(a / b - 1):.1f} %"
    return Statement(f"{lesson} ({us(a)} and {us(b)}, one-call CUDA-event medians)",
                     decide.against(abs(a / b - 1), decide.ROTATIONS_AGREE_WITHIN, decide.POINT_BAND) == "below",
                     f"{a:.0f} and {b:.0f} µs", lesson=lesson)
