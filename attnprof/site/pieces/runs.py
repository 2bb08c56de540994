"""Pieces over the measurement runs (sweeps, ceilings, serving shapes, verification): tables and charts, each
read from committed `run-*.json` records, nothing typed in by hand."""
from __future__ import annotations

import re
import statistics
from math import prod

from ...analysis import decide, hardware, reasons, summary, timing
from ...analysis.counters import BAND, BOUND_AT, verdict as counter_verdict
from ...analysis.flops import causal_flops, min_bytes, naive_bytes, tflops
from ...model import gpus
from ...model.names import counted_at, record_name
from ...model.procedure import SW_POWER_CAP
from ...model.stages import LONG_SHAPE, select
from ...text import escape, dims, shape, size, us
from ..render import plots, tables
from ..render.svg import PATH_COLOR
from ..build import Build, across, row
from ..words import FALLBACK_RUN, GRAPHS_RUN, ONE_CALL, count, listed, mhz, plain_title, short, sm_readings, title, within
from ..registry import one_of, piece
from .gpu import arch as gpu_arch, name as gpu_name, peaks

LAYOUT_TITLES = {"BHSD": "[B, H, S, D]", "BSHD": "[B, S, H, D]"}  # how q, k, v sat in memory
DEFAULT_PRICE = 3.50  # $ per GPU-hour: an assumption the reader changes on the page, not a quote


# ---- a measurement's range, as the one rule (analysis/decide.py) takes it -----------------------------

def measured(build: Build, run: str, pick, samples: str = "back_to_back_us_each") -> decide.Range:
    """The range of one measurement of a run: `pick(result)` finds its row (or part) in each repeat, `samples`
    names the raw samples there (`times_us`: one call at a time), and so their method (decide.METHOD_OF)."""
    return across(build, run, lambda result: pick(result)[samples], decide.METHOD_OF[samples])


def row_where(**match):
    """A picker for `measured`: the row of a run's result whose fields equal `match`."""
    return lambda result: row(result, **match)


def _sweep_points(build, d, path):
    return [r for r in build.run("sweep") if r["path"] == path and r["shape"][3] == int(d)]


def _value(row, key):
    return None if row.get("oom") or "unavailable" in row else row.get(key)


# ---- figures -------------------------------------------------------------------------------------

def _sweep_grid(build, heads=True) -> str:
    """What every point of the sweep shares, from its rows: the tokens per forward (batch × S) and the heads."""
    shapes = [r["shape"] for r in build.run("sweep")]
    b, h, s, _ = shapes[0]
    on_grid = [n for bb, _, n, _ in shapes if bb * n == b * s]  # past the grid's longest length, batch 1
    past = f" up to S={max(on_grid):,}, batch 1 beyond" if len(on_grid) < len(shapes) else ""
    return f"batch × S = {b * s:,} tokens{past}" + (f", {h} heads" if heads else "")


def _sweep_series(build, d, value) -> dict:
    """The sweep at head dim `d`: one series a path that ran there, `value(row)` against S."""
    return {plain_title(p): [(r["shape"][2], value(r)) for r in _sweep_points(build, d, p)]
            for p in select(sweep=True) if _sweep_points(build, d, p)}


def fig_sweep_tflops(build, d, frame=plots.CHART):
    series = _sweep_series(build, d, lambda r: _value(r, "tflops_back_to_back"))
    peak = build.run("ceilings")["matmul_tflops"]
    return plots.line_chart(series, f"sequence length S ({_sweep_grid(build)})", "TFLOP/s (causal FLOPs)",
                            f"Forward throughput, head dim {d}, bf16, causal", hlines={"bf16 matmul ceiling (measured)": peak}, frame=frame)


def fig_sweep_memory(build, d, frame=plots.CHART):
    series = _sweep_series(build, d, lambda r: _value(r, "peak_extra_bytes") or None)
    return plots.line_chart(series, f"sequence length S ({_sweep_grid(build, heads=False)})", "memory allocated by one forward",
                            f"Peak memory of one forward, head dim {d}", log_y=True, y_unit="bytes", frame=frame)


def roofline_shape(build) -> tuple:
    """The sweep's point the roofline places every path at: the long shape's heads, S and D."""
    return next(tuple(r["shape"]) for r in build.run("sweep") if tuple(r["shape"][1:]) == LONG_SHAPE[1:])


def _roofline_points(build):
    at = roofline_shape(build)
    pts = []
    for r in build.run("sweep"):
        if tuple(r["shape"]) == at and _value(r, "tflops_back_to_back"):
            moved = naive_bytes(at) if r["path"] in ("inplace", "math") else min_bytes(at)
            if r["path"] == "math":  # computes in fp32: every S×S pass moves 4-byte elements
                moved = naive_bytes(at, itemsize=4)
            pts.append((plain_title(r["path"]), causal_flops(at) / moved, r["tflops_back_to_back"]))
    return pts


def fig_roofline(build, frame=plots.CHART):
    c = build.run("ceilings")
    return plots.roofline(c["matmul_tflops"], copy_rate(build), _roofline_points(build),
                          f"Roofline at {dims(roofline_shape(build))} (bf16, causal)", frame)


def fig_decode(build, frame=plots.CHART):
    rows = build.run("decode")
    series = {f"batch {b}": [(r["kv_len"], r.get("gbs")) for r in rows if r["batch"] == b]
              for b in sorted({r["batch"] for r in rows})}
    return plots.line_chart(series, "KV cache length (tokens)", "GB/s of K and V read",
                            f"Decode: one query token per sequence, {_heads(rows)}",
                            hlines={"copy bandwidth (read + write, measured)": copy_rate(build)},
                            frame=frame)


def _heads(rows) -> str:
    """The heads and head dim a run's rows share, as a caption says them."""
    (h, d), = {(r["heads"], r["head_dim"]) for r in rows}
    return f"{h} heads, head dim {d}"


def fig_recompile(build, frame=plots.CHART):
    r = build.run("recompile")
    name = "FlexAttention, one new shape after another"
    series = {name: [(p["shape"][2], p.get("tflops")) for p in r["points"]]}
    return plots.line_chart(series, "sequence length of each successive call", "TFLOP/s", "torch.compile's recompile limit",
                            log_x=False, colors={name: PATH_COLOR[select(fresh_compile=True)[0]]}, frame=frame)


FIGURES = {"sweep-tflops-d64": lambda b, f=plots.CHART: fig_sweep_tflops(b, 64, f),
           "sweep-tflops-d128": lambda b, f=plots.CHART: fig_sweep_tflops(b, 128, f),
           "sweep-memory-d64": lambda b, f=plots.CHART: fig_sweep_memory(b, 64, f),
           "sweep-memory-d128": lambda b, f=plots.CHART: fig_sweep_memory(b, 128, f),
           "roofline": fig_roofline, "decode": fig_decode, "recompile": fig_recompile}


# ---- Markdown pieces ----------------------------------------------------------------------------

@piece("figure")
def figure(build: Build, name):
    """A chart of the measurement runs, as inline SVG, drawn wide and narrow (a phone's)."""
    draw = one_of(FIGURES, name, "figure")
    return plots.chart(lambda frame: draw(build, frame))


@piece("stamp", captures=1, kind="run")
def stamp_run(build: Build, record):
    """Which GPU and software took a run, as a closed box: its title names the GPU, its body the rest."""
    name = record.removeprefix("run-")
    r = build.run_record(name)
    took = "under 1 s" if r["wall_s"] < 1 else f"{r['wall_s']:.0f} s"
    return tables.closed(tables.environment(r, "Measured", f"in {took}; `python -m attnprof sweep --only {name}` "
                                            "retakes it"))


def power_capped(clocks: dict | None) -> bool:
    """Whether NVML named the power cap among the reasons the SM clock was held down over a run's kept rounds."""
    return bool(((clocks or {}).get("throttle_reasons") or 0) & SW_POWER_CAP)


def clock_condition(clocks: dict | None) -> str:
    """The SM clock (NVML) of a run's rounds, and the power cap where NVML named it: a ceiling's condition."""
    lo, hi = (clocks or {}).get("sm_mhz_min"), (clocks or {}).get("sm_mhz_max")
    said = "the SM clock unrecorded" if lo is None or hi is None else f"SM clock {mhz([lo, hi])}"
    return said + (", power-capped" if power_capped(clocks) else "")


def matmul_said(build: Build, run: str) -> str:
    """The ceilings run's bf16 matmul in words, beside forwards of `run`: measured at a lower clock than theirs
    and power-capped, where the records say so. A share of it is never a share of the hardware's peak."""
    mine = build.run("ceilings").get("clocks") or {}
    theirs = sm_readings(_rows(build, run))
    how = (["lower"] if mine.get("sm_mhz_max") is not None and theirs and mine["sm_mhz_max"] < min(theirs) else []) + (
        ["power-capped"] if power_capped(mine) else [])
    return f"a bf16 matmul measured at a {', '.join(how)} clock" if how else "the measured bf16 matmul rate"


@piece("ceilings")
def ceilings(build: Build):
    c, hw = build.run("ceilings"), build.run("hardware")
    at = clock_condition(c.get("clocks"))
    return tables.table(["ceiling", "measured", "how"], [
        ("bf16 matmul", f"**{c['matmul_tflops']:.0f} TFLOP/s**",
         f"{shape(c['matmul_shape'])} on random data, back-to-back median, {at}"),
        ("device copy", f"**{copy_rate(build):,.0f} GB/s**", f"{size(hw['copy_bytes'])} copied, bytes read + written, "
         f"{clock_condition(hw.get('clocks'))}, in the hardware run ([At a glance](at-a-glance.md))"),
    ]) + f"\n\nThe matmul was {ceiling_how(c)}."


def copy_rate(build: Build) -> float:
    """The GPU's device copy rate (GB/s, bytes read + written): the hardware run's, the one copy rate every page
    reads, the memory roof of the roofline among them."""
    return build.run("hardware")["copy_gbs"]


def ceiling_how(c: dict) -> str:
    """How the ceilings run met the GPU, as its record says: after seconds of load (`settle_s`, the clock the GPU
    then held) or in runs of a few milliseconds, as the sweep times its forwards."""
    if "settle_s" in c:
        return ("measured after seconds of load, at the clock the GPU then held"
                + (" under its power cap" if power_capped(c.get("clocks")) else "")
                + ". The paths were timed in short runs at their own clock, so a path can reach it or pass it")
    return "measured in runs of a few milliseconds, as the sweep times its forwards"


@piece("matmul-ceiling", inline=True)
def matmul_ceiling(build: Build):
    """The dashed line of the throughput charts in words: the ceilings run's matmul, and how it met the GPU."""
    return f"one large bf16 matmul's rate, {ceiling_how(build.run('ceilings'))}"


def _sweep_time(build: Build, r: dict) -> decide.Range:
    return measured(build, "sweep", row_where(path=r["path"], shape=r["shape"]))


@piece("sweep-table")
def sweep_table(build: Build, d):
    paths = [p for p in select(sweep=True) if _sweep_points(build, d, p)]
    lens = sorted({r["shape"][2] for r in build.run("sweep")})
    rows = []
    for s in lens:
        cells = []
        for p in paths:
            r = next(r for r in _sweep_points(build, d, p) if r["shape"][2] == s)
            cells.append("OOM" if r.get("oom") else "n/a" if "unavailable" in r else
                         f"{r['tflops_back_to_back']:.0f} TFLOP/s · {size(r['peak_extra_bytes'])}")
        rows.append((f"{s:,}", *cells))
    shapes = [r["shape"] for p in paths for r in _sweep_points(build, d, p)]
    tokens = min(r[0] * r[2] for r in shapes)
    return tables.table(["S"] + [title(p) for p in paths], rows) + (
        f"\n\nShape B × S = {tokens:,} tokens"
        + "".join(f" ({r[0] * r[2]:,} at S = {r[2]:,}, B = {r[0]})" for r in sorted({tuple(r) for r in shapes})
                  if r[0] * r[2] != tokens)
        + f", H={shapes[0][1]}, D={d}, bf16, causal. "
        "Each cell: TFLOP/s (causal FLOPs over the back-to-back median time per forward) · memory one forward "
        "allocates beyond its inputs (peak, output included). OOM: the forward ran out of the GPU's memory.")


def speedups(build: Build) -> list[dict]:
    """Fused against naive (in place) at every swept S where both ran: how much faster, how much less memory."""
    out = []
    for d in (64, 128):
        naive = {r["shape"][2]: r for r in _sweep_points(build, d, "inplace")}
        for fused in ("flash", "cudnn"):
            for r in _sweep_points(build, d, fused):
                n = naive.get(r["shape"][2])
                if not n or not _value(n, "back_to_back_us") or not _value(r, "back_to_back_us"):
                    continue
                out.append({"d": d, "seq": r["shape"][2], "path": fused,
                            "speedup": n["back_to_back_us"] / r["back_to_back_us"],
                            "speedup_range": decide.quotient(_sweep_time(build, n), _sweep_time(build, r)),
                            "memory_ratio": n["peak_extra_bytes"] / r["peak_extra_bytes"]})
    return out


@piece("fused-vs-naive")
def fused_vs_naive(build: Build):
    """Claims 3 and 4: speedup and memory saving of fused kernels over the naive forward, per S."""
    rows = [(x["d"], f"{x['seq']:,}", title(x["path"]), f"{x['speedup']:.1f}×", f"{x['memory_ratio']:.0f}×")
            for x in speedups(build)]
    return tables.table(["head dim", "S", "fused path", "faster than naive by", "less memory by"], rows, "rrlrr")


def softmax_share(build: Build, record="inplace") -> dict:
    """The share of a naive forward's device time in softmax and masking, and their share of its FLOPs."""
    s = build.summary(record)
    b, h, n, d = s["shape"]
    total = s["forward_device_us"]
    elementwise = sum(op["duration_us"] for op in s["ops"] if "softmax" in op["name"] or "masked_fill" in op["name"])
    matmul_flops = 2 * 2 * b * h * n * n * d  # the naive forward computes every score, future ones too
    elementwise_flops = 6 * b * h * n * n  # ≈ max, subtract, exp, sum, divide, and the mask's select
    return {"elementwise_us": elementwise, "total_us": total, "time_pct": 100 * elementwise / total,
            "flop_pct": 100 * elementwise_flops / (matmul_flops + elementwise_flops)}


@piece("softmax-share")
def softmax_share_text(build: Build, record="inplace"):
    """Claim 2, in a sentence."""
    x = softmax_share(build, record)
    return (f"In the in-place forward at the post's shape, softmax and masking take **{x['time_pct']:.0f} %** "
            f"of the device time ({us(x['elementwise_us'])} of {us(x['total_us'])}). They are only about "
            f"**{x['flop_pct']:.1f} %** of its FLOPs (counting ~6 "
            f"operations per score against 2·D per score for each matmul).")


@piece("roofline-table")
def roofline_table(build: Build):
    c = build.run("ceilings")
    rows = []
    for name, intensity, rate in _roofline_points(build):
        attainable = min(c["matmul_tflops"], copy_rate(build) * intensity / 1e3)
        rows.append((name, f"{intensity:.0f}", f"{rate:.0f}", f"{attainable:.0f}",
                     f"{100 * rate / c['matmul_tflops']:.0f} %", f"{100 * rate / attainable:.0f} %"))
    return tables.table(["path", "FLOP / byte", "TFLOP/s (back to back, B=2)", "roof at that intensity (TFLOP/s)",
                         "of the matmul ceiling", "of the roof"], rows, "lrrrrr") + (
        f"\n\nShape {dims(roofline_shape(build))}, bf16, causal: the sweep's point, the same as the figure's; TFLOP/s "
        "are causal FLOPs over the sweep's back-to-back CUDA-event median per forward.")


@piece("counters-roofline")
def counters_roofline(build: Build):
    """Each fused path at the long shape by Nsight Compute's DRAM bytes and kernel time, against the ridge."""
    c = build.run("ceilings")
    ridge = c["matmul_tflops"] * 1e3 / copy_rate(build)  # FLOP per byte where the two roofs meet
    rows = []
    for stage, record in counted_at(LONG_SHAPE):
        measured = build.counters(record)
        if measured is None:
            continue
        kernels = measured["kernels"]
        main = summary.longest_counted(measured)
        moved = sum(k["dram_bytes"] or 0 for k in kernels)
        flops = causal_flops(measured["shape"])
        rows.append((title(stage), size(moved), f"{flops / moved:,.0f}", f"{main['tensor_pipe_pct']:.0f} %",
                     " / ".join(tables.counter_pct(main, key, " ") for key in ("sm_throughput_pct", "memory_throughput_pct")),
                     f"{main['dram_throughput_pct']:.0f} %", f"**{counter_verdict(main)}**"))
    return (tables.table(["path", "DRAM bytes (measured)", "FLOP / DRAM byte", "tensor pipe (longest kernel)",
                          "SM / memory throughput (longest kernel)", "DRAM throughput", "verdict (longest kernel)"],
                         rows, "lrrrrrl")
            + f"\n\nShape {dims(LONG_SHAPE)}, bf16, causal; FLOPs by the causal model (4·B·H·S²·D/2), "
              f"bytes measured by Nsight Compute over one forward. The verdict reads the busier of SM "
              f"and memory throughput against Nsight Compute's {BOUND_AT:g} % threshold, not the tensor pipe; within "
              f"{BAND:g} points of it, *near the threshold*. Memory "
              f"throughput is the busiest level of the memory system, caches included, so it can be high while DRAM's "
              f"is low ([Reading a profile](reading-a-profile.md#hardware-counters) defines each column). The ridge "
              f"point of the measured ceilings is {ridge:.0f} FLOP per byte.")


@piece("fastest")
def fastest(build: Build):
    peak = build.run("ceilings")["matmul_tflops"]
    rows = sorted(build.run("fastest"), key=lambda r: -(r.get("tflops_back_to_back") or 0))
    layout = lambda r: LAYOUT_TITLES[r.get("layout", "BHSD")]
    table = tables.table(["path", "q, k, v in memory", "back to back: CUDA-event time / forward",
                          "TFLOP/s (back to back)", "of the bf16 matmul ceiling"], [
        (title(r["path"]), layout(r), us(r.get("back_to_back_us")), f"**{r['tflops_back_to_back']:.0f}**",
         f"{100 * r['tflops_back_to_back'] / peak:.0f} %") if "tflops_back_to_back" in r else
        (title(r["path"]), layout(r), "not available", "—",
         tables.why_unavailable(r["unavailable"]) if "unavailable" in r else "OOM")
        for r in rows], "llrrr") + tables.raw_reasons((plain_title(r["path"]), r["unavailable"]) for r in rows
                                                        if "unavailable" in r)
    return table + "\n\n" + fastest_words(build, [r for r in rows if "tflops_back_to_back" in r], peak)


def fastest_words(build: Build, rows: list[dict], peak: float) -> str:
    """The fastest forwards, overall and per layout, by the one rule; those not told apart named together."""
    name = lambda key: f"{title(key[0])} on {LAYOUT_TITLES[key[1]]} inputs"
    times = {(r["path"], r.get("layout", "BHSD")): measured(build, "fastest", row_where(path=r["path"], layout=r.get("layout", "BHSD")))
             for r in rows}
    flops = causal_flops(rows[0]["shape"])
    rate = lambda key: times[key].scaled(lambda t: tflops(flops, t))
    fig = lambda key: rate(key).text(lambda x: f"{x:.0f}")
    top = decide.ranking(times)[0]
    share = (f"{100 * rate(top[0]).median / peak:.0f} % of the {peak:.0f} TFLOP/s bf16 matmul ceiling, "
             f"measured at {clock_condition(build.run('ceilings').get('clocks'))}, while these forwards' rounds ran at "
             f"{RUN_FACTS['sm_clock'](build, 'fastest')}: a share of that matmul, not of the GPU's peak")
    against = matmul_said(build, "fastest")  # what the percent is of, in the lesson's words
    a, b = list(times.values())[:2]
    rule = (f"two forwards are told apart when one is ahead of the other by {100 * decide.margin(a, b):.0f} % or more "
            f"in every process" if decide.paired(a, b) else
            f"two forwards are told apart when these ranges do not overlap and their medians differ by "
            f"{100 * decide.margin(a, b):.0f} % or more")
    if len(top) == 1:
        said = f"The fastest forward we ran at this shape is {name(top[0])}, {fig(top[0])} TFLOP/s, {share}"
        lesson = (f"The fastest forward we ran at this shape is **{name(top[0])}**, "
                  f"**{rate(top[0]).median:.0f} TFLOP/s**, {100 * rate(top[0]).median / peak:.0f} % of {against}")
    else:
        said = ("The fastest forwards we ran at this shape are not told apart: "
                + ", ".join(f"{name(k)}, {fig(k)} TFLOP/s" for k in top) + f"; the first is {share}")
        if len({k[0] for k in top}) == 1:  # one path in several layouts: named once
            lesson = (f"The fastest forward we ran here is **{short(top[0][0])}**, its {count(len(top))} layouts not "
                      f"told apart: up to **{rate(top[0]).median:.0f} TFLOP/s**, {100 * rate(top[0]).median / peak:.0f} % "
                      f"of {against}")
        else:
            lesson = (f"The fastest forwards we ran at this shape, "
                      f"{listed([f'**{short(k[0])}** on {LAYOUT_TITLES[k[1]]}' for k in top])}, are not told apart; "
                      f"the first reaches **{100 * rate(top[0]).median / peak:.0f} %** of {against}")
    leaders = {}  # layout -> who leads it ("flash and cuDNN, not told apart")
    for where in dict.fromkeys(k[1] for k in times):
        first = decide.ranking({k: t for k, t in times.items() if k[1] == where})[0]
        leaders[where] = (" and ".join(short(k[0]) for k in first) + (", not told apart" if len(first) > 1 else ""))
    if len(leaders) > 1 and len(set(leaders.values())) == 1:  # one leader everywhere: said once
        within = f"Fastest within each layout alike: {next(iter(leaders.values()))}."
    else:
        within = f"Fastest within each layout: {'; '.join(f'on {LAYOUT_TITLES[w]} inputs, {who}' for w, who in leaders.items())}."
    return build.fold(lesson, f"{said} (TFLOP/s: {rate(top[0]).how} of its back-to-back runs; {rule})") + f". {within}"


@piece("gqa")
def gqa(build: Build):
    return tables.table(["how", "q", "k, v", "one call (CUDA-event median)", "peak extra memory"], [
        (escape(r["way"]), shape(r["shape_q"]), shape(r["shape_kv"]), us(r.get("median_us")),
         size(r.get("peak_extra_bytes"))) for r in build.run("gqa")])


@piece("decode")
def decode(build: Build):
    copy = copy_rate(build)
    return tables.table(["batch", "KV length", "backend", "back to back / step (CUDA events)", "K+V bytes", "GB/s",
                         "of copy bandwidth"], [
        (r["batch"], f"{r['kv_len']:,}", escape(r.get("backend", "—")), us(r.get("back_to_back_us")), size(r.get("kv_bytes")),
         f"{r['gbs']:.0f}" if "gbs" in r else "OOM", f"{100 * r['gbs'] / copy:.0f} %" if "gbs" in r else "—")
        for r in build.run("decode")], "rrlrrrr") + (
        f"\n\nSDPA alone: one query token per sequence against K and V of the stated length, {_heads(build.run('decode'))}, "
        f"bf16; a step's time is the median of steps queued back to back. Copy bandwidth: the device copy rate "
        f"measured on this GPU ([At a glance](at-a-glance.md)), {copy:,.0f} GB/s at "
        f"{clock_condition(build.run('hardware').get('clocks'))}.")


def _queued(build: Build, run: str) -> str:
    """How the back-to-back times of a run's rows were taken, read from the rows themselves (each process's)."""
    every = build.repeats(run)
    r = next(r for r in every[0] if "back_to_back_us_each" in r)
    where = f" in each of {len(every)} separate processes, pooled" if len(every) > 1 else ""
    return (f"median of {len(r['back_to_back_us_each'])} runs of {r['back_to_back_calls']} steps queued back to back"
            + where)


def decode_steps(build: Build) -> list[dict]:
    """Each decode-step row with the concatenating step beside it: in place, concatenated, and their ratio."""
    out = []
    for r in build.run("decode_step"):
        if "back_to_back_us" in r and "back_to_back_us" in r.get("concat", {}):
            out.append({**r, "ratio": r["concat"]["back_to_back_us"] / r["back_to_back_us"]})
    return out


@piece("decode-step")
def decode_step(build: Build):
    """A decode step with a static cache written in place, and concatenating it, timed without the profiler."""
    rows = [(r["batch"], f"{r['kv_len']:,}", size(r["cache_bytes"]), r["backend"], us(r["median_us"]),
             us(r["back_to_back_us"]), us(r.get("graph", {}).get("back_to_back_us")), decode_stream(build, r)[0],
             us(r["concat"]["back_to_back_us"]), f"{r['ratio']:.1f}×")
            for r in decode_steps(build)]
    d = build.run("decode_step")[0]
    return tables.table(["batch", "KV length", "K+V cache", "SDPA backend", "one step, in place (CUDA-event median)",
                         "back to back / step, in place (CUDA events)", "back to back / step, one CUDA graph",
                         STREAM_RUN, "back to back / step, concatenated",
                         "concatenated ÷ in place"], rows, "rrrlrrrlrr") + (
        f"\n\nOne step of the decoder layer (model width {d['d_model']}, {d['heads']} heads, head dim "
        f"{d['d_model'] // d['heads']}, bf16): one new token per sequence, every sequence with {d['kv_len']:,} cached "
        f"tokens. *Which time to read*: back to back, in place, is the pace of a stream of steps "
        f"as a serving engine runs them. One CUDA graph is that pace where the engine replays the step as a graph. "
        f"One step is a single step's latency, launch included.\n\n"
        f'??? note "How the steps were timed"\n    Back to back, in place, concatenated and as one CUDA graph: '
        f"{_queued(build, 'decode_step')}, the three timed in turns. " + _stream_note(build) + "\n\n"
        + stream_times(build))


@piece("decode-share", inline=True)
def decode_share(build: Build):
    """The in-place step beside SDPA alone over a cache of the same size (the decode table), per batch both ran."""
    alone = {(r["batch"], r["kv_len"]): r for r in build.run("decode") if "back_to_back_us" in r}
    parts = []
    for r in decode_steps(build):
        a = alone.get((r["batch"], r["kv_len"]))
        if a:
            parts.append(f"{100 * a['back_to_back_us'] / r['back_to_back_us']:.0f} %{'' if parts else ' of the in-place step'} at batch {r['batch']} "
                         f"({us(a['back_to_back_us'])} of {us(r['back_to_back_us'])})")
    if not parts:
        raise ValueError("the decode and decode_step runs share no batch and KV length")
    kv = sorted({r["kv_len"] for r in decode_steps(build) if (r["batch"], r["kv_len"]) in alone})
    return (f"over {listed([f'{k:,}' for k in kv])} cached tokens, back to back, it takes "
            + listed(parts))


def concat_against_in_place(build: Build, r: dict) -> tuple[int, str]:
    """The concatenating step against the in-place one at a decode-step row: (decide.order, the words)."""
    pick = row_where(batch=r["batch"], kv_len=r["kv_len"])
    place = measured(build, "decode_step", pick)
    cat = measured(build, "decode_step", lambda result: pick(result)["concat"])
    o = decide.order(cat, place)
    if o == 0:
        return o, (f"the concatenating step and the in-place one are not told apart ({cat.text(us)} against "
                   f"{place.text(us)}, {cat.how}; {within(cat, place)})")
    return o, (f"a step takes {cat.text(us)} with the concatenation against {place.text(us)} in place, "
               f"{r['ratio']:.2f}× as long ({cat.how})" + ("" if o > 0 else ": less time, not more"))


@piece("decode-error", inline=True, conclusion=True)
def decode_error(build: Build):
    """What concatenating the cache costs against writing it in place, at the largest and smallest ratio."""
    worst = max(decode_steps(build), key=lambda r: r["ratio"])
    best = min(decode_steps(build), key=lambda r: r["ratio"])
    o, said = concat_against_in_place(build, worst)
    cost = ", and so is the decode cost per token" if o > 0 else ""
    ob, said_best = concat_against_in_place(build, best)
    lesson = (f"at batch {worst['batch']} a step with the concatenation takes "
              + (f"{worst['ratio']:.1f}× as long as in place" if o > 0 else "no longer than in place" if o == 0 else
                 "less time than in place")
              + f"; at batch {best['batch']}, where the cache is small, "
              + ("the two are not told apart" if ob == 0 else f"{best['ratio']:.1f}× as long" if ob > 0 else "less"))
    return build.fold(lesson, f"at batch {worst['batch']} {said}{cost}; at batch {best['batch']}, where the cache is "
                              f"small, {said_best}")


def graph_gain(build: Build, i: int) -> str:
    """The one-call speedup of row `i` of the graphs run, where the rule tells the two calls apart."""
    eager, graph = (measured(build, "graphs", lambda result: result[i][how], "times_us") for how in ("eager", "graph"))
    return _times(eager, graph)


def _times(a: decide.Range, b: decide.Range, apart: bool = False) -> str:
    """a's median over b's, "not told apart" added where the rule cannot tell them apart (unless `apart`)."""
    ratio = f"{a.median / b.median:.1f}×"
    return ratio if apart or decide.told_apart(a, b) else f"{ratio}, not told apart"


GRAPH_PATHS = {"SDPA flash": "flash", "SDPA cuDNN": "cudnn", "naive, torch.compile": "naive_compiled"}


def graphs_record(r: dict) -> str:
    """The record a graphs run's row times (plus a decode step's cache length): its one call's note (Build.number)."""
    stage = GRAPH_PATHS.get(r["path"], r["path"])
    name = record_name(stage, tuple(r["shape"])) if stage in GRAPH_PATHS.values() else f"{stage} {shape(r['shape'])}"
    return f"{name}, KV {r['kv_len']}" if r.get("kv_len") else name


@piece("graphs")
def graphs(build: Build, times="one-call"):
    """Each forward launched op by op and replayed as one CUDA graph: single-call medians and the speedup, or,
    with `back-to-back`, the back-to-back medians (a folded table). A shape is named on its first row."""
    rows, last = [], None
    for i, r in enumerate(build.run("graphs")):
        where = f"{escape(r['where'])} (q {shape(r['shape'])})"
        where, last = ("" if where == last else where), where
        if "error" in r:
            rows.append((where, escape(r["path"]), "—", "—", escape(r["error"])))
            continue
        e, g = r["eager"], r["graph"]
        if times == "back-to-back":
            rows.append((where, escape(r["path"]), us(e["back_to_back_us"]), us(g["back_to_back_us"]), ""))
            continue
        one_call = build.number(graphs_record(r), ONE_CALL, GRAPHS_RUN, us(e["median_us"]))
        rows.append((where, escape(r["path"]), one_call, us(g["median_us"]), graph_gain(build, i)))
    if times == "back-to-back":
        return tables.table(["shape", "path", "back to back per call, op by op (CUDA events)",
                             "back to back per call, graph (CUDA events)"], [row[:4] for row in rows], "llrr")
    return tables.table(["shape", "path", "one call, launched op by op (CUDA-event median)",
                         "one call, graph replay (CUDA-event median)", "speedup"], rows, "llrrr") + (
        f"\n\n*One call*: {GRAPHS_RUN}." + (
            " *Not told apart*: within the timing's noise ([the rule](methods.md#when-two-numbers-are-told-apart))."
            if any("not told apart" in str(cell) for row in rows for cell in row) else ""))


@piece("varlen")
def varlen(build: Build):
    rows = build.run("varlen")
    lengths = rows[0]["lengths"]
    noted = any("unavailable" in r for r in rows)  # a note column only where a row has something to note
    table = tables.table(["how", "causal", "one call (CUDA-event median)", "FLOPs spent on padding"]
                         + ["note"] * noted, [
        (escape(r["way"]), "yes" if r["causal"] else "no", us(r.get("median_us")), f"{r['wasted_flops_pct']:.0f} %")
        + (tables.why_unavailable(r["unavailable"]) if "unavailable" in r else "",) * noted
        for r in rows], "llrr")
    table += tables.raw_reasons((r["way"], r["unavailable"]) for r in rows if "unavailable" in r)
    return table + (f"\n\n{len(lengths)} sequences, {min(lengths):,} to {max(lengths):,} tokens "
                    f"({sum(lengths):,} in all), {_heads(rows)}, bf16.")


@piece("e2e")
def e2e(build: Build):
    rows = []
    for r in build.run("e2e"):
        if "layer_speedup" not in r:
            continue
        rows.append((r["batch"], f"{r['seq']:,}", us(r["naive_layer"]["median_us"]),
                     us(r["sdpa_layer"]["median_us"]), f"{r['naive_attention_share_pct']:.0f} %",
                     f"{r['sdpa_attention_share_pct']:.0f} %", f"{r['layer_speedup']:.1f}×"))
    return tables.table(["batch", "S", "layer, naive attention (one call, CUDA-event median)",
                         "layer, SDPA (one call, CUDA-event median)", "attention's share (naive)",
                         "attention's share (SDPA)", "layer, naive ÷ SDPA"], rows, "rrrrrrr")


STREAM_RUN = "who sets the pace of a stream of eager steps"  # the header of the cell decode_stream fills


def decode_stream(build: Build, r: dict) -> tuple[str, str]:
    """Who sets the pace of a stream of eager decode steps (analysis/timing.py) across the processes, for a
    table's cell (settled only where every process says so by the margin); and, for the folded note, the times
    it rests on: the stream's own (timed apart from the steps in turns), GPU only and the CPU enqueue."""
    pick = row_where(batch=r["batch"], kv_len=r["kv_len"])
    every = [timing.verdict({**pick(result)["stream"], "one_call_us": pick(result)["times_us"], "stage": "decode step",
                             "shape": [r["batch"]]}) for result in build.repeats("decode_step")]
    stream = lambda field, method: decide.of([pick(result)["stream"][field] for result in build.repeats("decode_step")],
                                             method)
    queued, gpu, enqueue = (stream("back_to_back_us", decide.BACK_TO_BACK), stream("graph_us", decide.GRAPH),
                            stream("enqueue_us", decide.ENQUEUE))
    kind = timing.consensus(every)
    if timing.settled(every):
        said = detail = kind
    elif kind:
        said, detail = f"{kind}, narrowly", f"{kind}, within the {timing.HOST_MARGIN:g}× margin"
    else:
        said = "differs between processes"
        detail = f"{said} ({', '.join(v.stream for v in every)})"
    return said, f"{detail}: {queued.text(us)} back to back, {us(gpu.median)} GPU only, {enqueue.text(us)} CPU enqueue"


def stream_times(build: Build) -> str:
    """The note folded under the decode-step table: each eager stream's verdict with the times it rests on."""
    lines = [f"    - batch {r['batch']}: {decode_stream(build, r)[1]}" for r in decode_steps(build)]
    return '??? note "Each stream of eager steps: its verdict and the times it rests on"\n' + "\n".join(lines)


def _stream_note(build: Build) -> str:
    """What the stream column is: a measurement apart from the steps timed in turns (so its time is not theirs)."""
    runs = {len(r["stream"]["back_to_back_us"]) for r in build.repeats("decode_step")[0] if "stream" in r}
    return (f"*{STREAM_RUN.capitalize()}*: a run of its own, taken in each process before the steps timed in turns, "
            f"{listed([str(n) for n in sorted(runs)])} runs of eager steps queued back to back. Each is timed by "
            f"CUDA events (back to back) and by the host clock around its enqueue loop (CPU enqueue); a CUDA graph "
            f"of the same steps gives GPU only. A stream runs no faster than its CPU enqueues it, and the host's "
            f"pace moves between processes and moments: read each verdict against the stream's own back-to-back "
            f"time, in the note below.")


def stream_against_one_call(build: Build, r: dict) -> str | None:
    """Words where a stream of SDPA layers ran decidedly slower per layer than single calls; else None."""
    pick = lambda result: row_where(batch=r["batch"], seq=r["seq"])(result)["sdpa_layer"]
    stream, one = measured(build, "e2e", pick), measured(build, "e2e", pick, "times_us")
    if decide.order(stream, one) <= 0:
        return None
    return (f"batch {r['batch']} × {r['seq']:,} ({stream.text(us)} back to back against {one.text(us)} one call at "
            f"a time, {one.how})")


@piece("cost")
def cost(build: Build, layers="32"):
    """$ per million tokens for a model of `layers` such layers, at a price the reader can change."""
    layers = int(layers)
    rows, slower = [], []
    for r in build.run("e2e"):
        if "prefill_tokens_per_s_per_layer" in r:
            layer = measured(build, "e2e", lambda result: row_where(batch=r["batch"], seq=r["seq"])(result)["sdpa_layer"])
            rows.append(("prefill", f"batch {r['batch']} × {r['seq']:,} tokens", layer, r["batch"] * r["seq"],
                         "not measured"))
            said = stream_against_one_call(build, r)
            if said:
                slower.append(said)
    for r in build.run("decode_step"):
        if "decode_tokens_per_s_per_layer" in r:
            what = f"batch {r['batch']}, KV cache {r['kv_len']:,} (static, in place)"
            pick = row_where(batch=r["batch"], kv_len=r["kv_len"])
            rows.append(("decode, eager", what, measured(build, "decode_step", pick), r["batch"],
                         decode_stream(build, r)[0]))
            if "back_to_back_us" in r.get("graph", {}):
                rows.append(("decode, CUDA graph", what, measured(build, "decode_step", lambda result: pick(result)["graph"]),
                             r["batch"], "one launch per step"))
    body = "".join(_cost_row(*row, layers) for row in rows)
    note = ("" if not slower else
            "\n\n" + build.fold("A stream of layers ran slower per layer than one layer at a time", "; ".join(slower)) +
            ". Why, the run cannot say; the table uses the stream's time.")
    return (f'<div class="attnprof-price"><label>$ per GPU-hour: <input type="number" id="attnprof-price" '
            f'value="{DEFAULT_PRICE:.2f}" step="0.10" min="0"></label></div>\n\n'
            f'<table><thead><tr><th>phase</th><th>batch</th><th>one layer, back to back (CUDA events, per call)</th>'
            f'<th>tokens/s per {gpu_name(build, "run-e2e")} ({layers} layers)</th><th>{STREAM_RUN}</th>'
            f'<th>$ per million tokens</th></tr></thead><tbody>{body}</tbody></table>\n\n'
            f'Times: medians, in brackets the range across the runs\' processes. Tokens/s and dollars follow from the '
            f'median; the bracketed dollars, where they differ, from the fastest and the slowest process.' + note)


def _cost_row(phase: str, what: str, layer: decide.Range, tokens: int, stream: str, layers: int) -> str:
    """A cost table row: $ per million tokens from the median and the range's ends (cost.js reprices them)."""
    rate = lambda t: tokens / (t * 1e-6) / layers  # tokens/s of the model at one layer's time t
    dollars = lambda tps: DEFAULT_PRICE / 3600 / tps * 1e6
    ends = [f"{dollars(rate(t)):.3f}" for t in (layer.lo, layer.hi)]
    spread = "" if ends[0] == ends[1] else f" [{ends[0]}–{ends[1]}]"
    return (f'<tr><td>{phase}</td><td>{what}</td><td>{layer.text(us)}</td><td>{rate(layer.median):,.0f}</td>'
            f'<td>{stream}</td><td class="attnprof-cost" data-tokens-per-s="{rate(layer.median):.6g}" '
            f'data-tokens-per-s-range="{rate(layer.hi):.6g} {rate(layer.lo):.6g}">'
            f'{dollars(rate(layer.median)):.3f}{spread}</td></tr>')


def against_fast_path(build: Build, r: dict) -> str:
    """A fallback case's one call over the fast path's (the run's first row), where the rule tells them apart."""
    fast = measured(build, "fallback", lambda result: result[0], "times_us")
    case = measured(build, "fallback", row_where(case=r["case"]), "times_us")
    return _times(case, fast, r is build.run("fallback")[0])


@piece("fallback")
def fallback(build: Build):
    rows = build.run("fallback")
    fast = rows[0]
    out = []
    for r in rows:
        if "error" in r:
            out.append((escape(r["case"]), "error", "—", "—", escape(r["error"])))
            continue
        one_call = us(r.get("median_us"))
        if r.get("median_us") is not None:  # noted under the stage and shape it ran, the case named unless the fast path
            name = record_name(r["ran"], tuple(r["shape"]))
            one_call = build.number(name if r is fast else f"{name}, {r['case']}", ONE_CALL, FALLBACK_RUN, one_call)
        out.append((escape(r["case"]), f"**{escape(r['ran'])}**", r["device_ops"], one_call, against_fast_path(build, r)))
    return tables.table(["inputs", "backend that ran (kernels)", "device ops / forward",
                         f"one call (median, {FALLBACK_RUN})", "vs the fast path (one call)"], out, "llrrr") + (
        f"\n\nShape {'×'.join(map(str, fast['shape']))} unless the case changes it; bf16 unless it says otherwise. "
        f"A wider head also does more work, so part of its factor is the head, not the backend. "
        f"*Not told apart*: within the timing's noise ([the rule](methods.md#when-two-numbers-are-told-apart)).")


@piece("fallback-reasons")
def fallback_reasons(build: Build):
    """Per case, each reason PyTorch gave and the backends it refused with it: the reason's first sentence (the
    values it got follow in the full message, on hover), and the function that checked."""
    rows = []
    for r in build.run("fallback"):
        refused: dict[str, list[str]] = {}
        for backend, e in r.get("eligibility", {}).items():
            if not e["eligible"]:
                refused.setdefault("; ".join(dict.fromkeys(reasons.clean(x) for x in e["reasons"])), []).append(backend)
        for why, backends in refused.items():
            check = re.search(r"\(function (\w+)\)", why)
            said = reasons.first_sentence(why).rstrip(".") + "."
            rows.append((escape(r["case"]), ", ".join(backends),
                         f'<span title="{escape(why)}">{escape(said)}</span>'
                         + (f" (`{check.group(1)}`)" if check else "")))
    return tables.table(["inputs", "backends refused", "PyTorch's reason (can_use_*, debug=True)"], rows)


def _worst_row(r: dict) -> str:
    """The row a verification check erred most on; a fully masked row's reference is all zeros (our convention),
    where a relative error only says that the backend wrote something else there."""
    if "worst_row" not in r:
        return "—"
    w = r["worst_row"]
    where = f"b{w['batch']} h{w['head']} q{w['query']}"
    if r.get("fully_masked_row") and w["rel_err"] > 1 / r.get("tolerance", 1e-2) ** 2:
        return f"{where}: reference 0 (row fully masked)"
    return f"{where}: {w['rel_err']:.1e}"


@piece("verify")
def verify_table(build: Build):
    """The checks of every path that fails somewhere, grouped by path; those of the others folded under them."""
    checks = build.run("verify")
    failing = {r["path"] for r in checks if r["status"] == "fail"}
    paths = list(dict.fromkeys(r["path"] for r in checks))
    status_rank = {"fail": 0, "pass": 1}
    ordered = sorted(checks, key=lambda r: (paths.index(r["path"]), status_rank.get(r["status"], 2)))
    shown, passing = [r for r in ordered if r["path"] in failing], [r for r in ordered if r["path"] not in failing]
    out = _verify_rows(shown) if shown else "Every check passes."
    if passing:
        folded = _verify_rows(passing).replace("\n", "\n    ")
        out += (f'\n\n??? note "The checks of the paths that pass wherever they run: '
                f'{listed([escape(short(p)) for p in dict.fromkeys(r["path"] for r in passing)])}"\n    {folded}')
    return out


def _verify_rows(checks: list[dict]) -> str:
    rows = []
    for r in checks:
        note = tables.MASKED_ROW.get(r.get("masked_row"), r.get("masked_row")) or reasons.first_sentence(r.get("reason", ""))
        note += f"{'; ' if note else ''}{r['note']}" if r.get("note") else ""
        rows.append((tables.whole(escape(short(r["path"]))), escape(r["dtype"]), shape(r["shape"]), "yes" if r["fully_masked_row"] else "",
                     "✗ **fail**" if r["status"] == "fail" else "✓ pass" if r["status"] == "pass" else escape(r["status"]),
                     f"{r['rel_frobenius']:.1e}" if r.get("rel_frobenius") == r.get("rel_frobenius") and "rel_frobenius" in r else
                     ("NaN" if r.get("nan") else "—"),
                     f"{r['max_abs']:.1e}" if "max_abs" in r and r["max_abs"] == r["max_abs"] else "—",
                     _worst_row(r),
                     f"{r['tolerance']:.0e}" if "tolerance" in r else "—", escape(note[:120])))
    return tables.table(["path", "dtype", "shape", "fully masked row", "status", "rel. Frobenius", "max abs",
                         "worst row (rel. error)", "tolerance", "note"], rows, "lllllrrlrl")


POST = hardware.POST_GPU  # the post's A100
HARDWARE = {  # what the records' GPU is and does, from the device query and measurements of one run (run-hardware)
    "l2": lambda r: f"{r['query']['L2_cache_size'] / 2**20:.0f} MiB",
    "l2_mb": lambda r: f"{r['query']['L2_cache_size'] / 1e6:.1f} MB",
    "sms": lambda r: str(r["query"]["multi_processor_count"]),
    "clock": lambda r: f"{r['query']['smi_clocks_max_sm_mhz']:,} MHz",
    "fp32": lambda r: f"{r['fp32_matmul_tflops']:.1f} TFLOP/s",  # a tenth, so that its share of the peak follows
    "fp32_bmm": lambda r: f"{r['fp32_bmm_tflops']:.0f} TFLOP/s",
    "fp32_bmm_time": lambda r: us(r["fp32_bmm_us"]),
    "bf16_bmm_time": lambda r: us(r["bf16_bmm_us"]),
    "fp32_over_bf16": lambda r: f"{r['fp32_bmm_us'] / r['bf16_bmm_us']:.1f}×",
    "copy": lambda r: f"{r['copy_gbs'] / 1000:.2f} TB/s",
    # peak to peak: the GPU's peaks computed from its device query as the post's A100's published ones are
    "copy_peak_vs_a100": lambda r: f"{peaks(r)['memory_gbs'] / POST.memory_gbs:.2f}×",
    "fp32_peak_vs_a100": lambda r: f"{peaks(r)['fp32_tflops'] / POST.fp32_tflops:.2f}×",
    "copy_of_peak": lambda r: f"{100 * r['copy_gbs'] / peaks(r)['memory_gbs']:.0f} %",
    "fp32_of_peak": lambda r: f"{100 * r['fp32_matmul_tflops'] / peaks(r)['fp32_tflops']:.0f} %",
}


def _rows(build: Build, name: str) -> list[dict]:
    """Every row of every process of a run (a run whose process gives one dict: that dict)."""
    return [r for result in build.repeats(name) for r in (result if isinstance(result, list) else [result])]


def _span(values, fmt=str) -> str:
    """One value, or the lowest to the highest of several, each through `fmt`."""
    lo, hi = min(values), max(values)
    return fmt(lo) if lo == hi else f"{fmt(lo)} to {fmt(hi)}"


RUN_FACTS = {  # how a run measured, from its record, for the prose that describes its method
    "processes": lambda b, n: count(len(b.repeats(n))),  # its separate processes (steady's are in its own result)
    "runs": lambda b, n: _span({len(r["back_to_back_us_each"]) for r in _rows(b, n) if "back_to_back_us_each" in r},
                               count),  # back-to-back runs kept per row and process
    "calls": lambda b, n: _span({r["back_to_back_calls"] for r in _rows(b, n) if "back_to_back_calls" in r}, count),
    "sm_clock": lambda b, n: mhz(sm_readings(_rows(b, n))),  # the SM clock (NVML) over every process's kept rounds
    # the SM clock as each process ended measuring (its last NVML reading)
    "sm_clock_at_end": lambda b, n: mhz([p["gpu"][-1]["sm_mhz"] for p in (b.run_record(n).get("processes")
                                                                          or b.run(n).get("processes") or [])
                                          if p and p.get("gpu") and p["gpu"][-1].get("sm_mhz") is not None]),
}


@piece("value", captures=1, inline=True, kind="run")
def value_run(build: Build, record, field):
    """A run's figure inline (run-hardware's HARDWARE, any run's RUN_FACTS): no count or clock typed by hand."""
    if record == "run-hardware" and field in HARDWARE:
        return HARDWARE[field](build.run("hardware"))
    if field not in RUN_FACTS:
        raise KeyError(f"unknown value {record} {field} (known: run-hardware {{{', '.join(HARDWARE)}}}; any run "
                       f"{{{', '.join(RUN_FACTS)}}})")
    return RUN_FACTS[field](build, record.removeprefix("run-"))


@piece("hardware")
def hardware_table(build: Build):
    """The records' GPU's figures that explain the rungs beside the post's A100's published peaks, peak to peak."""
    r, a, gpu = build.run("hardware"), POST, gpu_name(build)
    p, q = peaks(r), r["query"]
    rows = [
        ("FP32 on the CUDA cores (TF32 off)",
         f"{p['fp32_tflops']:.1f} TFLOP/s ({q['multi_processor_count']} SMs × {p['lanes']} lanes × 2 × "
         f"{HARDWARE['clock'](r)})", f"{HARDWARE['fp32'](r)} (8192³ matmul, {HARDWARE['fp32_of_peak'](r)})",
         f"{a.fp32_tflops:g} TFLOP/s", HARDWARE["fp32_peak_vs_a100"](r)),
        ("device memory bandwidth",
         f"{p['memory_gbs'] / 1000:.2f} TB/s (2 × {q['memory_clock_rate'] // 1000} MHz × {q['memory_bus_width']} bits)",
         f"{r['copy_gbs'] / 1000:.2f} TB/s (copy, read + write, {HARDWARE['copy_of_peak'](r)}, "
         f"{clock_condition(r.get('clocks'))})",
         f"{a.memory_gbs / 1000:.2f} TB/s", HARDWARE["copy_peak_vs_a100"](r)),
        ("L2 cache", f"{HARDWARE['l2'](r)} = {HARDWARE['l2_mb'](r)}", "—", f"{a.l2_mb:g} MB",
         f"{q['L2_cache_size'] / 1e6 / a.l2_mb:.2f}×"),
        ("SMs", f"{q['multi_processor_count']}", "—", str(a.sms), f"{q['multi_processor_count'] / a.sms:.2f}×"),
        ("SM clock, highest", HARDWARE["clock"](r), "—", f"{a.max_sm_mhz} MHz (boost)",
         f"{q['smi_clocks_max_sm_mhz'] / a.max_sm_mhz:.2f}×"),
        ("SMs × clock", f"{q['multi_processor_count']} × {HARDWARE['clock'](r)}", "—",
         f"{a.sms} × {a.max_sm_mhz} MHz", f"{p['sm_clock'] / hardware.published_peaks(a)['sm_clock']:.2f}×"),
    ]
    lanes = gpus.CAPABILITIES[a.capability].fp32_lanes_per_sm
    return (tables.table(["", f"{gpu} peak (from its device query)", f"{gpu} measured (share of its peak)",
                          f"{a.name.removeprefix('NVIDIA ')} peak (NVIDIA)", f"{gpu} ÷ {a.display}, peak to peak"],
                         rows, "lrrrr")
            + f"\n\n{a.display} figures are NVIDIA's published peaks ([datasheet]({gpus.A100_DATASHEET}); L2 and SM "
              f"count from the [architecture whitepaper]({gpus.A100_WHITEPAPER})); the {gpu}'s, the same peaks "
              f"computed from its device query.\n\n"
              f'??? note "How the {gpu}\'s peaks are computed"\n'
              f"    By the formulas that give the {a.display}'s datasheet figures, so each ratio compares a peak with a "
              f"peak. FP32: SMs × FP32 lanes per SM ({lanes} on the {a.display}, {p['lanes']} on {gpu_arch(build)}) × 2 "
              f"per fused multiply-add × clock. Bandwidth: 2 transfers per memory clock × bus width. A measured {gpu} "
              f"rate set against an {a.display} peak would mix the two methods.")


def steady_rates(build: Build) -> list[tuple[float, float]]:
    """(forward, matmul) TFLOP/s of each finished process of the steady run, from back-to-back medians."""
    r = build.run("steady")
    out = []
    for rep in r["repeats"]:
        if "error" not in rep:
            mm = 2 * prod(rep["matmul_shape"])
            out.append((tflops(causal_flops(r["shape"]), statistics.median(rep["back_to_back_us_each"])),
                        tflops(mm, statistics.median(rep["matmul_us_each"]))))
    return out


@piece("steady", inline=True, conclusion=True)
def steady(build: Build):
    """The fastest forward at steady state across processes, and its share of the matmul measured beside it."""
    r = build.run("steady")
    rates = steady_rates(build)
    if not rates:
        raise ValueError(f"no process of the steady run finished: {r['repeats'][0].get('error')}")
    fwd = sorted(f for f, _ in rates)
    mid = statistics.median(fwd)
    share = statistics.median(f / m for f, m in rates)
    rep = next(x for x in r["repeats"] if "error" not in x)
    failed = len(r["repeats"]) - len(rates)
    return build.fold(f"{short(r['path'])} runs the forward at **{mid:.0f} TFLOP/s**, **{100 * share:.0f} %** of the "
                      f"bf16 matmul rate measured beside it",
                      f"{short(r['path'])} runs the forward at {mid:.0f} TFLOP/s, from {fwd[0]:.0f} to {fwd[-1]:.0f} "
            f"across {len(rates)} separate processes (±{100 * (fwd[-1] - fwd[0]) / 2 / mid:.1f} % about the median), "
            f"{100 * share:.0f} % of the bf16 matmul rate each process measured beside it "
            f"({statistics.median(m for _, m in rates):.0f} TFLOP/s, {rep['matmul_shape'][0]:,}³). Each process warmed up "
            f"for {r['warmup_s']:g} s back to back, then timed {len(rep['back_to_back_us_each'])} runs of "
            f"{rep['back_to_back_calls']} forwards queued back to back (CUDA events; the median run per process), "
            f"at {dims(r['shape'])}, inputs stored {escape(r['layout'])}, bf16, causal"
            + (f"; {failed} of the processes did not finish" if failed else ""))
