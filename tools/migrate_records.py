"""One-off: rewrite the committed records of a set (docs/captures, or DIR) to the record format of issue 52.

A record now holds what was measured; every figure the build derives (a profiled record's op lists, times per
forward and event statistics; a counters record's kernels; a run's medians and rates) is dropped, after
checking that the build derives the same value from the trace, report or samples the record keeps. Each record
is then stamped with its key under the new rule (model/names.py): the records were current under the old rule
(`python -m attnprof check` was clean at 6cd7e67), and the code they ran is unchanged, so they are current
under the new one. Run it once per set, on the commit that changes the rule:  python tools/migrate_records.py [DIR]
With --restamp (tools/moves.py's what-if copies of older regenerations, read under this tree's code), records are
stamped with this tree's keys whatever settings they were taken under.
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from attnprof.analysis import derived, records, stats, trace  # noqa: E402
from attnprof.model import own, store  # noqa: E402

PROFILED_DERIVED = ("ops_per_forward", "ops_per_forward_each", "forward_device_us", "forward_device_us_each",
                    "cpu_forward_us_each", "cpu_forward_us", "ops", "cpu_ops", "ops_per_backward",
                    "ops_per_backward_each", "ops_on_calling_thread_each", "backward_device_us",
                    "backward_device_us_each", "cpu_backward_us", "cpu_backward_us_each", "forward_ops_each",
                    "event_median_us", "event_p10_us", "event_p90_us",
                    "bwd_flop_factor")  # the procedure's constant, copied
RANK_DERIVED = ("ops_per_forward", "ops_per_forward_each", "forward_device_us", "cpu_forward_us", "overlap", "ops",
                "causal_pairs")
CP_DERIVED = ("cp_event_median_us", "speedup")


def same(a, b) -> bool:
    """Equal up to the last bits of a float (a sum taken in another order)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return (isinstance(a, (int, float)) and isinstance(b, (int, float))
                and (a == b or (a != a and b != b) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)))
    return a == b


def strip(record: dict, fields, derived_view: dict, where: str):
    for field in fields:
        if field in record:
            if field in derived_view and not same(record[field], derived_view[field]) and field != "bwd_flop_factor":
                raise SystemExit(f"{where}.{field}: the record says {record[field]!r:.80}, the build derives "
                                 f"{derived_view[field]!r:.80}")
            del record[field]


def strip_run(name: str, result):
    """The result as measured (derived.measured), once the build is seen to derive every number it held."""
    kept = derived.measured(result)
    if not same(derived.derive(name, kept), derived.derive(name, result)):
        raise SystemExit(f"run-{name}: its result is not what its samples give")
    return kept


def migrate(folder: Path, restamp: bool = False):
    for kind in records.KINDS:
        for record in kind.records():
            path = store.summary_path(folder, record)
            if not path.exists():  # a set that lacks it (one GPU's part of the site's records)
                continue
            data = json.loads(path.read_text())
            if kind is records.RUN:
                name = record.removeprefix("run-")
                data["result"] = strip_run(name, data["result"])
                if "repeats" in data:
                    data["repeats"] = [strip_run(name, r) for r in data["repeats"]]
            elif kind is records.COUNTERS:
                from attnprof.analysis import counters
                parsed = counters.parse_csv((folder / f"{record.removesuffix('.counters')}.ncu.csv").read_text())
                strip(data, ("kernels",), {"kernels": parsed}, record)
            elif kind is records.CP:
                merged = trace.load(store.trace_path(folder, record))
                for r in data["ranks"]:
                    view = trace.summarize_rank(merged, r["rank"], data["label"])
                    view["causal_pairs"] = sum((a + b + 2) * (b - a + 1) // 2 for a, b in r["positions"])
                    strip(r, RANK_DERIVED, view, f"{record}.ranks[{r['rank']}]")
                strip(data, CP_DERIVED, {}, record)
            elif "unavailable" not in data:
                t = trace.load(store.trace_path(folder, record))
                if data.get("pass") == "backward":
                    view = trace.summarize_backward(t, data["label"], data["forward_label"])
                else:
                    view = trace.summarize(trace.forwards(t, data["label"]))
                view |= stats.event_stats(data["event_times_us"])
                strip(data, PROFILED_DERIVED, view, record)
            if kind is records.OWN:  # its stamp: the token hash of the reader's file, no longer of the harness besides
                data["source_hash"] = own.source_hash(data["file"])
            old = data.get("settings")
            data.update(key=kind.key(record), code=kind.code(record), settings=kind.settings(record))
            version = ("format", "procedure")  # the procedure's version, renamed
            if not restamp and old is not None and {k: v for k, v in old.items() if k not in version} != {
                    k: v for k, v in data["settings"].items() if k not in version}:
                raise SystemExit(f"{record}: settings {old} are not those of its key now, {data['settings']}")
            store.write_json(folder, record, data)
    print(f"migrated every record in {folder}")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--restamp"]
    migrate(Path(args[0]) if args else store.CAPTURES, "--restamp" in sys.argv)
