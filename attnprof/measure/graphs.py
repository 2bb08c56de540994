"""What a CUDA graph saves: the same forward launched op by op and replayed as one graph, at the
post's shape and at a decode step (one query token against a KV cache of growing length).

Times are CUDA-event medians of single calls (launch gaps included, as a caller sees them) and
of back-to-back calls (the throughput of a stream of forwards); see bench. At each place, every path's eager
and replayed forwards are timed interleaved, in rounds (bench.interleaved).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from . import bench
from ..model.stages import DEFAULT_SHAPE, load_snippet
from .numerics import make_inputs


TIMES, RUNS, CALLS, ROUNDS = 50, 5, 20, 5  # per forward: one-call times, back-to-back runs of CALLS; in ROUNDS rounds


def _arm(backend, forward, rounds: int):
    """One round's CUDA-event times of one forward (eager or replayed): its share of single calls and of
    back-to-back runs (medians: derived.py), under its backend's pinning."""
    sdpa = load_snippet("sdpa")

    def measure() -> dict:
        with sdpa.only(backend), torch.no_grad():
            return {"times_us": bench.time_forward(forward, reps=TIMES // rounds, warmup=1),
                    "back_to_back_us_each": bench.back_to_back_each(forward, calls=CALLS, reps=RUNS // rounds)}
    return measure


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


def _rows(where: str, paths: dict, rounds: int, seed=None, **fields) -> list[dict]:
    """Every path at one place, eager and replayed as a CUDA graph, all timed interleaved (bench.interleaved:
    `rounds` rounds, each arm once a round in a shuffled order, a round at a throttled clock dropped for all)."""
    graphed = load_snippet("graphed").graphed
    sdpa = load_snippet("sdpa")
    rows, arms = [], {}
    for path, (backend, forward) in paths.items():
        row = {**fields, "where": where, "path": path}
        try:
            with sdpa.only(backend), torch.no_grad():
                forward()  # a backend that does not take these inputs raises here
                arms[(path, "eager")] = _arm(backend, forward, rounds)
                arms[(path, "graph")] = _arm(backend, graphed(forward), rounds)
        except RuntimeError as e:
            arms.pop((path, "eager"), None)
            row["error"] = str(e).strip().splitlines()[0][:300]
        rows.append(row)
    measured = bench.interleaved(arms, rounds, seed=seed)
    for row in rows:
        if "error" in row:
            continue
        eager, graph = measured[(row["path"], "eager")], measured[(row["path"], "graph")]
        if "error" in eager or "error" in graph:
            row["error"] = (eager.get("error") or graph["error"])[:300]
        else:
            row.update(eager=eager, graph=graph)
    return rows


def graphs(kv_lens=(1024, 4096, 16384, 32768), heads=16, head_dim=128, rounds=ROUNDS, seed=None) -> list[dict]:
    q, k, v = make_inputs(DEFAULT_SHAPE, torch.bfloat16, "cuda")
    rows = _rows("the post's shape", _paths(q, k, v, causal=True), rounds, seed, shape=list(DEFAULT_SHAPE))
    for kv in kv_lens:
        q = make_inputs((1, heads, 1, head_dim), torch.bfloat16, "cuda")[0]
        k, v = make_inputs((1, heads, kv, head_dim), torch.bfloat16, "cuda", seed=1)[:2]
        rows += _rows(f"decode, KV {kv}", _paths(q, k, v, causal=False), rounds, seed,
                      shape=[1, heads, 1, head_dim], kv_len=kv)
    return rows
