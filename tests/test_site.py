"""The site build: strict from the committed captures, and loud about a broken capture."""
import json
import shutil

import pytest

pytestmark = pytest.mark.site  # builds the whole site

from attnprof.model import store
from attnprof.analysis import records
from attnprof.model.stages import ladder



def test_every_stage_chapter_has_table_op_list_trace_and_stamp(site):
    for stage in ladder():
        page = (site / stage / "index.html").read_text()
        assert "<table>" in page, stage
        assert "<svg" in page and "<img" not in page.split("md-content")[1], stage  # the trace, inline
        assert f'aria-label="{stage} forward trace"' in page, stage
        at = f"captures/{store.GPU}/{stage}.trace.json.gz"
        assert at in page and (site / at).exists(), stage
        assert "Captured on NVIDIA H200" in page and "attnprof:" not in page, stage


def test_naive_marks_the_memcpy_and_inplace_shows_the_computed_diff(site):
    assert "Memcpy DtoD (Device -&gt; Device)</code></strong> ⟵" in (site / "naive" / "index.html").read_text()
    inplace = (site / "inplace" / "index.html").read_text()
    assert "#4 in naive" in inplace and "device time saved" in inplace


def test_search_finds_the_prose_and_not_the_figures_labels(site):
    """The search index holds a chapter's words, not the axis labels and legends drawn in its figures."""
    docs = json.loads((site / "search" / "search_index.json").read_text())["docs"]
    naive = " ".join(d["text"] for d in docs if d["location"].startswith("naive/"))
    assert "masked_fill" in naive and "launch tick" not in naive and "time since" not in naive


def test_notebooks_are_built_and_downloadable(site):
    for stage in ladder():
        assert (site / "notebooks" / stage / "index.html").exists()
        nb = json.loads((site / "notebooks" / stage / f"{stage}.ipynb").read_text())
        assert any("profile_forward" in "".join(c["source"]) for c in nb["cells"])


def test_a_corrupt_capture_fails_the_strict_build_in_one_line(tmp_path, build_site, copy_project):
    folder = tmp_path / "captures"
    shutil.copytree(store.CAPTURES, folder)
    (folder / "inplace.json").write_text("{ truncated")
    r = build_site(tmp_path / "site", env_extra={"ATTNPROF_CAPTURES": str(folder)})
    assert r.returncode != 0
    assert "capture inplace.json is corrupt" in r.stderr and "python -m attnprof capture inplace" in r.stderr
    tree = copy_project(tmp_path / "tree", ["inplace"])  # served, not strict: the page shows a box instead
    r = build_site(tmp_path / "site2", strict=False, env_extra={"ATTNPROF_CAPTURES": str(folder)}, root=tree)
    assert r.returncode == 0, r.stderr
    page = (tmp_path / "site2" / "inplace" / "index.html").read_text()
    assert "Capture not usable" in page and "corrupt" in page


def test_fused_chapter_shows_what_ran_and_what_could_not(site):
    page = (site / "fused" / "index.html").read_text()
    assert "did not run: <code>get_kernel</code> could not ask the Hugging Face Hub whether the publisher is trusted, so no kernel was loaded" in page
    assert "<td>did not run (its section says why)</td>" in page  # the providers' table; the reason once, in its section
    body = page.split("<article", 1)[1].split("</article>", 1)[0]
    raw = "could not verify publisher trust status"  # the provider's own words: only inside a collapsed block
    assert raw in body and all("<details" in part.rsplit("</details>", 1)[-1] for part in body.split(raw)[:-1])
    assert "triton_tem_fused_flex_attention" in page and "quant_per_block_int8_kernel" in page
    assert 'aria-label="flex forward trace"' in page and 'aria-label="sage forward trace"' in page
    assert 'aria-label="hub forward trace"' not in page


def test_pages_beyond_the_post_are_built_from_the_runs(site):
    for page in ("scaling", "roofline", "serving", "end-to-end", "fallback", "verification", "claims"):
        html = (site / page / "index.html").read_text()
        assert "Measured on NVIDIA H200" in html or page == "claims", page
        assert "<table>" in html and "attnprof:" not in html and "Capture not usable" not in html, page
    for page, title in (("scaling", "Forward throughput, head dim 128"), ("roofline", "Roofline at"),
                        ("serving", "Decode: one query token"), ("fallback", "recompile limit")):
        assert '<svg xmlns="http://www.w3.org/2000/svg"' in (site / page / "index.html").read_text(), page
        assert title in (site / page / "index.html").read_text(), page
    assert not (site / "figures").exists()  # figures are inline, no generated files
    cost = (site / "end-to-end" / "index.html").read_text()
    assert 'id="attnprof-price"' in cost and "javascripts/cost.js" in cost


def test_template_heavy_kernel_names_survive_into_html(site):
    import html as html_lib
    import re as re_lib
    page = (site / "naive" / "index.html").read_text()
    name = next(op["name"] for op in records.load_summary("naive")["ops"] if "masked_fill" in op["name"])
    titles = [html_lib.unescape(t) for t in re_lib.findall(r'<code title="([^"]*)"', page)]
    assert name in titles  # the full name, with its < > & ::, round-trips through the tooltip
    ops_table = next(t for t in page.split("<table>")[1:] if "launched from" in t)
    rows = ops_table.split("</table>")[0].count("<tr>") - 1
    assert rows == records.load_summary("naive")["ops_per_forward"]


def test_each_build_hands_the_extension_a_fresh_build(monkeypatch):
    """What one build read (captures, problems) never outlives it: `mkdocs serve` rebuilds from a new Build."""
    from mkdocs.config import load_config
    from attnprof.site import hook
    from attnprof.model.snippets import ROOT
    monkeypatch.setenv("ATTNPROF_RECAPTURE", "never")
    builds = [hook.on_config(load_config(str(ROOT / "mkdocs.yml"))).mdx_configs[hook.EXTENSION]["build"]
              for _ in range(2)]
    assert builds[0] is not builds[1] and builds[0].problems == {}


BUILD_WITHOUT_TORCH = ("import sys; sys.modules['torch'] = None; from mkdocs.__main__ import cli; "
                       "sys.argv = ['mkdocs', 'build', '-q', '--strict', '-d', sys.argv[1]]; cli()")


@pytest.fixture(scope="module")
def edited_site(tmp_path_factory, copy_project):
    """The site built strictly from a copy of the project in which torch cannot be imported and
    snippets/naive.py has gained a comment, a blank line and other spacing (its notebook written again)."""
    import os
    import subprocess
    import sys
    tree = copy_project(tmp_path_factory.mktemp("tree"), ["naive", "flash", "scaling"])
    naive = tree / "snippets" / "naive.py"
    naive.write_text(naive.read_text().replace(
        "def attention(", "# Six lines, six kernels: read them against the op list below.\n\n\ndef attention(", 1)
        .replace("(-2, -1)", "(-2,  -1)"))
    env = dict(os.environ, ATTNPROF_RECAPTURE="never", NO_MKDOCS_2_WARNING="1")
    env.pop("ATTNPROF_CAPTURES", None)
    # the naive notebook shows the edited section, comments and all: written again, as `check` asks
    notebooks = subprocess.run([sys.executable, "-m", "attnprof", "notebooks"], cwd=tree, capture_output=True,
                               text=True, env=env, timeout=120)
    assert notebooks.stdout == "wrote docs/notebooks/naive.ipynb\n", notebooks.stdout + notebooks.stderr
    r = subprocess.run([sys.executable, "-c", BUILD_WITHOUT_TORCH, str(tree / "site")], cwd=tree,
                       capture_output=True, text=True, env=env, timeout=300)
    return r, tree / "site"


def test_the_site_builds_without_torch(edited_site):
    r, site = edited_site
    assert r.returncode == 0, r.stderr
    assert "Captured on NVIDIA H200" in (site / "flash" / "index.html").read_text()
    assert "<svg" in (site / "naive" / "index.html").read_text()  # the trace picture, drawn without torch
    assert '<svg xmlns="http://www.w3.org/2000/svg"' in (site / "scaling" / "index.html").read_text()


def test_a_comment_edit_of_a_snippet_keeps_its_capture_and_shows_on_the_page(edited_site):
    r, site = edited_site
    assert r.returncode == 0, r.stderr  # not stale: the code that was profiled did not change
    page = (site / "naive" / "index.html").read_text()
    assert "Six lines, six kernels: read them against the op list below." in page


def test_notebook_pages_weigh_under_250_kib_with_their_stylesheet(site):
    """mkdocs-jupyter inlines JupyterLab's 560 KiB stylesheet into every notebook page; the hook links
    one slimmed copy instead, and the page still carries the classes that copy styles."""
    css = site / "stylesheets" / "jupyter.css"
    for page in (site / "notebooks").glob("*/index.html"):
        html = page.read_text()
        assert 'href="../../stylesheets/jupyter.css"' in html and "@charset" not in html, page
        assert page.stat().st_size + css.stat().st_size < 250 * 1024, page
        assert "jp-Cell" in html and ".jp-Cell" in css.read_text()


H100 = "NVIDIA H100 80GB HBM3"


def _on_another_gpu(folder, name: str):
    """Every record's, trace's and report's GPU name in `folder` rewritten to `name` (deviceProperties included)."""
    import gzip
    for path in folder.iterdir():
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        if b"NVIDIA H200" in raw:
            raw = raw.replace(b"NVIDIA H200", name.encode())
            path.write_bytes(gzip.compress(raw) if path.suffix == ".gz" else raw)


def test_a_site_built_from_another_gpus_records_names_that_gpu(tmp_path, build_site, copy_project):
    """The same records said to be an H100's: every page names the H100 and no H200, outside the changelog, the
    contributors' pages and folded details. (The chapter that sets two GPUs side by side names both by design: it
    is left out, as its claims would compare these records, an H200's, with the H100's own.)"""
    import re
    from attnprof.model import gpus
    chapters = sorted(p.stem for p in (store.ROOT / "docs").glob("*.md") if p.stem not in ("index", "h100-vs-h200"))
    tree = copy_project(tmp_path / "project", chapters)
    folder = tmp_path / "captures"
    shutil.copytree(store.CAPTURES, folder)
    _on_another_gpu(folder, H100)
    r = build_site(tmp_path / "site", env_extra={"ATTNPROF_CAPTURES": str(folder)}, root=tree)
    assert r.returncode == 0, r.stderr[-5000:]
    named = {}
    for page in (tmp_path / "site").rglob("*.html"):
        where = page.relative_to(tmp_path / "site").parts
        if where[0] in ("changelog", "contributing"):
            continue
        text = re.sub(r"<details\b.*?</details>", "", page.read_text(), flags=re.S)
        assert "H200" not in text, (page, re.findall(r".{0,60}H200.{0,60}", text)[:3])
        named[where[0]] = text.count(gpus.display(H100))
    assert named["at-a-glance"] and named["index.html"] and named["auto"], named
