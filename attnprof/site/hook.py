"""The mkdocs hook: captures become page content at build time (one mechanism for every chapter).

A chapter asks for a rendered piece with an HTML comment, `<!-- attnprof: PIECE ARG... -->`; the hook
replaces it with Markdown made from the committed captures. Trace pictures and notebooks are
generated files, never committed copies. Before rendering, stale captures are recaptured when a CUDA
GPU is here, as ATTNPROF_RECAPTURE says: `auto` (default: recapture stale stages if a GPU is present),
`always` (recapture every stage; fails without a GPU) or `never`.
"""
from __future__ import annotations

import logging
import os
import re
import shutil
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.plugins import event_priority
from mkdocs.structure.files import File

from attnprof.site import notebooks, pieces
from attnprof import store

log = logging.getLogger("mkdocs.hooks.attnprof")
DIRECTIVE = re.compile(r"^([ \t]*)?<!--\s*attnprof:\s*([\w-]+)((?:\s+[^\s>]+)*)\s*-->", re.M)
INLINE = re.compile(r"<!--\s*attnprof:\s*([\w-]+)((?:\s+[^\s>]+)*)\s*-->")
_problems: dict[str, str] = {}


def _recapture(records):
    from attnprof.measure.capture import capture
    log.info("recapturing on this GPU: %s", ", ".join(records))
    for record in records:
        stage, shape, dtype_name = store.parse_record(record)
        for result in capture([stage], shape, dtype_name, store.CAPTURES):
            if "error" in result:
                log.warning("recapture of %s failed: %s", record, result["error"])


def on_config(config):
    mode = os.environ.get("ATTNPROF_RECAPTURE", "auto")
    if mode not in ("auto", "always", "never"):
        raise PluginError(f"ATTNPROF_RECAPTURE={mode!r} is not understood: use auto, always or never")
    if mode == "always" or (mode == "auto" and shutil.which("nvidia-smi") and store.stale_records()):
        import torch  # only where a GPU may be: importing torch is most of a CPU build's time
        if mode == "always" or torch.cuda.is_available():
            if not torch.cuda.is_available():
                raise PluginError("ATTNPROF_RECAPTURE=always needs a CUDA GPU, and this machine has none")
            _recapture(store.site_records() if mode == "always" else list(store.stale_records()))
    _problems.clear()
    _problems.update(store.stale_records())
    if _problems and config.strict:  # raised, not logged: `mkdocs build -q --strict` drops warnings
        raise PluginError("\n".join(_problems.values()))
    for why in _problems.values():
        log.warning(why)
    return config


@event_priority(100)  # before mkdocs-jupyter looks at the files
def on_files(files, config):
    for record in store.site_records():
        if record not in _problems and not pieces.is_unavailable(record):
            files.append(File.generated(config, f"figures/{record}-trace.svg", content=pieces.trace_svg(record)))
    from attnprof.site import findings
    for name, draw in findings.FIGURES.items():  # charts of the measurement runs
        try:
            files.append(File.generated(config, f"figures/{name}.svg", content=draw()))
        except (FileNotFoundError, ValueError) as e:
            log.warning("figure %s not drawn: %s", name, e)
    for src_uri in notebooks.write_all():  # real files under .cache/, so mkdocs-jupyter can read them
        files.append(File(src_uri, src_dir=str(notebooks.OUT.parent), dest_dir=config.site_dir,
                          use_directory_urls=config.use_directory_urls))
    return files


def on_page_markdown(markdown, page, config, files):
    def expand(name, args):
        try:
            return pieces.expand(name, args.split(), problems=_problems)
        except (KeyError, TypeError, ValueError, OSError) as e:
            raise PluginError(f"{page.file.src_uri}: cannot render <!-- attnprof: {name}{args} -->: {e}")

    def block(match):  # a directive that starts a line: indent every line like it (inside tabs, admonitions)
        indent = match.group(1) or ""
        return "\n".join(indent + line if line else line for line in expand(match.group(2), match.group(3)).split("\n"))

    markdown = DIRECTIVE.sub(block, markdown)
    return INLINE.sub(lambda m: expand(m.group(1), m.group(2)), markdown)


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
