"""The one decision rule (analysis/decide.py): ranges across repeats, told apart or not, near a threshold."""
import math
import re

import pytest

from attnprof.analysis import decide


def test_a_range_is_across_repeats_medians_or_one_process_p10_p90():
    r = decide.of([[10, 11, 12], [13, 14, 15], [9, 10, 11]])
    assert (r.median, r.lo, r.hi, r.n, r.basis) == (11, 10, 14, 3, decide.REPEATS)
    one = decide.of([[float(x) for x in range(1, 12)]])
    assert (one.median, one.lo, one.hi, one.basis) == (6, 2, 10, decide.SAMPLES)
    with pytest.raises(ValueError, match="no repeats"):
        decide.of([[], []])


def test_overlapping_ranges_or_a_gap_under_the_margin_are_not_told_apart():
    a, b = decide.of_repeats([100, 101, 102]), decide.of_repeats([103, 104, 105])
    assert decide.order(a, b) == 0  # no overlap, but the medians are 3 apart of 104: under 3 %
    c = decide.of_repeats([110, 111, 112])
    assert decide.order(a, c) == -1 and decide.order(c, a) == 1 and decide.told_apart(a, c)
    wide = decide.of_repeats([95, 111, 125])
    assert decide.order(a, wide) == 0  # 10 % apart, but the ranges overlap


def test_a_ranking_groups_what_cannot_be_told_apart_even_through_a_neighbour():
    rows = {"a": decide.of_repeats([100, 101]), "b": decide.of_repeats([101, 140]),
            "c": decide.of_repeats([130, 131]), "d": decide.of_repeats([200, 201])}
    # b overlaps a and c, so a, b and c share a group though a and c alone are told apart
    assert decide.ranking(rows) == [["a", "b", "c"], ["d"]]
    assert decide.ranking({"x": decide.of_repeats([1, 1.01]), "y": decide.of_repeats([2, 2.02])}) == [["x"], ["y"]]


def test_a_value_within_the_band_of_a_threshold_is_near_it():
    assert decide.against(60.5, 60, 2) == "near" and decide.against(59.8, 60, 2) == "near"
    assert decide.against(63, 60, 2) == "above" and decide.against(50, 60, 2) == "below"
    assert decide.against(decide.of_repeats([61, 66]), 60, 0.5) == "above"
    assert decide.against(decide.of_repeats([59, 66]), 60, 0.5) == "near"


def test_a_range_prints_its_median_then_its_span_and_says_how_it_was_had():
    r = decide.of_repeats([10.0, 12.0, 11.0])
    assert r.text(lambda x: f"{x:.1f}") == "11.0 [10.0–12.0]"
    assert r.text(lambda x: f"{x:.1f} µs") == "11.0 µs [10.0–12.0 µs]"
    assert r.text(lambda x: f"{x:.1f}\xa0µs") == "11.0\xa0µs [10.0–12.0\xa0µs]"  # as text.us writes a time
    assert r.text(lambda x: f"{x / 1000:.3f}\xa0ms" if x >= 11 else f"{x:.1f}\xa0µs") == "0.011\xa0ms [10.0\xa0µs–0.012\xa0ms]"
    assert "3 separate processes" in r.how
    below = decide.of_repeats([-1.1, 28.5, 20.0])  # a difference whose range starts below zero
    assert below.text(lambda x: f"{x:.1f} µs") == "20.0 µs [−1.1 to 28.5 µs]"  # not "−1.1–28.5", a subtraction
    rate = r.scaled(lambda t: 100 / t)
    assert rate.lo < rate.median < rate.hi and rate.lo == pytest.approx(100 / 12)


def test_the_methods_page_states_the_rule_with_the_numbers_the_code_applies(monkeypatch):
    from attnprof.analysis import counters
    from attnprof.site.build import Build
    from attnprof.site.pieces import guides
    assert "*not told apart*" in guides.decision_guide(Build(problems={}))
    monkeypatch.setitem(decide.MARGINS, decide.ONE_CALL, {decide.LAUNCH_BOUND: decide.Margin(0.07, 0.61),
                                                          decide.GPU_BOUND: decide.Margin(0.03, 0.19)})
    monkeypatch.setattr(counters, "BAND", 1.5)
    said = guides.decision_guide(Build(problems={}))
    assert "| one call | 7 % | 61 % | 3 % | 19 % |" in said and "±1.5 points" in said
    paired, apart = guides.aa_counts(Build(problems={}))
    assert f"in {paired.count(0)} of {len(paired)} cases" in said and len(paired) >= 24 and len(apart) > 700


def paired(medians, method=decide.ONE_CALL, run="run-x"):
    """A range of one run's processes with these per-process medians (each process's samples are its median)."""
    return decide.of([[m] * 3 for m in medians], method, run)


def test_two_paths_of_one_run_are_told_apart_only_when_every_process_puts_one_ahead_by_the_paired_margin():
    m = decide.margins_of(decide.ONE_CALL).paired
    fast, slow = paired([100, 130, 90]), paired([100 * (1 + 2 * m), 130 * (1 + 2 * m), 90 * (1 + 2 * m)])
    # the processes disagree by 40 % among themselves, yet each one puts `slow` behind by twice the margin
    assert decide.paired(fast, slow) and decide.order(fast, slow) == -1 and decide.order(slow, fast) == 1
    one_within = paired([100 * (1 + 2 * m), 130 * (1 + 2 * m), 90 * (1 + m / 2)])
    assert decide.order(fast, one_within) == 0  # one process within the margin: not told apart
    other_run = decide.of([[x] * 3 for x in slow.per], decide.ONE_CALL, "run-y")
    assert not decide.paired(fast, other_run)  # not measured together: the ranges overlap, not told apart
    assert decide.order(fast, other_run) == 0


def test_figures_from_different_processes_must_clear_the_methods_margin_between_processes():
    a = decide.of([[100, 101, 102]], decide.DEVICE)
    b = decide.of([[125, 126, 127]], decide.DEVICE)
    assert decide.order(a, b) == -1  # device time moves by ~10 % at most between processes: 25 % decides
    one = lambda xs: decide.of([xs], decide.ONE_CALL)  # one call moves by up to ~2× between processes
    assert decide.order(one([100, 101, 102]), one([125, 126, 127])) == 0
    assert decide.order(one([100, 101, 102]), one([300, 301, 302])) == -1
    assert decide.margin(a, b) == decide.margins_of(decide.DEVICE).apart
    assert decide.margin(a, decide.of([[1.0]], decide.ENQUEUE)) == decide.margins_of(decide.ENQUEUE).apart  # the wider


def test_ranges_apart_but_held_together_by_the_margin_between_processes_say_why():
    """Two one-call ranges from separate processes that do not overlap, yet are not told apart: the margin that
    holds them is named, and the claim's words say why; overlapping, decided or paired, nothing is added."""
    from attnprof.site.claims.wording import held_together
    one = lambda xs, **kw: decide.of([xs], decide.ONE_CALL, **kw)
    a, b = one([100, 101, 102]), one([125, 126, 127])
    assert decide.held_by_margin(a, b) == decide.margins_of(decide.ONE_CALL).apart
    said = held_together(a, b)
    assert "own process" in said and f"{1 + decide.margins_of(decide.ONE_CALL).apart:.1f}×" in said
    assert held_together(a, one([101, 102, 103])) == ""  # the ranges overlap: they say it themselves
    assert held_together(a, one([300, 301, 302])) == ""  # told apart
    dev = lambda xs: decide.of([xs], decide.DEVICE)
    assert held_together(dev([100, 101, 102]), dev([125, 126, 127])) == ""  # device time's margin decides 25 %


def test_a_repeated_run_pools_every_sample_list_a_verdict_reads_from_the_same_processes():
    """The committed timing run: each row's back-to-back samples are pooled over the processes like its CPU
    enqueue samples (both come from the same loops), and the sweep's back-to-back median is taken again
    from its pooled samples."""
    import statistics
    from attnprof.site.build import Build, row
    build = Build()
    every = build.repeats("timing")
    assert len(every) > 1
    for r in build.run("timing")["rows"]:
        if "error" in r:
            continue
        parts = [row(rep["rows"], stage=r["stage"], shape=r["shape"]) for rep in every]
        for field in ("back_to_back_us", "enqueue_us", "graph_us", "one_call_us"):
            assert r[field] == [x for p in parts for x in p[field]], (r["stage"], r["shape"], field)
    fastest = build.run("fastest")
    assert all(r["back_to_back_us"] == statistics.median(r["back_to_back_us_each"]) for r in fastest
               if "back_to_back_us_each" in r)
    assert len(fastest[0]["back_to_back_us_each"]) == sum(len(rep[0]["back_to_back_us_each"])
                                                          for rep in build.repeats("fastest"))


# ---- ranges made from ranges (the section the claims use) ---------------------------------------------

def test_a_quotient_of_one_runs_ranges_is_each_processs_own():
    """Two ranges of the same run's processes: the quotient's range spans each process's own quotient, not
    one range's end over the other's start; from different runs, the cross-extreme bounds."""
    a = decide.of([[10.0, 10.0], [20.0, 20.0], [30.0, 30.0]], decide.ONE_CALL, "graphs")
    b = decide.of([[5.0, 5.0], [10.0, 10.0], [15.0, 15.0]], decide.ONE_CALL, "graphs")
    q = decide.quotient(a, b)
    assert (q.median, q.lo, q.hi, q.per, q.run, q.basis) == (2.0, 2.0, 2.0, (2.0, 2.0, 2.0), "graphs", decide.REPEATS)
    apart = decide.quotient(a, decide.of([[5.0, 5.0], [10.0, 10.0], [15.0, 15.0]], decide.ONE_CALL, "fastest"))
    assert (apart.lo, apart.hi, apart.per) == (10.0 / 15.0, 30.0 / 5.0, ())


def test_a_paired_difference_or_quotient_never_shows_its_median_outside_its_brackets():
    """The pooled medians' difference (what a reader subtracts from two tables) can fall outside the span of
    the processes' own differences: the range then reaches to it, and each process's own value is kept."""
    R = decide.Range
    a = R(506.7, 500.0, 512.0, 3, decide.REPEATS, decide.ONE_CALL, (500.0, 506.0, 512.0), "fastest")
    b = R(402.6, 402.7, 414.1, 3, decide.REPEATS, decide.BACK_TO_BACK, (402.7, 408.0, 414.1), "fastest")
    for combined, per in ((decide.difference(a, b), (97.3, 98.0, 97.9)), (decide.quotient(a, b), (500 / 402.7, 506 / 408, 512 / 414.1))):
        assert combined.per == pytest.approx(per) and combined.lo <= combined.median <= combined.hi
        assert combined.lo == pytest.approx(min(per)) and combined.hi == pytest.approx(combined.median)  # it reaches to it
        text = combined.text(lambda x: f"{x:.1f}")
        median, lo, hi = (float(x) for x in re.findall(r"[\d.]+", text))
        assert lo <= median <= hi, text


def test_a_difference_of_one_runs_ranges_is_each_processs_own():
    a = decide.of([[10.0], [20.0], [30.0]], decide.ONE_CALL, "fastest")
    b = decide.of([[4.0], [15.0], [29.0]], decide.BACK_TO_BACK, "fastest")
    d = decide.difference(a, b)
    assert (d.median, d.lo, d.hi, d.per, d.method) == (20.0 - 15.0, 1.0, 6.0, (6.0, 5.0, 1.0), None)
    one = decide.difference(decide.samples([10.0, 11.0, 12.0], decide.DEVICE), decide.point(1.0, decide.DEVICE))
    assert one.basis == decide.SAMPLES and one.method == decide.DEVICE and one.lo == decide.samples([10.0, 11.0, 12.0]).lo - 1.0


def test_a_threshold_is_held_through_against():
    assert decide.against(0.02, decide.ROTATIONS_AGREE_WITHIN, decide.POINT_BAND) == "below"
    assert decide.against(2.2, 2, decide.LINEAR_WITHIN * 2) == "above"  # superlinear beyond the band
    assert decide.against(2.05, 2, decide.LINEAR_WITHIN * 2) == "near"


# ---- rounds, regimes, and the rule where nothing differs and where every process shows a difference ------

def test_two_paths_timed_in_rounds_are_compared_round_by_round():
    """A run measured in rounds keeps each process's samples, and a process's ratio is the median of its rounds' own:
    a slow stretch of the host that starts between the two samples of a round moves one round, not the process. Its
    medians alone would put `a` above `b` in the first process, against every round but one."""
    a = [[10, 10, 10, 30, 30, 30, 30], [10] * 7, [20] * 7]
    b = [[11, 11, 11, 11, 33, 33, 33], [11] * 7, [22] * 7]
    ra, rb = (decide.of(x, decide.ENQUEUE, "run-timing") for x in (a, b))
    assert ra.rounds and decide.steps(ra, rb) == pytest.approx([math.log(10 / 11)] * 3)
    assert decide.order(ra, rb) == -1 < 0 == decide.order(*(decide.of(x, decide.ENQUEUE, "run-decode") for x in (a, b)))
    assert not decide.of(a, decide.DEVICE, "run-timing").rounds  # the profiler's samples are not taken in rounds
    uneven = decide.of([x + [x[-1]] for x in b], decide.ENQUEUE, "run-timing")  # not a sample a round alike
    assert decide.steps(ra, uneven) == pytest.approx([math.log(x / y) for x, y in zip(ra.per, uneven.per)])


def test_a_time_takes_the_margins_of_its_regime_or_the_wider_where_its_regime_is_not_known():
    by = decide.MARGINS[decide.BACK_TO_BACK]
    one = lambda xs, regime: decide.of([xs], decide.BACK_TO_BACK, regime=regime)
    gpu, launch, unknown = (one([100, 101, 102], g) for g in (decide.GPU_BOUND, decide.LAUNCH_BOUND, None))
    assert decide.margin(gpu, gpu) == by[decide.GPU_BOUND].apart < by[decide.LAUNCH_BOUND].apart
    assert decide.margin(launch, launch) == decide.margin(unknown, unknown) == decide.margin(gpu, launch) == max(
        m.apart for m in by.values())
    slower = one([120, 121, 122], decide.GPU_BOUND)  # 20 % apart: beyond a GPU-bound stream's move, not a launch-bound one's
    assert decide.order(gpu, slower) == -1 and decide.order(unknown, slower) == 0


def test_a_rows_regime_is_gpu_bound_only_where_the_gpu_took_longer_in_every_process():
    from attnprof.analysis import timing
    from attnprof.site.build import Build
    row = lambda gpu, cpu: {"graph_us": [gpu], "enqueue_us": [cpu]}
    assert timing.regime([row(50, 20), row(60, 25)]) == decide.GPU_BOUND
    assert timing.regime([row(50, 20), row(20, 25)]) == decide.LAUNCH_BOUND
    assert timing.regime([{"enqueue_us": [20]}]) is None
    found = [timing.find(rep["rows"], "cudnn", shape) for rep in Build(problems={}).repeats("timing")
             for shape in ("1x16x256x64", "1x16x8192x128")]
    assert [timing.regime(found[i::2]) for i in (0, 1)] == [decide.LAUNCH_BOUND, decide.GPU_BOUND]


def scaled(margins: dict, factor: float) -> dict:
    return {m: {g: decide.Margin(x.paired * factor, x.apart * factor) for g, x in by.items()}
            for m, by in margins.items()}


def test_where_nothing_differs_the_rule_decides_nothing_and_it_decides_what_every_process_shows(monkeypatch):
    """On the committed records. The A/A test: auto-dispatch against cuDNN, whose kernel auto runs, by every method,
    and each measurement against itself in another process, come out not told apart in at least aa.AT_LEAST of the
    cases. The power test: every comparison the committed history shows in every process (tools/drift.py shown),
    in place's CPU saving and cuDNN's enqueue above flash's among them, is decided the way it shows. Margins a tenth
    as wide fail the first; margins ten times as wide, the second."""
    from attnprof.analysis import aa
    from attnprof.site.build import Build
    from attnprof.site.pieces.guides import aa_counts
    from tools import drift
    build, shown = Build(problems={}), drift.shown()
    identical = list(aa.pairs("run-timing", build.repeats("timing"), aa.IDENTICAL))
    device = [decide.steps(ra, rb) for *_, ra, rb in identical if ra.method == decide.DEVICE]
    assert len(device) == 3 and all(abs(x) < math.log(1.02) for x in sum(device, []))  # one kernel: within 2 %
    assert {ra.method for *_, ra, _ in identical} == {decide.METHOD_OF[k[4][-1]] for k in shown} == set(decide.MARGINS)
    assert {("inplace", "naive", "enqueue_us"), ("cudnn", "flash", "enqueue_us"),
            ("cudnn", "flash", "device_us")} <= {(k[2], k[3], k[4][-1]) for k in shown}

    def aa_holds() -> bool:
        paired, apart = aa_counts(build)
        assert len(paired) == len(identical) and len(apart) > 700
        return all(orders.count(0) >= aa.AT_LEAST * len(orders) for orders in (paired, apart))

    def power_holds() -> bool:
        got = {tuple(k): decide.order(ra, rb) for *k, ra, rb in aa.pairs("run-timing", build.repeats("timing"))}
        return all(got[k] == side for k, side in shown.items())
    assert aa_holds() and power_holds()
    margins = decide.MARGINS
    monkeypatch.setattr(decide, "MARGINS", scaled(margins, 0.1))
    assert not aa_holds() and power_holds()
    monkeypatch.setattr(decide, "MARGINS", scaled(margins, 10))
    assert aa_holds() and not power_holds()


def test_the_margins_are_drifts_measured_on_the_regenerations_before_the_records_they_judge():
    """decide.MARGINS is what tools/drift.py computes now: a margin left stale by a new regeneration fails here.
    drift.py leaves out the regeneration whose records the working tree holds, so no margin judges its own records."""
    from tools import drift
    assert decide.MARGINS == drift.margins()
    _, _, used = drift.moves()
    judged = drift.judged()
    assert judged and judged not in used and len(used) >= 10
    assert judged in drift.moves(every=True)[2]


def test_not_told_apart_says_the_margin_it_held_the_two_to():
    """The words after "not told apart": the rule's condition with the margin it applied, the same whichever way
    the records fall (within it in some process or on both sides; medians within it or ranges overlapping)."""
    from attnprof.site.words import within
    m = round(100 * decide.margins_of(decide.ONE_CALL).paired)
    assert within(paired([100, 100, 100]), paired([101, 99, 150])) == (
        f"within ±{m} % of each other in some process, or ahead in some and behind in others (one call's margin "
        f"for paths timed in turns)")
    dev = lambda xs: decide.of([xs], decide.DEVICE)
    assert within(dev([100, 101, 102]), dev([101, 102, 103])) == within(dev([100, 101, 102]), dev([104, 105, 106])) == (
        f"their medians within ±{round(100 * decide.margins_of(decide.DEVICE).apart)} % of each other, or their "
        f"ranges overlapping (device time's margin between separate processes)")
    one = lambda xs: decide.of([xs], decide.ONE_CALL)  # a margin of 100 % or more is a factor
    assert f"medians within {1 + decide.margins_of(decide.ONE_CALL).apart:.1f}× of each other" in within(one([1]), one([2]))
