"""The stages of the ladder: which snippet each one runs and how its inputs are made.

A stage is everything `capture` needs to run one attention variant: the snippet file (whose source
hash marks a capture stale when it changes) and a `prepare` that turns inputs into a zero-argument
forward. Nothing here needs a GPU.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from .text import first_line

if TYPE_CHECKING:  # torch is imported only where a function needs it
    import torch

ROOT = Path(__file__).resolve().parents[1]
SNIPPETS = ROOT / "snippets"

DEFAULT_SHAPE = (8, 16, 1024, 64)  # the post's [batch, heads, seq, head_dim]
DTYPES = ("bf16", "fp16", "fp32")  # names; measure.numerics.torch_dtype maps them to torch dtypes


def load_snippet(name: str):
    """Import snippets/<name>.py by path, so it works from a checkout without installing."""
    path = SNIPPETS / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"attnprof_snippet_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class ProviderUnavailable(RuntimeError):
    """A third-party kernel that cannot be loaded on this machine; the message is the reason."""


@dataclass(frozen=True)
class Stage:
    name: str
    title: str
    snippet: str  # file name under snippets/, without .py
    backend: str | None = None  # SDPA backend to pin, None for auto or non-SDPA stages
    setup: Callable | None = None  # (snippet module, q) -> extra arguments, made once outside the forward
    provider: str = "PyTorch"  # where the kernel comes from
    layout: str = "BHSD"  # the layout the kernel takes ([batch, heads, seq, dim] or [batch, seq, heads, dim])

    def source_hash(self) -> str:
        return hashlib.sha256((SNIPPETS / f"{self.snippet}.py").read_bytes()).hexdigest()[:16]

    def prepare(self, q, k, v) -> Callable[[], torch.Tensor]:
        """A zero-argument forward over these inputs; its extra arguments (a mask, a loaded kernel)
        are made here, once. A provider that cannot load raises ProviderUnavailable with the reason."""
        module = load_snippet(self.snippet)
        try:
            extra = self.setup(module, q) if self.setup else []
        except Exception as e:
            if self.provider == "PyTorch":
                raise
            raise ProviderUnavailable(f"{self.provider}: {type(e).__name__}: {first_line(e)}"[:400]) from None
        return lambda: module.attention(q, k, v, *extra)

    def context(self):
        """Entered once around a whole capture: pins the SDPA backend, so the pinning itself is not
        part of each profiled forward."""
        if self.snippet == "sdpa":
            return load_snippet("sdpa").only(self.backend)
        return contextlib.nullcontext()


def _mask(module, q):
    return [module.causal_mask(q.shape[-2], q.device)]


STAGES = {
    s.name: s
    for s in [
        Stage("naive", "Naive attention", "naive", setup=_mask),
        Stage("inplace", "In-place masking", "inplace", setup=_mask),
        Stage("math", "SDPA, math backend", "sdpa", "math"),
        Stage("efficient", "SDPA, memory-efficient backend", "sdpa", "efficient"),
        Stage("flash", "SDPA, flash backend", "sdpa", "flash"),
        Stage("cudnn", "SDPA, cuDNN backend", "sdpa", "cudnn"),
        Stage("auto", "SDPA, auto-dispatch", "sdpa", None),
        Stage("flex", "FlexAttention (torch.compile)", "flex", provider="PyTorch FlexAttention",
              setup=lambda m, q: [m.causal_block_mask(q.shape[-2], q.device)]),
        Stage("sage", "SageAttention 1.0.6", "sage", provider="SageAttention 1.0.6",
              setup=lambda m, q: [m.load_sageattn()]),
        Stage("hub", "FlashAttention-2 from the kernel hub", "hub", provider="Hugging Face kernels hub",
              setup=lambda m, q: [m.load_flash_attn()], layout="BSHD"),
    ]
}
LADDER = ["naive", "inplace", "math", "efficient", "flash", "cudnn", "auto"]
PROVIDERS = ["flex", "sage", "hub"]
LONG_SHAPE = (1, 16, 8192, 128)
# every capture the site renders: (stage, shape); `check` and the build look for exactly these
SITE_RECORDS = [(name, DEFAULT_SHAPE) for name in STAGES] + [
    (name, LONG_SHAPE) for name in ("efficient", "flash", "cudnn", *PROVIDERS)]


def get_stage(name: str) -> Stage:
    if name not in STAGES:
        raise ValueError(f"unknown stage {name!r}: choose from {', '.join(STAGES)}")
    return STAGES[name]


def parse_shape(text: str) -> tuple[int, int, int, int]:
    parts = text.split(",")
    try:
        shape = tuple(int(p) for p in parts)
    except ValueError:
        shape = ()
    if len(shape) != 4 or min(shape) < 1:
        raise ValueError(f"bad shape {text!r}: give four positive integers B,H,S,D, e.g. 8,16,1024,64")
    return shape


def snippet_section(path: str | Path, section: str | None = None) -> str:
    """The lines of a file between `--8<-- [start:NAME]` and `--8<-- [end:NAME]` markers, as
    pymdownx.snippets shows them (marker lines dropped); the whole file when `section` is None."""
    lines = Path(path).read_text().splitlines()
    if section is None:
        return "\n".join(l for l in lines if "--8<-- [" not in l)
    start, end = f"--8<-- [start:{section}]", f"--8<-- [end:{section}]"
    try:
        i = next(n for n, l in enumerate(lines) if l.strip().endswith(start))
        j = next(n for n, l in enumerate(lines) if n > i and l.strip().endswith(end))
    except StopIteration:
        raise ValueError(f"{path} has no section {section!r}") from None
    return "\n".join(l for l in lines[i + 1:j] if "--8<-- [" not in l)


INCLUDE = re.compile(r'^(?P<indent>[ \t]*)--8<--\s+"(?P<path>[^":]+)(?::(?P<section>[\w-]+))?"\s*$', re.M)


def fill_includes(text: str) -> str:
    """Replace each `--8<-- "FILE:SECTION"` line (pymdownx.snippets' syntax, FILE relative to the
    repository) with that section of FILE, indented like the line."""
    def include(m):
        body = snippet_section(ROOT / m["path"], m["section"])
        return "\n".join(m["indent"] + line if line else line for line in body.splitlines())
    return INCLUDE.sub(include, text)
