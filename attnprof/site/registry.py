"""One registry of the pieces a chapter can ask for, and the one dispatcher that renders them.

A piece is a function `(build, *args, **keywords) -> Markdown`, registered with what it reads:

    @piece("ops", captures=1)            # one capture: the first argument is its record
    @piece("diff", captures=2)           # two captures
    @piece("compare", captures=ALL)      # every argument is a record
    @piece("glance")                     # no capture named: reads the run records or many captures itself

A piece over captures renders as a box when one of them cannot be used (missing, corrupt, stale),
and as a "Did not run" note, with the recorded reason, when its capture says so, unless it is declared to render for
an unavailable stage (`unavailable=True`). A piece that names no capture renders a box for a missing
or corrupt run record.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from . import tables
from .build import Build

ALL = -1  # captures=ALL: every positional argument is a record


@dataclass(frozen=True)
class Piece:
    name: str
    render: Callable[..., str]
    captures: int = 0
    unavailable: bool = False  # renders for a stage that could not run here
    inline: bool = False  # renders inside a sentence, so a problem is a short note rather than a box


PIECES: dict[str, Piece] = {}


def piece(name: str, captures: int = 0, unavailable: bool = False, inline: bool = False):
    def register(render):
        if name in PIECES:
            raise ValueError(f"piece {name!r} is registered twice")
        PIECES[name] = Piece(name, render, captures, unavailable, inline)
        return render
    return register


def problem_box(why: str) -> str:
    return f'!!! failure "Capture not usable"\n    {tables.cell(why)}'


def expand(build: Build, name: str, args: list[str]) -> str:
    """Render the piece `name` with `args` (positional, and KEY=VALUE keywords) from `build`."""
    if name not in PIECES:
        raise KeyError(f"unknown piece {name!r} (known: {', '.join(sorted(PIECES))})")
    p = PIECES[name]
    positional = [a for a in args if "=" not in a]
    keywords = dict(a.split("=", 1) for a in args if "=" in a)
    records = positional if p.captures == ALL else positional[:p.captures]
    if p.captures and not records:
        raise TypeError(f"piece {name!r} needs a capture name")
    bad = [r for r in records if r in build.problems]
    if bad:
        return "**(capture not usable: see the box above)**" if p.inline else problem_box(build.problems[bad[0]])
    if records and not p.unavailable and build.is_unavailable(records[0]):
        return tables.unavailable(build.summary(records[0]))
    try:
        return p.render(build, *positional, **keywords)
    except (FileNotFoundError, ValueError) as e:
        if p.captures:  # the captures were checked above: this is a fault in the piece or its arguments
            raise
        return problem_box(str(e))  # a run record missing or corrupt
