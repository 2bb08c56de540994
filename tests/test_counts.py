"""The sample counts `check` holds records to (analysis/counts.py) are those the measuring code takes: a
change of a count in attnprof/measure/ without one in counts.py fails here, not silently in `check`."""
import inspect

import pytest

from attnprof.analysis import counts

torch = pytest.importorskip("torch")  # the measuring code imports torch at the top


def test_the_stream_and_steady_counts_are_the_measuring_codes_constants():
    from attnprof.measure import steady, timing
    assert counts.STREAM == {"calls": timing.CALLS, "reps": timing.REPS, "one_call_reps": timing.ONE_CALL_REPS}
    assert counts.TIMING == {"calls": timing.CALLS, "reps": timing.ROUNDS,
                             "one_call_reps": timing.ROUNDS * timing.ONE_CALL_PER_ROUND}
    assert counts.STEADY == {"repeats": steady.REPEATS, "calls": steady.CALLS, "runs": steady.RUNS}


def test_the_adaptive_and_literal_counts_are_the_measuring_codes():
    from attnprof.measure import bench, graphs, sweep
    defaults = inspect.signature(bench.adaptive_reps).parameters
    assert counts.ADAPTIVE_REPS == (defaults["lo"].default, defaults["hi"].default)
    assert f"back_to_back_each(forward, calls=calls, reps={counts.BACK_TO_BACK_RUNS})" in inspect.getsource(bench.measure)
    # the ceilings: one back-to-back run of each rate a round, in EACH rounds
    assert counts.EACH == sweep.CEILING_ROUNDS and "back_to_back_each(run, calls=calls, reps=1)" in inspect.getsource(sweep._each)
    assert counts.GRAPHS == {"times_us": graphs.TIMES, "back_to_back_us_each": graphs.RUNS}


def test_the_rounds_are_the_measuring_codes():
    """Each run measured in rounds (measure/bench.py interleaved) takes as many as counts.ROUNDS says, and
    every round an equal share of its samples."""
    from attnprof.measure import backward, bench, graphs, sweep, timing
    from attnprof.model.procedure import EVENT_REPS
    assert counts.ROUNDS == {"timing": timing.ROUNDS, "backward": backward.ROUNDS, "fastest": sweep.FASTEST_ROUNDS, "sweep": bench.TOGETHER_ROUNDS, "e2e": bench.TOGETHER_ROUNDS, "decode_step": bench.TOGETHER_ROUNDS,
                             "graphs": graphs.ROUNDS, "ceilings": sweep.CEILING_ROUNDS, "hardware": sweep.CEILING_ROUNDS}
    assert EVENT_REPS % backward.ROUNDS == 0 and graphs.TIMES % graphs.ROUNDS == graphs.RUNS % graphs.ROUNDS == 0
    assert counts.kept({"rounds": 23, "throttled": 2}, 50) == 46 and counts.kept({}, 50) == 50


def test_a_row_in_rounds_is_counted_by_the_rounds_it_kept():
    row = {"stage": "flash", "shape": [8, 16, 1024, 64], "rounds": 24, "throttled": 1, "one_call_us": [1.0] * 48,
           "one_call_wall_us": [1.0] * 48, **{k: [1.0] * 24 for k in counts.STREAM_SAMPLES},
           "profiled": {"cpu_us": [1.0] * 3}}
    result = {**counts.TIMING, "rows": [row]}
    assert counts.run_lines("timing", {"result": result}) == []
    row["graph_us"] = [1.0] * 25  # a dropped round's sample kept
    assert counts.run_lines("timing", {"result": result}) == [
        "result.rows[0].graph_us keeps 25 samples, but measure/timing.py's rounds (and those it kept) give 24"]
    row["graph_us"], row["throttled"] = [1.0] * 24, 0  # a dropped round not counted
    assert "make 24 rounds, but the run takes 25" in counts.run_lines("timing", {"result": result})[0]


def test_the_prose_counts_of_the_capture_procedure_are_its_constants():
    """Counts the chapters type by hand about how a capture is taken (profiled forwards, warm-up calls,
    CUDA-event samples, the backward's FLOP factor) are the constants the capture code uses: a change of
    one fails here, naming the page, rather than leaving the prose wrong."""
    import re
    from attnprof.model.procedure import BWD_FLOP_FACTOR, EVENT_REPS, SCHEDULE, WARMUP_CALLS
    from attnprof.model.snippets import ROOT
    words = {w: i for i, w in enumerate(("zero", "one", "two", "three", "four", "five", "six", "seven", "eight",
                                         "nine", "ten"))}
    number = lambda text: words[text.lower()] if text.lower() in words else float(text)
    profiled = SCHEDULE["active"] * SCHEDULE.get("repeat", 1)
    rules = [  # (what the prose says, the constant it must equal)
        (r"\b(\w+) profiled forwards", profiled), (r"profiles (\w+) forwards", profiled),
        (r"\b(\w+) forwards vary", profiled), (r"appeared in the (\w+) forwards", profiled),
        (r"\b(\w+) calls before profiling", WARMUP_CALLS), (r"times (\d+) forwards with CUDA events", EVENT_REPS),
        (r"the median of (\d+) forwards, each timed alone", EVENT_REPS), (r"as ([\d.]+) forwards rather", BWD_FLOP_FACTOR),
    ]
    seen, wrong = 0, []
    for page in sorted((ROOT / "docs").glob("*.md")):
        if page.name == "changelog.md":
            continue
        text = " ".join(page.read_text().split())
        for pattern, constant in rules:
            for m in re.finditer(pattern, text, flags=re.I):
                if m.group(1).lower() in words or re.fullmatch(r"[\d.]+", m.group(1)):
                    seen += 1
                    if number(m.group(1)) != constant:
                        wrong.append(f"{page.name}: '{m.group(0)}', but the code uses {constant}")
    assert seen >= 9 and not wrong, (seen, wrong)
