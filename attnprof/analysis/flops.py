"""Counting the work of attention: FLOPs, and the bytes a forward must (or does) move."""


def causal_flops(shape) -> float:
    """Two matmuls of 2·S²·D per head, halved by the causal mask."""
    b, h, s, d = shape
    return 4 * b * h * s * s * d / 2


def tflops(flop: float, us: float) -> float:
    """A rate in TFLOP/s: `flop` operations in `us` microseconds."""
    return flop / us / 1e6


def device_tflops(summary: dict) -> float:
    """TFLOP/s of a captured forward's kernels: causal FLOPs over its device time (the median profiled forward's),
    the time the tables rank forwards by."""
    return tflops(causal_flops(summary["shape"]), summary["forward_device_us"])


def causal_tflops(summary: dict) -> float | None:
    """TFLOP/s of one call of a captured forward, launch included: causal FLOPs over its CUDA-event median;
    None for a profile without CUDA-event timing (a notebook's)."""
    if summary.get("event_median_us") is None:
        return None
    return tflops(causal_flops(summary["shape"]), summary["event_median_us"])


def min_bytes(shape, itemsize=2) -> float:
    """The fewest bytes any attention must move: read q, k, v once, write the output once."""
    b, h, s, d = shape
    return 4 * b * h * s * d * itemsize


def naive_bytes(shape, itemsize=2) -> float:
    """What the unfused forward moves: q, k, v and the output, plus the S×S scores written by the
    first matmul, read and written by scale, mask (and its mask read) and softmax, read by the second."""
    b, h, s, d = shape
    return min_bytes(shape, itemsize) + b * h * s * s * itemsize * 8 + s * s
