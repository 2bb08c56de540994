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


def _shape(lead: dict, stage: str):
    """One head dim's lengths by who leads there (`lead`: S -> the paths at the front, by the one rule): those
    where `stage` is not at the front, those where it is not told apart from another, those where it leads
    alone; None unless they come in that order from the shortest length, the first and the last not empty."""
    ns = sorted(lead)
    behind = [n for n in ns if stage not in lead[n]]
    alone = [n for n in ns if lead[n] == [stage]]
    tied = [n for n in ns if n not in behind + alone]
    return (behind, tied, alone) if behind and alone and ns == behind + tied + alone else None


@claim("leads-long", reads=["run-sweep"],
       flip=lambda stage: Flip("run-sweep.json", _longest_slower(stage, 10.0)))  # it no longer leads there
def leads_long(build: Build, stage) -> Statement:
    """Where a stage leads the sweep (time per forward back to back, the one rule), at every head dim: the
    others up to some length, the stage alone from some length up to the longest, and how many lengths
    between are not told apart; the same words wherever those lengths fall, their ranges in the table of
    points (`leads-long-points`)."""
    ranges = _sweep_ranges(build)
    lead = {k: front(v) for k, v in ranges.items()}
    dims = sorted({d for d, _ in lead})
    shapes = {d: _shape({n: ps for (dd, n), ps in lead.items() if dd == d}, stage) for d in dims}
    rival = " or ".join(sorted({short(p) for ps in lead.values() if ps != [stage] for p in ps if p != stage}))
    name, rests_on = short(stage), f"the paths at the front: { {k: v for k, v in sorted(lead.items())} }"
    if not all(shapes.values()):  # at a head dim it never leads alone, is never behind, or trails above where it leads
        return Statement(f"At every head dim, another path leads up to some length and {name} from a longer one up "
                         "to the longest, the two not told apart at the lengths between", False, rests_on,
                         str(sorted(lead.items())), f"{name} is the fastest from some length up, at every head dim")
    text = ". ".join(f"At head dim {d}, {rival} leads up to S={behind[-1]:,} and {name} from S={alone[0]:,} up, "
                     f"with {len(tied)} of the {len(behind + tied + alone)} lengths between them, not told apart"
                     for d, (behind, tied, alone) in shapes.items())
    start = max(alone[0] for _, _, alone in shapes.values())  # from here up it leads alone at every head dim
    return Statement(f"{text} (time per forward back to back, {_how(ranges)}: every point in "
                     "the tables below)", True, rests_on, str(sorted(lead.items())),
                     f"{name} is the fastest from S={start:,} up at every head dim swept; at the shortest lengths, {rival} "
                     f"leads")  # at some head dim the stage may lead below `start` too: the lesson says no more


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
