"""attnprof/flash-attn4: FlashAttention-4's forward (flash-attn-4, written in NVIDIA's CuTe DSL) as a
kernel-hub module. A thin layer: the kernels are compiled by the CuTe DSL at the first call for each
shape, head dim and dtype, from the installed `flash_attn.cute` package (flash-attn-4 4.0.0b36)."""
from flash_attn.cute import flash_attn_func as _flash_attn_func

__all__ = ["flash_attn_func"]


def flash_attn_func(q, k, v, causal=False, softmax_scale=None):
    """Attention on q, k, v of shape [batch, seq, heads, head_dim] (bf16 or fp16, on a CUDA GPU);
    returns the output in the same layout."""
    out = _flash_attn_func(q, k, v, causal=causal, softmax_scale=softmax_scale)
    return out[0] if isinstance(out, tuple) else out  # some versions also return the log-sum-exp
