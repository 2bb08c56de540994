"""Independent repeats of a measurement, each in a process of its own (a fresh CUDA context).

    python -m attnprof.measure.repeat MODULE.FUNCTION OUT_JSON [ARG ...]

runs `attnprof.measure.MODULE.FUNCTION(*ARGS)` and writes its result, as JSON, to OUT_JSON. `in_processes`
starts such a process once per repeat, one after the other, and collects their results; what the
measuring code prints goes to this process's output (a regeneration's log). A repeat measures the
kernels, not their compilation: the repeats share this process's compile caches (Inductor's and Triton's
folders, as the environment names them) and FlashAttention-4's on-disk cache of compiled kernels.
"""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from ..model import store
from ..text import first_line

TIMEOUT_S = 600  # one repeat that takes longer has hung


def env() -> dict:
    cache = Path(tempfile.gettempdir()) / "attnprof-flash-attn4-cache"
    return dict(os.environ, PYTHONUNBUFFERED="1", FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED="1",
                FLASH_ATTENTION_CUTE_DSL_CACHE_DIR=str(cache))


def in_processes(function: str, times: int, *args: str) -> list[dict]:
    """The result of `function` (MODULE.FUNCTION under attnprof/measure/) in each of `times` fresh
    processes; a process that fails is {"error": its last line}, and the others go on."""
    results = []
    for _ in range(times):
        with tempfile.TemporaryDirectory(prefix="attnprof-repeat-") as folder:
            out = Path(folder) / "result.json"
            try:
                done = subprocess.run([sys.executable, "-m", __name__, function, str(out), *args], env=env(),
                                      stderr=subprocess.PIPE, text=True, timeout=TIMEOUT_S)
                lines = done.stderr.strip().splitlines()
                why = first_line(lines[-1]) if lines else f"exit status {done.returncode}"
                if lines:
                    print(done.stderr, file=sys.stderr, flush=True)
            except subprocess.TimeoutExpired:
                why = f"gave no result in {TIMEOUT_S} s and was stopped"
            results.append(json.loads(out.read_text()) if out.exists() else {"error": why[:300]})
    return results


def main(function: str, out: str, *args: str):
    module, attribute = function.split(".")
    result = getattr(importlib.import_module(f"{__package__}.{module}"), attribute)(*args)
    store.write_json(Path(out).parent, Path(out).stem, result)


if __name__ == "__main__":
    main(*sys.argv[1:])
