"""The MkDocs hook: only what needs MkDocs itself. The pieces are a Markdown extension (extension.py).

Before a build, records are retaken where this machine can (regenerate.py), as ATTNPROF_RECAPTURE says:
`auto` (default: those not usable, where a GPU is present), `always` (every one) or `never`. A strict build
refuses records still not usable, in one line each; a plain build renders them as boxes. Each build hands
the extension a fresh Build, so a rebuild under `mkdocs serve` reads the captures again. A strict build
refuses a stale notebook (site/notebooks.py), as `check` does; MkDocs renders each notebook itself
(mkdocs-jupyter) where Zensical renders the Markdown page beside it, so the nav is pointed at the notebooks.
"""
from __future__ import annotations

import gc
import logging
import os
import re
import shutil
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.plugins import event_priority

from attnprof.model import store
from attnprof.site import notebooks
from attnprof.site.build import Build

log = logging.getLogger("mkdocs.hooks.attnprof")
EXTENSION = "attnprof.site.extension"
PAGES = f"{notebooks.OUT.name}/"  # where the notebooks and their pages lie under docs/


def _regenerate(mode: str):
    """Retake what this machine can, as `python -m attnprof regenerate` does; `auto` looks only where
    nvidia-smi shows a GPU (importing torch is most of a CPU build's time)."""
    if mode == "never" or (mode == "auto" and not shutil.which("nvidia-smi")):
        return
    from attnprof import regenerate
    wanted = regenerate.wanted_records(every=mode == "always")
    if not wanted:
        return
    # info, not warning: a current record it cannot take must not fail a strict build (an unusable one is refused below)
    done = regenerate.regenerate(wanted, store.CAPTURES, say=log.info)
    for r in done.results:
        log.info("%s (%s, GPU %s): %.1f s, %s", r.record, r.kind, ",".join(r.devices), r.seconds, r.outcome)
    if done.results:
        log.info("retook %d record(s) in %.0f s", len(done.results), done.wall_s)


def on_startup(command, dirty):
    # the modules and config (~100,000 objects) live as long as the process: spare them the full collections
    gc.freeze()


def on_shutdown():
    # the interpreter collects several times while exiting, each walking all the build holds (~0.5 s on two
    # cores); frozen objects are not walked, their cycles left to the exit
    gc.freeze()


def on_config(config):
    mode = os.environ.get("ATTNPROF_RECAPTURE", "auto")
    if mode not in ("auto", "always", "never"):
        raise PluginError(f"ATTNPROF_RECAPTURE={mode!r} is not understood: use auto, always or never")
    _regenerate(mode)
    build = Build(store.CAPTURES, strict=config.strict)  # what its check reads, the pages read from it
    problems = [*build.problems.values(), *notebooks.problems()]
    if problems and config.strict:  # raised, not logged: `mkdocs build -q --strict` drops warnings
        raise PluginError("\n".join(problems))
    for why in problems:
        log.warning(why)
    if EXTENSION not in config.markdown_extensions:
        raise PluginError(f"mkdocs.yml lists the hook but not the extension: add {EXTENSION} to markdown_extensions")
    config.mdx_configs.setdefault(EXTENSION, {})["build"] = build
    config.nav = _to_notebooks(config.nav)
    return config


def _to_notebooks(nav):
    """The nav with each notebook's Markdown page (Zensical's) replaced by the notebook (mkdocs-jupyter's)."""
    if isinstance(nav, list):
        return [_to_notebooks(item) for item in nav]
    if isinstance(nav, dict):
        return {title: _to_notebooks(item) for title, item in nav.items()}
    if isinstance(nav, str) and nav.startswith(PAGES) and nav.endswith(".md"):
        return nav.removesuffix(".md") + ".ipynb"
    return nav


@event_priority(100)  # before mkdocs-jupyter looks at the files
def on_files(files, config):
    for file in list(files):  # Zensical's pages of the notebooks: here mkdocs-jupyter renders the notebooks
        if file.src_uri.startswith(PAGES) and file.src_uri.endswith(".md"):
            files.remove(file)
    return files


NOTEBOOK_PAGE = re.compile(r"(\]\((?:\.\./)*%s[\w-]+)\.md(?=[)#])" % re.escape(PAGES))


def on_page_markdown(markdown, page, config, files):
    """A chapter links a notebook's page (notebooks/NAME.md, Zensical's); here that page is the notebook."""
    return NOTEBOOK_PAGE.sub(r"\1.ipynb", markdown)


_notebook_classes: set[str] = set()


def on_post_page(output, page, config):
    """Notebook pages link one slimmed JupyterLab stylesheet instead of inlining all 560 KiB of it."""
    if not page.file.src_uri.endswith(".ipynb"):
        return output
    output = notebooks.link_css(output, page.url)
    _notebook_classes.update(notebooks.classes_in(output))
    return output


def on_post_build(config):
    if _notebook_classes:
        css = notebooks.slim_css(notebooks.css_path().read_text(encoding="utf-8"), _notebook_classes)
        path = Path(config.site_dir) / notebooks.CSS_URI
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(css, encoding="utf-8")
    _notebook_classes.clear()
