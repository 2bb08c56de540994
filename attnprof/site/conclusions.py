"""Every conclusion a built site states, as data: the sentences that rank, compare, judge or report a measured
claim (pieces registered with `conclusion=True`), rendered from the records, keyed by page and directive, so
that two regenerations can be compared: `python -m attnprof conclusions [--json FILE] [--against FILE]`."""
from __future__ import annotations

import html
import json
import re
from pathlib import Path

from . import registry
from .build import Build, FalseStatement, RecordUnusable


def plain(markdown: str) -> str:
    """A rendered sentence as plain text: no emphasis marks (** or *), no links' targets, one line."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", markdown)
    text = html.unescape(re.sub(r"</?code>", "", text))  # a name from a record: code, escaped (text.escape)
    text = re.sub(r"(?<![\w*])\*([^*\s](?:[^*]*[^*\s])?)\*(?![\w*])", r"\1", text.replace("**", ""))  # *emphasis*
    return re.sub(r"\s+", " ", text.replace("`", "")).strip()


def conclusions(build: Build, docs: Path) -> dict[str, str]:
    """{`page: piece args`: the sentence} for every conclusion of the chapters under `docs`, in page order; one
    that cannot be said is kept with why, so a diff shows it."""
    registry.load()
    found = {}
    for page in sorted(docs.rglob("*.md")):
        for name, args in registry.directives(page.read_text(encoding="utf-8")):
            kinds = registry.PIECES.get(name, {})
            if not any(p.conclusion for p in kinds.values()):
                continue
            key = f"{page.relative_to(docs.parent)}: {name} {' '.join(args)}".rstrip()
            try:
                found[key] = plain(registry.expand(build, name, args))
            except (FalseStatement, RecordUnusable, KeyError, TypeError, ValueError) as e:
                found[key] = f"(cannot be said: {e})"
    return found


def difference(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """What changed between two builds' conclusions, one block per conclusion: gone, new, or its words then
    and now."""
    out = []
    for key in sorted(set(before) | set(after)):
        a, b = before.get(key), after.get(key)
        if a == b:
            continue
        if a is None:
            out.append(f"+ {key}\n    {b}")
        elif b is None:
            out.append(f"- {key}\n    {a}")
        else:
            out.append(f"~ {key}\n    was: {a}\n    now: {b}")
    return out


NUMBER = re.compile(r"[−-]?\d[\d,]*(?:\.\d+)?(?:\s?(?:ns|µs|ms|s)\b)?")  # a time with its unit: text.us picks one


def words(text: str) -> str:
    """A conclusion with every number masked ("#"), a time with its unit: what it says beyond its figures.
    A range of figures ("[# to #]" where it starts below zero, "[#–#]" or "#–# MHz" elsewhere) reads as one figure,
    as the lowest and highest clock of some rounds read as one where every round ran at one."""
    return NUMBER.sub("#", text).replace("# to #", "#").replace("#–#", "#")


def beyond_numbers(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """The conclusions (keys) whose words differ with their numbers masked: gone, new, or saying something
    else (a ranking, a verdict, "not told apart"), not only other figures."""
    return sorted(k for k in set(before) | set(after)
                  if k not in before or k not in after or words(before[k]) != words(after[k]))


def load(path: Path) -> dict[str, str]:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot read conclusions from {path} ({e}): write them with "
                         f"`python -m attnprof conclusions --json {path}`") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} holds no conclusions: write them with `python -m attnprof conclusions --json {path}`")
    return data
