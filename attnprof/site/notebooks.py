"""One notebook per stage chapter, generated from the same snippets the pages include.

Nothing here is a hand-kept copy: the attention code and the profiling loop are read from
snippets/ and attnprof/measure/capture.py at build time. The notebooks run on any CUDA GPU at the post's
shape and on a CPU at a small shape.
"""
from __future__ import annotations

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
