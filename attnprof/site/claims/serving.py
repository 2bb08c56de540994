"""Claims of the chapter on serving shapes: shared K/V heads, decode over a cache, requests of mixed lengths."""
from __future__ import annotations

from ...analysis import decide
from ...text import escape, size
from ..build import Build
from .core import ADAPTS, Flip, Statement, claim
from .edits import in_first_process, in_run
from .wording import pct
from ..pieces.runs import copy_rate, measured, row_where

def _gqa_extra_equal(result):
    """enable_gqa's peak extra memory made the repeated copies' (what the claim says it saves)."""
    rows = {r["way"].startswith("enable_gqa"): r for r in result}
    rows[True]["peak_extra_bytes"] = rows[False]["peak_extra_bytes"]


def _largest_decode_slower(result):
    """The largest cache's step made four times as slow, so it reads at a quarter of its rate."""
    r = max((r for r in result if "back_to_back_us_each" in r), key=lambda r: r["batch"] * r["kv_len"])
    r["back_to_back_us_each"] = [4 * x for x in r["back_to_back_us_each"]]


def _packed_fast(result):
    """The first packed batch's one-call samples made a tenth of the padded batch's, causal and not (that packing
    then saves time too)."""
    first = next(r["way"] for r in result if r["computed_flops"] == r["useful_flops"])
    for r in result:
        if r["way"] == first:
            padded = next(p for p in result if p["causal"] == r["causal"] and p["computed_flops"] > p["useful_flops"])
            r["times_us"] = [x / 10 for x in padded["times_us"]]


def _gqa_slow(result):
    """enable_gqa's one-call samples made four times the repeated copies' (reading shared heads then costs time)."""
    rows = {r["way"].startswith("enable_gqa"): r for r in result}
    rows[True]["times_us"] = [4 * x for x in rows[False]["times_us"]]


def _packed_padded(result):
    """Every packed batch made to compute the padded batch's FLOPs."""
    padded = next(r for r in result if r["computed_flops"] > r["useful_flops"])
    for r in result:
        r["computed_flops"] = padded["computed_flops"]


@claim("serving-answers", reads=["run-gqa", "run-decode", "run-varlen", "run-hardware"],
       flip=[Flip("run-gqa.json", in_first_process("gqa", _gqa_extra_equal)),
             Flip("run-decode.json", in_run("decode", _largest_decode_slower)),
             Flip("run-gqa.json", in_run("gqa", _gqa_slow), ADAPTS),
             Flip("run-varlen.json", in_run("varlen", _packed_padded)),
             Flip("run-varlen.json", in_run("varlen", _packed_fast), ADAPTS)])
def serving_answers(build: Build) -> Statement:
    """The three guesses of the serving chapter answered: enable_gqa takes less extra memory than repeating K and V
    (and, where the one rule tells them apart, less time); the largest decode cache is read at DECODE_AT_COPY of the
    copy rate or more; padding computes FLOPs that the packed batches do not, and the packing to use is the one
    ahead of the padded batch somewhere and behind it nowhere, by the one rule (one call, as the tables give it)."""
    gqa = {r["way"].startswith("enable_gqa"): r for r in build.run("gqa")}
    gqa_time = decide.order(*(measured(build, "gqa", row_where(way=gqa[x]["way"]), "times_us") for x in (True, False)))
    step = max((r for r in build.run("decode") if "gbs" in r), key=lambda r: r["kv_bytes"])
    share = step["gbs"] / copy_rate(build)
    varlen = build.run("varlen")
    padded = [r for r in varlen if r["computed_flops"] > r["useful_flops"]]
    wasted = max((1 - r["useful_flops"] / r["computed_flops"] for r in padded), default=0.0)
    packed = [r for r in varlen if r not in padded]
    bytes_bound = decide.against(share, decide.DECODE_AT_COPY, decide.POINT_BAND) == "above"
    holds = gqa[True]["peak_extra_bytes"] < gqa[False]["peak_extra_bytes"] and bytes_bound and bool(padded) and bool(packed)
    one_call = lambda r: measured(build, "varlen", row_where(way=r["way"], causal=r["causal"]), "times_us")
    sides = {}  # each packing's order against the padded batch, causal and not
    for r, p in ((r, p) for r in packed for p in padded if p["causal"] == r["causal"]):
        sides.setdefault(r["way"], set()).add(decide.order(one_call(r), one_call(p)))
    best = sorted(w for w, said in sides.items() if -1 in said and 1 not in said)
    padded_at = {r["causal"]: r["median_us"] for r in padded}  # one call, as the table gives it
    slower = sorted({escape(r["way"]) for r in packed if r["median_us"] > padded_at[r["causal"]]})
    text = (f"GQA: peak extra memory {size(gqa[True]['peak_extra_bytes'])} with `enable_gqa=True`, "
            f"{size(gqa[False]['peak_extra_bytes'])} repeating K and V first; one call "
            f"{ {-1: 'faster', 0: 'not told apart', 1: 'slower'}[gqa_time]} with `enable_gqa=True`. Decode: the largest cache "
            f"({size(step['kv_bytes'])}, batch {step['batch']}, {step['kv_len']:,} tokens) read at {pct(share)} of "
            f"the copy rate, back to back. Variable length: padding to the longest spends {pct(wasted)} of the "
            f"forward's FLOPs on padding; {' and '.join(dict.fromkeys(escape(r['way']) for r in packed))} spend none"
            + (f"; ahead of the padded batch by one call somewhere and behind it nowhere: "
               f"{' and '.join(escape(w) for w in best)}" if best else
               "; no packed batch is ahead of the padded one by one call somewhere and behind it nowhere")
            + (f"; one call (the table's) is longer packed than padded for {' and '.join(slower)}" if slower else ""))
    heads = "less memory and time" if gqa_time == -1 else "less memory"
    packing = (f"pack with {escape(best[0].split(',')[0])} rather than pad, which wastes {pct(wasted)} of FLOPs"
               if len(best) == 1 else
               f"padding wastes {pct(wasted)} of FLOPs, which packing saves{', not always in time' if slower else ' and time'}")
    lesson = f"Let SDPA read shared heads ({heads}); decode over a long cache is bound by bytes; {packing}"
    return Statement(text, holds, f"extra {gqa[True]['peak_extra_bytes']} vs {gqa[False]['peak_extra_bytes']}, "
                                  f"decode share {share:.2f}, wasted {wasted:.2f}, packed {len(packed)}, best {best}",
                     f"gqa {gqa_time}; packing {'named' if len(best) == 1 else 'slower' if slower else 'saves'}", lesson)
