"""Claims of the chapter on the silent fallback: what a small change to SDPA's inputs does to the backend and time."""
from __future__ import annotations

from ...analysis import decide
from ...text import escape
from ..build import Build
from ..pieces.runs import measured, row_where
from ..words import listed, short
from .core import ADAPTS, Flip, Statement, claim
from .edits import in_run

MASK, LARGE = "boolean attn_mask", ("head_dim 512", "fp32 inputs")  # the cases the chapter's guess asks about


def _case(result, start: str) -> dict:
    return next(r for r in result if r["case"].startswith(start))


def _as_fast(start: str):
    """A case's one-call samples made the fast path's, in every process (it costs nothing more)."""
    def edit(result):
        _case(result, start)["times_us"] = list(result[0]["times_us"])
    return in_run("fallback", edit)


def _ran(start: str, backend: str | None = None):
    """A case made to run `backend` (the fast path's where None), in every process."""
    def edit(result):
        _case(result, start)["ran"] = backend or result[0]["ran"]
    return in_run("fallback", edit)


@claim("fallback-answers", reads=["run-fallback"],
       flip=[Flip("run-fallback.json", _as_fast(MASK)), Flip("run-fallback.json", _as_fast(LARGE[0])),
             Flip("run-fallback.json", _ran(LARGE[1])),
             Flip("run-fallback.json", _ran(MASK, "math"), ADAPTS, to="leaves")])
def fallback_answers(build: Build) -> Statement:
    """The guess answered: the boolean mask's case against the fast path (its backend, decidedly slower), and the
    large cases each on a backend other than the fast path's, decidedly slower (one call, the one rule)."""
    rows = build.run("fallback")
    fast = rows[0]
    mask, large = _case(rows, MASK), [_case(rows, c) for c in LARGE]
    time = {r["case"]: measured(build, "fallback", row_where(case=r["case"]), "times_us") for r in (fast, mask, *large)}
    ratio = lambda r: time[r["case"]].median / time[fast["case"]].median
    slower = {r["case"]: decide.order(time[r["case"]], time[fast["case"]]) > 0 for r in [mask, *large]}
    keeps = "keeps" if mask["ran"] == fast["ran"] else "leaves"
    holds = all(slower.values()) and all(r["ran"] != fast["ran"] for r in large)
    name = lambda r: escape(short(r["ran"]))
    text = (f"the boolean mask ran {name(mask)} ({mask['device_ops']} device ops) against the fast path's "
            f"{name(fast)} ({fast['device_ops']}), one call {ratio(mask):.1f}× as long; "
            + "; ".join(f"{escape(r['case'])} ran {name(r)}, {ratio(r):.1f}× as long" for r in large)
            + " (a wider head also does more work: part of its time is the head, not the backend)"
            + f" (one call, CUDA events, {time[fast['case']].how})")
    lesson = (f"A boolean mask {keeps} {name(fast)} but runs {ratio(mask):.1f}× as long; a head too wide or fp32 "
              f"inputs leave it for {listed(sorted({name(r) for r in large}))} and run slower")
    return Statement(text, holds, f"slower {slower}, ran {[r['ran'] for r in (fast, mask, *large)]}", keeps, lesson)
