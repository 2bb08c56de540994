import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attnprof import trace
from attnprof.stages import ROOT

FIXTURES = Path(__file__).parent / "fixtures"
LABEL = "attention_forward"


@pytest.fixture(scope="session")
def h200():
    """Load a committed H200 trace fixture by stage name."""
    cache = {}

    def load(stage):
        if stage not in cache:
            cache[stage] = trace.load(FIXTURES / f"h200-{stage}.trace.json.gz")
        return cache[stage]
    return load


def build(dest, strict=True, env_extra=None):
    """`mkdocs build` into `dest`, never recapturing; returns the finished process."""
    env = dict(os.environ, ATTNPROF_RECAPTURE="never", NO_MKDOCS_2_WARNING="1", **(env_extra or {}))
    cmd = [sys.executable, "-m", "mkdocs", "build", "-q", "-d", str(dest)] + (["--strict"] if strict else [])
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture(scope="session")
def site(tmp_path_factory):
    """The site, built strictly from the committed captures, once per test session."""
    dest = tmp_path_factory.mktemp("site")
    start = time.perf_counter()
    r = build(dest)
    assert r.returncode == 0, r.stderr
    print(f"strict build took {time.perf_counter() - start:.1f} s")
    return dest
