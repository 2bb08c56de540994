"""One notebook per stage chapter, made from the literate template notebook.py.tmpl at build time.

Nothing here is a hand-kept copy: the template's include lines are filled with the snippets and the
profiling loop of attnprof/measure/capture.py, as the chapters' are. The notebooks run on any CUDA
GPU at the post's shape and on a CPU at a small shape.
"""
from __future__ import annotations

import re
from pathlib import Path
from string import Template

import nbformat

from .. import store
from ..stages import LADDER, ROOT, STAGES, Stage, fill_includes

OUT = ROOT / ".cache" / "notebooks"
TEMPLATE = Path(__file__).with_name("notebook.py.tmpl")
CELL = re.compile(r"^# %%(?: \[(\w+)\])?\n", re.M)


def cells(stage: Stage) -> list[tuple[str, str]]:
    """(kind, source) of each cell, kind "markdown" or "code", for this stage."""
    text = Template(TEMPLATE.read_text()).substitute(
        title=stage.title, name=stage.name, snippet=stage.snippet, backend=repr(stage.backend),
        label=repr(store.LABEL), warmup_calls=store.WARMUP_CALLS, schedule=repr(store.SCHEDULE))
    parts = CELL.split(fill_includes(text))[1:]  # the header before the first cell is not a cell
    out = []
    for tag, body in zip(parts[::2], parts[1::2]):
        body = body.strip("\n")
        if tag == "markdown":
            out.append(("markdown", "\n".join(line[2:] for line in body.splitlines())))
        elif tag is None or tag == ("sdpa" if stage.snippet == "sdpa" else "plain"):
            out.append(("code", body))
    return out


def notebook(stage: Stage) -> nbformat.NotebookNode:
    new = {"markdown": nbformat.v4.new_markdown_cell, "code": nbformat.v4.new_code_cell}
    nb = nbformat.v4.new_notebook(cells=[new[kind](source) for kind, source in cells(stage)])
    for i, cell in enumerate(nb.cells):  # stable ids: the same snippets give the same file, byte for byte
        cell.id = f"{stage.name}-{i}"
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def write_all(out: Path = OUT) -> dict[str, Path]:
    """Write every stage's notebook (only when its text changed); returns {site path: file}."""
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    for stage in (STAGES[name] for name in LADDER):
        path = out / f"{stage.name}.ipynb"
        text = nbformat.writes(notebook(stage))
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        written[f"notebooks/{stage.name}.ipynb"] = path
    return written
