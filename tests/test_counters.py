"""Hardware counters: the committed Nsight Compute reports (real, from the H200) parse on a CPU into
exactly the committed records, and the records say what the chapters say they say."""
import csv
import io
import json
import re
import shutil

import pytest

from attnprof.analysis import counters
from attnprof.model import store
from attnprof.analysis import records
from attnprof.cli import main


def test_every_committed_record_is_its_report_parsed():
    for record in [r.removesuffix(".counters") for r in records.COUNTERS.records()]:
        report = (store.CAPTURES / f"{record}.ncu.csv").read_text()
        assert counters.parse_csv(report) == records.load_counters(record)["kernels"], record
        assert records.status(f"{record}.counters") is None, record


def test_math_runs_its_fp32_gemms_on_the_fma_pipe():
    kernels = records.load_counters("math")["kernels"]
    gemms = [k for k in kernels if "xmma_gemm_f32f32" in k["name"]]
    assert len(gemms) == 2
    for k in gemms:
        assert k["fma_pipe_pct"] > 40 and k["tensor_pipe_pct"] < 1 and k["wgmma_instructions"] == 0


def test_flash_fills_the_slots_its_registers_allow():
    (k,) = records.load_counters("flash")["kernels"]
    assert counters.limiter(k) == "registers"
    assert k["theoretical_occupancy_pct"] == pytest.approx(12.5)
    assert 0.9 * k["theoretical_occupancy_pct"] < k["warps_active_pct"] <= k["theoretical_occupancy_pct"]


def test_cudnn_uses_wgmma_and_turns_compute_bound_at_the_long_shape():
    (short,) = records.load_counters("cudnn")["kernels"]
    (long,) = records.load_counters("cudnn-1x16x8192x128")["kernels"]
    assert short["wgmma_instructions"] > 0 and long["wgmma_instructions"] > short["wgmma_instructions"]
    # at the long shape its SM throughput reaches the 60 % threshold (or its band), well above its memory's
    assert counters.verdict(long) in ("compute-bound", counters.NEAR) and counters.verdict(short) == "latency-bound"
    assert long["sm_throughput_pct"] > counters.BOUND_AT - counters.BAND > long["memory_throughput_pct"]


def test_kernels_pair_with_the_capture_despite_ncus_spelling():
    capture = records.load_summary("naive")
    pairs = counters.paired(capture["ops"], records.load_counters("naive")["kernels"])
    assert pairs and len(pairs) == 5
    assert counters.base_name("void at::native::vectorized_elementwise_kernel<4, F>(int, F)") == \
        counters.base_name("void at::vectorized_elementwise_kernel<4, G>(int)") == "vectorized_elementwise_kernel"
    assert counters.paired(capture["ops"], records.load_counters("flash")["kernels"]) is None


@pytest.mark.parametrize("verdict, sm, mem", [("compute-bound", 70, 30), ("memory-bound", 30, 80),
                                              ("latency-bound", 50, 57), ("near the threshold", 59, 59),
                                              ("near the threshold", 30, 61.5), ("compute- and memory-bound", 85.7, 83.8)])
def test_verdict(verdict, sm, mem):
    assert counters.verdict({"sm_throughput_pct": sm, "memory_throughput_pct": mem}) == verdict


def test_a_kernel_within_the_band_is_near_the_threshold_on_either_side_of_it():
    """bfloat16_copy went from 60.5 % to 59.8 % of peak between two regenerations: near the threshold both times."""
    at = lambda mem: counters.verdict({"sm_throughput_pct": 10.0, "memory_throughput_pct": mem})
    assert at(60.5) == at(59.8) == counters.NEAR
    assert at(counters.BOUND_AT + counters.BAND + 0.1) == "memory-bound"
    assert at(counters.BOUND_AT - counters.BAND - 0.1) == "latency-bound"


def _elementwise(build, record):
    """The counters of `record`'s ATen elementwise kernels, as the claims page pairs them with the capture."""
    from attnprof.analysis import kernel_names
    return [k for op, k in counters.paired(build.summary(record)["ops"], build.counters(record)["kernels"])
            if kernel_names.explain(op["name"])["library"] == "ATen elementwise"]


def _counts(words: str) -> tuple[int, int]:
    """How many kernels the words call memory-bound and how many they say lie near the threshold."""
    bound = int(re.match(r"(\d+) of the \d+ elementwise kernels", words).group(1))
    near = re.search(r"; (\d+) lie within", words)
    return bound, int(near.group(1)) if near else 0


def test_the_claims_page_counts_the_kernels_near_the_threshold_apart():
    """The memory-bound count moves only when a kernel leaves the band, and the verdict with it
    (the committed counters, one kernel moved in memory)."""
    from attnprof.site.claims import published as claims
    from attnprof.site.build import Build
    build = Build(problems={})
    kernel = _elementwise(build, "math")[0]
    kernel["sm_throughput_pct"] = 10.0
    kernel["memory_throughput_pct"] = counters.BOUND_AT + counters.BAND / 2  # within the band, above
    above = claims.elementwise_memory_bound(build)[2]
    kernel["memory_throughput_pct"] = counters.BOUND_AT - counters.BAND / 2  # within the band, below
    assert claims.elementwise_memory_bound(build)[2] == above
    kernel["memory_throughput_pct"] = 70.0  # out of the band: memory-bound, counted as such
    bound, near = _counts(above)
    assert near >= 1
    assert _counts(claims.elementwise_memory_bound(build)[2]) == (bound + 1, near - 1)
    build = Build(problems={})
    total = sum(len(_elementwise(build, r)) for r in ("naive", "inplace", "math"))
    for record in ("naive", "inplace", "math"):
        for k in build.counters(record)["kernels"]:
            k["sm_throughput_pct"], k["memory_throughput_pct"] = 20.0, 60.5  # every kernel within the band
    words, verdict = claims.elementwise_memory_bound(build)[2:]
    assert words.startswith(f"0 of the {total}") and f"{total} lie within 2 points" in words
    assert verdict == "not decided: near the threshold"


def _marker_line(report: str) -> str:
    """A row of `report` renamed to the marker kernel, as ncu spells torch.cuda._sleep's kernel."""
    row = next(csv.reader([report.splitlines()[2]]))
    row[next(csv.reader([report.splitlines()[0]])).index("Kernel Name")] = "void at::cuda::<unnamed>::spin_kernel(long)"
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerow(row)
    return out.getvalue()


def test_a_report_of_several_forwards_splits_at_its_markers_into_each_forwards_report():
    """One ncu child profiles many records: a marker opens each forward's rows (real rows, from the
    committed reports of three records, one of which failed and ran no kernel)."""
    names = ["naive", "flash", "cudnn-1x16x8192x128"]
    reports = [(store.CAPTURES / f"{n}.ncu.csv").read_text() for n in names]
    head = "".join(reports[0].splitlines(keepends=True)[:2])
    marker = _marker_line(reports[1])
    bodies = ["".join(r.splitlines(keepends=True)[2:]) for r in reports]
    joined = head + marker + bodies[0] + marker + marker + bodies[1] + marker + bodies[2]
    parts = counters.split_report(joined, 4)
    assert [parts[0], parts[2], parts[3]] == reports  # each forward's report, byte for byte
    assert parts[1] == head  # the failed record: the header alone, which parse_csv refuses
    with pytest.raises(ValueError, match="holds no kernel"):
        counters.parse_csv(parts[1])
    for name, part in zip(names, [parts[0], parts[2], parts[3]]):
        assert counters.parse_csv(part) == records.load_counters(name)["kernels"]
    with pytest.raises(ValueError, match="4 forwards in the report, 3 expected"):
        counters.split_report(joined, 3)
    with pytest.raises(ValueError, match="a kernel before the first marker"):
        counters.split_report(head + bodies[0] + marker, 1)


def test_kernel_names_in_anonymous_namespaces_keep_their_name():
    assert counters.base_name("void <unnamed>::softmax_warp_forward<c10::BFloat16, float, 10>(T2 *)") == \
        counters.base_name("void (anonymous namespace)::softmax_warp_forward<c10::BFloat16>(c10::BFloat16*)") == \
        "softmax_warp_forward"
    assert counters.base_name("void at::cuda::<unnamed>::spin_kernel(long)") == counters.MARKER


def test_not_a_report_is_one_clear_line():
    with pytest.raises(ValueError, match="not an ncu raw CSV report"):
        counters.parse_csv("name,value\nflash,1\n")


def test_counters_without_a_gpu_say_so_in_one_line(capsys):
    pytest.importorskip("torch")
    import torch
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert main(["counters", "flash"]) == 2
    err = capsys.readouterr().err
    assert "needs a CUDA GPU" in err and "committed counters records are kept" in err and err.count("\n") == 1


def test_the_claims_page_holds_occupancy_and_boundness_to_the_counters():
    from attnprof.site.claims import published as claims
    from attnprof.site.build import Build
    build = Build()
    rows = {claim.__name__: claim(build) for claim in claims.MEASURED}
    assert rows["flash_occupancy"][3].startswith("confirmed")
    assert rows["math_on_cuda_cores"][3] == "confirmed"
    assert rows["elementwise_memory_bound"][3] == "partly"  # the usual reading holds for a few kernels only
    fused = rows["fused_compute_bound"][2].replace("\u2011", "-")  # a cell keeps a name whole at its hyphen
    groups = dict(part.split(": ", 1) for part in fused.split(", the longest kernel of each path: ", 1)[1].split("; "))
    assert groups["memory-bound"] == "none"
    reaching = groups.get("compute-bound", "") + " · " + groups.get(counters.NEAR, "")
    assert "SDPA, cuDNN backend" in reaching and "FlashAttention-4" in reaching  # the two Hopper kernels
    assert "measured-claims" in (store.ROOT / "docs" / "claims.md").read_text()
