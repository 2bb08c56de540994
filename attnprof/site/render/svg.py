"""SVG as text, shared by the trace timeline and the charts: one palette, one header, one element helper.

Plain SVG (no plotting library), inlined in the page, so a <title> inside a mark is its hover text.
"""
from __future__ import annotations

from ...model.stages import STAGES
from ...text import escape

# one palette: the series colours, and the trace's roles taken from them
SERIES = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#9c755f"]
ROLE = {"kernel": SERIES[0], "memset": SERIES[1], "memcpy": SERIES[2], "launch": SERIES[4], "cpu": SERIES[7],
        "span": "#bab0ac", "idle": "rgba(128,128,128,.18)"}
# one colour per attention path (a stage's key), the same on every chart; mid tones that read on a
# light and on a dark page. None is currentColor, which the charts keep for ceilings (the roof).
PATH_COLOR = {s.name: s.color for s in STAGES.values() if s.color}
BACKGROUND = "var(--md-default-bg-color, white)"  # the page's own background, for a label's backing (in style=)
# greys that read on a light and on a dark page; text takes the page's own colour (currentColor)
GRID, FRAME, MUTED, CONNECTOR, INK = "rgba(128,128,128,.25)", "rgba(128,128,128,.6)", "#8a8a8a", "#999", "currentColor"


def header(width, height, label: str, font_size: int = 11, css_class: str = "") -> str:
    """The opening tag of every figure: scales to the page's width, named for screen readers."""
    klass = f' class="{escape(css_class)}"' if css_class else ""
    return (f'<svg xmlns="http://www.w3.org/2000/svg"{klass} viewBox="0 0 {width} {height}" width="100%" '
            f'font-family="sans-serif" font-size="{font_size}" fill="currentColor" role="img" aria-label="{escape(label)}">')


def el(tag: str, body: str = "", **attrs) -> str:
    """One element; `body` is markup (escape text with text.escape), attribute names take - for _ (text_anchor)."""
    attributes = "".join(f' {k.replace("_", "-")}="{escape(v)}"' for k, v in attrs.items())
    return f"<{tag}{attributes}>{body}</{tag}>" if body else f"<{tag}{attributes}/>"


def hover(text) -> str:
    """A <title> child: the browser shows it when the pointer rests on its parent, a line per line of `text`."""
    return el("title", "\n".join(escape(line) for line in str(text).split("\n")))
