# --8<-- [start:attention]
import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

flex_compiled = torch.compile(flex_attention)  # compiled once; the first call generates the kernel


def causal(batch, head, q_idx, kv_idx):
    return q_idx >= kv_idx


def causal_block_mask(seq_len: int, device):
    """The causal mask as FlexAttention's block mask, built once outside the forward:
    key blocks that lie wholly in the future are skipped, not computed and masked."""
    return create_block_mask(causal, B=None, H=None, Q_LEN=seq_len, KV_LEN=seq_len, device=device)


def attention(q, k, v, block_mask):
    """Causal attention on [batch, heads, seq, head_dim] through FlexAttention."""
    return flex_compiled(q, k, v, block_mask=block_mask)
# --8<-- [end:attention]
