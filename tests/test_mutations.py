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

from attnprof.analysis import records
from attnprof.model import store
from attnprof.model.procedure import BWD_FLOP_FACTOR
from attnprof.model.stages import DEFAULT_SHAPE, STAGES
from attnprof.site import registry
from attnprof.site.build import Build
from attnprof.site.claims.statements import false_statements

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
    next(r for r in run["result"] if "median_us" in r)["oom"] = True


def cp_faster_rank(s):
    fast = min(s["ranks"], key=lambda r: r["event_median_us"])
    fast["event_median_us"] *= 1.5
    cp_slowest(s)


def cp_single_gpu(s):
    s["single_gpu"]["event_median_us"] *= 1.2
    cp_slowest(s)


def another_gpu(s):
    s.update(device="NVIDIA A100-SXM4-80GB", capability="sm_80", sm_count=108)


# (case, file edited, record whose status names it, the edit, the field the line must name)
CASES = [
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
]


@pytest.mark.parametrize("case, name, record, edit, field", CASES, ids=[c[0] for c in CASES])
def test_an_edit_is_named_with_its_file_and_field(clean, tmp_path, case, name, record, edit, field):
    why = records.status(record, edited(clean, tmp_path, name, edit))
    assert why is not None, f"{case}: not caught"
    assert "\n" not in why and name in why and field in why and "python -m attnprof" in why, why


def test_a_record_from_another_gpu_is_named(clean, tmp_path):
    """A run with no trace, taken on another GPU: consistent in itself, but not the site's GPU."""
    found = records.problems(edited(clean, tmp_path, "run-sweep.json", another_gpu))
    assert list(found) == ["run-sweep"]
    assert "run-sweep.json was taken on NVIDIA A100-SXM4-80GB (sm_80, 108 SMs)" in found["run-sweep"]
    assert "NVIDIA H200" in found["run-sweep"] and "one GPU per site" in found["run-sweep"]


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
    quoted = line.split("“", 1)[1].split("”", 1)[0]
    assert "cuDNN's" not in quoted and quoted.count(" against ") == 2


def test_check_holds_every_piece_told_what_to_find(clean, tmp_path):
    """`expect=` on a piece is a checked sentence too: flash's one call at the short shape made only 30 % longer
    than its GPU work in every process, the page's `expect=launch_dominates` is named false by check, with its
    page."""
    def no_launch(record):
        for result in [record["result"], *record.get("repeats", [])]:
            for r in result["rows"]:
                if r["stage"] == "flash" and r["shape"] == [1, 16, 256, 64]:
                    r["one_call_us"] = [1.3 * t for t in r["graph_us"][:len(r["one_call_us"])]]
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
    `fields`)."""
    def edit(folder):
        summary = json.loads((folder / f"{source}.json").read_text())
        summary.update(record=target, **fields)
        if target.split("-")[0] in STAGES:
            stage = STAGES[target.split("-")[0]]
            summary.update(stage=stage.name, title=stage.title)
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
    moved("layer.flex_attention", "layer.sdpa", function="sdpa",
          title='Llama layer, attn_implementation="sdpa"')(folder)
    json_edit("layer.sdpa.json", lambda s: s.update(settings=records.OWN.settings("layer.sdpa"),
                                                    key=records.OWN.key("layer.sdpa")))(folder)


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
