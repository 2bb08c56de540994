"""Which conclusions say something else from one regeneration to another, under this tree's code: the
measure of whether the site's words survive re-measurement.

    python tools/moves.py [COMMIT ...]    (default: the last three commits that changed run-timing.json)

Each COMMIT holds a whole regeneration of docs/captures. For each, a copy of this working tree gets that
commit's records, and its measuring code and snippets (so that the records are fresh under their keys);
the pages, the claims and the analysis stay this tree's. `python -m attnprof conclusions` runs in each copy,
and a conclusion moves when its words with every number masked (site/conclusions.words) differ between two
regenerations: a verdict, a ranking or "not told apart" that changed, not a figure.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from attnprof.site.conclusions import words  # noqa: E402

FROM_COMMIT = ("docs/captures", "attnprof/measure", "snippets")  # what a regeneration's records are keyed by


def git(*args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, check=True).stdout


def conclusions(commit: str, scratch: Path) -> dict[str, str]:
    """The conclusions of this tree's code over `commit`'s records."""
    tree = scratch / commit
    for name in git("ls-files", "-z").decode().split("\0"):
        if name and (ROOT / name).is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, tree / name)
    for part in FROM_COMMIT:
        shutil.rmtree(tree / part, ignore_errors=True)
        tarfile.open(fileobj=BytesIO(git("archive", commit, part))).extractall(tree, filter="data")
    out = tree / "conclusions.json"
    subprocess.run([sys.executable, "-m", "attnprof", "conclusions", "--json", str(out)], cwd=tree, check=True,
                   capture_output=True, env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"})
    return json.loads(out.read_text())


def main(commits: list[str]) -> int:
    if not commits:
        commits = git("log", "-3", "--format=%h", "--", "docs/captures/run-timing.json").decode().split()[::-1]
    with tempfile.TemporaryDirectory() as scratch:
        found = {c: conclusions(c, Path(scratch)) for c in commits}
    keys = sorted(set().union(*found.values()))
    moving = [k for k in keys if len({words(found[c].get(k, "(none)")) for c in commits}) > 1]
    for k in moving:
        print(f"~ {k}")
        for c in commits:
            print(f"    {c}: {found[c].get(k, '(none)')}")
    print(f"{len(moving)} of {len(keys)} conclusions say something else across {len(commits)} regenerations "
          f"({', '.join(commits)}){': ' if moving else ''}{', '.join(moving)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
