"""One notebook per stage chapter, generated from the same snippets the pages include.

Nothing here is a hand-kept copy: the attention code and the profiling loop are read from
snippets/ and attnprof/measure/capture.py at build time. The notebooks run on any CUDA GPU at the post's
shape and on a CPU at a small shape.
"""
from __future__ import annotations

import re
from pathlib import Path

import nbformat

from .. import store
from ..stages import LADDER, ROOT, SNIPPETS, STAGES, snippet_section

OUT = ROOT / ".cache" / "notebooks"

SETUP = """import torch

device = "cuda" if torch.cuda.is_available() else "cpu"
# the post's shape on a GPU; a small one on a CPU so the notebook runs anywhere
B, H, S, D = (8, 16, 1024, 64) if device == "cuda" else (1, 2, 128, 32)
dtype = torch.bfloat16 if device == "cuda" else torch.float32
q, k, v = (torch.randn(B, H, S, D, device=device, dtype=dtype) for _ in range(3))"""

CHECK = """import math

def reference(q, k, v):
    q, k, v = (t.double() for t in (q, k, v))
    s = q.shape[-2]
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v

with pinned():
    out = forward()
ref = reference(q, k, v)
rel_err = ((out.double() - ref).norm() / ref.norm()).item()
print(f"relative error vs float64: {rel_err:.2e}")
assert rel_err < 2e-2, "this forward does not compute causal attention"
"""

PROFILE_PREAMBLE = f"""from torch.profiler import ProfilerActivity, profile, record_function, schedule

LABEL = {store.LABEL!r}
WARMUP_CALLS = {store.WARMUP_CALLS}
SCHEDULE = {store.SCHEDULE!r}"""

RUN_PROFILE = """with pinned():
    averages = profile_forward(forward, "trace.json")
sort_by = "self_cuda_time_total" if device == "cuda" else "self_cpu_time_total"
print(averages.table(sort_by=sort_by, row_limit=12))
print("trace written to trace.json: open it at https://ui.perfetto.dev")"""


def forward_cell(stage) -> str:
    if stage.snippet == "sdpa":
        return (f'backend = {stage.backend!r}\n'
                f'if device == "cpu" and backend not in ("math", "flash"):\n'
                f'    backend = None  # a CPU has only the math and flash backends\n'
                f'pinned = lambda: only(backend)  # entered around the check and the profile, not each call\n'
                f'forward = lambda: attention(q, k, v)')
    return ("import contextlib\n\n"
            "mask = causal_mask(S, device)  # built once, outside the forward\n"
            "pinned = contextlib.nullcontext  # nothing to pin: this stage is plain PyTorch\n"
            "forward = lambda: attention(q, k, v, mask)")


def notebook(stage) -> nbformat.NotebookNode:
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    cells = [
        md(f"# {stage.title}\n\nGenerated from `snippets/{stage.snippet}.py` and attnprof's profiling loop: "
           f"the code below is the code that was profiled for the site. Runs on a CUDA GPU "
           f"(the post's shape, bf16) or on a CPU (small shape, float32).\n\n"
           f"[Download this notebook]({stage.name}.ipynb) · [the chapter](../../{stage.name}/)"),
        code(SETUP),
        md("## The attention code"),
        code(snippet_section(SNIPPETS / f"{stage.snippet}.py", "attention")),
        code(forward_cell(stage)),
        md("## Check it against a float64 reference"),
        code(CHECK),
        md("## Profile it"),
        code(PROFILE_PREAMBLE + "\n\n" + snippet_section(ROOT / "attnprof" / "measure" / "capture.py", "profile")),
        code(RUN_PROFILE),
    ]
    for i, cell in enumerate(cells):  # stable ids: the same snippets give the same file, byte for byte
        cell.id = f"{stage.name}-{i}"
    nb = nbformat.v4.new_notebook(cells=cells)
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



def css_path() -> Path:
    """mkdocs-jupyter's JupyterLab stylesheet, which it inlines into every notebook page (~560 KiB)."""
    import mkdocs_jupyter
    return Path(mkdocs_jupyter.__file__).parent / "templates" / "mkdocs_html" / "assets" / "index.css"


CSS_URI = "stylesheets/jupyter.css"
_CLASS = re.compile(r"\.(-?[_a-zA-Z][\w-]*)")


def _blocks(css: str):
    """Top-level (prelude, body) pairs of a stylesheet; a statement such as @charset has body None."""
    i, n = 0, len(css)
    while i < n:
        j, depth, quote = i, 0, None
        while j < n:
            c = css[j]
            if quote:
                quote = None if c == quote else quote
            elif c in "'\"":
                quote = c
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
