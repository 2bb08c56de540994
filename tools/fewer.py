"""Would the site say the same with fewer processes? A repeated run's words, had it been taken in fewer.

    python tools/fewer.py RUN[,RUN ...] [--keep N] [COMMIT ...]    (N: 2; COMMIT: as tools/moves.py)

A run's processes are independent repeats, so a run taken in N processes is any N of those a regeneration
took. For each COMMIT and each way of choosing N of the processes (the same ones of every RUN), a copy of this tree with
that commit's records (moves.overlay) keeps only those processes; in the process that reads them the
run's repeats are set to N (names.RUN_CODE) and the copies' records are stamped with the key that
setting gives, so that they are read as taken so (a what-if in a temporary folder: no number is touched,
nothing is written to docs/captures). It prints the conclusions whose words (numbers masked) differ from
those the commit's full records give, the conclusions that move across the commits, and the A/A rates
Methods counts (at least aa.AT_LEAST must come out not told apart).
"""
from __future__ import annotations

import itertools
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tools import moves  # noqa: E402
from attnprof.site.conclusions import words  # noqa: E402

# run in the copy: RUN_CODE patched, the kept processes' records stamped, the conclusions and A/A counted
READ = """
import dataclasses, json, sys
from attnprof.model import names
runs, keep, out = json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
for run in runs:
    names.RUN_CODE[run] = dataclasses.replace(names.RUN_CODE[run], repeats=keep)
from attnprof.analysis import records
from attnprof.model import store
for run, kept in runs.items():
    path = store.summary_path(store.CAPTURES, f"run-{run}")
    d = json.loads(path.read_text())
    results = [d["result"], *d["repeats"]]
    d["result"], d["repeats"] = results[kept[0]], [results[i] for i in kept[1:]]
    d["processes"] = [d["processes"][i] for i in kept]
    kind = records.kind_of(f"run-{run}")
    d["settings"] = names.run_settings(run)
    d["key"], d["code"] = kind.key(f"run-{run}"), kind.code(f"run-{run}")
    path.write_text(json.dumps(d))
problems = records.problems()
from attnprof.site.build import Build
from attnprof.site.conclusions import conclusions
from attnprof.site.pieces.guides import aa_counts
paired, apart = aa_counts(Build(problems={}))
json.dump({"problems": {k: str(v) for k, v in problems.items()},
           "conclusions": conclusions(Build(store.CAPTURES, strict=True), store.ROOT / "docs"),
           "aa": [paired.count(0), len(paired), apart.count(0), len(apart)]}, open(out, "w"))
"""


def what_if(tree: Path, chosen: dict[str, list[int]], keep: int) -> dict:
    out = tree / "what-if.json"
    subprocess.run([sys.executable, "-c", READ, json.dumps(chosen), str(keep), str(out)], cwd=tree, check=True,
                   capture_output=True, env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"})
    return json.loads(out.read_text())


def main(args: list[str]) -> int:
    keep = int(args[args.index("--keep") + 1]) if "--keep" in args else 2
    rest = [a for i, a in enumerate(args) if a != "--keep" and (i == 0 or args[i - 1] != "--keep")]
    runs, commits = rest[0].split(","), rest[1:]
    if not commits:
        commits = moves.last_regenerations("h200")
    cut: dict[tuple, dict] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for c in commits:
            tree = moves.overlay(c, Path(scratch))
            full = moves.conclusions(tree)
            counts = {r: 1 + len(json.loads((tree / "docs/captures/h200" / f"run-{r}.json").read_text())["repeats"])
                      for r in runs}
            for subset in itertools.combinations(range(min(counts.values())), keep):
                chosen = {r: list(subset) for r in runs}
                got = what_if(moves.overlay(c, Path(scratch) / f"{c}-{len(cut)}"), chosen, keep)
                if got["problems"]:
                    print(f"{c} {chosen}: not usable: {next(iter(got['problems'].values()))}")
                differ = [k for k in full if words(got["conclusions"].get(k, "(none)")) != words(full[k])]
                p_ok, p_n, a_ok, a_n = got["aa"]
                print(f"{c} processes {chosen}: {len(differ)} of {len(full)} conclusions say something else"
                      f"{': ' + ', '.join(differ) if differ else ''}; A/A not told apart {p_ok}/{p_n} paired, "
                      f"{a_ok}/{a_n} apart", flush=True)
                cut[(c, json.dumps(chosen))] = got["conclusions"]
    by_subset = {}
    for (c, chosen), found in cut.items():
        by_subset.setdefault(chosen, {})[c] = found
    for chosen, found in by_subset.items():
        keys = sorted(set().union(*found.values()))
        moving = [k for k in keys if len({words(found[c].get(k, "(none)")) for c in found}) > 1]
        print(f"processes {chosen} in each: {len(moving)} of {len(keys)} move across {', '.join(found)}"
              f"{': ' + ', '.join(moving) if moving else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
