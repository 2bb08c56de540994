"""The pieces as a Python-Markdown extension (`attnprof.site.extension`), so MkDocs and Zensical render the
same chapters. A chapter asks for a piece with `<!-- attnprof: PIECE ARG... -->`, replaced by Markdown made
from the committed captures, every line indented like the comment (inside tabs and admonitions); figures
are inline SVG, passed through as raw HTML. Under MkDocs the hook hands every page the build's one Build.
Zensical runs no hook: its pages share one Build per process, made again when a file it reads changes, and
`zensical build --strict` refuses unusable records and notebooks, as the MkDocs hook does.
"""
from __future__ import annotations

import logging
import re
import sys
from collections import Counter
from pathlib import Path

from markdown import Markdown
from markdown.extensions import Extension
from markdown.postprocessors import Postprocessor
from markdown.preprocessors import Preprocessor

from ..analysis import records
from ..model import store
from ..model.snippets import ROOT
from . import notebooks
from .build import EVIDENCE, Build, FalseStatement, RecordUnusable
from .deferred import defer
from .registry import DIRECTIVE, INLINE, MALFORMED, expand

defer()  # before MkDocs loads mkdocs-jupyter, which it does after importing this extension

log = logging.getLogger("mkdocs.extensions.attnprof")
SVG = re.compile(r"<svg\b.*?</svg>", re.S)

try:  # under MkDocs, a piece that cannot render aborts the build with one line rather than a traceback
    from mkdocs.exceptions import PluginError as _Error
except ImportError:
    _Error = RuntimeError


class PieceError(_Error):
    pass


class PiecesPreprocessor(Preprocessor):
    def __init__(self, md: Markdown, build: Build):
        super().__init__(md)
        self.build = build

    def expand(self, name: str, args: str) -> str:
        try:
            text = expand(self.build, name, args.split())
        except (*records.UNREADABLE, OSError, FalseStatement, RecordUnusable) as e:
            raise PieceError(f"cannot render <!-- attnprof: {name}{args} -->: {records.unreadable(e)}") from None
        return SVG.sub(lambda m: self.md.htmlStash.store(m.group(0)), text)  # SVG is HTML, not Markdown

    def malformed(self, directive: str, why: str) -> str:
        """A comment like a directive but for its colon: an error in a strict build, else a warning (the page
        lacks its piece). A directive naming an unknown piece fails every build (registry.lookup)."""
        line = f"{' '.join(directive.split())} is not a directive the site renders: {why}"
        if self.build.strict:
            raise PieceError(line)
        log.warning(line)
        return ""

    def run(self, lines: list[str]) -> list[str]:
        self.build.evidence = []  # this page's evidence, gathered as its pieces fold it (Build.fold)
        try:
            text = self.expand_all("\n".join(lines))
            return (text + evidence(self.build.evidence, text)).split("\n")
        finally:
            self.build.evidence = None

    def expand_all(self, text: str) -> str:
        def block(match):  # a directive that starts a line: indent every line like it
            indent = match.group(1) or ""
            return "\n".join(indent + line if line else line
                             for line in self.expand(match.group(2), match.group(3)).split("\n"))
        text = DIRECTIVE.sub(block, text)
        text = INLINE.sub(lambda m: self.expand(m.group(1), m.group(2)), text)
        return MALFORMED.sub(lambda m: self.malformed(m.group(0), "write <!-- attnprof: PIECE ARGS -->, with the "
                                                                "colon, one piece a comment"), text)


MARKER = re.compile(r"\[\^" + EVIDENCE + r"(\d+)\]")
PLACE = "///Evidence Goes Here///"  # where the footnotes extension puts the evidence: inside the folded box


def evidence(found: list[str], text: str) -> str:
    """A page's evidence, folded at its end: one closed box whose numbered notes are the footnotes of its lessons'
    markers, in the order the markers stand on the page (docs/javascripts/evidence.js opens one beside its marker)."""
    if not found:
        return ""
    order = list(dict.fromkeys(int(m.group(1)) for m in MARKER.finditer(text)))
    notes = "\n".join(f"[^{EVIDENCE}{i}]: {' '.join(found[i - 1].split())}" for i in order)
    return (f'\n\n??? note "Evidence: the ranges, methods and processes behind this page\'s lessons"\n\n'
            f"    {PLACE}\n\n{notes}\n")


LONG_TITLE = re.compile(r' title="([^"]{%d,})"' % 100)


class NamesOnce(Postprocessor):
    """A long title attribute (a kernel's full name) sent once per page: each later copy becomes data-same="K",
    pointing at the first's data-name="K", and docs/javascripts/names.js copies the text back on load."""

    def run(self, text: str) -> str:
        found = [m.group(1) for m in LONG_TITLE.finditer(text)]
        seen = {value: k for k, value in enumerate(dict.fromkeys(found))}  # K: its place among the long titles
        repeated = {value for value, n in Counter(found).items() if n > 1}
        first = set()
        def once(m):
            value = m.group(1)
            if value not in repeated:
                return m.group(0)
            if value in first:
                return f' data-same="{seen[value]}"'
            first.add(value)
            return f'{m.group(0)} data-name="{seen[value]}"'
        return LONG_TITLE.sub(once, text)


UNBROKEN = re.compile(r"\b(?:(?:launch|GPU|compute|memory|latency|CPU)-bound|\d(?:\.\d+)?e[-+]\d+"
                      r"|\d[\d,.]*–\d[\d,.]*\d)\b")  # ... and a range, "33.9–42.1"
UNIT = re.compile(r"(?<=\d) (?=(?:%|µs|ms|KiB|MiB|GiB|TFLOP/s|GB/s|TB/s)(?![\w/]))")  # "12.5 %": one word
TAG = re.compile(r"(<[^>]*>)")


class Unbroken(Postprocessor):
    """Words a line must not break at their hyphen or dash ("GPU-bound", "8.8e-03", "33.9–42.1") in a span kept
    on one line, and a number and its unit ("12.5 %") by a no-break space; in text only, never code or tags."""

    def run(self, text: str) -> str:
        out, skip = [], 0
        for part in TAG.split(text):
            if part.startswith("<"):
                name = part[1:].split(None, 1)[0].rstrip(">/").lower() if len(part) > 2 else ""
                if name in ("pre", "script", "style", "svg"):
                    skip += 1
                elif name in ("/pre", "/script", "/style", "/svg"):
                    skip = max(skip - 1, 0)
                out.append(part)
            else:
                out.append(part if skip else UNIT.sub("\u00a0", UNBROKEN.sub(
                    lambda m: f'<span class="attnprof-word">{m.group(0)}</span>', part)))
        return "".join(out)


class PiecesExtension(Extension):
    def __init__(self, **kwargs):
        # build: from the MkDocs hook; a default that is a Build, not None, is kept as given
        self.config = {"build": [{}, "the Build whose captures to read (made here when not given)"],
                       "names_once": [True, "each long title once per page, the copies filled in by names.js, and "
                                             "words held together at their hyphen (a site's pages, not a report)"]}
        super().__init__(**kwargs)

    def extendMarkdown(self, md: Markdown):
        build = self.getConfig("build") or shared_build()
        md.registerExtensions(["footnotes"], {"footnotes": {"PLACE_MARKER": PLACE}})  # a lesson's evidence
        # after normalize_whitespace (30), which would strip the stash's placeholders, and before
        # fenced code (25) and raw HTML blocks (20)
        md.preprocessors.register(PiecesPreprocessor(md, build), "attnprof", 26)
        if self.getConfig("names_once"):  # on the finished page, after the raw HTML is put back (30)
            md.postprocessors.register(NamesOnce(md), "attnprof-names-once", 5)
            md.postprocessors.register(Unbroken(md), "attnprof-unbroken", 4)


WATCHED = (store.CAPTURES, ROOT / "snippets", ROOT / "attnprof", notebooks.OUT)  # what a record's status reads
_shared: tuple[tuple, Build] | None = None


def _zensical_strict() -> bool:
    """Whether this is `zensical build --strict` (or `strict: true`), read off the command line and config."""
    if "zensical" not in sys.modules:
        return False
    from zensical.config import get_config
    return bool((get_config() or {}).get("strict")) or any(arg in ("-s", "--strict") for arg in sys.argv[1:])


def shared_build() -> Build:
    """The Build the pages of this process share, where no hook passes one: made again when a file under
    WATCHED changes. Under Zensical's strict build, what `check` refuses fails the page in one line."""
    global _shared
    state = tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for folder in WATCHED
                  for p in sorted(Path(folder).rglob("*")) if p.is_file() and "__pycache__" not in p.parts)
    if _shared is None or _shared[0] != state:
        strict = _zensical_strict()
        build = Build(store.CAPTURES, strict=strict)
        if strict and (problems := [*build.problems.values(), *notebooks.problems()]):
            raise PieceError("\n".join(problems))
        _shared = state, build
    return _shared[1]


def makeExtension(**kwargs):
    return PiecesExtension(**kwargs)
