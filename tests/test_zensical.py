"""The same chapters under Zensical, which reads mkdocs.yml and runs its Markdown extensions but
neither MkDocs hooks nor plugins: the pieces must render from the extension alone."""
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.site

from attnprof.model.snippets import ROOT

pytest.importorskip("zensical")  # the test extra installs it


def test_zensical_renders_a_chapter_with_its_tables_and_trace(tmp_path, copy_project):
    # Zensical builds the project around its config file, into site/ beside it: build a copy of the
    # parts the pages include (the chapter, snippets, the profiling loop), never the checkout itself
    copy_project(tmp_path, ["flash"])
    env = dict(os.environ, ATTNPROF_RECAPTURE="never")
    r = subprocess.run([sys.executable, "-m", "zensical", "build", "--clean"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "Error" not in out, out
    page = (tmp_path / "site" / "flash" / "index.html").read_text()
    assert "launched from" in page and page.count("<table>") >= 3  # the op list among the tables
    assert 'aria-label="flash forward trace"' in page and "<title>1. " in page  # the trace, inline, with hovers
    assert "attnprof:" not in page
    assert not (tmp_path / "site" / "notebooks").exists()  # notebooks come from the MkDocs hook only
