"""Record names, settings and keys: the grammar every kind of record is named by, and what keys it.

    stage     `<stage>[-BxHxSxD][-dtype]`: one forward, profiled (measure/capture.py)
    backward  `<stage>-bwd`: forward + backward, profiled (measure/backward.py)
    cp        `cp-<rotation>[-unbalanced]-w<world>-1xHxSxD`: context parallelism, every rank (measure/context_parallel.py)
    counters  `<record>.counters`: Nsight Compute over one forward of a stage record (measure/counters.py)
    run       `run-<name>`: a measurement run (measure/runs.py)
    own       `<file stem>.<function>`: a reader's attention, profiled like a stage (measure/own.py, model/own.py)

A record's key is the token hash of the code it ran and its settings (a comment-only edit stales nothing).
Pure: records.py (the kinds) and own.py (readers' captures) build on this; nothing here reads a record.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from .. import text
from . import snippets
from .procedure import BWD_LABEL, DEFAULT_DTYPE, EVENT_REPS, FEW_REPEATS, FORMAT, METRICS, RUN_REPEATS, SCHEDULE, THROTTLE, WARMUP_CALLS
from .stages import DEFAULT_SHAPE, LONG_SHAPE, STAGES, Stage, counter_records, get_stage, select, timing_stages
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
            "warmup_calls": WARMUP_CALLS, "event_reps": EVENT_REPS, "format": FORMAT}


def make_key(source_hash: str, record_settings: dict) -> str:
    return hashlib.sha256((source_hash + json.dumps(record_settings, sort_keys=True)).encode()).hexdigest()[:16]


# ---- the code each record runs --------------------------------------------------------------------
# Paths are relative to the repository (read from snippets.SNIPPETS and CODE_ROOT: a test points them at a
# copy). A record's key is the token hash of these files and its settings, so an edit of any of them,
# comments aside, stales it.

CODE_ROOT = ROOT
MEASURE = "attnprof/measure"
SHOWN_CODE = ("attnprof/analysis/flops.py",)  # what turns a record's times into the rates its pages show
# how a take shares its GPU with the other takes of a regeneration: turns, cores and quiet (every record taken here)
SHARING_CODE = tuple(f"{MEASURE}/{m}.py" for m in ("gpulock", "worker"))
FORWARD_CODE = tuple(f"{MEASURE}/{m}.py" for m in ("capture", "profiling", "bench", "numerics", "dispatch", "timing")
                     ) + SHOWN_CODE + SHARING_CODE  # the capture path
BACKWARD_CODE = FORWARD_CODE + (f"{MEASURE}/backward.py",)
COUNTERS_CODE = tuple(f"{MEASURE}/{m}.py" for m in ("counters", "numerics", "capture", "profiling")) + SHARING_CODE
OWN_CODE = (f"{MEASURE}/own.py",) + FORWARD_CODE  # a reader's capture: its own checks, then the capture path
CP_CODE = (f"{MEASURE}/context_parallel.py",)  # as the committed two-GPU records were keyed: kept as it is

@dataclass(frozen=True)
class Run:
    """A measurement run: the function that makes it (`module.function` in attnprof/measure/), the other
    measuring modules it runs, the stages it measures (`select` facts, or a tuple of names) and other
    snippets it loads, and how many independent repeats (separate processes) it takes: more than one
    where a page's conclusion compares its numbers. Its key hashes all of these and analysis/derived.py,
    which computes its figures."""
    function: str
    modules: tuple[str, ...] = ()
    stages: dict | tuple | None = None
    snippets: tuple[str, ...] = ()
    repeats: int = 1

    @property
    def code(self) -> tuple[str, ...]:
        """The measuring modules it runs, the function's own first (and the one that starts its repeats)."""
        return (self.function.split(".")[0],) + self.modules + (("repeat",) if self.repeats > 1 else ())


RUN_CODE = {
    "ceilings": Run("sweep.ceilings", ("bench", "clock")),
    "hardware": Run("sweep.hardware", ("bench", "clock")),
    "sweep": Run("sweep.sweep", ("bench", "clock", "numerics"), dict(sweep=True), repeats=FEW_REPEATS),
    "fastest": Run("sweep.fastest", ("bench", "clock", "numerics"), dict(fused=True, sweep=True), repeats=FEW_REPEATS),
    "recompile": Run("sweep.recompile_limit", ("bench", "numerics"), dict(fresh_compile=True)),
    "fallback": Run("verify.fallbacks", ("dispatch", "bench", "numerics"), snippets=("sdpa",), repeats=FEW_REPEATS),
    "verify": Run("verify.verify", ("numerics",), dict(verify=True), ("sdpa",)),
    "gqa": Run("serving.gqa", ("bench", "dispatch", "numerics")),
    "decode": Run("serving.decode", ("bench", "dispatch", "numerics"), repeats=FEW_REPEATS),
    "varlen": Run("serving.varlen", ("bench", "dispatch", "numerics")),
    "e2e": Run("serving.end_to_end", ("bench", "clock", "numerics"), snippets=("inplace",), repeats=FEW_REPEATS),
    "decode_step": Run("serving.decode_step", ("bench", "clock", "numerics", "timing", "profiling"), snippets=("graphed",), repeats=RUN_REPEATS),
    "graphs": Run("graphs.graphs", ("bench", "clock", "numerics"), snippets=("naive", "compiled", "graphed", "sdpa"), repeats=FEW_REPEATS),
    "steady": Run("steady.steady", ("sweep", "bench", "numerics", "repeat"), dict(steady=True)),
    "backward": Run("backward.ranking", ("capture", "profiling", "bench", "clock", "numerics"), dict(backward=True),
                    repeats=FEW_REPEATS),
    "timing": Run("timing.timing", ("bench", "clock", "numerics", "capture", "profiling"), timing_stages(), ("graphed",), repeats=RUN_REPEATS),
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
    measuring = run.code + (("clock",) if run.repeats > 1 else ())  # a repeat's process reads the clock it measured at
    return (tuple(dict.fromkeys(f"{MEASURE}/{m}.py" for m in measuring)) + SHARING_CODE
            + ("attnprof/analysis/derived.py",) + SHOWN_CODE
            + snippet_paths(stage_snippets + list(run.snippets)) + repo_paths(run_stages(name)))


def run_settings(name: str) -> dict:
    settings_ = {"run": name, "stages": run_stages(name), "format": FORMAT}
    if "clock" in RUN_CODE[name].code:  # measured in rounds (measure/bench.py interleaved): the clock it drops them at
        settings_["throttle"] = THROTTLE
    return settings_ | ({"repeats": RUN_CODE[name].repeats} if RUN_CODE[name].repeats > 1 else {})


def code_path(path: str) -> Path:
    """Where a file a key hashes lies: snippets under snippets.SNIPPETS, the rest under CODE_ROOT."""
    if path.startswith("snippets/"):
        return snippets.SNIPPETS / path.removeprefix("snippets/")
    return Path(CODE_ROOT) / path


def source_hash_of(paths) -> str:
    """The token hash of these files (relative to the repository), in this order."""
    return code_hash(*(code_path(p) for p in paths))


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


def cp_source_hash() -> str:
    """The token hash of the context-parallel capture code, as every other key uses."""
    return source_hash_of(CP_CODE)


def cp_key(cp_settings_: dict) -> str:
    return make_key(cp_source_hash(), cp_settings_)


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
    """The files a stage, backward or counters record runs: its stage's snippets and kernel repository,
    then `code`."""
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
