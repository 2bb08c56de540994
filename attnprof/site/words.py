"""Words the pages put numbers and names into: a stage's title and its name in a sentence, small counts;
each said one way everywhere."""
from __future__ import annotations

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
