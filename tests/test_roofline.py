"""The Roofline and Methods pages as a learner reads them: a share of a matmul says what matmul (its clock), the
counters table shows the counter its verdict reads, a threshold is said with what it means, FlashAttention-4's
rates at the long shape include the steady run's, and each measured copy rate names the clock it was had at."""
import json
import re
import shutil
import statistics

import pytest

from attnprof.analysis import counters, decide
from attnprof.model import store
from attnprof.site import registry
from attnprof.site.build import Build
from attnprof.site.claims.core import CLAIMS, check
from attnprof.site.claims.wording import pct
from attnprof.site.pieces import runs

DOCS = store.ROOT / "docs"


@pytest.fixture(scope="module", autouse=True)
def loaded():
    registry.load()


def build(folder=store.CAPTURES) -> Build:
    b = Build(folder, problems={})
    b.evidence = []  # as a page renders: lessons in the prose, their evidence folded
    return b


def edited(tmp_path, name, edit):
    """A copy of the committed records with `edit` applied to the JSON of file `name`."""
    folder = tmp_path / "captures"
    shutil.copytree(store.CAPTURES, folder)
    data = json.loads((folder / name).read_text())
    edit(data)
    (folder / name).write_text(json.dumps(data))
    return folder


def lesson_under(table: str) -> str:
    """The sentence a piece puts under its table, up to the marker of its folded evidence."""
    return table.rsplit("\n\n", 1)[-1].split("[^")[0]


# ---- 1. the fastest forward's share of a matmul -----------------------------------------------------------

def test_the_fastest_lesson_says_what_its_percent_is_of():
    """The ceilings run measured its matmul at an SM clock below every clock the fastest run's forwards ran at,
    and under the power cap (NVML's reason bit): the lesson's percent is of that matmul, never "the peak"."""
    b = build()
    ceilings, fastest = b.run("ceilings")["clocks"], [r["clocks"] for r in runs._rows(b, "fastest") if r.get("clocks")]
    assert ceilings["sm_mhz_max"] < min(c["sm_mhz_min"] for c in fastest)  # the records' case
    assert ceilings["throttle_reasons"] & runs.SW_POWER_CAP
    lesson = lesson_under(registry.expand(b, "fastest", []))
    assert "peak" not in lesson
    peak, top = b.run("ceilings")["matmul_tflops"], max(r["tflops_back_to_back"] for r in b.run("fastest")
                                                         if "tflops_back_to_back" in r)
    assert f"{100 * top / peak:.0f} % of a bf16 matmul measured at a lower, power-capped clock" in lesson, lesson
    assert len(lesson.split()) <= 30 and len(re.findall(r"(?<![\w.,-])\d+(?:[.,]\d+)*", lesson)) <= 2, lesson
    # the clocks themselves sit in the evidence, beside the ceilings' own table
    assert f"SM clock {ceilings['sm_mhz_min']:,} MHz, power-capped" in b.evidence[0]
    assert "not of the GPU's peak" in b.evidence[0]
    assert "power-capped" in registry.expand(build(), "ceilings", [])


def test_a_matmul_at_the_forwards_clock_is_said_as_the_measured_rate(tmp_path):
    """Had the ceilings run measured at the highest clock, unthrottled, the words would not call it lower."""
    def full_clock(record):
        record["result"]["clocks"].update(sm_mhz_min=1980, sm_mhz_median=1980, sm_mhz_max=1980, throttle_reasons=0)
    b = build(edited(tmp_path, "run-ceilings.json", full_clock))
    assert runs.matmul_said(b, "fastest") == "the measured bf16 matmul rate"
    assert "of the measured bf16 matmul rate" in lesson_under(registry.expand(b, "fastest", []))
    assert "power-capped" not in registry.expand(build(b.folder), "ceilings", [])


def test_the_ceilings_say_how_they_met_the_gpu_as_each_committed_set_measured_them():
    """The H200's ceilings were taken after seconds of load (its record keeps `settle_s`), power-capped; the
    H100's in runs of a few milliseconds, as the sweep times its forwards, at its highest clock: each set's
    pages say which, and only the first warns that a path can pass the roof."""
    settled, bursts = (build(store.SETS / name).run("ceilings") for name in ("h200", "h100"))
    assert "settle_s" in settled and runs.power_capped(settled["clocks"])  # the records' cases
    assert "settle_s" not in bursts and not runs.power_capped(bursts["clocks"])
    assert "after seconds of load" in runs.ceiling_how(settled) and "under its power cap" in runs.ceiling_how(settled)
    assert "pass it" in runs.ceiling_how(settled)
    said = registry.expand(build(store.SETS / "h100"), "ceilings", [])
    assert "runs of a few milliseconds" in said and "pass it" not in said and "power" not in said


def test_the_power_cap_is_read_from_its_bit_alone():
    assert runs.power_capped({"throttle_reasons": 4}) and runs.power_capped({"throttle_reasons": 5})
    assert not runs.power_capped({"throttle_reasons": 1}) and not runs.power_capped({"throttle_reasons": None})
    assert runs.clock_condition({"sm_mhz_min": 1500, "sm_mhz_max": 1500, "throttle_reasons": 4}) == \
        "SM clock 1,500 MHz, power-capped"
    assert runs.clock_condition({"sm_mhz_min": 1980, "sm_mhz_max": 1980, "throttle_reasons": 0}) == "SM clock 1,980 MHz"


# ---- 2. FlashAttention-4's rates on Methods include the steady run's ----------------------------------------

def test_the_rates_on_methods_include_the_steady_state_rate_the_roofline_shows():
    b = build()
    s = check(b, "rates", "fa4")
    steady = f"{statistics.median(f for f, _ in runs.steady_rates(b)):.0f}"
    # the lesson gives the steady rate where the rule tells it from the short runs'; where it does not, it gives no
    # third figure and says so
    said = ("after seconds of load, not told apart from those" if "steady not told apart" in s.outcome
            else f"{steady} after seconds of load,")
    assert said in s.lesson, (s.outcome, s.lesson)
    assert f"{steady} (from " in s.text and "at steady state" in s.text
    assert "roofline.md#the-fastest-forward-at-b1-h16-s8192-d128" in s.text  # the section that folds the steady rate
    # the same figure as the roofline page's steady sentence: one number for it
    assert f"**{steady} TFLOP/s**" in registry.expand(build(), "steady", [])
    # whether the rule tells it from the short runs' rate is said, not left to the reader
    assert re.search(r"After seconds of load it runs at \d+ TFLOP/s, (below|above|not told apart from) the short runs'",
                     s.text)


def test_a_steady_rate_told_apart_from_the_short_runs_is_said_below_them(tmp_path):
    flip = CLAIMS["rates"].flips("fa4")[0]
    assert flip.file == "run-steady.json"
    folder = tmp_path / "captures"
    shutil.copytree(store.CAPTURES, folder)
    data = json.loads((folder / flip.file).read_text())
    flip.change(data)
    (folder / flip.file).write_text(json.dumps(data))
    s = check(build(folder), "rates", "fa4")
    assert s.outcome.endswith("steady lower") and "TFLOP/s, below the short runs' rate" in s.text


# ---- 3. the counter the verdict reads is in the table beside it ---------------------------------------------

def test_the_counters_table_shows_the_throughput_its_verdicts_and_the_lesson_read():
    b = build()
    table = registry.expand(b, "counters-roofline", [])
    said = check(b, "hopper-compute-bound").text
    cited = re.findall(r"(\d+\.\d) % \([^)]*'s SM throughput\)", said) + re.findall(r"at most (\d+\.\d) %", said)
    assert len(cited) >= 3
    for figure in cited:  # every throughput the claim cites is a cell of the table
        assert re.search(rf"\| {re.escape(figure)} % / \d+\.\d % \|", table), figure
    assert "SM / memory throughput" in table and f"{counters.BOUND_AT:g} % threshold, not the tensor pipe" in table
    page = (DOCS / "roofline.md").read_text()
    before = page.split('!!! lesson "The lesson"\n    <!-- attnprof: say hopper-compute-bound -->')[0].rstrip().rsplit("\n\n", 1)[-1]
    assert "tensor pipe" not in before and "SM throughput, which the verdict reads" in before


# ---- 4. the threshold of "small" is said with what it is ----------------------------------------------------

@pytest.mark.parametrize("index", range(3))
def test_the_one_call_threshold_is_said_plainly_in_every_outcome(tmp_path, index):
    """cuDNN's one call against its queued time: on the records, and for each flip's outcome (apart, near,
    small), the 25 % is named as the most this site calls a small launch, never a bare number."""
    flip = CLAIMS["queued-vs-one-call"].flips("cudnn")[index]
    folder = tmp_path / "captures"
    shutil.copytree(store.CAPTURES, folder)
    data = json.loads((folder / flip.file).read_text())
    flip.change(data)
    (folder / flip.file).write_text(json.dumps(data))
    for b in (build(), build(folder)):
        text = check(b, "queued-vs-one-call", "cudnn").text
        assert f"{pct(decide.QUEUED_NEAR)}, the largest extra this site still calls a small launch" in text, text
        assert not re.search(rf"(under|than) {pct(decide.QUEUED_NEAR)} \(", text)


# ---- 5. each measured copy rate names its clock -------------------------------------------------------------

def test_one_copy_rate_per_gpu_and_every_page_gives_it_with_its_clock():
    """The hardware run measures the device copy, and every page reads that one rate: at a glance, the in-place
    chapter's arithmetic, the roofline's memory roof and ridge, the decode table's shares; each says its SM clock."""
    b = build()
    hw = b.run("hardware")
    rate, at = f"{hw['copy_gbs']:,.0f} GB/s", runs.clock_condition(hw["clocks"])
    assert runs.copy_rate(b) == hw["copy_gbs"]
    hardware = registry.expand(build(), "hardware", [])
    assert f"{hw['copy_gbs'] / 1000:.2f} TB/s (copy, read + write, {runs.HARDWARE['copy_of_peak'](hw)}, {at})" in hardware
    assert f"({rate}, bytes read + written, {at})" in check(build(), "copy-cost").text
    assert re.search(rf"\*\*{rate}\*\* \| [^|]*{re.escape(at)}", registry.expand(build(), "ceilings", []))
    assert f"{rate} at {at}" in registry.expand(build(), "decode", [])
    ridge = b.run("ceilings")["matmul_tflops"] * 1e3 / hw["copy_gbs"]
    assert f"ridge point of the measured ceilings is {ridge:.0f} FLOP per byte" in registry.expand(build(), "counters-roofline", [])
