# --8<-- [start:attention]
import contextlib

import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {
    "math": SDPBackend.MATH,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "flash": SDPBackend.FLASH_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
}


def attention(q, k, v):
    """Causal attention on [batch, heads, seq, head_dim]; SDPA picks the implementation."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def only(name):
    """A context in which SDPA may use the backend `name` alone; None leaves the choice to SDPA."""
    return sdpa_kernel(BACKENDS[name]) if name else contextlib.nullcontext()
# --8<-- [end:attention]
