"""What a CUDA graph saves: the same forward launched op by op and replayed as one graph, at the
post's shape and at a decode step (one query token against a KV cache of growing length).

Times are CUDA-event medians of single calls (launch gaps included, as a caller sees them) and
of back-to-back calls (the throughput of a stream of forwards); see bench.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from . import bench
from ..model.stages import DEFAULT_SHAPE, load_snippet
from .numerics import make_inputs


def _times(forward) -> dict:
    """CUDA-event times of single calls and of back-to-back runs (medians: derived.py)."""
    with torch.no_grad():
        return {"times_us": bench.time_forward(forward, reps=50, warmup=5),
                "back_to_back_us_each": bench.back_to_back_each(forward, calls=20, reps=5)}


def _paths(q, k, v, causal):
    """Eager forwards over these inputs: SDPA pinned to flash and to cuDNN, and the compiled naive."""
    naive = load_snippet("naive")
    compiled = load_snippet("compiled").compiled(naive.attention)
    mask = (naive.causal_mask(q.shape[-2], q.device) if causal
            else torch.zeros(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device))
    return {
        "SDPA flash": ("flash", lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)),
        "SDPA cuDNN": ("cudnn", lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)),
        "naive, torch.compile": (None, lambda: compiled(q, k, v, mask)),
    }


def _row(where, path, backend, forward) -> dict:
    graphed = load_snippet("graphed").graphed
    sdpa = load_snippet("sdpa")
    row = {"where": where, "path": path}
    try:
        with sdpa.only(backend), torch.no_grad():
            row["eager"] = _times(forward)
            row["graph"] = _times(graphed(forward))
    except RuntimeError as e:  # a backend that does not take these inputs
        row["error"] = str(e).strip().splitlines()[0][:300]
    return row


def graphs(kv_lens=(1024, 4096, 16384, 32768), heads=16, head_dim=128) -> list[dict]:
    rows = []
    q, k, v = make_inputs(DEFAULT_SHAPE, torch.bfloat16, "cuda")
    for path, (backend, forward) in _paths(q, k, v, causal=True).items():
        rows.append({"shape": list(DEFAULT_SHAPE), **_row("the post's shape", path, backend, forward)})
    for kv in kv_lens:
        q = make_inputs((1, heads, 1, head_dim), torch.bfloat16, "cuda")[0]
        k, v = make_inputs((1, heads, kv, head_dim), torch.bfloat16, "cuda", seed=1)[:2]
        for path, (backend, forward) in _paths(q, k, v, causal=False).items():
            rows.append({"shape": [1, heads, 1, head_dim], "kv_len": kv,
                         **_row(f"decode, KV {kv}", path, backend, forward)})
    return rows
