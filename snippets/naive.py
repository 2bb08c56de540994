# --8<-- [start:attention]
import math

import torch


def causal_mask(seq_len: int, device) -> torch.Tensor:
    """True above the diagonal: the future positions a query must not see."""
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).triu(1)


def attention(q, k, v, mask):
    """Causal attention on [batch, heads, seq, head_dim], written out op by op."""
    scores = q @ k.transpose(-2, -1)                     # matmul
    scores = scores * (1.0 / math.sqrt(q.shape[-1]))     # scale
    scores = scores.masked_fill(mask, float("-inf"))     # masking, out of place
    weights = torch.softmax(scores, dim=-1)              # softmax
    return weights @ v                                   # matmul
# --8<-- [end:attention]
