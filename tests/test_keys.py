"""A record's key is what decides its numbers: an edit of the snippets it runs, of where a section a page shows
starts or ends, of the profiled loop a page shows, of a stage's row in the stage table, of a kernel repository's
files or of the procedure's version stales every record that depends on it, and `check` names what changed in
one line; an edit of the measuring harness, the analysis or the site stales nothing (issue 52)."""
import dataclasses
import shutil

import pytest

from attnprof.analysis import records
from attnprof.model import names, snippets, store
from attnprof.model.stages import STAGES


@pytest.fixture
def code(tmp_path, monkeypatch):
    """A copy of the code the keys hash (attnprof, snippets, kernel-repos), read in place of the original."""
    for part in ("attnprof", "snippets", "kernel-repos"):
        shutil.copytree(store.ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(names, "CODE_ROOT", tmp_path)
    monkeypatch.setattr(snippets, "SNIPPETS", tmp_path / "snippets")
    return tmp_path


def stale(record, *named):
    why = records.status(record)
    assert why is not None and "\n" not in why and "is stale (" in why, why
    assert all(n in why for n in named), why
    return why


def test_the_committed_records_are_current_under_the_copy(code):
    assert all(records.status(r) is None for r in ("naive", "flash", "fa4", "run-sweep", "window.naive"))


def test_a_moved_section_marker(code):
    """naive.py's section ends one line earlier: the page would show other code; naive's records are stale."""
    path = code / "snippets" / "naive.py"
    lines = path.read_text().splitlines()
    end = next(i for i, l in enumerate(lines) if "--8<-- [end:" in l)
    above = max(i for i in range(end) if lines[i].strip() and "--8<--" not in lines[i])
    lines.insert(above, lines.pop(end))
    path.write_text("\n".join(lines) + "\n")
    stale("naive", "snippets/naive.py")
    stale("naive-bwd", "snippets/naive.py")


def test_a_comment_is_not_code(code):
    path = code / "snippets" / "naive.py"
    path.write_text("# a comment a reader added\n" + path.read_text())
    assert records.status("naive") is None


def test_a_stage_row(monkeypatch, code):
    """flash's row says cuDNN: every record that runs flash is stale, with the row named."""
    monkeypatch.setitem(STAGES, "flash", dataclasses.replace(STAGES["flash"], backend="cudnn"))
    for record in ("flash", "flash-bwd", "flash.counters", "run-timing"):
        stale(record, "the stage table's 'flash' row")
    assert records.status("cudnn") is None


HARNESS = ("attnprof/measure/gpulock.py", "attnprof/measure/worker.py", "attnprof/regenerate.py",
           "attnprof/analysis/decide.py", "attnprof/analysis/trace.py", "attnprof/analysis/flops.py",
           "attnprof/measure/bench.py", "attnprof/site/build.py")


def test_an_edit_of_the_harness_the_analysis_or_the_site_stales_nothing(code):
    for path in HARNESS:
        with open(code / path, "a") as f:
            f.write("\nEDITED = True\n")
    assert records.problems() == {}


def test_the_profiled_loop_a_page_shows(code):
    """The loop every profiled record runs, as Methods shows it: an edit inside its section stales every
    profiled record; one outside it (the rest of profiling.py) stales none."""
    path = code / "attnprof" / "measure" / "profiling.py"
    path.write_text(path.read_text() + "\nOUTSIDE = 1\n")
    assert records.status("flash") is None
    path.write_text(path.read_text().replace("step()\n            prof.step()", "step()\n            step()\n            prof.step()", 1))
    for record in ("flash", "flash-bwd", "window.naive"):
        stale(record, "attnprof/measure/profiling.py:profile")
    assert records.status("run-sweep") is None and records.status("flash.counters") is None


def test_the_procedures_version(monkeypatch, code):
    monkeypatch.setattr(names, "PROCEDURE", names.PROCEDURE + 1)
    for record in ("flash", "flash-bwd", "flash.counters", "run-sweep", "window.naive"):
        stale(record, "its settings")


def test_a_kernel_repository_file(code):
    (init,) = (code / "kernel-repos").rglob("__init__.py")
    init.write_text(init.read_text() + "\nVERSION = 2\n")
    for record in ("fa4", "fa4-1x16x8192x128", "fa4-bwd", "run-steady", "fa4.counters"):
        stale(record, str(init.relative_to(code)))
    assert records.status("flash") is None
