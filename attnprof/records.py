"""The captures of the backward pass and of context parallelism: their names, keys and staleness.

Pure (no torch): the site and `check` read these; attnprof/measure/backward.py and
context_parallel.py write them. A backward record is `<stage>-bwd` (one annotated forward and one
annotated backward per profiled step); a context-parallel record is one run on several GPUs with
every rank in it, named `cp-<rotation>[-unbalanced]-w<world>-1xHxSxD`.
"""
from __future__ import annotations

import hashlib
import json

from . import store
from .stages import DEFAULT_SHAPE, ROOT, get_stage

BWD_LABEL = "attention_backward"
BACKWARD_STAGES = ["naive", "inplace", "math", "efficient", "flash", "cudnn", "flex", "fa4"]
BWD_FLOP_FACTOR = 2.5  # backward FLOPs counted as 2.5x the forward's (five matmuls against two)

CP_SOURCE = ROOT / "attnprof" / "measure" / "context_parallel.py"
CP_HEADS, CP_HEAD_DIM, CP_BACKEND = 16, 128, "flash"
CP_WORLD = 2
CP_LENGTHS = (32768, 65536, 131072)
# (length, rotation, load-balanced) of every context-parallel capture the site renders
CP_CONFIGS = [(n, "allgather", True) for n in CP_LENGTHS] + [
    (CP_LENGTHS[-1], "alltoall", True), (CP_LENGTHS[-1], "allgather", False)]


def backward_record(stage: str, shape=DEFAULT_SHAPE, dtype_name=store.DEFAULT_DTYPE) -> str:
    return f"{store.record_name(stage, shape, dtype_name)}-bwd"


def backward_settings(shape, dtype_name) -> dict:
    return {**store.settings(shape, dtype_name), "pass": "backward", "label": BWD_LABEL}


def backward_key(stage: str, shape, dtype_name) -> str:
    return store.capture_key(get_stage(stage), backward_settings(shape, dtype_name))


def cp_record(seq_len: int, world: int = CP_WORLD, rotate: str = "allgather", balanced: bool = True) -> str:
    return f"cp-{rotate}{'' if balanced else '-unbalanced'}-w{world}-1x{CP_HEADS}x{seq_len}x{CP_HEAD_DIM}"


def cp_settings(seq_len, world, rotate, balanced) -> dict:
    return {**store.settings((1, CP_HEADS, seq_len, CP_HEAD_DIM), "bf16"), "world_size": world, "rotate": rotate,
            "load_balance": balanced, "backend": CP_BACKEND}


def cp_source_hash() -> str:
    return hashlib.sha256(CP_SOURCE.read_bytes()).hexdigest()[:16]


def cp_key(settings: dict) -> str:
    return hashlib.sha256((cp_source_hash() + json.dumps(settings, sort_keys=True)).encode()).hexdigest()[:16]


def backward_records() -> list[str]:
    return [backward_record(s) for s in BACKWARD_STAGES]


def cp_records() -> list[str]:
    return [cp_record(n, CP_WORLD, r, b) for n, r, b in CP_CONFIGS]


def all_records() -> list[str]:
    """Every backward and context-parallel capture the site renders."""
    return backward_records() + cp_records()


def recapture_fix(record: str) -> str:
    """What to run to retake one of these captures, and on what machine."""
    if record in cp_records():
        return (f"run `python -m attnprof capture cp --world-size {CP_WORLD} --unbalanced` on a machine with "
                f"{CP_WORLD} CUDA GPUs")
    return f"run `python -m attnprof capture --backward {record.removesuffix('-bwd')}` on a CUDA GPU"


def stale_records(folder=None) -> dict[str, str]:
    """Backward and context-parallel captures the site renders that are missing, corrupt or stale."""
    folder = folder or store.CAPTURES
    expected = {}  # record -> (its current key, the code whose change makes it stale)
    for stage in BACKWARD_STAGES:
        key = backward_key(stage, DEFAULT_SHAPE, store.DEFAULT_DTYPE)
        expected[backward_record(stage)] = key, f"snippets/{get_stage(stage).snippet}.py"
    for n, rotate, balanced in CP_CONFIGS:
        key = cp_key(cp_settings(n, CP_WORLD, rotate, balanced))
        expected[cp_record(n, CP_WORLD, rotate, balanced)] = key, CP_SOURCE.relative_to(ROOT).as_posix()
    problems = {record: why for record, (key, code) in expected.items() if (why := store.check(record, key, code, folder))}
    for record in backward_records():  # a backward summary must also be what its trace says
        if record not in problems and "unavailable" not in (summary := store.load_summary(record, folder)):
            if why := store.disagreement(record, summary, folder):
                problems[record] = why
    return problems
