"""What a kind of table means, said once: on the page that explains it (Reading a profile), while each
table elsewhere links there (tables.OCCUPANCY_GUIDE, tables.COUNTERS_GUIDE, pieces.TRACE_GUIDE).

The parts that are numbers (the GPU's per-SM limits, the verdict's threshold) are read from a capture
and from the code that applies them, so the explanation stays true when either changes."""
from __future__ import annotations

import re

from ...analysis import aa, counters, decide, timing
from ...analysis.occupancy import REG_ALLOC_UNIT, SMEM_RESERVED_PER_BLOCK
from ...model import names
from ...model.stages import STAGES
from ...text import escape
from .. import notebooks
from ..render import tables
from ..build import Build, RecordUnusable
from ..registry import piece
from ..words import CAPTURE_RUN, FALLBACK_RUN, GRAPHS_RUN, MEDIAN, TIMING_RUN, count, listed, short


@piece("occupancy-guide", captures=1)
def occupancy_guide(build: Build, record):
    """How the footprint tables get theoretical and achieved occupancy, with the per-SM limits of the
    GPU that captured `record` (from its trace's deviceProperties)."""
    props = build.device_properties(record)
    warps = props["maxThreadsPerMultiprocessor"] // props.get("warpSize", 32)
    return (
        f"*Theoretical occupancy* is computed by attnprof from each kernel's footprint in the trace (registers "
        f"per thread, shared memory per block, threads per block) against the GPU's per-SM limits. Those limits are read from the "
        f"trace's `deviceProperties`: on the {escape(build.summary(record)['device'])}, "
        f"{props['regsPerMultiprocessor']:,} registers, {props['sharedMemPerMultiprocessor'] // 1024} KiB of "
        f"shared memory and {warps} warps per SM. Registers are granted per warp in units of {REG_ALLOC_UNIT} and "
        f"each block costs {SMEM_RESERVED_PER_BLOCK // 1024} KiB of shared memory more than it asks for (CUDA C++ "
        f"Programming Guide). Whichever resource runs out first caps the blocks per SM; the footprint table "
        f"names it under *limited by*.\n\n"
        f"*Achieved occupancy* is measured: the share of warp slots that held a warp while the SM was active, "
        f"from Nsight Compute over one forward. Where a kernel has no counters, the table shows the profiler's "
        f"own *est. achieved* field instead, copied as recorded: an estimate, not a measurement.")


@piece("counters-guide")
def counters_guide(build: Build):
    """The columns of a hardware-counter table and the rule behind its verdict."""
    return tables.table(["column", "meaning"], [
        ("warps active of theoretical (limit)", "achieved occupancy beside the theoretical one, and the resource "
                                                "that limits it"),
        ("tensor pipe, FP32 FMA pipe", "the share of the time the Tensor Cores, or the CUDA cores' fused "
                                       "multiply-add units, were busy"),
        ("SM / memory throughput", "the busiest unit of the SMs, and of the memory system, as a share of its peak"),
        ("DRAM (of peak, bytes)", "device-memory throughput as a share of its peak, and the bytes moved"),
        ("L2 hit", "the share of lookups in the L2 cache that found their data there, without going to device memory"),
        ("verdict", f"which of SM and memory throughput reaches {counters.BOUND_AT:.0f} % of its peak (below "
                    f"it: *latency-bound*)"),
    ]) + (f"\n\nEach percentage is of that unit's peak, measured over one forward with the clocks unlocked (as the GPU "
          f"runs them in use, not fixed for repeatable numbers). The *verdict* names the busier of SM and memory "
          f"throughput, *compute-bound* or *memory-bound*, once it reaches {counters.BOUND_AT:.0f} % of its peak; "
          f"*latency-bound* when neither does (the kernel waits on something other than a busy unit). Within "
          f"{counters.BAND:g} points of {counters.BOUND_AT:.0f} % it is *{counters.NEAR}*, where a second measurement "
          f"can fall on either side; *{counters.BOTH}* when both pass it within {counters.BAND:g} points of each other.")


def repeats_said() -> str:
    """How many separate processes each run whose numbers a page compares is taken in (RUN_CODE's repeats):
    the largest group as "the others", the rest by name."""
    groups = {}
    for r in names.RUNS:
        if names.RUN_CODE[r].repeats > 1:
            groups.setdefault(names.RUN_CODE[r].repeats, []).append(r.replace("_", "-"))
    if not groups:
        return ""
    times = lambda n: {2: "twice"}.get(n, f"{count(n)} times")
    common = max(groups, key=lambda n: (len(groups[n]), n))
    named = [f"the {listed(runs)} run{'s' if len(runs) > 1 else ''} {times(n)}" for n, runs in sorted(groups.items(), reverse=True)
             if n != common]
    return ("A run whose numbers a page compares is taken in separate processes, each with its own CUDA context: "
            + "; ".join(named + [f"{'the others' if named else 'each'} {times(common)}"]) + ".")


@piece("decision-guide")
def decision_guide(build: Build):
    """When the pages call two measurements told apart, said once, its numbers read from the rule's code
    (analysis/decide.py, counters.BAND, timing.HOST_MARGIN, each run's repeats in model/names.RUN_CODE) and its
    false-decision rate measured on the records (analysis/aa.py)."""
    paired, apart = aa_counts(build)
    rounds = [r.replace("_", "-") for r in names.RUNS if names.RUN_CODE[r].repeats > 1 and names.RUN_CODE[r].rounds]
    taken = repeats_said()
    regimes = (decide.LAUNCH_BOUND, decide.GPU_BOUND)
    margins = tables.table(
        ["method"] + [f"{g}: {where}" for g in regimes for where in ("same processes", "different processes")],
        [(method, *(f"{100 * x:.0f} %" for g in regimes for x in (by[g].paired, by[g].apart)))
         for method, by in decide.MARGINS.items()])
    same = aa.IDENTICAL[0]
    return (
        f"Two times are told apart only when they differ by more than that kind of time moves on its own.\n\n"
        f"{taken} The {listed(rounds)} runs measure the paths they compare in turns inside each process, so that a "
        f"slow moment of the host or the GPU falls on all of them. The other runs measure one path "
        f"after another. Each process measures holding the GPU alone, and while it times anything on the CPU, the "
        f"regeneration's other processes on that GPU pause. A time is given as its median with a range in "
        f"brackets: for a run, the median over every process's calls and the span of the processes' medians; "
        f"for a capture, the median and p10–p90 of its calls.\n\n"
        f"Two paths of one run are compared process by process: they are *told apart* when, in every process, one "
        f"is ahead of the other by more than the margin for the same processes, on the same side. Where the run "
        f"times them in rounds, a process's ratio is the median of its rounds' own ratios, each round's two samples "
        f"taken moments apart. Two times from different processes must have ranges that do not overlap and medians "
        f"that differ by more than the margin for different processes. Otherwise the page says *not told apart*: "
        f"within the margin, or on both sides. It gives both ranges, words that stay true however a new measurement "
        f"falls.\n\n"
        f"Each margin is how far that method moved where nothing differed, in the timing run's committed "
        f"regenerations before the one this site shows. For the same processes it is the largest ratio, in one "
        f"process, between {short(same[0])} and {short(same[1])}, whose kernel {short(same[0])} runs: two identical "
        f"paths. For different processes it is the largest move of one path's median from one process to another. "
        f"A time is launch-bound where, in some process, the CPU took as long to enqueue a call as the GPU took to "
        f"run it; GPU-bound where the GPU took longer in every process. Where a page cannot say which, the wider "
        f"margin applies:\n\n{margins}\n\n"
        f"The rule is tested where nothing differs (an A/A test). {short(same[0]).capitalize()} against "
        f"{short(same[1])}, compared process by process by every method, comes out *not told apart* in "
        f"{paired.count(0)} of {len(paired)} cases in the records on this site. Set against itself in another "
        f"process, one measurement comes out *not told apart* in {apart.count(0)} of {len(apart)}. A ranking names "
        f"who leads and those not told apart from "
        f"it. A stream is called launch-bound or GPU-bound only when every process of its run says so, and how far "
        f"that carries to another CPU is stated as a number. A sentence that asserts it in its own words needs the "
        f"pace-setting side slower by {timing.HOST_MARGIN:g}× or more in every process. A kernel is compute- or "
        f"memory-bound when its SM or memory throughput reaches Nsight Compute's {counters.BOUND_AT:g} % of peak. "
        f"That threshold carries a band of ±{counters.BAND:g} points: a kernel inside it is *near the threshold*, "
        f"not flipped across it.")


def aa_counts(build: Build) -> tuple[list[int], list[int]]:
    """aa.aa over every run this site takes in several processes: the orders of its A/A comparisons, paired and
    apart (0: not told apart, as it should be)."""
    paired, apart = [], []
    for run in names.RUNS:
        if names.RUN_CODE[run].repeats > 1:
            p, a = aa.aa(f"run-{run}", build.repeats(run))
            paired += p
            apart += a
    return paired, apart


@piece("method-labels")
def method_labels(build: Build):
    """The methods a figure per forward is had by, each said once here in the words the pages use for it
    (words.METHODS): the same quantity by two methods gives two numbers, and each names its own."""
    where = {MEDIAN: "the trace figure and the op list of a chapter, the tables of several stages, the figures inside "
                     "sentences and the comparisons",
             CAPTURE_RUN: "one call of a chapter's capture, timed without the profiler",
             TIMING_RUN: "the rankings of SDPA's backends and the launch-bound verdicts, over separate processes",
             GRAPHS_RUN: "one call launched op by op beside its CUDA-graph replay (What CUDA graphs and compile change)",
             FALLBACK_RUN: "one call of each case of the silent fallback, the post's inputs first"}
    return "\n".join(f"- **{label[0].upper()}{label[1:]}**: {what}." for label, what in where.items())


@piece("notebook")
def notebook(build: Build, stage):
    """A "Run it yourself" notebook as a page, from the committed file (site/notebooks.py): its text cells as
    Markdown, its code cells as Python blocks. Zensical's page of the notebook; MkDocs renders the file itself."""
    if why := notebooks.problem(STAGES[stage]):
        raise RecordUnusable(why, known=False)  # a strict build fails here; a plain one shows the box
    sources = [(cell["cell_type"], "".join(cell["source"])) for cell in notebooks.read(stage)["cells"]]
    # a text cell links a chapter by its address from the notebook's page (mkdocs-jupyter leaves links as
    # they are); this page links it by its file, beside the notebook's folder
    return "\n\n".join(CHAPTER_URL.sub(r"](../\1.md)", text) if kind == "markdown" else f"```python\n{text}\n```"
                       for kind, text in sources)


CHAPTER_URL = re.compile(r"\]\(\.\./\.\./([\w-]+)/\)")
