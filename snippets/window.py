"""Sliding-window causal attention written three ways, for `python -m attnprof capture`.

Each function takes q, k, v of shape [batch, heads, seq, head_dim] and lets a query see itself and
the WINDOW - 1 keys before it. Masks are built on the first call and kept, so the profiled forwards
run only the attention. Each section imports what it uses, so it reads (and runs) on its own.
"""
# --8<-- [start:mask]
import functools

import torch

WINDOW = 256  # a query sees itself and the 255 keys before it


@functools.cache
def band(seq_len: int, device) -> torch.Tensor:
    """True where query i may see key j: j <= i and i - j < WINDOW."""
    i = torch.arange(seq_len, device=device)
    distance = i[:, None] - i[None, :]
    return (distance >= 0) & (distance < WINDOW)


@functools.cache
def outside_band(seq_len: int, device) -> torch.Tensor:
    """True where a query must not look: the band's complement."""
    return ~band(seq_len, device)
# --8<-- [end:mask]


# --8<-- [start:naive]
import math


def naive(q, k, v):
    """Sliding window, naive with a band mask"""
    scores = q @ k.transpose(-2, -1) * (1.0 / math.sqrt(q.shape[-1]))
    scores = scores.masked_fill(outside_band(q.shape[-2], q.device), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v
# --8<-- [end:naive]


# --8<-- [start:sdpa]
import torch.nn.functional as F


def sdpa(q, k, v):
    """Sliding window, SDPA with a boolean mask"""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=band(q.shape[-2], q.device))
# --8<-- [end:sdpa]


# --8<-- [start:flex]
import functools

import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention


def sliding_window(batch, head, q_idx, kv_idx):
    return (q_idx >= kv_idx) & (q_idx - kv_idx < WINDOW)


@functools.cache
def window_block_mask(seq_len: int, device):
    """The window as FlexAttention's block mask: key blocks wholly outside it are skipped."""
    return create_block_mask(sliding_window, B=None, H=None, Q_LEN=seq_len, KV_LEN=seq_len, device=device)


flex_compiled = torch.compile(flex_attention)  # compiled on the first call


def flex(q, k, v):
    """Sliding window, FlexAttention with a block mask"""
    return flex_compiled(q, k, v, block_mask=window_block_mask(q.shape[-2], q.device))
# --8<-- [end:flex]
