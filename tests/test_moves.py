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
    assert held == {len(found)}, said  # every lesson on its page, under both engines
    # a lesson its pages do not hold (one number changed) is not counted, in either engine's site
    key = next(k for k, v in found.items()
               if "7" in moves.lesson(v) and moves.lesson(v) in moves.page_text(tree / "site", k.split(":")[0]))
    altered = {k: v.replace("7", "6", 1) if k == key else v for k, v in found.items()}
    assert [moves.held(tree / site, altered) for _, site in moves.ENGINES.values()] == [len(found) - 1] * 2


def test_fewer_reads_a_run_cut_to_fewer_of_its_processes_as_taken_so(tmp_path):
    """tools/fewer.py: the copy's timing run keeps all but one of its processes, its records pass `check`
    under that setting, and the conclusions drawn from it are computed from those processes."""
    import json
    from tools import fewer
    tree = moves.overlay("HEAD", tmp_path)
    full = moves.conclusions(tree)
    processes = len(json.loads((tree / "docs/captures/h200/run-timing.json").read_text())["processes"])
    assert processes >= 3  # fewer than it has, and still a repeated run
    got = fewer.what_if(tree, {"timing": list(range(1, processes))}, processes - 1)
    assert got["problems"] == {}
    assert set(got["conclusions"]) == set(full)
    said = lambda n: f"median over {n} separate processes"
    drawn = [k for k, v in full.items() if "cpu-saving" in k and said(processes) in v]
    assert drawn and all(said(processes - 1) in got["conclusions"][k] for k in drawn), drawn
    paired_ok, paired, apart_ok, apart = got["aa"]
    assert 0 < paired_ok <= paired and 0 < apart_ok <= apart


@pytest.mark.parametrize("arg", ["--help", "no-such-commit"])
def test_moves_refuses_what_is_not_a_commit_in_one_line(arg, capsys):
    assert moves.main([arg]) == 2
    said = capsys.readouterr().err
    assert said.count("\n") == 1 and repr(arg) in said and "usage: python tools/moves.py" in said


def test_a_conclusions_words_mask_its_figures_and_its_ranges_form():
    from attnprof.site import conclusions
    above = "cuDNN's adds 28.5 µs [1.1–28.5 µs] stored BHSD, so FlashAttention-4's is more"
    below = "cuDNN's adds 28.5 µs [−1.1 to 28.5 µs] stored BHSD, so FlashAttention-4's is more"
    assert conclusions.words(above) == conclusions.words(below)  # a figure below zero is still a figure
    assert conclusions.words("SM clock 1,830–1,980 MHz") == conclusions.words("SM clock 1,980 MHz")  # one clock or several
    assert conclusions.words(above) != conclusions.words(above.replace("is more", "is not told apart"))


def test_a_conclusion_is_plain_text_as_its_page_reads_it():
    """A conclusion keeps no emphasis marks (a title in *italics*, a verdict in **bold**) nor a link's target,
    and a multiplication sign or a lone asterisk stays: the words a page's reader sees."""
    from attnprof.site.conclusions import plain
    said = "the *Sliding window, FlexAttention* capture is **launch-bound**, 2 * 3 and a*b, [see](x.md#y) `op`"
    assert plain(said) == "the Sliding window, FlexAttention capture is launch-bound, 2 * 3 and a*b, see op"


def test_the_readme_and_methods_give_the_count_of_conclusions_that_moved(capsys):
    """README.md and Methods state how many conclusions say something else across the last three regenerations:
    the count `python tools/moves.py` reports now (a new regeneration that moves another fails here)."""
    import re
    assert moves.main([]) == 0
    moved, total = re.match(r"(\d+) of (\d+) conclusions", capsys.readouterr().out.splitlines()[-1]).groups()
    for doc in ("README.md", "docs/methods.md"):
        assert f"{moved} of the {total} conclusions" in " ".join((ROOT / doc).read_text().split()), doc
