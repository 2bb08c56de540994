"""Claims about the sweep: who leads, from which length, at every head dim."""
from __future__ import annotations

from ...text import us
from ..build import Build
from ..words import listed, short
from ..registry import piece
from ..pieces.runs import measured, row_where
from ..render import tables
from .core import Flip, Statement, claim
from .edits import in_run, scale
from .wording import front


def _sweep_ranges(build: Build) -> dict:
    """Each point of the sweep, (head dim, S) -> path -> its time per forward back to back, as a range across
    the sweep's processes; a path that ran in none of them (out of memory) is left out of its point, one that
    ran in some but not all makes the run unusable (`across`)."""
    ranges = {}
    for r in build.run("sweep"):
        try:
            time = measured(build, "sweep", row_where(path=r["path"], shape=r["shape"]))
        except KeyError:
            continue
        ranges.setdefault((r["shape"][3], r["shape"][2]), {})[r["path"]] = time
    return ranges


def _how(ranges: dict) -> str:
    """How the sweep's ranges were had (every one alike): over its processes, or one process's p10–p90."""
    return next(iter(next(iter(ranges.values())).values())).how


def _at(points) -> str:
    """(head dim, S) points in words: "head dim 64, S=4,096, and at head dim 128, S=2,048 and S=4,096"."""
    by_dim = {}
    for d, n in sorted(points):
        by_dim.setdefault(d, []).append(f"S={n:,}")
    return ", and at ".join(f"head dim {d}, {listed(ns)}" for d, ns in by_dim.items())


@claim("leads-long", reads=["run-sweep"],
       flip=lambda stage: Flip("run-sweep.json", _longest_slower(stage, 10.0)))  # it no longer leads there
def leads_long(build: Build, stage) -> Statement:
    """Where a stage leads the sweep (time per forward back to back, the one rule): from some length up,
    at every head dim; the points where it is not told apart from the fastest other are named, their
    ranges in the table of points (`leads-long-points`)."""
    ranges = _sweep_ranges(build)
    lead = {k: front(v) for k, v in ranges.items()}
    dims = sorted({d for d, _ in lead})
    starts, ties, below, holds = {}, {}, set(), True
    for d in dims:
        ns = sorted(n for dd, n in lead if dd == d)
        alone = [n for n in ns if lead[d, n] == [stage]]
        if not alone:
            holds = False
            continue
        start = alone[0]
        holds &= all(stage in lead[d, n] for n in ns if n >= start) and ns[-1] in alone
        below |= {p for n in ns if n < start and stage not in lead[d, n] for p in lead[d, n]}
        for n in ns:
            if stage in lead[d, n] and n not in alone:
                ties.setdefault(tuple(sorted(p for p in lead[d, n] if p != stage)), []).append((d, n))
        starts.setdefault(start, []).append(d)
    holds &= bool(below)
    parts = [f"from S={n:,} at head dim{'s' if len(ds) > 1 else ''} {listed([str(d) for d in ds])}"
             for n, ds in starts.items()]
    how = _how(ranges)
    text = (f"It leads {' and '.join(parts)}, at every longer sequence"
            + "".join(f"; it is not told apart from {listed([short(p) for p in others])} at {_at(points)}"
                      for others, points in ties.items())
            + f"; at the other, shorter lengths {listed([short(p) for p in sorted(below)]) or 'no one'} "
            f"lead{'s' if len(below) == 1 else ''} (time per forward back to back, {how}: every point in the "
            "table below)") if parts else "It leads nowhere in this sweep"
    lesson = (f"{short(stage)} leads nowhere in this sweep" if not parts else
              f"{short(stage)} is the fastest from S={next(iter(starts)):,} up, at every head dim" if len(starts) == 1
              else f"{short(stage)} is the fastest at the longest sequences, at every head dim")
    if parts:
        lesson += f"; at shorter ones, {listed([short(p) for p in sorted(below)]) or 'no one'} lead{'s' if len(below) == 1 else ''}"
    return Statement(text, holds, f"the paths at the front: { {k: v for k, v in sorted(lead.items())} }",
                     str(sorted(lead.items())), lesson)


@piece("leads-long-points")
def leads_long_points(build: Build, stage, d):
    """The evidence of `leads-long` at one head dim: at each length, the stage's time and the fastest
    other path's, each a range across the sweep's processes, and who is in front by the one rule."""
    points, rows = _sweep_ranges(build), []
    for (dim, n), paths in sorted(points.items()):
        if dim != int(d) or stage not in paths or len(paths) < 2:
            continue
        other = min((p for p in paths if p != stage), key=lambda p: paths[p].median)
        at_front = front(paths)
        rows.append((f"{n:,}", paths[stage].text(us), f"{short(other)} {paths[other].text(us)}",
                     listed([short(p) for p in at_front]) + (" (not told apart)" if len(at_front) > 1 else "")))
    if not rows:
        raise ValueError(f"the sweep has no point at head dim {d} where {stage!r} ran beside another path")
    how = _how(points)
    return tables.table(["S", short(stage), "fastest other", "in front"], rows, "rrrl") + (
        f"\n\nTime per forward back to back at head dim {d}: {how}.")


def _longest_slower(stage: str, factor: float):
    """A run of the sweep with `stage` `factor` times slower back to back at the longest sequence."""
    def edit(rows):
        longest = max(r["shape"][2] for r in rows)
        for r in rows:
            if r["path"] == stage and r["shape"][2] == longest and r.get("back_to_back_us_each"):
                r["back_to_back_us_each"] = scale(r["back_to_back_us_each"], factor)
    return in_run("sweep", edit)
