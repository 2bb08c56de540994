"""Hardware counters on a CUDA GPU: one forward of each stage record under Nsight Compute.

`collect` runs this module as one child under `ncu` per GPU for all its records (Python, PyTorch and the
compilers start once). For each record the child profiles a marker kernel (counters.MARKER), which cuts the
report into one per record, warms the forward up, then runs exactly one forward between cudaProfilerStart and
cudaProfilerStop (`--profile-from-start off`). Clocks are left as they are (`--clock-control none`), so
durations compare with the captures'.
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

from ..analysis import counters
from ..model import names, store
from ..analysis import records
from ..model.stages import get_stage
from ..model.procedure import WARMUP_CALLS, CaptureError
from ..text import first_line

FAILED = "attnprof-counters failed: "  # how the child reports a record it could not run (on stderr)


def ncu_command(ncu: str, record_names: list[str], metrics: list[str], report: Path) -> list[str]:
    return [ncu, "--profile-from-start", "off", "--clock-control", "none", "--metrics", ",".join(metrics),
            "--export", str(report), "--force-overwrite", sys.executable, "-m", "attnprof.measure.counters", *record_names]


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


def _profile(ncu: str, record_names: list[str], metrics: list[str], gpu: int) -> tuple[dict[str, tuple[str, str | None]], list[str]]:
    """ncu over one forward of each of `record_names` on GPU `gpu`, in one child: ({record: (its raw CSV
    report, error or None)}, the ncu command)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")  # `gpu` counts the GPUs this process sees
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=visible[gpu] if gpu < len(visible) and visible[gpu] else str(gpu))
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.ncu-rep"
        cmd = ncu_command(ncu, record_names, metrics, report)
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, env=env)
        if run.returncode != 0 or not report.exists():
            tail = (run.stderr or run.stdout).strip().splitlines()[-1:] or ["no output"]
            return {name: ("", f"ncu failed: {tail[0][:300]}") for name in record_names}, cmd
        raw = subprocess.run([ncu, "--import", str(report), "--csv", "--page", "raw", "--print-units", "base"],
                             capture_output=True, text=True, timeout=300).stdout
    failed = dict(line.removeprefix(FAILED).split(": ", 1) for line in (run.stdout + run.stderr).splitlines()
                  if line.startswith(FAILED))
    try:
        parts = counters.split_report(raw, len(record_names))
    except ValueError as e:
        return {name: ("", f"ncu's report: {e}") for name in record_names}, cmd
    return {name: (part, failed.get(name)) for name, part in zip(record_names, parts)}, cmd


def collect(record_names, out_dir=store.CAPTURES) -> list[dict]:
    """Counters of each capture record's forward, spread over the GPUs present (one ncu per GPU);
    writes `<record>.ncu.csv` (ncu's raw report) and `<record>.counters.json` (parsed from it)."""
    import torch
    from .capture import environment
    for record in record_names:
        names.parse_record(record)  # a bad name is reported before anything runs
    ncu = shutil.which("ncu")
    if not torch.cuda.is_available() or ncu is None:
        missing = "a CUDA GPU" if not torch.cuda.is_available() else "Nsight Compute (`ncu` on PATH)"
        raise CaptureError(f"`python -m attnprof counters` needs {missing}; the committed counters records are kept")
    version = subprocess.run([ncu, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    metrics = available(ncu, list(counters.METRICS.values()))
    gpus = torch.cuda.device_count()
    chunks = [record_names[i::gpus] for i in range(min(gpus, len(record_names)))]  # one ncu child per GPU
    with ThreadPoolExecutor(max_workers=max(1, len(chunks))) as pool:
        taken = list(pool.map(lambda ic: _profile(ncu, ic[1], metrics, ic[0]), enumerate(chunks)))
    reports = {name: (*taken[i][0][name], taken[i][1]) for i, chunk in enumerate(chunks) for name in chunk}
    results = []
    for record in record_names:
        raw, error, cmd = reports[record]
        if not error:
            try:
                counters.parse_csv(raw)  # a report the pages can read, or the error that says why not
            except ValueError as e:
                error = f"ncu's report for this forward: {e}"
        if error:
            results.append({"record": record, "error": error})
            continue
        stage, shape, dtype_name = names.parse_record(record)
        summary = {"record": f"{record}.counters", "capture": record, "stage": stage, "shape": list(shape),
                   "dtype": dtype_name, "key": records.COUNTERS.key(f"{record}.counters"),
                   "code": records.COUNTERS.code(f"{record}.counters"),
                   "ncu": version, "command": shown_command(cmd),
                   "metrics": metrics, **environment(get_stage(stage))}
        store.write_text(out_dir, f"{record}.ncu.csv", raw)  # the report first: the pages read its kernels off it
        store.write_json(out_dir, f"{record}.counters", summary)
        results.append(summary)
    return results


def child(record_names: list[str]):
    """For each record: a marker kernel, the warm-up outside the profiled ranges, then one forward
    inside one (run under ncu). A record that fails is reported on stderr and costs the others nothing."""
    import torch
    from .numerics import make_inputs, torch_dtype

    def profiled(run):
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStart()
        run()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()

    for record in record_names:
        profiled(lambda: torch.cuda._sleep(1))  # the marker: this record's kernels follow it in ncu's report
        try:
            stage_name, shape, dtype_name = names.parse_record(record)
            stage = get_stage(stage_name)
            q, k, v = make_inputs(shape, torch_dtype(dtype_name), "cuda")
            forward = stage.prepare(q, k, v)
            with stage.context(), torch.no_grad():
                for _ in range(WARMUP_CALLS):
                    forward()
                profiled(forward)
        except Exception as e:  # the marker is out: the next record's rows stay its own
            print(f"{FAILED}{record}: {type(e).__name__}: {first_line(e)}"[:400], file=sys.stderr, flush=True)
        finally:
            q = k = v = forward = None
            torch.cuda.empty_cache()


if __name__ == "__main__":
    child(sys.argv[1:])
