"""SDPA's dispatcher, asked directly: which backend it would pick for these inputs, and why each
fused backend is or is not eligible, in PyTorch's own words (`can_use_*` with debug output)."""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import warnings

import torch
import torch.backends.cuda as cuda_backends
from torch.nn.attention import SDPBackend

from ..analysis.reasons import clean

BACKEND_NAMES = {SDPBackend.MATH: "math", SDPBackend.FLASH_ATTENTION: "flash",
                 SDPBackend.EFFICIENT_ATTENTION: "efficient", SDPBackend.CUDNN_ATTENTION: "cudnn"}


def sdpa_choice(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=True) -> str:
    """The backend SDPA's dispatcher picks for these inputs (torch._fused_sdp_choice)."""
    choice = SDPBackend(torch._fused_sdp_choice(q, k, v, attn_mask, dropout_p, is_causal))
    return BACKEND_NAMES.get(choice, choice.name.lower())


@contextlib.contextmanager
def captured_stderr():
    """Collect what is written to the stderr file (fd 2) inside the block, C++ code included; the
    list is filled when the block ends."""
    lines = []
    with tempfile.TemporaryFile() as err:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(err.fileno(), 2)
        try:
            yield lines
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            err.seek(0)
            lines += err.read().decode(errors="replace").splitlines()


def with_reasons(fn):
    """Run fn(); return its result and what it warned, whether PyTorch routed the warnings to
    Python or, as C++ code called outside a Python handler does, straight to the stderr file."""
    with warnings.catch_warnings(record=True) as caught, captured_stderr() as printed:
        warnings.simplefilter("always")
        result = fn()
    reasons = [clean(l) for l in [str(w.message) for w in caught] + printed]
    return result, list(dict.fromkeys(r for r in reasons if r))


def eligibility(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=True) -> dict[str, dict]:
    """For each fused backend: can it run these inputs, and the reasons PyTorch gives when not."""
    params = cuda_backends.SDPAParams(q, k, v, attn_mask, dropout_p, is_causal, False)
    checks = {"flash": cuda_backends.can_use_flash_attention,
              "efficient": cuda_backends.can_use_efficient_attention,
              "cudnn": cuda_backends.can_use_cudnn_attention}
    result = {}
    for name, check in checks.items():
        ok, reasons = with_reasons(lambda: bool(check(params, debug=True)))
        result[name] = {"eligible": ok, "reasons": reasons}
    return result
