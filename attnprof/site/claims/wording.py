"""Words computed from numbers and from the one rule's comparisons (analysis/decide.py)."""
from __future__ import annotations

from ...analysis import decide


def front(rows: dict, largest: bool = False) -> list:
    """The key with the smallest median (the largest, with `largest`) and every key not told apart from it,
    in order of their medians: who leads, by the one rule (a ranking's groups can chain much further)."""
    best = (max if largest else min)(rows, key=lambda k: rows[k].median)
    return sorted((k for k in rows if decide.order(rows[k], rows[best]) == 0),
                  key=lambda k: rows[k].median, reverse=largest)


def apart(a: decide.Range, b: decide.Range) -> str:
    """'below', 'above' or 'not told apart from': a against b, by the one rule."""
    return {-1: "below", 1: "above", 0: "not told apart from"}[decide.order(a, b)]


def held_together(a: decide.Range, b: decide.Range) -> str:
    """Why two ranges that do not overlap are not told apart, as a clause to follow "not told apart": each was
    timed in its own process, and between processes a median of their method has moved by more than they differ.
    Empty where the ranges overlap or the two were measured together."""
    m = decide.held_by_margin(a, b)
    what = f"{a.method}'s median" if a.method else "a median"
    return "" if m is None else (f", as each was timed in its own process and {what} has differed by up to "
                                 f"{times(1 + m)} between two processes running the same code")


def times(x: float, digits: int = 1) -> str:
    return f"{x:.{digits}f}×"


def pct(x: float) -> str:
    return f"{100 * x:.0f} %"


def relation(x: float, lo: float, hi: float) -> str:
    """Where x lies against the range [lo, hi]: 'below', 'between' or 'above'."""
    return "below" if x < lo else "above" if x > hi else "between"


def ordinal(n: int) -> str:
    return {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth", 6: "sixth", 7: "seventh",
            8: "eighth", 9: "ninth", 10: "tenth"}.get(n, f"{n}th")
