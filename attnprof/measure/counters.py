"""Hardware counters on a CUDA GPU: one forward of a stage under Nsight Compute.

`collect` runs this module as a child under `ncu`: the child warms the forward up outside the
profiled range, then runs exactly one forward between cudaProfilerStart and cudaProfilerStop, so
ncu profiles that forward's kernels and nothing else (`--profile-from-start off`). Clocks are left
as they are (`--clock-control none`), so durations compare with the captures'.
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .. import counters, records, store
from ..stages import get_stage, parse_shape
from ..procedure import WARMUP_CALLS, CaptureError


def ncu_command(ncu: str, record: str, metrics: list[str], report: Path) -> list[str]:
    stage, shape, dtype_name = records.parse_record(record)
    return [ncu, "--profile-from-start", "off", "--clock-control", "none", "--metrics", ",".join(metrics),
            "--export", str(report), "--force-overwrite",
            sys.executable, "-m", "attnprof.measure.counters", stage, ",".join(map(str, shape)), dtype_name]


def shown_command(cmd: list[str]) -> str:
    """The ncu command as a reader would type it: no temporary paths, `python` for the interpreter."""
    py = cmd.index(sys.executable)
    args = ["report.ncu-rep" if a.endswith(".ncu-rep") else a for a in cmd[1:py]]
    return " ".join(["ncu", *args, "python", *cmd[py + 1:]])


@functools.lru_cache(maxsize=4)
def _listed(ncu: str) -> str:
    return subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True, timeout=120).stdout


def available(ncu: str, metrics: list[str]) -> list[str]:
    """The metrics this GPU and ncu know (by base name), in our order."""
    listed = _listed(ncu)  # asked once per process: a worker retaking record after record asks again for nothing
    known = {line.split()[0] for line in listed.splitlines() if line.strip() and "__" in line.split()[0]}
    return [m for m in metrics if m.split(".")[0] in known]


def _profile(ncu: str, record: str, metrics: list[str], gpu: int) -> tuple[str, list[str], str | None]:
    """ncu over one forward of `record` on GPU `gpu`: (raw CSV report, the ncu command, error or None)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")  # `gpu` counts the GPUs this process sees
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=visible[gpu] if gpu < len(visible) and visible[gpu] else str(gpu))
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.ncu-rep"
        cmd = ncu_command(ncu, record, metrics, report)
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
        if run.returncode != 0 or not report.exists():
            tail = (run.stderr or run.stdout).strip().splitlines()[-1:] or ["no output"]
            return "", cmd, f"ncu failed: {tail[0][:300]}"
        raw = subprocess.run([ncu, "--import", str(report), "--csv", "--page", "raw", "--print-units", "base"],
                             capture_output=True, text=True, timeout=300).stdout
    return raw, cmd, None


def collect(names, out_dir=store.CAPTURES) -> list[dict]:
    """Counters of each capture record's forward, spread over the GPUs present (one ncu per GPU);
    writes `<record>.ncu.csv` (ncu's raw report) and `<record>.counters.json` (parsed from it)."""
    import torch
    from .capture import environment
    for record in names:
        records.parse_record(record)  # a bad name is reported before anything runs
    ncu = shutil.which("ncu")
    if not torch.cuda.is_available() or ncu is None:
        missing = "a CUDA GPU" if not torch.cuda.is_available() else "Nsight Compute (`ncu` on PATH)"
        raise CaptureError(f"`python -m attnprof counters` needs {missing}; the committed counters records are kept")
    version = subprocess.run([ncu, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    metrics = available(ncu, list(counters.METRICS.values()))
    gpus = torch.cuda.device_count()
    with ThreadPoolExecutor(max_workers=gpus) as pool:
        reports = list(pool.map(lambda ir: _profile(ncu, ir[1], metrics, ir[0] % gpus), enumerate(names)))
    results = []
    for record, (raw, cmd, error) in zip(names, reports):
        if error:
            results.append({"record": record, "error": error})
            continue
        stage, shape, dtype_name = records.parse_record(record)
        summary = {"record": f"{record}.counters", "capture": record, "stage": stage, "shape": list(shape),
                   "dtype": dtype_name, "key": records.COUNTERS.key(f"{record}.counters"),
                   "code": records.COUNTERS.code(f"{record}.counters"),
                   "ncu": version, "command": shown_command(cmd),
                   "metrics": metrics, **environment(get_stage(stage)), "kernels": counters.parse_csv(raw)}
        store.write_text(out_dir, f"{record}.ncu.csv", raw)  # the report first: the record is derived from it
        store.write_json(out_dir, f"{record}.counters", summary)
        results.append(summary)
    return results


def child(stage_name: str, shape_text: str, dtype_name: str):
    """Warm up outside the profiled range, then one forward inside it (run under ncu)."""
    import torch
    from .numerics import make_inputs, torch_dtype
    stage = get_stage(stage_name)
    q, k, v = make_inputs(parse_shape(shape_text), torch_dtype(dtype_name), "cuda")
    forward = stage.prepare(q, k, v)
    with stage.context(), torch.no_grad():
        for _ in range(WARMUP_CALLS):
            forward()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStart()
        forward()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()


if __name__ == "__main__":
    child(*sys.argv[1:4])
