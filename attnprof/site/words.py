"""Words the pages put numbers and names into: a stage's title and its name in a sentence, small counts, what
the one rule held two ranges to; each said one way everywhere."""
from __future__ import annotations

import math

from ..analysis import decide
from ..model.stages import STAGES
from ..text import escape


def _stage(record_or_summary) -> str:
    return record_or_summary["stage"] if isinstance(record_or_summary, dict) else record_or_summary.split("-")[0]


def plain_title(record_or_summary) -> str:
    """The one title of a stage, from a record name or a capture summary, as text (a reader's own title, from
    its docstring, unescaped: for what escapes it where it enters the page, a figure or an attribute)."""
    stage = _stage(record_or_summary)
    if stage not in STAGES:
        return record_or_summary.get("title", stage) if isinstance(record_or_summary, dict) else stage
    return STAGES[stage].title


def title(record_or_summary) -> str:
    """plain_title as Markdown: a reader's own title escaped (text.escape), a stage's as the stage table has it."""
    text = plain_title(record_or_summary)
    return text if _stage(record_or_summary) in STAGES else escape(text)


def short(stage: str) -> str:
    """A stage's name inside a sentence ("cuDNN", "FlashAttention-4"); its title where it has none."""
    return STAGES[stage].short if stage in STAGES and STAGES[stage].short else title(stage)


def count(n: int) -> str:
    """A small count in words, as a sentence says it."""
    return ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")[n] if n < 10 else str(n)


def listed(items: list[str]) -> str:
    """"a", "a and b", "a, b and c": items as a sentence lists them; "a; b, c; and d" where an item holds a
    comma of its own ("naive, torch.compile"), so that the list still reads as its items."""
    if len(items) > 2 and any("," in x for x in items):
        return f"{'; '.join(items[:-1])}; and {items[-1]}"
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


# One number per quantity: a quantity a page states, and the method it was had by, each said one way
# everywhere (Build.number notes them; Methods explains the methods once).
DEVICE, ONE_CALL, CPU = "device time per forward", "one call", "CPU time per forward"
MEDIAN = "median of the capture's profiled forwards"  # the forward drawn, its op list, tables, `value`, comparisons
CAPTURE_RUN = "CUDA events, the capture's own run"
TIMING_RUN = "the timing run"
GRAPHS_RUN = "CUDA events, the CUDA-graph run"  # the graphs piece: each path launched op by op and replayed
FALLBACK_RUN = "CUDA events, the fallback run"  # the fallback piece: each case, the fast path first


def within(a: decide.Range, b: decide.Range) -> str:
    """What "not told apart" means for a and b, as a clause to follow it: the rule's condition with the margin it
    held them to, the same words however the records fall (their method's margin: for paths timed in turns, some
    process within it or the processes on both sides; between separate processes, medians within it or ranges
    that overlap). A margin of 100 % or more reads as a factor: "within 2.2×", not "within ±124 %"."""
    m = decide.margin(a, b)
    m = f"±{100 * m:.0f} %" if m < 1 else f"{1 + m:.1f}×"
    what = f"{a.method}'s margin" if a.method else "the margin"
    if decide.paired(a, b):
        return (f"within {m} of each other in some process, or ahead in some and behind in others ({what} for "
                f"paths timed in turns)")
    return f"their medians within {m} of each other, or their ranges overlapping ({what} between separate processes)"


def per_process(a: decide.Range, b: decide.Range) -> str:
    """How far apart a and b are in each process of their run, as the rule compares them (decide.steps, round by
    round where they were timed in rounds): '12 % to 18 %'."""
    each = sorted(abs(math.expm1(x)) for x in decide.steps(a, b))
    return f"{100 * each[0]:.0f} % to {100 * each[-1]:.0f} %"


def sm_readings(rows) -> list[int]:
    """NVML's lowest and highest SM clock readings of every row that kept its clocks (None: it could not say)."""
    return [x for r in rows if r.get("clocks") for x in (r["clocks"]["sm_mhz_min"], r["clocks"]["sm_mhz_max"])
            if x is not None]


def mhz(values) -> str:
    """SM clock readings as one figure or the lowest to the highest: "1,515–1,650 MHz"."""
    lo, hi = min(values), max(values)
    return f"{lo:,} MHz" if lo == hi else f"{lo:,}–{hi:,} MHz"
