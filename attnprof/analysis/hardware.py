"""The A100 figures published in Hugging Face's post, for citing beside our captures, and the peaks that set
the records' GPU beside the post's (the GPUs themselves are rows of model/gpus.py).

Source: "Profiling in PyTorch (Part 3): Attention is all you profile",
https://huggingface.co/blog/torch-attention-profile (NVIDIA A100-SXM4-80GB, bf16, [8, 16, 1024, 64],
causal). These are the post's numbers, never ours; `None` where the post gives none.
"""
from ..model import gpus

SOURCE = "https://huggingface.co/blog/torch-attention-profile"
SOURCE_TITLE = "Profiling in PyTorch (Part 3): Attention is all you profile"

# forward_us: the post's average forward CUDA time; cpu_us: its CPU time per forward
FIGURES = {
    "naive": {"ops": 6, "forward_us": None, "cpu_us": None},
    "inplace": {"ops": 5, "forward_us": 1955.0, "cpu_us": None},
    "math": {"ops": 20, "forward_us": 7239.0, "cpu_us": None},
    "efficient": {"ops": 1, "forward_us": 277.9, "cpu_us": 117.0},
    "flash": {"ops": 1, "forward_us": 146.8, "cpu_us": 138.0},
    "cudnn": {"ops": 1, "forward_us": 186.3, "cpu_us": 214.0},
    "auto": {"ops": None, "forward_us": None, "cpu_us": None},
}

KERNELS = {
    "naive": "s16816 (bf16 Tensor Core mma 16x8x16) GEMMs",
    "math": "sgemm (FP32 on CUDA cores)",
    "efficient": "fmha_cutlassF_bf16_aligned_64x64_rf_sm80",
    "flash": "pytorch_flash::flash_fwd_kernel",
    "cudnn": "cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_6_128x64x64_4x1x1_cga1x1x1_kernel0_0",
}

POST_GPU = gpus.row("NVIDIA A100-SXM4-80GB")  # the post's GPU, a row of the GPU table (model/gpus.py)


def published_peaks(g: gpus.Gpu) -> dict:
    """A table row's peaks as its vendor publishes them: FP32 on the CUDA cores, memory bandwidth, SMs × clock."""
    return {"fp32_tflops": g.fp32_tflops, "memory_gbs": g.memory_gbs, "sm_clock": g.sms * g.max_sm_mhz}


def queried_peaks(hw: dict) -> dict | None:
    """The records' GPU's peaks from the hardware run's device query, by the formulas that give the published
    ones: SMs × FP32 lanes per SM (its compute capability's) × 2 × clock; 2 transfers × memory clock × bus
    width. None where the GPU table lacks its compute capability."""
    q = hw["query"]
    cc = gpus.CAPABILITIES.get((q["major"], q["minor"]))
    if cc is None:
        return None
    return {"fp32_tflops": q["multi_processor_count"] * cc.fp32_lanes_per_sm * 2 * q["smi_clocks_max_sm_mhz"] / 1e6,
            "memory_gbs": 2 * q["memory_clock_rate"] * 1e3 * q["memory_bus_width"] / 8 / 1e9,
            "sm_clock": q["multi_processor_count"] * q["smi_clocks_max_sm_mhz"], "lanes": cc.fp32_lanes_per_sm}
