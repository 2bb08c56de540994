"""Snippets: the files under snippets/ that chapters include and captures run, read three ways: imported
by path, hashed by their Python tokens (what keys every record), and cut into the sections that
pymdownx.snippets includes (`--8<-- [start:NAME]` ... `[end:NAME]`)."""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import re
import textwrap
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SNIPPETS = ROOT / "snippets"


def load_snippet(name: str):
    """Import snippets/<name>.py by path, so it works from a checkout without installing."""
    path = SNIPPETS / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"attnprof_snippet_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MARKER = re.compile(r"--8<-- \[((?:start|end):[\w-]+)\]")  # a section marker (pymdownx.snippets)


def _tokens(source: bytes) -> list[tuple[str, str]]:
    """A file's tokens by name and text, the same under every Python version: no comments (but each
    section marker, where it stands), blank lines or indentation text, and an f-string as one STRING
    (Python 3.12 splits it into parts)."""
    lines = source.decode().splitlines(keepends=True)
    out, fstring = [], []
    for t in tokenize.tokenize(iter(source.splitlines(keepends=True)).__next__):
        name = tokenize.tok_name[t.type]
        if name == "COMMENT" and (marker := MARKER.search(t.string)):
            out.append(("MARKER", marker[1]))  # where a section starts or ends: it decides what a page shows
            continue
        if name in ("COMMENT", "NL", "ENCODING"):
            continue
        if name == "FSTRING_START":
            fstring.append(t.start)
        if fstring:
            if name == "FSTRING_END":
                start = fstring.pop()
                if not fstring:  # the outermost f-string: its text, as older versions give it
                    (r0, c0), (r1, c1) = start, t.end
                    text = "".join(lines[r0 - 1:r1])[c0:len("".join(lines[r0 - 1:r1 - 1])) + c1]
                    out.append(("STRING", text))
            continue
        out.append((name, "" if name in ("INDENT", "NEWLINE") else t.string))
    return out


@functools.lru_cache(maxsize=512)
def _tokens_json(source: bytes) -> str:
    """A file's tokens as JSON, once per content (every record's key hashes some of the same files,
    and `check` computes all of them)."""
    return json.dumps(_tokens(source))[1:-1]


class Section(str):
    """The text of one section of a file (snippet_section), hashed by its tokens as a file is."""


def code_hash(*paths: str | Path | Section) -> str:
    """A hash of Python files' tokens (or of a Section's), without comments and blank lines: an edit of
    comments or spacing alone keeps it (the code that runs is the same); any change to the code, or to where
    a section a page shows starts or ends, changes it. It is the same under every Python version, so a
    capture keyed on the GPU machine is current here. A file of another kind counts by its bytes."""
    def part(path):
        if isinstance(path, Section):
            return _tokens_json(textwrap.dedent(path).encode())
        if Path(path).suffix == ".py":
            return _tokens_json(Path(path).read_bytes())
        return json.dumps(hashlib.sha256(Path(path).read_bytes()).hexdigest())
    parts = [part(p) for p in paths]
    return hashlib.sha256(f"[{', '.join(p for p in parts if p)}]".encode()).hexdigest()[:16]


def snippet_section(path: str | Path, section: str | None = None) -> str:
    """The lines of a file between `--8<-- [start:NAME]` and `--8<-- [end:NAME]` markers, as
    pymdownx.snippets shows them (marker lines dropped); the whole file when `section` is None."""
    lines = Path(path).read_text().splitlines()
    if section is None:
        return "\n".join(l for l in lines if "--8<-- [" not in l)
    start, end = f"--8<-- [start:{section}]", f"--8<-- [end:{section}]"
    try:
        i = next(n for n, l in enumerate(lines) if l.strip().endswith(start))
        j = next(n for n, l in enumerate(lines) if n > i and l.strip().endswith(end))
    except StopIteration:
        raise ValueError(f"{path} has no section {section!r}") from None
    return "\n".join(l for l in lines[i + 1:j] if "--8<-- [" not in l)


INCLUDE = re.compile(r'^(?P<indent>[ \t]*)--8<--\s+"(?P<path>[^":]+)(?::(?P<section>[\w-]+))?"\s*$', re.M)


def fill_includes(text: str) -> str:
    """Replace each `--8<-- "FILE:SECTION"` line (pymdownx.snippets' syntax, FILE relative to the
    repository) with that section of FILE, indented like the line."""
    def include(m):
        body = snippet_section(ROOT / m["path"], m["section"])
        return "\n".join(m["indent"] + line if line else line for line in body.splitlines())
    return INCLUDE.sub(include, text)
