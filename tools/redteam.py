"""Edits of a copy of the committed records, each checked as `check` and the strict build check it: every
edit must give one-line refusals (file, fix), never a traceback. Not a test: a search for crashes.

    python -m tools.redteam [--per-file N] [--seed S] [--only NAME,...]

Each edit is applied to a folder of links to the committed records with the edited file written anew;
`records.problems`, the checked sentences and, where nothing is refused, every piece of every chapter are
run on it. Prints one line per edit that crashed (its exception) or refused in more than one line or
without the file's name, and a count of each outcome.
"""
from __future__ import annotations

import argparse
import gzip
import json
import math
import random
import shutil
import sys
import tempfile
import traceback
from pathlib import Path

from attnprof.analysis import records
from attnprof.model import store
from attnprof.site import registry
from attnprof.site.build import Build, FalseStatement, RecordUnusable
from attnprof.site.claims.core import false_statements

DOCS = store.ROOT / "docs"
CAUGHT = (KeyError, TypeError, ValueError, OSError, FalseStatement, RecordUnusable)  # what a piece's line catches


def paths(node, prefix=(), depth=0):
    """Every field path of a JSON value (of each list, its first and last item only)."""
    yield prefix
    if depth > 6:
        return
    if isinstance(node, dict):
        for k, v in node.items():
            yield from paths(v, prefix + (k,), depth + 1)
    elif isinstance(node, list) and node:
        for i in sorted({0, len(node) - 1}):
            yield from paths(node[i], prefix + (i,), depth + 1)


def get(node, path):
    for p in path:
        node = node[p]
    return node


def edits_of(value):
    """(name, new value or DELETE) for a field holding `value`."""
    out = [("removed", DELETE), ("null", None)]
    if isinstance(value, bool):
        return out + [("a string", "yes")]
    if isinstance(value, (int, float)):
        return out + [("a string", "1"), ("zero", 0), ("negative", -1), ("inf", math.inf), ("nan", math.nan)]
    if isinstance(value, str):
        return out + [("a number", 0), ("empty", "")]
    if isinstance(value, list):
        return out + [("emptied", []), ("a string", "x")]
    if isinstance(value, dict):
        return out + [("emptied", {}), ("a list", [])]
    return out


DELETE = object()


def json_edits(name, data, rng, per_file):
    found = [p for p in paths(data) if p]
    picked = [p for p in found if len(p) == 1] + rng.sample([p for p in found if len(p) > 1],
                                                           min(per_file, sum(len(p) > 1 for p in found)))
    for path in picked:
        for what, new in edits_of(get(data, path)):
            yield f"{name} {'.'.join(map(str, path))} {what}", name, path, new


def write_edit(folder, name, data, path, new):
    data = json.loads(json.dumps(data))
    parent = get(data, path[:-1])
    if new is DELETE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = new
    (folder / name).unlink()
    (folder / name).write_text(json.dumps(data))


def trace_edits(name):
    """Edits of a gzipped trace: (label, function of the trace's bytes -> new bytes)."""
    def events(change):
        def edit(raw):
            t = json.loads(gzip.decompress(raw))
            change(t)
            return gzip.compress(json.dumps(t).encode())
        return edit
    kernels = lambda t: t.update(traceEvents=[e for e in t["traceEvents"] if e.get("cat") != "kernel"])
    annotations = lambda t: t.update(traceEvents=[e for e in t["traceEvents"] if e.get("cat") != "user_annotation"])
    half = lambda t: t.update(traceEvents=t["traceEvents"][: len(t["traceEvents"]) // 2])
    def first_kernel(change):
        def edit(t):
            change(next(e for e in t["traceEvents"] if e.get("cat") == "kernel"))
        return edit
    return [(f"{name} truncated", lambda raw: raw[: len(raw) // 2]),
            (f"{name} not gzip", lambda raw: b"{}"),
            (f"{name} no traceEvents", events(lambda t: t.pop("traceEvents"))),
            (f"{name} events emptied", events(lambda t: t.update(traceEvents=[]))),
            (f"{name} kernels removed", events(kernels)),
            (f"{name} annotations removed", events(annotations)),
            (f"{name} second half of events removed", events(half)),
            (f"{name} deviceProperties removed", events(lambda t: t.pop("deviceProperties", None))),
            (f"{name} a kernel's dur removed", events(first_kernel(lambda e: e.pop("dur")))),
            (f"{name} a kernel's dur a string", events(first_kernel(lambda e: e.update(dur="5")))),
            (f"{name} a kernel's args removed", events(first_kernel(lambda e: e.pop("args", None))))]


def outcome(folder) -> tuple[str, list[str]]:
    """('crash', [traceback's last line]) or ('refused'/'passed', lines)."""
    try:
        problems = records.problems(folder)
        build = Build(folder, problems, strict=True)
        lines = [*problems.values(), *false_statements(build, DOCS)]
        if not problems:  # the strict build renders every piece
            registry.load()
            for page in sorted(DOCS.rglob("*.md")):
                for piece, args in registry.directives(page.read_text(encoding="utf-8")):
                    try:
                        registry.expand(build, piece, args)
                    except CAUGHT as e:
                        lines.append(f"{page.name}: <!-- attnprof: {piece} {' '.join(args)} -->: {e}")
    except Exception:
        return "crash", [traceback.format_exc().strip().splitlines()[-1]]
    return ("refused" if lines else "passed"), lines


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--per-file", type=int, default=6, help="nested fields edited per file, besides the top level")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default="", help="only these files (names, comma-separated)")
    ap.add_argument("--traces", default="naive,flash,flash-bwd,window.flex,layer.sdpa",
                    help="records whose traces are edited")
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    clean = store.CAPTURES
    files = sorted(p.name for p in clean.glob("*.json"))
    if args.only:
        files = [f for f in files if f in args.only.split(",") or f.removesuffix(".json") in args.only.split(",")]
    counts, bad = {}, []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "captures"

        def fresh():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            for p in clean.iterdir():
                (folder / p.name).symlink_to(p)

        def judge(label, file_name):
            kind, lines = outcome(folder)
            counts[kind] = counts.get(kind, 0) + 1
            wrong = [l for l in lines if "\n" in l or ("python -m attnprof" not in l and "attnprof:" not in l)]
            if kind == "crash" or wrong:
                bad.append(f"{label}: {kind}: {' | '.join(lines if kind == 'crash' else wrong)[:400]}")
                print(bad[-1], flush=True)

        for name in files:
            data = json.loads((clean / name).read_text())
            for label, file_name, path, new in json_edits(name, data, rng, args.per_file):
                fresh()
                write_edit(folder, file_name, data, path, new)
                judge(label, file_name)
        for record in filter(None, args.traces.split(",")):
            path = store.trace_path(clean, record)
            for label, edit in trace_edits(record):
                fresh()
                (folder / path.name).unlink()
                (folder / path.name).write_bytes(edit(path.read_bytes()))
                judge(label, path.name)
    print(counts, f"{len(bad)} bad", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
