"""A record's key holds all the code it ran and the code its page shows: an edit of where a section a page
shows starts or ends, of a stage's row in the stage table, of the FLOP formula or of a kernel repository's
files stales every record that depends on it, and `check` names what changed in one line (issue 40)."""
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


def test_the_flop_formula(code):
    path = code / "attnprof" / "analysis" / "flops.py"
    text = path.read_text()
    path.write_text(text.replace("return ", "return 2 * ", 1))
    assert path.read_text() != text
    for record in ("flash", "run-sweep", "run-steady", "window.naive"):
        stale(record, "attnprof/analysis/flops.py")


def test_a_kernel_repository_file(code):
    (init,) = (code / "kernel-repos").rglob("__init__.py")
    init.write_text(init.read_text() + "\nVERSION = 2\n")
    for record in ("fa4", "fa4-1x16x8192x128", "fa4-bwd", "run-steady"):
        stale(record, str(init.relative_to(code)))
    assert records.status("flash") is None
