"""Does a busy neighbour move a record's numbers? On a machine with two GPUs, through the same workers
as `python -m attnprof regenerate`: each record taken REPS times on GPU 0 alone, then REPS times on GPU 0
while GPU 1 takes a long record (the sweep by default), into a temporary folder (the committed records
are not touched). Prints, per record, the CUDA-event medians and profiler device times of each take, and
whether the busy takes stay within the spread of the takes alone; writes the numbers as JSON.

    python -m tools.neighbour [--records flash-1x16x8192x128,flash-1x16x256x64] [--reps 5]
                              [--busy run-sweep] [--json neighbour.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path

from attnprof.analysis import records
from attnprof import regenerate

FIELDS = ("event_median_us", "forward_device_us")  # CUDA-event median of single calls; profiler device time


def _take(workers, folder, record, device) -> dict:
    kind = records.kind_of(record)
    outcome = workers.take(regenerate.Job(record, kind.name, 1, 0.0), (device,))
    if outcome != "retaken":
        raise RuntimeError(f"{record} on GPU {device}: {outcome}")
    summary = json.loads((Path(folder) / f"{record}.json").read_text())
    return {f: summary[f] for f in FIELDS}


def compare(workers, folder, names, reps, busy, settle_s=10.0) -> dict:
    """{record: {"alone": [takes], "busy": [takes]}}: GPU 0 alone, then with GPU 1 taking `busy` (from
    `settle_s` after it starts, so that the neighbour is at work)."""
    out = {r: {"alone": [_take(workers, folder, r, "0") for _ in range(reps)], "busy": []} for r in names}
    neighbour = threading.Thread(target=workers.take, args=(regenerate.Job(busy, "run", 1, 0.0), ("1",)))
    neighbour.start()
    time.sleep(settle_s)
    while neighbour.is_alive() and any(len(v["busy"]) < reps for v in out.values()):
        for r in names:
            if len(out[r]["busy"]) < reps:
                out[r]["busy"].append(_take(workers, folder, r, "0"))
    neighbour.join()
    return out


def verdicts(result: dict) -> list[str]:
    lines = []
    for record, takes in result.items():
        for f in FIELDS:
            alone, busy = [t[f] for t in takes["alone"]], [t[f] for t in takes["busy"]]
            if not busy:
                lines.append(f"{record} {f}: no take finished while the neighbour ran (give a longer --busy)")
                continue
            inside = min(alone) <= statistics.median(busy) <= max(alone)
            lines.append(f"{record} {f}: alone {', '.join(f'{x:.1f}' for x in alone)} us; with GPU 1 busy "
                         f"{', '.join(f'{x:.1f}' for x in busy)} us; busy median "
                         f"{'within' if inside else 'OUTSIDE'} the spread of the takes alone")
    return lines


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", default="flash-1x16x8192x128,flash-1x16x256x64")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--busy", default="run-sweep")
    p.add_argument("--json", default="neighbour.json")
    args = p.parse_args(argv)
    names = args.records.split(",")
    for r in names:
        if records.kind_of(r) is not records.STAGE:
            raise SystemExit(f"{r!r} is not a forward capture: give stage records, e.g. flash-1x16x8192x128")
    if len(regenerate.detect().gpus) < 2:
        raise SystemExit("needs two CUDA GPUs: one for the record, one for the busy neighbour")
    with tempfile.TemporaryDirectory() as folder:
        workers = regenerate.Workers(folder, folder)
        try:
            result = compare(workers, folder, names, args.reps, args.busy)
        finally:
            workers.close()
    Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    print("\n".join(verdicts(result)))


if __name__ == "__main__":
    main()
