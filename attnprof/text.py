"""Values as a reader sees them: durations, shapes, sizes, names cut to fit, an error's first line; and the one
escape every string from a record, a trace or a reader's code takes into a page."""
from __future__ import annotations

import html
import re

NBSP = "\u00a0"  # between a number and its unit, so a table cell never wraps between them


def us(x: float | None) -> str:
    """A duration in microseconds, with a unit a reader can compare across rows."""
    if x is None:
        return "—"
    return f"{x / 1000:.3f}{NBSP}ms" if x >= 1000 else f"{x:.1f}{NBSP}µs"


def ms(x: float) -> str:
    """A wall time in milliseconds (a first call, a compilation): seconds from one second up."""
    if x >= 1000:
        return f"{x / 1000:.1f}{NBSP}s"
    return f"{x:.0f}{NBSP}ms" if x >= 10 else f"{x:.1f}{NBSP}ms"


def shape(dims, sep: str = "×") -> str:
    """A shape as 8×16×1024×64 (with sep="x": 8x16x1024x64)."""
    return sep.join(map(str, dims))


def dims(shape) -> str:
    """A shape as B=1, H=16, S=8192, D=128, the way captions name it."""
    return ", ".join(f"{k}={v}" for k, v in zip("BHSD", shape))


def size(nbytes: float | None) -> str:
    """Bytes as bytes, KiB, MiB, or GiB from one GiB up."""
    if nbytes is None:
        return "—"
    for unit, scale, digits in (("GiB", 2**30, 2), ("MiB", 2**20, 0), ("KiB", 2**10, 0)):
        if nbytes >= scale:
            return f"{nbytes / scale:.{digits}f}{NBSP}{unit}"
    return f"{nbytes:.0f}{NBSP}B"


def short(name: str, limit: int = 60) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


def first_line(error: BaseException | str) -> str:
    """The first line of an error's message ("" when it has none)."""
    message = str(error).strip()
    return message.splitlines()[0] if message else ""


def text_table(headers, rows) -> str:
    """Columns padded to their widest cell, for the terminal."""
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([fmt.format(*headers), fmt.format(*("-" * w for w in widths))]
                     + [fmt.format(*map(str, r)) for r in rows])


# Markdown's own characters as entities, so a name never starts a code span, a link, attr_list's `{: ...}`, a
# table column or an escape; an underscore inside a word (a kernel's name) is kept, one at a word's end encoded.
MARKDOWN = {ord(c): f"&#{ord(c)};" for c in "\\`*[]{}|"}
LONE_UNDERSCORE = re.compile(r"(?<!\w)_|_(?!\w)")


def escape(value) -> str:
    """A string from a record, a trace or a reader's code as it enters a page, on one line: the one escape for
    HTML text, attributes, SVG and Markdown alike, applied once, where the value enters the markup."""
    text = html.escape(str(value), quote=True).translate(MARKDOWN)
    return LONE_UNDERSCORE.sub("&#95;", text).replace("\r", " ").replace("\n", " ")
