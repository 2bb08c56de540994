"""The figures, inline SVG drawn from measured values: one forward's trace, line charts, a roofline."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from ...analysis import kernel_names, trace as traces
from ...analysis.oplist import KIND_LABEL
from ...text import escape, us
from ...model.stages import STAGES
from ..words import count, plain_title
from .svg import BACKGROUND, CONNECTOR, FRAME, GRID, INK, MUTED, PATH_COLOR, ROLE, SERIES, el, header, hover

MUTED_TEXT = {"class": "attnprof-muted", "fill": MUTED}  # small print; the stylesheet gives it 4.5:1 in each scheme
HALO = "paint-order: stroke; stroke: var(--md-default-bg-color, white); stroke-width: 4px; stroke-linejoin: round"


# ---- one forward's trace -------------------------------------------------------------------------

def nice_step(span_us: float, most: int = 10) -> float:
    """A round tick interval giving at most `most` ticks over the span."""
    for step in (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 5000, 10000, 20000, 25000, 50000, 100000,
                 200000, 250000, 500000):
        if span_us / step <= most:
            return step
    return span_us / most


def time_ticks(end_us: float, width: float = 1040) -> list[tuple[float, str]]:
    """(µs, label) ticks of a time axis to end_us, at most one per 80 px, in one unit ("0 ms", "2.5 µs")."""
    step = nice_step(end_us, max(3, min(10, int(width // 80))))
    ticks = [i * step for i in range(int(end_us // step) + 1)]
    ms = ticks[-1] >= 1000
    return [(t, f"{round(t / 1000, 6):g} ms" if ms else f"{round(t, 6):g} µs") for t in ticks]


def _time_axis(end_us: float, width: float, x, top: float, bottom: float, y: float, name: str, name_x) -> list[str]:
    """A trace figure's time axis: grid lines from `top` to `bottom`, tick labels at `y` kept inside the
    figure's edges, and the axis's `name` under them, ending at `name_x`."""
    def anchor(t, label):
        half = len(label) * CHAR_W / 2
        return "start" if x(t) - half < 2 else "end" if x(t) + half > width - 2 else "middle"
    return [el("line", x1=f"{x(t):.1f}", y1=top, x2=f"{x(t):.1f}", y2=bottom, stroke=GRID)
            + el("text", label, x=f"{x(t):.1f}", y=y, **MUTED_TEXT, text_anchor=anchor(t, label))
            for t, label in time_ticks(end_us, width)] + [
        el("text", name, x=name_x, y=y + 16, **MUTED_TEXT, text_anchor="end")]


TRACE_FONT, CHAR_W = 12, 6.8  # px; a generous average glyph width of the sans-serif at that size
LINE = 16  # px between the lines of a wrapped label


def _fit(text: str, room: float) -> str | None:
    """`text`, cut with an ellipsis to fit `room` px, or None when not even three letters fit."""
    n = int(room // CHAR_W)
    if n >= len(text):
        return text
    return text[: n - 1] + "…" if n >= 4 else None


def label_groups(centres: list[float]) -> list[list[int]]:
    """Neighbouring labels' indices grouped so that none overlap; a group is labelled once ("5–10")."""
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


NARROW = 380  # px; the phone variant of a trace figure, drawn for a 360-odd px column with the same 12 px text


def wrap(text: str, room: float, char_w: float = CHAR_W) -> list[str]:
    """`text` broken between words into lines of at most `room` px."""
    lines: list[str] = []
    for word in text.split(" "):
        if lines and len(lines[-1]) + 1 + len(word) <= room // char_w:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


def wrap_name(text: str, room: float, char_w: float = CHAR_W) -> list[str]:
    """`text` (a kernel's name: few spaces) in lines of at most `room` px, broken after a space, _ , : < or (
    where it can be, anywhere else where it cannot; joined again, the lines are the text."""
    n = max(int(room // char_w), 8)
    lines = [""]
    for piece in re.findall(r"[^ _,:<(]*[ _,:<(]?", text):
        while len(lines[-1]) + len(piece) > n:
            if lines[-1]:
                lines.append("")
            else:  # a run longer than a line
                lines[-1], piece = piece[:n], piece[n:]
                lines.append("")
        lines[-1] += piece
    return [line for line in lines if line]


def _lines(lines: list[str], x, y, step: int = 16, **attrs) -> str:
    """Lines of text, one under the other from baseline y, as one <text> of <tspan>s."""
    return el("text", "".join(el("tspan", escape(t), x=x, dy=0 if i == 0 else step) for i, t in enumerate(lines)),
              x=x, y=y, **attrs)


def op_title(i: int, op) -> str:
    """A GPU op's hover text: its number, readable name and time, then its full name (the legend cuts it)."""
    short = kernel_names.label(op.name)
    head = f"{i}. {short} {us(op.duration_us)}"
    return head if short == op.name else f"{head}\n{op.name}"


CPU_DEPTH = 3  # how deep the CPU lane draws nested ops by default


def timeline(summary, fwd: traces.Forward, width: int = 1040, cpu_depth: int = CPU_DEPTH, axis_us: float = 0) -> str:
    """The trace figure, drawn at `width` px and at NARROW px for a phone (the stylesheet shows one). The CPU
    lane goes `cpu_depth` levels deep (a model's layer nests deeper than a figure can show); the time axis
    spans at least `axis_us`, a compared trace's span, so that the two share one scale."""
    return ('<div class="attnprof-trace" data-search-exclude="">' + _timeline(summary, fwd, width, "attnprof-wide", cpu_depth, axis_us) + "\n"
            + _timeline(summary, fwd, NARROW, "attnprof-narrow", cpu_depth, axis_us) + "</div>")



def drawn_span(fwd) -> float:
    """A trace figure's span in µs: from the annotation's start to the end of its last GPU op or its own."""
    return max([fwd.cpu_us] + [o.start_us + o.duration_us for o in fwd.ops])

def _timeline(summary, fwd: traces.Forward, width: int, variant: str, cpu_depth: int = CPU_DEPTH,
              axis_us: float = 0) -> str:
    """One forward (or backward) as a timeline: nested CPU ops above their launches, GPU ops below, the GPU's
    idle gaps shaded; a backward's launches are followed onto autograd's thread, as its op list counted them.
    Drawn at `width` px with 12 px text. A narrow one (a phone's) lists the legend in one column and borrows
    its hover text from the wide one's (docs/javascripts/names.js: a full name is sent once). GPU ops are
    numbered as in the op list, in their bar or under it, too-close neighbours sharing one range label."""
    what = summary.get("pass", "forward")
    cpu = [op for op in fwd.cpu_ops if op.depth <= cpu_depth]
    end = drawn_span(fwd)
    axis = max(end, axis_us)
    narrow = width < 600
    # on a phone every lane is a finger tall (a tap there lists the marks under the finger)
    left, right, row_h, lane, launch_h, legend_row = (64, 12, 28, 28, 26, 26) if narrow else (64, 12, 20, 22, 12, 24)
    scale = (width - left - right) / axis if axis else 1
    x = lambda t: left + t * scale
    depth_rows = max([o.depth for o in cpu], default=0)
    heading = f'One {what} of {plain_title(summary)}, from the start of its annotation to the end of its last GPU op'  # the axis gives the span
    heading_x = 4 if narrow else left
    heading_lines = wrap(heading, width - heading_x - right, CHAR_W * 1.08)  # bold runs wider
    y_cpu = 34 + 16 * (len(heading_lines) - 1)
    y_launch = y_cpu + (depth_rows + 1) * row_h + 8
    y_gpu = y_launch + launch_h + 2 + 44
    y_numbers = y_gpu + lane + 16
    y_axis = y_numbers + 26
    columns = 2 if len(fwd.ops) > 8 and not narrow else 1
    per_column = -(-len(fwd.ops) // columns)
    legend_left = 4 if narrow else left
    column_w = (width - legend_left - right) / columns
    # each legend row names its op as the profiler prints it, wrapped onto as many lines as it takes
    legend = [wrap_name(f"{KIND_LABEL[op.kind]} · {us(op.duration_us)} · {kernel_names.printed(op.name)}",
                        column_w - 24 - len(str(i)) * CHAR_W) for i, op in enumerate(fwd.ops, 1)]
    row_tops, column_h = [], [0] * columns
    for i, lines in enumerate(legend):
        col = i // per_column
        row_tops.append((col, column_h[col]))
        column_h[col] += legend_row + LINE * (len(lines) - 1)
    legend_y = y_axis + 34
    height = legend_y + max(column_h) - 8
    parts = [header(width, height, f'{summary["stage"]} {what} trace', font_size=TRACE_FONT, css_class=variant),
             _lines(heading_lines, heading_x, 16, font_weight="bold")]
    # the time axis at the bottom, clear of the launch connectors
    parts += _time_axis(axis, width, x, y_cpu - 4, y_axis - 14, y_axis, f"time since the {what} began (CPU clock)",
                        f"{x(axis):.1f}")
    for name, y, h in (("CPU", y_cpu, row_h), ("launch", y_launch, launch_h), ("GPU", y_gpu, lane)):
        parts.append(el("text", name, x=4, y=f"{y + h / 2 + 4:.0f}", font_weight="bold"))
    mid = row_h / 2 + 3  # a label's baseline in its row
    span_label = _fit(summary["label"], fwd.cpu_us * scale - 6)  # within its bar: past it, dark text on a dark page
    parts.append(el("rect", hover(f'{summary["label"]} {us(fwd.cpu_us)}'), x=f"{x(0):.1f}", y=y_cpu,
                    width=f"{fwd.cpu_us * scale:.1f}", height=row_h - 2, fill=ROLE["span"])
                 + (el("text", escape(span_label), x=f"{x(0) + 4:.1f}", y=f"{y_cpu + mid:.0f}", fill="#222")
                    if span_label else ""))
    for op in cpu:
        y = y_cpu + op.depth * row_h
        w = max(op.duration_us * scale, 1)
        parts.append(el("rect", hover(f"{op.name} {us(op.duration_us)}"), x=f"{x(op.start_us):.1f}", y=y,
                        width=f"{w:.1f}", height=row_h - 2, fill=ROLE["cpu"]))  # opaque: its white label keeps its contrast
        text = _fit(op.name.removeprefix("aten::"), w - 6)
        if text:
            parts.append(el("text", escape(text), x=f"{x(op.start_us) + 3:.1f}", y=f"{y + mid:.0f}", fill="white"))
    for start, stop in traces.idle_intervals(fwd.ops):  # the GPU waiting for this forward's next launch
        parts.append(el("rect", hover(f"GPU idle {us(stop - start)}"), x=f"{x(start):.1f}", y=y_gpu,
                        width=f"{max((stop - start) * scale, 1):.1f}", height=lane, fill=ROLE["idle"],
                        **{"class": "attnprof-idle"}))
    small, centres = [], []
    for i, op in enumerate(fwd.ops, 1):
        lx, gx = x(op.launch_start_us), x(op.start_us)
        gw = max(op.duration_us * scale, 2)
        parts.append(el("line", x1=f"{lx:.1f}", y1=y_launch + launch_h, x2=f"{gx:.1f}", y2=y_gpu, stroke=CONNECTOR,
                        stroke_dasharray="2,2", **{"class": "attnprof-connector"})
                     + el("rect", hover(f"{op.launch}: launches op {i}"), x=f"{lx:.1f}", y=y_launch, width=2,
                          height=launch_h, fill=ROLE["launch"])
                     + el("rect", "" if narrow else hover(op_title(i, op)), x=f"{gx:.1f}", y=y_gpu,
                          width=f"{gw - 1 if gw > 4 else gw:.1f}", height=lane, fill=ROLE[op.kind],
                          **{"class": "attnprof-gpu-op"}))  # a hairline between neighbours
        inside = _fit(f"{i} {kernel_names.printed(op.name)}", gw - 6) or (str(i) if gw >= len(str(i)) * CHAR_W + 6 else None)
        if inside:
            parts.append(el("text", escape(inside), x=f"{gx + 3:.1f}", y=f"{y_gpu + lane / 2 + 4:.0f}", fill="white"))
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
    for i, (op, lines, (col, top)) in enumerate(zip(fwd.ops, legend, row_tops), 1):
        # a row at least a finger tall; a tap on it names its op as a tap on the bar does
        lx, ly, tall = legend_left + col * column_w, legend_y + top, legend_row + LINE * (len(lines) - 1)
        number = el("tspan", str(i), font_weight="bold")
        text_x = lx + 16 + (len(str(i)) + 1) * CHAR_W
        name = escape(lines[0]) if len(lines) == 1 else "".join(
            el("tspan", escape(line), x=f"{text_x:.1f}", dy=0 if k == 0 else LINE) for k, line in enumerate(lines))
        parts.append(el("g", el("rect", x=f"{lx:.1f}", y=ly - legend_row / 2 - 4, width=f"{column_w - 4:.1f}",
                                height=tall, fill="transparent")
                        + el("rect", x=f"{lx:.1f}", y=ly - 10, width=10, height=10, fill=ROLE[op.kind])
                        + el("text", f"{number} {name}", x=f"{lx + 16:.1f}", y=ly),
                        **{"class": "attnprof-legend", "data-op": i}))
    parts.append("</svg>")
    return "\n".join(parts)


RANK_LANES = {"attention": (SERIES[0], "attention kernel"), "other": (SERIES[1], "other compute (merge, copies)"),
              "nccl": (SERIES[2], "NCCL kernel")}


def ranks_timeline(summary, step, width: int = 880, axis_us: float = 0) -> str:
    """The ranks figure of a step (rank_forwards) at `width` px and at NARROW px for a phone (the stylesheet shows
    one); its time axis spans at least `axis_us`, a compared figure's step, so that the two share one scale."""
    return ('<div class="attnprof-trace attnprof-ranks" data-search-exclude="">'
            + _ranks_timeline(summary, step, width, "attnprof-wide", axis_us)
            + "\n" + _ranks_timeline(summary, step, NARROW, "attnprof-narrow", axis_us) + "</div>")


def rank_forwards(summary, trace: dict):
    """The step a ranks figure draws: each rank's same forward (rank 0's median), the first annotation's start on
    the trace's clock, and the step's span in µs from there to the last GPU op."""
    per_rank = [traces.forwards(traces.rank_trace(trace, r["rank"]), summary["label"]) for r in summary["ranks"]]
    pick = per_rank[0].index(traces.median_forward(per_rank[0]))
    fwds = [f[pick] for f in per_rank]
    t0 = min(f.start_ts for f in fwds)
    return fwds, t0, max(f.start_ts - t0 + max(o.start_us + o.duration_us for o in f.ops) for f in fwds)


def rank_idle_shares(step) -> list[float]:
    """Per rank, the share of a step (rank_forwards) in which its GPU ran none of its ops (the empty stretches of
    its lanes)."""
    fwds, _, end = step
    return [1 - traces.gaps(f.ops).busy_us / end for f in fwds]


def _ranks_timeline(summary, step, width: int, variant: str, axis_us: float = 0) -> str:
    """One forward on every rank, on the trace's one clock: a compute and an NCCL lane per rank, each rank's
    same step (rank 0's median). The legend is stacked under the lanes at the left, where a phone shows it."""
    fwds, t0, end = step
    left, right, row_h = 122, 12, 20
    axis = max(end, axis_us)
    scale = (width - left - right) / axis
    x = lambda t: left + t * scale
    balance = "" if summary["load_balance"] else ", load balancer off"
    heading = wrap(f'One forward on each of {len(fwds)} ranks, S={summary["shape"][2]:,}, rotation '
                   f'{summary["rotate"]}{balance},', width - 4 - right, CHAR_W * 1.08)
    sub = wrap("from the first rank's annotation to the last GPU op", width - 4 - right)  # the axis gives the span
    top = 48 + 16 * (len(heading) + len(sub) - 2)
    lanes_bottom = top + len(fwds) * 2 * (row_h + 6)
    legend_y = lanes_bottom + 54
    height = legend_y + 18 * len(RANK_LANES)
    parts = [header(width, height, f'{summary["record"]}: ranks on one timeline', font_size=TRACE_FONT,
                    css_class=variant),
             _lines(heading, 4, 16, font_weight="bold") + _lines(sub, 4, 16 + 16 * len(heading))]
    parts += _time_axis(axis, width, x, top - 4, lanes_bottom, lanes_bottom + 16,
                        "time since the first rank's forward began", width - right)
    for k, (r, f) in enumerate(zip(summary["ranks"], fwds)):
        y_comp = top + k * 2 * (row_h + 6)
        y_comm = y_comp + row_h + 4
        parts.append(el("text", f'rank {r["rank"]} compute', x=4, y=y_comp + 14, font_weight="bold")
                     + el("text", f'rank {r["rank"]} NCCL', x=4, y=y_comm + 14))
        offset = f.start_ts - t0
        for op in f.ops:
            if op.kind != "kernel":
                continue
            comm = traces.is_communication(op.name)
            lane = "nccl" if comm else "attention" if kernel_names.fingerprint([op.name]) != "math" else "other"
            parts.append(el("rect", hover(f"{kernel_names.label(op.name)} {us(op.duration_us)}"),
                            x=f"{x(offset + op.start_us):.1f}", y=y_comm if comm else y_comp,
                            width=f"{max(op.duration_us * scale, 1.0):.1f}", height=row_h - 2, fill=RANK_LANES[lane][0],
                            **{"class": "attnprof-gpu-op"}))
    for i, (color, label) in enumerate(RANK_LANES.values()):
        parts.append(el("rect", x=4, y=legend_y + 18 * i - 10, width=12, height=12, fill=color)
                     + el("text", label, x=22, y=legend_y + 18 * i))
    parts.append("</svg>")
    return "\n".join(parts)


# ---- charts of the measurement runs --------------------------------------------------------------

@dataclass(frozen=True)
class Frame:
    """How a chart is drawn: wide, naming each series at its line's end, or narrow (a phone's), numbering it
    there and in the legend."""
    width: int
    height: int  # to the bottom of the x axis's label; the legend comes under it
    left: int
    right: int  # room right of the plot before the series' names or numbers
    top: int
    bottom: int
    font: int = 12
    row: int = 24  # a legend row's height: a tap target on a phone
    names: bool = True

    @property
    def char_w(self) -> float:  # a generous average glyph width of the sans-serif at this size
        return self.font * 0.567


CHART = Frame(960, 400, 70, 12, 30, 50)
CHART_NARROW = Frame(NARROW, 330, 62, 6, 30, 50, row=26, names=False)
LEGEND_X = 34  # the legend sits under the plot, from the left: on a phone it is on screen
PATH_BY_TITLE = {stage.title: key for key, stage in STAGES.items()}


def series_color(name: str, i: int) -> str:
    """A series named by a stage's title takes that path's colour; any other takes the i-th of the palette."""
    key = PATH_BY_TITLE.get(name)
    return PATH_COLOR[key] if key in PATH_COLOR else SERIES[i % len(SERIES)]


def _scale(lo, hi, log, a, b):
    if log:
        lo, hi = math.log10(lo), math.log10(hi)
    span = (hi - lo) or 1.0
    return lambda v: a + ((math.log10(v) if log else v) - lo) / span * (b - a)


def _ticks(lo, hi, log, most: int = 8):
    if log:  # 1, 2, 5 a decade; finer where the axis spans too little of one for three ticks
        for ms in ((1, 2, 5), (1, 1.25, 1.5, 2, 2.5, 3, 4, 5, 6, 8)):
            ticks = [round(10 ** e * m, 10) for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
                     for m in ms if lo <= 10 ** e * m <= hi]
            if len(ticks) >= 3:
                break
        return ticks
    step = 10 ** math.floor(math.log10((hi - lo) or 1)) / 2
    while (hi - lo) / step > most:
        step *= 2
    return [i * step for i in range(math.ceil(lo / step), math.floor(hi / step) + 1)]


def byte_ticks(lo: float, hi: float) -> list[int]:
    """Powers of two between lo and hi bytes, every second or fourth one when there would be more than 8."""
    ks = [k for k in range(math.ceil(math.log2(lo)), math.floor(math.log2(hi)) + 1)]
    stride = 1
    while len([k for k in ks if k % stride == 0]) > 8:
        stride *= 2
    return [2 ** k for k in ks if k % stride == 0]


def size_tick(nbytes: float) -> str:
    """A tick on a memory axis: 64 MiB, 1 GiB, 16 GiB."""
    for unit, scale in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:g} {unit}"
    return f"{nbytes:g} B"


def _fmt(v):
    return f"{v:g}" if v < 1e4 else f"{v / 1024:g}k" if v % 1024 == 0 else f"{v:,.0f}"


def _thinned(ticks: list, fx, room: float) -> list:
    """Every tick, or every second (fourth, ...) one where their labels would be closer than `room` px."""
    stride = 1
    while any(fx(b) - fx(a) < room for a, b in zip(ticks[::stride], ticks[stride::stride])):
        stride *= 2
    return ticks[::stride]


def overlapping(drawn: dict[str, list[tuple[float, float]]], tolerance: float = 0.006) -> list[list[str]]:
    """Groups (two or more) of series that draw one line: every point within `tolerance` of the other's, in
    fractions of the plot's width and height (about 2 px of a wide chart's), so a phone's chart groups the same."""
    groups: list[list[str]] = []
    for name, pts in drawn.items():
        if len(pts) < 2:
            continue
        for g in groups:
            first = drawn[g[0]]
            if len(first) == len(pts) and all(math.dist(a, b) <= tolerance for a, b in zip(first, pts)):
                g.append(name)
                break
        else:
            groups.append([name])
    return [g for g in groups if len(g) > 1]


def _crosses(box, drawn, margin: float = 3) -> bool:
    """Whether any drawn series (segments and markers) passes within `margin` px of box (x0, y0, x1, y1)."""
    x0, y0, x1, y1 = box[0] - margin, box[1] - margin, box[2] + margin, box[3] + margin
    inside = lambda x, y: x0 <= x <= x1 and y0 <= y <= y1
    for pts in drawn.values():
        if any(inside(*p) for p in pts):
            return True
        for (ax, ay), (bx, by) in zip(pts, pts[1:]):
            # a box the segment's extent misses (0.001 px: rounding) holds none of its points tried below
            if (min(ax, bx) > x1 + 0.001 or max(ax, bx) < x0 - 0.001
                    or min(ay, by) > y1 + 0.001 or max(ay, by) < y0 - 0.001):
                continue
            n = int(max(abs(bx - ax), abs(by - ay)) / 2) + 1
            if any(inside(ax + (bx - ax) * j / n, ay + (by - ay) * j / n) for j in range(n + 1)):
                return True
    return False


def _reference_label(name: str, y: float, drawn, f: Frame, plot_right: float) -> str:
    """A reference line's label at height y: at the first place above or below it that no series crosses,
    on the page's colour; none where every place is crossed (the legend names the line)."""
    w = len(name) * f.char_w + 6
    bottom = f.height - f.bottom
    places = [(x, top) for x in range(f.left + 4, int(plot_right - 4 - w) + 1, 2) for top in (y - 17, y + 3)
              if f.top <= top and top + 14 <= bottom] or [(f.left + 4, y - 17)]  # from the left, above then below
    clear = lambda margin: next((p for p in places if not _crosses((p[0], p[1], p[0] + w, p[1] + 14), drawn, margin)), None)
    spot = next(filter(None, map(clear, (8, 6, 4, 3.5))), None)  # the clearest place there is
    if spot is None or spot[0] + w > plot_right:
        return ""
    x, top = spot
    return (el("rect", x=f"{x:.1f}", y=f"{top:.1f}", width=f"{w:.1f}", height=15, rx=2,
               style=f"fill: {BACKGROUND}; fill-opacity: .85")
            + el("text", escape(name), x=f"{x + 3:.1f}", y=f"{top + 12:.1f}", style=HALO))


def spread(ys: list[float], gap: float, lo: float, hi: float) -> list[float]:
    """Heights ys (sorted) moved apart to at least `gap` from each other, kept within [lo, hi] where
    they fit: each pushed down clear of the one above it, then all back up from the bottom."""
    out: list[float] = []
    for y in ys:
        out.append(max(y, out[-1] + gap) if out else max(y, lo))
    overflow = out[-1] - hi if out else 0
    if overflow > 0:
        out = [y - overflow for y in out]
    for i in range(len(out) - 2, -1, -1):
        out[i] = min(out[i], out[i + 1] - gap)
    return out


def _point_labels(points: list[tuple[str, float, float, str]], f: Frame, plot_right: float, top: float) -> list[str]:
    """Names beside single points (name, x, y, colour), on the side towards the plot's middle, spread apart
    where points sit close (none above `top`), each with a leader line from its point."""
    out, gap = [], f.font + 2
    mid = (f.left + plot_right) / 2
    clusters: dict[tuple[bool, int], list] = {}
    for p in points:
        clusters.setdefault((p[1] > mid, round(p[1] / 40)), []).append(p)
    for (left_side, _), members in clusters.items():
        members.sort(key=lambda p: p[2])
        ys = spread([p[2] for p in members], gap, top, f.height - f.bottom - 4)
        for (name, x, y, color), ly in zip(members, ys):
            lx = x - 28 if left_side else x + 28
            out.append(el("path", d=f"M{x + (-4 if left_side else 4):.1f},{y:.1f} L{lx + (2 if left_side else -2):.1f},{ly:.1f}",
                          fill="none", stroke=color)
                       + el("text", escape(name), x=f"{lx:.1f}", y=f"{ly + 4:.1f}", text_anchor="end" if left_side else "start",
                            style=HALO))
    return out


def _end_labels(ends: list[tuple[str, float, float, str]], f: Frame, plot_right: float) -> list[str]:
    """Each line's name (or number) right of the plot (name, x, y, colour), spread apart where lines end
    close, with a leader from the end; a line that stops short of the right edge has none (it would read as the
    line going on), its name at its height."""
    out = []
    ends = sorted(ends, key=lambda e: e[2])
    ys = spread([e[2] for e in ends], f.font + 2, f.top, f.height - f.bottom)
    lx = plot_right + 16
    for (name, x, y, color), ly in zip(ends, ys):
        leader = "" if plot_right - x > 8 else el(
            "path", d=f"M{x + 4:.1f},{y:.1f} L{plot_right + 2:.1f},{y:.1f} L{lx - 3:.1f},{ly:.1f}", fill="none",
            stroke=color, stroke_width=1.5)
        out.append(leader + el("text", escape(name), x=f"{lx:.1f}", y=f"{ly + 4:.1f}", font_weight="bold"))
    return out


def line_chart(series: dict, x_label: str, y_label: str, title: str, log_x=True, log_y=False,
               hlines: dict | None = None, x_ticks=None, y_unit: str = "", colors: dict | None = None,
               label_points: bool = False, labels_below: float | None = None, frame: Frame = CHART,
               tips: dict | None = None, x_range: tuple[float, float] | None = None) -> str:
    """series: {name: [(x, y), ...]}, points with y None skipped (e.g. out of memory). `colors` colours
    series no stage's title names; y_unit "bytes" ticks in MiB and GiB. Each line is named (or numbered) at
    its end, so no series is told by colour alone; the legend sits under the plot, one entry a row, where a
    phone shows it; series drawing one line are striped and said to overlap. `label_points` names each
    single point beside it, below `labels_below` (a roof's height) where given. With `tips` ({name: a text
    a point}), each series is an unjoined scatter, each point hovering its own text. `x_range` fixes the x axis."""
    f = frame
    fmt_y = size_tick if y_unit == "bytes" else _fmt
    pts = [(x, y) for s in series.values() for x, y in s if y is not None]
    xs, ys = [p[0] for p in pts], [p[1] for p in pts] + list((hlines or {}).values())
    x0, x1 = x_range or (min(xs), max(xs))
    y0, y1 = (min(ys) / 1.5, max(ys) * 1.5) if log_y else (0, max(ys) * 1.1)
    number = {name: str(i) for i, name in enumerate(series, 1)}
    good = {name: [(x, y) for x, y in points if y is not None] for name, points in series.items()}
    lines = [name for name in series if len(good[name]) > 1 and not tips]
    mark = (lambda name: name) if f.names else number.get
    gutter = 18 + max([len(mark(n)) * f.char_w for n in lines], default=0) if lines else 0
    plot_right = min(f.width - f.right - gutter, f.width - len(_fmt(x1)) * f.char_w / 2 - 2)  # the last tick whole
    bottom = f.height - f.bottom
    y_tick_values = byte_ticks(y0, y1) if y_unit == "bytes" else _ticks(y0, y1, log_y)
    left = max(f.left, 26 + max(len(fmt_y(t)) for t in y_tick_values) * f.char_w)  # the y axis's name, then its ticks
    f = replace(f, left=round(left))
    fx, fy = _scale(x0, x1, log_x, f.left, plot_right), _scale(y0, y1, log_y, bottom, f.top)
    color = {name: (colors or {}).get(name) or series_color(name, i) for i, name in enumerate(series)}
    drawn = {name: [(fx(x), fy(y)) for x, y in g] for name, g in good.items()}
    groups = overlapping({name: [((x - f.left) / (plot_right - f.left), (y - f.top) / (bottom - f.top)) for x, y in p]
                          for name, p in drawn.items()})
    group_of = {name: g for g in groups for name in g}
    order = []  # the legend's order: the series', each overlapping group together at its first member
    for name in series:
        if name not in order:
            order += group_of.get(name, [name])
    heading = wrap(title, f.width - 8, f.char_w * 1.08) if not f.names else [title]
    shift = 16 * (len(heading) - 1)  # a heading of several lines moves the whole drawing down
    axis_lines = wrap(x_label, plot_right - f.left + 40, f.char_w)
    legend_top = f.height + 16 * (len(axis_lines) - 1) + 4
    height = legend_top + f.row * (len(hlines or {}) + len(order) + len(groups)) + shift
    out = [header(f.width, height, title, font_size=f.font, css_class="attnprof-wide" if f.names else "attnprof-narrow"),
           _lines(heading, 4 if not f.names else f.left, 16, font_weight="bold"),
           f'<g transform="translate(0 {shift})">' if shift else "",
           el("rect", x=f.left, y=f.top, width=f"{plot_right - f.left:.1f}", height=bottom - f.top, fill="none", stroke=FRAME)]
    x_tick_values = x_ticks or (sorted(set(xs)) if log_x else _ticks(x0, x1, log_x, 8 if f.names else 5))
    widest = max(len(_fmt(t)) for t in x_tick_values) * f.char_w
    for t in _thinned(x_tick_values, fx, widest + 8):
        out.append(el("text", _fmt(t), x=f"{fx(t):.1f}", y=bottom + f.font + 3, text_anchor="middle"))
    for t in y_tick_values:
        out.append(el("line", x1=f.left, y1=f"{fy(t):.1f}", x2=f"{plot_right:.1f}", y2=f"{fy(t):.1f}", stroke=GRID)
                   + el("text", fmt_y(t), x=f.left - 4, y=f"{fy(t) + 4:.1f}", text_anchor="end"))
    mid_y = (f.top + bottom) / 2
    out.append(_lines(axis_lines, (f.left + plot_right) / 2, f.height - 12, text_anchor="middle")
               + el("text", escape(y_label), x=14, y=mid_y, transform=f"rotate(-90 14 {mid_y})", text_anchor="middle"))
    for name, y in (hlines or {}).items():
        out.append(el("line", x1=f.left, y1=f"{fy(y):.1f}", x2=f"{plot_right:.1f}", y2=f"{fy(y):.1f}", stroke=INK,
                      stroke_dasharray="6,3"))
    dash = 10
    for name, points in series.items():
        if name in lines:
            path = " ".join(f"{'M' if j == 0 else 'L'}{x:.1f},{y:.1f}" for j, (x, y) in enumerate(drawn[name]))
            stripes = {}
            if name in group_of:  # one stripe of each colour in turn along the shared line
                g = group_of[name]
                stripes = {"stroke_dasharray": f"{dash},{dash * (len(g) - 1)}", "stroke_dashoffset": dash * g.index(name)}
            out.append(el("path", d=path, fill="none", stroke=color[name], stroke_width=2.5 if stripes else 2, **stripes))
        marked = zip(good[name], drawn[name], (tips or {}).get(name) or [None] * len(good[name]))
        for (x, y), (px, py), said in marked if len(good[name]) <= 20 or tips else []:  # a dense curve (the roof): no markers
            tip = hover(said or f"{name}: {_fmt(x)} → {fmt_y(y) if y_unit else f'{y:.3g}'}")
            r = 3.5 if len(good[name]) == 1 else 3
            if f.names:
                out.append(el("circle", tip, cx=f"{px:.1f}", cy=f"{py:.1f}", r=r, fill=color[name]))
            else:  # a finger's width to tap (the stylesheet's wide transparent stroke); names.js copies in the
                # wide drawing's hover text, point for point, rather than the page sending it twice
                out.append(el("circle", cx=f"{px:.1f}", cy=f"{py:.1f}", r=r, fill=color[name], **{"class": "attnprof-point"}))
    for name, y in (hlines or {}).items():  # labels last, on the page's colour, where no series crosses them
        out.append(_reference_label(name, fy(y), drawn, f, plot_right))
    if label_points:
        top = f.top + f.font if labels_below is None else fy(labels_below) + f.font + 4
        out += _point_labels([(mark(name), *drawn[name][0], color[name]) for name in series if len(drawn[name]) == 1],
                             f, plot_right, top)
    out += _end_labels([(mark(name), *drawn[name][-1], color[name]) for name in lines], f, plot_right)
    for name in lines:  # where a line stops because the next point ran out of memory, the chart says so there
        if len(good[name]) < len(series[name]):
            missing = next(x for x, y in series[name] if y is None and x > good[name][-1][0])
            out.append(el("text", "OOM", x=f"{fx(missing):.1f}", y=f"{drawn[name][-1][1] + 4:.1f}", fill=color[name],
                          font_weight="bold", text_anchor="middle"))
    row = legend_top + f.row / 2
    def legend(body: str) -> str:  # one row of the legend, f.row apart: as far as tap targets are
        return el("g", body, **{"class": "attnprof-legend"})
    for name in hlines or {}:
        out.append(legend(el("line", x1=LEGEND_X, y1=row, x2=LEGEND_X + 18, y2=row, stroke=INK, stroke_dasharray="6,3")
                          + el("text", escape(name), x=LEGEND_X + 26, y=row + 4)))
        row += f.row
    for name in order:
        oom = "" if len(good[name]) == len(series[name]) else " (OOM past the last point)"
        n = len(good[name])
        key = "" if f.names or tips else el("tspan", number[name], font_weight="bold") + " "  # a scatter marks no number
        x = 4 if not f.names else LEGEND_X
        out.append(legend(("" if n == 1 or tips else el("line", x1=x, y1=row, x2=x + 18, y2=row, stroke=color[name],
                                                         stroke_width=2.5))
                          + ("" if n > 20 and not tips else el("circle", cx=x + 9, cy=row, r=3.5, fill=color[name]))
                          + el("text", key + escape(name) + oom, x=x + 26, y=row + 4)))
        row += f.row
        g = group_of.get(name)
        if g and name == g[-1]:
            out.append(legend(el("text", f"↑ these {count(len(g))} overlap: one striped line",
                                 x=x + 26, y=row + 4, font_style="italic", **MUTED_TEXT)))
            row += f.row
    out.append("</g>" if shift else "")
    out.append("</svg>")
    return "\n".join(o for o in out if o)


def chart(draw) -> str:
    """A chart drawn twice, `draw(frame)`: wide, and narrow for a phone (the stylesheet shows one)."""
    return '<div class="attnprof-figure" data-search-exclude="">' + draw(CHART) + "\n" + draw(CHART_NARROW) + "</div>"


def roofline(peak_tflops: float, bandwidth_gbs: float, points: list[tuple[str, float, float]], title: str,
             frame: Frame = CHART) -> str:
    """Log-log roofline: attainable TFLOP/s = min(peak, bandwidth × intensity); points (name, FLOP/byte, TFLOP/s).
    The roof is drawn in the page's colour, which no path has; each point is named beside it."""
    ridge = peak_tflops * 1e12 / (bandwidth_gbs * 1e9)
    xs = [p[1] for p in points] + [ridge]
    x0, x1 = min(xs) / 3, max(xs) * 3
    # sampled densely (no markers), with the ridge itself, so that the roof turns at one corner
    at = sorted([x0 * (x1 / x0) ** (i / 40) for i in range(41)] + [ridge])
    roof = [(x, min(peak_tflops, bandwidth_gbs * x / 1e3)) for x in at]
    series = {"roof (measured ceilings)": roof}
    series.update({name: [(x, y)] for name, x, y in points})
    return line_chart(series, "arithmetic intensity (FLOP per byte of device memory traffic)", "TFLOP/s", title,
                      log_x=True, log_y=True, x_ticks=[10 ** e for e in range(-1, 6) if x0 <= 10 ** e <= x1],
                      colors={"roof (measured ceilings)": INK}, label_points=True, labels_below=peak_tflops,
                      frame=frame)
