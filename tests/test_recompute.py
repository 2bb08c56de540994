"""Every committed number is recomputable: one number at a time, mutated in a copy of the records,
is caught by `check` (and, for one number of each kind of file, by the strict build), naming the file
and the command that retakes it. The numbers mutated are taken from the records themselves."""
import gzip
import json
import shutil

import pytest

from attnprof.model import names, store
from attnprof.analysis import records
from attnprof.model.procedure import MEASURED_ONCE, RAW_SAMPLES

PER_FILE = 6  # numbers mutated in each file, spread over all of its numbers


def numbers(node, path=()):
    """Every numeric leaf of a JSON value, as (path, value)."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield from numbers(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from numbers(v, path + (i,))
    elif isinstance(node, (int, float)) and not isinstance(node, bool) and node == node and node != 0:
        yield path, node


SETTINGS = {"settings", "sm_count", "capability", "cudnn", "query", "wall_s", "seed", "reps", "back_to_back_calls",
            "shape", "local_shape", "positions", "world_size", "bwd_flop_factor", "shape_q", "shape_kv", "lengths",
            "rank", "device", "tolerance", "dropout", "recompile_limit", "calls", "one_call_reps", "batch", "kv_len",
            "heads", "head_dim", "seq", "d_model", "copy_bytes", "cache_bytes", "warmup_s",
            "processes", "clocks", "settle_s", "settled"}  # the environment stamp (each repeat's process too: its pid,
# start, when it measured, the GPU's clocks then; a measurement's NVML readings over its rounds, whose SM clock
# check bounds by the GPU's maximum), and echoes of what the key covers (shapes, sizes and settings the run's
# code chose)


def held(path, name="") -> bool:
    """A number the record holds to its data: not one measured once (stamped as such, procedure.py), not a
    raw sample (the data the rest is recomputed from), not a setting; and not a rank's key_averages,
    which no page shows and which is not recomputed (see the note in trace.ranks_disagreements)."""
    keys = {p for p in path if isinstance(p, str)}
    if keys & (set(MEASURED_ONCE) | set(RAW_SAMPLES) | SETTINGS):
        return False
    if name.startswith("run-") and isinstance(path[-1], int):  # in a run, a list of numbers holds samples or a shape
        return False
    return not ("ranks" in keys and "key_averages" in keys)


def spread(items, n=PER_FILE):
    items = list(items)
    return items[:: max(1, len(items) // n)][:n]


def mutated(value):
    return value * 1.2 if isinstance(value, float) else value + max(1, value // 5)


def set_at(node, path, value):
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value


def one_of_each_kind():
    """A record of every kind the site reads: (record, file name)."""
    picks = {}
    for kind in records.KINDS:
        for record in kind.records():
            name = f"{record}.json"
            data = json.loads((store.CAPTURES / name).read_text())
            if "unavailable" in data:
                continue
            picks.setdefault(kind.name, []).append((record, name))
    chosen = [(r, n) for kind, found in picks.items() for r, n in (found[:1] if kind != "run" else found)]
    return chosen


CASES = [(record, name, path) for record, name in one_of_each_kind()
         for path, _ in spread(p for p in numbers(json.loads((store.CAPTURES / name).read_text())) if held(p[0], name))]


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    folder = tmp_path_factory.mktemp("captures")
    shutil.copytree(store.CAPTURES, folder, dirs_exist_ok=True)
    assert records.problems(folder) == {}, "the committed records must be clean before mutating them"
    return folder


def mutate(folder, name, path):
    """Change the number at `path` of the file `name` in `folder`."""
    data = json.loads((folder / name).read_text())
    node = data
    for p in path:
        node = node[p]
    set_at(data, path, mutated(node))
    (folder / name).write_text(json.dumps(data, indent=1))


def mutated_copy(clean, name, path, folder):
    """A copy of the clean records in `folder`, with the number at `path` of file `name` changed."""
    shutil.copytree(clean, folder)
    mutate(folder, name, path)
    return folder


@pytest.mark.parametrize("record, name, path", CASES, ids=[f"{n}:{'.'.join(map(str, p))}" for _, n, p in CASES])
def test_a_number_changed_in_a_record_is_caught(clean, record, name, path, tmp_path):
    folder = mutated_copy(clean, name, path, tmp_path / "captures")
    why = records.status(record, folder)
    assert why is not None, f"{name} {path}: not caught"
    assert name.split(".json")[0].split(".counters")[0] in why and "python -m attnprof" in why


def traces_to_mutate():
    """A stage's trace (a kernel in a forward that is not the median one), a backward's, a cp record's."""
    return ["naive", records.BACKWARD.records()[0], records.CP.records()[0]]


@pytest.mark.parametrize("record", traces_to_mutate())
def test_a_kernel_changed_in_a_trace_is_caught(clean, record, tmp_path):
    folder = tmp_path / "captures"
    shutil.copytree(clean, folder)
    path = store.trace_path(folder, record)
    t = json.loads(gzip.decompress(path.read_bytes()))
    summary = records.load_summary(record, folder)
    listed = summary["ranks"][0]["ops"] if "ranks" in summary else summary["ops"]
    shown = {(op["name"], op["duration_us"]) for op in listed}
    kernels = [e for e in t["traceEvents"] if e.get("cat") == "kernel"]
    # a kernel of another forward than the one the summary lists; for a two-GPU record (which keeps no
    # per-forward times) one it lists
    other = ([e for e in kernels if (e["name"], float(e["dur"])) in shown] if "ranks" in summary
             else [e for e in kernels if (e["name"], float(e["dur"])) not in shown])
    other[len(other) // 2]["dur"] *= 1.2
    path.write_bytes(gzip.compress(json.dumps(t).encode()))
    why = records.status(record, folder)
    assert why is not None and record in why and "python -m attnprof" in why


def test_every_kind_of_record_is_mutated():
    kinds = {records.kind_of(record).name for record, _, _ in CASES}
    assert kinds == {k.name for k in records.KINDS}
    assert {records.kind_of(r).name for r, _, _ in CASES if r.startswith("run-")} == {"run"}
    # every run file but one: verification holds only errors measured once; each of the others holds derived
    # numbers, or counts (the timing run's rounds kept and dropped) that check holds to its samples
    unheld = {f"run-{n}" for n in names.RUNS} - {r for r, _, _ in CASES}
    assert unheld == {"run-verify"}


@pytest.mark.site
def test_the_strict_build_fails_on_a_changed_number_and_on_a_missing_run(clean, tmp_path, build_site):
    """In one copy: a number changed in a capture, another in a run, and a run file the site uses deleted."""
    (record, name, path), (run, run_name, run_path) = CASES[0], next(c for c in CASES if c[0].startswith("run-"))
    folder = mutated_copy(clean, name, path, tmp_path / "captures")
    mutate(folder, run_name, run_path)
    missing = "run-fastest" if run != "run-fastest" else "run-graphs"
    (folder / f"{missing}.json").unlink()
    r = build_site(tmp_path / "site", env_extra={"ATTNPROF_CAPTURES": str(folder)})
    assert r.returncode != 0
    assert [line for line in r.stderr.splitlines() if name in line and "python -m attnprof" in line], r.stderr[-500:]
    assert [line for line in r.stderr.splitlines() if run_name in line and "python -m attnprof sweep" in line]
    assert f"{missing}.json is missing" in r.stderr and f"sweep --only {missing.removeprefix('run-')}" in r.stderr
