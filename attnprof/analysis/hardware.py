"""The A100 figures published in Hugging Face's post, for citing beside our captures; the peaks that set
the records' GPU beside the post's; and the specification table (SPECS) of each GPU a record may be taken
on, which bounds every number it holds (analysis/bounds.py).

Source: "Profiling in PyTorch (Part 3): Attention is all you profile",
https://huggingface.co/blog/torch-attention-profile (NVIDIA A100-SXM4-80GB, bf16, [8, 16, 1024, 64],
causal). These are the post's numbers, never ours; `None` where the post gives none.
"""
from dataclasses import dataclass

from ..model import gpus

MAX_BLOCKS_PER_SM = {9: gpus.CAPABILITIES[9, 0].blocks_per_sm}  # for SPECS, from the GPU table

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


# ---- the specification table: what bounds every number a record of that GPU holds ----------------
# A record is bounded by the entry its `device` names, and its trace's deviceProperties (and the hardware
# run's device query) must be that GPU's: nothing in a record can raise its own bounds.

H200_PAGE = "https://www.nvidia.com/en-us/data-center/h200/"
CUDA_GUIDE = ("https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html"
              "#features-and-technical-specifications-technical-specifications-per-compute-capability")
HOPPER_TUNING = "https://docs.nvidia.com/cuda/hopper-tuning-guide/index.html#streaming-multiprocessor"
HOPPER_WHITEPAPER = "https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper"


@dataclass(frozen=True)
class Spec:
    capability: str
    sms: int
    tflops: dict  # dense peak TFLOP/s by the dtype of the inputs (Tensor Cores)
    fp32_cuda_core_tflops: float  # FP32 on the CUDA cores
    hbm_gbs: float
    memory_bytes: int
    per_sm: dict  # limits per SM and per block, by their deviceProperties names
    blocks_per_sm: int  # resident blocks per SM (not in deviceProperties)
    registers_per_thread: int
    sources: dict
    max_sm_mhz: int | None = None  # the SM clock's maximum (boost): bounds every SM clock a record reads


SPECS = {
    "NVIDIA H200": Spec(
        capability="sm_90",
        sms=132,  # the GH100 of the H100 SXM5 (whitepaper)
        # the product page's Tensor Core figures are with sparsity: dense is half (BF16/FP16 1,979, TF32 989,
        # FP8 3,958, INT8 3,958 TOPS); FP32 data runs at most on TF32 Tensor Cores
        tflops={"bf16": 989.5, "fp16": 989.5, "tf32": 494.5, "fp32": 494.5, "fp8": 1979.0, "int8": 1979.0},
        fp32_cuda_core_tflops=67.0,
        hbm_gbs=4800.0,  # HBM3e, 4.8 TB/s
        memory_bytes=141 * 2**30,  # "141GB" in binary units: the device reports 150,109,880,320 bytes (> 141e9)
        per_sm={"maxThreadsPerMultiprocessor": 2048, "regsPerMultiprocessor": 65536,
                "sharedMemPerMultiprocessor": 228 * 1024, "sharedMemPerBlockOptin": 227 * 1024,
                "maxThreadsPerBlock": 1024, "regsPerBlock": 65536, "warpSize": 32},
        blocks_per_sm=MAX_BLOCKS_PER_SM[9], registers_per_thread=255,
        # the boost clock at which the product page's FP32 figure, 67 TFLOPS, is 132 SMs x 128 FP32 lanes (GH100
        # whitepaper) x 2 FLOPs a cycle: 66.9 TFLOPS at 1,980 MHz; the H200's driver reports it as clocks.max.sm
        max_sm_mhz=1980,
        sources={"peaks, HBM bandwidth and memory (NVIDIA H200 product page, H200 SXM)": H200_PAGE,
                 "maximum SM clock, 1,980 MHz (the product page's FP32 67 TFLOPS over 132 SMs x 128 lanes x 2, "
                 "whitepaper)": H200_PAGE,
                 "SMs (NVIDIA H100 Tensor Core GPU Architecture whitepaper, H100 SXM5)": HOPPER_WHITEPAPER,
                 "per-SM limits, compute capability 9.0 (CUDA C++ Programming Guide)": CUDA_GUIDE,
                 "per-SM limits (Hopper Tuning Guide, 1.4.1)": HOPPER_TUNING}),
}
TABLE = "SPECS in attnprof/analysis/hardware.py"
# the hardware run's device query names some of the same figures otherwise
QUERY_NAMES = {"max_threads_per_multi_processor": "maxThreadsPerMultiprocessor",
               "regs_per_multiprocessor": "regsPerMultiprocessor"}
