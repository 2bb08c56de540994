"""The claims of the articles about the post, each beside our measurement with a computed verdict.

One small function per claim; each reuses the facts the chapters' tables compute (speedups, the
softmax share) rather than computing them again.
"""
from __future__ import annotations

from . import tables
from .build import Build
from .findings import softmax_share, speedups
from .registry import piece

ARTICLES = "articles about the post"


def verdict(ours_lo, ours_hi, claim_lo, claim_hi) -> str:
    if ours_hi < claim_lo:
        return "ours is smaller"
    if ours_lo > claim_hi:
        return "ours is larger"
    return "agrees (overlaps the claimed range)"


def span(values, fmt):
    return f"{min(values):{fmt}}× to {max(values):{fmt}}×"


def end_to_end(build: Build):
    e = [r for r in build.run("e2e") if "throughput_gain_pct" in r]
    g = [r["throughput_gain_pct"] for r in e]
    return ("1. naive → fused attention: 20–40 % end-to-end throughput", ARTICLES,
            f"+{min(g):.0f} % to +{max(g):.0f} % for one random-weight decoder layer "
            "(" + ", ".join(f"B={r['batch']}, S={r['seq']}" for r in e) + "); not a whole model, and no "
            "serving stack around it",
            f"{verdict(min(g), max(g), 20, 40)}, for one layer; a production system's end-to-end throughput "
            "(a full model, batching, the rest of the stack) is not measured here; attention's share of a whole "
            "model's time, and so the gain, differs from one layer's")


def softmax_time(build: Build):
    x = softmax_share(build)
    return ("2. softmax + masking ≈ 40 % of runtime, ≈ 0.02 % of FLOPs", "AMD ROCm FlashAttention benchmarks",
            f"{x['time_pct']:.0f} % of the in-place forward's device time; ≈ {x['flop_pct']:.1f} % of its FLOPs",
            f"time share: {verdict(x['time_pct'], x['time_pct'], 30, 50)}; "
            f"FLOP share: {verdict(x['flop_pct'], x['flop_pct'], 0.01, 0.03)}")


def flash_speed(build: Build):
    peak = max(r.get("tflops_back_to_back") or 0 for r in build.run("sweep")
               if r["path"] == "flash" and not r.get("oom") and "unavailable" not in r)
    x = [s["speedup"] for s in speedups(build) if s["path"] == "flash"]
    return ("3. FlashAttention-2 up to ≈ 230 TFLOP/s (A100); 3–9× faster than naive", ARTICLES,
            f"SDPA flash (FlashAttention-2) reaches {peak:.0f} TFLOP/s on the H200; "
            f"{span(x, '.1f')} faster than naive in place",
            f"TFLOP/s: different GPU, not comparable; speedup: {verdict(min(x), max(x), 3, 9)}")


def flash_long(build: Build):
    long = [s for s in speedups(build) if s["path"] == "flash" and s["seq"] >= 8192]
    x, m = [s["speedup"] for s in long], [s["memory_ratio"] for s in long]
    return ("4. SDPA flash: up to ≈ 5× less memory, 2–3× throughput on long sequences", ARTICLES,
            f"at S ≥ 8192: {span(m, '.0f')} less memory, {span(x, '.1f')} faster (vs naive in place)",
            f"memory: {verdict(min(m), max(m), 1, 5)}; speed: {verdict(min(x), max(x), 2, 3)}")


def silent_fallback(build: Build):
    fb = [r for r in build.run("fallback") if "ran" in r]
    left = [r for r in fb[1:] if r["ran"] != fb[0]["ran"]]
    return ("5. outside flash's envelope SDPA silently falls back; only the profiler shows it", ARTICLES,
            f"{len(left)} of {len(fb) - 1} changed inputs ran another backend than the fast path "
            f"({', '.join(sorted({r['ran'] for r in left}))}); the output itself gives no sign of it",
            "confirmed" if left else "not seen")


def _fail_note(r):
    if r["fully_masked_row"]:
        return f"{r['path']} ({r.get('masked_row') or 'error'} on a fully masked row)"
    return f"{r['path']} {r['dtype']}"


def numerical_risk(build: Build):
    v = build.run("verify")
    fails = [r for r in v if r["status"] == "fail"]
    return ("6. custom kernels add numerical risk: verify across backends", ARTICLES,
            f"{sum(r['status'] == 'pass' for r in v)} checks pass, {len(fails)} fail: "
            + "; ".join(sorted({_fail_note(r) for r in fails})),
            "confirmed: paths disagree on a fully masked row" if any(r["fully_masked_row"] for r in fails)
            else "no disagreement seen")


def unanswered(build: Build):
    return ("7. unanswered: cost per token, gains under continuous batching", ARTICLES,
            "cost per token: measured for one H200 at a price you set, on "
            "[End to end, and cost per token](end-to-end.md#cost-per-token); continuous batching itself is not "
            "measured here: the [variable-length batch](serving.md#variable-length-batches) is the nearest proxy",
            "partly answered")


CLAIMS = [end_to_end, softmax_time, flash_speed, flash_long, silent_fallback, numerical_risk, unanswered]


@piece("claims")
def claims(build: Build):
    return tables.table(["claim", "made by", "our H200 measurement", "verdict"], [claim(build) for claim in CLAIMS])
