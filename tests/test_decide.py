"""The one decision rule (analysis/decide.py): ranges across repeats, told apart or not, near a threshold."""
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
    rate = r.scaled(lambda t: 100 / t)
    assert rate.lo < rate.median < rate.hi and rate.lo == pytest.approx(100 / 12)


def test_the_methods_page_states_the_rule_with_the_numbers_the_code_applies(monkeypatch):
    from attnprof.analysis import counters
    from attnprof.site.build import Build
    from attnprof.site.pieces import guides
    assert "*not told apart*" in guides.decision_guide(Build(problems={}))
    monkeypatch.setattr(decide, "MARGIN", 0.05)
    monkeypatch.setattr(counters, "BAND", 1.5)
    said = guides.decision_guide(Build(problems={}))
    assert "at least 5 %" in said and "±1.5 points" in said


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
