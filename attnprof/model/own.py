"""A reader's own attention, captured with the stages' lens: names, keys and staleness of its captures.

Pure (no torch); measure/own.py writes them. A reader's capture is named `<file stem>.<function>` (with
`-BxHxSxD` and `-dtype` as stage records are), keyed by the token hash of the reader's file and of the
profiled loop and the settings, and written as a stage's pair. OWN_RECORDS lists the ones the site renders.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

from . import names, store
from .procedure import DEFAULT_DTYPE
from .stages import DEFAULT_SHAPE
from .snippets import ROOT, code_hash

DEFAULT_OUT = "attnprof-captures"  # a reader's captures go here, in the current folder, unless --out says
MASKS = ("causal", "none")
REFERENCES = ("causal",)
WORKED_EXAMPLE = "snippets/window.py"  # the chapter's (docs/own-attention.md) sliding window, written three ways


def attention_functions(path) -> list[str]:
    """The functions of a file that take (q, k, v), in the order it defines them (read, not imported)."""
    tree = ast.parse((ROOT / path).read_text())
    return [f.name for f in tree.body if isinstance(f, ast.FunctionDef) and [a.arg for a in f.args.args] == ["q", "k", "v"]]


LAYER = "snippets/layer.py"  # the chapter's "A model's attention": a transformers Llama layer, one function per attn_implementation

# the readers' captures the site renders: (file, function), at the post's shape, bf16
OWN_RECORDS = [(path, name) for path in (WORKED_EXAMPLE, LAYER) for name in attention_functions(path)]


def record_name(path: str | Path, function: str, shape=DEFAULT_SHAPE, dtype_name=DEFAULT_DTYPE) -> str:
    """`window.naive` for snippets/window.py:naive at the default shape and dtype; a file stem's characters
    other than letters, digits and _ become _ (my-attn.py:f is my_attn.f), so a name is safe in any page."""
    stem = re.sub(r"\W", "_", Path(path).stem)
    return names.record_name(f"{stem}.{function}", shape, dtype_name)


def settings(shape, dtype_name, function: str, mask: str | None, reference: str | None) -> dict:
    """The stages' capture settings, without their `causal` (the reader's code decides what it masks)."""
    base = {k: v for k, v in names.settings(shape, dtype_name).items() if k != "causal"}
    return {**base, "function": function, "mask": mask, "reference": reference}


def source_hash(path: str | Path) -> str:
    """The token hash of the reader's file."""
    return code_hash(Path(path))


def file_key(path: str | Path, own_settings: dict) -> str:
    """The key of a capture of a function in the reader's file: the file, the profiled loop and the settings."""
    return names.make_key(code_hash(Path(path), names.section_text(names.PROFILED_LOOP)), own_settings)


def file_code(path: str | Path, shown: str) -> dict[str, str]:
    """What the key hashes (the file, by the name a record shows it under), each by its own hash, so a
    stale capture names what changed."""
    return {shown: source_hash(path), names.PROFILED_LOOP: names.source_hash_of([names.PROFILED_LOOP])}


def command(path: str, function: str, shape=DEFAULT_SHAPE, dtype_name=DEFAULT_DTYPE, mask=None,
            reference=None, out: str | None = None) -> str:
    """The command that (re)takes this capture."""
    extra = "" if tuple(shape) == tuple(DEFAULT_SHAPE) else f" --shape {','.join(map(str, shape))}"
    extra += "" if dtype_name == DEFAULT_DTYPE else f" --dtype {dtype_name}"
    extra += f" --mask {mask}" if mask else ""
    extra += f" --reference {reference}" if reference else ""
    extra += f" --out {out}" if out else ""
    return f"python -m attnprof capture {path}:{function}{extra}"


def site_records() -> list[str]:
    return [record_name(path, function) for path, function in OWN_RECORDS]


def recapture_fix(record: str) -> str:
    for path, function in OWN_RECORDS:
        if record == record_name(path, function):
            return f"run `{command(path, function, out=f'docs/captures/{store.GPU}')}` on a CUDA GPU"
    stem, function = record.split("-")[0].split(".", 1)
    return f"run `python -m attnprof capture {stem}.py:{function}` (with the options it was taken with) on a CUDA GPU"


def target(record: str) -> tuple[str, str]:
    """(file, function) of a reader's capture the site renders."""
    for path, function in OWN_RECORDS:
        if record_name(path, function) == record:
            return path, function
    raise ValueError(f"{record!r} is not a reader's capture the site renders")


def record_settings(record: str) -> dict:
    """The settings a reader's capture the site renders is keyed by."""
    return settings(DEFAULT_SHAPE, DEFAULT_DTYPE, target(record)[1], None, None)
