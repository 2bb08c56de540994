"""Measurement runs beyond the ladder (sweeps, serving shapes, verification), each written as
one stamped JSON record in the captures folder: `python -m attnprof sweep [--only NAME,...]`."""
from __future__ import annotations

import time
import traceback

import torch

from . import graphs, serving, sweep, timing, verify
from .. import derived, records, store
from ..text import first_line

RUNS = {
    "ceilings": lambda: sweep.ceilings(),
    "hardware": lambda: sweep.hardware(),
    "sweep": lambda: sweep.sweep(),
    "fastest": lambda: sweep.fastest(),
    "recompile": lambda: sweep.recompile_limit(),
    "fallback": lambda: verify.fallbacks(),
    "verify": lambda: verify.verify(),
    "gqa": lambda: serving.gqa(),
    "decode": lambda: serving.decode(),
    "varlen": lambda: serving.varlen(),
    "e2e": lambda: serving.end_to_end(),
    "decode_step": lambda: serving.decode_step(),
    "graphs": lambda: graphs.graphs(),
    "timing": lambda: timing.timing(),
}


def run(names, out_dir=store.CAPTURES) -> dict[str, str]:
    """Run each named measurement and write `run-<name>.json`; a failing run is reported and the
    others go on. Returns {name: "ok" | error line}."""
    from .capture import environment, require_cuda
    require_cuda("sweep")
    status = {}
    for name in names:
        if name not in RUNS:
            raise ValueError(f"unknown run {name!r}: choose from {', '.join(RUNS)}")
    for name in names:
        print(f"== {name}", flush=True)
        start = time.perf_counter()
        try:
            result = RUNS[name]()
        except Exception as e:
            traceback.print_exc()
            status[name] = f"{type(e).__name__}: {first_line(e)}"
            torch.cuda.empty_cache()
            continue
        record = {"record": f"run-{name}", "run": name, "key": records.RUN.key(f"run-{name}"),
                  "code": records.RUN.code(f"run-{name}"), "settings": records.RUN.settings(f"run-{name}"),
                  "wall_s": time.perf_counter() - start, **environment(), "result": derived.derive(name, result)}
        store.write_json(out_dir, f"run-{name}", record)
        status[name] = "ok"
        print(f"   {name}: {record['wall_s']:.0f} s", flush=True)
    return status
