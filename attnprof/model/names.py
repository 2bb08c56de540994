"""Record names, settings and keys: the grammar every kind of record is named by, and what keys it.

    stage     `<stage>[-BxHxSxD][-dtype]`: one forward, profiled (measure/capture.py)
    backward  `<stage>-bwd`: forward + backward, profiled (measure/backward.py)
    cp        `cp-<rotation>[-unbalanced]-w<world>-1xHxSxD`: context parallelism, every rank (measure/context_parallel.py)
    counters  `<record>.counters`: Nsight Compute over one forward of a stage record (measure/counters.py)
    run       `run-<name>`: a measurement run (measure/runs.py)
    own       `<file stem>.<function>`: a reader's attention, profiled like a stage (measure/own.py, model/own.py)

A record's key is what decides its numbers (see "what keys each record" below); a comment-only edit stales nothing.
Pure: records.py (the kinds) and own.py (readers' captures) build on this; nothing here reads a record.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from .. import text
from . import snippets
from .procedure import BWD_LABEL, DEFAULT_DTYPE, EVENT_REPS, FEW_REPEATS, METRICS, PROCEDURE, RUN_REPEATS, SCHEDULE, THROTTLE, WARMUP_CALLS
from .stages import DEFAULT_SHAPE, LONG_SHAPE, STAGES, counter_records, get_stage, select, timing_stages
from .snippets import ROOT, code_hash




def record_name(stage: str, shape=DEFAULT_SHAPE, dtype_name=DEFAULT_DTYPE) -> str:
    """`flash` at the default shape and dtype, `flash-1x16x8192x128` (and `-fp16`) otherwise."""
    name = stage if tuple(shape) == tuple(DEFAULT_SHAPE) else f"{stage}-{text.shape(shape, 'x')}"
    return name if dtype_name == DEFAULT_DTYPE else f"{name}-{dtype_name}"


def parse_record(record: str):
    """The inverse of record_name: (stage, shape, dtype); raises ValueError naming a bad record."""
    parts = record.split("-")
    stage, shape, dtype_name = parts[0], tuple(DEFAULT_SHAPE), DEFAULT_DTYPE
    get_stage(stage)
    for part in parts[1:]:
        if part.count("x") == 3 and all(p.isdigit() for p in part.split("x")):
            shape = tuple(int(p) for p in part.split("x"))
        else:
            dtype_name = part
    if record_name(stage, shape, dtype_name) != record:
        raise ValueError(f"{record!r} is not a capture name: use STAGE or STAGE-BxHxSxD, e.g. {record_name('flash', LONG_SHAPE)}")
    return stage, shape, dtype_name


def settings(shape, dtype_name) -> dict:
    return {"shape": list(shape), "dtype": dtype_name, "causal": True, "schedule": SCHEDULE,
            "warmup_calls": WARMUP_CALLS, "event_reps": EVENT_REPS, "procedure": PROCEDURE}


def make_key(source_hash: str, record_settings: dict) -> str:
    return hashlib.sha256((source_hash + json.dumps(record_settings, sort_keys=True)).encode()).hexdigest()[:16]


# ---- what keys each record ----------------------------------------------------------------------
# A record's key is what decides its numbers: the token hash of the snippets and kernel repositories it runs,
# of the measuring code's sections a page shows, of its stage table rows, and its settings (procedure.py's
# constants and PROCEDURE, bumped by hand when the way of measuring changes). Editing the rest stales nothing.
# Paths are relative to the repository (snippets.SNIPPETS and CODE_ROOT: a test points them at a copy).

CODE_ROOT = ROOT
MEASURE = "attnprof/measure"
PROFILED_LOOP = f"{MEASURE}/profiling.py:profile"  # the loop every profiled record runs, shown on Methods
BACKWARD_LOOP = f"{MEASURE}/backward.py:profile"  # ... and the backward's, shown on Backward
DECODE_LOOP = f"{MEASURE}/serving.py:decode"  # the decode step End to end shows


@dataclass(frozen=True)
class Run:
    """A measurement run: its function (`module.function` in measure/), the stages it measures (`select` facts,
    or names), other snippets it loads, its measuring code's sections a page shows, and its repeats (processes:
    more than one where a conclusion compares its numbers)."""
    function: str
    stages: dict | tuple | None = None
    snippets: tuple[str, ...] = ()
    repeats: int = 1
    shown: tuple[str, ...] = ()
    rounds: bool = False  # measured in rounds that a throttled clock drops (measure/bench.py interleaved)


RUN_CODE = {
    "ceilings": Run("sweep.ceilings", rounds=True),
    "hardware": Run("sweep.hardware", rounds=True),
    "sweep": Run("sweep.sweep", dict(sweep=True), repeats=FEW_REPEATS, rounds=True),
    "fastest": Run("sweep.fastest", dict(fused=True, sweep=True), repeats=FEW_REPEATS, rounds=True),
    "recompile": Run("sweep.recompile_limit", dict(fresh_compile=True)),
    "fallback": Run("verify.fallbacks", snippets=("sdpa",), repeats=FEW_REPEATS),
    "verify": Run("verify.verify", dict(verify=True), ("sdpa",)),
    "gqa": Run("serving.gqa"),
    "decode": Run("serving.decode", repeats=FEW_REPEATS),
    "varlen": Run("serving.varlen"),
    "e2e": Run("serving.end_to_end", snippets=("inplace",), repeats=FEW_REPEATS, rounds=True),
    "decode_step": Run("serving.decode_step", snippets=("graphed",), repeats=RUN_REPEATS, rounds=True, shown=(DECODE_LOOP,)),
    "graphs": Run("graphs.graphs", snippets=("naive", "compiled", "graphed", "sdpa"), repeats=FEW_REPEATS, rounds=True),
    "steady": Run("steady.steady", dict(steady=True)),
    "backward": Run("backward.ranking", dict(backward=True), repeats=FEW_REPEATS, rounds=True),
    "timing": Run("timing.timing", timing_stages(), ("graphed",), repeats=RUN_REPEATS, rounds=True),
}


def snippet_paths(names) -> tuple[str, ...]:
    return tuple(f"snippets/{n}.py" for n in dict.fromkeys(names))


def run_stages(name: str) -> list[str]:
    """The stages a measurement run measures (their snippets key it; a provider among them must load)."""
    facts = RUN_CODE[name].stages
    return select(**facts) if isinstance(facts, dict) else list(facts or [])


def run_sources(name: str) -> tuple[str, ...]:
    run = RUN_CODE[name]
    stage_snippets = [n for s in run_stages(name) for n in STAGES[s].snippets]
    return snippet_paths(stage_snippets + list(run.snippets)) + repo_paths(run_stages(name)) + run.shown


def run_settings(name: str) -> dict:
    run = RUN_CODE[name]
    settings_ = {"run": name, "stages": run_stages(name), "procedure": PROCEDURE}
    if run.rounds:  # measured in rounds (measure/bench.py interleaved): the clock it drops them at
        settings_["throttle"] = THROTTLE
    return settings_ | ({"repeats": run.repeats} if run.repeats > 1 else {})


def code_path(path: str) -> Path:
    """Where a file a key hashes lies: snippets under snippets.SNIPPETS, the rest under CODE_ROOT."""
    if path.startswith("snippets/"):
        return snippets.SNIPPETS / path.removeprefix("snippets/")
    return Path(CODE_ROOT) / path


def source_hash_of(paths) -> str:
    """The token hash of these files (relative to the repository), in this order; `FILE:SECTION` hashes
    only that section of FILE (what a page shows of it)."""
    return code_hash(*(code_path(p) if ":" not in p else section_text(p) for p in paths))


def section_text(path: str) -> snippets.Section:
    file, section = path.split(":")
    return snippets.Section(snippets.snippet_section(code_path(file), section))


def row_hash(stages) -> str:
    """The hash of these stages' rows of the stage table ("" for none: a record that runs no stage)."""
    rows = [STAGES[s].row for s in stages]
    return hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()[:16] if rows else ""


def backward_record(stage: str, shape=DEFAULT_SHAPE, dtype_name=DEFAULT_DTYPE) -> str:
    return f"{record_name(stage, shape, dtype_name)}-bwd"


def backward_settings(shape, dtype_name) -> dict:
    return {**settings(shape, dtype_name), "pass": "backward", "label": BWD_LABEL}


CP_HEADS, CP_HEAD_DIM, CP_BACKEND = 16, 128, "flash"
CP_WORLD = 2
CP_LENGTHS = (32768, 65536, 131072)
# (length, rotation, load-balanced) of every context-parallel capture the site renders
CP_CONFIGS = [(n, "allgather", True) for n in CP_LENGTHS] + [
    (CP_LENGTHS[-1], "alltoall", True), (CP_LENGTHS[-1], "allgather", False)]


def cp_record(seq_len: int, world: int = CP_WORLD, rotate: str = "allgather", balanced: bool = True) -> str:
    return f"cp-{rotate}{'' if balanced else '-unbalanced'}-w{world}-1x{CP_HEADS}x{seq_len}x{CP_HEAD_DIM}"


def cp_settings(seq_len, world, rotate, balanced) -> dict:
    return {**settings((1, CP_HEADS, seq_len, CP_HEAD_DIM), "bf16"), "world_size": world, "rotate": rotate,
            "load_balance": balanced, "backend": CP_BACKEND}


def counted_at(shape) -> list[tuple[str, str]]:
    """(stage, capture record) of every stage whose forward at `shape` also ran under Nsight Compute."""
    return [(s, record_name(s, shape)) for s, at in counter_records() if tuple(at) == tuple(shape)]


RUNS = tuple(RUN_CODE)  # every measurement run the site renders (measure/runs.py makes them)


def capture_command(record: str, verb="capture") -> str:
    stage, shape, dtype_name = parse_record(record)
    extra = "" if tuple(shape) == tuple(DEFAULT_SHAPE) else f" --shape {text.shape(shape, ',')}"
    extra += "" if dtype_name == DEFAULT_DTYPE else f" --dtype {dtype_name}"
    return f"`python -m attnprof {verb} {stage}{extra}`"


def parsed(record: str):
    """(stage, shape, dtype) of a stage, backward or counters record."""
    return parse_record(record.removesuffix("-bwd").removesuffix(".counters"))


def repo_paths(stages) -> tuple[str, ...]:
    """The files of the kernel repositories these stages load (relative to the repository)."""
    repos = dict.fromkeys(STAGES[s].repo for s in stages if STAGES[s].repo)
    return tuple(str(p.relative_to(ROOT)) for repo in repos for p in sorted(repo.rglob("*"))
                 if p.is_file() and "__pycache__" not in p.parts)


def profiled_sources(code):
    """The files a stage, backward or counters record runs: its snippets and kernel repository, then `code`."""
    def sources(record):
        stage = parsed(record)[0]
        return snippet_paths(get_stage(stage).snippets) + repo_paths([stage]) + tuple(code)
    return sources


def cp_config(record: str):
    """(length, rotation, load-balanced) of a context-parallel record the site renders."""
    for n, rotate, balanced in CP_CONFIGS:
        if cp_record(n, CP_WORLD, rotate, balanced) == record:
            return n, rotate, balanced
    raise ValueError(f"{record!r} is not a context-parallel record the site renders: choose from "
                     f"{', '.join(cp_record(n, CP_WORLD, r, b) for n, r, b in CP_CONFIGS)}")


def counters_settings(shape, dtype_name) -> dict:
    return {**settings(shape, dtype_name), "metrics": list(METRICS.values())}
