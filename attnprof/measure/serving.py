"""Serving shapes and the whole layer, on a GPU: GQA, decode with a KV cache, variable-length
batches, and a small random-weight decoder layer with naive vs SDPA attention.

Each function returns rows for one JSON record; every time is a median after warm-up (bench). What a page
compares (the layer with naive against SDPA attention, a decode step against its variants) is timed in
turns in the same process (bench.together).
"""
from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch import nn

from . import bench, dispatch, timing
from ..model.stages import load_snippet
from ..text import first_line
from .numerics import default_device

BF16 = torch.bfloat16


def _rand(*shape, dtype=BF16):
    return torch.randn(*shape, device=default_device(), dtype=dtype)


def gqa(b=8, hq=32, hkv=4, s=4096, d=128) -> list[dict]:
    """Grouped-query attention two ways: SDPA's enable_gqa, and K/V repeated to every query head."""
    q, k, v = _rand(b, hq, s, d), _rand(b, hkv, s, d), _rand(b, hkv, s, d)
    group = hq // hkv
    ways = {
        "enable_gqa=True": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
        "repeat_interleave K/V, then SDPA": lambda: F.scaled_dot_product_attention(
            q, k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1), is_causal=True),
    }
    rows = []
    for way, forward in ways.items():
        rows.append({"way": way, "shape_q": [b, hq, s, d], "shape_kv": [b, hkv, s, d], **bench.measure(forward)})
    return rows


def decode(batches=(1, 8, 64), kv_lens=(1024, 4096, 16384, 32768), h=16, d=128) -> list[dict]:
    """One new query token against a KV cache: memory-bound, so report the bytes of K and V read per second."""
    rows = []
    for b in batches:
        for kv in kv_lens:
            row = {"batch": b, "kv_len": kv, "heads": h, "head_dim": d}
            try:
                q, k, v = _rand(b, h, 1, d), _rand(b, h, kv, d), _rand(b, h, kv, d)
                forward = lambda: F.scaled_dot_product_attention(q, k, v)
                row["backend"] = dispatch.sdpa_choice(q, k, v, None, 0.0, False)
                row.update(bench.measure(forward))
                if "back_to_back_us" in row:
                    row["kv_bytes"] = 2 * b * h * kv * d * 2
                    row["gbs"] = row["kv_bytes"] / row["back_to_back_us"] / 1e3
            except torch.OutOfMemoryError:
                row["oom"] = True
            q = k = v = None
            rows.append(row)
    return rows


def varlen(lengths=None, h=16, d=128, seed=0) -> list[dict]:
    """A batch of sequences of different lengths: padded dense SDPA, nested jagged tensors (NJT) and a
    FlexAttention document mask over the packed tokens; time, and FLOPs spent on padding."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    gen = torch.Generator().manual_seed(seed)
    lengths = lengths or [int(x) for x in torch.randint(128, 4097, (16,), generator=gen)]
    total, longest = sum(lengths), max(lengths)
    seqs = [_rand(n, h, d) for n in lengths]  # [seq, heads, dim] each
    padded = torch.zeros(len(lengths), longest, h, d, device=default_device(), dtype=BF16)
    for i, x in enumerate(seqs):
        padded[i, : x.shape[0]] = x
    padded = padded.transpose(1, 2)  # [B, H, S, D]
    valid = torch.arange(longest, device=default_device())[None, :] < torch.tensor(lengths, device=default_device())[:, None]
    packed = torch.cat(seqs).transpose(0, 1)[None]  # [1, H, total, D]
    doc = torch.cat([torch.full((n,), i, device=default_device()) for i, n in enumerate(lengths)])
    flex = torch.compile(flex_attention)

    def useful(causal):
        return sum(2 * h * n * n * d * (0.5 if causal else 1) * 2 for n in lengths)

    rows = []
    for causal in (True, False):
        padded_flops = 2 * h * longest * longest * d * (0.5 if causal else 1) * 2 * len(lengths)
        key_mask = None if causal else valid[:, None, None, :]  # right padding: causal needs no key mask
        ways = {"padded, dense SDPA": lambda: F.scaled_dot_product_attention(
            padded, padded, padded, is_causal=causal, attn_mask=key_mask)}

        def doc_mask(b, hh, qi, ki, causal=causal):
            same = doc[qi] == doc[ki]
            return (same & (qi >= ki)) if causal else same
        block_mask = create_block_mask(doc_mask, None, None, total, total, device=default_device())
        ways["FlexAttention, document mask over packed tokens"] = lambda: flex(packed, packed, packed, block_mask=block_mask)
        njt = torch.nested.nested_tensor(seqs, layout=torch.jagged).transpose(1, 2)
        ways["nested jagged tensor (NJT), SDPA"] = lambda: F.scaled_dot_product_attention(njt, njt, njt, is_causal=causal)
        for way, forward in ways.items():
            row = {"way": way, "causal": causal, "lengths": lengths, "heads": h, "head_dim": d, "useful_flops": useful(causal),
                   "computed_flops": padded_flops if way.startswith("padded") else useful(causal)}
            row["wasted_flops_pct"] = 100 * (1 - row["useful_flops"] / row["computed_flops"])
            try:
                row.update(bench.measure(forward))
            except RuntimeError as e:
                row["unavailable"] = first_line(e)[:300]
            rows.append(row)
    return rows


class DecoderLayer(nn.Module):
    """A pre-norm decoder layer with random weights: attention (naive or SDPA) and a GELU MLP."""

    def __init__(self, d_model=2048, heads=16, attention="sdpa"):
        super().__init__()
        self.heads, self.attention = heads, attention
        self.norm1, self.norm2 = nn.RMSNorm(d_model), nn.RMSNorm(d_model)
        self.qkv, self.out = nn.Linear(d_model, 3 * d_model, bias=False), nn.Linear(d_model, d_model, bias=False)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model, bias=False), nn.GELU(),
                                 nn.Linear(4 * d_model, d_model, bias=False))
        self._naive = load_snippet("inplace")
        self._mask = None

    def attend(self, q, k, v):
        if self.attention == "sdpa":
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        s = q.shape[-2]
        if self._mask is None or self._mask.shape[-1] != s:
            self._mask = self._naive.causal_mask(s, q.device)
        return self._naive.attention(q, k, v, self._mask)

    def split(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        return q, k, v

    def forward(self, x):
        q, k, v = self.split(x)
        b, s, _ = x.shape
        x = x + self.out(self.attend(q, k, v).transpose(1, 2).reshape(b, s, -1))
        return x + self.mlp(self.norm2(x))


@contextlib.contextmanager
def attending(layer, kind: str):
    """The layer with its attention computed as `kind` ("naive" or "sdpa") for a while."""
    before, layer.attention = layer.attention, kind
    try:
        yield
    finally:
        layer.attention = before


def end_to_end(shapes=((8, 1024), (2, 4096), (1, 8192)), d_model=2048, heads=16) -> list[dict]:
    """Layer time with naive vs SDPA attention, and attention's share of each layer."""
    rows = []
    torch.manual_seed(0)
    layer = DecoderLayer(d_model, heads).to(default_device(), BF16).eval()
    for b, s in shapes:
        x = _rand(b, s, d_model)
        q, k, v = layer.split(x)
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        row = {"batch": b, "seq": s, "d_model": d_model, "heads": heads}
        # the four timed in turns (bench.together), each under its own choice of attention
        forwards, contexts = {}, {}
        for kind in ("naive", "sdpa"):
            forwards[f"{kind}_layer"], forwards[f"{kind}_attention"] = (lambda: layer(x)), (lambda: layer.attend(q, k, v))
            contexts[f"{kind}_layer"] = contexts[f"{kind}_attention"] = lambda kind=kind: attending(layer, kind)
        row.update(bench.together(forwards, contexts=contexts))
        ok = all("median_us" in row[key] for key in ("naive_layer", "sdpa_layer", "naive_attention", "sdpa_attention"))
        if ok:
            for kind in ("naive", "sdpa"):
                row[f"{kind}_attention_share_pct"] = 100 * row[f"{kind}_attention"]["median_us"] / row[f"{kind}_layer"]["median_us"]
            row["layer_speedup"] = row["naive_layer"]["median_us"] / row["sdpa_layer"]["median_us"]
            row["throughput_gain_pct"] = 100 * (row["layer_speedup"] - 1)
            row["prefill_tokens_per_s_per_layer"] = b * s / (row["sdpa_layer"]["back_to_back_us"] * 1e-6)
        rows.append(row)
    return rows


# --8<-- [start:decode]
def static_cache(b, heads, max_len, d):
    """A KV cache allocated once for `max_len` positions, as serving engines keep one (a static
    cache); random values stand in for the earlier tokens' keys and values."""
    return _rand(b, heads, max_len, d), _rand(b, heads, max_len, d)


def decode_attend(q, k, v, k_cache, v_cache, pos: int):
    """One decode step's attention: the new token's K and V are written into the cache in place at
    `pos`, and the query attends over the valid prefix (positions 0 to `pos`), a view of the cache."""
    k_cache[:, :, pos:pos + 1] = k
    v_cache[:, :, pos:pos + 1] = v
    return F.scaled_dot_product_attention(q, k_cache[:, :, :pos + 1], v_cache[:, :, :pos + 1])
# --8<-- [end:decode]


def concat_attend(q, k, v, k_cache, v_cache, pos: int):
    """The same step done by concatenating the whole cache with the new token (a new tensor every
    step): what this page measured before, kept to show what it cost."""
    k_all = torch.cat([k_cache[:, :, :pos], k], dim=2)
    v_all = torch.cat([v_cache[:, :, :pos], v], dim=2)
    return F.scaled_dot_product_attention(q, k_all, v_all)


def decode_step(batches=(1, 16, 64), kv_len=4096, d_model=2048, heads=16) -> list[dict]:
    """One decode step of the layer (one new token per sequence after `kv_len` cached ones): the
    norms, the QKV projection, K and V written into a static cache in place, SDPA over the valid
    prefix, the output projection and the MLP. The same step with the cache concatenated is
    measured beside it."""
    torch.manual_seed(0)
    layer = DecoderLayer(d_model, heads).to(default_device(), BF16).eval()
    d = d_model // heads
    rows = []
    for b in batches:
        x = _rand(b, 1, d_model)
        k_cache, v_cache = static_cache(b, heads, kv_len + 1, d)

        def step(attend):
            q, k, v = layer.split(x)
            h = x + layer.out(attend(q, k, v, k_cache, v_cache, kv_len).transpose(1, 2).reshape(b, 1, -1))
            return h + layer.mlp(layer.norm2(h))
        row = {"batch": b, "kv_len": kv_len, "d_model": d_model, "heads": heads, "cache": "static, written in place"}
        with torch.no_grad():
            q, k, v = layer.split(x)
            row["backend"] = dispatch.sdpa_choice(q, k_cache[:, :, :kv_len + 1], v_cache[:, :, :kv_len + 1],
                                                  None, 0.0, False)
            row["cache_bytes"] = 2 * k_cache.numel() * k_cache.element_size()
            # what a stream of eager steps waits for (analysis/timing.py); then the step, the same step with
            # the cache concatenated, and the step replayed from a CUDA graph (as serving engines replay
            # small-batch decode steps), timed in turns (bench.together)
            row["stream"] = timing.stream(lambda: step(decode_attend))
            forwards = {"step": lambda: step(decode_attend), "concat": lambda: step(concat_attend)}
            try:
                forwards["graph"] = load_snippet("graphed").graphed(lambda: step(decode_attend))
            except RuntimeError as e:
                row["graph"] = {"error": f"{type(e).__name__}: {first_line(e)}"[:300]}
            timed = bench.together(forwards)
            m, row["concat"] = timed["step"], timed["concat"]
            if "graph" in timed:
                row["graph"] = timed["graph"]
        row.update(m)
        if "back_to_back_us" in m:
            row["decode_tokens_per_s_per_layer"] = b / (m["back_to_back_us"] * 1e-6)
        k_cache = v_cache = None
        rows.append(row)
    return rows
