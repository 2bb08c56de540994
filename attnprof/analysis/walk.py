"""Every object inside a record's JSON, with where it stands: the one walk the record checks share."""
from __future__ import annotations

from typing import Iterator


def dicts(node, where: str) -> Iterator[tuple[str, dict]]:
    """(where, object) for `node` and every JSON object inside it, each before those inside it; `where` as a
    check names a field: "result.rows[3].clocks"."""
    if isinstance(node, list):
        for i, item in enumerate(node):
            yield from dicts(item, f"{where}[{i}]")
    elif isinstance(node, dict):
        yield where, node
        for k, v in node.items():
            yield from dicts(v, f"{where}.{k}")
