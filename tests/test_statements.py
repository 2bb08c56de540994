"""Sentences that rank, compare, multiply or judge are statements checked against the records: each holds
on the committed records, each turns false when the number it rests on changes, and a false one stops
the strict build with one line that names it."""
import json
import shutil

import pytest

from attnprof.model import store
from attnprof.analysis import records
from attnprof.analysis import hardware, trace
from attnprof.site.claims import statements
from attnprof.site.build import Build
from attnprof.site.build import FalseStatement
from attnprof.site.claims.statements import STATEMENTS, check
from attnprof.site import registry

registry.load()  # every module that registers statements, as a build loads them


@pytest.fixture(scope="module")
def committed():
    return Build(store.CAPTURES, problems={})


def said():
    """Every `say` directive of the chapters, with its arguments: what the pages ask the statements."""
    import re
    from attnprof.model.snippets import ROOT
    found = {tuple(m.group(1).split()) for page in (ROOT / "docs").glob("*.md")
             for m in re.finditer(r"<!--\s*attnprof:\s*say\s+([^>]*?)\s*-->", page.read_text())}
    return sorted(found)


def test_every_statement_is_said_on_a_page():
    assert {words[0] for words in said()} == set(STATEMENTS)


@pytest.mark.parametrize("words", said(), ids=" ".join)
def test_every_statement_holds_on_the_committed_records(committed, words):
    name, *args = words
    s = check(committed, name, *[a for a in args if "=" not in a], **dict(a.split("=", 1) for a in args if "=" in a))
    assert s.holds and s.text and "{" not in s.text, words


@pytest.fixture
def copy(tmp_path):
    """A copy of the committed records, one number of which a test changes; read without `check`."""
    folder = tmp_path / "captures"
    shutil.copytree(store.CAPTURES, folder)

    def flip(file_name, change):
        path = folder / file_name
        data = json.loads(path.read_text())
        change(data)
        path.write_text(json.dumps(data))
        return Build(folder, problems={})
    return flip


def test_the_backward_ratio_sentence_fails_when_a_fused_backward_gets_cheap(copy):
    build = copy("fa4-bwd.json", lambda s: s.update(forward_device_us=s["backward_device_us"]))  # 1.0×
    with pytest.raises(FalseStatement, match="bwd-over-fwd"):
        check(build, "bwd-over-fwd")


def test_the_fastest_backward_is_named_by_each_method(committed, copy):
    text = check(committed, "bwd-fastest").text
    from attnprof.text import us
    fa4, cudnn = (records.load_summary(f"{s}-bwd") for s in ("fa4", "cudnn"))
    assert f"FlashAttention-4's ({us(fa4['backward_device_us'])})" in text and "the order is not the same" in text
    assert f"cuDNN's comes first ({us(cudnn['event_median_us'])})" in text
    build = copy("fa4-bwd.json", lambda s: s.update(event_median_us=100.0))  # now first by both methods
    assert "comes first too" in check(build, "bwd-fastest").text


def test_fa4s_host_side_explanation_needs_its_cpu_time_above_its_device_time(copy):
    build = copy("fa4-bwd.json", lambda s: s.update(cpu_backward_us=100.0))
    with pytest.raises(FalseStatement, match="bwd-host"):
        check(build, "bwd-host", "fa4")


def test_a100_ratios_are_peak_to_peak(committed):
    p = statements.peak_ratios(committed)
    assert p["hbm_gbs"] == pytest.approx(4815 / 2039, rel=0.01)  # 2 × 3201 MHz × 6016 bits against 2039 GB/s
    assert p["fp32_tflops"] == pytest.approx(132 * 128 * 2 * 1.98e-3 / 19.5, rel=0.01)
    assert hardware.h200_peaks({"query": {"multi_processor_count": 108, "smi_clocks_max_sm_mhz": 1410,
                                            "memory_clock_rate": 1593000, "memory_bus_width": 5120}}) == \
        pytest.approx({"fp32_tflops": 19.5 * 2, "hbm_gbs": 2039, "sm_clock": 108 * 1410}, rel=0.01)  # A100 formulas


def test_math_lies_between_bandwidth_and_fp32_and_fails_outside(committed, copy):
    assert "between the bandwidth ratio" in check(committed, "a100-math").text
    build = copy("run-hardware.json", lambda r: r["result"]["query"].update(memory_clock_rate=4_000_000))  # 2.95×: above math
    with pytest.raises(FalseStatement, match="a100-math"):
        check(build, "a100-math")


def test_in_place_is_nearest_bandwidth_and_fails_when_another_ratio_is_nearer(copy):
    build = copy("run-hardware.json", lambda r: r["result"]["query"].update(smi_clocks_max_sm_mhz=2_200))  # SMs × clock 1.9×
    with pytest.raises(FalseStatement, match="a100-inplace"):
        check(build, "a100-inplace")


def test_the_ampere_kernels_sentence_fails_when_they_outgrow_sms_times_clock(copy):
    build = copy("run-hardware.json", lambda r: r["result"]["query"].update(multi_processor_count=90))
    with pytest.raises(FalseStatement, match="a100-fused-ampere"):
        check(build, "a100-fused-ampere")


def test_relation_and_scaling_words():
    assert [statements.relation(x, 2, 3) for x in (1.9, 2.5, 3.1)] == ["below", "between", "above"]
    assert statements.scaling_words(2.016, 2, None) == "about linear"
    assert statements.scaling_words(2.2, 2, None) == "superlinear"
    assert statements.scaling_words(2.05, 2, 0.01) == "superlinear"  # beyond a recorded spread
    assert statements.scaling_words(2.05, 2, 0.08) == "about linear"
    assert statements.scaling_words(1.6, 2, None) == "sublinear"


def test_the_scaling_sentence_fails_if_the_speedup_is_clearly_superlinear(copy):
    build = copy("cp-allgather-w2-1x16x131072x128.json", lambda s: s.update(speedup=2.4))
    with pytest.raises(FalseStatement, match="cp-scaling"):
        check(build, "cp-scaling")


def test_busy_time_is_the_union_of_overlapping_ops():
    ops = [{"start_us": 0.0, "duration_us": 10.0}, {"start_us": 5.0, "duration_us": 10.0},
           {"start_us": 20.0, "duration_us": 1.0}]
    assert trace.busy_us(ops) == pytest.approx(16.0)
    r = records.load_summary("cp-allgather-w2-1x16x32768x128")["ranks"][0]
    assert trace.busy_us(r["ops"]) < r["event_median_us"] < r["forward_device_us"]  # what the two-GPU page says


def test_the_picture_shows_the_forward_nearest_both_medians(h200):
    f = lambda cpu, dev: trace.Forward(cpu_us=cpu, ops=[trace.DeviceOp(name="k", kind="kernel", start_us=0.0,
                                                                       duration_us=dev, launch_start_us=0.0,
                                                                       launch="cudaLaunchKernel")])
    fwds = [f(235.0, 58.0), f(102.0, 58.7), f(91.0, 57.5)]  # cuDNN's three profiled forwards, in shape
    assert trace.typical_forward(fwds) is fwds[1] and trace.median_forward(fwds) is fwds[0]
    s = records.load_summary("cudnn")
    fwds = trace.forwards(trace.load(store.trace_path(store.CAPTURES, "cudnn")), s["label"])
    shown = trace.typical_forward(fwds)
    assert abs(shown.cpu_us - s["cpu_forward_us"]) < 0.1 * s["cpu_forward_us"]
    assert abs(shown.device_us - s["forward_device_us"]) < 0.05 * s["forward_device_us"]


def test_a_flipped_number_fails_the_strict_build_naming_its_sentence(tmp_path, build_site):
    """A run whose samples say otherwise (consistent in itself, so `check` passes) makes the sentence false."""
    from attnprof.analysis import derived
    folder = tmp_path / "captures"
    shutil.copytree(store.CAPTURES, folder)
    path = folder / "run-sweep.json"
    record = json.loads(path.read_text())
    longest = max(r["shape"][2] for r in record["result"])
    for r in record["result"]:  # FlashAttention-4 ten times slower at the longest sequence: it no longer leads there
        if r["path"] == "fa4" and r["shape"][2] == longest and "back_to_back_us_each" in r:
            r["back_to_back_us_each"] = [10 * t for t in r["back_to_back_us_each"]]
    record["result"] = derived.derive("sweep", record["result"])
    path.write_text(json.dumps(record))
    r = build_site(tmp_path / "site", env_extra={"ATTNPROF_CAPTURES": str(folder)})
    assert r.returncode != 0
    [line] = [line for line in r.stderr.splitlines() if "'leads-long'" in line]
    assert "is false for the committed records" in line and "It leads from S=" in line


def test_the_cpu_ranking_follows_the_unprofiled_enqueue_samples(copy):
    def scale(stage, factor):
        def change(run):
            for row in run["result"]["rows"]:
                if row["stage"] == stage and row["shape"] == [8, 16, 1024, 64]:
                    row["enqueue_us"] = [x * factor for x in row["enqueue_us"]]
        return change
    build = copy("run-timing.json", scale("cudnn", 10.0))
    assert check(build, "cpu-rank", "cudnn", "flash", "efficient").text.endswith("so the most expensive of these here")
    build = copy("run-timing.json", scale("cudnn", 0.01))
    text = check(build, "cpu-rank", "cudnn", "flash", "efficient").text
    assert text.endswith("so the cheapest of these here") and "below flash's" in text


def test_the_compiled_forward_between_eager_and_flash_fails_when_it_is_not(copy):
    build = copy("naive_compiled.json", lambda s: s.update(event_median_us=s["event_median_us"] * 10))
    with pytest.raises(FalseStatement, match="'between'"):
        check(build, "between", "naive_compiled", "naive", "flash")


def test_a_kernels_verdict_follows_its_counters(committed, monkeypatch):
    measured = records.load_counters("naive")
    for k in measured["kernels"]:
        if "softmax" in k["name"]:
            k.update(sm_throughput_pct=10.0, memory_throughput_pct=90.0)
    monkeypatch.setattr(committed, "counters", lambda record: measured)
    assert check(committed, "verdict", "naive", "softmax_warp_forward").text.startswith("memory-bound by")


def test_two_compiled_variants_with_different_kernels_are_said_to_differ(copy):
    def rename(summary):
        next(op for op in summary["ops"] if op["name"].startswith("triton_"))["name"] = "triton_red_fused_other_0"
    build = copy("inplace_compiled.json", rename)
    text = check(build, "same-kernels", "naive_compiled", "inplace_compiled").text
    assert text.startswith("generates different kernels") and "is gone" not in text
    assert "Inductor most likely" not in check(build, "second-compile", "naive_compiled", "inplace_compiled").text


def _attention_op(s):
    from attnprof.analysis import kernel_names
    return next(op for op in s["ops"] if kernel_names.is_attention(op["name"]))


def test_the_layer_sentence_fails_when_its_attention_kernel_outweighs_the_rest(copy):
    def slow_attention(s):
        _attention_op(s)["duration_us"] = s["forward_device_us"]  # the kernel alone as long as the forward
    build = copy("layer.sdpa.json", slow_attention)
    build.shown = build.summary  # the sentence reads the drawn forward: here, the edited one
    with pytest.raises(FalseStatement, match="layer-around"):
        check(build, "layer-around")


def test_the_eager_sentence_fails_when_its_softmax_runs_in_bf16_or_beats_the_fused_kernel(copy):
    def bf16_softmax(s):
        op = next(op for op in s["ops"] if "softmax" in op["name"])
        op["name"] = op["name"].replace("float", "c10::BFloat16")
    build = copy("layer.eager.json", bf16_softmax)
    build.shown = build.summary  # the sentence reads the drawn forwards: here, the edited ones
    with pytest.raises(FalseStatement, match="layer-eager"):
        check(build, "layer-eager")

    def fast_softmax(s):
        next(op for op in s["ops"] if "softmax" in op["name"])["duration_us"] = 1.0
    build = copy("layer.eager.json", fast_softmax)
    build.shown = build.summary
    with pytest.raises(FalseStatement, match="layer-eager"):
        check(build, "layer-eager")
