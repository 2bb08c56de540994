"""Decoding kernel names: which library made a kernel, which unit does its math, and what the name says about
dtype, target architecture and tile. Only what a name states is reported (else None; a name no rule matches is
"unknown", never a guess). `printed` is a name as the profiler prints it; `label`, a short gloss of it.
"""
from __future__ import annotations

import functools
import re

TENSOR, CUDA_CORES, NONE, UNKNOWN = "tensor cores", "cuda cores", "none", "unknown"

DTYPE_WORDS = [  # (pattern in a name, dtype), most specific first
    (r"c10::BFloat16|cutlass::bfloat16_t|__nv_bfloat16|\bbf16|_bf16|ptrbf16", "bf16"),
    (r"c10::Half|cutlass::half_t|__half\b|\bf16\b|_f16_|_h16|fp16", "fp16"),
    (r"f32f32|\bfloat\b|_f32_|sgemm|fp32", "fp32"),
    (r"\bbool\b", "bool"),
]


def _dtype(text: str) -> str | None:
    for pattern, dtype in DTYPE_WORDS:
        if re.search(pattern, text):
            return dtype
    return None


def _arch(name: str) -> str | None:
    m = re.search(r"sm_?(\d{2,3})", name, re.I)
    if m:
        return f"sm_{m.group(1)}"
    if name.startswith("ampere_") or "::Sm80" in name:
        return "sm_80"
    return "sm_90" if re.search(r"wgmma|gmma", name) else None


def strip_templates(name: str) -> str:
    """`void ns::kernel<A, B<C>>(args)` -> `ns::kernel`."""
    text = name.replace("(anonymous namespace)", "{anon}").removeprefix("void ")
    out, depth = [], 0
    for ch in text:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(depth - 1, 0)
        elif ch == "(" and depth == 0:
            break
        elif depth == 0:
            out.append(ch)
    return "".join(out).replace("{anon}::", "").strip()


WRAPPERS = {"AUnary", "BUnary", "Binary", "elementwise", "vectorized_elementwise", "unrolled_elementwise",
            "gpu", "reduce", "triu_tril", "Offset"}


TABLE_NAME_WIDTH = 55  # torch.profiler's key_averages().table(): the width of its name column (max_name_column_width)


def as_table(name: str) -> str:
    """A name as `key_averages().table()` prints it, cut with "..." (torch/autograd/profiler_util.py)."""
    cut = TABLE_NAME_WIDTH - 3
    return name[:cut] + "..." if len(name) >= cut else name


def printed(name: str) -> str:
    """A kernel's name as the profiler prints it: whole where it is one identifier (as Perfetto shows it), cut as
    `key_averages().table()` cuts it where it is a C++ signature (hundreds of characters of templates)."""
    return as_table(name) if re.search(r"[<( ]", name) else name


def gloss(name: str) -> str | None:
    """A name's `label` where it says what the printed name does not (`[Mul]`, `fp32`); else None."""
    short, shown = label(name), printed(name)
    return None if all(part in shown for part in re.split(r"[… ]+", short) if part) else short


def label(name: str, limit: int = 46) -> str:
    """A short, readable name for a table cell; the full name stays one hover away."""
    base = strip_templates(name)
    cute = re.search(r"flash_attncute\w*?(FlashAttention[A-Za-z]*?(?:Sm\d+)?)(?:_|$)", name)
    if cute:  # CuTe DSL names are the module path and class, run together: keep the class
        return f"flash_attn.cute {cute.group(1)}"
    if base.startswith("at::native::"):
        what = re.findall(r"CUDAFunctor_(\w+)|(\w+?)(?:Functor|_kernel_impl|_kernel_cuda|_kernel)\b", name)
        what = [a or b for a, b in what if (a or b) not in WRAPPERS]
        short = base.removeprefix("at::native::")
        if what:
            short = f"{short.removesuffix('_kernel')} [{what[0]}]"
        return short
    if base == "elementwise_kernel_with_index":  # arange's kernel: the op is in the lambda's enclosing function
        op = re.search(r"at::native::(\w+?)_cuda", name)
        return f"{base} [{op.group(1)}]" if op else base
    gemm = re.match(r"(sm\d+)_xmma_gemm_.*tilesize(\d+x\d+x\d+)", base)
    if gemm:  # sm80_xmma_gemm_f32f32_..._tilesize128x128x8_..._ffma_... -> sm80_xmma_gemm fp32 128x128x8 ffma
        op = re.search(r"_(ffma|hmma|imma)_", base)
        return " ".join(x for x in (f"{gemm.group(1)}_xmma_gemm", _dtype(base), gemm.group(2), op and op.group(1)) if x)
    sdpa = re.match(r"cudnn_generated_\w*?(sdpa_sm\d+_\w+?_fprop_\w+?mma)_", base)
    if sdpa:  # cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_... -> cudnn…sdpa_sm90_flash_fprop_wgmma
        return f"cudnn…{sdpa.group(1)}"
    return base if len(base) <= limit else base[: limit - 1] + "…"


# Each rule: (regex on the full name, library, math unit, what it is: a phrase a table cell holds). First match wins.
RULES = [
    (r"^Memcpy", "CUDA runtime", NONE, "a copy by the copy engine or a copy kernel, no arithmetic"),
    (r"^Memset", "CUDA runtime", NONE, "fills device memory with one byte value, no arithmetic"),
    (r"^nvjet_", "cuBLAS / cuBLASLt (nvjet)", TENSOR, "a matmul from cuBLASLt's generated Hopper-era nvjet family"),
    (r"xmma_gemm.*_ffma_|sgemm|gemmSN|_ffma_", "cuBLAS", CUDA_CORES,
     "an FP32 matmul by fused multiply-adds (FFMA), not on Tensor Cores"),
    (r"s16816|h16816|i16832|hmma|_tensorop_|xmma_gemm.*(bf16|f16)", "cuBLAS", TENSOR,
     "a matmul by Ampere-style mma.sync (16x8x16 HMMA tiles)"),
    (r"gemv|gemmk1_kernel", "cuBLAS", CUDA_CORES,
     "a matrix-vector or K = 1 product (RoPE's positions times frequencies): too few FLOPs per byte for Tensor Cores"),
    (r"splitKreduce_kernel", "cuBLAS / cuBLASLt", CUDA_CORES,
     "split-K's last step: sums a matmul's partial products and writes its dtype"),
    (r"^fmha_cutlassF_", "memory-efficient attention (xFormers / CUTLASS)", None,
     "PyTorch's memory-efficient attention forward, one fused kernel"),
    (r"^fmha_cutlassB_", "memory-efficient attention (xFormers / CUTLASS)", None,
     "the memory-efficient backward, one fused kernel: recomputes the probabilities from the logsumexp, forms dQ, "
     "dK and dV"),
    (r"pytorch_flash::flash_fwd|flash_fwd_kernel|flash_fwd_splitkv", "FlashAttention-2 (PyTorch's copy)", TENSOR,
     "FlashAttention-2's fused forward: QKᵀ, online softmax and PV in one kernel, tiles on chip"),
    (r"flash_bwd_dot_do_o", "FlashAttention-2 (PyTorch's copy)", CUDA_CORES,
     "FlashAttention-2's backward prologue: row sums D = rowsum(dO ∘ O), in place of the N×N probabilities"),
    (r"flash_bwd_convert_dq", "FlashAttention-2 (PyTorch's copy)", NONE,
     "casts the fused backward's fp32 dQ to the inputs' dtype"),
    (r"flash_bwd_dq_dk_dv|flash_bwd_kernel", "FlashAttention-2 (PyTorch's copy)", TENSOR,
     "FlashAttention-2's fused backward: recomputes QKᵀ and the softmax per key tile, forms dV, dK and dQ (dQ "
     "summed in fp32)"),
    (r"flash_attncute.*FlashAttentionForwardSm90|FlashAttentionForwardSm90", "FlashAttention-4 (CuTe DSL)",
     TENSOR + " (wgmma)",
     "FlashAttention-4's fused forward for Hopper, compiled at the first call: QKᵀ, online softmax and PV by wgmma"),
    (r"FlashAttentionBackwardPreprocess", "FlashAttention-4 (CuTe DSL)", CUDA_CORES,
     "FlashAttention-4's backward prologue: row sums D = rowsum(dO ∘ O), in place of the N×N probabilities"),
    (r"FlashAttentionBackwardSm90", "FlashAttention-4 (CuTe DSL)", TENSOR + " (wgmma)",
     "FlashAttention-4's fused backward for Hopper: recomputes the probabilities per tile, forms dV, dK and dQ by "
     "wgmma (dQ in fp32)"),
    (r"FlashAttentionBackwardPostprocess", "FlashAttention-4 (CuTe DSL)", CUDA_CORES,
     "FlashAttention-4's backward epilogue: scales the fp32 dQ and casts it to the inputs' dtype"),
    (r"flash_attncute|FlashAttention(Forward|Backward)\w*Sm\d+", "FlashAttention-4 (CuTe DSL)", None,
     "a FlashAttention-4 kernel, compiled from NVIDIA's CuTe DSL at the first call"),
    (r"^cudnn_generated_.*sdpa.*flash_fprop", "cuDNN (fused flash attention)", TENSOR,
     "cuDNN's generated fused attention forward (its flash-style SDPA engine)"),
    (r"^cudnn_generated_.*sdpa.*flash_bprop", "cuDNN (fused flash attention)", TENSOR,
     "cuDNN's fused attention backward: recomputes the probabilities from saved statistics, forms dQ, dK and dV"),
    (r"cudnn::fusion::compute_dot_do_o", "cuDNN", CUDA_CORES,
     "cuDNN's backward prologue: row sums D = rowsum(dO ∘ O)"),
    (r"cudnn::fusion::convert_dq", "cuDNN", NONE, "casts cuDNN's fp32 dQ to 16 bits"),
    (r"^ncclDevKernel_|^ncclKernel_", "NCCL", NONE, "moves data between GPUs, no attention math"),
    (r"^cudnn|cudnn::", "cuDNN", None, "a cuDNN kernel"),
    (r"cutlass", "CUTLASS", None, "a kernel built from CUTLASS templates"),
    (r"^triton_per_fused_flex_attention_backward", "Triton (Inductor)", CUDA_CORES,
     "Inductor's reduction before FlexAttention's backward: row sums of dO ∘ O"),
    (r"^triton_tem_fused_flex_attention_backward", "Triton (FlexAttention)", None,
     "FlexAttention's backward template: recomputes the scores under the block mask, forms dQ, dK and dV"),
    (r"^triton_(poi|per|red)_", "Triton (Inductor)", CUDA_CORES,
     "generated by TorchInductor for pointwise or reduction work"),
    (r"^triton_tem_fused_flex_attention|flex_attention", "Triton (FlexAttention)", None,
     "FlexAttention's template kernel, generated by torch.compile for its mask and score mods"),
    (r"^quant_per_block_int8", "SageAttention (Triton)", CUDA_CORES,
     "SageAttention's INT8 quantisation of a Q or K block, one scale per block: no matmul"),
    (r"^triton|_kernel$|^_attn_fwd", "Triton", None, "a Triton kernel, named after its Python function"),
    (r"softmax", "ATen softmax", CUDA_CORES, "PyTorch's softmax: exp, max and sum"),
    (r"reduce_kernel", "ATen reduce", CUDA_CORES, "PyTorch's generic reduction"),
    (r"triu_tril_kernel", "ATen elementwise", CUDA_CORES, "keeps a matrix's upper or lower triangle (builds a mask)"),
    (r"at::native::.*(elementwise|copy|Fill|CatArrayBatchedCopy)", "ATen elementwise", CUDA_CORES,
     "PyTorch's elementwise work (copy, fill, cast, pointwise math): little arithmetic per byte"),
    (r"elementwise_kernel_with_index", "ATen elementwise", CUDA_CORES,
     "writes each element from its own index (arange, linspace: the positions RoPE starts from)"),
    (r"at::native::", "ATen", CUDA_CORES, "a PyTorch (ATen) kernel; the name says which op"),
]


def _tile(name: str) -> str | None:
    for pattern in (r"tilesize(\d+x\d+x\d+)", r"_(\d+x\d+x\d+)_\d+x\d+x\d+_cga", r"nvjet_sm\d+_\w+?_(\d+x\d+)_",
                    r"(?:s|h)16816gemm_\w*?_(\d+x\d+)_", r"sgemm_(\d+x\d+)_", r"_aligned_(\d+x\d+)_",
                    r"Flash_(?:fwd|bwd)_kernel_traits<(\d+, \d+, \d+, \d+)"):
        m = re.search(pattern, name)
        if m:
            return m.group(1) if "," not in m.group(1) else _flash_tile(m.group(1))
    return None


def _flash_tile(traits: str) -> str:
    head_dim, block_m, block_n, warps = (int(x) for x in traits.split(","))
    return f"{block_m}x{block_n} (Br x Bc), head dim {head_dim}, {warps} warps"


NCCL_PROTOCOLS = {"LL": "LL (low latency)", "LL128": "LL128", "SIMPLE": "Simple"}


def _nccl(name: str) -> str:
    """What an NCCL kernel's name states: the operation, and for collectives the algorithm and protocol."""
    m = re.match(r"nccl(?:DevKernel|Kernel)_(\w+?)(?:_(RING|TREE|COLLNET\w*|NVLS\w*|PAT)_(LL128|LL|SIMPLE))?(?:\(|$)", name)
    if not m:
        return ""
    op, algo, proto = m.groups()
    return f" ({op}" + (f", algorithm {algo}, protocol {NCCL_PROTOCOLS[proto]})" if algo else ")")


def explain(name: str) -> dict:
    return dict(_explain(name))


@functools.lru_cache(maxsize=4096)
def _explain(name: str) -> dict:  # a site build asks for the same few names hundreds of times
    for pattern, library, unit, what in RULES:
        if re.search(pattern, name, re.I if pattern.islower() else 0):
            if library == "NCCL":
                what += _nccl(name)
            dtype = _dtype(name)
            if unit is None:  # these families run on Tensor Cores for 16-bit types; the name says which
                unit = TENSOR if dtype in ("bf16", "fp16") or re.search(r"wgmma|gmma|mma", name) else UNKNOWN
            if library.startswith("CUDA runtime"):
                dtype = None
            elif library.startswith("cuDNN") and re.search(r"_f16_", name):
                dtype = "16-bit (cuDNN names bf16 and fp16 engines f16)"
            return {"library": library, "math_unit": unit, "dtype": dtype, "arch": _arch(name),
                    "tile": _tile(name), "summary": what, "label": label(name)}
    return {"library": "unknown", "math_unit": UNKNOWN, "dtype": None, "arch": None, "tile": None,
            "summary": "unknown: no rule matches this name, so attnprof does not guess", "label": label(name)}


# the libraries whose kernel is a fused attention (the whole of QKᵀ, softmax and PV): SDPA's backends and the providers
ATTENTION_LIBRARIES = ("FlashAttention-2", "FlashAttention-4", "memory-efficient attention", "cuDNN (fused flash attention)",
                       "Triton (FlexAttention)")


def is_attention(name: str) -> bool:
    """Whether a kernel is a fused attention kernel (not the matmuls or softmax of an unfused one)."""
    return explain(name)["library"].startswith(ATTENTION_LIBRARIES)


# fingerprint's: the library (a prefix of `explain(name)["library"]`) whose fused kernel names SDPA's backend
BACKEND_BY_LIBRARY = {"FlashAttention-2": "flash", "memory-efficient attention": "efficient", "cuDNN": "cudnn"}


def fingerprint(op_names) -> str:
    """The SDPA backend one forward's kernels show: a fused kernel names it; with none, the math path ran."""
    for name in op_names:
        library = explain(name)["library"]
        for prefix, backend in BACKEND_BY_LIBRARY.items():
            if library.startswith(prefix):
                return backend
    return "math"
