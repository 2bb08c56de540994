"""What `check` and the strict build hold a set of records to, as a reader needs it: every record present,
current and of the right shape, one GPU per set, every checked sentence true; whatever is wrong is one line
naming the file, the field and the fix, never a traceback. A strict build refuses what a plain one shows as a
box. Readings are kept as instruments report them (Nsight Compute does not clamp a hit rate at 100 %)."""
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
from attnprof.model.stages import DEFAULT_SHAPE
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


def edited(clean, tmp_path, name, edit):
    """A copy of the clean records with `edit` applied to file `name`: to its JSON, or to the bytes of a trace."""
    folder = tmp_path / "captures"
    shutil.copytree(clean, folder)
    path = folder / name
    if name.endswith(".gz"):
        path.write_bytes(edit(path.read_bytes()))
    else:
        data = json.loads(path.read_text())
        edit(data)
        path.write_text(json.dumps(data, indent=1))
    return folder


def test_the_untouched_copy_passes(clean):
    assert records.problems(clean) == {}
    assert false_statements(Build(clean, {}, strict=True), DOCS) == []


def another_gpu(s):
    s.update(device="NVIDIA A100-SXM4-80GB", capability="sm_80", sm_count=108)


def test_a_record_from_another_gpu_is_named(clean, tmp_path):
    """A set of records is one GPU's: a record taken on another is named, with the GPU most of the set's are."""
    found = records.problems(edited(clean, tmp_path, "run-gqa.json", another_gpu))
    assert list(found) == ["run-gqa"]
    assert "run-gqa.json was taken on NVIDIA A100-SXM4-80GB" in found["run-gqa"]
    assert "NVIDIA H200" in found["run-gqa"] and "one GPU per set" in found["run-gqa"]


def first_kernel(change):
    """An edit of a trace: `change` applied to its first kernel event."""
    def edit(raw: bytes) -> bytes:
        t = json.loads(gzip.decompress(raw))
        change(next(e for e in t["traceEvents"] if e.get("cat") == "kernel"))
        return gzip.compress(json.dumps(t).encode())
    return edit


def set_to(node, key, value):
    node[key] = value


# (case, file edited, record whose line names it, the edit of its JSON or of its bytes, what the line must say)
UNREADABLE_CASES = [
    ("raw samples emptied", "naive.json", "naive", lambda s: set_to(s, "event_times_us", []), "event_times_us is empty"),
    ("a sample of inf", "flash.json", "flash", lambda s: s["event_times_us"].append(float("inf")),
     "event_times_us[50] is inf, not a finite number"),
    ("a run's result emptied", "run-sweep.json", "run-sweep", lambda r: set_to(r, "result", []), "result is empty"),
    ("a two-GPU record's label removed", f"{CP_RECORD}.json", CP_RECORD, lambda s: s.pop("label"),
     "its field 'label' is missing"),
    ("a number as a string", "naive.json", "naive", lambda s: set_to(s, "peak_extra_bytes", "17825792"),
     "peak_extra_bytes holds '17825792', not a number"),
    ("an error against float64 as a string", "naive.json", "naive", lambda s: set_to(s, "rel_err", "0.01"),
     "rel_err is '0.01', not a number"),
    ("the ranks of a two-GPU record emptied", f"{CP_RECORD}.json", CP_RECORD, lambda s: set_to(s, "ranks", []),
     "ranks is empty"),
    ("a kernel's duration removed from the trace", "naive.trace.json.gz", "naive",
     first_kernel(lambda e: e.pop("dur")), "dur is None, not a finite number"),
    ("a kernel's duration a string in the trace", "naive.trace.json.gz", "naive",
     first_kernel(lambda e: e.update(dur="5")), "dur is '5', not a finite number"),
    ("a trace cut in half", "naive.trace.json.gz", "naive", lambda raw: raw[: len(raw) // 2], "is unreadable"),
    ("a trace without its forwards", "flash.trace.json.gz", "flash",
     lambda raw: gzip.compress(json.dumps({"traceEvents": []}).encode()), "no forward annotated 'attention_forward'"),
]


@pytest.mark.parametrize("case, name, record, edit, says", UNREADABLE_CASES, ids=[c[0] for c in UNREADABLE_CASES])
def test_a_record_that_cannot_be_read_is_one_line(clean, tmp_path, case, name, record, edit, says):
    folder = edited(clean, tmp_path, name, edit)
    found = records.problems(folder)  # as `check` and the strict build call it: no traceback
    why = found.get(record)
    assert why is not None, f"{case}: not caught ({found})"
    assert "\n" not in why and name.split(".trace")[0] in why and says in why and "python -m attnprof" in why, why
    assert false_statements(Build(folder, found, strict=True), DOCS) == []  # what check lists is left to its line


def test_a_field_a_page_reads_removed_fails_the_build_in_one_line(clean, tmp_path):
    """What `check` does not read itself, the page that reads it names: the piece, and the field."""
    from attnprof.site.extension import PieceError
    folder = edited(clean, tmp_path, "run-verify.json", lambda r: r["result"][0].pop("dtype"))
    for strict in (True, False):
        with pytest.raises(PieceError, match=r"<!-- attnprof: verify -->: its field 'dtype' is missing$"):
            render(folder, "<!-- attnprof: verify -->", strict)


def test_a_missing_record_trace_or_report_is_one_line(clean, tmp_path):
    folder = tmp_path / "captures"
    shutil.copytree(clean, folder)
    for name in ("run-ceilings.json", "cudnn.trace.json.gz", "flash.ncu.csv"):
        (folder / name).unlink()
    found = records.problems(folder)
    assert "run-ceilings.json is missing" in found["run-ceilings"]
    assert "cudnn.trace.json.gz" in found["cudnn"] and "capture cudnn" in found["cudnn"]
    assert "flash.ncu.csv is missing" in found["flash.counters"] and "counters flash" in found["flash.counters"]


def test_an_l2_hit_rate_above_100_is_a_reading_as_nsight_compute_reports_it(clean, tmp_path):
    """Nsight Compute does not clamp out-of-range values (hits and queries come from different replay passes):
    a report's 100.14 % is read as it is, and nothing refuses it."""
    folder = tmp_path / "captures"
    shutil.copytree(clean, folder)
    path = folder / "math.ncu.csv"
    rows = list(csv.reader(io.StringIO(path.read_text())))
    column = rows[0].index("lts__t_sector_hit_rate.pct")
    first = next(i for i, r in enumerate(rows) if r and r[0].strip().isdigit())
    rows[first][column] = "100.14"
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    path.write_text(out.getvalue())
    assert records.status("math.counters", folder) is None
    assert records.load_counters("math", folder)["kernels"][0]["l2_hit_pct"] == 100.14


def cudnn_slower(record):
    """Raw samples edited in every process of the timing run: cuDNN's one call made slow at the post's shape."""
    for result in [record["result"], *record.get("repeats", [])]:
        for r in result["rows"]:
            if r["stage"] == "cudnn" and tuple(r["shape"]) == DEFAULT_SHAPE:
                r["one_call_us"] = [3 * t for t in r["one_call_us"]]


def test_check_evaluates_every_checked_sentence(clean, tmp_path):
    folder = edited(clean, tmp_path, "run-timing.json", cudnn_slower)
    assert records.status("run-timing", folder) is None  # the record itself is usable
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


def one_of_each_class(clean, tmp_path):
    """One copy holding one problem of each class: stale, malformed, missing, another GPU."""
    folder = edited(clean, tmp_path, "cudnn.json", lambda s: set_to(s, "key", "0" * 16))
    for name, edit in [("naive.json", lambda s: set_to(s, "rel_err", "0.01")), ("run-gqa.json", another_gpu)]:
        data = json.loads((folder / name).read_text())
        edit(data)
        (folder / name).write_text(json.dumps(data))
    (folder / "flash.trace.json.gz").unlink()
    (folder / "math.json").unlink()
    return folder, {"cudnn": "is stale", "naive": "rel_err is '0.01', not a number", "math": "math.json is missing",
                    "flash": "flash.trace.json.gz", "run-gqa": "was taken on NVIDIA A100-SXM4-80GB"}


def test_check_names_each_class_in_one_line(clean, tmp_path, capsys):
    from attnprof.cli import main
    folder, said = one_of_each_class(clean, tmp_path)
    assert main(["check", "--captures", str(folder)]) == 1
    out = capsys.readouterr().out.splitlines()
    for record, what in said.items():
        [line] = [l for l in out if re.search(rf"\b{record}(\.json|')", l) and what in l]
        assert "python -m attnprof" in line, line


@pytest.mark.site
def test_the_strict_build_names_each_class_in_one_line(clean, tmp_path, build_site):
    folder, said = one_of_each_class(clean, tmp_path)
    r = build_site(tmp_path / "site", env_extra={"ATTNPROF_CAPTURES": str(folder)})
    assert r.returncode != 0
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    for record, what in said.items():
        [line] = [l for l in r.stderr.splitlines() if re.search(rf"\b{record}(\.json|')", l) and what in l]
        assert "python -m attnprof" in line, line


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
