"""The pages beyond the post, rendered from the committed H200 run records."""
import re
import xml.etree.ElementTree as ET

import pytest

from attnprof.site.claims import published as claims
from attnprof.site.pieces import runs as findings
from attnprof.site.render import plots
from attnprof.site.build import Build

BUILD = Build(problems={})
NS = "{http://www.w3.org/2000/svg}"


@pytest.mark.parametrize("name", list(findings.FIGURES))
def test_every_figure_is_well_formed_svg(name):
    root = ET.fromstring(findings.FIGURES[name](BUILD))
    assert root.tag.endswith("svg") and len(list(root.iter("{http://www.w3.org/2000/svg}path"))) >= 1


def test_line_chart_skips_missing_points_and_says_why():
    svg = plots.line_chart({"a": [(1, 2.0), (2, None)], "b": [(1, 1.0), (2, 3.0)]}, "x", "y", "t")
    root = ET.fromstring(svg)
    markers = [c for c in root.iter(f"{NS}circle") if c.find(f"{NS}title") is not None]
    assert "OOM past the last point" in svg and len(markers) == 3


def test_cost_follows_from_measured_throughput():
    html = findings.cost(BUILD, "32")
    cells = re.findall(r'data-tokens-per-s="([\d.e+]+)" data-tokens-per-s-range="([\d.e+]+) ([\d.e+]+)">'
                       r'([\d.]+)(?: \[([\d.]+)–([\d.]+)\])?<', html)
    graphed = [r for r in BUILD.run("decode_step") if "back_to_back_us" in r.get("graph", {})]
    assert graphed  # each decode step also replayed from a CUDA graph: a row of its own
    assert len(cells) == len(BUILD.run("e2e")) + len(BUILD.run("decode_step")) + len(graphed)
    assert "decode, CUDA graph" in html and "launch-bound" in html  # the eager rows say who sets the pace
    per_million = lambda tps: findings.DEFAULT_PRICE / 3600 / float(tps) * 1e6
    for tps, slow, fast, dollars, cheap, dear in cells:
        assert float(slow) <= float(tps) <= float(fast)  # the median's rate within the processes' range
        assert float(dollars) == pytest.approx(per_million(tps), abs=1e-3)
        if cheap:  # the fastest process's dollars, then the slowest's
            assert (float(cheap), float(dear)) == (pytest.approx(per_million(fast), abs=1e-3),
                                                   pytest.approx(per_million(slow), abs=1e-3))
    assert 'id="attnprof-price"' in html


def test_claims_table_covers_every_claim_with_a_verdict():
    rows = [l for l in claims.claims(BUILD).splitlines() if l.startswith("| ") and l[2].isdigit()]
    assert len(rows) == 7
    assert all(l.rstrip(" |").split("|")[-1].strip() for l in rows)


def test_fallback_table_names_the_backend_that_ran():
    md = findings.fallback(BUILD)
    assert "fast path" in md and "**math**" in md  # the strided case fell back to math on the H200


def test_verify_table_shows_the_naive_nan():
    md = findings.verify_table(BUILD)
    naive_masked = [l for l in md.splitlines() if l.startswith("| naive") and "| yes |" in l]
    assert naive_masked and all("NaN" in l for l in naive_masked)


def test_fallback_reasons_are_pytorchs_own_words():
    md = findings.fallback_reasons(BUILD)
    assert "does not support non-null attn_mask" in md and "stride 1" in md
    assert "[W" not in md and "Triggered internally" not in md


def test_claims_reuse_the_facts_of_the_tables():
    share = findings.softmax_share(BUILD)
    assert f"{share['time_pct']:.0f} %" in claims.softmax_time(BUILD)[2]
    flash = [x["speedup"] for x in findings.speedups(BUILD) if x["path"] == "flash"]
    assert f"{max(flash):.1f}×" in claims.flash_speed(BUILD)[2]


# ---- conclusions decided by the one rule (analysis/decide.py): each turns when the number it rests on does ----

@pytest.fixture
def copy(tmp_path):
    """copy(run, change): a copy of the committed records with `change(result)` applied to one run's committed
    result and each of its repeats (their medians derived again from the changed samples), read as a build
    reads them; each call starts from the committed run again. With repeat=True, the changed result is added
    as a further repeat instead."""
    import json
    import shutil
    from attnprof.analysis import derived
    from attnprof.model import store
    folder = tmp_path / "captures"
    shutil.copytree(store.CAPTURES, folder, ignore=lambda d, names: [n for n in names if not n.startswith("run-")])

    def flip(run, change, repeat=None):
        path = folder / f"run-{run}.json"
        record = json.loads((store.CAPTURES / path.name).read_text())
        if repeat is None:  # the same change measured in every process of the run
            change(record["result"])
            record["result"] = derived.derive(run, record["result"])
            for i, result in enumerate(record.get("repeats", [])):
                change(result)
                record["repeats"][i] = derived.derive(run, result)
        else:  # a further independent repeat of the run, the committed result changed
            import copy as deep
            again = deep.deepcopy(record["result"])
            change(again)
            record.setdefault("repeats", []).append(derived.derive(run, again))
        path.write_text(json.dumps(record))
        return Build(folder, problems={})
    return flip


def scale(rows, factor, key="back_to_back_us_each", **match):
    """Every sample of `key` in the rows (or the part `part` of them) whose fields equal `match`, times `factor`."""
    part = match.pop("part", None)
    hit = [r for r in rows if all(r.get(k) == v for k, v in match.items())]
    assert hit, match
    for r in hit:
        where = r[part] if part else r
        where[key] = [factor * x for x in where[key]]


def _as(factor, part, of=None, keys=("times_us", "back_to_back_us_each"), **match):
    """A change: in the rows whose fields equal `match`, `part`'s samples made `factor` times `of`'s (the row
    itself where `of` is None), sample by sample."""
    def change(rows):
        for r in rows:
            if all(r.get(k) == v for k, v in match.items()):
                source = r[of] if of else r
                for key in keys:
                    r[part][key] = [factor * x for x in source[key]]
    return change


def test_concatenation_against_in_place_is_decided_or_not_told_apart(copy):
    said = findings.decode_error(copy("decode_step", _as(1.0, "concat", batch=1)))
    assert "at batch 1, where the cache is small, the concatenating step and the in-place one are not told apart" in said
    assert "× as long" in said.split(";")[0]  # the largest batch: decided, the cost per token with it
    longer = findings.decode_error(copy("decode_step", _as(5.0, "concat", batch=1)))  # beyond any spread across processes
    # batch 1 now decidedly longer, the row of the smallest ratio (whichever batch that is) is decided too
    assert re.search(r"where the cache is small, a step takes .* as long \(", longer) and "not told apart" not in longer
    shorter = copy("decode_step", _as(0.2, "concat", batch=1))
    assert "less time, not more" in findings.decode_error(shorter)


def _fastest_rows(times: dict):
    """Every row of the fastest-forward run timed back to back as `times[(path, layout)]` times FlashAttention-4's
    row on [B, H, S, D] (2 where not named), sample by sample."""
    def change(rows):
        fa4 = list(next(r for r in rows if (r["path"], r["layout"]) == ("fa4", "BHSD"))["back_to_back_us_each"])
        for r in rows:
            if "back_to_back_us_each" in r:
                r["back_to_back_us_each"] = [times.get((r["path"], r["layout"]), 2.0) * x for x in fa4]
    return change


def test_the_fastest_forward_is_one_only_where_told_apart_from_the_rest(copy):
    tie = findings.fastest(copy("fastest", _fastest_rows({("fa4", "BHSD"): 1.0, ("fa4", "BSHD"): 1.0}))).split("\n\n")[-1]
    assert tie.startswith("The fastest forward we ran here is **FlashAttention-4**, its two layouts not told apart")  # the lesson
    assert "(evidence: The fastest forwards we ran at this shape are not told apart: FlashAttention-4" in tie
    one = findings.fastest(copy("fastest", _fastest_rows({("fa4", "BHSD"): 1.0, ("fa4", "BSHD"): 1.2}))).split("\n\n")[-1]
    assert one.startswith("The fastest forward we ran at this shape is **FlashAttention-4 through kernels on [B, H, S, D]")
    assert one.endswith("Fastest within each layout alike: FlashAttention-4.")  # one leader in both: said once
    within = findings.fastest(copy("fastest", _fastest_rows({("fa4", "BHSD"): 1.0, ("fa4", "BSHD"): 1.2,
                                                            ("cudnn", "BSHD"): 1.2}))).split("Fastest within each layout: ")[1]
    assert within.split("; ")[1] == "on [B, S, H, D] inputs, cuDNN and FlashAttention-4, not told apart."


def test_a_stream_slower_than_one_call_is_said_only_where_decided(copy):
    def stream_as_one_call(factor_at_batch_2):  # back to back timed as one call (times the factor at batch 2)
        def change(rows):
            for r in rows:
                factor = factor_at_batch_2 if r["batch"] == 2 else 1.0
                r["sdpa_layer"]["back_to_back_us_each"] = [factor * x for x in r["sdpa_layer"]["times_us"]]
        return change
    assert "ran slower per layer" not in findings.cost(copy("e2e", stream_as_one_call(1.0)))
    note = findings.cost(copy("e2e", stream_as_one_call(3.0))).split("ran slower per layer than one layer at a time (evidence: ")[1]
    assert note.startswith("batch 2 × 4,096 (") and "batch 8" not in note


def test_a_gain_or_a_fallback_ratio_within_the_noise_is_not_told_apart(copy):
    far = copy("graphs", _as(0.2, "graph", "eager", keys=("times_us",)))
    assert "not told apart" not in findings.graphs(far).split("\n\n")[0]
    same = copy("graphs", lambda rows: rows[0]["graph"].update(times_us=list(rows[0]["eager"]["times_us"])))
    assert "| 1.0×, not told apart |" in findings.graphs(same).split("\n\n")[0]
    def fp16_as_fast_path(factor):
        def change(rows):
            fast = next(r for r in rows if r["case"].startswith("fast path"))
            next(r for r in rows if r["case"] == "fp16 inputs")["times_us"] = [factor * x for x in fast["times_us"]]
        return change
    tied = findings.fallback(copy("fallback", fp16_as_fast_path(1.0)))
    assert "| fp16 inputs |" in tied and "1.0×, not told apart" in tied
    fp16 = next(l for l in findings.fallback(copy("fallback", fp16_as_fast_path(2.0))).splitlines()
                if l.startswith("| fp16 inputs"))
    assert fp16.endswith("× |") and "not told apart" not in fp16


@pytest.mark.parametrize("lo, hi, said", [(10, 19, "ours is smaller"), (41.5, 50, "ours is larger"),
                                          (35, 45, "agrees (overlaps the claimed range)"),
                                          (40.5, 41, "at the edge of the claimed range: not told apart from it"),
                                          (19.5, 19.8, "at the edge of the claimed range: not told apart from it")])
def test_a_claim_is_judged_by_our_range_against_the_claimed_one(lo, hi, said):
    from attnprof.analysis import decide
    assert claims.verdict(decide.Range((lo + hi) / 2, lo, hi, 3, decide.REPEATS), 20, 40) == said


def test_the_end_to_end_claim_turns_with_the_layer_times(copy):
    assert claims.end_to_end(BUILD)[3].startswith("ours is larger")
    def gain_of_30_pct(rows):  # the naive layer 1.3 times the SDPA layer, one call at a time, at every shape
        for r in rows:
            r["naive_layer"]["times_us"] = [1.3 * x for x in r["sdpa_layer"]["times_us"]]
    assert claims.end_to_end(copy("e2e", gain_of_30_pct))[3].startswith("agrees")


def _batch_1_stream(enqueue_per_gpu: float, b2b_per_gpu: float):
    """The batch-1 decode step's stream samples made `enqueue_per_gpu` and `b2b_per_gpu` times its GPU-only ones."""
    def change(rows):
        s = next(r for r in rows if r["batch"] == 1)["stream"]
        s["enqueue_us"] = [enqueue_per_gpu * x for x in s["graph_us"]]
        s["enqueue_late_us"] = list(s["enqueue_us"])
        s["back_to_back_us"] = [b2b_per_gpu * x for x in s["graph_us"]]
    return change


def test_the_cost_table_gives_each_time_its_range_and_decides_a_stream_over_every_process(copy):
    both = copy("decode_step", _batch_1_stream(10.0, 10.0))  # launch-bound by far, in every process
    table = findings.cost(both)
    row = next(r for r in table.split("<tr>") if r.startswith("<td>decode, eager</td><td>batch 1,"))
    assert "<td>launch-bound</td>" in row and "within" not in row  # the verdict alone: its times are folded
    cell = row.split('class="attnprof-cost" ')[1]
    lo, hi = (float(x) for x in cell.split('data-tokens-per-s-range="')[1].split('"')[0].split())
    assert lo <= float(cell.split('data-tokens-per-s="')[1].split('"')[0]) <= hi
    dollars = re.search(r">(\d+\.\d{3}) \[(\d+\.\d{3})–(\d+\.\d{3})\]</td>", cell)  # median [cheapest–dearest]
    assert dollars and float(dollars[2]) <= float(dollars[1]) <= float(dollars[3])
    differ = copy("decode_step", _batch_1_stream(0.1, 1.0), repeat=True)  # one more process: GPU-bound there
    row = next(r for r in findings.cost(differ).split("<tr>") if r.startswith("<td>decode, eager</td><td>batch 1,"))
    assert "<td>differs between processes</td>" in row
    note = next(l for l in findings.decode_step(differ).splitlines() if l.startswith("    - batch 1:"))
    assert "differs between processes (" in note and "GPU-bound)" in note


def test_the_varlen_table_has_a_note_column_only_where_a_row_has_a_note(copy):
    def none_unavailable(rows):
        for r in rows:
            r.pop("unavailable", None)
    assert "note" not in findings.varlen(copy("varlen", none_unavailable)).split("\n")[0]
    def one_unavailable(rows):
        rows[-1]["unavailable"] = "ImportError: no module named 'flash_attn'"
    header = findings.varlen(copy("varlen", one_unavailable)).split("\n")[0]
    assert header.rstrip(" |").endswith("note")


def test_the_decode_tables_stream_cell_shows_the_back_to_back_time_its_verdict_rests_on(copy):
    """A stream runs no faster than its CPU enqueues it: the stream cell of each eager decode row says its verdict in
    a word, and the note folded under the table gives the stream run's own back-to-back time (over its processes)
    beside its CPU enqueue, never the steps timed in turns, which were taken apart from it; the header and the note
    name the stream as a run of its own. Made twice as slow in its own samples alone, the stream's back-to-back time
    in the note follows, and the in-turns column does not."""
    from attnprof.analysis import decide
    from attnprof.text import us
    def stream_of(build, r):  # the stream run's back-to-back samples at r's batch, in each process
        return decide.of([next(x for x in result if x["batch"] == r["batch"])["stream"]["back_to_back_us"]
                          for result in build.repeats("decode_step")])
    table = findings.decode_step(BUILD)
    assert findings.STREAM_RUN in table.split("\n")[0] and findings.STREAM_RUN[1:] in table  # header, note
    rows = {int(l.split("|")[1]): [c.strip() for c in l.split("|")[1:-1]] for l in table.splitlines()
            if re.match(r"\| \d", l)}
    notes = {int(l.split("batch ")[1].split(":")[0]): l.split(": ", 1)[1] for l in table.splitlines()
             if l.startswith("    - batch ")}
    number = lambda text: float(text.replace(",", "").split()[0])
    for r in findings.decode_steps(BUILD):
        cell, note = rows[r["batch"]][7], notes[r["batch"]]
        assert len(cell.split()) <= 6 and note.startswith(cell.split(",")[0]), (cell, note)  # a few words
        queued = stream_of(BUILD, r)
        assert f": {queued.text(us)} back to back, " in note, note
        shown = number(note.split(": ", 1)[1])
        enqueue = number(note.split("GPU only, ")[1])
        assert shown >= enqueue * (1 - findings.timing.CPU_FLOOR), note  # the note agrees with itself
    def slower_stream(rows):
        for r in rows:
            r["stream"]["back_to_back_us"] = [2 * x for x in r["stream"]["back_to_back_us"]]
    slow = copy("decode_step", slower_stream)
    changed = findings.decode_step(slow)
    r = findings.decode_steps(BUILD)[0]
    line = next(l for l in changed.splitlines() if l.startswith(f"| {r['batch']} |"))
    note = next(l for l in changed.splitlines() if l.startswith(f"    - batch {r['batch']}:"))
    assert f": {stream_of(slow, r).text(us)} back to back, " in note
    assert f"| {us(r['back_to_back_us'])} |" in line  # the steps timed in turns keep their own time
