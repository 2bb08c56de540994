"""A model's attention: a Llama-style layer from Hugging Face transformers under each attn_implementation,
for `python -m attnprof capture snippets/layer.py:FUNCTION` (needs `pip install -e '.[layer]'`).

The capture calls FUNCTION(q, k, v) with q, k, v of shape [B, H, S, D]. Each function runs what a model
runs for one of its layers, in inference: the positions, RoPE's cos and sin, and the layer
(LlamaAttention: the q, k, v projections, RoPE, the attention under that attn_implementation, the output
projection). The layer has H query heads of size D sharing H // GROUP key/value heads (grouped-query),
hidden size H·D, and is built on the first call from a config with random weights (seed 0, nothing
downloaded) and kept. Its input hidden states are q read as [B, S, H·D] (a view, no copy): k and v are
not used, the layer makes its own with its projections. Its output is read back as [B, H, S, D].
The weights are drawn once in float32 and rounded to bfloat16, so the layer holds the same values in
every dtype: the capture's float64 check runs this very layer, the same weights, in float64.
To profile your own model's layer, build it the same way (your config, your attention class) and
feed it the same hidden states. Each section imports what it uses, so it reads (and runs) on its own.
"""
# --8<-- [start:layer]
import functools

import torch
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaAttention, LlamaRotaryEmbedding

GROUP = 4  # query heads per key/value head: 16 query heads share 4 key/value heads


def config(heads: int, head_dim: int, implementation: str) -> LlamaConfig:
    config = LlamaConfig(hidden_size=heads * head_dim, num_attention_heads=heads,
                         num_key_value_heads=heads // GROUP, head_dim=head_dim)
    config._attn_implementation = implementation  # what from_pretrained(..., attn_implementation=...) sets
    return config


@functools.cache
def weights(heads: int, head_dim: int) -> dict:
    """The layer's weights: drawn once (seed 0) in float32, rounded to bfloat16."""
    torch.manual_seed(0)
    layer = LlamaAttention(config(heads, head_dim, "eager"), layer_idx=0)
    return {name: w.to(torch.bfloat16) for name, w in layer.state_dict().items()}


@functools.cache
def layer(implementation: str, heads: int, head_dim: int, device, dtype):
    """The layer and its rotary embedding, in inference mode, on this device in this dtype."""
    c = config(heads, head_dim, implementation)
    attention = LlamaAttention(c, layer_idx=0)
    attention.load_state_dict(weights(heads, head_dim))
    return attention.to(device, dtype).eval(), LlamaRotaryEmbedding(c).to(device)
# --8<-- [end:layer]


# --8<-- [start:mask]
import functools

import torch
from torch.nn.attention.flex_attention import create_block_mask


def causal(batch, head, q_idx, kv_idx):
    return q_idx >= kv_idx


@functools.cache
def causal_mask(implementation: str, seq_len: int, device, dtype):
    """The causal mask a model hands its layers, as transformers builds it for each implementation when
    no token is padding: none for sdpa (SDPA's is_causal), a block mask for flex_attention, and for
    eager an additive [1, 1, S, S] mask (0 where a query may see a key, the dtype's minimum where not)."""
    if implementation == "sdpa":
        return None
    if implementation == "flex_attention":
        return create_block_mask(causal, B=None, H=None, Q_LEN=seq_len, KV_LEN=seq_len, device=device)
    future = torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).triu(1)
    return torch.zeros(1, 1, seq_len, seq_len, dtype=dtype, device=device).masked_fill(future, torch.finfo(dtype).min)
# --8<-- [end:mask]


# --8<-- [start:forward]
import torch


def run(implementation: str, q: torch.Tensor) -> torch.Tensor:
    """One layer's forward as a model runs it: positions, RoPE's cos and sin, the layer."""
    batch, heads, seq_len, head_dim = q.shape
    attention, rope = layer(implementation, heads, head_dim, q.device, q.dtype)
    hidden = q.reshape(batch, seq_len, heads * head_dim)  # q's values as hidden states (a view)
    positions = torch.arange(seq_len, device=q.device)[None]
    cos_sin = rope(hidden, positions)
    out, _ = attention(hidden, cos_sin, causal_mask(implementation, seq_len, q.device, q.dtype))
    return out.reshape(q.shape)


def eager(q, k, v):
    """Llama layer, attn_implementation="eager\""""
    return run("eager", q)


def sdpa(q, k, v):
    """Llama layer, attn_implementation="sdpa\""""
    return run("sdpa", q)


def flex_attention(q, k, v):
    """Llama layer, attn_implementation="flex_attention\""""
    return run("flex_attention", q)
# --8<-- [end:forward]
