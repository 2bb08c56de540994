"""Capture a reader's own attention function with the stages' lens.

`python -m attnprof capture path/to/file.py:function` calls function(q, k, v) (with --mask, also the mask),
checks it against itself in float64, and takes it through the stages' capture path (capture.py). Anything
wrong with the reader's input is one CaptureError line, raised before anything is written.
"""
from __future__ import annotations

import importlib.util
import inspect
import sys
import time
import warnings
from pathlib import Path

import torch

from . import bench
from .capture import environment, measure_forward
from .numerics import make_inputs, reference, relative_error, torch_dtype
from ..model import own, store
from ..model.procedure import LABEL, CaptureError
from ..text import first_line
from ..text import shape as shape_text

DEVICE = "cuda"  # where the reader's function runs; tests set "cpu" to reach the checks after the GPU's


def parse_target(text: str) -> tuple[Path, str]:
    """`path/to/file.py:function` as (path, function name)."""
    path, sep, function = text.rpartition(":")
    if not sep or not path.endswith(".py") or not function.isidentifier():
        raise CaptureError(f"bad target {text!r}: give FILE.py:FUNCTION, e.g. snippets/window.py:naive")
    return Path(path), function


def load_function(path: Path, function: str):
    """Import the reader's file by path and return its function; one line for each way this fails."""
    if not path.is_file():
        raise CaptureError(f"no file {str(path)!r}: give the path of a Python file, relative to {Path.cwd().name}/")
    name = f"attnprof_own_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # torch.compile looks a traced function's globals up by module name
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        del sys.modules[name]
        raise CaptureError(f"cannot import {path}: {type(e).__name__}: {first_line(e)}") from None
    fn = getattr(module, function, None)
    if fn is None:
        found = sorted(n for n, v in vars(module).items() if inspect.isfunction(v) and v.__module__ == name)
        raise CaptureError(f"{path} has no function {function!r}" + (f" (it defines {', '.join(found)})" if found else ""))
    if not callable(fn):
        raise CaptureError(f"{path}:{function} is a {type(fn).__name__}, not a function")
    return fn


def check_signature(fn, function: str, with_mask: bool):
    """The capture calls function(q, k, v), or function(q, k, v, mask) with --mask: say so when it cannot."""
    call = "function(q, k, v, mask)" if with_mask else "function(q, k, v)"
    try:
        inspect.signature(fn).bind(*(["q", "k", "v"] + (["mask"] if with_mask else [])))
    except TypeError:
        raise CaptureError(f"{function}{inspect.signature(fn)} cannot be called as {call}: the capture passes "
                           f"q, k, v of shape [B, H, S, D]" + (" and the mask" if with_mask else
                           " (with --mask it also passes a mask)")) from None
    except ValueError:  # a builtin without a signature: the first call says whether it fits
        pass


def make_mask(mask: str | None, seq_len: int, device):
    """--mask causal: a boolean [S, S] mask, True where a query may see a key (SDPA's convention);
    --mask none: None. Without --mask, nothing is passed."""
    if mask == "causal":
        return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).tril()
    return None


def first_call(fn, args, q, what: str):
    """One call of the reader's function: its output, checked to be attention's output for q."""
    try:
        out = fn(*args)
        bench.sync()
    except torch.OutOfMemoryError:
        torch.cuda.empty_cache()
        raise CaptureError(f"{what} ran out of GPU memory at shape {shape_text(q.shape, ',')}: try a smaller --shape") from None
    except Exception as e:
        raise CaptureError(f"{what} raised {type(e).__name__}: {first_line(e)}"[:400]) from None
    if not isinstance(out, torch.Tensor):
        raise CaptureError(f"{what} returned a {type(out).__name__}, not a tensor: return attention's output")
    if tuple(out.shape) != tuple(q.shape):
        raise CaptureError(f"{what} returned shape {shape_text(out.shape, ',')}, not q's shape "
                           f"{shape_text(q.shape, ',')}: return [B, H, S, D]")
    if out.dtype != q.dtype:
        raise CaptureError(f"{what} returned {out.dtype}, not the inputs' {q.dtype}: return the inputs' dtype")
    return out


def title_of(fn, base: str) -> str:
    doc = inspect.getdoc(fn)
    return doc.strip().splitlines()[0].rstrip(".") if doc else base


def prepare(target: str, mask: str | None = None):
    """Everything that needs no GPU: the file, the function, its signature. Returns (path, name, fn)."""
    if mask is not None and mask not in own.MASKS:
        raise CaptureError(f"bad --mask {mask!r}: choose from {', '.join(own.MASKS)}")
    path, function = parse_target(target)
    fn = load_function(path, function)
    check_signature(fn, function, mask is not None)
    return path, function, fn


def capture_own(target: str, shape, dtype_name: str, mask: str | None = None, reference_name: str | None = None,
                out_dir=own.DEFAULT_OUT) -> dict:
    """Capture the reader's function; returns its summary (also written, as a pair, into out_dir)."""
    if reference_name is not None and reference_name not in own.REFERENCES:
        raise CaptureError(f"bad --reference {reference_name!r}: choose from {', '.join(own.REFERENCES)}")
    path, function, fn = prepare(target, mask)
    if DEVICE == "cuda" and not torch.cuda.is_available():
        raise CaptureError("no CUDA GPU on this machine: `python -m attnprof capture FILE.py:FUNCTION` profiles on "
                           "a CUDA GPU; nothing was written")
    shown = path.as_posix() if not path.is_absolute() else path.name  # no machine's paths in a record
    base = own.record_name(path, function)  # the record's name at the default shape and dtype
    own_settings = own.settings(shape, dtype_name, function, mask, reference_name)
    source_hash = own.source_hash(path)
    summary = {"record": own.record_name(path, function, shape, dtype_name), "stage": base,
               "title": title_of(fn, base), "file": shown, "function": function, "shape": list(shape),
               "dtype": dtype_name, "provider": "the reader's code", "layout": "BHSD", "label": LABEL,
               "settings": own_settings, "key": own.file_key(path, own_settings), "code": own.file_code(path, shown), "mask": mask,
               "command": own.command(shown, function, shape, dtype_name, mask, reference_name)}
    q, k, v = make_inputs(shape, torch_dtype(dtype_name), DEVICE)
    extra = [make_mask(mask, shape[2], q.device)] if mask is not None else []
    forward = lambda: fn(q, k, v, *extra)
    with torch.no_grad():
        start = time.perf_counter()
        out = first_call(fn, [q, k, v, *extra], q, f"{function}(q, k, v{', mask' if extra else ''})")
        summary["first_call_ms"] = (time.perf_counter() - start) * 1000  # includes any compilation
        # the yardstick: the same function on the same inputs in float64, compiled code run eagerly
        wide = [t.to(torch.float64) if t is not None and t.is_floating_point() else t for t in (q, k, v, *extra)]
        with torch.compiler.set_stance("force_eager"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = first_call(fn, wide, wide[0], f"{function} in float64 (the reference)")
        summary["rel_err"] = relative_error(out, ref)
        summary["reference"] = "the same function in float64"
        del ref, wide
        if reference_name == "causal":
            summary["rel_err_causal"] = relative_error(out, reference(q, k, v))
        del out
        events, measured = measure_forward(forward)
    summary.update({**environment(), "source_hash": source_hash, **measured})
    store.write_capture(Path(out_dir), summary, events)  # last: a failure above writes nothing
    return summary
