"""The GPU table: one row per GPU a reader is likely to regenerate the site on, keyed by the name its driver
reports, and the limits every GPU of one compute capability shares. Pure data, each figure with its source.

Tensor Core peaks are dense (NVIDIA's product pages print them with sparsity, twice as high: the dense figure
is that one halved). A figure no source here could confirm is listed in its row's `unverified`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

TABLE = "attnprof/model/gpus.py"


@dataclass(frozen=True)
class Gpu:
    name: str  # exactly as the driver reports it (torch.cuda.get_device_name, nvidia-smi)
    short: str  # the id of its record set (ATTNPROF_GPU)
    display: str  # the GPU in a sentence
    capability: tuple[int, int]
    sms: int
    max_sm_mhz: int  # the SM clock's maximum (boost): what FP32 on the CUDA cores is quoted at
    tensor_mhz: int  # the clock the vendor's Tensor Core peaks are quoted at (or imply)
    tensor_tflops: dict[str, float]  # dense Tensor Core peak by the inputs' dtype
    fp32_tflops: float  # FP32 on the CUDA cores (never sparse)
    memory_gbs: float  # device memory bandwidth, GB/s (10^9)
    memory_gb: float  # device memory as the vendor prints it, GB
    l2_mb: float | None  # L2 cache, MB; None where no source gives it
    tdp_w: int  # board (or module) power, the highest configurable
    sources: dict[str, str]  # URL -> what it gives
    unverified: tuple[str, ...] = ()  # fields (or "tensor_tflops.DTYPE") no source here confirmed
    notes: str = ""

    @property
    def arch(self) -> str:
        return CAPABILITIES[self.capability].arch


@dataclass(frozen=True)
class Capability:
    """What every GPU of one compute capability shares (CUDA C++ Programming Guide, per compute capability)."""
    arch: str  # the architecture's name
    fp32_lanes_per_sm: int  # FP32 CUDA cores per SM: one fused multiply-add (2 FLOP) each per clock
    shared_kib_per_sm: int
    shared_kib_per_block: int  # the most a block may opt in to (48 KiB without opting in)
    registers_per_sm: int
    threads_per_sm: int
    blocks_per_sm: int  # resident blocks per SM (not in a trace's deviceProperties)
    registers_per_thread: int = 255


CUDA_GUIDE = ("https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html"
              "#features-and-technical-specifications-technical-specifications-per-compute-capability")
CAPABILITY_SOURCES = {
    CUDA_GUIDE: "shared memory, registers, threads and blocks per SM and per block, registers per thread",
    "https://github.com/NVIDIA/cccl/blob/main/libcudacxx/include/cuda/__device/arch_traits.h":
        "the same limits per architecture, as CCCL encodes them",
    "https://github.com/NVIDIA/cuda-samples/blob/master/Common/helper_cuda.h":
        "FP32 lanes (CUDA cores) per SM by compute capability (_ConvertSMVer2Cores)",
}

CAPABILITIES = {
    (7, 5): Capability("Turing", 64, 64, 64, 65536, 1024, 16),
    (8, 0): Capability("Ampere", 64, 164, 163, 65536, 2048, 32),
    (8, 6): Capability("Ampere", 128, 100, 99, 65536, 1536, 16),
    (8, 9): Capability("Ada Lovelace", 128, 100, 99, 65536, 1536, 24),
    (9, 0): Capability("Hopper", 128, 228, 227, 65536, 2048, 32),
    (10, 0): Capability("Blackwell", 128, 228, 227, 65536, 2048, 32),
}


def capability(text: str) -> tuple[int, int]:
    """(major, minor) of a capability as records write it: "sm_90" -> (9, 0), "sm_100" -> (10, 0)."""
    digits = text.removeprefix("sm_")
    return int(digits[:-1]), int(digits[-1])


def sm(cc: tuple[int, int]) -> str:
    """The capability as kernel names and records write it: (9, 0) -> "sm_90"."""
    return f"sm_{cc[0]}{cc[1]}"


# ---- sources, shared by rows of one family ----------------------------------------------------------
A100_DATASHEET = ("https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
                  "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf")
A100_WHITEPAPER = "https://images.nvidia.com/aem-dam/en-zz/Solutions/data-center/nvidia-ampere-architecture-whitepaper.pdf"
A100_SOURCES = {
    A100_DATASHEET: "Tensor Core peaks (dense: the sparse figures halved), FP32, memory, bandwidth, TDP per form factor",
    A100_WHITEPAPER: "108 SMs, 1,410 MHz boost clock, 40 MB L2",
    "https://github.com/NVIDIA/cudnn-frontend/pull/715": "312 TFLOP/s = 108 SMs × 2,048 FLOP per clock per SM × 1.41 GHz",
    "https://github.com/ekondis/mixbench/issues/18": "a device query: 108 SMs, 1,410 MHz, 40,960 KB L2",
}
H100_PAGE = "https://www.nvidia.com/en-us/data-center/h100/"
HOPPER_WHITEPAPER = "https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper"
H100_SOURCES = {
    H100_PAGE: "peaks per form factor (with sparsity: halved here), FP32, memory, bandwidth, TDP",
    HOPPER_WHITEPAPER: "SMs per form factor, 50 MB L2, 128 FP32 lanes per SM",
    "https://glennklockwood.com/garden/processors/h100":
        "the SXM5's dense peaks and its clocks: 1.83 GHz for Tensor Core peaks, 1.98 GHz for FP32",
    "https://github.com/meta-pytorch/tritonbench/blob/main/tritonbench/utils/gpu_utils.py": "maximum SM clocks",
}
ADA_WHITEPAPER = "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf"


def _row(*rows: Gpu) -> dict[str, Gpu]:
    return {r.name: r for r in rows}


GPUS = _row(
    Gpu("NVIDIA A100-SXM4-80GB", "a100", "A100", (8, 0), sms=108, max_sm_mhz=1410, tensor_mhz=1410,
        tensor_tflops={"bf16": 312, "fp16": 312, "tf32": 156}, fp32_tflops=19.5,
        memory_gbs=2039, memory_gb=80, l2_mb=40, tdp_w=400, sources=A100_SOURCES,
        notes="the GPU of Hugging Face's post"),
    Gpu("NVIDIA A100-SXM4-40GB", "a100-40gb", "A100 40GB", (8, 0), sms=108, max_sm_mhz=1410, tensor_mhz=1410,
        tensor_tflops={"bf16": 312, "fp16": 312, "tf32": 156}, fp32_tflops=19.5,
        memory_gbs=1555, memory_gb=40, l2_mb=40, tdp_w=400, sources=A100_SOURCES),
    Gpu("NVIDIA A100 80GB PCIe", "a100-pcie", "A100 PCIe", (8, 0), sms=108, max_sm_mhz=1410, tensor_mhz=1410,
        tensor_tflops={"bf16": 312, "fp16": 312, "tf32": 156}, fp32_tflops=19.5,
        memory_gbs=1935, memory_gb=80, l2_mb=40, tdp_w=300, sources=A100_SOURCES),
    Gpu("NVIDIA H100 80GB HBM3", "h100", "H100 SXM", (9, 0), sms=132, max_sm_mhz=1980, tensor_mhz=1830,
        tensor_tflops={"bf16": 989.4, "fp16": 989.4, "tf32": 494.7, "fp8": 1979}, fp32_tflops=66.9,
        memory_gbs=3350, memory_gb=80, l2_mb=50, tdp_w=700, sources=H100_SOURCES),
    Gpu("NVIDIA H100 PCIe", "h100-pcie", "H100 PCIe", (9, 0), sms=114, max_sm_mhz=1755, tensor_mhz=1620,
        tensor_tflops={"bf16": 756, "fp16": 756, "tf32": 378, "fp8": 1513}, fp32_tflops=51,
        memory_gbs=2000, memory_gb=80, l2_mb=50, tdp_w=350, sources=H100_SOURCES,
        notes="TDP configurable, 300 to 350 W"),
    Gpu("NVIDIA H100 NVL", "h100-nvl", "H100 NVL", (9, 0), sms=132, max_sm_mhz=1785, tensor_mhz=1545,
        tensor_tflops={"bf16": 835.5, "fp16": 835.5, "tf32": 417.5, "fp8": 1670.5}, fp32_tflops=60,
        memory_gbs=3900, memory_gb=94, l2_mb=50, tdp_w=400, sources=H100_SOURCES,
        unverified=("max_sm_mhz", "fp32_tflops", "memory_gbs", "memory_gb", "l2_mb"),
        notes="TDP configurable, 350 to 400 W"),
    Gpu("NVIDIA H200", "h200", "H200", (9, 0), sms=132, max_sm_mhz=1980, tensor_mhz=1830,
        tensor_tflops={"bf16": 989.5, "fp16": 989.5, "tf32": 494.7, "fp8": 1979}, fp32_tflops=67,
        memory_gbs=4800, memory_gb=141, l2_mb=60, tdp_w=700,
        sources={"https://www.nvidia.com/en-us/data-center/h200/":
                 "peaks of the H200 SXM (with sparsity: halved here), FP32, 141 GB HBM3e at 4.8 TB/s, 700 W",
                 "https://github.com/meta-pytorch/tritonbench/issues/78": "dense bf16 peak, 989.5 TFLOP/s",
                 HOPPER_WHITEPAPER: "the GH100 of the H100 SXM5: 132 SMs",
                 "https://github.com/meta-pytorch/tritonbench/blob/main/tritonbench/utils/gpu_utils.py":
                 "maximum SM clock, 1,980 MHz",
                 "docs/captures/h200/run-hardware.json": "L2: 60 MiB (62,914,560 bytes), as the driver reports it; "
                                                        "no NVIDIA page gives it"}),
    Gpu("NVIDIA GH200 480GB", "gh200", "GH200", (9, 0), sms=132, max_sm_mhz=1980, tensor_mhz=1830,
        tensor_tflops={"bf16": 989, "fp16": 989, "tf32": 494, "fp8": 1979}, fp32_tflops=67,
        memory_gbs=4000, memory_gb=96, l2_mb=None, tdp_w=1000,
        sources={"https://www.nvidia.com/en-us/data-center/grace-hopper-superchip/":
                 "peaks, the 96 GB HBM3 at 4 TB/s of the 480 GB part, the module's 450 to 1,000 W"},
        unverified=("max_sm_mhz", "tensor_tflops.bf16", "tensor_tflops.fp16", "tensor_tflops.tf32",
                    "tensor_tflops.fp8", "fp32_tflops", "memory_gbs", "tdp_w"),
        notes="the whole module's power (Grace CPU, Hopper GPU, memory); the HBM3e part has 144 GB at 4.9 TB/s"),
    Gpu("NVIDIA L4", "l4", "L4", (8, 9), sms=58, max_sm_mhz=2040, tensor_mhz=2037,
        tensor_tflops={"bf16": 121, "fp16": 121, "tf32": 60, "fp8": 242.5}, fp32_tflops=30.3,
        memory_gbs=300, memory_gb=24, l2_mb=48, tdp_w=72,
        sources={"https://www.nvidia.com/en-us/data-center/l4/":
                 "peaks (with sparsity: halved here), FP32, 24 GB GDDR6 at 300 GB/s, 72 W",
                 "https://github.com/bottlerocket-os/bottlerocket-kernel-kit/pull/139":
                 "a device query: 58 SMs, 2,040 MHz"},
        unverified=("l2_mb",), notes="Tensor Core clock: the one the peaks imply (NVIDIA quotes none)"),
    Gpu("NVIDIA L40S", "l40s", "L40S", (8, 9), sms=142, max_sm_mhz=2520, tensor_mhz=2520,
        tensor_tflops={"bf16": 366.5, "fp16": 366.5, "tf32": 183, "fp8": 733}, fp32_tflops=91.6,
        memory_gbs=864, memory_gb=48, l2_mb=96, tdp_w=350,
        sources={"https://www.nvidia.com/en-us/data-center/l40s/":
                 "datasheet: FP32 91.6; TF32 183, BF16 and FP16 733 with sparsity, FP8 733; 48 GB at 864 GB/s; 350 W"},
        unverified=("l2_mb",),
        notes="bf16/fp16: the sparse 733 halved; the datasheet's dense column prints 362.05, "
              "which fits no clock its other peaks imply"),
    Gpu("NVIDIA GeForce RTX 4090", "rtx4090", "RTX 4090", (8, 9), sms=128, max_sm_mhz=2520, tensor_mhz=2520,
        tensor_tflops={"bf16": 165.2, "fp16": 165.2, "tf32": 82.6, "fp8": 330.3}, fp32_tflops=82.6,
        memory_gbs=1008, memory_gb=24, l2_mb=72, tdp_w=450,
        sources={ADA_WHITEPAPER: "appendix: peaks with FP32 accumulation (PyTorch's), FP32, 1,008 GB/s, 72 MB L2, 450 W",
                 "https://github.com/NVIDIA/nvbench/pull/207":
                 "a device block: 128 SMs, 2,520 MHz default clock, 1,008 GB/s, 73,728 KB L2"},
        notes="GeForce Tensor Cores accumulate in FP32 at half rate (330.3 TFLOP/s with FP16 accumulation); "
              "the card can run above its rated clock"),
    Gpu("NVIDIA B200", "b200", "B200", (10, 0), sms=148, max_sm_mhz=1965, tensor_mhz=1856,
        tensor_tflops={"bf16": 2250, "fp16": 2250, "tf32": 1125, "fp8": 4500}, fp32_tflops=75,
        memory_gbs=8000, memory_gb=180, l2_mb=126.5, tdp_w=1000,
        sources={"https://resources.nvidia.com/en-us-blackwell-architecture":
                 "technical brief, pp. 19-20: dense peaks per GPU, 8 TB/s, 180 GB",
                 "https://github.com/pytorch/ao/pull/4002": "a device query: 148 SMs, 126.5 MB L2",
                 "https://github.com/flashinfer-ai/flashinfer/pull/2899": "maximum SM clock, 1,965 MHz",
                 "https://github.com/ByteDance-Seed/VeOmni/pull/986":
                 "peaks quoted below the boost clock: 148 SMs × 8,192 FLOP per clock per SM"},
        unverified=("fp32_tflops", "tdp_w"), notes="FP32: sources give 75 or 80 TFLOP/s"),
    Gpu("Tesla T4", "t4", "T4", (7, 5), sms=40, max_sm_mhz=1590, tensor_mhz=1590,
        tensor_tflops={"fp16": 65}, fp32_tflops=8.1,
        memory_gbs=320, memory_gb=16, l2_mb=4, tdp_w=70,
        sources={"https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/t4-tensor-core-datasheet-951643.pdf":
                 "65 FP16 Tensor TFLOP/s, 8.1 FP32, 16 GB GDDR6, 70 W",
                 "https://huggingface.co/docs/hub/spaces-gpus": "the name the driver reports, \"Tesla T4\""},
        unverified=("memory_gbs",),
        notes="no bf16 Tensor Cores before sm_80: bf16 runs on the CUDA cores; bandwidth printed as 300 or 320 GB/s"),
    Gpu("NVIDIA A10G", "a10g", "A10G", (8, 6), sms=80, max_sm_mhz=1710, tensor_mhz=1710,
        tensor_tflops={"bf16": 70, "fp16": 70, "tf32": 35}, fp32_tflops=35,
        memory_gbs=600, memory_gb=24, l2_mb=6, tdp_w=300,
        sources={"https://d1.awsstatic.com/product-marketing/ec2/NVIDIA_AWS_A10G_DataSheet_FINAL_02_17_2022.pdf":
                 "FP16/BF16 70 dense (not the A10's 125), FP32 35, 24 GB GDDR6 at 600 GB/s",
                 "https://fullstackdeeplearning.com/cloud-gpus/": "the A10G datasheet's figures, quoted",
                 "https://huggingface.co/docs/hub/jobs-configuration": "the name the driver reports, \"NVIDIA A10G\""},
        unverified=("max_sm_mhz", "tensor_mhz", "tensor_tflops.tf32", "tdp_w"),
        notes="clock from third-party logs; 300 W is nvidia-smi's power limit"),
)


def row(name: str) -> Gpu | None:
    """The table's row for the name a driver reports, or None for a GPU the table lacks."""
    return GPUS.get(name)


def by_short(short: str) -> Gpu | None:
    return next((g for g in GPUS.values() if g.short == short), None)


def display(name: str) -> str:
    """The GPU in a sentence: its row's display name, else the name its driver reports."""
    g = row(name)
    return g.display if g else name


def missing(name: str) -> str:
    """The one line for a GPU the table lacks, where a figure needs its peaks."""
    return (f"{name!r} is not in the GPU table: add its row, each figure with its source, to {TABLE} to show "
            f"the figures that need its peaks")
