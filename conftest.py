"""Make pytest-markdown-docs see what a reader sees.

A page's code block may hold `--8<-- "file:section"` lines (pymdownx.snippets) and may sit inside
a content tab or an admonition. Before the fences are parsed, each include line is replaced by the
lines it includes, through the same include filler the notebooks use, and indented containers are
flattened so their fences are found too.
"""
import contextlib
import os
import re

import pytest

# Tests never reach the Hugging Face Hub: with `kernels` installed, the hub stage's `get_kernel` then
# fails at once with one line instead of asking the network (read when huggingface_hub is imported).
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from markdown_it import MarkdownIt
from pytest_markdown_docs.plugin import MarkdownInlinePythonItem

from attnprof.model.snippets import fill_includes

CONTAINER = re.compile(r"^(===|!!!|\?\?\?\+?)\s")


def flatten_containers(text: str) -> str:
    """Dedent the bodies of `=== "tab"`, `!!! note` and `??? note` blocks, recursively."""
    out, dedent = [], None
    for line in text.splitlines():
        if dedent is not None and (not line.strip() or line.startswith("    ")):
            out.append(line[4:])
            continue
        dedent = None
        if CONTAINER.match(line):
            dedent = True
            out.append("")
            continue
        out.append(line)
    flat = "\n".join(out)
    return flat if flat == text else flatten_containers(flat)


class ReaderView(MarkdownIt):
    def parse(self, src, env=None):
        return super().parse(flatten_containers(fill_includes(src)), env)


def pytest_markdown_docs_markdown_it():
    return ReaderView("commonmark")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """pytest-markdown-docs (0.9) turns pytest's output capture off around each code block; keep it
    on, so what a page's code prints shows only in the report of a block that fails."""
    if not isinstance(item, MarkdownInlinePythonItem):
        return (yield)
    capman = item.config.pluginmanager.getplugin("capturemanager")
    capman.global_and_fixture_disabled = contextlib.nullcontext  # for this item only
    try:
        return (yield)
    finally:
        del capman.global_and_fixture_disabled
