"""The kernel-name decoder, on names taken from real traces (ours on the H200, the post's on the A100)."""
import json

import pytest

from attnprof.analysis import kernel_names, trace
from attnprof.analysis import records
from attnprof.cli import main
from attnprof.model.procedure import LABEL

# Names the post printed from its A100 traces (attnprof/analysis/hardware.py cites the post).
A100 = {
    "cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_6_128x64x64_4x1x1_cga1x1x1_kernel0_0":
        ("cuDNN (fused flash attention)", "tensor cores", "sm_80", "128x64x64"),
    "fmha_cutlassF_bf16_aligned_64x64_rf_sm80": ("memory-efficient attention (xFormers / CUTLASS)", "tensor cores",
                                                 "sm_80", "64x64"),
    "ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x4_tn": ("cuBLAS", "tensor cores", "sm_80", "128x64"),
    "ampere_sgemm_128x64_nn": ("cuBLAS", "cuda cores", "sm_80", "128x64"),
}


@pytest.mark.parametrize("name", sorted(A100))
def test_ampere_names_from_the_post(name):
    info = kernel_names.explain(name)
    assert (info["library"], info["math_unit"], info["arch"], info["tile"]) == A100[name]


def test_every_kernel_in_our_h200_traces_is_decoded(h200):
    for stage in ("naive", "inplace", "math", "flash", "cudnn"):
        for op in trace.forwards(h200(stage), LABEL)[0].ops:
            info = kernel_names.explain(op.name)
            assert info["library"] != "unknown", op.name
            assert info["math_unit"] in ("tensor cores", "cuda cores", "none"), op.name


def test_hopper_names(h200):
    by_label = {kernel_names.label(op.name): op.name for s in ("naive", "math", "cudnn", "flash")
                for op in trace.forwards(h200(s), LABEL)[0].ops}
    nvjet = next(n for l, n in by_label.items() if l.startswith("nvjet_sm90"))
    assert kernel_names.explain(nvjet)["library"].startswith("cuBLAS") and kernel_names.explain(nvjet)["arch"] == "sm_90"
    cudnn = next(n for n in by_label.values() if n.startswith("cudnn_generated"))
    assert kernel_names.explain(cudnn)["arch"] == "sm_90" and kernel_names.explain(cudnn)["tile"] == "64x128x64"
    gemm = [kernel_names.explain(n) for n in by_label.values() if "xmma_gemm" in n]
    assert gemm and all(g["math_unit"] == "cuda cores" and g["dtype"] == "fp32" for g in gemm)
    flash = kernel_names.explain(by_label["pytorch_flash::flash_fwd_kernel"])
    assert flash["dtype"] == "bf16" and flash["math_unit"] == "tensor cores" and flash["arch"] is None
    elementwise = [kernel_names.explain(n) for l, n in by_label.items() if "[masked_fill]" in l]
    assert elementwise and elementwise[0]["math_unit"] == "cuda cores"  # arithmetic elementwise work: CUDA cores
    copies = [kernel_names.explain(n) for n in by_label.values() if n.startswith(("Memcpy", "Memset"))]
    assert copies and all(c["math_unit"] == "none" for c in copies)  # the copy engine / a fill: no math unit


def test_unknown_names_are_not_guessed():
    for name in ("my_custom_kernel_v2", "k0", "ZN5magic4doitEv"):
        info = kernel_names.explain(name)
        assert info["library"] == "unknown" and info["math_unit"] == "unknown" and info["summary"].startswith("unknown")


def test_fingerprint_names_the_backend(h200):
    ops = lambda s: [op.name for op in trace.forwards(h200(s), LABEL)[0].ops]
    assert kernel_names.fingerprint(ops("flash")) == "flash"
    assert kernel_names.fingerprint(ops("cudnn")) == "cudnn"
    assert kernel_names.fingerprint(ops("math")) == "math"
    assert kernel_names.fingerprint(["fmha_cutlassF_bf16_aligned_64x64_rf_sm80"]) == "efficient"


def test_explain_json(capsys):
    assert main(["explain", "--json", "ampere_sgemm_128x64_nn"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"library", "math_unit", "dtype", "arch", "tile", "summary"}
    assert out["math_unit"] == "cuda cores" and out["dtype"] == "fp32"


def test_cute_dsl_names_from_our_fa4_capture():
    """FlashAttention-4's kernel, as the H200 capture recorded it."""
    (op,) = [op for op in records.load_summary("fa4-1x16x8192x128")["ops"] if op["kind"] == "kernel"]
    assert op["name"].startswith("kernel_cutlass_kernel_flash_attncuteflash_fwd_sm90FlashAttentionForwardSm90_")
    info = kernel_names.explain(op["name"])
    assert (info["library"], info["math_unit"], info["arch"]) == ("FlashAttention-4 (CuTe DSL)", "tensor cores (wgmma)",
                                                                  "sm_90")
    assert info["label"] == "flash_attn.cute FlashAttentionForwardSm90"
    assert kernel_names.fingerprint([op["name"]]) != "flash"  # not an SDPA backend: never read as SDPA's flash
    bwd = "kernel_cutlass_kernel_flash_attncuteflash_bwd_sm90FlashAttentionBackwardSm90_object_at__tensor0000o1"
    assert kernel_names.explain(bwd)["library"] == "FlashAttention-4 (CuTe DSL)" and kernel_names.explain(bwd)["arch"] == "sm_90"


# Kernels a Llama-style attention layer launches (projections, RoPE, repeat_kv, the softmax in float32, the
# attention kernel of each attn_implementation), as PyTorch and its libraries name them on CUDA; the first
# ones are those named in issue 34 from the H200.
ARANGE = ("void (anonymous namespace)::elementwise_kernel_with_index<int, at::native::arange_cuda_out(c10::Scalar "
          "const&, c10::Scalar const&, c10::Scalar const&, at::Tensor&)::{lambda()#1}::operator()() const::{lambda()#4}"
          "::operator()() const::{lambda(long)#1}>(int, at::native::arange_cuda_out(c10::Scalar const&, c10::Scalar "
          "const&, c10::Scalar const&, at::Tensor&)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() "
          "const::{lambda(long)#1}, function_traits<at::native::arange_cuda_out(c10::Scalar const&, c10::Scalar const&, "
          "c10::Scalar const&, at::Tensor&)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::"
          "{lambda(long)#1}>::result_type*)")
LAYER = {
    ARANGE: ("ATen elementwise", "cuda cores", "elementwise_kernel_with_index [arange]"),
    "void at::native::(anonymous namespace)::CatArrayBatchedCopy_alignedK_contig<at::native::(anonymous namespace)::"
    "OpaqueType<4u>, unsigned int, 3, 128, 1, 16>(at::native::(anonymous namespace)::OpaqueType<4u>*, at::native::"
    "(anonymous namespace)::CatArrInputTensorMetadata<at::native::(anonymous namespace)::OpaqueType<4u>, unsigned int, "
    "128, 1>, at::native::(anonymous namespace)::TensorSizeStride<unsigned int, 4u>, int, unsigned int)":
        ("ATen elementwise", "cuda cores", None),
    "void at::native::vectorized_elementwise_kernel<4, at::native::cos_kernel_cuda(at::TensorIteratorBase&)::"
    "{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >"
    "(int, at::native::cos_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#2}::"
    "operator()() const::{lambda(float)#1}, std::array<char*, 2ul>)":
        ("ATen elementwise", "cuda cores", "vectorized_elementwise [cos]"),
    "void at::native::vectorized_elementwise_kernel<4, at::native::sin_kernel_cuda(at::TensorIteratorBase&)::"
    "{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >"
    "(int, at::native::sin_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#2}::"
    "operator()() const::{lambda(float)#1}, std::array<char*, 2ul>)":
        ("ATen elementwise", "cuda cores", "vectorized_elementwise [sin]"),
    "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::neg_kernel_cuda(at::"
    "TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#8}::operator()() const::{lambda(c10::BFloat16)"
    "#1}>(at::TensorIteratorBase&, at::native::neg_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() "
    "const::{lambda()#8}::operator()() const::{lambda(c10::BFloat16)#1} const&)::{lambda(int)#1}>(int, at::native::"
    "gpu_kernel_impl_nocast<at::native::neg_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::"
    "{lambda()#8}::operator()() const::{lambda(c10::BFloat16)#1}>(at::TensorIteratorBase&, at::native::neg_kernel_cuda"
    "(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#8}::operator()() const::{lambda(c10::"
    "BFloat16)#1} const&)::{lambda(int)#1})": ("ATen elementwise", "cuda cores", "elementwise [neg]"),
    "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, "
    "c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 3ul> >(int, at::native::"
    "BinaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, "
    "std::array<char*, 3ul>)": ("ATen elementwise", "cuda cores", "vectorized_elementwise [Mul]"),
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, "
    "3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)":
        ("ATen elementwise", "cuda cores", "vectorized_elementwise [add]"),
    "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda"
    "(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(c10::"
    "BFloat16)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}"
    "::operator()() const::{lambda()#7}::operator()() const::{lambda(c10::BFloat16)#1} const&)::{lambda(int)#1}>(int, "
    "at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::"
    "operator()() const::{lambda()#7}::operator()() const::{lambda(c10::BFloat16)#1}>(at::TensorIteratorBase&, "
    "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::"
    "operator()() const::{lambda(c10::BFloat16)#1} const&)::{lambda(int)#1})":
        ("ATen elementwise", "cuda cores", "elementwise [direct_copy]"),
    "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, false, false>(float*, float const*, int, "
    "int, int, bool const*, int, bool)": ("ATen softmax", "cuda cores", "softmax_warp_forward"),
    "void (anonymous namespace)::softmax_warp_forward<c10::BFloat16, float, float, 10, false, false>(float*, c10::"
    "BFloat16 const*, int, int, int, bool const*, int, bool)": ("ATen softmax", "cuda cores", "softmax_warp_forward"),
    "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_execute_kernel__5x_"
    "cublas": ("cuBLAS", "cuda cores", "sm80_xmma_gemm fp32 32x32x8 ffma"),
    "void gemmk1_kernel<int, float, 256, 5, false, false, false, false, cublasGemvTensorStridedBatched<float const>, "
    "cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float, 0>(cublasGemmk1Params"
    "<float, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, "
    "cublasGemvTensorStridedBatched<float>, float>)": ("cuBLAS", "cuda cores", "gemmk1_kernel"),
    "nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopB_TNT": ("cuBLAS / cuBLASLt (nvjet)", "tensor cores", None),
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_"
    "cublas": ("cuBLAS", "tensor cores", None),
    "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8>(cutlass_80_wmma_"
    "tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8::Params)": ("cuBLAS", "tensor cores", None),
    "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int>, cutlass::gemm::"
    "collective::CollectiveMma<cutlass::gemm::MainloopSm90TmaGmmaWarpSpecialized<4, cute::tuple<cute::C<2>, cute::C<1>, "
    "cute::C<1> >, cutlass::gemm::KernelTmaWarpSpecializedCooperative>, cutlass::bfloat16_t> > >(...)":
        ("CUTLASS", "tensor cores", None),
    "void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float, __nv_bfloat16, true, false, false>"
    "(cublasLt::cublasSplitKParams<float>, float const*, __nv_bfloat16 const*, __nv_bfloat16*, float const*, float "
    "const*, __nv_bfloat16 const*, float const*, __nv_bfloat16*, void*, long, float*, int*)":
        ("cuBLAS / cuBLASLt", "cuda cores", None),
    "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::bfloat16_t, "
    "Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, false, true, false, false, true, true, false, false>"
    "(pytorch_flash::Flash_fwd_params)": ("FlashAttention-2 (PyTorch's copy)", "tensor cores", None),
    "triton_tem_fused_flex_attention_0": ("Triton (FlexAttention)", None, None),
    "triton_tem_fused_0": ("Triton", None, None),
    "triton_poi_fused__to_copy_0": ("Triton (Inductor)", "cuda cores", None),
    "Memcpy HtoD (Pageable -> Device)": ("CUDA runtime", "none", None),
}


@pytest.mark.parametrize("name", list(LAYER), ids=lambda n: kernel_names.label(n, 40))
def test_every_kernel_of_a_llama_layer_is_decoded(name):
    library, unit, label = LAYER[name]
    info = kernel_names.explain(name)
    assert info["library"] == library, info
    assert unit is None or info["math_unit"] == unit, info
    assert label is None or info["label"] == label, info


def test_no_committed_capture_has_an_unknown_kernel():
    """Every kernel in every committed record (the layer's captures, once taken, included) is decoded."""
    from attnprof.model import store
    unknown = set()
    for path in sorted(store.CAPTURES.glob("*.json")):
        s = json.loads(path.read_text())
        ops = [op for rank in s.get("ranks", []) for op in rank.get("ops", [])] if isinstance(s, dict) else []
        ops += s.get("ops", []) if isinstance(s, dict) and isinstance(s.get("ops"), list) else []
        unknown |= {(path.name, op["name"][:120]) for op in ops
                    if op.get("kind") == "kernel" and kernel_names.explain(op["name"])["library"] == "unknown"}
    assert not unknown, unknown


def test_what_a_kernel_is_fits_a_table_cell():
    """The decoded-kernel tables' "what it is" cells are phrases, not sentences: no full stop, at most 20 words."""
    for pattern, _, _, what in kernel_names.RULES:
        assert not what.endswith(".") and ". " not in what and len(what.split()) <= 20, pattern
