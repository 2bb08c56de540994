"""Sentences that rank, compare, multiply or judge are statements checked against the records: each holds
on the committed records, each turns false when the number it rests on changes, and a false one stops
the strict build with one line that names it."""
import contextlib
import json
import re
import shutil

import pytest

from attnprof.model import store
from attnprof.analysis import records
from attnprof.analysis import hardware, trace
from attnprof.site.claims import two_gpus, versus_a100, wording
from attnprof.site.build import Build, row
from attnprof.site.claims.core import check
from attnprof.site import registry

registry.load()  # every module that registers statements, as a build loads them


@pytest.fixture(scope="module")
def committed():
    return Build(store.CAPTURES, problems={})


@pytest.fixture
def copy(tmp_path):
    """A copy of the committed records, one number of which a test changes; read without `check`: a run's samples
    in its file, a capture's figures as the build reads them (records.changed)."""
    folder = tmp_path / "captures"
    shutil.copytree(store.CAPTURES, folder)
    with contextlib.ExitStack() as changes:
        def flip(file_name, change):
            record = file_name.removesuffix(".json")
            if records.kind_of(record) is not records.RUN:
                changes.enter_context(records.changed(folder, record, change))
            else:
                path = folder / file_name
                data = json.loads(path.read_text())
                change(data)
                path.write_text(json.dumps(data))
            return Build(folder, problems={})
        yield flip


def test_backwards_whose_one_call_times_overlap_are_not_ranked(copy):
    """By one call, FlashAttention-4's backward (the fastest by device time) and cuDNN's (the next) made 1 %
    apart in every process of the backward run are not told apart; made 30 % apart, decidedly ordered; by
    device time FlashAttention-4's stays first."""
    import statistics
    floor = statistics.median(row(Build().run("backward")["rows"], stage="fa4")["event_times_us"]) * 0.3

    def one_call(fa4, cudnn):
        def change(record):
            for result in [record["result"], *record.get("repeats", [])]:
                for stage, factor in (("fa4", fa4), ("cudnn", cudnn)):
                    r = row(result["rows"], stage=stage)
                    r["event_times_us"] = [factor * floor * (1 + i / 1000) for i in range(len(r["event_times_us"]))]
        return change
    text = check(copy("run-backward.json", one_call(1.0, 1.01)), "bwd-fastest").text
    assert "the fastest backward here is FlashAttention-4's" in text
    assert "these two are not told apart: FlashAttention-4's" in text.split("Timed from the CPU", 1)[1]
    text = check(copy("run-backward.json", one_call(1.3, 1.0)), "bwd-fastest").text
    assert "cuDNN's" in text and "is decidedly faster than FlashAttention-4's" in text.split("Timed from the CPU", 1)[1]
    text = check(copy("run-backward.json", one_call(1.0, 1.3)), "bwd-fastest").text
    assert "decidedly faster than cuDNN's" in text.split("Timed from the CPU", 1)[1]


def test_a100_ratios_are_peak_to_peak(committed):
    p = versus_a100.peak_ratios(committed)
    assert p["memory_gbs"] == pytest.approx(4815 / 2039, rel=0.01)  # 2 × 3201 MHz × 6016 bits against 2039 GB/s
    assert p["fp32_tflops"] == pytest.approx(132 * 128 * 2 * 1.98e-3 / 19.5, rel=0.01)
    a100 = {"major": 8, "minor": 0, "multi_processor_count": 108, "smi_clocks_max_sm_mhz": 1410,
            "memory_clock_rate": 1593000, "memory_bus_width": 5120}
    # an A100's device query gives its datasheet's peaks: 64 FP32 lanes per SM on sm_80, 128 on sm_90
    assert hardware.queried_peaks({"query": a100}) == pytest.approx(
        {**hardware.published_peaks(hardware.POST_GPU), "lanes": 64}, rel=0.01)
    assert hardware.queried_peaks({"query": {**a100, "major": 12}}) is None  # a capability the table lacks


def test_relation_and_scaling_words():
    assert [wording.relation(x, 2, 3) for x in (1.9, 2.5, 3.1)] == ["below", "between", "above"]
    assert two_gpus.scaling_words(2.016, 2, None) == "about linear"
    assert two_gpus.scaling_words(2.2, 2, None) == "superlinear"
    assert two_gpus.scaling_words(2.05, 2, 0.01) == "superlinear"  # beyond a recorded spread
    assert two_gpus.scaling_words(2.05, 2, 0.08) == "about linear"
    assert two_gpus.scaling_words(1.6, 2, None) == "sublinear"


def test_a_list_whose_items_hold_commas_is_parted_by_semicolons():
    from attnprof.site.words import listed
    assert [listed(x) for x in (["a"], ["a", "b"], ["a", "b", "c"])] == ["a", "a and b", "a, b and c"]
    assert listed(["naive", "flash", "Naive attention, torch.compile"]) == "naive; flash; and Naive attention, torch.compile"


def test_busy_time_is_the_union_of_overlapping_ops():
    ops = [{"start_us": 0.0, "duration_us": 10.0}, {"start_us": 5.0, "duration_us": 10.0},
           {"start_us": 20.0, "duration_us": 1.0}]
    assert trace.busy_us(ops) == pytest.approx(16.0)
    r = records.load_summary("cp-allgather-w2-1x16x32768x128")["ranks"][0]
    assert trace.busy_us(r["ops"]) < r["event_median_us"] < r["forward_device_us"]  # what the two-GPU page says


def test_the_picture_shows_the_median_forward():
    """The forward a page draws is the one whose device time is the median: its device time is the summary's."""
    build = Build(store.CAPTURES, problems={})
    for record in ("cudnn", "flash", "naive"):
        fwds, drawn = build.forwards(record)
        assert drawn is trace.median_forward(fwds)
        assert drawn.device_us == build.summary(record)["forward_device_us"]


def test_a_flipped_number_fails_the_strict_build_naming_its_sentence(tmp_path, build_site, copy_project):
    """A run whose samples say otherwise (consistent in itself, so `check` passes) makes the sentence false
    (the strict build of the chapter that says it: a project with that chapter alone)."""
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
    tree = copy_project(tmp_path / "tree", ["scaling"])
    r = build_site(tmp_path / "site", env_extra={"ATTNPROF_CAPTURES": str(folder)}, root=tree)
    assert r.returncode != 0
    [line] = [line for line in r.stderr.splitlines() if "'leads-long'" in line]
    assert "is false for the committed records" in line and "FlashAttention-4 from a longer one up to the longest" in line
    assert "the paths at the front: {(64, 512): ['cudnn']" in line and "(64, 32768): ['fa4']" not in line


def test_the_cpu_ranking_follows_the_unprofiled_enqueue_samples(copy):
    def scale(stage, factor):
        def change(run):  # in every process of the run
            for result in [run["result"], *run.get("repeats", [])]:
                for row in result["rows"]:
                    if row["stage"] == stage and row["shape"] == [8, 16, 1024, 64]:
                        row["enqueue_us"] = [x * factor for x in row["enqueue_us"]]
        return change
    build = copy("run-timing.json", scale("cudnn", 10.0))
    said = check(build, "cpu-rank", "cudnn", "flash", "efficient")
    assert said.outcome == "the most expensive of these here"
    assert said.text.endswith("so the most expensive among cuDNN, flash and memory-efficient")
    build = copy("run-timing.json", scale("cudnn", 0.01))
    text = check(build, "cpu-rank", "cudnn", "flash", "efficient").text
    assert text.endswith("so the cheapest among cuDNN, flash and memory-efficient") and "below flash's" in text


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

def test_the_backward_ranking_leaves_its_runs_times_to_its_evidence_each_named_beside_it(committed):
    """The ranking of backwards is the backward run's; the table above it and the host sentence beside its lesson
    give each backward's times from its capture, another measurement (FlashAttention-4's device time differs
    between the two). So the ranking's lesson gives no time, and its evidence names the run beside each time."""
    from attnprof.text import us
    from attnprof.site.build import across
    from attnprof.analysis import decide
    ranked = check(committed, "bwd-fastest")
    capture = committed.summary("fa4-bwd")["backward_device_us"]
    in_run = across(committed, "backward", lambda res: row(res["rows"], stage="fa4")["backward_device_us_each"],
                    decide.DEVICE)
    assert us(in_run.median) != us(capture)  # two measurements of one quantity: two numbers
    assert not re.search(r"\d\s*[µm]s\b", ranked.lesson), ranked.lesson  # no time in it
    host = check(committed, "bwd-host", "fa4")
    assert f"in its {us(capture)} of kernels" in host.lesson  # the table's own figure, beside the ranking's lesson
    device, one_call = ranked.text.split("Timed from the CPU", 1)
    assert "by device time in that run" in device and us(in_run.median) in device
    assert one_call.startswith(" in the same run, ")


def test_the_register_limit_says_how_a_warps_registers_come_to_its_figure(committed):
    """A learner multiplies FlashAttention-2's registers per thread by a warp's 32 threads and does not get the figure
    the lesson gives a warp: the SM allocates a warp's registers in whole units. The lesson says they are rounded up,
    and its evidence gives the product and the unit, each from the records (the trace's kernel and device)."""
    import math
    from attnprof.analysis import occupancy
    s = check(committed, "flash-register-limit")
    op = next(o for o in committed.summary("flash")["ops"] if "flash_fwd" in o["name"])
    warp = committed.device_properties("flash").get("warpSize", 32)
    product = op["registers"] * warp
    per_warp = math.ceil(product / occupancy.REG_ALLOC_UNIT) * occupancy.REG_ALLOC_UNIT
    assert product != per_warp  # what makes the words needed at all, on the committed records
    assert f"rounded up to the allocation unit, take {per_warp:,} of the SM's register file" in s.lesson
    assert (f"({op['registers']} × {warp} threads = {product:,}, rounded up to a multiple of "
            f"{occupancy.REG_ALLOC_UNIT}," in s.text)
