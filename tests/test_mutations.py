"""One edit of each class that a careful maintainer might make to the committed records (issue 33), each
applied to a copy of them: `check` (in process: records.status, records.problems, the checked sentences)
or the strict build names the file and the field in one line. The untouched copy passes."""
import gzip
import json
import logging
import shutil

import pytest

from attnprof.analysis import records
from attnprof.model import store
from attnprof.model.procedure import BWD_FLOP_FACTOR
from attnprof.model.stages import DEFAULT_SHAPE
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
