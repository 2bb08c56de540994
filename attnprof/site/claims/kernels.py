"""Claims about kernels: launch figures, grids, kernels built for the GPU's architecture, Nsight Compute's verdicts,
occupancy."""
from __future__ import annotations

import math

from ...analysis import counters, decide, kernel_names, occupancy, summary
from ...model import names
from ...model.stages import LONG_SHAPE, select
from ..build import Build, RecordUnusable
from ..words import count, listed, short
from ..registry import one_of, piece
from ..pieces.gpu import arch
from .core import ADAPTS, FALSE, Flip, Statement, claim
from .edits import _halve_longest_grid
from .wording import pct


# ---- a kernel's launch figures, inline in prose ----------------------------------------------------

KERNEL_FIELDS = {
    "registers": lambda op: str(op["registers"]),
    "threads": lambda op: str(summary.threads(op)),
    "warpgroups": lambda op: str(summary.threads(op) // 128),
    "blocks": lambda op: f"{summary.blocks(op):,}",
}


@piece("kernel-value", captures=1, inline=True)
def kernel_value(build: Build, record, part, field):
    """One launch figure of the first kernel of `record` whose name holds `part`: registers, threads, blocks ..."""
    get = one_of(KERNEL_FIELDS, field, "kernel field")
    op = next((op for op in summary.kernels(build.summary(record)) if part in op["name"]), None)
    if op is None:
        raise ValueError(f"no kernel of {record!r} has {part!r} in its name")
    return get(op)


@claim("grid", reads=lambda stage: [names.record_name(stage, LONG_SHAPE)],
       flip=lambda stage: Flip(f"{names.record_name(stage, LONG_SHAPE)}.json", _halve_longest_grid))
def grid(build: Build, stage, tile="128") -> Statement:
    """A stage's longest kernel at the long shape: one block per query tile of `tile` rows and head."""
    s = build.summary(names.record_name(stage, LONG_SHAPE))
    op = summary.longest_kernel(s)
    b, h, n, _ = s["shape"]
    rows = int(tile)
    blocks, tiles = summary.blocks(op), n // rows
    text = f"{blocks:,} blocks = {tiles} query tiles of {rows} rows × {h} heads{f' × {b} batches' if b > 1 else ''}"
    return Statement(text, blocks == tiles * h * b, f"grid {op['grid']}, shape {s['shape']}",
                     lesson=f"{blocks:,} blocks, one per query tile and head")


def native_kernels(build: Build) -> list[str]:
    """The fused stages whose longest kernel at the long shape is built for the architecture of the GPU that ran
    it: its name says that GPU's capability (sm_90 on Hopper)."""
    out = []
    for stage in select(fused=True):
        record = names.record_name(stage, LONG_SHAPE)
        if record in build.problems:
            raise RecordUnusable(build.problems[record])
        if not build.is_unavailable(record):
            s = build.summary(record)
            if kernel_names.explain(summary.longest_kernel(s)["name"])["arch"] == s["capability"]:
                out.append(stage)
    return out


@claim("flash-vs-hopper-kernels", reads=[names.record_name(s, LONG_SHAPE) for s in select(fused=True)],
       flip=Flip(f"{names.record_name('flash', LONG_SHAPE)}.json",
                 lambda s: summary.longest_kernel(s).update(duration_us=summary.longest_kernel(s)["duration_us"] / 4)))
def flash_vs_hopper_kernels(build: Build) -> Statement:
    """SDPA's flash kernel at the long shape against the kernels built for the GPU's architecture, by profiled
    kernel time."""
    def kernel_us(stage):
        return summary.longest_kernel(build.summary(names.record_name(stage, LONG_SHAPE)))["duration_us"]
    ratio = {s: kernel_us(s) / kernel_us("flash") for s in native_kernels(build)}  # flash's rate over theirs
    lesson = "runs at " + " and ".join(f"{pct(r)} of {short(s)}'s rate" for s, r in ratio.items())
    text = lesson + " (kernel time in the profiler, the table above)"
    slower = bool(ratio) and decide.against(max(ratio.values()), decide.PARITY, decide.POINT_BAND) == "below"
    return Statement(text, slower, f"{ratio}", lesson=lesson)


# ---- Nsight Compute's verdicts ------------------------------------------------------------------

@claim("verdict", reads=lambda record: [f"{record}.counters"],
       flip=lambda record, part, expect: [Flip(f"{record}.counters.json", _other_verdict(part), FALSE if expect else ADAPTS),
                                          Flip(f"{record}.counters.json", _other_verdict(part, twin=True))])
def verdict(build: Build, record, part, expect=None) -> Statement:
    """What Nsight Compute's rule makes of the kernels of a record whose name is `part` (or holds it): one
    verdict for them all, and `expect`'s where the page's words around it need that one."""
    ks = _kernels_named(build.counters_of(record)["kernels"], part)
    found = sorted({counters.verdict(k) for k in ks})
    both = lambda field: " and ".join(f"{k[field]:.1f} %" for k in ks)
    text = (f"{' and '.join(found)} by Nsight Compute's rule (SM throughput {both('sm_throughput_pct')}, memory "
            f"throughput {both('memory_throughput_pct')} of peak)")
    return Statement(text, len(found) == 1 and (expect is None or found == [expect]),
                     f"{len(ks)} kernel(s) named {part!r}: {found}, the page needs {expect or 'any one'}", str(found),
                     f"{' and '.join(found)} by Nsight Compute's rule")


def _kernels_named(kernels: list[dict], part: str) -> list[dict]:
    return [k for k in kernels if counters.base_name(k["name"]) == part] or [k for k in kernels if part in k["name"]]


def _other_verdict(part: str, twin: bool = False):
    """The counted kernels named `part` made clearly memory-bound, or clearly compute-bound where they were
    memory-bound: another verdict, whatever theirs was. With `twin`, a second launch of the first of them is
    counted with that other verdict beside it, theirs kept: no one verdict for the kernels of that name."""

    def change(c):
        named = _kernels_named(c["kernels"], part)
        for k in (named[:1] if twin else named):
            sm, mem = (90.0, 20.0) if counters.verdict(k) == "memory-bound" else (20.0, 90.0)
            if twin:
                c["kernels"].append(dict(k, sm_throughput_pct=sm, memory_throughput_pct=mem))
            else:
                k.update(sm_throughput_pct=sm, memory_throughput_pct=mem)
    return change


@claim("flash-register-limit", reads=["flash"],
       flip=Flip("flash.json", lambda s: next(o for o in s["ops"] if "flash_fwd" in o["name"]).update(registers=32)))
def flash_register_limit(build: Build) -> Statement:
    """FlashAttention-2's occupancy from its registers: what a warp takes, how many warps and blocks fit."""
    s = build.summary("flash")
    op = next(op for op in s["ops"] if "flash_fwd" in op["name"])
    props = build.device_properties("flash")
    threads = summary.threads(op)
    warp = props.get("warpSize", 32)
    per_warp = math.ceil(op["registers"] * warp / occupancy.REG_ALLOC_UNIT) * occupancy.REG_ALLOC_UNIT
    t = occupancy.theoretical(op["registers"], threads, op["shared_memory"] or 0, props)
    text = (f"a warp then needs {per_warp:,} of the SM's {props['regsPerMultiprocessor']:,} registers "
            f"({op['registers']} × {warp} threads = {op['registers'] * warp:,}, rounded up to a multiple of "
            f"{occupancy.REG_ALLOC_UNIT}, the unit in which an SM allocates a warp's registers), so only "
            f"{t['warps_per_sm']} warps, {t['blocks_per_sm']} blocks of {threads} threads, fit")
    lesson = (f"only {t['warps_per_sm']} warps fit on an SM, because each warp's registers, rounded up to the allocation "
              f"unit, take {per_warp:,} of the SM's register file")
    return Statement(text, t["limiter"] == "registers", f"{op['registers']} registers, {threads} threads, {t}",
                     lesson=lesson)


@claim("hopper-compute-bound", reads=[f"{r}.counters" for _, r in names.counted_at(LONG_SHAPE)] + [names.record_name(s, LONG_SHAPE) for s in select(fused=True)],
       flip=Flip(f"{names.record_name('cudnn', LONG_SHAPE)}.counters.json",
                 lambda c: c["kernels"][0].update(sm_throughput_pct=10.0, memory_throughput_pct=90.0)))
def hopper_compute_bound(build: Build) -> Statement:
    """Which fused kernels the counters call compute-bound at the long shape."""
    verdicts, kernels = {}, {}
    for stage, record in names.counted_at(LONG_SHAPE):
        if f"{record}.counters" in build.problems:
            raise RecordUnusable(build.problems[f"{record}.counters"])
        measured = build.counters(record)
        if measured:
            kernels[stage] = summary.longest_counted(measured)
            verdicts[stage] = counters.verdict(kernels[stage])
    reach = {s: v for s, v in verdicts.items() if v in ("compute-bound", counters.NEAR, counters.BOTH)}
    busier = {s: max((k.get("sm_throughput_pct") or 0, "SM throughput"), (k.get("memory_throughput_pct") or 0,
                                                                          "memory throughput")) for s, k in kernels.items()}
    hopper, built_for = native_kernels(build), arch(build, names.record_name("flash", LONG_SHAPE))
    others = {v for s, v in verdicts.items() if s not in reach}
    # each kernel's busier unit as a number, not a verdict: one a few tenths from the band's edge is said the same
    text = (f"Only the {len(hopper)} kernels written for {built_for}, {' and '.join(short(s) + chr(39) + 's' for s in hopper)}, "
            f"come to the compute-bound threshold: their busier unit runs at "
            + listed([f"{busier[s][0]:.1f} % ({short(s)}'s {busier[s][1]})" for s in reach])
            + f" of peak (Nsight Compute), each at least {counters.BOUND_AT - counters.BAND:g} %, the {counters.BOUND_AT:g} % "
            f"threshold less its {counters.BAND:g}-point band; "
            f"the others are {', '.join(sorted(others))}, their busier unit at most "
            f"{max((busier[s][0] for s in kernels if s not in reach), default=0):.1f} %")
    lesson = (f"None is bound by memory; only the {count(len(hopper))} kernels written for {built_for}, "
              f"{' and '.join(short(s) + chr(39) + 's' for s in hopper)}, come to the compute-bound threshold")
    return Statement(text, sorted(reach) == sorted(hopper) and "compute-bound" in reach.values()
                     and "memory-bound" not in verdicts.values(), lesson=lesson,
                     rests_on=f"verdicts {verdicts}, {built_for} kernels {hopper}")


@claim("causal-tile-work", reads=lambda stage: [names.record_name(stage, LONG_SHAPE)],
       flip=lambda stage: Flip(f"{names.record_name(stage, LONG_SHAPE)}.json", _halve_longest_grid))
def causal_tile_work(build: Build, stage, tile="128") -> Statement:
    """Under a causal mask a head's last query tile meets every key tile, the first only one."""
    s = build.summary(names.record_name(stage, LONG_SHAPE))
    rows = int(tile)
    tiles = s["shape"][2] // rows
    op = summary.longest_kernel(s)
    blocks = summary.blocks(op)
    text = (f"The last {rows}-row query tile of a head visits all {tiles} tiles of {rows} keys, the first only one "
            f"(the diagonal). With {blocks:,} independent blocks")
    lesson = f"A head's last query tile visits all {tiles} key tiles, the first only one. With {blocks:,} independent blocks"
    return Statement(text, blocks == tiles * s["shape"][1] * s["shape"][0], f"grid {op['grid']}", lesson=lesson)
