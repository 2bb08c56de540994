# --8<-- [start:attention]
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {
    "math": SDPBackend.MATH,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "flash": SDPBackend.FLASH_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
}


def attention(q, k, v, backend=None):
    """Causal SDPA; `backend` pins one implementation, None lets SDPA choose."""
    if backend is None:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    with sdpa_kernel(BACKENDS[backend]):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
# --8<-- [end:attention]
