"""tools/moves.py --build: each regeneration's copy built by both engines, strict, and its pages counted
for the lessons its own records give."""
import subprocess

import pytest

from attnprof.model.snippets import ROOT
from tools import moves

pytestmark = pytest.mark.site


def test_each_engine_builds_the_copy_and_its_pages_hold_the_copys_lessons(tmp_path):
    pytest.importorskip("zensical")  # the test extra installs it
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()
    tree = moves.overlay(head, tmp_path)
    found = moves.conclusions(tree)
    said = moves.build(tree, found).split("; ")
    assert [s.split()[0] for s in said] == ["mkdocs", "zensical"] and all("strict ok" in s for s in said), said
    held = {int(s.split(", ")[1].split()[0]) for s in said}
    assert len(held) == 1 and held.pop() >= len(found) - 8, said  # the same lessons under both engines
    # a lesson its pages do not hold (one number changed) is not counted
    key = next(k for k, v in found.items()
               if "7" in moves.lesson(v) and moves.lesson(v) in moves.page_text(tree / "site", k.split(":")[0]))
    altered = {k: v.replace("7", "6", 1) if k == key else v for k, v in found.items()}
    again = moves.build(tree, altered).split("; ")
    assert all(f"{n - 1} of" in s for s, n in zip(again, [int(s.split(", ")[1].split()[0]) for s in said])), again
