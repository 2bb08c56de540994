"""The figures, drawn as inline SVG from measured values: one forward's trace as a timeline, line
charts over sequence length, and a roofline."""
from __future__ import annotations

import math

from .. import names, trace as traces
from ..oplist import KIND_LABEL
from ..text import us
from .svg import CONNECTOR, FRAME, GRID, INK, MUTED, ROLE, SERIES, el, esc, header, hover

W, H, LEFT, RIGHT, TOP, BOTTOM = 880, 400, 70, 290, 30, 50


# ---- one forward's trace -------------------------------------------------------------------------

def nice_step(span_us: float) -> float:
    """A round tick interval giving 4 to 10 ticks over the span."""
    for step in (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 5000, 10000):
        if span_us / step <= 10:
            return step
    return span_us / 10


def timeline(summary, trace: dict, width: int = 960) -> str:
    """One forward as a timeline: CPU ops (nested) above their launches, GPU ops below.

    Ops are numbered as in the op list; the legend under the lanes names them.
    """
    fwd = traces.median_forward(traces.forwards(trace, summary["label"]))
    cpu = [op for op in fwd.cpu_ops if op.depth <= 3]
    end = max([fwd.cpu_us] + [o.start_us + o.duration_us for o in fwd.ops])
    left, right, row_h = 70, 10, 18
    scale = (width - left - right) / end if end else 1
    x = lambda t: left + t * scale
    depth_rows = max([o.depth for o in cpu], default=0)
    y_cpu, y_launch = 30, 30 + (depth_rows + 1) * row_h + 6
    y_gpu = y_launch + row_h + 40
    legend_y = y_gpu + row_h + 40
    height = legend_y + 16 * len(fwd.ops) + 10
    parts = [header(width, height, f'{summary["stage"]} forward trace'),
             el("text", f'one forward of {esc(summary["stage"])}: {us(end)} from the start of the '
                        f'annotation to the end of its last GPU op', x=left, y=14)]
    step = nice_step(end)
    for i in range(int(end // step) + 1):  # time axis under the GPU lane
        tx = f"{x(i * step):.1f}"
        parts.append(el("line", x1=tx, y1=y_cpu - 4, x2=tx, y2=y_gpu + row_h + 2, stroke=GRID)
                     + el("text", us(i * step), x=tx, y=y_gpu - 6, fill=MUTED, font_size=9))
    for label, y in (("CPU", y_cpu), ("launch", y_launch), ("GPU", y_gpu)):
        parts.append(el("text", label, x=4, y=y + 13, font_weight="bold"))
    parts.append(el("rect", hover(f'{summary["label"]} {us(fwd.cpu_us)}'), x=f"{x(0):.1f}", y=y_cpu,
                    width=f"{fwd.cpu_us * scale:.1f}", height=row_h - 2, fill=ROLE["span"])
                 + el("text", esc(summary["label"]), x=f"{x(0) + 3:.1f}", y=y_cpu + 12))
    for op in cpu:
        y = y_cpu + op.depth * row_h
        w = max(op.duration_us * scale, 1)
        parts.append(el("rect", hover(f"{op.name} {us(op.duration_us)}"), x=f"{x(op.start_us):.1f}", y=y,
                        width=f"{w:.1f}", height=row_h - 2, fill=ROLE["cpu"], fill_opacity=f"{1 - 0.2 * op.depth:.1f}"))
        short = op.name.split("::")[-1]
        if w > 7 * len(short):
            parts.append(el("text", esc(short), x=f"{x(op.start_us) + 2:.1f}", y=y + 12, fill="white"))
    for i, op in enumerate(fwd.ops, 1):
        lx, gx = x(op.launch_start_us), x(op.start_us)
        gw = max(op.duration_us * scale, 1.5)
        parts.append(el("line", x1=f"{lx:.1f}", y1=y_launch + row_h - 2, x2=f"{gx:.1f}", y2=y_gpu, stroke=CONNECTOR,
                        stroke_dasharray="2,2")
                     + el("rect", hover(op.launch), x=f"{lx:.1f}", y=y_launch, width=2, height=row_h - 2,
                          fill=ROLE["launch"])
                     + el("rect", hover(f"{i}. {op.name} {us(op.duration_us)}"), x=f"{gx:.1f}", y=y_gpu,
                          width=f"{gw:.1f}", height=row_h - 2, fill=ROLE[op.kind])
                     + el("text", str(i), x=f"{gx + gw / 2:.1f}", y=y_gpu + row_h + 12, text_anchor="middle"))
        parts.append(el("text", f'{el("tspan", str(i), font_weight="bold")} '
                                f'{KIND_LABEL[op.kind]} · {us(op.duration_us)} · {esc(names.label(op.name))}',
                        x=left, y=legend_y + 16 * (i - 1)))
    parts.append("</svg>")
    return "\n".join(parts)


# ---- charts of the measurement runs --------------------------------------------------------------

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
    out = [header(W, H, title), el("text", esc(title), x=LEFT, y=16, font_weight="bold"),
           el("rect", x=LEFT, y=TOP, width=W - LEFT - RIGHT, height=H - TOP - BOTTOM, fill="none", stroke=FRAME)]
    for t in x_ticks or (sorted(set(xs)) if log_x else _ticks(x0, x1, log_x)):
        out.append(el("text", _fmt(t), x=f"{fx(t):.1f}", y=H - BOTTOM + 14, text_anchor="middle"))
    for t in _ticks(y0, y1, log_y):
        out.append(el("line", x1=LEFT, y1=f"{fy(t):.1f}", x2=W - RIGHT, y2=f"{fy(t):.1f}", stroke=GRID)
                   + el("text", _fmt(t), x=LEFT - 4, y=f"{fy(t) + 4:.1f}", text_anchor="end"))
    mid_y = (TOP + H - BOTTOM) / 2
    out.append(el("text", esc(x_label), x=(LEFT + W - RIGHT) / 2, y=H - 12, text_anchor="middle")
               + el("text", esc(y_label), x=14, y=mid_y, transform=f"rotate(-90 14 {mid_y})", text_anchor="middle"))
    for name, y in (hlines or {}).items():
        out.append(el("line", x1=LEFT, y1=f"{fy(y):.1f}", x2=W - RIGHT, y2=f"{fy(y):.1f}", stroke=INK,
                      stroke_dasharray="6,3") + el("text", esc(name), x=LEFT + 4, y=f"{fy(y) - 4:.1f}"))
    for i, (name, points) in enumerate(series.items()):
        color = SERIES[i % len(SERIES)]
        good = [(x, y) for x, y in points if y is not None]
        if good:
            path = " ".join(f"{'M' if j == 0 else 'L'}{fx(x):.1f},{fy(y):.1f}" for j, (x, y) in enumerate(good))
            out.append(el("path", d=path, fill="none", stroke=color, stroke_width=2))
        for x, y in good if len(good) <= 20 else []:  # a dense curve (the roof) needs no markers
            out.append(el("circle", hover(f"{name}: {_fmt(x)} → {y:.3g}"), cx=f"{fx(x):.1f}", cy=f"{fy(y):.1f}",
                          r=3, fill=color))
        out.append(el("rect", x=W - RIGHT + 12, y=TOP + 16 * i, width=10, height=10, fill=color)
                   + el("text", esc(name) + ("" if len(good) == len(points) else " (OOM past the last point)"),
                        x=W - RIGHT + 26, y=TOP + 16 * i + 9))
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
