"""One notebook per stage chapter, written from the literate template notebook.py.tmpl and committed under
docs/notebooks/, beside the Markdown page Zensical renders it through (the `notebook` piece).

No hand-kept copy: the template's include lines are filled with the snippets and the profiling loop, as the
chapters' are. Each file's metadata hashes everything it shows (template, sections, stage row), so `check`
and both strict builds refuse a stale notebook naming what changed; `python -m attnprof notebooks` rewrites.
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from string import Template

from ..model import procedure
from ..model.stages import STAGES, Stage, ladder
from ..model.snippets import INCLUDE, ROOT, fill_includes, snippet_section

OUT = ROOT / "docs" / "notebooks"
TEMPLATE = Path(__file__).with_name("notebook.py.tmpl")
CELL = re.compile(r"^# %%(?: \[(\w+)\])?\n", re.M)
FIX = "run `python -m attnprof notebooks` and commit docs/notebooks/"


def _values(stage: Stage) -> dict:
    """What the template's placeholders become for this stage: its row of the stage table and the capture settings."""
    return dict(title=stage.title, name=stage.name, snippet=stage.snippet, backend=repr(stage.backend),
                label=repr(procedure.LABEL), warmup_calls=procedure.WARMUP_CALLS, schedule=repr(procedure.SCHEDULE))


def _text(stage: Stage) -> str:
    return Template(TEMPLATE.read_text()).substitute(_values(stage))


def cells(stage: Stage) -> list[tuple[str, str]]:
    """(kind, source) of each cell, kind "markdown" or "code", for this stage."""
    parts = CELL.split(fill_includes(_text(stage)))[1:]  # the header before the first cell is not a cell
    out = []
    for tag, body in zip(parts[::2], parts[1::2]):
        body = body.strip("\n")
        if tag == "markdown":
            out.append(("markdown", "\n".join(line[2:] for line in body.splitlines())))
        elif tag is None or tag == ("sdpa" if stage.snippet == "sdpa" else "plain"):
            out.append(("code", body))
    return out


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def made_from(stage: Stage) -> dict[str, str]:
    """A hash of each thing the notebook shows, by what a reader would edit: the template, each section it
    includes (FILE:SECTION, its text, comments and all), and the stage's row with the capture settings."""
    made = {str(TEMPLATE.relative_to(ROOT)): _hash(TEMPLATE.read_text())}
    for m in INCLUDE.finditer(_text(stage)):
        made[m["path"] + (f":{m['section']}" if m["section"] else "")] = _hash(snippet_section(ROOT / m["path"], m["section"]))
    made[f"the stage table's row {stage.name!r}"] = _hash(json.dumps(_values(stage), sort_keys=True))
    return made


def notebook(stage: Stage) -> dict:
    """The stage's notebook (nbformat 4.5), each cell's source one string; a code cell is never run."""
    return {"cells": [{"cell_type": kind, "id": f"{stage.name}-{i}", "metadata": {}, "source": source,
                       **({"execution_count": None, "outputs": []} if kind == "code" else {})}
                      for i, (kind, source) in enumerate(cells(stage))],  # stable ids: the same snippets, the same file
            "metadata": {"attnprof": {"made_from": made_from(stage)},
                         "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


def file_text(stage: Stage) -> str:
    """The stage's notebook file: what nbformat.writes gives for it (a test holds it to that), written here
    so that a build imports no Jupyter package (nbformat alone is a tenth of a second)."""
    nb = notebook(stage)
    nb["cells"] = [dict(cell, source=cell["source"].splitlines(True)) for cell in nb["cells"]]
    return json.dumps(nb, indent=1, sort_keys=True, separators=(",", ": "), ensure_ascii=False)


def page_text(stage: Stage) -> str:
    """The Markdown page Zensical renders beside the notebook (under MkDocs the hook leaves it out)."""
    return (f"<!-- Written by `python -m attnprof notebooks`: Zensical's page of {stage.name}.ipynb "
            f"(MkDocs renders the notebook itself). -->\n\n<!-- attnprof: notebook {stage.name} -->\n")


def files(stage: Stage, out: Path = OUT) -> dict[Path, str]:
    """{file: the text it must hold} for a stage: its notebook and its page."""
    return {out / f"{stage.name}.ipynb": file_text(stage), out / f"{stage.name}.md": page_text(stage)}


def stages() -> list[Stage]:
    return [STAGES[name] for name in ladder()]


def write_all(out: Path = OUT) -> list[Path]:
    """Write every stage's notebook and page where its text changed; returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for stage in stages():
        for path, text in files(stage, out).items():
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                path.write_text(text, encoding="utf-8")
                written.append(path)
    return written


def problem(stage: Stage, out: Path = OUT) -> str | None:
    """None when the stage's notebook and page are current; else one line: the file, what changed, the fix."""
    for path, text in files(stage, out).items():
        name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        try:
            found = path.read_text(encoding="utf-8")
        except OSError:
            return f"notebook file {name} is missing: {FIX}"
        if found == text:
            continue
        try:
            stated = json.loads(found)["metadata"]["attnprof"]["made_from"] if path.suffix == ".ipynb" else {}
        except (ValueError, KeyError, TypeError):
            stated = {}
        now = made_from(stage)
        changed = [source for source, h in now.items() if stated.get(source) != h] if stated else []
        why = (f"{', '.join(changed)} changed since it was written" if changed
               else "it differs from what its template, snippets and stage row make")
        return f"notebook file {name} is stale ({why}): {FIX}"
    return None


def problems(out: Path = OUT) -> list[str]:
    return [why for stage in stages() if (why := problem(stage, out))]


def read(name: str, out: Path = OUT) -> dict:
    """The committed notebook of a stage, as JSON."""
    return json.loads((out / f"{name}.ipynb").read_text(encoding="utf-8"))


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
