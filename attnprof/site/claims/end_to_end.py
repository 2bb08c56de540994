"""Claims of the chapter "End to end": what fusing attention is worth to a whole decoder layer."""
from __future__ import annotations

from ...analysis import decide
from ..build import Build
from ..pieces.runs import measured
from .core import Flip, Statement, claim
from .edits import in_run, scale
from .wording import times


def _ratio(build: Build, r: dict, what: str) -> decide.Range:
    """Naive over SDPA for `what` (layer, attention) at a row's batch and length: one call, process by process."""
    part = lambda name: measured(build, "e2e", lambda result: next(
        x for x in result if (x["batch"], x["seq"]) == (r["batch"], r["seq"]))[name], "times_us")
    return decide.quotient(part(f"naive_{what}"), part(f"sdpa_{what}"))


def _naive_layer(factor: float, longest_only: bool = False):
    """The naive layer's one-call samples made `factor` times as long (at the longest length alone), every process."""
    def edit(result):
        for x in result[-1:] if longest_only else result:
            x["naive_layer"]["times_us"] = scale(x["naive_layer"]["times_us"], factor)
    return in_run("e2e", edit)


@claim("e2e-answers", reads=["run-e2e"],
       flip=[Flip("run-e2e.json", _naive_layer(30.0)),  # the layer gains more than its attention
             Flip("run-e2e.json", _naive_layer(0.3, longest_only=True))])  # the longest gains least
def e2e_answers(build: Build) -> Statement:
    """The guess answered: at every length the layer gains less than its attention alone, and the gain grows with
    the length (each longer sequence's layer ratio decidedly above the shorter's, the one rule, one call)."""
    rows = sorted(build.run("e2e"), key=lambda r: r["seq"])
    layer, attention = [_ratio(build, r, "layer") for r in rows], [_ratio(build, r, "attention") for r in rows]
    less = all(decide.order(l, a) < 0 for l, a in zip(layer, attention))
    grows = all(decide.order(b, a) > 0 for a, b in zip(layer, layer[1:]))
    text = "; ".join(f"B={r['batch']}, S={r['seq']:,}: the layer {l.text(times)} faster with SDPA, its attention "
                     f"{a.text(times)}" for r, l, a in zip(rows, layer, attention)) + f" (one call, {layer[0].how})"
    lesson = (f"Less than attention alone, and most at the longest sequences: there the layer runs "
              f"{times(layer[-1].median)} faster, its attention {times(attention[-1].median, 0)}")
    return Statement(text, less and grows, f"layer {[l.median for l in layer]}, attention "
                                           f"{[a.median for a in attention]}", lesson=lesson)
