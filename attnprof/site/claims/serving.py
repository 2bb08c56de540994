"""Claims of the chapter on serving shapes: shared K/V heads, decode over a cache, requests of mixed lengths."""
from __future__ import annotations

from ...analysis import decide
from ...text import escape, size
from ..build import Build
from .core import ADAPTS, Flip, Statement, claim
from .edits import in_first_process, in_run
from .wording import pct

def _gqa_extra_equal(result):
    """enable_gqa's peak extra memory made the repeated copies' (what the claim says it saves)."""
    rows = {r["way"].startswith("enable_gqa"): r for r in result}
    rows[True]["peak_extra_bytes"] = rows[False]["peak_extra_bytes"]


def _largest_decode_slower(result):
    """The largest cache's step made four times as slow, so it reads at a quarter of its rate."""
    r = max((r for r in result if "back_to_back_us_each" in r), key=lambda r: r["batch"] * r["kv_len"])
    r["back_to_back_us_each"] = [4 * x for x in r["back_to_back_us_each"]]


def _packed_fast(result):
    """Every packed batch's one-call samples made a tenth of the padded batch's (packing then saves time too)."""
    for r in result:
        if r["computed_flops"] == r["useful_flops"]:
            padded = next(p for p in result if p["causal"] == r["causal"] and p["computed_flops"] > p["useful_flops"])
            r["times_us"] = [x / 10 for x in padded["times_us"]]


def _packed_padded(result):
    """Every packed batch made to compute the padded batch's FLOPs."""
    padded = next(r for r in result if r["computed_flops"] > r["useful_flops"])
    for r in result:
        r["computed_flops"] = padded["computed_flops"]


@claim("serving-answers", reads=["run-gqa", "run-decode", "run-varlen", "run-ceilings"],
       flip=[Flip("run-gqa.json", in_first_process("gqa", _gqa_extra_equal)),
             Flip("run-decode.json", in_run("decode", _largest_decode_slower)),
             Flip("run-varlen.json", in_first_process("varlen", _packed_padded)),
             Flip("run-varlen.json", in_first_process("varlen", _packed_fast), ADAPTS)])
def serving_answers(build: Build) -> Statement:
    """The three guesses of the serving chapter answered: enable_gqa takes less extra memory than repeating K and V;
    the largest decode cache is read at DECODE_AT_COPY of the copy rate or more; padding computes FLOPs that the
    packed batches do not."""
    gqa = {r["way"].startswith("enable_gqa"): r for r in build.run("gqa")}
    step = max((r for r in build.run("decode") if "gbs" in r), key=lambda r: r["kv_bytes"])
    share = step["gbs"] / build.run("ceilings")["copy_gbs"]
    varlen = build.run("varlen")
    padded = [r for r in varlen if r["computed_flops"] > r["useful_flops"]]
    wasted = max((1 - r["useful_flops"] / r["computed_flops"] for r in padded), default=0.0)
    packed = [r for r in varlen if r not in padded]
    bytes_bound = decide.against(share, decide.DECODE_AT_COPY, decide.POINT_BAND) == "above"
    holds = gqa[True]["peak_extra_bytes"] < gqa[False]["peak_extra_bytes"] and bytes_bound and bool(padded) and bool(packed)
    padded_at = {r["causal"]: r["median_us"] for r in padded}  # one call, as the table gives it
    slower = sorted({escape(r["way"]) for r in packed if r["median_us"] > padded_at[r["causal"]]})
    time = ", not always in time" if slower else " and time"
    text = (f"GQA: peak extra memory {size(gqa[True]['peak_extra_bytes'])} with `enable_gqa=True`, "
            f"{size(gqa[False]['peak_extra_bytes'])} repeating K and V first. Decode: the largest cache "
            f"({size(step['kv_bytes'])}, batch {step['batch']}, {step['kv_len']:,} tokens) read at {pct(share)} of "
            f"the copy rate, back to back. Variable length: padding to the longest spends {pct(wasted)} of the "
            f"forward's FLOPs on padding; {' and '.join(dict.fromkeys(escape(r['way']) for r in packed))} spend none"
            + (f"; one call (the table's) is longer packed than padded for {' and '.join(slower)}" if slower else ""))
    lesson = (f"Let SDPA read shared heads (less memory); a decode step is bound by bytes, near copy bandwidth; "
              f"padding wastes {pct(wasted)} of FLOPs, which packing saves{time}")
    return Statement(text, holds, f"extra {gqa[True]['peak_extra_bytes']} vs {gqa[False]['peak_extra_bytes']}, "
                                  f"decode share {share:.2f}, wasted {wasted:.2f}, packed {len(packed)}", bool(slower), lesson)
