"""Which conclusions say something else from one regeneration to another, under this tree's code: the
measure of whether the site's words survive re-measurement.

    python tools/moves.py [--build] [--gpu SET] [COMMIT ...]
        (SET: a set of records, h200 by default; COMMIT: by default the last three that changed its run-timing.json)

Each COMMIT holds a whole regeneration of docs/captures. For each, a copy of this working tree gets that
commit's records, and its measuring code and snippets (so that the records are fresh under their keys);
the pages, the claims and the analysis stay this tree's. `python -m attnprof conclusions` runs in each copy,
and a conclusion moves when its words with every number masked (site/conclusions.words) differ between two
regenerations: a verdict, a ranking or "not told apart" that changed, not a figure.

With --build, each copy is also built by both engines, strict (`mkdocs build --strict`, `zensical build
--clean --strict`), on its own records; a build shows those records when its pages hold the lessons (the
words before "evidence", numbers and all) that `conclusions` computed from them, so each line counts them.
"""
from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from attnprof.site.conclusions import words  # noqa: E402

FROM_COMMIT = ("docs/captures", "attnprof/measure", "snippets")  # what a regeneration's records are keyed by


def git(*args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, check=True).stdout


def overlay(commit: str, scratch: Path) -> Path:
    """A copy of this working tree with `commit`'s records and the code they are keyed by."""
    tree = scratch / commit
    for name in git("ls-files", "-z").decode().split("\0"):
        if name and (ROOT / name).is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, tree / name)
    for part in FROM_COMMIT:
        shutil.rmtree(tree / part, ignore_errors=True)
        tarfile.open(fileobj=BytesIO(git("archive", commit, part))).extractall(tree, filter="data")
    # a regeneration from before the sets (one folder of records) lies in its GPU's set; records of the format
    # before issue 52 are rewritten to this tree's, and every record stamped with this tree's key (nothing
    # measured changes: the words are this tree's over that regeneration's numbers)
    captures = tree / "docs" / "captures"
    if (captures / "run-timing.json").is_file():
        sys.path.insert(0, str(ROOT))
        from attnprof.model.store import set_name
        into = captures / set_name(json.loads((captures / "run-timing.json").read_text())["device"])
        into.mkdir()
        for path in [p for p in captures.iterdir() if p.is_file()]:
            path.rename(into / path.name)
    for folder in (p for p in captures.iterdir() if p.is_dir()):
        subprocess.run([sys.executable, "tools/migrate_records.py", str(folder), "--restamp"], cwd=tree, check=True,
                       capture_output=True, env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"})
    return tree


def conclusions(tree: Path, gpu: str = "h200") -> dict[str, str]:
    """The conclusions of this tree's code over the records of set `gpu` in `tree`."""
    out = tree / "conclusions.json"
    subprocess.run([sys.executable, "-m", "attnprof", "conclusions", "--json", str(out)], cwd=tree, check=True,
                   capture_output=True, env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin", "ATTNPROF_GPU": gpu})
    return json.loads(out.read_text())


# each engine's command and where it writes the copy's site (Zensical: its own default)
ENGINES = {"mkdocs": (["mkdocs", "build", "--strict", "-d", "site-mkdocs"], "site-mkdocs"),
           "zensical": (["zensical", "build", "--clean", "--strict"], "site")}


INLINE = r"</?(?:a|abbr|b|code|em|i|kbd|span|strong)\b[^>]*>"


def page_text(site: Path, doc: str) -> str:
    """The text of the built page of docs/`doc`, tags dropped, whitespace folded."""
    name = doc.removeprefix("docs/").removesuffix(".md")
    name = "" if name == "index" else name.removesuffix("/index")
    page = site / name / "index.html"
    raw = page.read_text(encoding="utf-8") if page.is_file() else ""
    raw = re.sub(INLINE, "", raw)  # a word in <code> or <strong> runs on into the text around it
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", raw)).split())


def lesson(conclusion: str) -> str:
    """A conclusion's words before its evidence, whitespace folded: what its page states first."""
    return " ".join(conclusion.split(" (evidence:")[0].split())


def build(tree: Path, found: dict[str, str], gpu: str = "h200") -> str:
    """Each engine's strict build of `tree` from set `gpu`, in a few words each: how it ended, its seconds, and how
    many of `found`'s lessons its pages hold word for word."""
    env = dict(os.environ, PYTHONPATH=str(tree), ATTNPROF_RECAPTURE="never", ATTNPROF_GPU=gpu)
    said = []
    for engine, (args, site) in ENGINES.items():
        shutil.rmtree(tree / site, ignore_errors=True)
        start = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", *args], cwd=tree, env=env, capture_output=True, text=True)
        took = time.perf_counter() - start
        failed = r.returncode != 0 or (engine == "zensical" and "No issues found" not in r.stdout + r.stderr)
        if failed:
            said.append(f"{engine} FAILED ({r.returncode}): {(r.stdout + r.stderr).strip().splitlines()[-1:]}")
            continue
        said.append(f"{engine} strict ok in {took:.0f} s, {held(tree / site, found)} of {len(found)} lessons on their pages")
    return "; ".join(said)


def held(site: Path, found: dict[str, str]) -> int:
    """How many of `found`'s lessons the built `site`'s pages hold word for word."""
    return sum(lesson(text) in page_text(site, key.split(":")[0]) for key, text in found.items())


def last_regenerations(gpu: str, n: int = 3) -> list[str]:
    """The last `n` regenerations of set `gpu`, oldest first: each the newest commit of the timing run it took (one
    that only moved or rewrote the record is not another)."""
    from tools import drift
    return [c for c, _ in drift.committed(f"docs/captures/{gpu}/run-timing.json")][:n][::-1]


def main(args: list[str]) -> int:
    built = "--build" in args
    gpu = args[args.index("--gpu") + 1] if "--gpu" in args else "h200"
    commits = [a for i, a in enumerate(args) if a not in ("--build", "--gpu") and (i == 0 or args[i - 1] != "--gpu")]
    for c in commits:  # a refusal is one line: an option it does not know, or a name git cannot resolve
        if c.startswith("-") or subprocess.run(["git", "rev-parse", "-q", "--verify", f"{c}^{{commit}}"], cwd=ROOT,
                                               capture_output=True).returncode:
            print(f"moves.py: {c!r} is not a commit here; usage: python tools/moves.py [--build] [--gpu SET] [COMMIT ...]",
                  file=sys.stderr)
            return 2
    if not commits:
        commits = last_regenerations(gpu)
    found = {}
    with tempfile.TemporaryDirectory() as scratch:
        for c in commits:
            tree = overlay(c, Path(scratch))
            found[c] = conclusions(tree, gpu)
            if built:
                print(f"{c}: {build(tree, found[c], gpu)}", flush=True)
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
