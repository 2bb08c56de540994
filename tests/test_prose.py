"""Sentences in the chapters that state what the captures show are checked here against the committed
captures, so a recapture that changes the picture fails the tests instead of leaving the prose wrong."""
from attnprof import names
from attnprof import store

summary = store.load_summary


def kernels(stage):
    return [op for op in summary(stage)["ops"] if op["kind"] == "kernel"]


def test_inplace_masking_kernel_is_the_slowest_op():  # inplace.md, naive.md
    for stage in ("naive", "inplace"):
        slowest = max(summary(stage)["ops"], key=lambda op: op["duration_us"])
        assert "masked_fill" in slowest["name"], stage


def test_elementwise_passes_cost_more_than_both_matmuls():  # claims.md
    ops = summary("inplace")["ops"]
    matmuls = sum(op["duration_us"] for op in ops if names.explain(op["name"])["library"].startswith("cuBLAS"))
    others = sum(op["duration_us"] for op in ops if op["kind"] == "kernel"
                 and not names.explain(op["name"])["library"].startswith("cuBLAS"))
    assert others > matmuls


def test_cudnn_is_the_fastest_backend_and_auto_picks_it():  # auto.md, at-a-glance.md
    times = {b: summary(b)["forward_device_us"] for b in ("math", "efficient", "flash", "cudnn")}
    assert min(times, key=times.get) == "cudnn"
    auto = summary("auto")
    assert auto["sdpa_choice"] == "cudnn" and names.fingerprint(op["name"] for op in auto["ops"]) == "cudnn"


def test_hopper_kernels_as_described():  # naive.md, efficient.md, flash.md, cudnn.md, math.md
    assert all(k["name"].startswith("nvjet_sm90") for k in kernels("naive") if "nvjet" in k["name"])
    assert any(k["launch"] == "cuLaunchKernelEx" for k in kernels("naive"))
    assert names.explain(kernels("efficient")[0]["name"])["arch"] == "sm_80"
    cudnn = kernels("cudnn")[0]
    assert "wgmma" in cudnn["name"] and cudnn["launch"] == "cuLaunchKernelEx" and cudnn["grid"] == [132, 1, 1]
    flash = kernels("flash")[0]
    assert flash["registers"] == 255 and flash["block"] == [128, 1, 1]
    math_gemms = [k for k in kernels("math") if "gemm" in k["name"]]
    assert len(math_gemms) == 2 and all("ffma" in k["name"] and "sm80" in k["name"] for k in math_gemms)
    assert [k for k in kernels("math")][:3] and all("direct_copy" in k["name"] for k in kernels("math")[:3])


def test_sage_quantises_before_attending():  # fused.md
    ops = [op["name"] for op in summary("sage")["ops"]]
    assert sum("quant_per_block_int8" in n for n in ops) == 2 and ops[-1] == "_attn_fwd"
    assert summary("sage")["rel_err"] > summary("cudnn")["rel_err"]


def test_layout_work_on_the_cpu_side():  # efficient.md, cudnn.md
    def direct(stage, name):
        return [c for c in summary(stage)["cpu_ops"] if c["name"] == name]
    transposes = [c["start_us"] for c in summary("efficient")["cpu_ops"] if c["name"] == "aten::transpose"]
    kernel_call = direct("efficient", "aten::_efficient_attention_forward")[0]["start_us"]
    assert sum(t < kernel_call for t in transposes) == 3 and sum(t > kernel_call for t in transposes) == 1
    assert not direct("cudnn", "aten::transpose")
    assert [op["kind"] for op in summary("cudnn")["ops"]] == ["memset", "kernel"]


def test_efficient_runs_the_posts_a100_kernel():  # efficient.md
    from attnprof import a100
    assert names.label(kernels("efficient")[0]["name"]) == a100.KERNELS["efficient"]
