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
