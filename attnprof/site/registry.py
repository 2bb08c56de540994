"""One registry of the pieces a chapter can ask for, and the one dispatcher that renders them.

A piece is a function `(build, *args, **keywords) -> Markdown`, registered with what it reads:

    @piece("ops", captures=1)                  # one record: the first argument names it
    @piece("ops", captures=1, kind="backward")  # the same piece for another kind of record
    @piece("diff", captures=2)                 # two records
    @piece("compare", captures=ALL)            # every argument is a record
    @piece("glance")                           # no record named: reads runs or many captures itself

One name, one meaning: `ops`, `stamp`, `value`, `trace`... render any kind of record, the function picked by
the named record's kind (a backward's or reader's record without its own takes the stage record's); for kind
K, piece P's function is named P (stage records) or P_K. `load()` imports MODULES, once, explicitly.

A piece over records renders a box where one is not usable, and a "Did not run" note with the recorded
reason where its capture did not run (unless `unavailable=True`). Any other error fails the build.
"""
from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from typing import Callable

from ..analysis import records
from ..text import escape
from .render import tables
from .build import Build, RecordUnusable

ALL = -1  # captures=ALL: every positional argument is a record


@dataclass(frozen=True)
class Piece:
    name: str
    render: Callable[..., str]
    captures: int = 0
    unavailable: bool = False  # renders for a stage that could not run here
    inline: bool = False  # renders inside a sentence, so a problem is a short note rather than a box
    kind: str | None = None  # the kind of record it renders (records.KINDS); None: names no record
    conclusion: bool = False  # renders a conclusion (a ranking, verdict or measured claim): `conclusions` lists it


PIECES: dict[str, dict[str | None, Piece]] = {}  # name -> kind -> piece
PROFILED = ("backward", "own")  # kinds of profiled capture that a stage record's piece renders too
MODULES = ("pieces.captures", "pieces.training", "pieces.runs", "pieces.guides", "pieces.timing", "pieces.compared",
           "pieces.gpu", "pieces.same_chip", "claims")  # every module that registers pieces


def piece(name: str, captures: int = 0, unavailable: bool = False, inline: bool = False, kind: str | None = None,
          conclusion: bool = False):
    kind = kind or ("stage" if captures else None)

    def register(render):
        if kind in PIECES.setdefault(name, {}):
            raise ValueError(f"piece {name!r} is registered twice for {kind or 'no'} records")
        PIECES[name][kind] = Piece(name, render, captures, unavailable, inline, kind, conclusion)
        return render
    return register


def load():
    """Import every module that registers pieces (each registers on its first import only)."""
    for module in MODULES:
        importlib.import_module(f"{__package__}.{module}")


def lookup(name: str, args: list[str]) -> Piece:
    """The piece `name` for the kind of record its first argument names."""
    load()
    if name not in PIECES:
        raise KeyError(f"unknown piece {name!r} (known: {', '.join(sorted(PIECES))})")
    by_kind = PIECES[name]
    if None in by_kind:
        return by_kind[None]
    first = next((a for a in args if "=" not in a), None)
    if first is None:
        raise TypeError(f"piece {name!r} needs a record name")
    kind = records.kind_of(first).name
    if kind in PROFILED and kind not in by_kind:  # a profiled capture like a stage's: ops, a trace
        kind = "stage"
    if kind not in by_kind:
        raise KeyError(f"piece {name!r} renders {', '.join(by_kind)} records, not {first!r} (kind {kind})")
    return by_kind[kind]


def one_of(table: dict, key: str, what: str):
    """table[key], for a piece whose argument names one of a table's entries; another is one line naming them."""
    if key not in table:
        raise KeyError(f"unknown {what} {key!r} (known: {', '.join(table)})")
    return table[key]


def problem_box(why: str) -> str:
    return f'!!! failure "Capture not usable"\n    {escape(why)}'


def split(args: list[str]) -> tuple[list[str], dict[str, str]]:
    """A directive's arguments: the positional ones, and the KEY=VALUE keywords."""
    return [a for a in args if "=" not in a], dict(a.split("=", 1) for a in args if "=" in a)


def expand(build: Build, name: str, args: list[str]) -> str:
    """Render the piece `name` with `args` (positional, and KEY=VALUE keywords) from `build`."""
    p = lookup(name, args)
    positional, keywords = split(args)
    named = positional if p.captures == ALL else positional[:p.captures]
    if p.captures and not named:
        raise TypeError(f"piece {name!r} needs a capture name")
    bad = [r for r in named if r in build.problems]
    if bad:
        return "**(capture not usable: see the box above)**" if p.inline else problem_box(build.problems[bad[0]])
    try:
        if named and not p.unavailable and build.is_unavailable(named[0]):
            return tables.unavailable(build.summary(named[0]))
        return p.render(build, *positional, **keywords)
    except RecordUnusable as e:  # a record it reads itself (a run) is missing or unusable: `check` lists it too
        if build.strict and not e.known:  # not a problem `check` lists: the page's or the piece's mistake
            raise
        return "**(record not usable: see `python -m attnprof check`)**" if p.inline else problem_box(str(e))


DIRECTIVE = re.compile(r"^([ \t]*)?<!--\s*attnprof:\s*([\w-]+)((?:\s+[^\s>]+)*)\s*-->", re.M)  # one that starts a line
INLINE = re.compile(r"<!--\s*attnprof:\s*([\w-]+)((?:\s+[^\s>]+)*)\s*-->")  # one inside a sentence
MALFORMED = re.compile(r"<!--\s*attnprof\b.*?-->", re.S)  # what is left of a comment that starts with attnprof


def directives(text: str) -> list[tuple[str, list[str]]]:
    """(piece, arguments) of every directive in a chapter's Markdown, in order."""
    return [(m.group(1), m.group(2).split()) for m in INLINE.finditer(text)]
