"""The pieces as a Python-Markdown extension, so any site that runs Python-Markdown (MkDocs, Zensical)
renders the same chapters.

A chapter asks for a piece with an HTML comment, `<!-- attnprof: PIECE ARG... -->`; the extension
replaces it with Markdown made from the committed captures. A comment that starts a line may be
indented (inside tabs and admonitions): every line of the piece is indented like it. Figures are
inline SVG, passed through as raw HTML. List it under `markdown_extensions` as `attnprof.site.extension`.
"""
from __future__ import annotations

import logging
import re

from markdown import Markdown
from markdown.extensions import Extension
from markdown.preprocessors import Preprocessor

from .build import Build, FalseStatement, RecordUnusable
from .registry import DIRECTIVE, INLINE, MALFORMED, expand

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
        except (KeyError, TypeError, ValueError, OSError, FalseStatement, RecordUnusable) as e:
            raise PieceError(f"cannot render <!-- attnprof: {name}{args} -->: {e}") from None
        return SVG.sub(lambda m: self.md.htmlStash.store(m.group(0)), text)  # SVG is HTML, not Markdown

    def malformed(self, directive: str, why: str) -> str:
        """A comment that starts like a directive but is not one (its colon missing): an error in a strict
        build, a warning otherwise (the page lacks its piece, as it would with the HTML comment left in).
        A directive naming an unknown piece fails every build (registry.lookup)."""
        line = f"{' '.join(directive.split())} is not a directive the site renders: {why}"
        if self.build.strict:
            raise PieceError(line)
        log.warning(line)
        return ""

    def run(self, lines: list[str]) -> list[str]:
        def block(match):  # a directive that starts a line: indent every line like it
            indent = match.group(1) or ""
            return "\n".join(indent + line if line else line
                             for line in self.expand(match.group(2), match.group(3)).split("\n"))
        text = DIRECTIVE.sub(block, "\n".join(lines))
        text = INLINE.sub(lambda m: self.expand(m.group(1), m.group(2)), text)
        text = MALFORMED.sub(lambda m: self.malformed(m.group(0), "write <!-- attnprof: PIECE ARGS -->, with the "
                                                                  "colon, one piece a comment"), text)
        return text.split("\n")


class PiecesExtension(Extension):
    def __init__(self, **kwargs):
        # build: the Build of this site build, passed in by the MkDocs hook; without it, each Markdown
        # instance reads the captures afresh (a default that is a Build, not None, is kept as given)
        self.config = {"build": [{}, "the Build whose captures to read (made here when not given)"]}
        super().__init__(**kwargs)

    def extendMarkdown(self, md: Markdown):
        build = self.getConfig("build") or Build()
        # after normalize_whitespace (30), which would strip the stash's placeholders, and before
        # fenced code (25) and raw HTML blocks (20)
        md.preprocessors.register(PiecesPreprocessor(md, build), "attnprof", 26)


def makeExtension(**kwargs):
    return PiecesExtension(**kwargs)
