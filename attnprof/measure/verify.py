"""Which SDPA backend really ran for given inputs, and whether every backend computes the same thing.

`which` profiles one SDPA call and reads the backend off what ran (kernel names on a GPU, the aten
op on a CPU), beside PyTorch's own eligibility verdicts. `verify` compares every backend and provider
that runs here with a float64 reference, including a fully masked query row.
"""
from __future__ import annotations

import math
import tempfile
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F

from . import bench, dispatch
from ..analysis import kernel_names, trace
from ..model.stages import DEFAULT_SHAPE, STAGES, ProviderUnavailable, load_snippet, select
from ..text import first_line
from .numerics import default_device, reference, torch_dtype
from .sweep import Progress

ATEN_BACKEND = {  # the aten op each SDPA backend runs under, on any device
    "aten::_scaled_dot_product_flash_attention": "flash",
    "aten::_scaled_dot_product_flash_attention_for_cpu": "flash",
    "aten::_scaled_dot_product_efficient_attention": "efficient",
    "aten::_scaled_dot_product_cudnn_attention": "cudnn",
    "aten::_scaled_dot_product_attention_math": "math",
}
MASKS = ("none", "causal", "bool", "float")
LAYOUTS = ("contiguous", "transposed", "strided")

# Relative Frobenius error allowed against float64, by input dtype (INT8 providers get their own).
TOLERANCE = {"fp32": 1e-4, "fp16": 5e-3, "bf16": 2e-2}
TOLERANCE_INT8 = 5e-2


def make_case(shape, dtype_name, mask="causal", layout="contiguous", device=None, seed=0):
    """Inputs and SDPA keyword arguments for one case; `layout` is how q, k, v sit in memory:
    contiguous [B,H,S,D]; transposed: stored [B,S,H,D] and viewed as [B,H,S,D] (as most models do);
    strided: the last dimension has stride 2 (a slice of a wider tensor)."""
    if mask not in MASKS:
        raise ValueError(f"unknown mask {mask!r}: choose from {', '.join(MASKS)}")
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}: choose from {', '.join(LAYOUTS)}")
    device = device or default_device()
    b, h, s, d = shape
    gen = torch.Generator().manual_seed(seed)

    def one():
        if layout == "transposed":
            return torch.randn(b, s, h, d, generator=gen).to(device, torch_dtype(dtype_name)).transpose(1, 2)
        if layout == "strided":
            return torch.randn(b, h, s, 2 * d, generator=gen).to(device, torch_dtype(dtype_name))[..., ::2]
        return torch.randn(b, h, s, d, generator=gen).to(device, torch_dtype(dtype_name))

    q, k, v = one(), one(), one()
    future = torch.ones(s, s, dtype=torch.bool, device=device).triu(1)
    kwargs = {"none": {}, "causal": {"is_causal": True}, "bool": {"attn_mask": ~future},
              "float": {"attn_mask": torch.zeros(s, s, device=device, dtype=q.dtype).masked_fill(future, float("-inf"))}}[mask]
    return q, k, v, kwargs


def _steps(total, progress):
    """A progress bar on stderr when asked (the command line), silence otherwise (tests, pages)."""
    return Progress(total) if progress else (lambda label: None)


def which(shape, dtype_name, mask="causal", dropout=0.0, layout="contiguous", progress=False) -> dict:
    """Profile one SDPA call on this machine and report the backend that ran, and why others did not."""
    from ..model.procedure import LABEL
    from .profiling import profile_quietly
    if not 0.0 <= dropout <= 1.0:
        raise ValueError(f"bad dropout {dropout!r}: give a probability between 0 and 1")
    step = _steps(3, progress)
    q, k, v, kwargs = make_case(shape, dtype_name, mask, layout)
    forward = lambda: F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        step("profiling one call")
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "trace.json"
            with torch.no_grad():
                profile_quietly(forward, path)
            fwd = trace.median_forward(trace.forwards(trace.load(path), LABEL))
        step("asking the dispatcher")
        mask_t = kwargs.get("attn_mask")
        eligibility = dispatch.eligibility(q, k, v, mask_t, dropout, kwargs.get("is_causal", False)) if q.is_cuda else {}
        choice = dispatch.sdpa_choice(q, k, v, mask_t, dropout, kwargs.get("is_causal", False))
    aten = next((ATEN_BACKEND[c.name] for c in fwd.cpu_ops if c.name in ATEN_BACKEND), None)
    kernels = [op.name for op in fwd.ops if op.kind == "kernel"]
    step("timing")
    timing = bench.measure(lambda: F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, **kwargs))
    return {"device": torch.cuda.get_device_name(0) if q.is_cuda else "cpu", "shape": list(shape),
            "dtype": dtype_name, "mask": mask, "dropout": dropout, "layout": layout,
            "ran": kernel_names.fingerprint(kernels) if q.is_cuda else aten, "aten_backend": aten,
            "dispatcher_choice": choice, "eligibility": eligibility,
            "device_ops": len(fwd.ops), "device_us": fwd.device_us, "cpu_us": fwd.cpu_us,
            "kernels": kernels, **timing}


def errors(out: torch.Tensor, ref: torch.Tensor) -> dict:
    """Max abs error, relative Frobenius error and the worst query row (by relative error)."""
    out = out.detach().to(ref.device, torch.float64)
    diff = out - ref
    row_err = diff.norm(dim=-1) / ref.norm(dim=-1).clamp_min(1e-30)
    worst = int(torch.nan_to_num(row_err, nan=math.inf).flatten().argmax())
    b, h, s = row_err.shape
    return {"max_abs": float(diff.abs().max()), "rel_frobenius": float(diff.norm() / ref.norm()),
            "worst_row": {"batch": worst // (h * s), "head": worst // s % h, "query": worst % s,
                          "rel_err": float(row_err.flatten()[worst])},
            "nan": bool(torch.isnan(out).any())}


def candidates(device) -> dict:
    """name -> (forward(q, k, v, allowed) or None, reason if unavailable); every path we know."""
    sdpa = load_snippet("sdpa")
    out = {}
    for name in select(verify=True):
        stage = STAGES[name]
        if stage.mask_is_argument:  # pass the mask each case makes
            snippet = load_snippet(stage.snippet)
            out[name] = (lambda q, k, v, allowed, snippet=snippet: snippet.attention(q, k, v, ~allowed), None)
            continue
        if stage.backend:
            def run(q, k, v, allowed, stage=stage):
                with sdpa.only(stage.backend):
                    if not stage.takes_mask:  # only the causal flag
                        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
                    return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
            out[name] = (run, None)
            continue
        try:
            probe = torch.randn(1, 1, 128, 64, device=device, dtype=torch.float16)
            stage.prepare(probe, probe, probe)
            out[name] = (lambda q, k, v, allowed, stage=stage: stage.prepare(q, k, v)(), None)
        except ProviderUnavailable as e:
            out[name] = (None, str(e))
    return out


CASES = [  # (shape, causal mask with a fully masked first query row?)
    ((2, 4, 256, 64), False),
    ((1, 8, 1024, 128), False),
    ((2, 4, 256, 64), True),
]


# The failures the verification chapter explains, so not ones that `verify` reports, on a query row
# that may see no key: the naive softmax divides zero by zero and returns NaN there; cuDNN returns
# finite values that are not the reference's zeros.
EXPLAINED = {("naive", "NaN"), ("cudnn", "other")}


def unexpected(row) -> bool:
    """A failing row that the chapter does not explain."""
    return row["status"] == "fail" and not (row["fully_masked_row"] and (row["path"], row.get("masked_row")) in EXPLAINED)


def verify(dtypes=("bf16", "fp16", "fp32"), cases=CASES, seed=None, progress=False) -> list[dict]:
    """Every path, every dtype, every case vs float64 on fresh random inputs; one row each."""
    device = default_device()
    seed = torch.seed() % 2**31 if seed is None else seed
    rows = []
    paths = candidates(device)
    step = _steps(len(paths) * len(dtypes) * len(cases), progress)
    for name, (fn, reason) in paths.items():
        for dtype_name in dtypes:
            for shape, fully_masked in cases:
                step(f"{name} {dtype_name} {'x'.join(map(str, shape))}")
                row = {"path": name, "dtype": dtype_name, "shape": list(shape), "fully_masked_row": fully_masked,
                       "seed": seed}
                if fn is None:
                    rows.append({**row, "status": "unavailable", "reason": reason})
                    continue
                stage = STAGES[name]
                if fully_masked and not stage.takes_mask and stage.causal_corner == "top-left":
                    rows.append({**row, "status": "not applicable", "reason": "takes only a causal flag, no mask"})
                    continue
                q, k, v, _ = make_case(shape, dtype_name, "causal", device=device, seed=seed)
                s = shape[2]
                allowed = torch.ones(s, s, dtype=torch.bool, device=device).tril()
                if fully_masked and stage.causal_corner == "bottom-right":
                    # FlashAttention aligns the causal mask bottom-right: with one key fewer than
                    # queries, query i sees keys j <= i - 1, so the first query sees none.
                    k, v = k[..., :s - 1, :], v[..., :s - 1, :]
                    allowed = allowed[:, :s - 1].tril(-1)
                    row["note"] = "one key fewer than queries (causal mask aligned bottom-right)"
                elif fully_masked:
                    allowed[0] = False
                try:
                    with torch.no_grad():
                        out = fn(q, k, v, allowed)
                except (RuntimeError, ProviderUnavailable, AssertionError, TypeError, ValueError) as e:
                    rows.append({**row, "status": "unavailable", "reason": first_line(e)[:300]})
                    continue
                err = errors(out, reference(q, k, v, allowed))
                limit = TOLERANCE_INT8 if stage.tolerance == "int8" else TOLERANCE[dtype_name]
                if fully_masked:
                    first = out[..., 0, :].detach().double()
                    err["masked_row"] = "NaN" if torch.isnan(first).any() else (
                        "zeros" if bool((first == 0).all()) else "other")
                    ok = not err["nan"] and err["rel_frobenius"] <= limit
                else:
                    ok = not err["nan"] and err["rel_frobenius"] <= limit
                rows.append({**row, "status": "pass" if ok else "fail", "tolerance": limit, **err})
    return rows


# Inputs that leave SDPA's fast path on a Hopper GPU, each beside the fast path itself.
FALLBACK_CASES = [
    ("fast path (the post's inputs)", {}),
    ("head_dim 512 (flash and cuDNN stop at 256)", {"shape": (*DEFAULT_SHAPE[:3], 512)}),
    ("fp32 inputs", {"dtype_name": "fp32"}),
    ("fp16 inputs", {"dtype_name": "fp16"}),
    ("boolean attn_mask instead of is_causal", {"mask": "bool"}),
    ("additive float attn_mask", {"mask": "float"}),
    ("dropout_p=0.1", {"dropout": 0.1}),
    ("q, k, v stored [B, S, H, D] (transposed views)", {"layout": "transposed"}),
    ("last dimension strided (stride 2)", {"layout": "strided"}),
]


def fallbacks(progress=print) -> list[dict]:
    """`which` for every fallback case at the post's shape unless the case changes it."""
    rows = []
    for i, (title, change) in enumerate(FALLBACK_CASES, 1):
        progress(f"[{i}/{len(FALLBACK_CASES)}] {title}")
        args = {"shape": DEFAULT_SHAPE, "dtype_name": "bf16", **change}
        try:
            rows.append({"case": title, **which(**args)})
        except Exception as e:  # a case that breaks is a result, not a crash
            rows.append({"case": title, "error": f"{type(e).__name__}: {first_line(e)[:300]}"})
    return rows
