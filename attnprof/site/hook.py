"""The MkDocs hook: only what needs MkDocs itself. The pieces are a Markdown extension (extension.py).

Before a build, stale captures are recaptured when a CUDA GPU is here, as ATTNPROF_RECAPTURE says:
`auto` (default: recapture stale stages if a GPU is present), `always` (recapture every stage; fails
without a GPU) or `never`. A strict build refuses captures that are still missing, corrupt or stale,
in one line each; a plain build renders them as boxes. Each build hands the extension a fresh Build,
so a rebuild under `mkdocs serve` reads the captures again. The notebooks are generated for
mkdocs-jupyter.
"""
from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.plugins import event_priority
from mkdocs.structure.files import File

from attnprof import records, store
from attnprof.site import notebooks
from attnprof.site.build import Build

log = logging.getLogger("mkdocs.hooks.attnprof")
EXTENSION = "attnprof.site.extension"


def _recapture(records):
    from attnprof.measure.capture import capture
    log.info("recapturing on this GPU: %s", ", ".join(records))
    for record in records:
        stage, shape, dtype_name = records.parse_record(record)
        for result in capture([stage], shape, dtype_name, store.CAPTURES):
            if "error" in result:
                log.warning("recapture of %s failed: %s", record, result["error"])
            elif "kept" in result:
                log.info("%s: %s", record, result["kept"])  # a stale one still fails the strict build below


def on_config(config):
    mode = os.environ.get("ATTNPROF_RECAPTURE", "auto")
    if mode not in ("auto", "always", "never"):
        raise PluginError(f"ATTNPROF_RECAPTURE={mode!r} is not understood: use auto, always or never")
    if mode == "always" or (mode == "auto" and shutil.which("nvidia-smi") and records.problems(kinds=[records.STAGE])):
        try:
            import torch  # only where a GPU may be: importing torch is most of a CPU build's time
            gpu = torch.cuda.is_available()
        except ImportError:  # the documentation stack alone: render the committed captures
            gpu = False
        if mode == "always" and not gpu:
            raise PluginError("ATTNPROF_RECAPTURE=always needs a CUDA GPU and PyTorch, and this machine lacks one")
        if gpu:
            _recapture(records.STAGE.records() if mode == "always" else list(records.problems(kinds=[records.STAGE])))
    problems = records.problems()
    if problems and config.strict:  # raised, not logged: `mkdocs build -q --strict` drops warnings
        raise PluginError("\n".join(problems.values()))
    for why in problems.values():
        log.warning(why)
    if EXTENSION not in config.markdown_extensions:
        raise PluginError(f"mkdocs.yml lists the hook but not the extension: add {EXTENSION} to markdown_extensions")
    config.mdx_configs.setdefault(EXTENSION, {})["build"] = Build(store.CAPTURES, problems)
    return config


@event_priority(100)  # before mkdocs-jupyter looks at the files
def on_files(files, config):
    for src_uri in notebooks.write_all():  # real files under .cache/, so mkdocs-jupyter can read them
        files.append(File(src_uri, src_dir=str(notebooks.OUT.parent), dest_dir=config.site_dir,
                          use_directory_urls=config.use_directory_urls))
    return files


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
