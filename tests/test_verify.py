"""Numerical verification and the backend detective, on the CPU (the H200 run is a committed record)."""
import torch
import pytest

from attnprof.measure import bench, verify
from attnprof.measure.sweep import point


def test_cpu_paths_meet_the_documented_tolerances():
    rows = verify.verify(dtypes=("fp32", "bf16"), cases=[((1, 3, 96, 32), False), ((1, 2, 64, 32), True)])
    ran = [r for r in rows if r["status"] in ("pass", "fail")]
    assert {r["path"] for r in ran} >= {"naive", "math", "flash", "flex"}
    for r in ran:
        if not r["fully_masked_row"]:
            assert r["status"] == "pass", r
            assert r["rel_frobenius"] <= verify.TOLERANCE[r["dtype"]]
    masked = {r["path"]: r for r in ran if r["fully_masked_row"] and r["dtype"] == "fp32"}
    assert masked["naive"]["masked_row"] == "NaN" and masked["naive"]["status"] == "fail"
    assert masked["math"]["masked_row"] == "zeros" and masked["math"]["status"] == "pass"


def test_errors_find_the_worst_row():
    ref = torch.randn(2, 3, 16, 8, dtype=torch.float64)
    out = ref.clone()
    out[1, 2, 5] += 0.5
    e = verify.errors(out, ref)
    assert e["worst_row"]["batch"] == 1 and e["worst_row"]["head"] == 2 and e["worst_row"]["query"] == 5
    assert e["max_abs"] == pytest.approx(0.5) and not e["nan"]
    out[0, 0, 0, 0] = float("nan")
    assert verify.errors(out, ref)["nan"]


@pytest.mark.parametrize("kwargs, expected", [
    ({}, "flash"),
    ({"dropout": 0.2}, "math"),
])
def test_which_reads_the_backend_off_the_profile(kwargs, expected):
    r = verify.which((1, 2, 64, 32), "fp32", **kwargs)
    assert r["ran"] == r["aten_backend"] == expected
    assert r["median_us"] > 0


def test_bad_which_input_is_one_line():
    with pytest.raises(ValueError, match="unknown layout 'diagonal'"):
        verify.make_case((1, 1, 8, 8), "fp32", layout="diagonal")


def test_out_of_memory_is_a_result_not_a_crash():
    def forward():
        raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
    assert bench.measure(forward) == {"oom": True}


def test_a_sweep_point_on_cpu():
    row = point("flash", (1, 2, 64, 32), dtype=torch.float32)
    assert row["median_us"] > 0 and row["tflops"] > 0 and row["path"] == "flash"
    sage = point("sage", (1, 2, 64, 32), dtype=torch.float16)  # a provider that cannot run is a result
    assert "unavailable" in sage or "median_us" in sage


def test_reasons_are_collected_from_python_warnings_and_from_stderr():
    """can_use_* explains a refusal through TORCH_WARN, which reaches either Python's warnings or fd 2."""
    import os
    import warnings
    from attnprof.measure.dispatch import with_reasons

    def check():
        warnings.warn("Flash attention requires q,k,v to have the same last dimension")
        os.write(2, b"[W1130 00:33:43.081000 8512 sdp_utils.cpp:512] Warning: Mem efficient attention requires "
                    b"the last dimension of the inputs to have stride 1 (Triggered internally at x.cpp:1.)\n"
                    b"[W1130 00:33:43.082000 8512 sdp_utils.cpp:520] Warning: Both fused kernels require query, key "
                    b"and value to have the same dtype\n"
                    b"[W1130 01:00:32.548149837 sdp_utils.cpp:180] Warning: Flash attention requires head_dim <= 256\n")
        return False
    ok, reasons = with_reasons(check)
    assert ok is False
    assert reasons == ["Flash attention requires q,k,v to have the same last dimension",
                       "Mem efficient attention requires the last dimension of the inputs to have stride 1",
                       "Both fused kernels require query, key and value to have the same dtype",
                       "Flash attention requires head_dim <= 256"]
