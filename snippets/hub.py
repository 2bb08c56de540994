# --8<-- [start:attention]
def load_flash_attn():
    """FlashAttention-2 from the Hugging Face kernel hub (pip install kernels), as the post loads it.
    The first call downloads the build that matches this torch, CUDA and GPU, then it is cached."""
    from kernels import get_kernel
    return get_kernel("kernels-community/flash-attn2", version=3)


def attention(q, k, v, flash_attn):
    """The hub kernel wants [batch, seq, heads, head_dim]: transpose in (views, no copy) and back."""
    out = flash_attn.flash_attn_func(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=True)
    return out.transpose(1, 2)
# --8<-- [end:attention]
