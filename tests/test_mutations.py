"""One edit of each class that a careful maintainer might make to the committed records (issue 33), each
applied to a copy of them: `check` (in process: records.status, records.problems, the checked sentences)
or the strict build names the file and the field in one line. The untouched copy passes."""
import csv
import gzip
import io
import json
import logging
import re
import shutil

import pytest

from attnprof.analysis import derived, hardware, records, stats, trace
from attnprof.model import store
from attnprof.model.procedure import BWD_FLOP_FACTOR
from attnprof.model.stages import DEFAULT_SHAPE, STAGES
from attnprof.site import registry
from attnprof.site.build import Build
from attnprof.site.claims.core import false_statements

CP_RECORD = records.CP.records()[0]  # the shortest two-GPU run
DOCS = store.ROOT / "docs"


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    folder = tmp_path_factory.mktemp("clean") / "captures"
    shutil.copytree(store.CAPTURES, folder)
    return folder


def test_the_untouched_copy_passes(clean):
    assert records.problems(clean) == {}
    assert false_statements(Build(clean, {}, strict=True), DOCS) == []


def edited(clean, tmp_path, name, edit):
    """A copy of the clean records with `edit` applied to the JSON of file `name`."""
    folder = tmp_path / "captures"
    shutil.copytree(clean, folder)
    data = json.loads((folder / name).read_text())
    edit(data)
    (folder / name).write_text(json.dumps(data, indent=1))
    return folder


def edited_trace(folder, record, edit):
    """`edit` applied to the trace of `record` in `folder` (a copy)."""
    path = store.trace_path(folder, record)
    with gzip.open(path, "rt") as f:
        data = json.load(f)
    edit(data)
    with gzip.open(path, "wt") as f:
        json.dump(data, f)
    return folder


def edited_both(clean, tmp_path, record, edit_summary, edit_trace):
    """A copy with the summary of `record` and its trace edited together."""
    return edited_trace(edited(clean, tmp_path, f"{record}.json", edit_summary), record, edit_trace)


def row_named(rows, name):
    return next(r for r in rows if r["name"] == name)


def scale(node, key, factor):
    node[key] = node[key] * factor


def set_to(node, key, value):
    node[key] = value


def cp_slowest(s):
    """The two-GPU record's own arithmetic redone after an edit, so that only the edited number is off."""
    s["cp_event_median_us"] = max(r["event_median_us"] for r in s["ranks"])
    s["speedup"] = s["single_gpu"]["event_median_us"] / s["cp_event_median_us"]


def verify_pass_at_five_tolerances(rows):
    row = next(r for r in rows["result"] if r.get("status") == "pass")
    row["rel_frobenius"] = 5 * row["tolerance"]


def varlen_less_useful(run):
    row = run["result"][0]  # the padded batch: 53 % wasted becomes 77 %
    row["useful_flops"] /= 2
    row["wasted_flops_pct"] = 100 * (1 - row["useful_flops"] / row["computed_flops"])


def timed_row_marked_oom(run):
    next(r for r in run["result"] if "back_to_back_us" in r)["oom"] = True


def cp_faster_rank(s):
    fast = min(s["ranks"], key=lambda r: r["event_median_us"])
    fast["event_median_us"] *= 1.5
    cp_slowest(s)


def cp_single_gpu(s):
    s["single_gpu"]["event_median_us"] *= 1.2
    cp_slowest(s)


def another_gpu(s):
    s.update(device="NVIDIA A100-SXM4-80GB", capability="sm_80", sm_count=108)


def dropped_process(run):
    run["repeats"].pop()
    run["processes"].pop()


def first_process_twice(run):
    run["repeats"][0], run["processes"][1] = run["result"], run["processes"][0]


def processes_reordered(run):
    run["repeats"].reverse()
    run["processes"][1:] = reversed(run["processes"][1:])


def steady_process_dropped(run):
    run["result"]["repeats"].pop()
    run["result"]["processes"].pop()


def samples(record, key, change, run=None):
    """Every sample of `key` in a record (or in every process of run `run`) changed, and what follows from
    them recomputed, so that only the physics is wrong."""
    if run is None:
        record[key] = [change(t) for t in record[key]]
        record.update(stats.event_stats(record[key]))
        return
    for where, result in [("result", record["result"])] + [(i, r) for i, r in enumerate(record.get("repeats", []))]:
        def walk(node):
            if isinstance(node, dict):
                if key in node and isinstance(node[key], list):
                    node[key] = [change(t) for t in node[key]]
                for v in node.values():
                    walk(v)
            elif isinstance(node, list):
                for v in node:
                    walk(v)
        walk(result)
        fixed = derived.derive(run, result)
        if where == "result":
            record["result"] = fixed
        else:
            record["repeats"][where] = fixed


def fa4_at(rate):
    """FlashAttention-4's one-call CUDA-event samples scaled to `rate` TFLOP/s at their median."""
    def edit(s):
        from attnprof.analysis.flops import causal_flops, tflops
        factor = tflops(causal_flops(s["shape"]), s["event_median_us"]) / rate
        samples(s, "event_times_us", lambda t: t * factor)
    return edit


def in_place_row(path):
    def edit(r):
        row = next(x for x in r["result"] if x.get("path") == path and "times_us" in x)
        row["times_us"] = [-t for t in row["times_us"]]
        r["result"] = derived.derive(r["run"], r["result"])
    return edit


def keep_first(key, n):
    def edit(s):
        s[key] = s[key][:n]
        s.update(stats.event_stats(s[key]))
    return edit


def sweep_runs_cut(r):
    row = next(x for x in r["result"] if len(x.get("back_to_back_us_each", [])) > 2)
    row["back_to_back_us_each"] = row["back_to_back_us_each"][:2]
    r["result"] = derived.derive("sweep", r["result"])


def fastest_row_cut(r):
    row = next(x for x in r["result"] if len(x.get("times_us", [])) == 50)
    row["times_us"] = row["times_us"][:10]
    r["result"] = derived.derive("fastest", r["result"])


def timing_cut(r):
    """10 of 50 one-call samples kept in every process, and the count the page states ("over 50 calls") with them."""
    for result in [r["result"], *r["repeats"]]:
        result["one_call_reps"] = 10
        for row in result["rows"]:
            row["one_call_us"], row["one_call_wall_us"] = row["one_call_us"][:10], row["one_call_wall_us"][:10]


# (case, file edited, record whose status names it, the edit, the field the line must name)
CASES = [
    # 0. repeats: each names its process, as many as the settings ask for, each once, in the order they measured
    ("a further process dropped", "run-timing.json", "run-timing", dropped_process, "repeats[0] hold the results of 2"),
    ("the first process counted twice", "run-backward.json", "run-backward", first_process_twice, "processes[1]"),
    # (the two below need a run of three processes or more: decode_step's)
    ("a process's results duplicated", "run-decode_step.json", "run-decode_step",
     lambda r: r["repeats"].__setitem__(1, r["repeats"][0]), "repeats[1] is identical to repeats[0]"),
    ("processes reordered", "run-decode_step.json", "run-decode_step", processes_reordered, "processes are not in the order"),
    ("a steady process dropped", "run-steady.json", "run-steady", steady_process_dropped, "result.repeats[0]"),
    # 1. key_averages, every column
    ("self CUDA time of a CPU op", "naive.json", "naive",
     lambda s: scale(row_named(s["key_averages"], "aten::masked_fill_"), "self_device_us", 1.2), ".self_device_us"),
    ("CPU total", "naive.json", "naive",
     lambda s: scale(row_named(s["key_averages"], "aten::matmul"), "cpu_total_us", 1.5), ".cpu_total_us"),
    ("CUDA total", "naive.json", "naive",
     lambda s: scale(row_named(s["key_averages"], "aten::masked_fill"), "device_total_us", 1.5), ".device_total_us"),
    ("a CPU row's calls lowered", "naive.json", "naive",
     lambda s: set_to(row_named(s["key_averages"], "aten::expand"), "calls", 3), ".calls"),
    # 2. a record's own shape, dtype and settings against its name and key
    ("shape", "flash.json", "flash", lambda s: set_to(s, "shape", [8, 16, 2048, 64]), "shape"),
    ("dtype", "flash.json", "flash", lambda s: set_to(s, "dtype", "fp16"), "dtype"),
    ("settings", "flash.json", "flash", lambda s: set_to(s["settings"], "event_reps", 10), "settings"),
    # 3. which GPU, within a record
    ("a summary's GPU against its trace", "cudnn.json", "cudnn", another_gpu, "device"),
    ("a rank's GPU", f"{CP_RECORD}.json", CP_RECORD,
     lambda s: set_to(s["ranks"][1], "device", "NVIDIA A100-SXM4-80GB"), "ranks[1].device"),
    # 4. two GPUs: every rank's median and the single GPU's, bounded
    ("a faster rank's median", f"{CP_RECORD}.json", CP_RECORD, cp_faster_rank, "].event_median_us"),
    ("the single GPU's median, the speedup redone", f"{CP_RECORD}.json", CP_RECORD, cp_single_gpu,
     "single_gpu.event_median_us"),
    # 5. what a record decides itself
    ("verification passes at five tolerances", "run-verify.json", "run-verify", verify_pass_at_five_tolerances,
     "].status"),
    ("a fallback case's backend", "run-fallback.json", "run-fallback",
     lambda r: set_to(r["result"][1], "ran", "flash"), "result[1].ran"),
    ("varlen's useful FLOPs", "run-varlen.json", "run-varlen", varlen_less_useful, "result[0].useful_flops"),
    ("a backward FLOP factor", "naive-bwd.json", "naive-bwd",
     lambda s: set_to(s, "bwd_flop_factor", 2 * BWD_FLOP_FACTOR), "bwd_flop_factor"),
    ("a timed sweep row marked out of memory", "run-sweep.json", "run-sweep", timed_row_marked_oom, ".oom"),
    ("a capture that ran marked unavailable", "sage.json", "sage",
     lambda s: set_to(s, "unavailable", "SageAttention: No module named 'sageattention'"), "unavailable"),
    ("auto's dispatcher choice", "auto.json", "auto", lambda s: set_to(s, "sdpa_choice", "flash"), "sdpa_choice"),
    # 6. measured once, bounded
    ("an error against float64 x10", "flash.json", "flash", lambda s: scale(s, "rel_err", 10), "rel_err"),
    ("a reader's error x100", "window.flex.json", "window.flex", lambda s: scale(s, "rel_err", 100), "rel_err"),
    ("peak memory below the output", "flash.json", "flash", lambda s: scale(s, "peak_extra_bytes", 0.25),
     "peak_extra_bytes"),
    ("peak memory above the GPU's", "run-sweep.json", "run-sweep",
     lambda r: scale(next(x for x in r["result"] if "peak_extra_bytes" in x), "peak_extra_bytes", 1000),
     ".peak_extra_bytes"),
    # 7. physical bounds from the GPU's specification (analysis/hardware.py SPECS)
    ("a matmul ceiling of 1,476 TFLOP/s", "run-ceilings.json", "run-ceilings",
     lambda r: samples(r, "matmul_us_each", lambda t: t / 2, run="ceilings"), "result.matmul_tflops"),
    ("a copy at 8.5 TB/s", "run-ceilings.json", "run-ceilings",
     lambda r: samples(r, "copy_us_each", lambda t: t / 2, run="ceilings"), "result.copy_gbs"),
    ("FlashAttention-4 at 1,052 TFLOP/s", "fa4-1x16x8192x128.json", "fa4-1x16x8192x128", fa4_at(1052),
     "event_median_us"),
    ("FlashAttention-4 at twice its rate back to back in the sweep", "run-sweep.json", "run-sweep",
     lambda r: samples(r, "back_to_back_us_each", lambda t: t / 2, run="sweep"), ".tflops_back_to_back"),
    ("FlashAttention-4 at twice its rate one call at a time", "run-fastest.json", "run-fastest",
     lambda r: samples(r, "times_us", lambda t: t / 2, run="fastest"), ".tflops"),
    ("negated samples", "run-fastest.json", "run-fastest", in_place_row("flash"), "].median_us holds -"),
    ("samples of inf", "naive.json", "naive",
     lambda s: samples(s, "event_times_us", lambda t: float("inf") if t > s["event_median_us"] else t), "is inf"),
    ("a backward at twice the peak", "flash-bwd.json", "flash-bwd",
     lambda s: samples(s, "event_times_us", lambda t: t / 20), "event_median_us"),
    ("a record that names no GPU", "run-ceilings.json", "run-ceilings", lambda r: r.pop("device"), "names no GPU (no `device`)"),
    ("a capture that names no GPU", "flash.json", "flash", lambda s: s.pop("device"), "names no GPU (no `device`)"),
    # 8. counts against settings: the samples and profiled forwards a record keeps are those it was taken with
    ("10 of 50 CUDA-event samples kept", "flash.json", "flash", keep_first("event_times_us", 10), "event_times_us"),
    ("10 of a backward's 50 samples kept", "naive-bwd.json", "naive-bwd", keep_first("event_times_us", 10),
     "event_times_us"),
    ("a stage's stream samples cut", "naive.json", "naive", lambda s: s["timing"].update(graph_us=s["timing"]["graph_us"][:10]),
     "timing.graph_us"),
    ("a sweep row's back-to-back runs cut below its rounds", "run-sweep.json", "run-sweep", sweep_runs_cut,
     "].back_to_back_us_each"),
    ("a fastest row's samples cut below its reps", "run-fastest.json", "run-fastest", fastest_row_cut, "].times_us"),
    ("one-call samples cut with the run's count", "run-timing.json", "run-timing", timing_cut, "one_call_reps"),
    ("a backward run's samples cut", "run-backward.json", "run-backward",
     lambda r: r["result"]["rows"][0].update(event_times_us=r["result"]["rows"][0]["event_times_us"][:10]),
     "rows[0].event_times_us"),
    ("a ceiling's runs cut", "run-ceilings.json", "run-ceilings",
     lambda r: r.update(result=derived.derive("ceilings", dict(r["result"], copy_us_each=r["result"]["copy_us_each"][:-1]))),
     "result.copy_us_each"),
    ("a steady process dropped", "run-steady.json", "run-steady", lambda r: r["result"]["repeats"].pop(), "result.repeats"),
]


@pytest.mark.parametrize("case, name, record, edit, field", CASES, ids=[c[0] for c in CASES])
def test_an_edit_is_named_with_its_file_and_field(clean, tmp_path, case, name, record, edit, field):
    why = records.status(record, edited(clean, tmp_path, name, edit))
    assert why is not None, f"{case}: not caught"
    assert "\n" not in why and name in why and field in why and "python -m attnprof" in why, why


A100 = hardware.Spec(  # the A100-SXM4-80GB's datasheet figures, for a table that knows two GPUs
    capability="sm_80", sms=108, tflops={"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 156.0},
    fp32_cuda_core_tflops=19.5, hbm_gbs=2039.0, memory_bytes=80 * 2**30,
    per_sm={"maxThreadsPerMultiprocessor": 2048, "regsPerMultiprocessor": 65536,
            "sharedMemPerMultiprocessor": 164 * 1024, "sharedMemPerBlockOptin": 163 * 1024,
            "maxThreadsPerBlock": 1024, "regsPerBlock": 65536, "warpSize": 32},
    blocks_per_sm=32, registers_per_thread=255, sources={})


def test_a_record_from_another_gpu_is_named(clean, tmp_path, monkeypatch):
    """A run with no trace, taken on another GPU the table knows: within that GPU's bounds, but not the
    site's GPU."""
    monkeypatch.setitem(hardware.SPECS, "NVIDIA A100-SXM4-80GB", A100)
    found = records.problems(edited(clean, tmp_path, "run-gqa.json", another_gpu))
    assert list(found) == ["run-gqa"]
    assert "run-gqa.json was taken on NVIDIA A100-SXM4-80GB (sm_80, 108 SMs)" in found["run-gqa"]
    assert "NVIDIA H200" in found["run-gqa"] and "one GPU per site" in found["run-gqa"]


def test_a_gpu_the_table_does_not_know_is_refused(clean, tmp_path):
    """Relabelled as a GPU the specification table does not hold, nothing would bound a record: refused in one
    line that names the table as the fix."""
    why = records.status("run-sweep", edited(clean, tmp_path, "run-sweep.json", another_gpu))
    assert why == ("run record run-sweep.json: device 'NVIDIA A100-SXM4-80GB' is not in the GPU specification "
                   "table, so nothing bounds its numbers: add the GPU, with the sources of its figures, to SPECS in "
                   "attnprof/analysis/hardware.py")


def cudnn_slower(record):
    """Raw samples edited in every process of the timing run: a consistent record whose one-call times
    make cuDNN slow at the post's shape."""
    for result in [record["result"], *record.get("repeats", [])]:
        for r in result["rows"]:
            if r["stage"] == "cudnn" and tuple(r["shape"]) == DEFAULT_SHAPE:
                r["one_call_us"] = [3 * t for t in r["one_call_us"]]


def test_check_evaluates_every_checked_sentence(clean, tmp_path):
    folder = edited(clean, tmp_path, "run-timing.json", cudnn_slower)
    assert records.status("run-timing", folder) is None  # the record itself holds
    found = false_statements(Build(folder, records.problems(folder), strict=True), DOCS)
    line = next(l for l in found if "cudnn-fastest" in l)
    assert line.startswith("docs/at-a-glance.md: ") and "\n" not in line
    # cuDNN against the fastest other backend, never against itself
    lesson, evidence = (part.split("”", 1)[0] for part in line.split("“")[1:3])  # the line quotes both
    assert "cuDNN's" not in evidence and evidence.count(" against ") == 2
    assert "cuDNN's" not in lesson and lesson.count(" against ") == 1


def test_check_holds_every_piece_told_what_to_find(clean, tmp_path):
    """`expect=` on a piece is a checked sentence too: flash's one call at the short shape made only 30 % longer
    than its GPU work in every process, the page's `expect=launch_dominates` is named false by check, with its
    page."""
    def no_launch(record):
        for result in [record["result"], *record.get("repeats", [])]:
            for r in result["rows"]:
                if r["stage"] == "flash" and r["shape"] == [1, 16, 256, 64]:
                    graph = r["graph_us"] * 2  # as many samples as the run keeps (50 of 30 GPU-only ones, cycled)
                    r["one_call_us"] = [1.3 * t for t in graph[:len(r["one_call_us"])]]
    folder = edited(clean, tmp_path, "run-timing.json", no_launch)
    found = false_statements(Build(folder, records.problems(folder), strict=True), DOCS)
    (line,) = [l for l in found if "verdict flash 1x16x256x64 call" in l]
    assert line.startswith("docs/launch-bound.md: <!-- attnprof: verdict flash 1x16x256x64 call expect=launch_dominates -->")
    assert "the data say 'kernels dominate'" in line


# ---- pieces and directives: a strict build fails, a plain one renders a box or warns ---------------

def render(folder, text, strict=True):
    import markdown
    from attnprof.site.extension import PiecesExtension
    build = Build(folder, records.problems(folder), strict=strict)
    return markdown.Markdown(extensions=[PiecesExtension(build=build)]).convert(text)


PIECE_CASES = [
    ("a record the site does not list", "The time is <!-- attnprof: value flash-1x16x4096x128 device_time -->.",
     "'flash-1x16x4096x128' is not a record the site lists"),
    ("counters of a capture that has none", "<!-- attnprof: counters naive_compiled -->",
     "'naive_compiled.counters' is not a record the site lists"),
    ("a directive without its colon", "Its ops:\n\n<!-- attnprof ops flash -->\n",
     "<!-- attnprof ops flash --> is not a directive the site renders"),
]


@pytest.mark.parametrize("case, text, says", PIECE_CASES, ids=[c[0] for c in PIECE_CASES])
def test_a_strict_build_refuses_what_a_plain_one_shows_as_a_box(clean, case, text, says, caplog):
    from attnprof.site.extension import PieceError
    with pytest.raises(PieceError) as e:
        render(clean, text)
    assert says in str(e.value) and "\n" not in str(e.value)
    with caplog.at_level(logging.WARNING):
        html = render(clean, text, strict=False)  # mkdocs serve, a report: a box or a warning, no abort
    assert "Capture not usable" in html or "not usable" in html or says in caplog.text


def test_a_piece_that_does_not_exist_fails_every_build(clean):
    from attnprof.site.extension import PieceError
    for strict in (True, False):
        with pytest.raises(PieceError, match="unknown piece 'opps'"):
            render(clean, "<!-- attnprof: opps flash -->", strict)


def test_a_misspelt_run_in_a_piece_fails_even_a_plain_build(clean, monkeypatch):
    """A piece that reads a run the site does not make is a bug in the code, not a missing record."""
    from attnprof.site.extension import PieceError
    monkeypatch.setitem(registry.PIECES, "roof", {None: registry.Piece("roof", lambda b: str(b.run("ceiling")))})
    for strict in (True, False):
        with pytest.raises(PieceError, match="no measurement run named 'ceiling'"):
            render(clean, "<!-- attnprof: roof -->", strict)


def test_a_known_unusable_record_is_still_a_box(clean, tmp_path):
    """What `check` lists (here a missing run) stays a box on the page; the strict build refuses it
    through `check`'s list, before any page."""
    folder = tmp_path / "captures"
    shutil.copytree(clean, folder)
    (folder / "run-ceilings.json").unlink()
    assert "run-ceilings.json is missing" in render(folder, "<!-- attnprof: ceilings -->")


@pytest.mark.site
def test_the_strict_build_fails_on_a_malformed_directive(copy_project, build_site, tmp_path):
    tree = copy_project(tmp_path / "project", ["at-a-glance"])
    page = tree / "docs" / "at-a-glance.md"
    page.write_text(page.read_text() + "\n<!-- attnprof ops flash -->\n")
    r = build_site(tmp_path / "site", root=tree)
    assert r.returncode != 0
    assert [l for l in r.stderr.splitlines() if "<!-- attnprof ops flash --> is not a directive" in l], r.stderr[-800:]


# ---- each record bound to what it says it ran (issue 40): edits of several files, a whole record swapped, a
# kernel renamed in its summary and its trace alike, so that only what the record ran can tell ---------------

def _read(path):
    return gzip.open(path, "rt").read() if path.suffix == ".gz" else path.read_text()


def _write(path, text):
    if path.suffix == ".gz":
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        path.write_text(text)


def moved(source, target, **fields):
    """Record `source`'s summary and trace put under `target`'s name, the fields that name it changed too (and
    `fields`), its key and code hashes recomputed for `target`: only what it ran can tell."""
    def edit(folder):
        summary = json.loads((folder / f"{source}.json").read_text())
        kind = records.kind_of(target)
        summary.update(record=target, key=kind.key(target), code=kind.code(target), **fields)
        if target.split("-")[0] in STAGES:
            stage = STAGES[target.split("-")[0]]
            summary.update(stage=stage.name, title=stage.title, source_hash=stage.source_hash())
        (folder / f"{target}.json").write_text(json.dumps(summary, indent=1))
        shutil.copy(folder / f"{source}.trace.json.gz", folder / f"{target}.trace.json.gz")
    return edit


def renamed(record, old, new):
    """Every kernel of `record` whose name holds `old`, renamed `new`, in its summary and its trace alike."""
    def edit(folder):
        for path in (folder / f"{record}.json", folder / f"{record}.trace.json.gz"):
            text = _read(path)
            names = set(re.findall(r'"name": ?"([^"]*%s[^"]*)"' % re.escape(old), text))
            assert names, f"no kernel of {record} is named with {old!r}"
            for name in names:
                text = text.replace(f'"{name}"', json.dumps(new))
            _write(path, text)
    return edit


def then(*edits):
    def edit(folder):
        for e in edits:
            e(folder)
    return edit


def json_edit(name, change):
    def edit(folder):
        data = json.loads((folder / name).read_text())
        change(data)
        (folder / name).write_text(json.dumps(data, indent=1))
    return edit


def layer_as_sdpa(folder):
    """layer.flex_attention's capture under layer.sdpa's name, its settings and key recomputed for sdpa."""
    moved("layer.flex_attention", "layer.sdpa", function="sdpa", title='Llama layer, attn_implementation="sdpa"',
          settings=records.OWN.settings("layer.sdpa"))(folder)


def counters_from(source, target):
    """`source`'s counters and ncu report put under `target`'s name, shape, settings and key."""
    def edit(folder):
        name = f"{target}.counters"
        counted = json.loads((folder / f"{source}.counters.json").read_text())
        counted.update(record=name, capture=target, shape=list(records.COUNTERS.settings(name)["shape"]),
                       settings=records.COUNTERS.settings(name), key=records.COUNTERS.key(name))
        counted = {k: v for k, v in counted.items() if k != "settings" or "settings" in counted}
        (folder / f"{name}.json").write_text(json.dumps(counted, indent=1))
        shutil.copy(folder / f"{source}.ncu.csv", folder / f"{target}.ncu.csv")
    return edit


def report_registers(record, old, new):
    """The registers per thread of `record`'s ncu report changed (what its counters record parses stays the same)."""
    def edit(folder):
        path = folder / f"{record}.ncu.csv"
        rows = list(csv.reader(io.StringIO(path.read_text())))
        col = rows[0].index("launch__registers_per_thread")
        for r in rows[2:]:
            if r[col] == old:
                r[col] = new
        out = io.StringIO()
        csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
        path.write_text(out.getvalue())
    return edit


def other_grid(record, x):
    """Every launch of `record` with grid [x, 1, 1] given half as many blocks, in its summary and its trace alike."""
    def edit(folder):
        def halve(s):
            for op in s["ops"]:
                if op.get("grid") == [x, 1, 1]:
                    op["grid"] = [x // 2, 1, 1]
        json_edit(f"{record}.json", halve)(folder)
        path = folder / f"{record}.trace.json.gz"
        _write(path, _read(path).replace(f'"grid":[{x},1,1]', f'"grid":[{x // 2},1,1]'))
    return edit


def cp_positions(s):
    s["ranks"][1]["positions"] = [[0, 8191], [24576, 32767]]  # rank 0's chunks, claimed by rank 1 as well


def hub_verified(run):
    """Six passing checks of a provider that never ran (its captures: could not load), copied from flex's."""
    run["result"] += [{**r, "path": "hub"} for r in run["result"] if r["path"] == "flex" and r["status"] == "pass"]


def hub_swept(run):
    """flex's sweep points, every process's, relabelled as a provider that never ran."""
    for result in [run["result"], *run.get("repeats", [])]:
        result += [{**r, "path": "hub"} for r in result if r.get("path") == "flex"]


def not_applicable_passes(run):
    row = next(r for r in run["result"] if r["status"] == "not applicable")
    done = next(r for r in run["result"] if r["path"] == row["path"] and r["dtype"] == row["dtype"] and r["status"] == "pass")
    row.update({k: v for k, v in done.items() if k not in ("fully_masked_row", "shape")}, status="pass")
    row.pop("reason", None)


FLASH_KERNEL = json.loads((store.CAPTURES / "flash.json").read_text())["ops"][0]["name"]
CUDNN_KERNEL = json.loads((store.CAPTURES / "cudnn.json").read_text())["ops"][1]["name"]


def fallback_relabelled(row, backend, kernel):
    """A fallback case relabelled in every process: its backend, aten op, dispatcher choice and kernels."""
    def edit(run):
        for result in [run["result"], *run.get("repeats", [])]:
            result[row].update(ran=backend, aten_backend=backend, dispatcher_choice=backend, kernels=[kernel])
    return edit


def fallback_unnamed(run):
    for result in [run["result"], *run.get("repeats", [])]:
        del result[1]["kernels"]
        result[1]["ran"] = "flash"


# (case, the record whose status names it, the edit of the copied folder, the file and the field its line names)
RAN_CASES = [
    ("flash_graph is cudnn_graph's capture", "flash_graph", moved("cudnn_graph", "flash_graph"),
     "flash_graph.json", "ops[1].name"),
    ("flash at 1x16x256x64 is cuDNN's capture", "flash-1x16x256x64", moved("cudnn-1x16x256x64", "flash-1x16x256x64"),
     "flash-1x16x256x64.json", "ops[1].name"),
    ("the math backend's capture holds a fused kernel", "math", moved("efficient", "math"), "math.json", "ops[0].name"),
    ("layer.sdpa is layer.flex_attention's capture, its key recomputed", "layer.sdpa", layer_as_sdpa,
     "layer.sdpa.json", "ops"),
    ("a flash kernel renamed as cuDNN's", "flash", renamed("flash", "flash_fwd_kernel", CUDNN_KERNEL), "flash.json",
     "ops[0].name"),
    ("flash's capture under cuDNN's name, its kernel renamed as cuDNN's", "cudnn",
     then(moved("flash", "cudnn"), renamed("cudnn", "flash_fwd_kernel", CUDNN_KERNEL)), "cudnn.json", "ops[0].grid"),
    ("cuDNN's capture under flash's name, its kernel renamed as flash's", "flash",
     then(moved("cudnn", "flash"), renamed("flash", "cudnn_generated", FLASH_KERNEL)), "flash.json", "ops[1].grid"),
    ("a graph replay that launches other blocks than the capture it replays", "cudnn_graph", other_grid("cudnn_graph", 132),
     "cudnn_graph.json", "ops: kernels"),
    ("reduce-overhead replaying other launches than torch.compile's", "naive_reduce", other_grid("naive_reduce", 131072),
     "naive_reduce.json", "ops: kernels"),
    ("an SDPA capture's dispatcher choice", "flash", json_edit("flash.json", lambda s: s.update(sdpa_choice="flash")),
     "flash.json", "sdpa_choice"),
    ("flash's counters taken at the long shape", "flash.counters", counters_from("flash-1x16x8192x128", "flash"),
     "flash.counters.json", "kernels[0].grid"),
    ("FlexAttention's counters taken at the long shape", "flex.counters", counters_from("flex-1x16x8192x128", "flex"),
     "flex.counters.json", "kernels[0].grid"),
    ("an ncu report whose kernel ran with other registers", "flash.counters", report_registers("flash", "255", "168"),
     "flash.counters.json", "kernels[0] registers and shared memory"),
    ("a two-GPU rank's positions", CP_RECORD, json_edit(f"{CP_RECORD}.json", cp_positions), f"{CP_RECORD}.json",
     "ranks[1].positions"),
    ("verification rows of a provider that never ran", "run-verify", json_edit("run-verify.json", hub_verified),
     "run-verify.json", ".path 'hub'"),
    ("sweep rows of a provider that never ran", "run-sweep", json_edit("run-sweep.json", hub_swept),
     "run-sweep.json", ".path 'hub'"),
    ("a verification case dropped", "run-verify", json_edit("run-verify.json", lambda r: r["result"].pop(0)),
     "run-verify.json", "result: naive has no row"),
    ("a check that cannot apply marked passing", "run-verify", json_edit("run-verify.json", not_applicable_passes),
     "run-verify.json", "].status"),
    ("the fast path relabelled flash, kernels and all", "run-fallback",
     json_edit("run-fallback.json", fallback_relabelled(0, "flash", FLASH_KERNEL)), "run-fallback.json", "result[0].ran"),
    ("head dim 512 relabelled flash, kernels and all", "run-fallback",
     json_edit("run-fallback.json", fallback_relabelled(1, "flash", FLASH_KERNEL)), "run-fallback.json", "result[1].ran"),
    ("a fallback case relabelled, its kernels dropped", "run-fallback", json_edit("run-fallback.json", fallback_unnamed),
     "run-fallback.json", "result[1].kernels"),
    ("a made-up reason a provider could not run", "hub",
     json_edit("hub.json", lambda s: s.update(unavailable="Hugging Face kernels hub: needs an A100")), "hub.json",
     "unavailable"),
    ("a reason naming another provider", "hub",
     json_edit("hub.json", lambda s: s.update(unavailable="SageAttention 1.0.6: ModuleNotFoundError: No module named "
                                                          "'sageattention'")), "hub.json", "unavailable"),
    ("a made-up layout", "flash", json_edit("flash.json", lambda s: s.update(layout="BSHD")), "flash.json", "layout"),
]


@pytest.mark.parametrize("case, record, edit, name, field", RAN_CASES, ids=[c[0] for c in RAN_CASES])
def test_what_a_record_ran_is_what_it_says(clean, tmp_path, case, record, edit, name, field):
    folder = tmp_path / "captures"
    shutil.copytree(clean, folder)
    edit(folder)
    why = records.status(record, folder)
    assert why is not None, f"{case}: not caught"
    assert "\n" not in why and name in why and field in why and "python -m attnprof" in why, why
    assert records.problems(folder)[record] == why  # the strict build refuses it with the same line


# ---- physical bounds where the record's own reference is edited along with it ----------------------

GIB = 2**30


def device_properties(change):
    def edit(trace):
        for p in trace["deviceProperties"]:
            change(p)
    return edit


def test_a_peak_above_the_gpus_memory_is_refused_with_its_trace_edited_along(clean, tmp_path):
    """A peak of 450 GiB, the trace's totalGlobalMem raised to 500 GiB with it: the bound is the table's."""
    folder = edited_both(clean, tmp_path, "flash", lambda s: set_to(s, "peak_extra_bytes", 450 * GIB),
                         device_properties(lambda p: set_to(p, "totalGlobalMem", 500 * GIB)))
    why = records.status("flash", folder)
    assert why and "\n" not in why and "flash.json" in why and "python -m attnprof" in why, why
    assert "peak_extra_bytes 483183820800 is more than the GPU's memory (151397597184 bytes)" in why, why


def test_a_peak_above_the_gpus_memory_is_refused_with_the_device_query_edited_along(clean, tmp_path):
    """A run's peak of 400 GiB, the hardware run's device query saying 500 GiB: both refused."""
    folder = edited(clean, tmp_path, "run-sweep.json",
                    lambda r: set_to(next(x for x in r["result"] if "peak_extra_bytes" in x), "peak_extra_bytes", 400 * GIB))
    hw = json.loads((folder / "run-hardware.json").read_text())
    hw["result"]["query"]["total_memory"] = 500 * GIB
    (folder / "run-hardware.json").write_text(json.dumps(hw))
    found = records.problems(folder)
    assert set(found) == {"run-sweep", "run-hardware"}, found
    assert "run-sweep.json" in found["run-sweep"] and "].peak_extra_bytes 429496729600 is more than the GPU's memory" in found["run-sweep"]
    assert "run-hardware.json" in found["run-hardware"] and "result.query.total_memory 536870912000" in found["run-hardware"]
    assert all("\n" not in why for why in found.values())


@pytest.mark.parametrize("limit", ["maxThreadsPerMultiprocessor", "regsPerMultiprocessor", "sharedMemPerMultiprocessor"])
def test_per_sm_limits_doubled_in_a_trace_are_refused(clean, tmp_path, limit):
    """Doubled threads per SM would make the occupancy table say "24 of 128" warps: the trace's per-SM
    limits are held to the table's for its GPU."""
    folder = edited_trace(edited(clean, tmp_path, "flash.json", lambda s: None), "flash",
                          device_properties(lambda p: scale(p, limit, 2)))
    why = records.status("flash", folder)
    assert why and "\n" not in why and "flash.json" in why and f"deviceProperties[0].{limit}" in why, why
    assert "NVIDIA H200" in why and "python -m attnprof capture flash" in why


def test_per_sm_limits_doubled_in_the_device_query_are_refused(clean, tmp_path):
    folder = edited(clean, tmp_path, "run-hardware.json",
                    lambda r: scale(r["result"]["query"], "max_threads_per_multi_processor", 2))
    why = records.status("run-hardware", folder)
    assert why and "\n" not in why and "result.query.max_threads_per_multi_processor 4096" in why, why


def test_a_whole_record_relabelled_as_an_unknown_gpu_is_refused(clean, tmp_path):
    """The summary and its trace's deviceProperties both say B200: consistent, but nothing bounds it."""
    def b200(s):
        s.update(device="NVIDIA B200", capability="sm_100", sm_count=148)
    folder = edited_both(clean, tmp_path, "fa4", b200, device_properties(
        lambda p: p.update(name="NVIDIA B200", computeMajor=10, computeMinor=0, numSms=148)))
    why = records.status("fa4", folder)
    assert why == ("capture fa4.json: device 'NVIDIA B200' is not in the GPU specification table, so nothing bounds "
                   "its numbers: add the GPU, with the sources of its figures, to SPECS in attnprof/analysis/hardware.py")


# ---- the drawn forward held whole: every op of every profiled forward, and their number ----------------

def forward_events(data, label="attention_forward"):
    """Each profiled forward's annotation and its device events (by correlation of the launches inside it), in
    time order, as trace.forwards counts them."""
    events = [e for e in data["traceEvents"] if e.get("ph") == "X"]
    out = []
    for ann in sorted((e for e in events if e.get("cat") == "user_annotation" and e["name"] == label), key=lambda e: e["ts"]):
        end = ann["ts"] + ann["dur"]
        corr = {e["args"]["correlation"] for e in events if e.get("cat") in trace.LAUNCH_CATS
                and (e.get("pid"), e.get("tid")) == (ann.get("pid"), ann.get("tid")) and ann["ts"] <= e["ts"] <= end}
        out.append((ann, sorted((e for e in events if e.get("cat") in trace.DEVICE_KINDS
                                 and e.get("args", {}).get("correlation") in corr), key=lambda e: e["ts"])))
    return out


def drawn_and_other(data):
    """The index of the forward a page draws, and of one neither drawn nor kept as the summary's median."""
    fwds = trace.forwards(data, "attention_forward")
    drawn, median = fwds.index(trace.typical_forward(fwds)), fwds.index(trace.median_forward(fwds))
    return drawn, next(i for i in range(len(fwds)) if i not in (drawn, median))


OVERLAP_US = 5.0  # how far the rewritten op runs into the next one: far beyond trace.AT_ONCE_US


def mul_and_softmax_swapped(folder):
    """naive's drawn forward: Mul lengthened to run OVERLAP_US into the next kernel, softmax shortened by as
    much, so the forward's sum holds; a forward neither drawn nor the median gives it back, so every op's sum
    over forwards holds too; where the drawn forward is the median one, the summary's ops are rewritten to
    match (a forger editing both), so that only the ops' overlap on one stream can give it away."""
    def edit(data):
        drawn, other = drawn_and_other(data)
        fwds = trace.forwards(data, "attention_forward")
        for index, sign in ((drawn, 1), (other, -1)):
            ops = forward_events(data)[index][1]
            mul = next(e for e in ops if "MulFunctor" in e["name"])
            softmax = next(e for e in ops if "softmax" in e["name"])
            if sign == 1:
                after = min((e for e in ops if e["ts"] > mul["ts"]), key=lambda e: e["ts"])
                delta = after["ts"] - (mul["ts"] + mul["dur"]) + OVERLAP_US
                assert softmax["dur"] > delta
                changed = {mul["name"]: delta, softmax["name"]: -delta}
            mul["dur"] += sign * delta
            softmax["dur"] -= sign * delta
        if fwds.index(trace.median_forward(fwds)) == drawn:
            summary = json.loads((folder / "naive.json").read_text())
            for op in summary["ops"]:
                op["duration_us"] += changed.get(op["name"], 0.0)
            (folder / "naive.json").write_text(json.dumps(summary, indent=1))
    return edited_trace(folder, "naive", edit)


def test_an_op_of_the_drawn_forward_rewritten_with_its_sums_kept_is_refused(clean, tmp_path):
    folder = mul_and_softmax_swapped(edited(clean, tmp_path, "naive.json", lambda s: None))
    why = records.status("naive", folder)
    assert why and "\n" not in why and "naive.json" in why and "naive.trace.json.gz" in why, why
    assert "run at once on one stream" in why and "python -m attnprof capture naive" in why, why


def test_a_kernel_that_starts_before_its_launch_is_refused(clean, tmp_path):
    def early(data):
        drawn, other = drawn_and_other(data)
        kernel = forward_events(data)[other][1][0]
        launch = next(e for e in data["traceEvents"] if e.get("cat") in trace.LAUNCH_CATS
                      and e.get("args", {}).get("correlation") == kernel["args"]["correlation"])
        shift = kernel["ts"] - (launch["ts"] - 2.0)
        for e in forward_events(data)[other][1]:  # the forward's ops move together: no two overlap
            e["ts"] -= shift
    folder = edited_trace(edited(clean, tmp_path, "flash.json", lambda s: None), "flash", early)
    why = records.status("flash", folder)
    assert why and "\n" not in why and "flash.json" in why, why
    assert "before its launch" in why and "python -m attnprof capture flash" in why, why


def test_a_profiled_forward_dropped_is_refused(clean, tmp_path):
    """The last profiled forward removed from the trace (its annotation, CPU ops, launches and device work), and
    the summary made again from what is left: consistent, but the settings profiled 3 ("of the 2 profiled")."""
    folder = edited(clean, tmp_path, "naive.json", lambda s: None)
    path = store.trace_path(folder, "naive")
    with gzip.open(path, "rt") as f:
        data = json.load(f)
    before = trace.key_averages(data)
    ann, ops = forward_events(data)[-1]
    gone = {id(e) for e in ops} | {id(e) for e in data["traceEvents"] if e.get("ph") == "X"
                                   and (e.get("pid"), e.get("tid")) == (ann.get("pid"), ann.get("tid"))
                                   and ann["ts"] <= e["ts"] <= ann["ts"] + ann["dur"]}
    gone |= {id(e) for e in data["traceEvents"] if e.get("cat") == "gpu_user_annotation"
             and e["ts"] >= min(o["ts"] for o in ops) - 1 and e["ts"] <= max(o["ts"] for o in ops)}
    data["traceEvents"] = [e for e in data["traceEvents"] if id(e) not in gone]
    with gzip.open(path, "wt") as f:
        json.dump(data, f)
    summary = json.loads((folder / "naive.json").read_text())
    summary.update(trace.summarize(data, "attention_forward"))
    after = trace.key_averages(data)
    for row in summary["key_averages"]:  # each row from the side it was of, made again
        side = next(s for s in ("device", "cpu") if (s, row["name"]) in before
                    and before[s, row["name"]]["calls"] == row["calls"])
        row.update({k: after[side, row["name"]][k] for k in trace.COLUMNS})
    (folder / "naive.json").write_text(json.dumps(summary))
    assert len(trace.forwards(data, "attention_forward")) == 2
    why = records.status("naive", folder)
    assert why and "\n" not in why and "naive.json" in why, why
    assert "ops_per_forward_each has 2 entries, but its settings' schedule keeps 3 profiled" in why, why


def one_of_each_class(clean, tmp_path):
    """One copy holding an edit of each class above: a rate above the peak, per-SM limits doubled, samples
    cut, the drawn forward rewritten with its sums kept."""
    folder = edited(clean, tmp_path, "run-ceilings.json",
                    lambda r: samples(r, "copy_us_each", lambda t: t / 2, run="ceilings"))
    for name, edit in [("cudnn.json", keep_first("event_times_us", 10)), ("flash.json", lambda s: None),
                       ("naive.json", lambda s: None)]:
        data = json.loads((folder / name).read_text())
        edit(data)
        (folder / name).write_text(json.dumps(data))
    edited_trace(folder, "flash", device_properties(lambda p: scale(p, "regsPerMultiprocessor", 2)))
    mul_and_softmax_swapped(folder)
    return folder, {"run-ceilings": "GB/s, above the GPU's peak of 4,800 GB/s",  # result.copy_gbs, twice its own
                    "cudnn": "event_times_us keeps 10 samples, but its settings' event_reps is 50",
                    "flash": "deviceProperties[0].regsPerMultiprocessor 131072 in its trace",
                    "naive": "run at once on one stream"}


def test_check_names_each_class_in_one_line(clean, tmp_path, capsys):
    from attnprof.cli import main
    folder, said = one_of_each_class(clean, tmp_path)
    assert main(["check", "--captures", str(folder)]) == 1
    out = capsys.readouterr().out.splitlines()
    for record, what in said.items():
        [line] = [l for l in out if f" {record}.json" in l and what in l]
        assert "python -m attnprof" in line, line


@pytest.mark.site
def test_the_strict_build_names_each_class_in_one_line(clean, tmp_path, build_site):
    folder, said = one_of_each_class(clean, tmp_path)
    r = build_site(tmp_path / "site", env_extra={"ATTNPROF_CAPTURES": str(folder)})
    assert r.returncode != 0
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    for record, what in said.items():
        [line] = [l for l in r.stderr.splitlines() if f" {record}.json" in l and what in l]
        assert "python -m attnprof" in line, line


def edited_report(folder, record, kernel, column, change):
    """The ncu report of `record` with one cell (`kernel`'s row, `column`) changed, its counters record parsed
    again from it: the two agree, so only what the report says is wrong."""
    import csv
    import io
    from attnprof.analysis import counters
    path = folder / f"{record}.ncu.csv"
    rows = list(csv.reader(io.StringIO(path.read_text())))
    header = rows[0]
    body = [i for i, r in enumerate(rows) if r and r[0].strip().isdigit()]
    rows[body[kernel]][header.index(column)] = change(rows[body[kernel]][header.index(column)])
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    path.write_text(out.getvalue())
    counted = json.loads((folder / f"{record}.counters.json").read_text())
    counted["kernels"] = counters.parse_csv(out.getvalue())
    (folder / f"{record}.counters.json").write_text(json.dumps(counted))
    return folder


@pytest.mark.parametrize("column, change, says", [
    ("dram__bytes.sum", lambda v: str(10 * float(v.replace(",", ""))), "kernels[2].dram_bytes over its duration_ns gives"),
    ("device__attribute_max_registers_per_multiprocessor", lambda v: "131,072",
     "its ncu report's device__attribute_max_registers_per_multiprocessor 131072.0 (the NVIDIA H200's: 65536)"),
    ("device__attribute_max_blocks_per_multiprocessor", lambda v: "64",
     "its ncu report's device__attribute_max_blocks_per_multiprocessor 64.0 (the NVIDIA H200's: 32)"),
], ids=["DRAM traffic at ten times the bandwidth", "registers per SM doubled", "blocks per SM doubled"])
def test_a_counters_report_beyond_the_gpu_is_refused(clean, tmp_path, column, change, says):
    folder = edited_report(edited(clean, tmp_path, "naive.counters.json", lambda c: None), "naive", 2, column, change)
    why = records.status("naive.counters", folder)
    assert why and "\n" not in why and "naive.counters.json" in why and says in why, why
    assert "python -m attnprof counters" in why


def test_an_op_of_the_drawn_forward_given_another_kind_is_refused(clean, tmp_path):
    """naive's Mul kernel shown as a memset in the drawn forward: every sum and every key_averages row holds."""
    median = []

    def as_memset(data):
        drawn, _ = drawn_and_other(data)
        fwds = trace.forwards(data, "attention_forward")
        median.append(fwds.index(trace.median_forward(fwds)) + 1)
        next(e for e in forward_events(data)[drawn][1] if "MulFunctor" in e["name"])["cat"] = "gpu_memset"
    folder = edited_trace(edited(clean, tmp_path, "naive.json", lambda s: None), "naive", as_memset)
    why = records.status("naive", folder)
    assert why and "\n" not in why and "naive.json" in why, why
    assert f"runs other ops (names and kinds, in launch order) than forward {median[0]}, the median one" in why, why


def test_a_counters_report_faster_than_the_peak_is_refused(clean, tmp_path):
    """FlashAttention-4's kernel under ncu made three times shorter: its forward's rate over the kernels' time
    (the roofline page's) goes past the peak."""
    record = "fa4-1x16x8192x128"
    counted = json.loads((clean / f"{record}.counters.json").read_text())
    longest = max(range(len(counted["kernels"])), key=lambda i: counted["kernels"][i]["duration_ns"])
    folder = edited_report(edited(clean, tmp_path, f"{record}.counters.json", lambda c: None), record, longest,
                           "gpu__time_duration.sum", lambda v: str(float(v.replace(",", "")) / 3))
    why = records.status(f"{record}.counters", folder)
    assert why and "\n" not in why and f"{record}.counters.json" in why, why
    assert "kernels[].duration_ns (their sum) gives" in why and "above the GPU's peak of 989.5 TFLOP/s" in why, why


def test_a_kernel_footprint_beyond_the_sm_is_refused(clean, tmp_path):
    """flash's kernel said to use 512 registers per thread (an H200 allows 255), in its summary and its trace alike."""
    name = json.loads((clean / "flash.json").read_text())["ops"][0]["name"]

    def in_trace(data):
        for e in data["traceEvents"]:
            if e.get("cat") == "kernel" and e["name"] == name:
                e["args"]["registers per thread"] = 512
    folder = edited_both(clean, tmp_path, "flash", lambda s: set_to(s["ops"][0], "registers", 512), in_trace)
    why = records.status("flash", folder)
    assert why and "\n" not in why and "flash.json" in why, why
    assert "ops[0].registers 512 is more than the SM allows (255)" in why and "python -m attnprof capture flash" in why, why


# ---- a record that cannot be read as a record: one line, never a traceback (issue 40) --------------

def first_kernel(change):
    """An edit of a trace: `change` applied to its first kernel event."""
    def edit(raw: bytes) -> bytes:
        t = json.loads(gzip.decompress(raw))
        change(next(e for e in t["traceEvents"] if e.get("cat") == "kernel"))
        return gzip.compress(json.dumps(t).encode())
    return edit


# (case, file edited, record whose line names it, the edit of its JSON or of its bytes, what the line must say);
# before, each stopped `check` with the traceback named
UNREADABLE_CASES = [
    ("raw samples emptied (StatisticsError)", "naive.json", "naive",
     lambda s: set_to(s, "event_times_us", []), "event_times_us is empty"),
    ("a run's result emptied (StopIteration in a checked sentence)", "run-sweep.json", "run-sweep",
     lambda r: set_to(r, "result", []), "result is empty"),
    ("a two-GPU record's shape removed (KeyError)", f"{CP_RECORD}.json", CP_RECORD,
     lambda s: s.pop("shape"), "its field 'shape' is missing"),
    ("a verification row's tolerance removed (KeyError)", "run-verify.json", "run-verify",
     lambda r: r["result"][0].pop("tolerance"), "its field 'tolerance' is missing"),
    ("a number as a string (TypeError)", "naive.json", "naive",
     lambda s: set_to(s, "peak_extra_bytes", "17825792"), "peak_extra_bytes holds '17825792', not a number"),
    ("an error against float64 as a string (TypeError)", "naive.json", "naive",
     lambda s: set_to(s, "rel_err", "0.01"), "rel_err is '0.01', not a number"),
    ("a median of inf", "flash.json", "flash", lambda s: set_to(s, "event_median_us", float("inf")),
     "event_median_us is inf, not a finite number"),
    ("the ranks of a two-GPU record emptied (ValueError from max)", f"{CP_RECORD}.json", CP_RECORD,
     lambda s: set_to(s, "ranks", []), "ranks is empty"),
    ("a counters record's kernels emptied", "flash.counters.json", "flash.counters",
     lambda c: set_to(c, "kernels", []), "kernels is empty"),
    ("a kernel's duration removed from the trace (KeyError)", "naive.trace.json.gz", "naive",
     first_kernel(lambda e: e.pop("dur")), "dur is None, not a finite number"),
    ("a kernel's duration a string in the trace (TypeError)", "naive.trace.json.gz", "naive",
     first_kernel(lambda e: e.update(dur="5")), "dur is '5', not a finite number"),
    ("a trace cut in half", "naive.trace.json.gz", "naive", lambda raw: raw[: len(raw) // 2], "is unreadable"),
]


@pytest.mark.parametrize("case, name, record, edit, says", UNREADABLE_CASES, ids=[c[0] for c in UNREADABLE_CASES])
def test_a_record_that_cannot_be_read_is_one_line(clean, tmp_path, case, name, record, edit, says):
    folder = tmp_path / "captures"
    shutil.copytree(clean, folder)
    path = folder / name
    if name.endswith(".gz"):
        path.write_bytes(edit(path.read_bytes()))
    else:
        data = json.loads(path.read_text())
        edit(data)
        path.write_text(json.dumps(data))
    found = records.problems(folder)  # as `check` and the strict build call it: no traceback
    why = found.get(record)
    assert why is not None, f"{case}: not caught ({found})"
    assert "\n" not in why and name.split(".trace")[0] in why and says in why and "python -m attnprof" in why, why
    assert false_statements(Build(folder, found, strict=True), DOCS) == []  # what check lists is left to its line


def test_the_prose_counts_and_clocks_of_a_run_are_its_records(clean, tmp_path):
    """How a run measured, said in the prose (value run-NAME FIELD), is read from its record: the counts of
    processes, runs and calls, and the SM clock NVML read; an edited reading moves the words with it."""
    from attnprof.site.words import count
    fastest = json.loads((clean / "run-fastest.json").read_text())
    results = [fastest["result"], *fastest["repeats"]]
    said = lambda record, field, folder=clean: re.sub(r"<[^>]+>", "", render(folder, f"<!-- attnprof: value {record} {field} -->"))
    assert said("run-fastest", "processes") == count(len(results)) == count(len(fastest["processes"]))
    assert said("run-fastest", "runs") == count(len(results[0][0]["back_to_back_us_each"]))
    assert said("run-fastest", "calls") == count(results[0][0]["back_to_back_calls"])
    clocks = [r["clocks"][k] for res in results for r in res for k in ("sm_mhz_min", "sm_mhz_max")]
    assert said("run-fastest", "sm_clock") == f"{min(clocks):,}–{max(clocks):,} MHz"

    def slower_end(data):
        data["result"]["processes"][0]["gpu"][-1]["sm_mhz"] = 1200
    folder = edited(clean, tmp_path, "run-steady.json", slower_end)
    assert said("run-steady", "sm_clock_at_end", folder).startswith("1,200–")
    with pytest.raises(Exception, match="unknown value run-fastest speed"):
        render(clean, "<!-- attnprof: value run-fastest speed -->")
