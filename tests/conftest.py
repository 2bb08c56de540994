import contextlib
import fcntl
import gc
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attnprof.analysis import trace
from attnprof.model.snippets import ROOT

FIXTURES = Path(__file__).parent / "fixtures"  # real H200 traces: h200-<record>.trace.json.gz


def pytest_configure(config):
    """A full collection walks every object a worker holds (torch, the records, the pages read: more than
    half a million). By default one follows every ten collections of the middle generation, which cost
    about a sixth of a worker's time; after every hundred instead. The younger collections still free
    most cycles."""
    gc.set_threshold(700, 10, 100)


# Run first: it spends most of its time waiting on the page's own timeout (PERFETTO_NOTE_S), which the
# other workers' tests fill, instead of holding up the end of the run.
FIRST = ("test_every_open_in_perfetto_control_answers_offline",)


def pytest_collection_modifyitems(items):
    """Mark the tests that read the fixture traces, so `-m gpu_fixture` picks the trace analysis alone; put the
    tests named in FIRST first (pytest-xdist hands the first worker the front of the list)."""
    for item in items:
        if "h200" in getattr(item, "fixturenames", ()) or "fixtures_dir" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.gpu_fixture)
    items.sort(key=lambda item: item.name not in FIRST)  # stable: every other test keeps its place


@pytest.fixture(scope="session")
def fixtures_dir():
    return FIXTURES


@pytest.fixture(scope="session")
def h200():
    """Load a committed H200 trace fixture by record name (`flash`, `flash-bwd`, `cp-w2`...)."""
    cache = {}

    def load(record):
        if record not in cache:
            stem = record if record.startswith("h200") else f"h200-{record}"  # h200x2-...: two GPUs
            cache[record] = trace.load(FIXTURES / f"{stem}.trace.json.gz")
        return cache[record]
    return load


@pytest.fixture(scope="session")
def perfetto_received():
    return _perfetto_received


def _perfetto_received(browser, stub) -> dict:
    """Click the page's Open-in-Perfetto control with Perfetto's page replaced by `stub` (a local page that
    speaks its postMessage protocol): what the stub received (base64, title, origin)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    home = browser.current_window_handle
    browser.execute_script("window.attnprofPerfettoUrl = arguments[0]", stub)
    browser.find_element(By.CSS_SELECTOR, "a.attnprof-perfetto").click()
    WebDriverWait(browser, 10).until(lambda b: len(b.window_handles) == 2)
    browser.switch_to.window(next(h for h in browser.window_handles if h != home))
    try:
        return WebDriverWait(browser, 20).until(lambda b: b.execute_script("return window.received || null"))
    finally:
        browser.close()
        browser.switch_to.window(home)


@pytest.fixture(scope="session")
def build_site():
    return build


@contextlib.contextmanager
def locked(path: Path):
    """Hold an exclusive lock on the file `path` (made if missing): one test process at a time, xdist workers included."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def build(dest, strict=True, env_extra=None, root=ROOT, quiet=True):
    """`mkdocs build` of the project at `root` into `dest`, never recapturing; returns the finished process.
    Builds of one tree take turns: they share mkdocs-jupyter's conversion cache under .cache/. A quiet build
    (-q) logs errors only, and MkDocs' strict mode then counts no warning: a broken link or anchor fails
    only a build that is not quiet."""
    env = dict(os.environ, ATTNPROF_RECAPTURE="never", NO_MKDOCS_2_WARNING="1", **(env_extra or {}))
    cmd = ([sys.executable, "-m", "mkdocs", "build"] + (["-q"] if quiet else []) + ["-d", str(dest)]
           + (["--strict"] if strict else []))
    with locked(Path(root) / ".cache" / "tests-build.lock"):
        return subprocess.run(cmd, cwd=root, capture_output=True, text=True, env=env, timeout=300)


def project_copy(tree, pages):
    """A copy of the project in `tree` with only these chapters (and the home page), a nav of them and no
    notebook pages in the nav, so that a build of it is quick; the code, snippets, captures, notebooks and
    assets are all there."""
    import shutil
    for part in ("snippets", "attnprof", "kernel-repos"):  # kernel-repos: FlashAttention-4's files key its records
        shutil.copytree(ROOT / part, tree / part, ignore=shutil.ignore_patterns("__pycache__"))
    keep = {"index.md", *(f"{p}.md" for p in pages)}
    docs = ROOT / "docs"  # the chapters not asked for are left out, and the pages for contributors
    shutil.copytree(docs, tree / "docs", ignore=lambda d, names: [
        n for n in names if Path(d) == docs and (n.endswith(".md") and n not in keep or n == "contributing")])
    lines = (ROOT / "mkdocs.yml").read_text().splitlines()
    jupyter = lines.index("  - mkdocs-jupyter:")  # the notebook pages are not what these builds test
    lines = lines[:jupyter] + [l for l in lines[jupyter + 1:] if not l.startswith("      ")]
    start = lines.index("nav:")
    end = next((i for i in range(start + 1, len(lines)) if lines[i] and not lines[i].startswith(" ")), len(lines))
    nav = ["nav:", "  - Home: index.md", *(f"  - {p}: {p}.md" for p in pages)]
    (tree / "mkdocs.yml").write_text("\n".join(lines[:start] + nav + lines[end:]) + "\n")
    return tree


@pytest.fixture(scope="session")
def copy_project():
    return project_copy


def once(request, name: str, make) -> Path:
    """The folder `name` of this test run, filled by `make(folder)` once: by whichever process asks first
    (xdist workers share the run's temporary folder, each worker's own lying inside it), while the others
    wait for it; a `make` that failed is tried again by the next that asks."""
    root = request.getfixturevalue("tmp_path_factory").getbasetemp()
    if hasattr(request.config, "workerinput"):
        root = root.parent
    folder, done = root / name, root / f"{name}.done"
    with locked(root / f"{name}.lock"):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            make(folder)
            done.touch()
    return folder


@pytest.fixture(scope="session")
def lock():
    """lock(path): `locked` for a test or fixture."""
    return locked


@pytest.fixture(scope="session")
def run_once(request):
    """run_once(name, make): `once` for a test or fixture."""
    return lambda name, make: once(request, name, make)


@pytest.fixture(scope="session")
def site(run_once):
    """The site, built strictly from the committed captures, once per test run."""
    def make(dest):
        start = time.perf_counter()
        r = build(dest, quiet=False)  # warnings count: every link and anchor of every page is checked
        assert r.returncode == 0, r.stderr[-5000:]
        print(f"strict build took {time.perf_counter() - start:.1f} s")
    return run_once("site", make)
