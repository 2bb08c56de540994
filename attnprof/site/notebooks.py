"""One notebook per stage chapter, made from the literate template notebook.py.tmpl at build time.

Nothing here is a hand-kept copy: the template's include lines are filled with the snippets and the
profiling loop of attnprof/measure/capture.py, as the chapters' are. The notebooks run on any CUDA
GPU at the post's shape and on a CPU at a small shape.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from string import Template

from ..model import procedure
from ..model.stages import STAGES, Stage, ladder
from ..model.snippets import ROOT, fill_includes

OUT = ROOT / ".cache" / "notebooks"
TEMPLATE = Path(__file__).with_name("notebook.py.tmpl")
CELL = re.compile(r"^# %%(?: \[(\w+)\])?\n", re.M)


def cells(stage: Stage) -> list[tuple[str, str]]:
    """(kind, source) of each cell, kind "markdown" or "code", for this stage."""
    text = Template(TEMPLATE.read_text()).substitute(
        title=stage.title, name=stage.name, snippet=stage.snippet, backend=repr(stage.backend),
        label=repr(procedure.LABEL), warmup_calls=procedure.WARMUP_CALLS, schedule=repr(procedure.SCHEDULE))
    parts = CELL.split(fill_includes(text))[1:]  # the header before the first cell is not a cell
    out = []
    for tag, body in zip(parts[::2], parts[1::2]):
        body = body.strip("\n")
        if tag == "markdown":
            out.append(("markdown", "\n".join(line[2:] for line in body.splitlines())))
        elif tag is None or tag == ("sdpa" if stage.snippet == "sdpa" else "plain"):
            out.append(("code", body))
    return out


def notebook(stage: Stage) -> dict:
    """The stage's notebook (nbformat 4.5), each cell's source one string; a code cell is never run."""
    return {"cells": [{"cell_type": kind, "id": f"{stage.name}-{i}", "metadata": {}, "source": source,
                       **({"execution_count": None, "outputs": []} if kind == "code" else {})}
                      for i, (kind, source) in enumerate(cells(stage))],  # stable ids: the same snippets, the same file
            "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


def file_text(stage: Stage) -> str:
    """The stage's notebook file: what nbformat.writes gives for it (a test holds it to that), written here
    so that a build imports no Jupyter package (nbformat alone is a tenth of a second)."""
    nb = notebook(stage)
    nb["cells"] = [dict(cell, source=cell["source"].splitlines(True)) for cell in nb["cells"]]
    return json.dumps(nb, indent=1, sort_keys=True, separators=(",", ": "), ensure_ascii=False)


def write_all(out: Path = OUT) -> dict[str, Path]:
    """Write every stage's notebook (only when its text changed); returns {site path: file}."""
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    for stage in (STAGES[name] for name in ladder()):
        path = out / f"{stage.name}.ipynb"
        text = file_text(stage)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        written[f"notebooks/{stage.name}.ipynb"] = path
    return written



def css_path() -> Path:
    """mkdocs-jupyter's JupyterLab stylesheet, which it inlines into every notebook page (~560 KiB)."""
    import mkdocs_jupyter
    return Path(mkdocs_jupyter.__file__).parent / "templates" / "mkdocs_html" / "assets" / "index.css"


CSS_URI = "stylesheets/jupyter.css"
_CLASS = re.compile(r"\.(-?[_a-zA-Z][\w-]*)")
_MARK = re.compile(r"[;{}'\"]")  # what ends or nests a block, or opens a string: the rest is skipped over


def _blocks(css: str):
    """Top-level (prelude, body) pairs of a stylesheet; a statement such as @charset has body None."""
    i, n = 0, len(css)
    while i < n:
        j, depth = i, 0
        while (m := _MARK.search(css, j)) is not None:
            j, c = m.start(), m.group()
            if c in "'\"":  # a string: nothing in it counts, up to the same quote (or the end)
                end = css.find(c, j + 1)
                j = n if end < 0 else end
            elif c == ";" and depth == 0:
                yield css[i:j].strip(), None
                break
            elif c == "{":
                if depth == 0:
                    head = j
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    yield css[i:head].strip(), css[head + 1:j]
                    break
            j += 1
        else:
            j = n
        i = j + 1


def slim_css(css: str, used: set[str]) -> str:
    """Keep only the rules that can match: a selector whose classes all appear in `used`."""
    out = []
    for prelude, body in _blocks(css):
        if body is None:
            out.append(prelude + ";")
        elif prelude.startswith(("@media", "@supports")):
            inner = slim_css(body, used)
            if inner:
                out.append(f"{prelude}{{{inner}}}")
        elif prelude.startswith("@"):
            out.append(f"{prelude}{{{body}}}")
        elif any(set(_CLASS.findall(sel)) <= used for sel in prelude.split(",")):
            out.append(f"{prelude}{{{body}}}")
    return "".join(out)


def classes_in(html: str) -> set[str]:
    return {c for attr in re.findall(r'class="([^"]*)"', html) for c in attr.split()}


def link_css(html: str, page_url: str) -> str:
    """Replace the inlined JupyterLab stylesheet of a notebook page by a link to one shared copy."""
    head = css_path().read_text(encoding="utf-8")[:200]
    start = html.find(head)
    if start < 0:
        return html
    open_tag, close = html.rfind("<style", 0, start), html.find("</style>", start)
    if open_tag < 0 or close < 0:
        return html
    href = "../" * page_url.count("/") + CSS_URI
    return html[:open_tag] + f'<link rel="stylesheet" href="{href}">' + html[close + len("</style>"):]
