"""The whole site under Zensical, which reads mkdocs.yml and runs its Markdown extensions but neither MkDocs
hooks nor plugins: every page the MkDocs build makes, the notebooks' included, with the same article text.

Accepted differences, on the seven notebook pages only: mkdocs-jupyter adds each code cell's prompt
("In [ ]:"), its copy button's hidden "Copied!" notice and a hidden copy of the cell's source for the
clipboard; Zensical's page shows the same cells as the site's other code blocks. `DROPPED` names them."""
import os
import re
import shutil
import subprocess
import sys
import time
from html.parser import HTMLParser

import pytest

from attnprof.model.snippets import ROOT

pytestmark = pytest.mark.site

# mkdocs-jupyter's additions to a notebook page's article (see the module's docstring)
DROPPED = {"jp-InputPrompt", "clipboard-copy-txt", "notice"}
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class Article(HTMLParser):
    """The text of a page's <article>, without scripts, styles and the elements DROPPED names."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.depth, self.skip, self.text = 0, [], []  # depth inside <article>; open tags being skipped

    def handle_starttag(self, tag, attrs):
        if self.depth == 0:
            self.depth = int(tag == "article")
            return
        if tag in VOID:
            return
        self.depth += 1
        classes = set((dict(attrs).get("class") or "").split())
        if self.skip or tag in ("script", "style") or classes & DROPPED:
            self.skip.append(self.depth)

    def handle_endtag(self, tag):
        if self.depth == 0 or tag in VOID:
            return
        if self.skip and self.skip[-1] == self.depth:
            self.skip.pop()
        self.depth -= 1

    def handle_data(self, data):
        if self.depth and not self.skip:
            self.text.append(data)


def article_text(page) -> str:
    parser = Article()
    parser.feed(page.read_text(encoding="utf-8"))
    return " ".join(" ".join(parser.text).split())


def pages(site) -> list[str]:
    return sorted(str(p.parent.relative_to(site)) for p in site.rglob("index.html"))


@pytest.fixture(scope="session")
def zensical_site(run_once):
    """`zensical build --clean --strict` of a copy of the project (Zensical writes site/ and .cache/ beside
    its config file), once per test run."""
    pytest.importorskip("zensical")  # the test extra installs it

    def make(tree):
        for part in ("attnprof", "snippets", "kernel-repos", "docs"):  # kernel-repos: keys FlashAttention-4's records
            shutil.copytree(ROOT / part, tree / part, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(ROOT / "mkdocs.yml", tree / "mkdocs.yml")
        env = dict(os.environ, ATTNPROF_RECAPTURE="never")
        start = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "zensical", "build", "--clean", "--strict"], cwd=tree, env=env,
                           capture_output=True, text=True, timeout=300)
        out = r.stdout + r.stderr
        assert r.returncode == 0 and "No issues found" in out and "Error" not in out, out[-3000:]
        print(f"zensical build --clean --strict took {time.perf_counter() - start:.1f} s")
    return run_once("zensical", make) / "site"


def test_zensical_writes_every_page_mkdocs_writes(site, zensical_site):
    assert pages(zensical_site) == pages(site)
    for stage in ("naive", "flash", "auto"):  # the notebook pages, with the notebooks to download
        page = (zensical_site / "notebooks" / stage / "index.html").read_text()
        assert f'href="../{stage}.ipynb"' in page and f'href="../../{stage}/"' in page
        assert (zensical_site / "notebooks" / f"{stage}.ipynb").read_bytes() == \
            (ROOT / "docs" / "notebooks" / f"{stage}.ipynb").read_bytes()


def test_every_page_has_the_same_article_text_under_both_engines(site, zensical_site):
    differ = [path for path in pages(site)
              if article_text(site / path / "index.html") != article_text(zensical_site / path / "index.html")]
    assert not differ, f"article text differs between MkDocs and Zensical on {differ}"
    flash = (zensical_site / "flash" / "index.html").read_text()
    assert "launched from" in flash and flash.count("<table>") >= 3  # the op list among the tables
    assert 'aria-label="flash forward trace"' in flash and "<title>1. " in flash  # the trace, inline, with hovers
    assert "attnprof:" not in flash


def test_zensicals_search_index_holds_every_page(site, zensical_site):
    import json
    indexed = {item["location"].split("#")[0].rstrip("/") for item in
               json.loads((zensical_site / "search.json").read_text())["items"]}
    assert indexed == {"" if path == "." else path for path in pages(site)}


def test_article_text_drops_only_mkdocs_jupyters_additions(site):
    """The comparison leaves out what DROPPED names, and nothing of the cells themselves."""
    text = article_text(site / "notebooks" / "naive" / "index.html")
    assert "In [ ]:" not in text and "Copied!" not in text
    assert text.count("def attention") == 1 and "profile_forward" in text
    assert "In [ ]:" in " ".join((site / "notebooks" / "naive" / "index.html").read_text().split())


def test_zensicals_strict_build_refuses_a_stale_notebook_in_one_line(tmp_path, copy_project):
    """The extension reads Zensical's --strict flag: a notebook whose template changed fails the build with the
    line `check` prints; without --strict the page shows it in a box."""
    tree = copy_project(tmp_path, ["flash"])
    nav = (tree / "mkdocs.yml").read_text() + "  - Flash notebook: notebooks/flash.md\n"
    (tree / "mkdocs.yml").write_text(nav)
    shutil.copytree(ROOT / "docs" / "notebooks", tree / "docs" / "notebooks", dirs_exist_ok=True)
    template = tree / "attnprof" / "site" / "notebook.py.tmpl"
    template.write_text(template.read_text().replace("## Profile it", "## Profile it here"))
    env = dict(os.environ, ATTNPROF_RECAPTURE="never")
    line = ("notebook file docs/notebooks/naive.ipynb is stale (attnprof/site/notebook.py.tmpl changed since it was "
            "written): run `python -m attnprof notebooks` and commit docs/notebooks/")
    for strict in (True, False):
        r = subprocess.run([sys.executable, "-m", "zensical", "build", "--clean"] + (["--strict"] if strict else []),
                           cwd=tree, env=env, capture_output=True, text=True, timeout=300)
        out = r.stdout + r.stderr
        if strict:
            assert r.returncode != 0 and re.search(rf"^(RuntimeError: Python error: PieceError: )?{re.escape(line)}$",
                                                   out, re.M), out[-3000:]
        else:
            assert r.returncode == 0, out[-3000:]
            page = (tree / "site" / "notebooks" / "flash" / "index.html").read_text()
            assert "Capture not usable" in page and "notebook.py.tmpl changed since it was written" in page


# ---- the Zensical site in headless Chromium ---------------------------------------------------------------

from test_browser import (FITS, PAGES, PHONE, PHONE_CHECKS, WIDE, browser, metrics, perfetto_controls,  # noqa: E402,F401
                          scheme, serve, stub)

SEARCH = """
const host = [...document.querySelectorAll('div')].find(d => d.shadowRoot && d.shadowRoot.querySelector('input'));
return host ? host.shadowRoot.querySelector('input') : null;
"""
RESULTS = """
const host = [...document.querySelectorAll('div')].find(d => d.shadowRoot && d.shadowRoot.querySelector('input'));
return [...host.shadowRoot.querySelectorAll('a[href]')].map(a => new URL(a.href).pathname);
"""


@pytest.fixture(scope="session")
def zensical_server(zensical_site):
    httpd, url = serve(zensical_site)
    yield url
    httpd.shutdown()


@pytest.mark.browser
@pytest.mark.parametrize("path", PAGES, ids=lambda p: p or "home")
def test_every_zensical_page_at_both_widths_in_both_schemes(path, zensical_server, browser):
    """At 1400 px nothing is wider than its column and every trace figure has its Open-in-Perfetto button; at
    390 px, in the dark and the light scheme, the page does not scroll sideways, and each op list's first
    time and each trace's GPU lane are on screen (test_browser's checks, on Zensical's pages)."""
    problems = []
    metrics(browser, WIDE)
    browser.get(f"{zensical_server}/{path}/" if path else f"{zensical_server}/")
    errors = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    problems += [f"console error {e}" for e in errors]
    problems += [f"at {WIDE} px: {p}" for p in browser.execute_script(FITS)]
    problems += [f"trace figure '{f}' has no Open-in-Perfetto button after it" for f in perfetto_controls(browser)]
    metrics(browser, PHONE)
    browser.refresh()
    for dark in (True, False):
        if not scheme(browser, dark):
            problems.append(f"the toggle did not switch to the {'dark' if dark else 'light'} scheme")
        overflow = browser.execute_script("return document.documentElement.scrollWidth")
        if overflow > PHONE + 1:
            problems.append(f"at {PHONE} px, {'dark' if dark else 'light'}: the page scrolls sideways ({overflow} px)")
    problems += [f"at {PHONE} px: {p}" for p in browser.execute_script(PHONE_CHECKS)]
    assert not problems, f"{path or 'home'} under Zensical:\n" + "\n".join(problems)


@pytest.mark.browser
def test_zensicals_open_in_perfetto_posts_the_committed_trace(zensical_server, stub, browser, perfetto_received):
    import base64
    import gzip
    from attnprof.model import store
    browser.get(f"{zensical_server}/naive/")
    received = perfetto_received(browser, stub)
    committed = (store.CAPTURES / "naive.trace.json.gz").read_bytes()
    assert gzip.decompress(base64.b64decode(received["base64"])) == gzip.decompress(committed)
    assert received["origin"] == zensical_server


@pytest.mark.browser
@pytest.mark.parametrize("query, page", [("regenerate", "/contributing/records/"),
                                         ("Download this notebook", "/notebooks/")])
def test_zensicals_search_finds_pages(zensical_server, browser, query, page):
    """Typed into Zensical's search box, a query lists the pages that hold it (a contributor's page, the
    notebooks' pages)."""
    from selenium.webdriver.support.ui import WebDriverWait
    browser.get(f"{zensical_server}/")
    browser.find_element("css selector", ".md-search__button").click()
    box = WebDriverWait(browser, 10).until(lambda b: b.execute_script(SEARCH))
    box.send_keys(query)
    found = WebDriverWait(browser, 10).until(
        lambda b: [p for p in b.execute_script(RESULTS) if p.startswith(page)] or None)
    assert found, f"searching {query!r} lists no page under {page}"
