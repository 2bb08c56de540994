"""Same chip, less memory: the records of two GPUs of one chip (the same compute capability and SMs) that differ in
their memory, set side by side kernel by kernel. A kernel's time on the GPU with less memory bandwidth over its time
on the other says how far memory bandwidth bounds it: the whole bandwidth ratio for a kernel that only moves bytes,
none for one that computes. Its DRAM throughput on the GPU with more (Nsight Compute) says the same from inside.

The two sets are this build's and the other committed set of the same chip (store.sets); every op of every
ladder stage and provider at the post's shape whose op lists match in both is a row, its samples the op's
duration in each profiled forward, told apart by decide.py's rule between processes (two machines)."""
from __future__ import annotations

from dataclasses import dataclass
from ...analysis import counters, decide, kernel_names
from ...model import gpus, store
from ...model.stages import STAGES as TABLE, ladder, providers
from ...text import escape, us
from ..build import Build, RecordUnusable
from ..registry import piece
from ..render import plots, tables

STAGES = [*ladder(), *providers()]  # every ladder stage and provider, at the post's shape
STAGES_TITLE = {s: TABLE[s].title for s in STAGES}


LONG_ENOUGH_US = 10.0  # a kernel shorter than this is its launch and its fixed costs more than its bytes


@dataclass(frozen=True)
class Op:
    stage: str
    index: int  # 1-based, as the op lists number them
    kind: str  # kernel | memcpy | memset
    name: str
    fast: decide.Range  # its device time on the GPU with more memory bandwidth (each profiled forward a sample)
    slow: decide.Range  # ... and on the one with less
    dram_pct: float | None  # its DRAM throughput on the GPU with more, % of peak (Nsight Compute); None: not counted

    @property
    def ratio(self) -> decide.Range:
        return decide.quotient(self.slow, self.fast)

    @property
    def slower(self) -> int:
        """1 where it is decidedly slower with less memory, 0 where the two are not told apart (-1: faster)."""
        return decide.order(self.slow, self.fast)

    @property
    def fused(self) -> bool:
        return self.kind == "kernel" and kernel_names.is_attention(self.name)


@dataclass(frozen=True)
class Pair:
    fast: Build  # the set of the GPU with more memory bandwidth
    slow: Build
    fast_gpu: gpus.Gpu
    slow_gpu: gpus.Gpu

    @property
    def bandwidth_ratio(self) -> float:
        return self.fast_gpu.memory_gbs / self.slow_gpu.memory_gbs


def _gpu(build: Build) -> gpus.Gpu:
    device = build.summary(STAGES[0])["device"]
    row = gpus.row(device)
    if row is None:
        raise RecordUnusable(gpus.missing(device))
    return row


def pair(build: Build) -> Pair:
    """This build's set and the other committed set of the same chip, the one with more memory bandwidth first;
    a box saying so where no other set of the chip is committed."""
    mine = _gpu(build)
    for folder in store.sets():
        if folder.resolve() == build.folder.resolve():
            continue
        other = build.of_set(folder)
        try:
            theirs = _gpu(other)
        except (RecordUnusable, OSError, ValueError):
            continue
        if (theirs.capability, theirs.sms) == (mine.capability, mine.sms) and theirs.memory_gbs != mine.memory_gbs:
            builds = sorted([(mine, build), (theirs, other)], key=lambda p: -p[0].memory_gbs)
            return Pair(builds[0][1], builds[1][1], builds[0][0], builds[1][0])
    raise RecordUnusable(f"no other set of records of the {mine.display}'s chip is committed: take one with "
                         f"`python -m attnprof regenerate --all` on such a GPU")


def _durations(build: Build, record: str) -> list[list[float]]:
    """Each op's duration in each profiled forward of a capture: [op][forward]."""
    fwds, _ = build.forwards(record)
    return [list(ds) for ds in zip(*([op.duration_us for op in f.ops] for f in fwds))]


def _dram(build: Build, record: str) -> dict[int, float]:
    """{op index (0-based): DRAM throughput %} of a capture's kernels, where its counters record pairs with it."""
    measured = build.counters(record)
    ops = build.summary(record)["ops"]
    paired = counters.paired(ops, measured["kernels"]) if measured else None
    at = {id(op): i for i, op in enumerate(ops)}
    return {at[id(op)]: k["dram_throughput_pct"] for op, k in paired or [] if k.get("dram_throughput_pct") is not None}


def _ops(fast: Build, slow: Build) -> tuple[Op, ...]:
    rows = []
    for stage in STAGES:
        try:
            a, b = fast.summary(stage), slow.summary(stage)
        except RecordUnusable:
            continue
        if "unavailable" in a or "unavailable" in b or [(o["kind"], o["name"]) for o in a["ops"]] != [
                (o["kind"], o["name"]) for o in b["ops"]]:
            continue  # a stage that did not run on one of them, or ran other ops: no kernel to set beside another
        dram = _dram(fast, stage)
        for i, (op, da, db) in enumerate(zip(a["ops"], _durations(fast, stage), _durations(slow, stage))):
            rows.append(Op(stage, i + 1, op["kind"], op["name"], decide.samples(da, decide.DEVICE),
                           decide.samples(db, decide.DEVICE), dram.get(i)))
    return tuple(rows)


def ops(build: Build) -> tuple[Pair, tuple[Op, ...]]:
    """The two sets, and every op set beside its twin (read once a build)."""
    return build.once("same-chip", lambda: (p := pair(build), _ops(p.fast, p.slow)))


# ---- the pieces ------------------------------------------------------------------------------------

SIDE = {  # what the chapter's first table sets side by side: the figure, and how a cell says it
    "compute capability": (lambda g: g.capability, lambda v: "{}.{}".format(*v)),
    "SMs": (lambda g: g.sms, str),
    "highest SM clock": (lambda g: g.max_sm_mhz, lambda v: f"{v:,} MHz"),
    "bf16 Tensor Core peak (dense)": (lambda g: g.tensor_tflops["bf16"], lambda v: f"{v:,.0f} TFLOP/s"),
    "L2 cache (as the vendor publishes it)": (lambda g: g.l2_mb, lambda v: f"{v:g} MB" if v else "—"),
    "memory": (lambda g: g.memory_gb, lambda v: f"{v:g} GB"),
    "memory bandwidth": (lambda g: g.memory_gbs, lambda v: f"{v / 1000:g} TB/s"),
}
SAME_WITHIN = 0.01  # two vendors' figures of one chip that differ by their rounding are the same


def _same(a, b) -> bool:
    if isinstance(a, tuple) or a is None or b is None:
        return a == b
    return abs(a - b) <= SAME_WITHIN * max(abs(a), abs(b))


@piece("same-chip-gpus")
def same_chip_gpus(build: Build):
    """The two GPUs from the GPU table: what is the same, what differs."""
    p = pair(build)
    rows = [(what, say(get(p.fast_gpu)), say(get(p.slow_gpu)), "same" if _same(get(p.fast_gpu), get(p.slow_gpu)) else "differs")
            for what, (get, say) in SIDE.items()]
    return tables.table(["", escape(p.fast_gpu.display), escape(p.slow_gpu.display), ""], rows, "lrrl")


def _label(o: Op) -> str:
    return f"{STAGES_TITLE[o.stage]}, op {o.index}: {o.name}"


@piece("same-chip-chart", conclusion=False)
def same_chip_chart(build: Build):
    """Every kernel counted on the GPU with more memory: its time with less memory over its time with more, against
    its DRAM throughput; the two lines a kernel sits between (the same time; the whole bandwidth ratio)."""
    p, rows = ops(build)
    counted = [o for o in rows if o.dram_pct is not None and o.fast.median >= LONG_ENOUGH_US]
    series, tips = {}, {}
    for o in counted:
        name = STAGES_TITLE[o.stage]
        series.setdefault(name, []).append((o.dram_pct, o.ratio.median))
        tips.setdefault(name, []).append(f"{_label(o)}: {o.ratio.median:.2f}×, DRAM {o.dram_pct:.0f} %")
    slow, fast = p.slow_gpu.display, p.fast_gpu.display
    hlines = {"the same time": 1.0, f"the whole bandwidth ratio ({p.bandwidth_ratio:.2f}×)": p.bandwidth_ratio}
    return plots.chart(lambda frame: plots.line_chart(
        series, f"DRAM throughput on the {fast}, % of its peak (Nsight Compute)", f"time on the {slow} ÷ on the {fast}",
        f"{len(counted)} kernels of {LONG_ENOUGH_US:.0f} µs or more: how much slower each runs with less memory bandwidth", log_x=False, log_y=True, hlines=hlines,
        x_ticks=[0, 20, 40, 60, 80, 100], x_range=(0, 100), frame=frame, tips=tips))


@piece("same-chip-table")
def same_chip_table(build: Build):
    """Every op set beside its twin: its time on each GPU, their ratio and range, its DRAM throughput, the verdict."""
    p, rows = ops(build)
    said = {1: "slower", 0: "not told apart", -1: "faster"}
    out = [(escape(STAGES_TITLE[o.stage]), str(o.index), tables.kernel(o.name) if o.kind == "kernel" else escape(o.name),
            us(o.fast.median), us(o.slow.median), o.ratio.text(lambda x: f"{x:.2f}×"),
            "—" if o.dram_pct is None else f"{o.dram_pct:.0f} %", said[o.slower]) for o in rows]
    return tables.table(["stage", "op", "kernel", escape(p.fast_gpu.display), escape(p.slow_gpu.display),
                         "ratio", f"DRAM ({escape(p.fast_gpu.display)})", "with less memory"], out, "llllrrrl")


@piece("same-chip", inline=True)
def same_chip_word(build: Build, what: str = "slow"):
    """The pair in a sentence: `slow` or `fast` (the GPU with less or more memory bandwidth, by name), `ratio` (of
    their bandwidths), `slow-bandwidth`, `fast-bandwidth`."""
    p = pair(build)
    said = {"slow": p.slow_gpu.display, "fast": p.fast_gpu.display, "ratio": f"{p.bandwidth_ratio:.2f}×",
            "slow-bandwidth": f"{p.slow_gpu.memory_gbs / 1000:g} TB/s", "fast-bandwidth": f"{p.fast_gpu.memory_gbs / 1000:g} TB/s"}
    if what not in said:
        raise KeyError(f"unknown same-chip {what!r} (known: {', '.join(said)})")
    return escape(said[what])
