"""One capture as a page of its own, through the site's pieces and its Markdown extension (no MkDocs).

`python -m attnprof report RECORD [--against STAGE] -o page.html` writes one standalone HTML page, the trace
inside it as a data: URL so that it opens offline; `attnprof.display(record)` renders the same in Jupyter.
"""
from __future__ import annotations

import base64
import re
from pathlib import Path

from ..analysis import compare
from ..model import names, store
from ..model.procedure import LABEL, CaptureError
from ..analysis import trace as traces
from ..model.snippets import ROOT
from ..text import escape
from .build import Build

PERFETTO_JS = ROOT / "docs" / "javascripts" / "perfetto.js"

CSS = """
.attnprof-report { color-scheme: light dark; --md-default-bg-color: #fff; --fg: #1f2328; --line: rgba(128,128,128,.3);
  --code: rgba(128,128,128,.12); --accent: #3f51b5; --info: #00b8d4; --warn: #ff9100;
  background: var(--md-default-bg-color); color: var(--fg); font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
@media (prefers-color-scheme: dark) {
  .attnprof-report { --md-default-bg-color: #1e2129; --fg: #e3e6eb; --accent: #aab4ff; } }
.attnprof-report h1 { font-size: 1.6rem; margin: .5rem 0; } .attnprof-report h2 { font-size: 1.2rem; margin-top: 2rem; }
.attnprof-report a { color: var(--accent); }
.attnprof-report code { background: var(--code); padding: 0 .25em; border-radius: .2em; font-size: .88em; }
.attnprof-report table { border-collapse: collapse; font-size: 12px; margin: .8em 0; }
.attnprof-report th, .attnprof-report td { border-bottom: 1px solid var(--line); padding: .35em .6em; text-align: left;
  vertical-align: top; }
.attnprof-report td code, .attnprof-report th code { white-space: nowrap; }
.attnprof-report .admonition, .attnprof-report details { border-left: .25rem solid var(--info); background: var(--code);
  padding: .2em .9em; margin: 1em 0; border-radius: .2rem; }
.attnprof-report .admonition.warning, .attnprof-report .admonition.failure { border-left-color: var(--warn); }
.attnprof-report .admonition-title { font-weight: 600; margin: .4em 0; }
.attnprof-report .md-button { display: inline-block; border: 1px solid var(--accent); border-radius: .2rem;
  padding: .3em 1em; margin: 0 .4em .4em 0; text-decoration: none; font-weight: 600; }
.attnprof-report .attnprof-perfetto[aria-busy="true"] { opacity: .6; cursor: progress; }
.attnprof-report svg[role="img"] { width: 100%; height: auto; }
.attnprof-report .attnprof-trace, .attnprof-report .attnprof-figure { overflow-x: auto; margin: 1em 0; }
.attnprof-report .attnprof-trace svg { min-width: 1040px; }
.attnprof-report .attnprof-side { display: flex; flex-wrap: wrap; gap: 1.5rem; }
.attnprof-report .attnprof-side > div { flex: 1 1 560px; min-width: 0; overflow-x: auto; }
"""
PAGE_CSS = "body { margin: 0; } main.attnprof-report { max-width: 1360px; margin: 0 auto; padding: 1rem 1.5rem 3rem; }"


class Captures(Build):
    """A Build over records from several folders (a reader's beside the site's), each read where it was found
    and checked as it is added (compare.load)."""

    def __init__(self):
        super().__init__(store.CAPTURES, problems={})
        self.found: dict[str, Path] = {}

    def add(self, arg: str, captures=None, summary: dict | None = None) -> str:
        """The record named by `arg` (a record, looked for in `captures` (by default attnprof-captures/) and then
        in the site's set of records, or the path of a capture's .json), checked; returns its name."""
        record, where = compare.locate(arg, captures)
        if record in self.found and Path(self.found[record]).resolve() != Path(where).resolve():
            raise ValueError(f"two captures are named {record!r}: copy one under another name to compare them")
        self._summaries[record] = summary or compare.load(arg, captures)
        self.found[record] = Path(where)
        return record

    def summary(self, record: str) -> dict:
        return self._summaries[record]

    def trace(self, record: str) -> dict:
        if record not in self._traces:
            self._traces[record] = traces.load(store.trace_path(self.found[record], record))
        return self._traces[record]

    def read_forwards(self, record: str) -> list[traces.Forward]:
        s = self.summary(record)
        return traces.forwards(self.trace(record), s["label"], s.get("follow_autograd", False))


def page_markdown(record: str, against: str | None = None, title: str = "") -> str:
    """The report as the site's Markdown: one directive per piece."""
    parts = [f"# {title}" if title else "",
             f"<!-- attnprof: stamp {record} -->",
             "## The op list", f"<!-- attnprof: ops {record} -->", f"<!-- attnprof: gaps {record} -->",
             "## One forward", f"<!-- attnprof: trace {record} -->",
             "## The kernels, decoded", f"<!-- attnprof: kernels {record} -->",
             "## key_averages", f"<!-- attnprof: key-averages {record} -->"]
    if against:
        parts += [f"## Against <code>{escape(against)}</code>", f"<!-- attnprof: align {against} {record} -->"]
    return "\n\n".join(p for p in parts if p)


def render(build: Captures, text: str) -> str:
    """Markdown to self-contained HTML: traces and summaries as data: URLs, links to chapters as their text."""
    try:  # the measure extra installs both (pyproject.toml); nothing of MkDocs is needed
        import markdown
        from .extension import PiecesExtension
        md = markdown.Markdown(extensions=["admonition", "attr_list", "md_in_html", "tables", "pymdownx.details",
                                           "pymdownx.superfences", PiecesExtension(build=build, names_once=False)])
    except ImportError as e:
        raise CaptureError(f"a report renders through Python-Markdown and pymdown-extensions, and {e.name or 'one'} "
                           f"is not installed here: pip install -e '.[measure]'") from None
    out = md.convert(text)
    for record, folder in build.found.items():
        for path, kind in ((store.trace_path(folder, record), "application/gzip"),
                           (store.summary_path(folder, record), "application/json")):
            if not path.is_file():  # a notebook's own profile: no committed pair to link
                continue
            data = base64.b64encode(path.read_bytes()).decode()
            out = re.sub(f'href="captures/[^"/]+/{re.escape(path.name)}"',
                         f'download="{escape(path.name)}" href="data:{kind};base64,{data}"', out)
    out = re.sub(r'<a href="[^":]+\.md(?:#[^"]*)?">(.*?)</a>', r"\1", out)  # the site's chapters are not here
    return re.sub(r":material-[\w-]+: ?", "", out)  # the site's icons


def document(title: str, body: str) -> str:
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{escape(title)}</title><style>{CSS}{PAGE_CSS}</style></head>\n"
            f'<body><main class="attnprof-report">\n{body}\n</main>\n'
            f"<script>{PERFETTO_JS.read_text()}</script></body></html>\n")


def page(arg: str, against: str | None = None, captures=None) -> str:
    build = Captures()
    record = build.add(arg, captures)
    other = build.add(against, captures) if against else None
    s = build.summary(record)
    title = f"{s.get('title', record)} ({record})"
    body = render(build, page_markdown(record, other, escape(title)))
    return document(f"attnprof report: {title}", body)


def write(arg: str, out: str | Path, against: str | None = None, captures=None) -> int:
    """Write the report page; returns its size in bytes. Nothing is written when it cannot be made."""
    data = page(arg, against, captures).encode()
    Path(out).write_bytes(data)
    return len(data)


# ---- in a notebook ----------------------------------------------------------------------------------

class Display:
    """What `attnprof.display` returns: Jupyter shows its HTML (the pieces, inline SVG, hover titles)."""

    def __init__(self, body: str, text: str):
        self.body, self.text = body, text

    def _repr_html_(self) -> str:
        return f'<div class="attnprof-report"><style>{CSS}</style>{self.body}</div>'

    def __repr__(self) -> str:
        return self.text


class Failure(Display):
    """What `display` shows where it cannot render: the one line `report` prints."""

    def _repr_html_(self) -> str:
        return self.body


def from_trace(path, shape, dtype_name: str = "bf16", rel_err: float | None = None, name: str = "this-gpu") -> tuple[dict, dict]:
    """(summary, trace) of a profile the stages' loop wrote outside attnprof (a "Run it yourself" notebook):
    what trace.summarize reads off it; no CUDA-event timing, the numerics only when given."""
    events = traces.load(path)
    props = (events.get("deviceProperties") or [{}])[0]
    summary = {"record": name, "stage": name, "title": f"Your profile on {props.get('name', 'the CPU')}",
               "device": props.get("name", "CPU"), "shape": list(shape), "dtype": dtype_name, "label": LABEL,
               "settings": names.settings(shape, dtype_name), "rel_err": rel_err,
               "reference": "attention in float64 (causal)", **traces.summarize(traces.forwards(events, LABEL))}
    return summary, events


def display(record, against: str | None = None, shape=None, dtype_name: str = "bf16", rel_err: float | None = None,
            captures=None) -> Display:
    """The site's pieces for `record` inline in Jupyter: a record (looked for in `captures`, by default
    attnprof-captures/, then in the site's set), a capture's .json, or a trace profile_forward wrote (give its
    `shape`). With `against`, the two op lists and traces side by side, then the `align` comparison. Without
    the Markdown stack, it shows the one line `report` prints, not a traceback."""
    try:
        return _display(record, against, shape, dtype_name, rel_err, captures)
    except CaptureError as e:
        line = f"error: {e}"
        return Failure(f"<p>{escape(line)}</p>", line)


def _display(record, against, shape, dtype_name, rel_err, captures) -> Display:
    build = Captures()
    if shape is not None:  # a raw profile: summarize it here
        summary, events = from_trace(record, shape, dtype_name, rel_err)
        name = summary["record"]
        build._summaries[name], build._traces[name], build.found[name] = summary, events, Path(record).parent
    else:
        name = build.add(str(record), captures)
    if against is None:
        body = render(build, page_markdown(name))
        return Display(body, f"attnprof capture {name}")
    other = build.add(against, captures)
    mine, theirs = build.summary(name), build.summary(other)
    def side(record, s):
        if not s["ops"]:
            return (f"### {escape(s['device'])}\n\nThis profile holds no GPU work (it ran on "
                    f"{escape(s['device'])}): no device ops to list, and nothing to compare op by op.")
        return (f"### {escape(s['title'])}: {escape(s['device'])}\n\n<!-- attnprof: ops {record} -->\n\n"
                f"<!-- attnprof: trace {record} -->")
    text = (f'<div class="attnprof-side" markdown="1">\n<div markdown="1">\n\n{side(name, mine)}\n\n</div>\n'
            f'<div markdown="1">\n\n{side(other, theirs)}\n\n</div>\n</div>\n\n')
    if mine["ops"]:
        text += f"### The diff\n\n<!-- attnprof: align {other} {name} -->"
    return Display(render(build, text), f"attnprof: {name} beside {other}")
