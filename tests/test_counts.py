"""The sample counts `check` holds records to (analysis/counts.py) are those the measuring code takes: a
change of a count in attnprof/measure/ without one in counts.py fails here, not silently in `check`."""
import inspect

import pytest

from attnprof.analysis import counts

torch = pytest.importorskip("torch")  # the measuring code imports torch at the top


def test_the_stream_and_steady_counts_are_the_measuring_codes_constants():
    from attnprof.measure import steady, timing
    assert counts.STREAM == {"calls": timing.CALLS, "reps": timing.REPS, "one_call_reps": timing.ONE_CALL_REPS}
    assert counts.STEADY == {"repeats": steady.REPEATS, "calls": steady.CALLS, "runs": steady.RUNS}


def test_the_adaptive_and_literal_counts_are_the_measuring_codes():
    from attnprof.measure import bench, graphs, sweep
    defaults = inspect.signature(bench.adaptive_reps).parameters
    assert counts.ADAPTIVE_REPS == (defaults["lo"].default, defaults["hi"].default)
    assert f"back_to_back_each(forward, calls=calls, reps={counts.BACK_TO_BACK_RUNS})" in inspect.getsource(bench.measure)
    ceilings = inspect.getsource(sweep.ceilings) + inspect.getsource(sweep.hardware)
    assert ceilings.count("reps=") == ceilings.count(f"reps={counts.EACH})") == 6
    source = inspect.getsource(graphs)
    assert f"time_forward(forward, reps={counts.GRAPHS['times_us']}," in source
    assert f"back_to_back_each(forward, calls=20, reps={counts.GRAPHS['back_to_back_us_each']})" in source
