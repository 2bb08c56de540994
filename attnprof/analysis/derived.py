"""Every figure of a measurement run that is computed rather than measured, from the raw samples and
settings the run keeps: a run's record holds its samples, and the build derives these once as it reads it.

A timing keeps its samples beside its median: `times_us` beside `median_us` (CUDA events around one
call each), `back_to_back_us_each` beside `back_to_back_us` (per call, over runs of queued calls),
`<name>_us_each` beside `<name>_us`. Rates (TFLOP/s, GB/s, tokens/s), shares and ratios follow from
those medians and the shapes. No torch here.
"""
from __future__ import annotations

import statistics
from math import prod

from .flops import causal_flops, tflops

SAMPLES = {"median_us": "times_us", "back_to_back_us": "back_to_back_us_each"}  # median -> its samples


def medians(node):
    """`node` (a run's result) with every median set from the samples beside it, recursively: new dicts and lists,
    the lists of samples shared (nothing here changes one)."""
    if isinstance(node, list):
        return node if all(not isinstance(x, (dict, list)) for x in node) else [medians(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: medians(v) for k, v in node.items()}
    for key in node:
        if key.endswith("_us_each") and key != "back_to_back_us_each":
            out[key.removesuffix("_each")] = statistics.median(node[key])
    for median, samples in SAMPLES.items():
        if samples in node:
            out[median] = statistics.median(node[samples])
    return out


def _rates(row):
    """TFLOP/s of a forward at its shape (causal FLOPs), per call and back to back."""
    if "median_us" in row:
        row["tflops"] = tflops(causal_flops(row["shape"]), row["median_us"])
    if "back_to_back_us" in row:
        row["tflops_back_to_back"] = tflops(causal_flops(row["shape"]), row["back_to_back_us"])
    return row


def _per_row(fn):
    return lambda rows: [fn(r) for r in rows]


def _ceilings(r):
    r["matmul_tflops"] = tflops(2 * prod(r["matmul_shape"]), r["matmul_us"])
    if "copy_us" in r:  # a record that also measured the copy, which the pages take from the hardware run
        r["copy_gbs"] = 2 * r["copy_bytes"] / r["copy_us"] / 1e3  # bytes read + written
    return r


def _hardware(r):
    bmm_flops = 2 * prod(r["bmm_shape"])  # [B×H, S, D, S]: a batch of S×D by D×S products
    r["fp32_matmul_tflops"] = tflops(2 * prod(r["fp32_matmul_shape"]), r["fp32_matmul_us"])
    r["fp32_bmm_tflops"] = tflops(bmm_flops, r["fp32_bmm_us"])
    r["bf16_bmm_tflops"] = tflops(bmm_flops, r["bf16_bmm_us"])
    r["copy_gbs"] = 2 * r["copy_bytes"] / r["copy_us"] / 1e3
    return r


def _recompile(r):
    r["points"] = [_rates(p) if "median_us" in p else p for p in r["points"]]
    for p in r["points"]:
        p.pop("tflops_back_to_back", None)  # the recompile run reports per call only
    return r


def _graphs(row):
    if "eager" in row and "graph" in row:
        row["saved_us"] = row["eager"]["median_us"] - row["graph"]["median_us"]
    return row


def _decode(row):
    if "back_to_back_us" in row:
        row["kv_bytes"] = 2 * row["batch"] * row["heads"] * row["kv_len"] * row["head_dim"] * 2  # K and V, bf16
        row["gbs"] = row["kv_bytes"] / row["back_to_back_us"] / 1e3
    return row


def _varlen(row):
    if "computed_flops" in row:
        row["wasted_flops_pct"] = 100 * (1 - row["useful_flops"] / row["computed_flops"])
    return row


def _e2e(row):
    parts = ("naive_layer", "sdpa_layer", "naive_attention", "sdpa_attention")
    if all("median_us" in row.get(p, {}) for p in parts):
        for kind in ("naive", "sdpa"):
            row[f"{kind}_attention_share_pct"] = 100 * row[f"{kind}_attention"]["median_us"] / row[f"{kind}_layer"]["median_us"]
        row["layer_speedup"] = row["naive_layer"]["median_us"] / row["sdpa_layer"]["median_us"]
        row["throughput_gain_pct"] = 100 * (row["layer_speedup"] - 1)
        row["prefill_tokens_per_s_per_layer"] = row["batch"] * row["seq"] / (row["sdpa_layer"]["back_to_back_us"] * 1e-6)
    return row


def _decode_step(row):
    if "back_to_back_us" in row:
        row["decode_tokens_per_s_per_layer"] = row["batch"] / (row["back_to_back_us"] * 1e-6)
    return row


def _rates_where_timed(row):
    return _rates(row) if "median_us" in row or "back_to_back_us" in row else row


def _same(result):
    return result


# run name -> what it computes from its medians (after `medians`); a run not named computes nothing more
DERIVE = {
    "ceilings": _ceilings, "hardware": _hardware, "sweep": _per_row(_rates_where_timed),
    "fastest": _per_row(_rates_where_timed), "recompile": _recompile, "graphs": _per_row(_graphs),
    "decode": _per_row(_decode), "varlen": _per_row(_varlen), "e2e": _per_row(_e2e),
    "decode_step": _per_row(_decode_step),
}


def derive(run: str, result):
    """A run's result with every median and computed figure set from its samples and settings."""
    return DERIVE.get(run, _same)(medians(result))


# what the functions of DERIVE set, beside the medians: a record holds none of them
FIGURES = {"tflops", "tflops_back_to_back", "matmul_tflops", "copy_gbs", "fp32_matmul_tflops", "fp32_bmm_tflops",
           "bf16_bmm_tflops", "saved_us", "kv_bytes", "gbs", "wasted_flops_pct", "naive_attention_share_pct",
           "sdpa_attention_share_pct", "layer_speedup", "throughput_gain_pct", "prefill_tokens_per_s_per_layer",
           "decode_tokens_per_s_per_layer"}


def measured(node):
    """A run's result as measured: without its medians (where their samples stand beside them) and the figures
    `derive` computes, which the build derives again as it reads the record."""
    if isinstance(node, list):
        return [measured(item) for item in node]
    if not isinstance(node, dict):
        return node
    derived_here = FIGURES | {k for k in node if f"{k}_each" in node} | ({"median_us"} if "times_us" in node else set())
    return {k: measured(v) for k, v in node.items() if k not in derived_here}
