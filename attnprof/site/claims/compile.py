"""Claims about what torch.compile made of the naive forward: fusion, caching, reduce-overhead, recompiles."""
from __future__ import annotations

import re

from ...analysis import decide, kernel_names
from ...text import ms, us
from ..build import Build
from ..words import count, within
from .core import ADAPTS, Flip, Statement, claim
from .edits import each, events, in_run, scale, setting
from .wording import apart, held_together, ordinal, pct, times


# ---- what torch.compile made of the naive forward ----------------------------------------------

def kernels_of(build: Build, record: str) -> list[str]:
    return [op["name"] for op in build.summary(record)["ops"] if op["kind"] == "kernel"]


@claim("inductor-fused", reads=lambda compiled, eager: [compiled, eager],
       flip=lambda compiled: Flip(
           f"{compiled}.json", lambda s: s["ops"].append(dict(s["ops"][0], kind="memcpy", name="Memcpy DtoD"))))
def inductor_fused(build: Build, compiled="naive_compiled", eager="naive") -> Statement:
    """Which eager kernels Inductor replaced by generated Triton kernels, and which it left alone."""
    mine, theirs = kernels_of(build, compiled), kernels_of(build, eager)
    generated = [k for k in mine if k.startswith("triton_")]
    kept = [k for k in mine if not k.startswith("triton_")]
    replaced = [kernel_names.label(k) for k in theirs if k not in kept]
    copies = [op for op in build.summary(eager)["ops"] if op["kind"] == "memcpy"]
    copied = f" and {count(len(copies))} cop{'ies' if len(copies) != 1 else 'y'}" if copies else ""
    lists = "; ".join(f"`{m.group(1)}`" for k in generated if (m := re.match(r"triton_[a-z]+_fused_+(.*?)_\d+$", k)))
    text = (f"the {count(len(replaced))} eager kernels{copied} between the matmuls "
            f"({', '.join(f'`{r}`' for r in replaced)}) "
            f"became {count(len(generated))} generated Triton kernel{'s' if len(generated) != 1 else ''} (its name lists "
            f"what it fused: {lists}), and the {count(len(kept))} matmul kernels are the eager forward's own "
            f"({', '.join(sorted({kernel_names.explain(k)['library'] for k in kept}))})")
    gone = not any(op["kind"] == "memcpy" for op in build.summary(compiled)["ops"])
    lesson = (f"the {count(len(replaced))} eager kernels{copied} between the matmuls became {count(len(generated))} "
              f"generated Triton kernel{'s' if len(generated) != 1 else ''}, and the matmuls stayed the eager ones")
    return Statement(text, bool(generated) and all(k in theirs for k in kept) and gone, f"{mine} against {theirs}",
                     lesson=lesson)


def _rename_generated(s):
    next(op for op in s["ops"] if op["name"].startswith("triton_"))["name"] = "triton_red_fused_other_0"


@claim("same-kernels", reads=lambda a, b: [a, b],
       flip=lambda b: [Flip(f"{b}.json", _rename_generated, ADAPTS),
                          Flip(f"{b}.json", each("forward_device_us", 1.5), ADAPTS)])
def same_kernels(build: Build, a, b) -> Statement:
    """Whether two compiled variants run the same kernels and, if so, whether those take the same device
    time (the one rule); then their one-call times."""
    ka, kb = kernels_of(build, a), kernels_of(build, b)
    if ka != kb:
        text = (f"generates different kernels ({', '.join(f'`{kernel_names.label(k)}`' for k in kb if k not in ka)} in "
                f"place of {', '.join(f'`{kernel_names.label(k)}`' for k in ka if k not in kb)})")
        return Statement(text, bool(ka) and bool(kb), f"{ka} against {kb}", "different kernels",
                         "generates different kernels")
    sa, sb = build.summary(a), build.summary(b)
    da, db = decide.samples(sa["forward_device_us_each"], decide.DEVICE), decide.samples(sb["forward_device_us_each"], decide.DEVICE)
    ta, tb = decide.samples(sa["event_times_us"], decide.ONE_CALL), decide.samples(sb["event_times_us"], decide.ONE_CALL)
    same = decide.order(db, da) == 0
    text = (f"generates the same {count(len(kb))} kernels, which take {db.text(us)} against {da.text(us)} of device "
            f"time (profiler, median and p10–p90 of {len(sb['forward_device_us_each'])} forwards)"
            + (f": not told apart, {within(db, da)}, so once compiled, the difference between `masked_fill` and "
               "`masked_fill_` is gone from the GPU" if same else f": {'more' if decide.order(db, da) > 0 else 'less'}, told apart")
            + f". One call takes {tb.text(us)} against {ta.text(us)} (CUDA-event median and p10–p90 of "
              f"{len(sb['event_times_us'])} calls), "
            + {0: f"not told apart, {within(tb, ta)}", 1: "longer, told apart", -1: "shorter, told apart"}[decide.order(tb, ta)]
            + ("; as the kernels take the same time, that difference lies outside them"
               if same and decide.told_apart(tb, ta) else ""))
    lesson = (f"generates the same {count(len(kb))} kernels, "
              + ("which take the same device time" if same else
                 f"which take {'more' if decide.order(db, da) > 0 else 'less'} device time"))
    return Statement(text, bool(kb), f"device {db} against {da}, one call {tb} against {ta}",
                     f"same kernels, device {apart(db, da)}, one call {apart(tb, ta)}", lesson)


@claim("second-compile", reads=lambda first, second: [first, second],
       flip=lambda second: [
           Flip(f"{second}.json", setting(first_call_ms=0.05)),  # a first call quicker than a compiled one
           Flip(f"{second}.json", setting(first_call_ms=5000.0), ADAPTS)])  # no cache to infer
def second_compile(build: Build, first="naive_compiled", second="inplace_compiled") -> Statement:
    """The first call of two compiled stages taken one after the other in one process: each pays for its
    compilation (decidedly above its compiled one-call times); the second much less where it runs the
    same kernels."""
    sa, sb = build.summary(first), build.summary(second)
    fa, fb = sa["first_call_ms"], sb["first_call_ms"]
    pays = all(decide.order(decide.point(s["first_call_ms"] * 1e3, decide.WALL), decide.samples(s["event_times_us"], decide.ONE_CALL)) == 1 for s in (sa, sb))
    text = f"{ms(fa)} here, and {ms(fb)} for the second"
    cached = kernels_of(build, first) == kernels_of(build, second) and fb < fa / 2
    if cached:
        text += (": it runs the same kernels, and compiled after the first in the same process (as `regenerate` "
                 "and `capture all` take them) Inductor most likely found their code in its cache (an inference: "
                 "the capture does not record cache hits)")
    lesson = f"{ms(fa)} here, and {ms(fb)} for the second" + (", which most likely found its kernels' code in Inductor's cache" if cached else "")
    return Statement(text, pays, f"{fa:.0f} and {fb:.0f} ms, one call {sa['event_median_us']:.0f} and "
                     f"{sb['event_median_us']:.0f} µs", "cached" if cached else "not cached", lesson)


@claim("reduce-overhead", reads=lambda reduce, default: [reduce, default],
       flip=lambda reduce: [
           Flip(f"{reduce}.json", events(0.25), ADAPTS),  # far faster than the default mode
           Flip(f"{reduce}.json", lambda s: s.update(ops=[o for o in s["ops"] if o["kind"] != "memcpy"]))])
def reduce_overhead(build: Build, reduce="naive_reduce", default="naive_compiled") -> Statement:
    """torch.compile's reduce-overhead mode against the default mode per call (the one rule), and the
    share of the difference its input copies account for on the GPU; the copies are work the default mode
    does not do."""
    sr, sd = build.summary(reduce), build.summary(default)
    a, b = decide.samples(sr["event_times_us"], decide.ONE_CALL), decide.samples(sd["event_times_us"], decide.ONE_CALL)
    copies = [op["duration_us"] for op in sr["ops"] if op["kind"] == "memcpy"]
    place = decide.order(a, b)
    text = (f"the graph replay with its copies takes {a.text(us)} per forward against {b.text(us)} for the default "
            f"mode (CUDA-event median and p10–p90 of one call): "
            + {1: "slower", -1: "faster, the copies included",
               0: "not told apart" + (held_together(a, b) or f", {within(a, b)}")}[place])
    if place != 1:  # what the copies cost the GPU, said however the two fall
        text += f"; its {count(len(copies))} copies take {us(sum(copies))} of device time (profiler)"
    if place == 1:
        share = sum(copies) / (a.median - b.median)
        text += (f"; the {count(len(copies))} copies themselves take {us(sum(copies))} of device time (profiler), "
                 f"{pct(share)} of that difference, so "
                 + ("most of it lies elsewhere, on the host side of the compiled wrapper most likely (an inference: "
                    "the capture does not split it)" if decide.against(share, decide.MOST, decide.POINT_BAND) == "below"
                    else "they account for most of it"))
    own = any(op["kind"] == "memcpy" for op in sd["ops"])
    lesson = ("one call of the graph replay with its copies is " +
              {1: "slower than", -1: "faster than", 0: "not told apart from"}[place] + " one of the default mode" +
              (": one call moves between processes by more than they differ" if place == 0 and held_together(a, b) else ""))
    return Statement(text, bool(copies) and not own, f"{a} against {b}, copies {sum(copies):.1f} µs, "
                     f"the default mode's own copies: {own}", apart(a, b), lesson)


@claim("recompile-cliff", reads=["run-recompile"],
       flip=Flip("run-recompile.json", in_run("recompile", lambda r: r["points"][2].update(times_us=scale(r["points"][2]["times_us"], 50.0)))))
def recompile_cliff(build: Build) -> Statement:
    """Where the recompile chart falls off its cliff: the first call past torch.compile's recompile limit."""
    r = build.run("recompile")
    points = [p for p in r["points"] if p.get("tflops")]
    drop = min(range(1, len(points)), key=lambda i: points[i]["tflops"] / points[i - 1]["tflops"])
    before, after = points[drop - 1], points[drop]
    limit = r["recompile_limit"]
    text = (f"The cliff is at S={after['shape'][2]:,}, the {ordinal(drop + 1)} new shape, one past "
            f"`torch.compile`'s limit of {limit} recompiles: that call runs at "
            f"{after['tflops']:.1f} TFLOP/s against {before['tflops']:.1f} at S={before['shape'][2]:,} "
            f"({times(before['tflops'] / after['tflops'], 0)} slower, one call's CUDA-event median), and no "
            f"later shape climbs back.")
    rest = [p["tflops"] for p in points[drop:]]
    lesson = (f"The cliff is at the {ordinal(drop + 1)} new shape, one past `torch.compile`'s limit of {limit} "
              f"recompiles, and no later shape climbs back")
    cliff = decide.against(before["tflops"] / after["tflops"], decide.RECOMPILE_CLIFF, decide.POINT_BAND) != "below"
    stays = decide.against(max(rest), min(p["tflops"] for p in points[:drop]), decide.POINT_BAND) == "below"
    return Statement(text, drop == limit and cliff and stays,
                     f"the largest drop before point {drop + 1} of {len(points)}, limit {limit}", lesson=lesson)
