"""What a record ran, against what it says it ran.

A record's key hashes the code and settings it ran, which every SDPA backend shares, so what tells one
backend's capture from another's is its kernels. A stage record's kernels belong to the family
(kernel_names.FAMILY) of what its stage runs: its SDPA backend, auto's dispatcher choice, or its provider;
a fused kernel's launch is one its family makes at the record's shape; a replayed stage's kernels are
those of the stage it replays; the site's own layer and window captures hold the kernel their attention
names. A counters record's launches are its capture's; a two-GPU record's ranks are those its settings
lay out; a run holds rows only for what it ran, verification and fallback rows labelled as their kernels,
their aten op and the dispatcher say. Each function returns lines `FIELD ...: what is wrong`; records.py puts the file
and the fix around them. No torch here.
"""
from __future__ import annotations

import csv
import io
import re
from math import ceil

from . import kernel_names
from .kernel_names import FAMILY, FUSED_SDPA
from .reasons import clean
from .walk import dicts
from ..model.own import OWN_RECORDS
from ..model.stages import STAGES, Stage

FAMILIES = {f for f in FAMILY.values() if f}
PROVIDERS = {s.provider for s in STAGES.values() if s.provider != "PyTorch"}
# the site's own captures (model/own.py): what a function's attention runs, as a FAMILY key, where it is not named
# after a stage (then its stage's); transformers' attn_implementation names, and "sdpa": a fused SDPA backend
OWN_RUNS = {"sdpa": "sdpa", "flex_attention": "PyTorch FlexAttention", "eager": "PyTorch"}


FUSED = "fused"  # what a fused stage of PyTorch's own runs: a fused attention kernel, of one family


def runs(stage: Stage, summary: dict) -> str | None:
    """What a stage runs, as a FAMILY key: its SDPA backend (auto: the dispatcher's choice its record states),
    else its provider; a stage of PyTorch's own that the table calls fused (its snippet calls SDPA itself), FUSED."""
    if stage.snippet == "sdpa":
        return stage.backend or summary.get("sdpa_choice")
    return FUSED if stage.provider == "PyTorch" and stage.fused else stage.provider


def key_of(ops: list[dict]) -> str | None:
    """The FAMILY key of the first kernel of an attention family among `ops`."""
    for op in ops:
        library = _library(op["name"])
        key = next((k for k, f in FAMILY.items() if f and library.startswith(f)), None)
        if key:
            return key
    return None


def _library(name: str) -> str:
    return kernel_names.explain(name)["library"]


def family_lines(what: str, key: str, ops: list[dict]) -> list[str]:
    """`what` runs `key` (a FAMILY key, or FUSED): at least one kernel of its family, where it has one, and
    none of another attention family's."""
    if key == FUSED:
        key = key_of(ops)
        if key is None:
            return [f"ops: no fused attention kernel, but the stage table calls {what} fused"]
    if key not in FAMILY:
        return [f"stage: {what} runs {key!r}, which kernel_names.FAMILY does not list: add its kernels' family there"]
    family = FAMILY[key]
    for i, op in enumerate(ops):
        library = _library(op["name"])
        if any(library.startswith(f) for f in FAMILIES - {family}):
            return [f"ops[{i}].name {kernel_names.label(op['name'])!r} is {library}'s, but {what} runs "
                    f"{family + ' kernels' if family else 'no fused attention kernel'}"]
    if family and not any(_library(op["name"]).startswith(family) for op in ops):
        return [f"ops: no {family} kernel, but {what} runs {family}'s"]
    return []


FLASH2_FWD = re.compile(r"flash_fwd_kernel<Flash_fwd_kernel_traits<(\d+), (\d+), (\d+), (\d+)")
CUDNN_SDPA = re.compile(r"^cudnn_generated_\w*sdpa")


def launch_lines(ops: list[dict], shape, sm_count) -> list[str]:
    """A fused kernel launched as its family launches it: FlashAttention-2's forward one block of 32·warps
    threads per (row tile, batch, head), its traits naming the head dim; cuDNN's fused attention persistent,
    at most one block per SM along x."""
    found = []
    for i, op in enumerate(ops):
        grid, block = op.get("grid"), op.get("block")
        if grid is None or block is None:
            continue
        flash = FLASH2_FWD.search(op["name"])
        if flash and shape:
            dim, rows, _, warps = map(int, flash.groups())
            b, h, s, d = shape
            grid_wanted, block_wanted = [ceil(s / rows), b, h], [32 * warps, 1, 1]
            if dim != d:
                found.append(f"ops[{i}].name is FlashAttention-2's forward for head dim {dim}, the record's is {d}")
            elif (grid, block) != (grid_wanted, block_wanted):
                found.append(f"ops[{i}].grid {grid} and block {block}: FlashAttention-2's forward with {rows}-row tiles "
                             f"and {warps} warps launches grid {grid_wanted} and block {block_wanted} at {shape}")
        elif CUDNN_SDPA.search(op["name"]) and (grid[1:] != [1, 1] or (sm_count and grid[0] > sm_count)):
            found.append(f"ops[{i}].grid {grid}: cuDNN's fused attention is persistent, at most one block per SM "
                         f"({sm_count} SMs) along x alone")
    return found


def stated_lines(stage: Stage, summary: dict) -> list[str]:
    """What a stage record repeats of the stage table (title, provider, layout) is the table's, and a reason
    it could not run has the form the capture gives one: a provider that did not load names itself and the
    exception (`<provider>: <Exception>: ...`), and no part of it is a raw log line."""
    found = [f"{k} {summary[k]!r} (the stage table: {getattr(stage, k)!r})" for k in ("title", "provider", "layout")
             if k in summary and summary[k] != getattr(stage, k)]
    reason = summary.get("unavailable")
    if isinstance(reason, str):
        named = next((p for p in PROVIDERS if reason.startswith(f"{p}: ")), None)
        if named and named != stage.provider:
            found.append(f"unavailable names {named!r}, not its stage's provider {stage.provider!r}")
        elif named and not re.match(rf"{re.escape(named)}: [A-Za-z_][\w.]*: \S", reason):
            found.append(f"unavailable {reason[:80]!r} is not `{named}: <exception>: <message>`, the form a "
                         f"provider that did not load gives")
        elif any(clean(part) != part for part in reason.split(" | ")):
            found.append(f"unavailable {reason[:80]!r} holds a raw log line, not PyTorch's reason")
    return found


def capture_lines(record: str, summary: dict, own_record: bool = False) -> list[str]:
    """Everything a profiled capture's own kernels tell about what it ran (no other record needed)."""
    stage = STAGES.get(summary.get("stage")) if isinstance(summary.get("stage"), str) else None
    if "unavailable" in summary:
        return stated_lines(stage, summary) if stage and not own_record else []
    ops = summary.get("ops", [])
    if own_record:
        function = summary.get("function")
        function = function if isinstance(function, str) else None
        named = STAGES.get(function)
        key = OWN_RUNS.get(function) or (runs(named, summary) if named and named.snippet != "sdpa" else None)
        if (summary.get("file"), function) not in OWN_RECORDS or key is None:
            return []
        if key == "sdpa":  # whichever fused backend the dispatcher chose, but one
            key = kernel_names.fingerprint(op["name"] for op in ops)
            if key not in FUSED_SDPA:
                return [f"ops: no fused SDPA kernel, but {summary['function']!r} runs scaled_dot_product_attention"]
        return family_lines(f"{summary['function']!r}", key, ops)
    if stage is None:
        return []
    found = stated_lines(stage, summary)
    key = runs(stage, summary)
    if key is not None:
        found += family_lines(f"stage {stage.name!r}", key, ops)
    return found + launch_lines(ops, summary.get("shape"), summary.get("sm_count"))


# a CUDA-graph replay launches what the code it recorded launches: a graph wrap replays the unwrapped stage,
# torch.compile's reduce-overhead replays what its default mode compiles
REPLAYS = {"graph": None, "reduce-overhead": "compile"}


def replayed(stage: Stage) -> str | None:
    """The stage whose launches a replayed stage replays: the same code, unwrapped or compiled (REPLAYS)."""
    if stage.wrap not in REPLAYS:
        return None
    return next((s.name for s in STAGES.values() if s.wrap == REPLAYS[stage.wrap] and
                 (s.snippet, s.backend, s.provider) == (stage.snippet, stage.backend, stage.provider)), None)


def _launches(ops: list[dict]) -> list[tuple]:
    return [(op["name"], op.get("grid"), op.get("block")) for op in ops if op["kind"] == "kernel"]


def replay_lines(ops: list[dict], recorded_ops: list[dict], recorded: str) -> list[str]:
    """A CUDA graph replays the launches it recorded: the kernels, grids and blocks of the capture it replays."""
    mine, theirs = _launches(ops), _launches(recorded_ops)
    if mine == theirs:
        return []
    labels = lambda launches: ", ".join(f"{kernel_names.label(n)} {g}" for n, g, _ in launches) or "none"
    return [f"ops: kernels {labels(mine)}, not those of the capture it replays, {recorded} ({labels(theirs)})"]


def dispatcher_lines(summary: dict, choice: tuple[str, str] | None) -> list[str]:
    """The dispatcher's choice is one function of the inputs: every SDPA capture at a shape and dtype states
    the one the others state (`choice`: those captures, the choice)."""
    if choice is None or "sdpa_choice" not in summary:
        return []
    records, chose = choice
    if summary["sdpa_choice"] != chose:
        return [f"sdpa_choice {summary['sdpa_choice']!r} (the dispatcher's choice for the same inputs in {records}: {chose!r})"]
    return []


# ---- counters ---------------------------------------------------------------------------------------

def _dims(text) -> list[int] | None:
    """ncu's "(8, 8, 16)" as [8, 8, 16]."""
    numbers = re.findall(r"\d+", str(text).replace(",", " ").replace("  ", " "))
    return [int(n) for n in numbers] if text is not None else None


def _number(text: str) -> int | None:
    text = text.replace(",", "").strip()
    return int(float(text)) if re.fullmatch(r"[\d.]+", text) else None


def report_launches(text: str) -> list[tuple]:
    """(registers per thread, shared memory per block) of each kernel of an ncu raw CSV report, in launch order
    (the rows counters.parse_csv reads)."""
    rows = list(csv.reader(io.StringIO(text)))
    start = next((i for i, r in enumerate(rows) if r[:1] == ["ID"]), None)
    if start is None:
        return []
    header, body = rows[start], rows[start + 1:]
    col = {name: i for i, name in enumerate(header)}
    wanted = ("launch__registers_per_thread", "launch__shared_mem_per_block_dynamic", "launch__shared_mem_per_block_static")
    if not all(w in col for w in wanted):
        return []
    out = []
    for r in body:
        if len(r) != len(header) or not r[0].strip().isdigit():
            continue
        regs, dynamic, static = (_number(r[col[w]]) for w in wanted)
        out.append((regs, None if dynamic is None or static is None else dynamic + static))
    return out


# kernels compiled in the process that runs them: ncu's process compiles its own, whose registers may differ
# (FlexAttention at 1x16x8192x128: 234 under ncu, 191 in its capture)
COMPILED_HERE = ("Triton", "FlashAttention-4", "SageAttention")


def counters_lines(capture: str, ops: list[dict], kernels: list[dict], report: str) -> list[str]:
    """A counters record's kernels were launched as its capture's (paired already by name): the same grid and
    block, and, by its ncu report, the same registers per thread and shared memory per block (but where both
    processes compiled the kernel themselves)."""
    found = []
    mine = [op for op in ops if op["kind"] == "kernel"]
    launches = report_launches(report)
    for i, (op, k) in enumerate(zip(mine, kernels)):
        if _dims(k.get("grid")) != op.get("grid") or _dims(k.get("block")) != op.get("block"):
            found.append(f"kernels[{i}].grid {k.get('grid')} and block {k.get('block')} (its capture {capture}: grid "
                         f"{op.get('grid')}, block {op.get('block')})")
        elif (i < len(launches) and launches[i] != (op.get("registers"), op.get("shared_memory"))
              and not _library(op["name"]).startswith(COMPILED_HERE)):
            found.append(f"kernels[{i}] registers and shared memory {launches[i]} in its ncu report (its capture "
                         f"{capture}: {(op.get('registers'), op.get('shared_memory'))})")
    return found


# ---- two GPUs ---------------------------------------------------------------------------------------

def _runs_of(chunks: list[int], size: int) -> list[list[int]]:
    """The positions of these chunks as sorted [first, last] runs."""
    out = []
    for c in sorted(chunks):
        first, last = c * size, (c + 1) * size - 1
        if out and out[-1][1] + 1 == first:
            out[-1][1] = last
        else:
            out.append([first, last])
    return out


def cp_layout_lines(summary: dict, settings: dict) -> list[str]:
    """A two-GPU record's ranks are those its settings lay out: ranks 0 to world-1, each holding 1/world of the
    sequence, with the load balancer two of 2·world chunks (rank r: r and 2·world-1-r), without it the r-th
    of world; the causal (query, key) pairs its queries see follow from the positions."""
    world, balanced = settings["world_size"], settings["load_balance"]
    b, h, n, d = settings["shape"]
    ranks = summary.get("ranks", [])
    if [r.get("rank") for r in ranks] != list(range(world)):
        return [f"ranks {[r.get('rank') for r in ranks]} (its settings: world_size {world}, ranks 0 to {world - 1})"]
    found = []
    chunks = 2 * world if balanced else world
    for r in ranks:
        rank = r["rank"]
        positions = _runs_of([rank, chunks - 1 - rank] if balanced else [rank], n // chunks)
        pairs = sum((last + 1) * (last + 2) // 2 - first * (first + 1) // 2 for first, last in positions)
        for field, value, wanted in [("local_shape", r.get("local_shape"), [b, h, n // world, d]),
                                     ("positions", r.get("positions"), positions), ("causal_pairs", r.get("causal_pairs"), pairs)]:
            if value != wanted:
                found.append(f"ranks[{rank}].{field} {value!r} (its settings lay out {wanted!r})")
    return found


# ---- runs ---------------------------------------------------------------------------------------

def measured_lines(result, stages: list[str]) -> list[str]:
    """A run that lists the stages it measures (its settings, which its key holds) has rows for those alone:
    every row's `path` or `stage` is one of them."""
    return [f"{where}.{k} {node[k]!r} is not a stage the run measured (its settings: {', '.join(stages)})"
            for where, node in dicts(result, "result")
            for k in ("path", "stage") if stages and isinstance(node.get(k), str) and node[k] not in stages]


def verify_rows_lines(rows: list[dict], paths: list[str]) -> list[str]:
    """Each case of a path once and every path the run's settings list over the same cases (a row of another
    path is measured_lines'); a row 'not applicable' exactly where the stage table says its path takes only
    the causal flag with its mask aligned top-left (measure/verify.py skips those)."""
    found, cases = [], {}
    for i, r in enumerate(rows):
        path = r.get("path")
        if path not in paths or path not in STAGES:
            continue
        case = repr((r.get("dtype"), r.get("shape"), r.get("fully_masked_row")))
        if case in cases.setdefault(path, set()):
            found.append(f"result[{i}] repeats a case of {path} (dtype, shape, fully masked row: {case})")
        cases[path].add(case)
        stage = STAGES[path]
        skipped = bool(r.get("fully_masked_row")) and not stage.takes_mask and stage.causal_corner == "top-left"
        if (r.get("status") == "not applicable") != skipped:
            found.append(f"result[{i}].status {r.get('status')!r}: {path} "
                         f"{'takes only the causal flag' if skipped else 'runs'} on this case (the stage table)")
    every = set().union(*cases.values()) if cases else set()
    found += [f"result: {path} has no row for {len(every - cases.get(path, set()))} of the run's cases"
              for path in paths if every - cases.get(path, set())]
    return found


ROW_INPUTS = {"mask": "causal", "dropout": 0.0, "layout": "contiguous"}  # a fallback case with a capture's inputs


def fallback_rows_lines(rows: list[dict], choices: dict) -> list[str]:
    """A fallback case that ran names its kernels, and its kernels, its aten op and the dispatcher name one
    backend, which its eligibility allows; a case with the inputs of the site's SDPA captures (`choices`:
    repr((shape, dtype)) -> (those captures, the dispatcher's choice they state)) ran what they say it chose."""
    found = []
    for i, r in enumerate(rows):
        if not isinstance(r, dict) or "error" in r:
            continue
        if "kernels" not in r:
            found.append(f"result[{i}].kernels missing: a case that ran names the kernels it ran")
            continue
        ran = r.get("ran")
        found += [f"result[{i}].{k} {r.get(k)!r} (its kernels ran {ran!r})" for k in ("aten_backend", "dispatcher_choice")
                  if r.get(k) != ran]
        allowed = r.get("eligibility")
        allowed = allowed.get(ran) if isinstance(allowed, dict) and ran in FUSED_SDPA else None
        if ran in FUSED_SDPA and not (isinstance(allowed, dict) and allowed.get("eligible")):
            found.append(f"result[{i}].ran {ran!r}, yet its eligibility says {ran} cannot run these inputs")
        capture = choices.get(repr((r.get("shape"), r.get("dtype"))))
        if capture and all(r.get(k) == v for k, v in ROW_INPUTS.items()) and capture[1] != ran:
            found.append(f"result[{i}].ran {ran!r} (the dispatcher's choice for the same inputs in {capture[0]}: {capture[1]!r})")
    return found
