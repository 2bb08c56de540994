"""The figures, drawn as inline SVG from measured values: one forward's trace as a timeline, line
charts over sequence length, and a roofline."""
from __future__ import annotations

import math

from .. import names, trace as traces
from ..oplist import KIND_LABEL
from ..text import us
from .svg import CONNECTOR, FRAME, GRID, INK, MUTED, ROLE, SERIES, el, esc, header, hover

W, H, LEFT, RIGHT, TOP, BOTTOM = 880, 400, 70, 290, 30, 50
HALO = "paint-order: stroke; stroke: var(--md-default-bg-color, white); stroke-width: 4px; stroke-linejoin: round"


# ---- one forward's trace -------------------------------------------------------------------------

def nice_step(span_us: float) -> float:
    """A round tick interval giving 4 to 10 ticks over the span."""
    for step in (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 5000, 10000, 20000, 25000, 50000, 100000):
        if span_us / step <= 10:
            return step
    return span_us / 10


TRACE_FONT, CHAR_W = 12, 6.8  # px; a generous average glyph width of the sans-serif at that size


def _fit(text: str, room: float) -> str | None:
    """`text`, cut with an ellipsis to fit `room` px, or None when not even three letters fit."""
    n = int(room // CHAR_W)
    if n >= len(text):
        return text
    return text[: n - 1] + "…" if n >= 4 else None


def label_groups(centres: list[float]) -> list[list[int]]:
    """Indices of neighbouring labels grouped so that no two labels overlap: each group is labelled
    once, as a range ("5–10"), centred on its members."""
    groups = [[i] for i in range(len(centres))]
    def box(g):
        text = str(g[0] + 1) if len(g) == 1 else f"{g[0] + 1}–{g[-1] + 1}"
        mid = (centres[g[0]] + centres[g[-1]]) / 2
        half = (len(text) * CHAR_W + 8) / 2
        return mid - half, mid + half
    merged = True
    while merged:
        merged = False
        for j in range(1, len(groups)):
            if box(groups[j])[0] < box(groups[j - 1])[1]:
                groups[j - 1:j + 1] = [groups[j - 1] + groups[j]]
                merged = True
                break
    return groups


def timeline(summary, trace: dict, width: int = 1040) -> str:
    """One forward (or backward) as a timeline: CPU ops (nested) above their launches, GPU ops below,
    and the GPU's idle gaps between the first launch and the last op's end shaded in the GPU lane.
    A backward capture's launches are followed onto autograd's thread, as its op list was counted.

    Drawn at `width` px with 12 px text, to be shown at its own size or larger (it scrolls sideways on
    a narrow screen rather than shrinking). GPU ops are numbered as in the op list; a number sits in
    its bar when the bar has room, under it otherwise, and neighbours too close for separate numbers
    share one range label. The legend names every op. Text takes the page's colour (dark or light).
    """
    what = summary.get("pass", "forward")
    fwd = traces.median_forward(traces.forwards(trace, summary["label"], summary.get("follow_autograd", False)))
    cpu = [op for op in fwd.cpu_ops if op.depth <= 3]
    end = max([fwd.cpu_us] + [o.start_us + o.duration_us for o in fwd.ops])
    left, right, row_h, lane = 64, 12, 20, 22
    scale = (width - left - right) / end if end else 1
    x = lambda t: left + t * scale
    depth_rows = max([o.depth for o in cpu], default=0)
    y_cpu = 34
    y_launch = y_cpu + (depth_rows + 1) * row_h + 8
    y_gpu = y_launch + 14 + 44
    y_numbers = y_gpu + lane + 16
    y_axis = y_numbers + 26
    columns = 2 if len(fwd.ops) > 8 else 1
    per_column = -(-len(fwd.ops) // columns)
    legend_y = y_axis + 34
    height = legend_y + 18 * per_column
    parts = [header(width, height, f'{summary["stage"]} {what} trace', font_size=TRACE_FONT),
             el("text", f'One {what} of {esc(summary["stage"])}: {us(end)} from the start of the annotation to '
                        f'the end of its last GPU op', x=left, y=16, font_weight="bold")]
    step = nice_step(end)
    for i in range(int(end // step) + 1):  # time axis at the bottom, clear of the launch connectors
        tx = f"{x(i * step):.1f}"
        parts.append(el("line", x1=tx, y1=y_cpu - 4, x2=tx, y2=y_axis - 14, stroke=GRID)
                     + el("text", us(i * step), x=tx, y=y_axis, fill=MUTED, text_anchor="middle" if i else "start"))
    parts.append(el("text", f"time since the {what} began (CPU clock)", x=f"{x(end):.1f}", y=y_axis + 16,
                    fill=MUTED, text_anchor="end"))
    for name, y, h in (("CPU", y_cpu, row_h), ("launch", y_launch, 12), ("GPU", y_gpu, lane)):
        parts.append(el("text", name, x=4, y=f"{y + h / 2 + 4:.0f}", font_weight="bold"))
    parts.append(el("rect", hover(f'{summary["label"]} {us(fwd.cpu_us)}'), x=f"{x(0):.1f}", y=y_cpu,
                    width=f"{fwd.cpu_us * scale:.1f}", height=row_h - 2, fill=ROLE["span"])
                 + el("text", esc(summary["label"]), x=f"{x(0) + 4:.1f}", y=y_cpu + 14, fill="#222"))
    for op in cpu:
        y = y_cpu + op.depth * row_h
        w = max(op.duration_us * scale, 1)
        parts.append(el("rect", hover(f"{op.name} {us(op.duration_us)}"), x=f"{x(op.start_us):.1f}", y=y,
                        width=f"{w:.1f}", height=row_h - 2, fill=ROLE["cpu"], fill_opacity=f"{1 - 0.15 * op.depth:.2f}"))
        text = _fit(op.name.removeprefix("aten::"), w - 6)
        if text:
            parts.append(el("text", esc(text), x=f"{x(op.start_us) + 3:.1f}", y=y + 14, fill="white"))
    for start, stop in traces.idle_intervals(fwd.ops):  # the GPU waiting for this forward's next launch
        parts.append(el("rect", hover(f"GPU idle {us(stop - start)}"), x=f"{x(start):.1f}", y=y_gpu,
                        width=f"{max((stop - start) * scale, 1):.1f}", height=lane, fill=ROLE["idle"]))
    small, centres = [], []
    for i, op in enumerate(fwd.ops, 1):
        lx, gx = x(op.launch_start_us), x(op.start_us)
        gw = max(op.duration_us * scale, 2)
        parts.append(el("line", x1=f"{lx:.1f}", y1=y_launch + 12, x2=f"{gx:.1f}", y2=y_gpu, stroke=CONNECTOR,
                        stroke_dasharray="2,2")
                     + el("rect", hover(f"{op.launch}: launches op {i}"), x=f"{lx:.1f}", y=y_launch, width=2,
                          height=12, fill=ROLE["launch"])
                     + el("rect", hover(f"{i}. {op.name} {us(op.duration_us)}"), x=f"{gx:.1f}", y=y_gpu,
                          width=f"{gw - 1 if gw > 4 else gw:.1f}", height=lane, fill=ROLE[op.kind]))  # a hairline between neighbours
        inside = _fit(f"{i} {names.label(op.name)}", gw - 6) or (str(i) if gw >= len(str(i)) * CHAR_W + 6 else None)
        if inside:
            parts.append(el("text", esc(inside), x=f"{gx + 3:.1f}", y=y_gpu + 15, fill="white"))
        else:
            small.append((i, gx, gw))
            centres.append(gx + gw / 2)
    for group in label_groups(centres):
        first, last = small[group[0]], small[group[-1]]
        text = str(first[0]) if len(group) == 1 else f"{first[0]}–{last[0]}"
        x0, x1 = first[1], last[1] + last[2]
        if len(group) > 1:  # a bracket under the ops the range names
            parts.append(el("path", d=f"M{x0:.1f},{y_gpu + lane + 3} v3 H{x1:.1f} v-3", fill="none", stroke=MUTED))
        parts.append(el("text", text, x=f"{(x0 + x1) / 2:.1f}", y=y_numbers, text_anchor="middle"))
    column_w = (width - left - right) / columns
    for i, op in enumerate(fwd.ops, 1):
        col, row = divmod(i - 1, per_column)
        text = f"{KIND_LABEL[op.kind]} · {us(op.duration_us)} · {names.label(op.name)}"
        lx, ly = left + col * column_w, legend_y + 18 * row
        parts.append(el("rect", x=f"{lx:.1f}", y=ly - 10, width=10, height=10, fill=ROLE[op.kind])
                     + el("text", f'{el("tspan", str(i), font_weight="bold")} {esc(_fit(text, column_w - 40) or "")}',
                          x=f"{lx + 16:.1f}", y=ly))
    parts.append("</svg>")
    return '<div class="attnprof-trace">' + "\n".join(parts) + "</div>"


RANK_LANES = {"attention": (SERIES[0], "attention kernel"), "other": (SERIES[1], "other compute (merge, copies)"),
              "nccl": (SERIES[2], "NCCL kernel")}


def ranks_timeline(summary, trace: dict, width: int = 960) -> str:
    """One forward on every rank of a capture on several GPUs, on the trace's one clock: per rank a
    compute lane and a communication (NCCL) lane. The forward shown is the same step on every rank,
    the one whose device time is rank 0's median."""
    per_rank = [traces.forwards(traces.rank_trace(trace, r["rank"]), summary["label"]) for r in summary["ranks"]]
    pick = per_rank[0].index(traces.median_forward(per_rank[0]))
    fwds = [f[pick] for f in per_rank]
    t0 = min(f.start_ts for f in fwds)
    end = max(f.start_ts - t0 + max(o.start_us + o.duration_us for o in f.ops) for f in fwds)
    left, right, row_h = 110, 40, 20  # room on the right for the last tick's label
    scale = (width - left - right) / end
    x = lambda t: left + t * scale
    lanes_bottom = 30 + len(fwds) * 2 * (row_h + 6)
    height = lanes_bottom + 50
    parts = [header(width, height, f'{summary["record"]}: ranks on one timeline'),
             el("text", f'one forward on each of {len(fwds)} ranks, S={summary["shape"][2]:,}, rotation '
                        f'{esc(summary["rotate"])}: {us(end)} from the first rank\'s annotation to the last GPU op',
                x=left, y=14)]
    step = nice_step(end)
    for i in range(int(end // step) + 1):
        tx = f"{x(i * step):.1f}"
        parts.append(el("line", x1=tx, y1=26, x2=tx, y2=lanes_bottom, stroke=GRID)
                     + el("text", us(i * step), x=tx, y=lanes_bottom + 12, fill=MUTED, font_size=9))
    for k, (r, f) in enumerate(zip(summary["ranks"], fwds)):
        y_comp = 30 + k * 2 * (row_h + 6)
        y_comm = y_comp + row_h + 4
        parts.append(el("text", f'rank {r["rank"]} compute', x=4, y=y_comp + 14, font_weight="bold")
                     + el("text", f'rank {r["rank"]} NCCL', x=4, y=y_comm + 14))
        offset = f.start_ts - t0
        for op in f.ops:
            if op.kind != "kernel":
                continue
            comm = traces.is_communication(op.name)
            lane = "nccl" if comm else "attention" if names.fingerprint([op.name]) != "math" else "other"
            parts.append(el("rect", hover(f"{names.label(op.name)} {us(op.duration_us)}"),
                            x=f"{x(offset + op.start_us):.1f}", y=y_comm if comm else y_comp,
                            width=f"{max(op.duration_us * scale, 1.0):.1f}", height=row_h - 2, fill=RANK_LANES[lane][0]))
    for i, (color, label) in enumerate(RANK_LANES.values()):
        parts.append(el("rect", x=left + i * 220, y=lanes_bottom + 20, width=12, height=12, fill=color)
                     + el("text", label, x=left + i * 220 + 16, y=lanes_bottom + 30))
    parts.append("</svg>")
    return '<div class="attnprof-figure">' + "\n".join(parts) + "</div>"  # scrolls sideways on a phone


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
                      stroke_dasharray="6,3"))
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
    for name, y in (hlines or {}).items():  # labels last, on a halo of the page's colour, so no curve hides them
        out.append(el("text", esc(name), x=LEFT + 4, y=f"{fy(y) - 4:.1f}", style=HALO))
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
