"""Small SVG charts drawn from measurement records: line charts over sequence length, and a roofline.

Plain SVG text (no plotting library), so the site builds anywhere; every point is a measured value.
"""
from __future__ import annotations

import html
import math

COLORS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#9c755f"]
W, H, LEFT, RIGHT, TOP, BOTTOM = 880, 400, 70, 290, 30, 50


def _scale(lo, hi, log, a, b):
    if log:
        lo, hi = math.log10(lo), math.log10(hi)
    span = (hi - lo) or 1.0
    return lambda v: a + ((math.log10(v) if log else v) - lo) / span * (b - a)


def _ticks(lo, hi, log):
    if log:
        return [10 ** e * m for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
                for m in (1, 2, 5) if lo <= 10 ** e * m <= hi]
    step = 10 ** math.floor(math.log10((hi - lo) or 1)) / 2
    while (hi - lo) / step > 8:
        step *= 2
    return [i * step for i in range(math.ceil(lo / step), math.floor(hi / step) + 1)]


def _fmt(v):
    return f"{v:g}" if v < 1e4 else f"{v / 1024:g}k" if v % 1024 == 0 else f"{v:.0e}"


def line_chart(series: dict, x_label: str, y_label: str, title: str, log_x=True, log_y=False,
               hlines: dict | None = None, x_ticks=None) -> str:
    """series: {name: [(x, y), ...]}; points with y None are skipped (e.g. out of memory)."""
    pts = [(x, y) for s in series.values() for x, y in s if y is not None]
    xs, ys = [p[0] for p in pts], [p[1] for p in pts] + list((hlines or {}).values())
    x0, x1 = min(xs), max(xs)
    y0, y1 = (min(ys) / 1.5, max(ys) * 1.5) if log_y else (0, max(ys) * 1.1)
    fx, fy = _scale(x0, x1, log_x, LEFT, W - RIGHT), _scale(y0, y1, log_y, H - BOTTOM, TOP)
    esc = html.escape
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="100%" font-family="sans-serif" '
           f'font-size="11" role="img" aria-label="{esc(title)}">',
           f'<text x="{LEFT}" y="16" font-weight="bold">{esc(title)}</text>',
           f'<rect x="{LEFT}" y="{TOP}" width="{W - LEFT - RIGHT}" height="{H - TOP - BOTTOM}" fill="none" stroke="#ccc"/>']
    for t in x_ticks or (sorted(set(xs)) if log_x else _ticks(x0, x1, log_x)):
        out.append(f'<text x="{fx(t):.1f}" y="{H - BOTTOM + 14}" text-anchor="middle">{_fmt(t)}</text>')
    for t in _ticks(y0, y1, log_y):
        out.append(f'<line x1="{LEFT}" y1="{fy(t):.1f}" x2="{W - RIGHT}" y2="{fy(t):.1f}" stroke="#eee"/>'
                   f'<text x="{LEFT - 4}" y="{fy(t) + 4:.1f}" text-anchor="end">{_fmt(t)}</text>')
    out.append(f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - 12}" text-anchor="middle">{esc(x_label)}</text>'
               f'<text x="14" y="{(TOP + H - BOTTOM) / 2}" transform="rotate(-90 14 {(TOP + H - BOTTOM) / 2})" '
               f'text-anchor="middle">{esc(y_label)}</text>')
    for name, y in (hlines or {}).items():
        out.append(f'<line x1="{LEFT}" y1="{fy(y):.1f}" x2="{W - RIGHT}" y2="{fy(y):.1f}" stroke="#333" '
                   f'stroke-dasharray="6,3"/><text x="{LEFT + 4}" y="{fy(y) - 4:.1f}">{esc(name)}</text>')
    for i, (name, points) in enumerate(series.items()):
        color = COLORS[i % len(COLORS)]
        good = [(x, y) for x, y in points if y is not None]
        if good:
            path = " ".join(f"{'M' if j == 0 else 'L'}{fx(x):.1f},{fy(y):.1f}" for j, (x, y) in enumerate(good))
            out.append(f'<path d="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
        for x, y in good if len(good) <= 20 else []:  # a dense curve (the roof) needs no markers
            out.append(f'<circle cx="{fx(x):.1f}" cy="{fy(y):.1f}" r="3" fill="{color}"><title>{esc(name)}: '
                       f'{_fmt(x)} → {y:.3g}</title></circle>')
        out.append(f'<rect x="{W - RIGHT + 12}" y="{TOP + 16 * i}" width="10" height="10" fill="{color}"/>'
                   f'<text x="{W - RIGHT + 26}" y="{TOP + 16 * i + 9}">{esc(name)}'
                   f'{"" if len(good) == len(points) else " (OOM past the last point)"}</text>')
    out.append("</svg>")
    return "\n".join(out)


def roofline(peak_tflops: float, bandwidth_gbs: float, points: list[tuple[str, float, float]], title: str) -> str:
    """Log-log roofline: attainable TFLOP/s = min(peak, bandwidth × intensity); points (name, FLOP/byte, TFLOP/s)."""
    ridge = peak_tflops * 1e12 / (bandwidth_gbs * 1e9)
    xs = [p[1] for p in points] + [ridge]
    x0, x1 = min(xs) / 3, max(xs) * 3
    roof = [(x, min(peak_tflops, bandwidth_gbs * x / 1e3)) for x in [x0 * (x1 / x0) ** (i / 40) for i in range(41)]]
    series = {"roof (measured ceilings)": roof}
    series.update({name: [(x, y)] for name, x, y in points})
    return line_chart(series, "arithmetic intensity (FLOP per byte of device memory traffic)", "TFLOP/s", title,
                      log_x=True, log_y=True, x_ticks=[10 ** e for e in range(-1, 6) if x0 <= 10 ** e <= x1])
