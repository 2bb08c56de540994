# --8<-- [start:attention]
import os


def load_flash_attn4(repo_path):
    """FlashAttention-4 (CuTe DSL) through the `kernels` interface, with the post's call shape. The
    repository id is this project's own; LOCAL_KERNELS maps it to the kernel repository on disk
    (the Hub's layout), so `get_kernel` resolves it there instead of downloading it."""
    os.environ["LOCAL_KERNELS"] = f"attnprof/flash-attn4={repo_path}"  # repo_id=path[:repo_id=path...]
    from kernels import get_kernel
    return get_kernel("attnprof/flash-attn4", version=1)


def attention(q, k, v, fa4):
    """FlashAttention-4 takes [batch, seq, heads, head_dim]: transpose in (views, no copy) and back."""
    out = fa4.flash_attn_func(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=True)
    return out.transpose(1, 2)
# --8<-- [end:attention]
