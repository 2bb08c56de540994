"""The stage table: every attention variant the site profiles, what it runs and what the site does with it.

A stage is what `capture` needs to run one variant (its snippet, whose token hash keys its records, and a
`prepare` making a zero-argument forward) and every fact other code would otherwise list (group, shapes,
colour, runs it is in, how it takes a mask). Named shapes live here too. Nothing here needs a GPU.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ..text import first_line
# the stage table runs and hashes its snippets (measure/ imports load_snippet from here)
from .snippets import ROOT, SNIPPETS, code_hash, load_snippet

if TYPE_CHECKING:  # torch is imported only where a function needs it
    import torch

FA4_REPO = ROOT / "kernel-repos" / "attnprof-flash-attn4"  # this project's kernel repository (Hub layout)

DTYPES = ("bf16", "fp16", "fp32")  # names; measure.numerics.torch_dtype maps them to torch dtypes
ITEMSIZE = {"bf16": 2, "fp16": 2, "fp32": 4}  # bytes per element of each


class ProviderUnavailable(RuntimeError):
    """A third-party kernel that cannot be loaded on this machine; the message is the reason."""


@dataclass(frozen=True)
class Stage:
    """Every fact about one stage that code elsewhere needs; lists of stages are derived from these
    (`select`), so a new stage is its snippet, one entry in STAGES and its chapter text."""
    name: str
    title: str
    snippet: str  # file name under snippets/, without .py
    backend: str | None = None  # SDPA backend to pin, None for auto or non-SDPA stages
    setup: Callable | None = None  # (snippet module, q) -> extra arguments, made once outside the forward
    provider: str = "PyTorch"  # where the kernel comes from
    layout: str = "BHSD"  # the layout the kernel takes ([batch, heads, seq, dim] or [batch, seq, heads, dim])
    wrap: str | None = None  # "compile", "reduce-overhead" (snippets/compiled.py) or "graph" (snippets/graphed.py)
    group: str = "ladder"  # where the site tells its story: "ladder", "provider" (the fused chapter) or "launch"
    shapes: tuple[str, ...] = ("post",)  # named SHAPES the site renders a capture of
    counters: tuple[str, ...] = ()  # named SHAPES whose capture also ran under Nsight Compute
    timing: tuple[str, ...] = ()  # named SHAPES the timing run measures it at, under every timing method
    fused: bool = False  # one fused attention kernel: the fastest-forward run and the fused-path claims
    sweep: bool = False  # measured in the sweep over sequence length and head dim
    backward: bool = False  # the site renders a backward capture of it
    verify: bool = False  # checked against float64 by `verify`
    takes_mask: bool = True  # takes a boolean mask; False: only the causal flag
    causal_corner: str = "top-left"  # where its causal mask is aligned when queries outnumber keys
    tolerance: str | None = None  # "int8" for a quantized kernel; None: the dtype's tolerance
    bshd_too: bool = False  # the fastest-forward run also feeds it inputs stored [B, S, H, D]
    fresh_compile: bool = False  # compiled per shape: sweep.py `prepared` resets torch.compile (the sweep keeps all)
    steady: bool = False  # the fastest forward: timed at steady state in separate processes (the steady run)
    color: str | None = None  # its colour in every chart
    short: str = ""  # its name inside a sentence ("cuDNN", "FlashAttention-4"); the title when empty
    needs: tuple[str, ...] = ()  # Python packages (import names) a provider needs where it is retaken
    repo: Path | None = None  # the kernel repository its snippet loads (its files key the stage's records)

    @property
    def snippets(self) -> list[str]:
        """Every snippet file the profiled code comes from."""
        return [self.snippet] + ([WRAPPERS[self.wrap]] if self.wrap else [])

    @property
    def mask_is_argument(self) -> bool:
        """Its forward takes the causal mask as an argument (naive attention and in-place masking)."""
        return self.setup is _mask

    def source_hash(self) -> str:
        return code_hash(*(SNIPPETS / f"{name}.py" for name in self.snippets))

    @property
    def row(self) -> dict:
        """The facts saying what it runs, hashed into the key of every record that runs it: an edit stales them."""
        facts = ("name", "title", "snippet", "backend", "provider", "layout", "wrap", "takes_mask", "causal_corner",
                 "tolerance", "short")
        return {f: getattr(self, f) for f in facts} | {"setup": self.setup and self.setup.__name__}

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
        attention = module.attention
        if self.wrap in ("compile", "reduce-overhead"):
            mode = "default" if self.wrap == "compile" else "reduce-overhead"
            attention = load_snippet("compiled").compiled(module.attention, mode=mode)
        forward = lambda: attention(q, k, v, *extra)
        if self.wrap == "graph":
            with self.context():  # record the graph with the backend pinned, as the capture runs it
                forward = load_snippet("graphed").graphed(forward)
        return forward

    def context(self):
        """Entered once around a capture, pinning the SDPA backend outside each profiled forward."""
        if self.snippet == "sdpa":
            return load_snippet("sdpa").only(self.backend)
        return contextlib.nullcontext()


WRAPPERS = {"compile": "compiled", "reduce-overhead": "compiled", "graph": "graphed"}


def _mask(module, q):
    return [module.causal_mask(q.shape[-2], q.device)]


def _block_mask(module, q):
    return [module.causal_block_mask(q.shape[-2], q.device)]


def _load_sage(module, q):
    return [module.load_sageattn()]


def _load_hub(module, q):
    return [module.load_flash_attn()]


def _load_fa4(module, q):
    """FlashAttention-4 compiles for a CUDA GPU only: say so before `kernels` reports that no build
    variant fits a CPU-only PyTorch."""
    if q.device.type != "cuda":
        raise RuntimeError(f"needs a CUDA GPU (compute capability 8.0 to 12.x); the inputs are on {q.device.type}")
    return [module.load_flash_attn4(FA4_REPO)]


SHAPES = {  # every named shape, in one place: [batch, heads, seq, head_dim]
    "post": (8, 16, 1024, 64),  # the post's
    "long": (1, 16, 8192, 128),  # a long sequence: the fused kernels' own ground
    "short": (1, 16, 256, 64),  # a forward so small that launching it costs more than running it
}
DEFAULT_SHAPE, LONG_SHAPE, SHORT_SHAPE = SHAPES["post"], SHAPES["long"], SHAPES["short"]

_TIMED = ("post", "short", "long")  # the timing run: the post's shape, one too small to fill the GPU, a long one
_FUSED = dict(fused=True, sweep=True, backward=True, verify=True, shapes=("post", "long"), counters=("post", "long"))
STAGES = {
    s.name: s
    for s in [
        Stage("naive", "Naive attention", "naive", setup=_mask, backward=True, verify=True, counters=("post",),
              timing=("post",), color="#9d7660", short="naive"),
        Stage("inplace", "In-place masking", "inplace", setup=_mask, sweep=True, backward=True, counters=("post",),
              timing=("post",), color="#e15759", short="in place"),
        Stage("math", "SDPA, math backend", "sdpa", "math", sweep=True, backward=True, verify=True,
              counters=("post",), timing=("post",), color="#f28e2b", short="math"),
        Stage("efficient", "SDPA, memory-efficient backend", "sdpa", "efficient", **_FUSED, timing=_TIMED,
              color="#499894", short="memory-efficient"),
        Stage("flash", "SDPA, flash backend", "sdpa", "flash", **{**_FUSED, "shapes": ("post", "long", "short")},
              timing=_TIMED, takes_mask=False, bshd_too=True, color="#4e79a7", short="flash"),
        Stage("cudnn", "SDPA, cuDNN backend", "sdpa", "cudnn", **{**_FUSED, "shapes": ("post", "long", "short")},
              timing=_TIMED, bshd_too=True, color="#59a14f", short="cuDNN"),
        Stage("auto", "SDPA, auto-dispatch", "sdpa", None, counters=("post",), timing=_TIMED, color="#1f9fb4",
              short="auto-dispatch"),
        Stage("flex", "FlexAttention (torch.compile)", "flex", provider="PyTorch FlexAttention",
              setup=_block_mask, group="provider", **_FUSED,
              takes_mask=False, fresh_compile=True, color="#8c6bb1", short="FlexAttention"),
        Stage("sage", "SageAttention 1.0.6", "sage", provider="SageAttention 1.0.6",
              setup=_load_sage, group="provider", needs=("sageattention",),
              **{**_FUSED, "backward": False},
              takes_mask=False, tolerance="int8", color="#e377c2", short="SageAttention"),
        Stage("hub", "FlashAttention-2 from the kernel hub", "hub", provider="Hugging Face kernels hub",
              setup=_load_hub, layout="BSHD", group="provider", fused=True,
              needs=("kernels",), shapes=("post", "long"), color="#8cd17d", short="the hub's FlashAttention-2"),
        Stage("fa4", "FlashAttention-4 through kernels", "fa4",
              provider="FlashAttention-4 (flash-attn-4 4.0.0b36) via kernels", setup=_load_fa4, repo=FA4_REPO, layout="BSHD",
              needs=("kernels", "flash_attn"), group="provider", **_FUSED, causal_corner="bottom-right",
              bshd_too=True, steady=True, color="#b6992d", short="FlashAttention-4"),
        # the CPU side: the same forwards compiled, or replayed as one CUDA graph
        Stage("naive_compiled", "Naive attention, torch.compile", "naive", setup=_mask, wrap="compile", group="launch",
              timing=("post",)),
        Stage("inplace_compiled", "In-place masking, torch.compile", "inplace", setup=_mask, wrap="compile",
              group="launch", timing=("post",)),
        # not in the timing run: its forward replays torch.compile's own CUDA graphs, which the timing run's
        # graph of 20 forwards cannot hold (replaying that recording failed with an unspecified launch failure)
        Stage("naive_reduce", "Naive attention, torch.compile reduce-overhead", "naive", setup=_mask,
              wrap="reduce-overhead", group="launch"),
        Stage("flash_graph", "SDPA flash, replayed as a CUDA graph", "sdpa", "flash", wrap="graph", group="launch",
              shapes=("post", "short")),
        Stage("cudnn_graph", "SDPA cuDNN, replayed as a CUDA graph", "sdpa", "cudnn", wrap="graph", group="launch",
              shapes=("post", "short")),
    ]
}


def select(**facts) -> list[str]:
    """Names of the stages whose facts match, in table order: `select(sweep=True)`, `select(group="ladder")`."""
    return [s.name for s in STAGES.values() if all(getattr(s, k) == v for k, v in facts.items())]


def ladder() -> list[str]:
    return select(group="ladder")


def providers() -> list[str]:
    return select(group="provider")


def site_records() -> list[tuple[str, tuple]]:
    """Every forward capture the site renders (and `check` looks for), as (stage, shape), shape by shape."""
    return [(s.name, shape) for key, shape in SHAPES.items() for s in STAGES.values() if key in s.shapes]


def timing_points() -> list[tuple[str, tuple]]:
    """Every (stage, shape) the timing run measures under every timing method, shape by shape."""
    return [(s.name, SHAPES[key]) for key in _TIMED for s in STAGES.values() if key in s.timing]


def timing_stages() -> tuple[str, ...]:
    return tuple(dict.fromkeys(stage for stage, _ in timing_points()))


def counter_records() -> list[tuple[str, tuple]]:
    """Every capture whose forward also ran under Nsight Compute, as (stage, shape)."""
    return [(s.name, shape) for key, shape in SHAPES.items() for s in STAGES.values() if key in s.counters]


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
