"""The timing vocabulary: statistics and verdicts from the committed raw samples of the H200 timing run,
the build failing on a sentence the data do not support, and the decode step writing its cache in place."""
import copy
import re
import json
import statistics

import markdown
import pytest

from attnprof.model import store
from attnprof.analysis import records
from attnprof.analysis import timing
from attnprof.site import extension
from attnprof.site.build import Build, FalseStatement
from attnprof.site.registry import expand
from attnprof.site.pieces import timing as timing_pieces

BUILD = Build(problems={})
ROWS = [r for r in BUILD.run("timing")["rows"] if "error" not in r]
S = timing.Stats


def kept(row: dict, total: int) -> int:
    """The samples of `total` a measurement in rounds keeps: those of the rounds it kept, an equal share a round."""
    return total // (row["rounds"] + row["throttled"]) * row["rounds"] if "rounds" in row else total


def test_every_row_has_raw_samples_of_every_method():
    every = BUILD.repeats("timing")
    for r in every:  # each process of the run
        rows = [row for row in r["rows"] if "error" not in row]
        assert len(rows) == len(r["rows"]) >= 14
        for row in rows:  # a run in rounds keeps the samples of the rounds it kept (kept)
            assert len(row["one_call_us"]) == kept(row, r["one_call_reps"])
            for key in ("back_to_back_us", "graph_us", "enqueue_us", "enqueue_late_us"):
                if key in row or "graph_error" not in row:  # a forward no CUDA graph records has no GPU-only samples
                    assert len(row[key]) == kept(row, r["reps"]), key
            assert len(row["profiled"]["cpu_us"]) == len(row["profiled"]["device_us"]) == 3
    for row, first in zip(ROWS, every[0]["rows"]):  # the pages read every process's samples at once
        assert len(row["one_call_us"]) == len(every) * len(first["one_call_us"])


def test_statistics_are_those_of_the_raw_samples():
    for row in ROWS:
        xs = sorted(row["back_to_back_us"])
        s = timing.stats(row["back_to_back_us"])
        assert s.median == statistics.median(xs) and s.n == len(xs)
        assert s.p10 == xs[round(0.1 * (len(xs) - 1))] and s.p90 == xs[round(0.9 * (len(xs) - 1))]
        assert s.p10 <= s.median <= s.p90


def test_quantile_is_nearest_rank_and_no_samples_is_one_clear_line():
    assert timing.quantile([5, 1, 3, 2, 4], 0.5) == 3 and timing.quantile([5, 1, 3, 2, 4], 0.9) == 5
    with pytest.raises(ValueError, match="recorded none"):
        timing.stats([])
    with pytest.raises(ValueError, match="sweep --only timing"):
        timing.verdict({"stage": "flash", "shape": [1, 2, 3, 4], "one_call_us": [1.0]})


def test_the_rule_has_four_outcomes():
    gpu, cpu = S(100, 99, 101, 30), S(20, 19, 21, 30)
    assert timing.stream_verdict(S(101, 100, 102, 30), gpu, cpu) == "GPU-bound"
    assert timing.stream_verdict(S(21, 20, 22, 30), S(8, 8, 8, 30), cpu) == "launch-bound"
    assert timing.stream_verdict(S(60, 59, 61, 30), S(59, 58, 60, 30), S(58, 40, 70, 30)) == "on the boundary"
    assert timing.stream_verdict(S(200, 199, 201, 30), gpu, cpu) == "neither"


def test_a_stream_near_the_cpus_pace_is_launch_bound_within_the_enqueues_paired_margin():
    """One process of a real timing run (flash at 1×16×256×64): back to back 7 % above its CPU enqueue and
    5× its GPU work. The host's pace moves that much within a process (decide.py's paired margin for the
    enqueue), so the stream runs at the CPU's pace; beyond that margin it is neither."""
    gpu = S(10.6, 10.5, 10.7, 30)
    assert timing.stream_verdict(S(52.0, 51.5, 52.5, 30), gpu, S(48.7, 48.4, 49.0, 30)) == "launch-bound"
    assert timing.stream_verdict(S(60.0, 59.5, 60.5, 30), gpu, S(48.7, 48.4, 49.0, 30)) == "neither"
    assert timing.stream_verdict(S(106.0, 105.5, 106.5, 30), S(100, 99.5, 100.5, 30), S(20, 19.9, 20.1, 30)) == "neither"


def test_tolerance_is_the_larger_of_the_floor_and_the_spreads():
    a, b = S(100, 99, 101, 30), S(104, 103, 105, 30)
    assert timing.tolerance(a, b) == pytest.approx(5.2)  # 5 % of 104 beats the spreads' 2
    assert timing.agree(a, b) and not timing.agree(a, S(110, 109, 111, 30))
    wide = S(100, 80, 120, 30)
    assert timing.tolerance(wide, S(125, 124, 126, 30)) == pytest.approx(21) and timing.agree(wide, S(120, 119, 121, 30))


def test_short_forwards_wait_for_the_cpu_and_long_ones_do_not():
    for row in ROWS:
        v = timing.verdict(row)
        assert v.back_to_back.median >= 0.95 * v.gpu_only.median  # a stream cannot beat its own GPU work by much
        assert v.profiler_inflation > 1  # the profiler adds CPU time
        if row["shape"] == [1, 16, 256, 64]:
            assert v.gpu_only.median < v.enqueue.median and v.stream != "GPU-bound"  # launch-bound, or on the boundary where the CPU is close
        if row["shape"] == [1, 16, 8192, 128]:
            assert v.gpu_only.median > v.enqueue.median and v.stream == "GPU-bound"


def _folder_with(tmp_path, run: dict):
    """A captures folder like the committed one, with this timing run in place of the committed one."""
    for f in store.CAPTURES.iterdir():
        if f.name != "run-timing.json":
            (tmp_path / f.name).symlink_to(f)
    (tmp_path / "run-timing.json").write_text(json.dumps(run))
    return tmp_path


def _render(page: str, folder) -> str:
    text = (store.ROOT / "docs" / page).read_text()
    return markdown.markdown(text, extensions=["admonition", extension.PiecesExtension(build=Build(folder, problems={}))])


def _every_row(run: dict, stage: str, shape: str):
    """The row of `stage` at `shape` in the run's result and in each of its further repeats."""
    return [timing.find(result["rows"], stage, shape) for result in [run["result"], *run.get("repeats", [])]]


def test_a_flipped_measurement_fails_the_sentence_that_rests_on_it(tmp_path):
    """memory-efficient's CPU enqueue samples at the post's shape made equal to its back-to-back ones, in every
    process of the run: the page's sentence that calls that stream GPU-bound must stop the build, naming itself."""
    run = records.load_run("timing")
    (tmp_path / "same").mkdir()
    assert "GPU-bound" in _render("launch-bound.md", _folder_with(tmp_path / "same", copy.deepcopy(run)))
    flipped = copy.deepcopy(run)
    for row in _every_row(flipped, "efficient", "8x16x1024x64"):
        row["enqueue_us"] = list(row["back_to_back_us"])  # the CPU now enqueues at the stream's pace
        assert timing.verdict(row).stream == "on the boundary"
    (tmp_path / "flipped").mkdir()
    folder = _folder_with(tmp_path / "flipped", flipped)
    with pytest.raises(extension.PieceError, match=r"verdict efficient 8x16x1024x64 stream.* says 'GPU-bound', "
                                                   r"the data say 'on the boundary'"):
        _render("launch-bound.md", folder)


def test_the_decode_step_writes_its_cache_in_place(monkeypatch):
    torch = pytest.importorskip("torch")
    from attnprof.measure import serving
    b, h, n, d = 2, 3, 7, 8
    k_cache, v_cache = (torch.randn(b, h, n + 1, d) for _ in range(2))
    q, k, v = (torch.randn(b, h, 1, d) for _ in range(3))
    expect = torch.nn.functional.scaled_dot_product_attention(
        q, torch.cat([k_cache[:, :, :n], k], 2), torch.cat([v_cache[:, :, :n], v], 2))
    address = k_cache.data_ptr(), v_cache.data_ptr()

    def no_cat(*args, **kwargs):
        raise AssertionError("the decode step concatenated the cache")
    monkeypatch.setattr(torch, "cat", no_cat)
    out = serving.decode_attend(q, k, v, k_cache, v_cache, n)
    monkeypatch.undo()
    assert (k_cache.data_ptr(), v_cache.data_ptr()) == address
    assert torch.equal(k_cache[:, :, n:n + 1], k) and torch.equal(v_cache[:, :, n:n + 1], v)
    torch.testing.assert_close(out, expect)
    torch.testing.assert_close(serving.concat_attend(q, k, v, k_cache, v_cache, n), expect)


def test_serving_records_keep_the_samples_their_medians_come_from():
    for name in ("decode", "decode_step", "e2e"):
        measured = []
        for r in BUILD.run(name):
            measured += [m for m in (r, r.get("concat"), r.get("sdpa_layer"), r.get("naive_layer"),
                                     r.get("sdpa_attention"), r.get("naive_attention")) if m and "times_us" in m]
        assert measured, name
        for m in measured:
            assert m["median_us"] == statistics.median(m["times_us"])
            assert m["back_to_back_us"] == statistics.median(m["back_to_back_us_each"])


def test_the_decode_cost_comes_from_the_in_place_step():
    """The cost rows read the step that writes the cache in place; concatenating K and V, which copies the
    whole cache each step, is never decidedly faster (by the one rule, across the run's processes: at batch 1
    both are launch-bound, and host noise moves each by more than their difference)."""
    from attnprof.analysis import decide
    from attnprof.site.build import across, row
    for r in BUILD.run("decode_step"):
        assert r["cache"] == "static, written in place"
        assert r["decode_tokens_per_s_per_layer"] == pytest.approx(r["batch"] / (r["back_to_back_us"] * 1e-6))
        step = lambda pick: across(BUILD, "decode_step", lambda res: pick(row(res, batch=r["batch"]))["back_to_back_us_each"])
        assert decide.order(step(lambda x: x["concat"]), step(lambda x: x)) >= 0, r["batch"]


def test_the_timing_run_measures_on_a_cpu_at_a_tiny_size():
    """The measuring code itself, at a size a CPU runs at once: every method's raw samples (a CPU has no
    CUDA graph, so no GPU-only samples), in rounds (no clock to read on a CPU: none dropped, clocks None), and
    the profiled forwards; the fields the analysis reads."""
    pytest.importorskip("torch")
    from attnprof.measure import repeat, timing as measure
    points = [("flash", (1, 2, 32, 16)), ("naive", (1, 2, 32, 16)), ("inplace_compiled", (1, 2, 16, 8))]
    run = repeat.measured(measure.timing, points, 4, 3, 2, 7)  # calls, rounds, one-call samples a round, seed
    assert (run["calls"], run["reps"], run["one_call_reps"]) == (4, 3, 6)
    assert [(r["stage"], tuple(r["shape"])) for r in run["rows"]] == points
    for row in run["rows"]:
        assert "error" not in row, row.get("error")
        assert len(row["one_call_us"]) == len(row["one_call_wall_us"]) == 6
        assert len(row["back_to_back_us"]) == len(row["enqueue_us"]) == len(row["enqueue_late_us"]) == 3
        assert all(t > 0 for t in row["enqueue_us"]) and "graph_us" not in row
        assert len(row["profiled"]["cpu_us"]) == 3 and row["calls"] == 4
        assert (row["rounds"], row["throttled"], row["seed"]) == (3, 0, 7)
        assert row["clocks"]["sm_mhz_median"] is None and row["clocks"]["throttle_reasons"] is None
        assert timing.stats(row["one_call_us"]).n == 6 and timing.stats(row["profiled"]["device_us"]).n == 3


def test_a_verdict_closer_than_the_margin_states_its_room_and_fails_an_expected_one(tmp_path):
    """flash's CPU enqueue at the post's shape brought within the 2× margin of its GPU-only time: the stream is
    still GPU-bound in every process, so the sentences say GPU-bound, with how much slower a CPU could enqueue
    and say the same (1.7×); a sentence that expects GPU-bound stops the build, since its own words need the margin."""
    run = records.load_run("timing")
    for row in _every_row(run, "flash", "8x16x1024x64"):
        gpu = timing.stats(row["graph_us"]).median
        row["enqueue_us"] = [0.6 * gpu] * len(row["enqueue_us"])  # the GPU now only 1.7× the CPU's enqueue
        row["enqueue_late_us"] = list(row["enqueue_us"])
        v = timing.verdict(row)
        assert v.stream == "GPU-bound" and not v.decided
    folder = _folder_with(tmp_path, run)
    build = Build(folder, problems={})
    with pytest.raises(FalseStatement, match="margin that decides it"):
        expand(build, "verdict", ["flash", "8x16x1024x64", "stream", "expect=GPU-bound"])
    one = expand(build, "verdict", ["flash", "8x16x1024x64", "stream"])
    assert one.startswith("**GPU-bound** in a stream (evidence: ") and "1.7× slower would give the same verdict" in one
    said = expand(build, "verdicts", ["8x16x1024x64"])
    assert "flash" in said.split("**")[0] and "are all **GPU-bound** in a stream" in said  # every process says it
    assert "a CPU that enqueues up to 1.7× slower would give the same verdict for every one of them" in said
    with pytest.raises(FalseStatement, match="margin that decides it: drop expect="):
        expand(build, "verdicts", ["8x16x1024x64", "expect=GPU-bound"])


def test_a_verdict_one_repeat_does_not_give_is_not_decided(tmp_path):
    """The timing run taken again in two more processes, one of which finds flash's CPU enqueueing at the
    stream's pace: the stream is GPU-bound in the first process, but not in all three, so a sentence that
    expects GPU-bound stops the build and the sentence over every stage says so, naming each repeat's verdict."""
    run = records.load_run("timing")
    first = timing.find(run["result"]["rows"], "flash", "8x16x1024x64")
    first["enqueue_us"] = [0.3 * x for x in first["graph_us"]]  # the GPU 3.3× the CPU's enqueue: decided here
    other = copy.deepcopy(run["result"])
    row = timing.find(other["rows"], "flash", "8x16x1024x64")
    row["enqueue_us"] = list(row["back_to_back_us"])
    run["repeats"] = [copy.deepcopy(run["result"]), other]
    (tmp_path / "differ").mkdir()
    build = Build(_folder_with(tmp_path / "differ", run), problems={})
    assert [v.stream for v in timing_pieces.repeated(build, "flash", "8x16x1024x64")] == [
        "GPU-bound", "GPU-bound", "on the boundary"]
    with pytest.raises(FalseStatement, match="not in every repeat"):
        expand(build, "verdict", ["flash", "8x16x1024x64", "stream", "expect=GPU-bound"])
    said = expand(build, "verdict", ["flash", "8x16x1024x64", "stream"])
    assert "not decided: its 3 separate processes said GPU-bound, GPU-bound and on the boundary" in said
    assert "median over 3 separate processes, and the range of their medians" in said
    assert re.search(r"flash is \*\*[^*]+\*\* overall, not in every process.*flash: [^;]+ in this run \(host CPU: .*?\), not decided: "
                     r"its 3 separate processes said GPU-bound, GPU-bound and on the boundary",
                     expand(build, "verdicts", ["8x16x1024x64"]))
    run["repeats"] = [copy.deepcopy(run["result"])] * 2  # every repeat agrees: decided again
    (tmp_path / "agree").mkdir()
    build = Build(_folder_with(tmp_path / "agree", run), problems={})
    assert expand(build, "verdict", ["flash", "8x16x1024x64", "stream", "expect=GPU-bound"]).startswith("**GPU-bound**")


def test_a_lone_call_below_the_gpu_only_time_is_said_by_the_one_rule(tmp_path):
    """cuDNN's one call at the long shape made 0.8× its GPU-only time in every process: decidedly shorter, said
    so; made equal to it: not told apart, and the sentence no longer calls it shorter."""
    for factor, says, never in ((0.8, "One call measured decidedly *shorter*", "not told apart"),
                                (0.999, "are not told apart", "decidedly")):
        run = records.load_run("timing")
        for r in [row for result in [run["result"], *run.get("repeats", [])] for row in result["rows"]]:
            if r["stage"] != "cudnn" or r["shape"] != [1, 16, 8192, 128]:
                r["one_call_us"] = [2 * x for x in r["graph_us"]][:len(r["one_call_us"])]  # elsewhere, well above
            else:
                r["one_call_us"] = [factor * x for x in r["graph_us"]][:len(r["one_call_us"])]
        (tmp_path / str(factor)).mkdir()
        said = expand(Build(_folder_with(tmp_path / str(factor), run), problems={}), "lone-call", [])
        assert says in said and never not in said and "cuDNN at 1×16×8192×128" in said, said


def test_pages_show_the_rows_a_run_in_rounds_holds_and_need_none_it_lacks(tmp_path):
    """The timing run as the rounds make it: every row with its rounds, throttled count and clocks, and rows for
    stages the committed run lacks, one of them without GPU-only samples (a forward that could not be recorded
    into a CUDA graph). The pages build; the table shows every row, that one without a verdict; the note says
    how the rounds went."""
    run = records.load_run("timing")
    clocks = {"sm_mhz_min": 1755, "sm_mhz_median": 1980, "sm_mhz_max": 1980, "sm_mhz_limit": 1980,
              "temperature_c_max": 50, "power_w_max": 400.0, "throttle_reasons": 1}
    for result in [run["result"], *run.get("repeats", [])]:
        naive = timing.find(result["rows"], "naive", "8x16x1024x64")
        for row in result["rows"]:
            row.update(rounds=25, throttled=1 if row is naive else 0, clocks=clocks, seed=1)
        for stage in ("inplace", "naive_reduce"):
            extra = copy.deepcopy(naive)
            extra["stage"] = stage
            if stage == "naive_reduce":
                del extra["graph_us"]
                extra["graph_error"] = "RuntimeError: cannot record"
            result["rows"].append(extra)
    folder = _folder_with(tmp_path, run)
    build = Build(folder, problems={})
    table = expand(build, "timing-table", [])
    assert "Naive attention, torch.compile reduce-overhead" in table and "no verdict (no CUDA graph)" in table
    assert "| in place |" in table
    assert "(3 dropped; the SM clock over the rounds kept: 1,755–1,980 MHz)" in table  # one a process
    for page in ("launch-bound.md", "methods.md"):
        assert _render(page, folder)
    assert "reduce-overhead" not in expand(build, "verdicts", ["8x16x1024x64"])  # no verdict, so not among them
