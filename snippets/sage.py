# --8<-- [start:attention]
def load_sageattn():
    """SageAttention 1.0.6 (pip install sageattention==1.0.6): pure Triton, INT8 Q·Kᵀ."""
    from sageattention import sageattn
    return sageattn


def attention(q, k, v, sageattn):
    """Causal attention on [batch, heads, seq, head_dim] ("HND" in SageAttention's words)."""
    return sageattn(q, k, v, tensor_layout="HND", is_causal=True)
# --8<-- [end:attention]
