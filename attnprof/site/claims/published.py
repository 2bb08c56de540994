"""The claims of the articles about the post, each beside our measurement with a computed verdict.

One small function per claim; each reuses the facts the chapters' tables compute (speedups, the
softmax share) rather than computing them again.
"""
from __future__ import annotations

from collections import Counter

from ...analysis import counters, decide, kernel_names, summary
from ...model.names import counted_at
from ...model.stages import LONG_SHAPE
from ...text import dims, escape
from ..render import tables
from ..build import Build
from ..pieces.gpu import arch_of, name as gpu_name
from ..pieces.runs import measured, row_where, softmax_share, speedups
from ..words import count, short, title
from ..registry import piece
from .core import ADAPTS, Flip, Statement, claim
from .edits import in_run

ARTICLES = "articles about the post"


def verdict(ours: decide.Range | float, claim_lo: float, claim_hi: float) -> str:
    """Our range against a claimed range by the one rule: decidedly below or above it (beyond the claim's edge
    by decide.MARGIN of that edge, decide.against), overlapping it, or at its edge, not told apart."""
    r = ours if isinstance(ours, decide.Range) else decide.Range(ours, ours, ours, 1, decide.SAMPLES)
    if decide.against(r, claim_lo, decide.MARGIN * abs(claim_lo)) == "below":
        return "ours is smaller"
    if decide.against(r, claim_hi, decide.MARGIN * abs(claim_hi)) == "above":
        return "ours is larger"
    if r.hi >= claim_lo and r.lo <= claim_hi:
        return "agrees (overlaps the claimed range)"
    return "at the edge of the claimed range: not told apart from it"


def spanning(ranges: list[decide.Range]) -> decide.Range:
    """One range over several measurements (shapes): from the lowest end to the highest, about their medians' median."""
    return decide.Range(sorted(r.median for r in ranges)[len(ranges) // 2], min(r.lo for r in ranges),
                        max(r.hi for r in ranges), min(r.n for r in ranges), ranges[0].basis)


def span(values, fmt):
    return f"{min(values):{fmt}}× to {max(values):{fmt}}×"


def end_to_end(build: Build):
    e = [r for r in build.run("e2e") if "throughput_gain_pct" in r]
    layer = lambda r, which: measured(build, "e2e", lambda result: row_where(batch=r["batch"], seq=r["seq"])(result)[which],
                                      "times_us")
    ratios = [decide.quotient(layer(r, "naive_layer"), layer(r, "sdpa_layer")) for r in e]
    gain = spanning([q.scaled(lambda x: 100 * (x - 1)) for q in ratios])
    g = [r["throughput_gain_pct"] for r in e]
    return ("1. naive → fused attention: 20–40 % end-to-end throughput", ARTICLES,
            f"+{min(g):.0f} % to +{max(g):.0f} % for one random-weight decoder layer at "
            + " to ".join(f"B={r['batch']}, S={r['seq']}" for r in (e[0], e[-1])),
            f"{verdict(gain, 20, 40)} (one layer, not a whole model)")


def softmax_time(build: Build):
    x = softmax_share(build)
    return ("2. softmax + masking ≈ 40 % of runtime, ≈ 0.02 % of FLOPs", "AMD ROCm FlashAttention benchmarks",
            f"{x['time_pct']:.0f} % of the in-place forward's device time; ≈ {x['flop_pct']:.1f} % of its FLOPs",
            f"time share (one profiled forward): {verdict(x['time_pct'], 30, 50)}; "
            f"FLOP share: {verdict(x['flop_pct'], 0.01, 0.03)}")


def flash_speed(build: Build):
    peak = max(r.get("tflops_back_to_back") or 0 for r in build.run("sweep")
               if r["path"] == "flash" and not r.get("oom") and "unavailable" not in r)
    flash = [s for s in speedups(build) if s["path"] == "flash"]
    x = [s["speedup"] for s in flash]
    return ("3. FlashAttention-2 up to ≈ 230 TFLOP/s (A100); 3–9× faster than naive", ARTICLES,
            f"SDPA flash (FlashAttention-2) reaches {peak:.0f} TFLOP/s on the {gpu_name(build, 'run-sweep')} (back to back, "
            f"the sweep); "
            f"{span(x, '.1f')} faster than naive in place (back-to-back time per forward)",
            f"TFLOP/s: different GPU, not comparable; speedup: "
            f"{verdict(spanning([s['speedup_range'] for s in flash]), 3, 9)}")


def flash_long(build: Build):
    long = [s for s in speedups(build) if s["path"] == "flash" and s["seq"] >= 8192]
    x, m = [s["speedup"] for s in long], [s["memory_ratio"] for s in long]
    memory = decide.Range(sorted(m)[len(m) // 2], min(m), max(m), len(m), decide.SAMPLES)  # bytes: exact
    return ("4. SDPA flash: up to ≈ 5× less memory, 2–3× throughput on long sequences", ARTICLES,
            f"at S ≥ 8192: {span(m, '.0f')} less memory, {span(x, '.1f')} faster (vs naive in place)",
            f"memory: {verdict(memory, 1, 5)}; speed: {verdict(spanning([s['speedup_range'] for s in long]), 2, 3)}")


def silent_fallback(build: Build):
    fb = [r for r in build.run("fallback") if "ran" in r]
    left = [r for r in fb[1:] if r["ran"] != fb[0]["ran"]]
    return ("5. outside flash's envelope SDPA silently falls back; only the profiler shows it", ARTICLES,
            f"{len(left)} of {len(fb) - 1} changed inputs ran another backend than the fast path "
            f"({', '.join(sorted({r['ran'] for r in left}))}); the output gives no sign",
            "confirmed" if left else "not seen")


def _fail_note(r):
    if r["fully_masked_row"]:
        held = tables.MASKED_ROW.get(r.get("masked_row")) or escape(r.get("masked_row") or "an error")
        return f"{escape(short(r['path']))} ({held} on a fully masked row)"
    return f"{escape(short(r['path']))} {escape(r['dtype'])}"


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
            f"cost per token: measured ([one {gpu_name(build, 'run-e2e')}](end-to-end.md#cost-per-token)); "
            "continuous batching: not measured ([variable-length batches](serving.md#variable-length-batches) "
            "come nearest)",
            "partly answered")


CLAIMS = [end_to_end, softmax_time, flash_speed, flash_long, silent_fallback, numerical_risk, unanswered]


@piece("claims")
def claims(build: Build):
    return tables.table(["claim", "made by", f"our {gpu_name(build)} measurement", "verdict"], _rows(build))


def _rows(build: Build) -> list[tuple]:
    """Each article claim's row (claim, made by, measurement, verdict), computed once a build."""
    return build.once("published claims", lambda: [claim(build) for claim in CLAIMS])


def _fast_path_everywhere(result):
    for r in result:
        r["ran"] = result[0]["ran"]


@claim("claims-tally", reads=["run-e2e", "run-sweep", "run-fallback", "run-verify", "inplace", "run-ceilings", "run-hardware"],
       flip=Flip("run-fallback.json", in_run("fallback", _fast_path_everywhere), ADAPTS))
def claims_tally(build: Build) -> Statement:
    """The guess of Claims, tested answered: how many claimed figures come out larger here, agree or come out
    smaller, and how many of the warnings are confirmed (the table's verdicts, counted)."""
    verdicts = [row[3] for row in _rows(build)]
    parts = [p for v in verdicts for p in v.split(";")]
    larger, agree, smaller = (sum(w in p for p in parts) for w in ("ours is larger", "agrees", "ours is smaller"))
    confirmed = sum(v.startswith("confirmed") for v in verdicts)
    said = (f"{count(larger)} of the claimed figures come out larger, {count(agree)} {'agrees' if agree == 1 else 'agree'} "
            f"and {count(smaller) if smaller else 'none'} {'comes' if smaller < 2 else 'come'} out smaller; "
            f"{count(confirmed)} {'warning is' if confirmed == 1 else 'warnings are'} confirmed")
    return Statement(f"On the {gpu_name(build)}, {said} (the table's verdict column, counted)", True,
                     f"verdicts {verdicts}", f"{larger}/{agree}/{smaller}/{confirmed}",
                     f"On the {gpu_name(build)}, {said}")


# ---- statements about occupancy and boundness, each held to Nsight Compute's counters --------------

def _kernel(build: Build, record: str, part: str) -> dict:
    """The counters of the kernel of `record` whose name holds `part` (its capture names the kernel)."""
    measured = build.counters_of(record)  # an unusable record: a box, as every piece shows it
    return next(k for k in measured["kernels"] if part in k["name"])


def _pct(k: dict, field: str) -> str:
    return f"{k[field]:.1f} %"


def flash_occupancy(build: Build):
    k = _kernel(build, "flash", "flash_fwd")
    near = decide.against(k["warps_active_pct"], decide.ACHIEVED_NEAR_THEORETICAL * k["theoretical_occupancy_pct"],
                          decide.POINT_BAND) != "below"
    return ("FlashAttention-2's kernel runs at ≈ 13 % occupancy (255 registers × 128 threads → 8 of 64 warps)",
            "the post (A100), from the footprint",
            f"achieved {_pct(k, 'warps_active_pct')} of a theoretical {_pct(k, 'theoretical_occupancy_pct')}, "
            f"limited by {counters.limiter(k)}",
            "confirmed: near its footprint's limit" if near else "below its footprint's limit")


def cudnn_occupancy(build: Build):
    k = _kernel(build, "cudnn", "sdpa")
    op = next(op for op in build.summary("cudnn")["ops"] if "sdpa" in op["name"])
    threads = summary.threads(op)
    return ("cuDNN's kernel: the trace's occupancy field reads 0; 12.5 % by its footprint (one block per SM)",
            "the post (A100)",
            f"our {gpu_name(build, 'cudnn')} kernel (built for {arch_of(kernel_names.explain(op['name'])['arch'])}, "
            f"{threads} threads): achieved {_pct(k, 'warps_active_pct')} of a theoretical "
            f"{_pct(k, 'theoretical_occupancy_pct')}",
            "the trace's 0 is an estimate: measured above zero" if k["warps_active_pct"] > 0 else "measured 0 too")


def math_on_cuda_cores(build: Build):
    gemms = [k for k in build.counters("math")["kernels"] if "xmma_gemm_f32f32" in k["name"]]
    fma, tensor = [k["fma_pipe_pct"] for k in gemms], [k["tensor_pipe_pct"] for k in gemms]
    return ("the math backend's FP32 matmuls run on the CUDA cores, not the Tensor Cores",
            "the post (from the kernel names)",
            f"FP32 FMA pipe {min(fma):.0f}–{max(fma):.0f} % active, tensor pipe {max(tensor):.2f} %",
            "confirmed" if decide.against(min(fma), decide.FMA_OVER_TENSOR * max(max(tensor), decide.TENSOR_PIPE_FLOOR),
                                         decide.POINT_BAND) == "above" else "not confirmed")


def share_verdict(hits: int, total: int, near: int = 0) -> str:
    """A claim about every kernel, against how many bear it out and how many lie near the threshold that decides."""
    if hits == total:
        return "confirmed"
    if hits:
        return "partly"
    return f"not decided: {counters.NEAR}" if near else "not confirmed"


def _band() -> str:
    return f"within {counters.BAND:g} points of the {counters.BOUND_AT:.0f} % threshold"


def elementwise_memory_bound(build: Build):
    kernels = [(op, k) for record in ("naive", "inplace", "math")
               for op, k in counters.paired(build.summary(record)["ops"], build.counters(record)["kernels"]) or []
               if kernel_names.explain(op["name"])["library"] == "ATen elementwise"]
    said = Counter(counters.verdict(k) for _, k in kernels)  # by verdict: a short cell
    memory, near = said.pop("memory-bound", 0), said.pop(counters.NEAR, 0)
    return ("PyTorch's elementwise kernels are memory-bound (they do little arithmetic per byte)",
            "the usual reading of a profile",
            f"{memory} of the {len(kernels)} elementwise kernels of the naive, in-place and math forwards are "
            f"memory-bound" + (f"; {near} lie {_band()}" if near else "")
            + (f"; the others: {', '.join(f'{k} {v}' for v, k in sorted(said.items()))}" if said else ""),
            share_verdict(memory, len(kernels), near))


def fused_compute_bound(build: Build):
    rows = []
    for stage, record in counted_at(LONG_SHAPE):
        measured = build.counters(record)
        if measured:
            rows.append((tables.whole(title(stage)), counters.verdict(summary.longest_counted(measured))))
    named = lambda verdict: " · ".join(t for t, v in rows if v == verdict) or "none"
    bound = sum(v == "compute-bound" for _, v in rows)
    near = sum(v == counters.NEAR for _, v in rows)
    also = "".join(f"; {v}: {named(v)}" for v in (counters.BOTH, counters.NEAR) if any(x == v for _, x in rows))
    return ("fused attention at a long sequence is compute-bound (far right of the roofline's ridge)",
            "this site's roofline model",
            f"at {dims(LONG_SHAPE)}, the longest kernel of each path: compute-bound: {named('compute-bound')}; "
            f"latency-bound: {named('latency-bound')}; memory-bound: {named('memory-bound')}{also}",
            share_verdict(bound, len(rows), near))


MEASURED = [flash_occupancy, cudnn_occupancy, math_on_cuda_cores, elementwise_memory_bound, fused_compute_bound]


@piece("measured-claims")
def measured_claims(build: Build):
    return (tables.table(["statement", "made by", f"Nsight Compute on the {gpu_name(build)}", "verdict"],
                         [claim(build) for claim in MEASURED])
            + f"\n\nEach verdict follows from the counters shown in the chapters ([naive](naive.md), "
              f"[math](math.md), [flash](flash.md), [cuDNN](cudnn.md), [roofline](roofline.md#measured-by-the-counters)); "
              f"compute-, memory- and latency-bound as defined in [Reading a profile]({tables.COUNTERS_GUIDE}) "
              f"({counters.BOUND_AT:.0f} % of peak; {counters.NEAR}: {_band()}).")
