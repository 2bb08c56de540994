"""Sentences that rank, compare, multiply or judge, each computed from the records and checked by the build.

A chapter asks for one with `<!-- attnprof: say NAME -->`: a function of the build returning a `Statement`,
its lesson (the prose: plain words, few numbers), its evidence (the numbers from the records with their
method, range, processes and shape: what the page folds), and whether the records bear out both. One the
records contradict stops the build with one line that names and quotes it. This module is the machinery
(claims, `check`, `say`, and the truth conditions of conclusion pieces); the claims live one module a topic.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ...analysis import records
from ..build import Build, FalseStatement, RecordUnusable
from ..registry import piece


LESSON_WORDS, LESSON_NUMBERS = 30, 2  # a lesson a learner can repeat: one short sentence, one or two numbers


@dataclass(frozen=True)
class Statement:
    text: str  # the evidence: the sentence with its ranges, method, processes and shape, folded on a page
    holds: bool  # whether the records bear out its words (the lesson's and the evidence's)
    rests_on: str = ""  # the numbers it rests on, for the one line that says it is false
    outcome: str = ""  # which of its words it chose, for a claim whose words follow the records
    lesson: str = ""  # what the prose says: plain words, at most LESSON_NUMBERS numbers and LESSON_WORDS words


FALSE, ADAPTS = "false", "adapts"


@dataclass(frozen=True)
class Flip:
    """A change to a copy of one record that a claim must answer: turning false, or (ADAPTS) words that hold."""
    file: str  # the file it changes in the captures folder: "fa4-bwd.json", "run-timing.json", "naive.trace.json.gz"
    change: Callable[[dict], None]  # changes the file's JSON in place
    then: str = FALSE
    to: str | None = None  # for ADAPTS, the outcome it leads to where the records' own outcome may be either

    @property
    def record(self) -> str:
        """The record the file belongs to: a capture's trace is part of the capture."""
        return self.file.removesuffix(".gz").removesuffix(".json").removesuffix(".trace")


@dataclass(frozen=True)
class Claim:
    """One checked sentence: `says` (its words and whether they hold), the records it reads, its flips."""
    name: str
    says: Callable[..., Statement]
    reads: Callable[..., list[str]]
    flips: Callable[..., list[Flip]]


CLAIMS: dict[str, Claim] = {}


def _listed(v) -> list:
    return list(v) if isinstance(v, (list, tuple)) else [v]


def _of_args(fn: Callable, x) -> Callable[..., list]:
    """A claim's `reads` or `flips`: as is, or a function of the claim's arguments by name, bound to the claim's
    signature with its defaults, so a default is written once, on the function (`*rest` takes the rest)."""
    if not callable(x):
        return lambda *a, **k: _listed(x)
    signature, wanted = inspect.signature(fn), inspect.signature(x).parameters

    def of(*a, **k):
        bound = signature.bind(None, *a, **k)  # None stands for the build
        bound.apply_defaults()
        positional, keywords = [], {}
        for p in wanted.values():
            if p.name not in bound.arguments:
                raise TypeError(f"{x!r} asks for {p.name!r}, which {fn.__name__} does not take")
            value = bound.arguments[p.name]
            if p.kind == p.VAR_POSITIONAL:
                positional.extend(value)
            elif p.kind == p.VAR_KEYWORD:
                keywords.update(value)
            elif p.kind == p.KEYWORD_ONLY:
                keywords[p.name] = value
            else:
                positional.append(value)
        return _listed(x(*positional, **keywords))
    return of


def _register(table: dict[str, Claim], what: str, name: str, reads, flip):
    def register(fn):
        if name in table:
            raise ValueError(f"{what} {name!r} is registered twice")
        table[name] = Claim(name, fn, _of_args(fn, reads), _of_args(fn, flip))
        return fn
    return register


def claim(name: str, reads, flip):
    """Register the function below as the claim `name`, with the records it `reads` and its Flip(s), each as is
    or a function of its arguments by name (`lambda stage: ...` beside `def f(build, stage, tile="128")`)."""
    return _register(CLAIMS, "claim", name, reads, flip)


CONDITIONS: dict[str, Claim] = {}  # piece name -> the truth condition of a conclusion piece whose words follow the records


def condition(piece_name: str, reads, flip):
    """Register the function below as the truth condition of the conclusion piece `piece_name` without
    `expect=`: of the piece's arguments, a `Statement` (`text` what it renders, `holds` whether the page's words
    around it hold, `outcome` the words it chose); `reads` and `flip` as `claim`'s. `check` holds pages to it."""
    return _register(CONDITIONS, "condition", piece_name, reads, flip)


def conditioned(piece_name: str, args) -> bool:
    """Whether a page's piece is held to a truth condition here: one is registered and the page expects nothing."""
    return piece_name in CONDITIONS and not any(a.startswith("expect=") for a in args)


def hold(build: Build, piece_name: str, *args, **keywords) -> Statement:
    """The truth condition of the piece `piece_name` for these arguments, raising FalseStatement when false."""
    s = CONDITIONS[piece_name].says(build, *args, **keywords)
    if not s.holds:
        raise FalseStatement(f"the conclusion {piece_name!r} is false for the committed records: “{s.text}” "
                             f"({s.rests_on}); rewrite the sentence around it or find what changed in the records")
    return s


def check(build: Build, name: str, *args, **keywords) -> Statement:
    """The claim `name`, raising FalseStatement when the records contradict it."""
    if name not in CLAIMS:
        raise KeyError(f"unknown statement {name!r} (known: {', '.join(sorted(CLAIMS))})")
    s = CLAIMS[name].says(build, *args, **keywords)
    if not s.holds:
        raise FalseStatement(f"the statement {name!r} is false for the committed records: “{s.lesson}” “{s.text}” "
                             f"({s.rests_on}); rewrite the sentence or find what changed in the records")
    return s


@piece("say", inline=True, conclusion=True)
def say(build: Build, name, *args, **keywords):
    """A computed sentence checked against the records (CLAIMS): its lesson in the prose, its evidence folded."""
    s = check(build, name, *args, **keywords)
    return build.fold(s.lesson, s.text)


def false_statements(build: Build, docs: Path) -> list[str]:
    """Every `say`, `expect=` and conditioned conclusion under `docs` that the records contradict or that cannot
    be said, a line each naming its page, as the strict build finds them (`check` runs this; one over a record
    `check` already lists as unusable is left to that line)."""
    from ..registry import directives, expand, split
    found = []
    for page in sorted(docs.rglob("*.md")):
        for piece_name, args in directives(page.read_text(encoding="utf-8")):
            if piece_name != "say" and not any(a.startswith("expect=") for a in args) and not conditioned(piece_name, args):
                continue
            try:
                expand(build, piece_name, args)
                positional, keywords = split(args)
                if conditioned(piece_name, args) and not any(a in build.problems for a in positional):
                    try:
                        hold(build, piece_name, *positional, **keywords)
                    except RecordUnusable as e:  # a run `check` already lists is left to its line, as `expand` leaves it
                        if build.strict and not e.known:
                            raise
            except (*records.UNREADABLE, OSError, FalseStatement, RecordUnusable) as e:
                found.append(f"{page.relative_to(docs.parent)}: <!-- attnprof: {piece_name} {' '.join(args)} -->: "
                             f"{records.unreadable(e)}")
    return found
