"""Pieces over the measurement runs (sweeps, ceilings, serving shapes, verification), for the
chapters beyond the post. Each reads committed `run-*.json` records; nothing is typed in by hand."""
from __future__ import annotations

from functools import lru_cache

from .. import reasons
from . import pieces, plots, render
from .. import store
from ..flops import causal_flops, min_bytes, naive_bytes

PATH_TITLES = {"inplace": "naive (in place)", "math": "SDPA math", "efficient": "SDPA efficient",
               "flash": "SDPA flash", "cudnn": "SDPA cuDNN", "flex": "FlexAttention", "sage": "SageAttention",
               "fa4": "FlashAttention-4"}
LAYOUT_TITLES = {"BHSD": "[B, H, S, D]", "BSHD": "[B, S, H, D]"}  # how q, k, v sat in memory
DEFAULT_PRICE = 3.50  # $ per GPU-hour: an assumption the reader changes on the page, not a quote


@lru_cache(maxsize=None)
def result(name):
    return store.load_run(name)["result"]


def _gib(b):
    return "—" if b is None else f"{b / 2**30:.2f} GiB" if b >= 2**30 else f"{b / 2**20:.0f} MiB"


def _sweep_points(d, path):
    return [r for r in result("sweep") if r["path"] == path and r["shape"][3] == int(d)]


def _value(row, key):
    return None if row.get("oom") or "unavailable" in row else row.get(key)


# ---- figures (generated as files by the hook) ---------------------------------------------------

def fig_sweep_tflops(d):
    series = {PATH_TITLES[p]: [(r["shape"][2], _value(r, "tflops_back_to_back")) for r in _sweep_points(d, p)]
              for p in PATH_TITLES if _sweep_points(d, p)}
    peak = result("ceilings")["matmul_tflops"]
    return plots.line_chart(series, "sequence length S (batch × S = 16,384 tokens, 16 heads)", "TFLOP/s (causal FLOPs)",
                            f"Forward throughput, head dim {d}, bf16, causal", hlines={"bf16 matmul peak (measured)": peak})


def fig_sweep_memory(d):
    series = {PATH_TITLES[p]: [(r["shape"][2], (_value(r, "peak_extra_bytes") or None) and r["peak_extra_bytes"] / 2**20)
                               for r in _sweep_points(d, p)] for p in PATH_TITLES if _sweep_points(d, p)}
    return plots.line_chart(series, "sequence length S (batch × S = 16,384 tokens)", "MiB allocated by one forward",
                            f"Peak memory of one forward, head dim {d}", log_y=True)


def _roofline_points(shape=(2, 16, 8192, 128)):
    pts = []
    for r in result("sweep"):
        if tuple(r["shape"]) == shape and _value(r, "tflops_back_to_back"):
            moved = naive_bytes(shape) if r["path"] in ("inplace", "math") else min_bytes(shape)
            if r["path"] == "math":  # computes in fp32: every S×S pass moves 4-byte elements
                moved = naive_bytes(shape, itemsize=4)
            pts.append((PATH_TITLES[r["path"]], causal_flops(shape) / moved, r["tflops_back_to_back"]))
    return pts


def fig_roofline():
    c = result("ceilings")
    return plots.roofline(c["matmul_tflops"], c["copy_gbs"], _roofline_points(),
                          "Roofline at B=2, H=16, S=8192, D=128 (bf16, causal)")


def fig_decode():
    rows = result("decode")
    series = {f"batch {b}": [(r["kv_len"], r.get("gbs")) for r in rows if r["batch"] == b]
              for b in sorted({r["batch"] for r in rows})}
    return plots.line_chart(series, "KV cache length (tokens)", "GB/s of K and V read",
                            "Decode: one query token per sequence, 16 heads, head dim 128",
                            hlines={"copy bandwidth (read + write, measured)": result("ceilings")["copy_gbs"]})


def fig_recompile():
    r = result("recompile")
    series = {"FlexAttention, one new shape after another": [(p["shape"][2], p.get("tflops")) for p in r["points"]]}
    return plots.line_chart(series, "sequence length of each successive call", "TFLOP/s", "torch.compile's recompile limit",
                            log_x=False)


FIGURES = {"sweep-tflops-d64": lambda: fig_sweep_tflops(64), "sweep-tflops-d128": lambda: fig_sweep_tflops(128),
           "sweep-memory-d64": lambda: fig_sweep_memory(64), "sweep-memory-d128": lambda: fig_sweep_memory(128),
           "roofline": fig_roofline, "decode": fig_decode, "recompile": fig_recompile}


# ---- Markdown pieces ----------------------------------------------------------------------------

def figure(name):
    if name not in FIGURES:
        raise KeyError(f"unknown figure {name!r} (known: {', '.join(FIGURES)})")
    return f"![{name}](figures/{name}.svg)"


def stamp(name):
    r = store.load_run(name)
    return render.environment_md(r, "Measured", f"run `{name}` took {r['wall_s']:.0f} s")


def ceilings():
    c = result("ceilings")
    return render.md_table(["ceiling", "measured", "how"], [
        ("bf16 matmul", f"**{c['matmul_tflops']:.0f} TFLOP/s**", f"{'×'.join(map(str, c['matmul_shape']))} on random data, back-to-back median"),
        ("device copy", f"**{c['copy_gbs']:.0f} GB/s**", f"{_gib(c['copy_bytes'])} copied, bytes read + written"),
    ])


def sweep_table(d):
    paths = [p for p in PATH_TITLES if _sweep_points(d, p)]
    lens = sorted({r["shape"][2] for r in result("sweep")})
    rows = []
    for s in lens:
        cells = []
        for p in paths:
            r = next(r for r in _sweep_points(d, p) if r["shape"][2] == s)
            cells.append("OOM" if r.get("oom") else "n/a" if "unavailable" in r else
                         f"{r['tflops_back_to_back']:.0f} · {_gib(r['peak_extra_bytes'])}")
        rows.append((f"{s:,}", *cells))
    return render.md_table(["S"] + [PATH_TITLES[p] for p in paths], rows) + (
        "\n\nEach cell: TFLOP/s (causal FLOPs over the back-to-back median time per forward) · memory one forward "
        "allocates beyond its inputs (peak, output included). OOM: the forward ran out of the GPU's memory.")


def fused_vs_naive():
    """Claims 3 and 4: speedup and memory saving of fused kernels over the naive forward, per S."""
    rows = []
    for d in (64, 128):
        naive = {r["shape"][2]: r for r in _sweep_points(d, "inplace")}
        for fused in ("flash", "cudnn"):
            for r in _sweep_points(d, fused):
                n = naive.get(r["shape"][2])
                if not n or not _value(n, "back_to_back_us") or not _value(r, "back_to_back_us"):
                    continue
                rows.append((d, f"{r['shape'][2]:,}", PATH_TITLES[fused],
                             f"{n['back_to_back_us'] / r['back_to_back_us']:.1f}×",
                             f"{n['peak_extra_bytes'] / r['peak_extra_bytes']:.0f}×"))
    return render.md_table(["head dim", "S", "fused path", "faster than naive by", "less memory by"], rows,
                           ["---:", "---:", "---", "---:", "---:"])


def softmax_share(stage="inplace"):
    """Claim 2: the share of naive's device time in softmax and masking against their share of FLOPs."""
    s = pieces.summary(stage)
    b, h, n, d = s["shape"]
    total = s["forward_device_us"]
    elementwise = sum(op["duration_us"] for op in s["ops"] if "softmax" in op["name"] or "masked_fill" in op["name"])
    matmul_flops = 2 * 2 * b * h * n * n * d  # the naive forward computes every score, future ones too
    elementwise_flops = 6 * b * h * n * n  # ≈ max, subtract, exp, sum, divide, and the mask's select
    return (f"In the in-place forward at the post's shape, softmax and masking take **{100 * elementwise / total:.0f} %** "
            f"of the device time ({render.us(elementwise)} of {render.us(total)}), while they are about "
            f"**{100 * elementwise_flops / (matmul_flops + elementwise_flops):.1f} %** of its FLOPs (counting ~6 "
            f"operations per score against 2·D per score for each matmul).")


def roofline_table():
    c = result("ceilings")
    rows = []
    for name, intensity, tflops in _roofline_points():
        attainable = min(c["matmul_tflops"], c["copy_gbs"] * intensity / 1e3)
        rows.append((name, f"{intensity:.0f}", f"{tflops:.0f}", f"{attainable:.0f}",
                     f"{100 * tflops / c['matmul_tflops']:.0f} %", f"{100 * tflops / attainable:.0f} %"))
    return render.md_table(["path", "FLOP / byte", "achieved TFLOP/s", "roof at that intensity", "of matmul peak",
                            "of the roof"], rows, ["---", "---:", "---:", "---:", "---:", "---:"])


def fastest():
    peak = result("ceilings")["matmul_tflops"]
    rows = sorted(result("fastest"), key=lambda r: -(r.get("tflops_back_to_back") or 0))
    layout = lambda r: LAYOUT_TITLES[r.get("layout", "BHSD")]
    table = render.md_table(["path", "q, k, v in memory", "back-to-back time / forward", "TFLOP/s",
                             "of measured matmul peak", "TFLOP/s, one call at a time"], [
        (PATH_TITLES[r["path"]], layout(r), render.us(r.get("back_to_back_us")), f"**{r['tflops_back_to_back']:.0f}**",
         f"{100 * r['tflops_back_to_back'] / peak:.0f} %", f"{r['tflops']:.0f}") if "tflops_back_to_back" in r else
        (PATH_TITLES[r["path"]], layout(r), "not available", "—", "—", render.md_cell(r.get("unavailable", "OOM")))
        for r in rows], ["---", "---", "---:", "---:", "---:", "---:"])
    best = rows[0]
    return table + (f"\n\nThe fastest forward we ran at this shape is **{PATH_TITLES[best['path']]}** on "
                    f"{layout(best)} inputs, **{best['tflops_back_to_back']:.0f} TFLOP/s**, "
                    f"{100 * best['tflops_back_to_back'] / peak:.0f} % of the {peak:.0f} TFLOP/s bf16 matmul peak "
                    "measured in the same run.")


def gqa():
    return render.md_table(["how", "q", "k, v", "median time", "peak extra memory"], [
        (r["way"], "×".join(map(str, r["shape_q"])), "×".join(map(str, r["shape_kv"])), render.us(r.get("median_us")),
         _gib(r.get("peak_extra_bytes"))) for r in result("gqa")])


def decode():
    copy = result("ceilings")["copy_gbs"]
    return render.md_table(["batch", "KV length", "backend", "time / step", "K+V bytes", "GB/s", "of copy bandwidth"], [
        (r["batch"], f"{r['kv_len']:,}", r.get("backend", "—"), render.us(r.get("back_to_back_us")), _gib(r.get("kv_bytes")),
         f"{r['gbs']:.0f}" if "gbs" in r else "OOM", f"{100 * r['gbs'] / copy:.0f} %" if "gbs" in r else "—")
        for r in result("decode")], ["---:", "---:", "---", "---:", "---:", "---:", "---:"])


def varlen():
    rows = result("varlen")
    lengths = rows[0]["lengths"]
    table = render.md_table(["how", "causal", "median time", "FLOPs spent on padding", "note"], [
        (r["way"], "yes" if r["causal"] else "no", render.us(r.get("median_us")), f"{r['wasted_flops_pct']:.0f} %",
         render.md_cell(r.get("unavailable", ""))) for r in rows], ["---", "---", "---:", "---:", "---"])
    return table + (f"\n\n{len(lengths)} sequences, {min(lengths)} to {max(lengths)} tokens "
                    f"({sum(lengths):,} in all), 16 heads, head dim 128, bf16.")


def e2e():
    rows = []
    for r in result("e2e"):
        if "layer_speedup" not in r:
            continue
        rows.append((r["batch"], f"{r['seq']:,}", render.us(r["naive_layer"]["median_us"]),
                     render.us(r["sdpa_layer"]["median_us"]), f"{r['naive_attention_share_pct']:.0f} %",
                     f"{r['sdpa_attention_share_pct']:.0f} %", f"+{r['throughput_gain_pct']:.0f} %"))
    return render.md_table(["batch", "S", "layer, naive attention", "layer, SDPA", "attention's share (naive)",
                            "attention's share (SDPA)", "layer throughput gain"], rows,
                           ["---:", "---:", "---:", "---:", "---:", "---:", "---:"])


def cost(layers="32"):
    """$ per million tokens for a model of `layers` such layers, at a price the reader can change."""
    layers = int(layers)
    rows = []
    for r in result("e2e"):
        if "prefill_tokens_per_s_per_layer" in r:
            rows.append(("prefill", f"batch {r['batch']} × {r['seq']:,} tokens", r["prefill_tokens_per_s_per_layer"] / layers))
    for r in result("decode_step"):
        if "decode_tokens_per_s_per_layer" in r:
            rows.append(("decode", f"batch {r['batch']}, KV cache {r['kv_len']:,}", r["decode_tokens_per_s_per_layer"] / layers))
    body = "".join(
        f'<tr><td>{phase}</td><td>{what}</td><td>{tps:,.0f}</td>'
        f'<td class="attnprof-cost" data-tokens-per-s="{tps:.6g}">{DEFAULT_PRICE / 3600 / tps * 1e6:.3f}</td></tr>'
        for phase, what, tps in rows)
    return (f'<div class="attnprof-price"><label>$ per GPU-hour: <input type="number" id="attnprof-price" '
            f'value="{DEFAULT_PRICE:.2f}" step="0.10" min="0"></label></div>\n\n'
            f'<table><thead><tr><th>phase</th><th>batch</th><th>tokens/s per H200 ({layers} layers)</th>'
            f'<th>$ per million tokens</th></tr></thead><tbody>{body}</tbody></table>')


def fallback():
    rows = result("fallback")
    fast = rows[0]
    out = []
    for r in rows:
        if "error" in r:
            out.append((render.md_cell(r["case"]), "error", "—", "—", "—", render.md_cell(r["error"])))
            continue
        out.append((render.md_cell(r["case"]), f"**{r['ran']}**", r["device_ops"], render.us(r["device_us"]),
                    render.us(r.get("median_us")), f"{r['median_us'] / fast['median_us']:.1f}×"))
    return render.md_table(["inputs", "backend that ran (kernels)", "device ops / forward", "device time / forward",
                            "median forward", "vs the fast path"], out, ["---", "---", "---:", "---:", "---:", "---:"])


def fallback_reasons():
    rows = []
    for r in result("fallback"):
        for backend, e in r.get("eligibility", {}).items():
            if not e["eligible"]:
                why = "; ".join(dict.fromkeys(reasons.clean(x) for x in e["reasons"]))
                rows.append((render.md_cell(r["case"]), backend, render.md_cell(why[:400])))
    return render.md_table(["inputs", "backend refused", "PyTorch's reason (can_use_*, debug=True)"], rows)


def verify_table():
    rows = []
    for r in result("verify"):
        note = r.get("masked_row") or r.get("reason", "")
        note += f" ({r['note']})" if r.get("note") else ""
        rows.append((r["path"], r["dtype"], "×".join(map(str, r["shape"])), "yes" if r["fully_masked_row"] else "",
                     f"**{r['status']}**" if r["status"] == "fail" else r["status"],
                     f"{r['rel_frobenius']:.1e}" if r.get("rel_frobenius") == r.get("rel_frobenius") and "rel_frobenius" in r else
                     ("NaN" if r.get("nan") else "—"),
                     f"{r['max_abs']:.1e}" if "max_abs" in r and r["max_abs"] == r["max_abs"] else "—",
                     (f"b{r['worst_row']['batch']} h{r['worst_row']['head']} q{r['worst_row']['query']}: "
                      f"{r['worst_row']['rel_err']:.1e}") if "worst_row" in r else "—",
                     f"{r['tolerance']:.0e}" if "tolerance" in r else "—", render.md_cell(note)[:120]))
    return render.md_table(["path", "dtype", "shape", "fully masked row", "status", "rel. Frobenius", "max abs",
                            "worst row (rel. error)", "tolerance", "note"], rows)


PIECES = {"figure": figure, "runstamp": stamp, "ceilings": ceilings, "sweep-table": sweep_table,
          "fused-vs-naive": fused_vs_naive, "softmax-share": softmax_share, "roofline-table": roofline_table,
          "fastest": fastest, "gqa": gqa, "decode": decode, "varlen": varlen, "e2e": e2e, "cost": cost,
          "fallback": fallback, "fallback-reasons": fallback_reasons, "verify": verify_table}


def _verdict(ours_lo, ours_hi, claim_lo, claim_hi):
    if ours_hi < claim_lo:
        return "ours is smaller"
    if ours_lo > claim_hi:
        return "ours is larger"
    return "agrees (overlaps the claimed range)"


def claims():
    """The claims of ../shared/reference/claims.md beside our measurements, with a computed verdict."""
    rows = []
    e = [r for r in result("e2e") if "throughput_gain_pct" in r]
    g = [r["throughput_gain_pct"] for r in e]
    rows.append(("1. naive → fused attention: 20–40 % end-to-end throughput", "articles about the post",
                 f"+{min(g):.0f} % to +{max(g):.0f} % for one random-weight decoder layer "
                 "(" + ", ".join(f"B={r['batch']}, S={r['seq']}" for r in e) + ")", _verdict(min(g), max(g), 20, 40)))
    s = pieces.summary("inplace")
    b, h, n, d = s["shape"]
    share = 100 * sum(op["duration_us"] for op in s["ops"] if "softmax" in op["name"] or "masked_fill" in op["name"]) / s["forward_device_us"]
    flop_share = 100 * 6 / (4 * d + 6)
    rows.append(("2. softmax + masking ≈ 40 % of runtime, ≈ 0.02 % of FLOPs", "AMD ROCm FlashAttention benchmarks",
                 f"{share:.0f} % of the in-place forward's device time; ≈ {flop_share:.1f} % of its FLOPs",
                 f"time share: {_verdict(share, share, 30, 50)}; FLOP share: {_verdict(flop_share, flop_share, 0.01, 0.03)}"))
    flash_peak = max(_value(r, "tflops_back_to_back") or 0 for r in result("sweep") if r["path"] == "flash")
    speed = [r for r in _rows_fused_vs_naive("flash")]
    rows.append(("3. FlashAttention-2 up to ≈ 230 TFLOP/s (A100); 3–9× faster than naive", "articles about the post",
                 f"SDPA flash (FlashAttention-2) reaches {flash_peak:.0f} TFLOP/s on the H200; "
                 f"{min(x for x, _ in speed):.1f}× to {max(x for x, _ in speed):.1f}× faster than naive in place",
                 f"TFLOP/s: different GPU, not comparable; speedup: {_verdict(min(x for x, _ in speed), max(x for x, _ in speed), 3, 9)}"))
    long = [(x, m) for (x, m), r in zip(speed, _sweep_rows_flash()) if r["shape"][2] >= 8192]
    rows.append(("4. SDPA flash: up to ≈ 5× less memory, 2–3× throughput on long sequences", "articles about the post",
                 f"at S ≥ 8192: {min(m for _, m in long):.0f}× to {max(m for _, m in long):.0f}× less memory, "
                 f"{min(x for x, _ in long):.1f}× to {max(x for x, _ in long):.1f}× faster (vs naive in place)",
                 f"memory: {_verdict(min(m for _, m in long), max(m for _, m in long), 1, 5)}; "
                 f"speed: {_verdict(min(x for x, _ in long), max(x for x, _ in long), 2, 3)}"))
    fb = [r for r in result("fallback") if "ran" in r]
    left = [r for r in fb[1:] if r["ran"] != fb[0]["ran"]]
    rows.append(("5. outside flash's envelope SDPA silently falls back; only the profiler shows it", "articles about the post",
                 f"{len(left)} of {len(fb) - 1} changed inputs ran another backend than the fast path "
                 f"({', '.join(sorted({r['ran'] for r in left}))}); the output itself gives no sign of it",
                 "confirmed" if left else "not seen"))
    v = result("verify")
    fails = [r for r in v if r["status"] == "fail"]
    rows.append(("6. custom kernels add numerical risk: verify across backends", "articles about the post",
                 f"{sum(r['status'] == 'pass' for r in v)} checks pass, {len(fails)} fail: "
                 + "; ".join(sorted({_fail_note(r) for r in fails})),
                 "confirmed: paths disagree on a fully masked row" if any(r["fully_masked_row"] for r in fails) else "no disagreement seen"))
    rows.append(("7. unanswered: cost per token, gains under continuous batching", "articles about the post",
                 "cost per token: see the table below; continuous batching itself is not measured here: "
                 "the variable-length batch on the serving page is the nearest proxy", "partly answered"))
    return render.md_table(["claim", "made by", "our H200 measurement", "verdict"], rows)


def _fail_note(r):
    if r["fully_masked_row"]:
        return f"{r['path']} ({r.get('masked_row') or 'error'} on a fully masked row)"
    return f"{r['path']} {r['dtype']}"


def _sweep_rows_flash():
    return [r for d in (64, 128) for r in _sweep_points(d, "flash")
            if _value(r, "back_to_back_us") and _value(next(n for n in _sweep_points(d, "inplace")
                                                            if n["shape"][2] == r["shape"][2]), "back_to_back_us")]


def _rows_fused_vs_naive(fused):
    out = []
    for r in _sweep_rows_flash() if fused == "flash" else []:
        n = next(n for n in _sweep_points(r["shape"][3], "inplace") if n["shape"][2] == r["shape"][2])
        out.append((n["back_to_back_us"] / r["back_to_back_us"], n["peak_extra_bytes"] / r["peak_extra_bytes"]))
    return out


PIECES["claims"] = claims
