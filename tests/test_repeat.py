"""Independent repeats run in processes of their own (attnprof/measure/repeat.py)."""
import os

from attnprof.measure import repeat

PROBE = '''
import os, time

def timed(pause):
    """Prepares (sleeping `pause` seconds), yields, then measures for 0.2 s: the times of each."""
    start = time.time()
    time.sleep(float(pause))
    prepared = time.time()
    yield
    measuring = time.time()
    time.sleep(0.2)
    return {"pid": os.getpid(), "start": start, "prepared": prepared, "measuring": measuring, "measured": time.time()}

def fails():
    yield
    raise RuntimeError("no GPU here")
'''


def test_each_repeat_is_a_fresh_process_and_a_failing_one_says_why():
    results = repeat.in_processes("repeat.env", 2)
    assert len(results) == 2 and all(r["FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED"] == "1" for r in results)
    assert "FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED" not in os.environ  # set for the repeats' processes only
    (failed,) = repeat.in_processes("repeat.no_such_function", 1)
    assert set(failed) == {"error"} and "no_such_function" in failed["error"]


def test_the_repeats_prepare_together_and_measure_one_at_a_time(tmp_path, monkeypatch):
    (tmp_path / "probes").mkdir()
    (tmp_path / "probes" / "__init__.py").write_text("")
    (tmp_path / "probes" / "probe.py").write_text(PROBE)
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    runs = repeat.in_processes("probes.probe.timed", 3, "1.5")  # long enough for all three to start, on a busy host
    assert len({r["pid"] for r in runs}) == 3 and os.getpid() not in {r["pid"] for r in runs}
    assert max(r["prepared"] for r in runs) < min(r["measuring"] for r in runs)  # none measures while one prepares
    assert max(r["start"] for r in runs) < min(r["prepared"] for r in runs)  # they prepared at the same time
    for a, b in zip(runs, runs[1:]):  # one at a time, in order
        assert a["measured"] <= b["measuring"]
    with repeat.Started("probes.probe.timed", 3, "0", first=1) as started:  # each one names itself
        named = started.results()
    ids = started.identities
    assert [p["order"] for p in ids] == [1, 2, 3] and [p["pid"] for p in ids] == [r["pid"] for r in named]
    assert all(p["started"] <= r["start"] and p["measured"][0] <= r["measuring"] and r["measured"] <= p["measured"][1]
               for p, r in zip(ids, named))
    assert all(a["measured"][1] <= b["measured"][0] for a, b in zip(ids, ids[1:]))
    assert all(p["gpu"] == [None, None] for p in ids)  # no GPU here: NVML cannot say, and says nothing
    ok, failed = repeat.in_processes("probes.probe.timed", 1, "0"), repeat.in_processes("probes.probe.fails", 1)
    assert "measured" in ok[0] and failed == [{"error": "RuntimeError: no GPU here"}]


def test_a_generator_prepares_before_it_is_ready_and_a_plain_function_is_called_after():
    said = []

    def prepares():
        said.append("prepared")
        yield
        said.append("measured")
        return 42

    def plain():
        said.append("measured")
        return 7
    assert repeat.measured(prepares, ready=lambda: said.append("ready")) == 42
    assert said == ["prepared", "ready", "measured"]
    said.clear()
    assert repeat.measured(plain, ready=lambda: said.append("ready")) == 7 and said == ["ready", "measured"]
