"""The GPU table (attnprof/model/gpus.py): each row agrees with itself and with its architecture."""
import dataclasses

import pytest

from attnprof.model import gpus, store

# Dense Tensor Core FLOP per clock per SM, by architecture and the inputs' dtype (a fused multiply-add is 2 FLOP):
# Turing: 8 Tensor Cores × 64 FP16 FMA (Turing whitepaper); GA100: 4 × 256 FP16 FMA, TF32 at half (A100 whitepaper;
# NVIDIA/cudnn-frontend#715: 312 = 108 × 2,048 × 1.41 GHz); GA10x and AD10x data-centre parts: half GA100's per SM,
# FP8 twice FP16 (Ada whitepaper, L4 and L40S datasheets); Hopper: twice GA100's per SM (H100 whitepaper); Blackwell:
# twice Hopper's (ByteDance-Seed/VeOmni#986: B200 148 SMs × 8,192).
FLOP_PER_CLOCK_PER_SM = {
    "Turing": {"fp16": 1024},
    (8, 0): {"bf16": 2048, "fp16": 2048, "tf32": 1024},
    (8, 6): {"bf16": 1024, "fp16": 1024, "tf32": 512},
    (8, 9): {"bf16": 1024, "fp16": 1024, "tf32": 512, "fp8": 2048},
    "Hopper": {"bf16": 4096, "fp16": 4096, "tf32": 2048, "fp8": 8192},
    "Blackwell": {"bf16": 8192, "fp16": 8192, "tf32": 4096, "fp8": 16384},
}
# Parts whose Tensor Cores run FP32 accumulation (PyTorch's) at half their architecture's rate: GeForce (the Ada
# whitepaper's RTX 4090 column) and the A10G (70 bf16 TFLOP/s on 80 SMs, where the A10 gives 125 on 72).
HALF_RATE = {"NVIDIA GeForce RTX 4090", "NVIDIA A10G"}

ROWS = list(gpus.GPUS.values())


def rate(g: gpus.Gpu) -> dict:
    by = FLOP_PER_CLOCK_PER_SM.get(g.capability) or FLOP_PER_CLOCK_PER_SM[g.arch]
    return {k: v / 2 for k, v in by.items()} if g.name in HALF_RATE else by


def near(a: float, b: float, within: float = 0.01) -> bool:
    return abs(a - b) <= within * b


def test_the_table_holds_the_fourteen_gpus_each_under_its_drivers_name():
    assert sorted(gpus.GPUS) == sorted([
        "NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-40GB", "NVIDIA A100 80GB PCIe", "NVIDIA H100 80GB HBM3",
        "NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA H200", "NVIDIA GH200 480GB", "NVIDIA L4", "NVIDIA L40S",
        "NVIDIA GeForce RTX 4090", "NVIDIA B200", "Tesla T4", "NVIDIA A10G"])
    assert len({g.short for g in ROWS}) == len({g.display for g in ROWS}) == len(ROWS)


@pytest.mark.parametrize("g", ROWS, ids=lambda g: g.short)
def test_fp32_is_sms_times_lanes_times_two_times_the_clock(g):
    lanes = gpus.CAPABILITIES[g.capability].fp32_lanes_per_sm
    assert near(g.sms * lanes * 2 * g.max_sm_mhz / 1e6, g.fp32_tflops), g


@pytest.mark.parametrize("g", ROWS, ids=lambda g: g.short)
def test_each_tensor_core_peak_is_sms_times_its_architectures_rate_times_its_clock(g):
    per_sm = rate(g)
    assert set(g.tensor_tflops) <= set(per_sm), g
    for dtype, peak in g.tensor_tflops.items():
        assert near(g.sms * per_sm[dtype] * g.tensor_mhz / 1e6, peak), (g.name, dtype)


@pytest.mark.parametrize("g", ROWS, ids=lambda g: g.short)
def test_each_row_is_sourced_and_marks_only_its_own_fields_unverified(g):
    # a source is a public page, or a record of this site's where the driver itself reported the figure
    assert g.sources and all(url.startswith(("https://", "docs/captures/")) and what for url, what in g.sources.items())
    assert all((store.ROOT / url).is_file() for url in g.sources if url.startswith("docs/captures/"))
    fields = {f.name for f in dataclasses.fields(g)} | {f"tensor_tflops.{d}" for d in g.tensor_tflops}
    assert set(g.unverified) <= fields, g.unverified
    assert g.tensor_mhz <= g.max_sm_mhz and g.capability in gpus.CAPABILITIES


def test_what_the_reference_marks_unverified_stays_marked():
    # ../shared/reference/gpus.md marks these so
    marked = {"NVIDIA H100 NVL": {"max_sm_mhz", "fp32_tflops", "memory_gbs", "memory_gb", "l2_mb"},
              "NVIDIA GH200 480GB": {"max_sm_mhz"}, "NVIDIA B200": {"tdp_w", "fp32_tflops"}}
    for name, fields in marked.items():
        assert fields <= set(gpus.row(name).unverified), name


def test_the_limits_per_capability_are_the_cuda_guides():
    assert {cc: c.blocks_per_sm for cc, c in gpus.CAPABILITIES.items()} == {
        (7, 5): 16, (8, 0): 32, (8, 6): 16, (8, 9): 24, (9, 0): 32, (10, 0): 32}
    for c in gpus.CAPABILITIES.values():
        assert c.shared_kib_per_block < c.shared_kib_per_sm or c.shared_kib_per_block == 64
        assert c.threads_per_sm // 32 * 32 == c.threads_per_sm and c.registers_per_thread == 255


def test_a_capability_reads_both_ways():
    assert gpus.capability("sm_90") == (9, 0) and gpus.capability("sm_100") == (10, 0)
    assert gpus.sm((8, 6)) == "sm_86" and gpus.row("NVIDIA H200").arch == "Hopper"


def test_an_unknown_gpu_has_no_row_and_one_line_that_says_which_to_add():
    name = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    assert gpus.row(name) is None and gpus.display(name) == name
    line = gpus.missing(name)
    assert "\n" not in line and name in line and gpus.TABLE in line
    assert gpus.display("NVIDIA H100 80GB HBM3") == "H100 SXM" and gpus.by_short("h200").name == "NVIDIA H200"


def test_a_capability_the_table_lacks_leaves_the_peaks_out_with_the_line_that_says_which_row_to_add():
    from attnprof.model import store
    from attnprof.site import registry
    from attnprof.site.build import Build
    from attnprof.text import escape
    b = Build(store.CAPTURES, problems={})
    b.run("hardware")["query"].update(name="NVIDIA RTX PRO 6000 Blackwell Server Edition", major=12, minor=0)
    box = registry.expand(b, "hardware", [])
    assert "Capture not usable" in box and escape(gpus.missing("NVIDIA RTX PRO 6000 Blackwell Server Edition")) in box
    assert registry.expand(Build(store.CAPTURES, problems={}), "gpu", ["arch"]) == "Hopper"
