# --8<-- [start:attention]
import torch


def compiled(attention, mode="default"):
    """The same eager attention, handed to torch.compile: Inductor traces it on the first call at a
    shape and generates fused kernels for it. mode="reduce-overhead" also replays them as a CUDA graph."""
    return torch.compile(attention, mode=mode)
# --8<-- [end:attention]
