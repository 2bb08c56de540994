"""bench.interleaved: the arms a page compares, measured in rounds, each arm once per round in an order
shuffled from a recorded seed, the clock read before and after each round, a round at a throttled clock dropped
for every arm, never all of them (fake arms, a fake clock)."""
import random

import pytest

torch = pytest.importorskip("torch")  # bench imports torch at the top

from attnprof.measure import bench, clock  # noqa: E402


def recording(names):
    """Fake arms that note, in one list, the order they were measured in; each returns one sample."""
    order = []
    arms = {n: (lambda n=n: order.append(n) or {"x_us": float(len(order))}) for n in names}
    return arms, order


def fake_clock(mhz: list):
    """A reader giving these SM clocks in turn, at a maximum of 1980 MHz."""
    readings = iter(mhz)
    return lambda: {"sm_mhz": next(readings), "max_sm_mhz": 1980, "temperature_c": 40, "power_w": 300.0,
                    "throttle_reasons": 4}


def rounds_of(order, names):
    return [order[i:i + len(names)] for i in range(0, len(order), len(names))]


def test_every_arm_is_measured_once_in_every_round():
    names = ["a", "b", "c", "d"]
    arms, order = recording(names)
    out = bench.interleaved(arms, 6, seed=3, reader=fake_clock([1980] * 12), warm=False)
    assert all(sorted(r) == names for r in rounds_of(order, names)) and len(order) == 24
    for n in names:
        assert len(out[n]["x_us"]) == out[n]["rounds"] == 6 and out[n]["throttled"] == 0 and out[n]["seed"] == 3


def test_the_order_is_shuffled_and_follows_from_the_seed():
    names = [f"arm{i}" for i in range(6)]
    first, again, other = (recording(names) for _ in range(3))
    for (arms, _), seed in zip((first, again, other), (11, 11, 12)):
        bench.interleaved(arms, 8, seed=seed, reader=lambda: None, warm=False)
    assert first[1] == again[1] and first[1] != other[1]  # the same seed, the same order
    assert len({tuple(r) for r in rounds_of(first[1], names)}) > 1  # not one fixed order
    rng = random.Random(11)  # and it is random.Random(seed)'s shuffle of the arms, round by round
    expected = []
    for _ in range(8):
        shuffled = list(names)
        rng.shuffle(shuffled)
        expected += shuffled
    assert first[1] == expected


def test_a_fresh_seed_is_recorded_when_none_is_given():
    arms, order = recording(["a", "b", "c"])
    out = bench.interleaved(arms, 4, reader=lambda: None, warm=False)
    replay, again = recording(["a", "b", "c"])
    bench.interleaved(replay, 4, seed=out["a"]["seed"], reader=lambda: None, warm=False)
    assert isinstance(out["a"]["seed"], int) and again == order


def test_a_round_at_a_low_clock_before_or_after_it_is_dropped_for_every_arm_and_counted(monkeypatch):
    """NVBench's practice: the clock read around every round; a round with a reading below 75 % of the maximum is
    dropped and counted, and the next waits THROTTLE_RECOVERY_S for the clock to recover; each kept round's lower
    reading stands beside its samples."""
    slept = []
    monkeypatch.setattr(bench.time, "sleep", slept.append)
    names = ["a", "b", "c"]
    arms, order = recording(names)
    # (before, after) each round: 1400 before round 1 and 1000 after round 3 are below 75 % of 1980 (1485); 1485 is not
    mhz = [1980, 1980, 1400, 1980, 1970, 1975, 1980, 1000, 1485, 1490]
    out = bench.interleaved(arms, 5, seed=1, reader=fake_clock(mhz), warm=False)
    assert len(order) == 15 and slept == [bench.THROTTLE_RECOVERY_S] * 2  # every round measured every arm
    kept = [i for i, r in enumerate(rounds_of(order, names)) if i not in (1, 3)]
    for n in names:
        assert out[n]["rounds"] == 3 and out[n]["throttled"] == 2 and len(out[n]["x_us"]) == 3
        # the samples kept are those of rounds 0, 2 and 4 (each sample is its place in the order)
        assert out[n]["x_us"] == [float(1 + 3 * i + rounds_of(order, names)[i].index(n)) for i in kept]
        assert out[n]["clocks"] == {"sm_mhz_min": 1485, "sm_mhz_median": 1972.5, "sm_mhz_max": 1980,
                                    "sm_mhz_limit": 1980, "temperature_c_max": 40, "power_w_max": 300.0,
                                    "throttle_reasons": 4, "sm_mhz_each": [1980, 1970, 1485]}


def test_a_run_never_fails_for_its_clock_and_a_ceiling_keeps_every_round(monkeypatch):
    """Where every round ran below the threshold, none is dropped: the samples stand, at the clock `clocks` gives.
    A rate at the clock the GPU holds (drop=False, the ceilings) keeps every round, with no pause. An arm that
    fails is an error for itself alone."""
    slept = []
    monkeypatch.setattr(bench.time, "sleep", slept.append)
    arms, _ = recording(["a", "b"])
    out = bench.interleaved(arms, 2, seed=1, reader=fake_clock([300, 310, 320, 330]), warm=False)
    for n in "ab":
        assert out[n]["rounds"] == 2 and out[n]["throttled"] == 0 and len(out[n]["x_us"]) == 2
        assert out[n]["clocks"]["sm_mhz_each"] == [300, 320] and out[n]["clocks"]["sm_mhz_max"] == 330
    arms, _ = recording(["a", "b"])
    capped = bench.interleaved(arms, 2, seed=1, reader=fake_clock([1980, 1400, 1450, 1460]), warm=False, drop=False)
    assert capped["a"]["rounds"] == 2 and capped["a"]["throttled"] == 0 and capped["a"]["clocks"]["sm_mhz_each"] == [1400, 1450]
    assert len(slept) == 2  # the two dropped-at-a-low-clock rounds of the first run only

    def oom():
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1 GiB")
    arms, order = recording(["a", "b"])
    out = bench.interleaved({**arms, "c": oom}, 3, seed=2, reader=lambda: None)
    assert out["c"] == {"error": "OutOfMemoryError: CUDA out of memory. Tried to allocate 1 GiB"}
    assert out["a"]["rounds"] == 3 and len(out["a"]["x_us"]) == 3 and len(order) == 2 + 6  # a warm round, then 3
    assert "sm_mhz_each" not in out["a"]["clocks"]  # NVML could not say


def test_without_nvml_the_clock_is_none_and_settle_takes_one_step():
    assert clock.read() is None  # no CUDA GPU here
    assert bench.clocks([None, None]) == bench.NO_CLOCKS
    calls = []
    settled = bench.settle(lambda: calls.append(1), reader=lambda: None, step_s=0.01)
    assert calls and settled["settled"] is False and settled["settle_s"] > 0


def test_settle_stops_once_the_clock_stops_falling():
    calls = []
    settled = bench.settle(lambda: calls.append(1), reader=fake_clock([1980, 1900, 1800, 1800, 1810, 1700]),
                           step_s=0.001)
    assert settled["settled"] is True  # after 1980, 1900, 1800: 1800 and 1810 did not fall
    bounded = bench.settle(lambda: None, reader=fake_clock([2000 - i for i in range(10**6)]), max_s=0.05, step_s=0.001)
    assert bounded["settled"] is False and 0.05 <= bounded["settle_s"] < 1


def _timing_row(**clocks):
    return {"stage": "flash", "shape": [8, 16, 1024, 64], "dtype": "bf16", "calls": 20, "rounds": 24, "throttled": 1,
            "seed": 12345, "one_call_us": [300.0] * 48, "one_call_wall_us": [310.0] * 48,
            **{k: [200.0] * 24 for k in ("back_to_back_us", "enqueue_us", "enqueue_late_us", "graph_us")},
            "profiled": {"device_us": [190.0] * 3, "cpu_us": [30.0] * 3, "span_us": [195.0] * 3, "ops": [1] * 3},
            "clocks": {**bench.NO_CLOCKS, **clocks}}


def test_a_run_in_rounds_is_wellformed():
    from attnprof.analysis import wellformed
    at = {"sm_mhz_min": 1755, "sm_mhz_median": 1980, "sm_mhz_max": 1980, "sm_mhz_limit": 1980,
          "temperature_c_max": 51, "power_w_max": 512.3, "throttle_reasons": 5}
    run = {"device": "NVIDIA H200", "result": {"rows": [_timing_row(**at)]}}
    assert wellformed.problem(run) is None
    cpu = {"device": "NVIDIA H200", "result": {"rows": [_timing_row()]}}  # NVML could not say
    assert wellformed.problem(cpu) is None
    for field, value in (("rounds", -1), ("throttled", 1.5), ("clocks", [1980])):
        bad = {"result": {"rows": [{**_timing_row(**at), field: value}]}}
        assert wellformed.problem(bad).startswith(f"result.rows[0].{field} is "), field
    bad = {"result": {"rows": [_timing_row(**{**at, "power_w_max": -3})]}}
    assert wellformed.problem(bad).startswith("result.rows[0].clocks.power_w_max is -3")


def test_the_fastest_run_and_the_backward_ranking_measure_in_rounds_on_a_cpu(monkeypatch):
    """At a tiny shape on a CPU: each path's row keeps the fields the pages and counts read, its samples those
    of its rounds; a path that cannot run is a row that says why, and the others go on."""
    from attnprof.measure import backward, repeat, sweep
    rows = repeat.measured(sweep.fastest, (1, 2, 32, 16), ["flash", "cudnn"], ["flash"], 4, 5, 9)
    assert [(r["path"], r["layout"]) for r in rows] == [("flash", "BHSD"), ("cudnn", "BHSD"), ("flash", "BSHD")]
    assert "unavailable" in rows[1]  # no cuDNN on a CPU
    for r in (rows[0], rows[2]):
        assert (r["rounds"], r["throttled"], r["seed"], r["back_to_back_calls"]) == (5, 0, 9, 4)
        assert len(r["back_to_back_us_each"]) == 5 and len(r["times_us"]) == r["reps"] and r["reps"] % 5 == 0
        assert r["tflops_back_to_back"] > 0 and r["median_us"] > 0

    monkeypatch.setattr(backward, "select", lambda **facts: ["naive", "math"])
    ranked = repeat.measured(backward.ranking, (1, 2, 32, 16), "bf16", backward.ROUNDS, 4)
    for r in ranked["rows"]:
        assert len(r["event_times_us"]) == 50 and len(r["backward_device_us_each"]) == 3, r
        assert (r["rounds"], r["throttled"], r["seed"]) == (backward.ROUNDS, 0, 4)


CLOCKS = {"sm_mhz_min": 1755, "sm_mhz_median": 1980, "sm_mhz_max": 1980, "sm_mhz_limit": 1980,
          "temperature_c_max": 50, "power_w_max": 400.0, "throttle_reasons": 1}


def _rekeyed(tmp_path, name, edit):
    """A captures folder like the committed one (links), with run `name`'s every process edited as a run in
    rounds makes it, its figures derived again and its key, code and settings those of the code now."""
    import json
    from attnprof.analysis import derived, records
    from attnprof.model import store
    for f in store.CAPTURES.iterdir():
        if f.name != f"run-{name}.json":
            (tmp_path / f.name).symlink_to(f)
    r = json.loads((store.CAPTURES / f"run-{name}.json").read_text())
    r["result"] = derived.derive(name, edit(r["result"]))
    if "repeats" in r:
        r["repeats"] = [derived.derive(name, edit(x)) for x in r["repeats"]]
    r.update(key=records.RUN.key(f"run-{name}"), code=records.RUN.code(f"run-{name}"),
             settings=records.RUN.settings(f"run-{name}"))
    (tmp_path / f"run-{name}.json").write_text(json.dumps(r))
    return records.status(f"run-{name}", tmp_path)


def test_a_run_in_rounds_passes_check(tmp_path):
    """The committed timing run cut to what 25 rounds with one dropped keep, with its rounds, throttled count,
    clocks and seed, under the code's key now: check finds nothing."""
    def timing(res):
        res["reps"] = 25
        for i, row in enumerate(r for r in res["rows"] if "error" not in r):
            for k in ("back_to_back_us", "enqueue_us", "enqueue_late_us", "graph_us"):
                row[k] = row[k][:24]
            row["one_call_us"], row["one_call_wall_us"] = row["one_call_us"][:48], row["one_call_wall_us"][:48]
            row.update(rounds=24, throttled=1, clocks=CLOCKS, seed=7 + i)
        return res
    (tmp_path / "timing").mkdir()
    assert _rekeyed(tmp_path / "timing", "timing", timing) is None


def test_together_measures_named_forwards_in_rounds_as_measure_measures_one():
    """bench.together: every forward once a round in a shuffled order, as many one-call samples as fit its
    budget split over the rounds, one back-to-back run a round, under its own context; out of memory a result."""
    calls, entered = [], []

    class Context:
        def __init__(self, name):
            self.name = name

        def __enter__(self):
            entered.append(self.name)

        def __exit__(self, *exc):
            return False

    def oom():
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 64 GiB")
    forwards = {"a": lambda: calls.append("a"), "b": lambda: calls.append("b"), "big": oom}
    out = bench.together(forwards, calls=3, rounds=4, seed=7, contexts={"b": lambda: Context("b")}, budget_us=1.0)
    assert list(out) == ["a", "b", "big"] and out["big"] == {"oom": True}
    for name in ("a", "b"):
        m = out[name]
        assert m["reps"] == 4 * max(1, 5 // 4) and len(m["times_us"]) == m["reps"]  # adaptive_reps' floor of 5
        assert len(m["back_to_back_us_each"]) == 4 == m["rounds"] and m["back_to_back_calls"] == 3
        assert m["seed"] == 7 and m["throttled"] == 0 and m["median_us"] > 0
    assert entered.count("b") >= 4 + 1  # its budget, each round, and its peak memory under its context
    assert calls.count("a") == calls.count("b")


def test_a_forward_out_of_memory_when_its_peak_is_taken_is_its_own_result(monkeypatch):
    """The peak memory, taken after the rounds, fails for one forward alone: the others keep their samples."""
    def late():
        return None

    def peak(forward):
        if forward is late:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 64 GiB")
        return 0
    monkeypatch.setattr(bench, "peak_extra_bytes", peak)
    out = bench.together({"fine": lambda: None, "late": late}, calls=1, rounds=2, seed=1, budget_us=1.0)
    assert out["late"] == {"oom": True} and out["fine"]["rounds"] == 2 and out["fine"]["peak_extra_bytes"] == 0


def test_without_one_call_together_times_back_to_back_only():
    """The sweep's way (one_call=False): each round one back-to-back run, no one-call samples and no budget
    spent on them; every arm still measured in each round, a forward that runs out of memory still OOM."""
    calls = []

    def oom():
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 64 GiB")
    forwards = {"a": lambda: calls.append("a"), "b": lambda: calls.append("b"), "big": oom}
    out = bench.together(forwards, calls=3, rounds=4, seed=7, one_call=False)
    assert out["big"] == {"oom": True}
    for name in ("a", "b"):
        m = out[name]
        assert not {"times_us", "median_us", "reps"} & set(m), m
        assert len(m["back_to_back_us_each"]) == 4 == m["rounds"] and m["back_to_back_calls"] == 3
        assert m["back_to_back_us"] > 0 and m["peak_extra_bytes"] is None  # no GPU here: no peak memory
    # per round one untimed call and the 3 timed ones (without a GPU no peak memory is taken): none timed alone
    assert calls.count("a") == calls.count("b") == 4 * (1 + 3)


def test_the_sweep_times_back_to_back_only_and_its_rows_hold_what_the_checks_ask():
    """sweep() end to end on this machine's CPU, at two tiny shapes: each row keeps a back-to-back run a
    round and no one-call samples, its rate is derived from them, and the record checks find nothing."""
    from attnprof.measure import sweep
    run = sweep.sweep(paths=["flash", "inplace"], seq_lens=(32, 64), head_dims=(16,), tokens=128, heads=2, seed=3)
    next(run)  # prepared
    with pytest.raises(StopIteration) as done:
        next(run)
    rows = done.value.value
    assert [(r["path"], r["shape"][2]) for r in rows] == [("flash", 32), ("inplace", 32), ("flash", 64), ("inplace", 64)]
    for r in rows:
        assert not {"times_us", "median_us", "reps", "tflops"} & set(r), r.keys()
        assert len(r["back_to_back_us_each"]) == r["rounds"] == bench.TOGETHER_ROUNDS - r["throttled"]
        assert r["tflops_back_to_back"] > 0
