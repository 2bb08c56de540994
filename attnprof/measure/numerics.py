"""The numerics every measurement shares: dtypes by name, fresh random inputs, the float64
reference every attention path is checked against, and the relative error against it."""
from __future__ import annotations

import math

import torch

from ..model.stages import DTYPES


def default_device() -> str:
    """The CUDA GPU when there is one, else the CPU."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def torch_dtype(name: str):
    if name not in DTYPES:
        raise ValueError(f"unsupported dtype {name!r}: choose from {', '.join(DTYPES)}")
    return {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[name]


def make_inputs(shape, dtype, device, seed=0):
    """Fresh random q, k, v of shape [B, H, S, D], drawn on `device` (on a GPU, drawing them on the CPU
    and copying took about as long as timing a small forward)."""
    gen = torch.Generator(device=device).manual_seed(seed)
    return [torch.randn(shape, generator=gen, device=device).to(dtype) for _ in range(3)]


def reference(q, k, v, allowed=None, graph=False) -> torch.Tensor:
    """Attention in float64, on the inputs' device: the yardstick every path is checked against.
    `allowed` is a boolean [S, S] mask (default: causal); a query that may see no key gets zeros.
    With `graph`, float64 inputs that require grad keep their graph (for reference gradients)."""
    q, k, v = (t if graph else t.detach().to(torch.float64) for t in (q, k, v))
    if allowed is None:
        allowed = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores, dim=-1).nan_to_num(0.0) @ v  # fully masked rows: 0, not NaN


def relative_error(out, ref) -> float:
    """||out - ref|| / ||ref|| in float64; NaN anywhere gives NaN, which never passes a check."""
    out = out.detach().to(ref.device, torch.float64)
    return float(torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref))
