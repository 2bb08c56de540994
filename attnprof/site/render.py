"""Render captures as text (for the terminal), Markdown tables and SVG pictures (for the site).

Everything here reads committed captures only; nothing needs a GPU.
"""
from __future__ import annotations

import html
from difflib import SequenceMatcher

from .. import names, occupancy
from .. import trace as trace_mod

KIND_LABEL = {"kernel": "kernel", "memcpy": "Memcpy", "memset": "Memset"}
UNIT_LABEL = {"cuda cores": "CUDA cores", "tensor cores": "Tensor Cores", "none": "none", "unknown": "unknown"}
LAUNCH_API = {"cu": "CUDA driver API", "cuda": "CUDA runtime API"}


def md_launch(api: str) -> str:
    """A launch call as code, with which API it belongs to as its tooltip."""
    which = LAUNCH_API["cuda" if api.startswith("cuda") else "cu"]
    return f'<code title="{which}">{md_cell(api)}</code>'


# ---- plain helpers -------------------------------------------------------------------------------

def us(x: float | None) -> str:
    """A duration in microseconds, with a unit a reader can compare across rows."""
    if x is None:
        return "—"
    return f"{x / 1000:.3f} ms" if x >= 1000 else f"{x:.1f} µs"


def md_cell(text) -> str:
    """Escape a value for a Markdown table cell that also survives as HTML (kernel names hold < > | &)."""
    return html.escape(str(text), quote=False).replace("|", "&#124;").replace("\n", " ")


def md_code(text) -> str:
    """A kernel name as inline code inside a table cell, escaped for HTML."""
    return f"<code>{md_cell(text)}</code>"


def md_kernel(name: str) -> str:
    """A kernel's short label as code, its full name in the tooltip (both escaped)."""
    return f'<code title="{html.escape(name, quote=True)}">{md_cell(names.label(name))}</code>'


def md_table(headers, rows, align=None) -> str:
    align = align or ["---"] * len(headers)
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def text_table(headers, rows) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([fmt.format(*headers), fmt.format(*("-" * w for w in widths))]
                     + [fmt.format(*map(str, r)) for r in rows])


def short_name(name: str, limit: int = 60) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


# ---- what `show` prints --------------------------------------------------------------------------

def op_rows(summary):
    return [(i, KIND_LABEL[op["kind"]], us(op["duration_us"]), op["name"]) for i, op in enumerate(summary["ops"], 1)]


def key_average_rows(summary):
    return [(r["name"], r["calls"], us(r["self_cpu_us"]), us(r["cpu_total_us"]),
             us(r["self_device_us"]), us(r["device_total_us"])) for r in summary["key_averages"]]


KEY_AVG_HEADERS = ["Name", "Calls", "Self CPU", "CPU total", "Self CUDA", "CUDA total"]


def show_text(summary) -> str:
    head = f"{summary['stage']} on {summary['device']} ({summary['capability']}), shape {summary['shape']}, {summary['dtype']}"
    if "unavailable" in summary:
        return f"{head}\nnot available on this machine: {summary['unavailable']}"
    return "\n".join([
        head,
        f"{summary['ops_per_forward']} device ops per forward; forward device time {us(summary['forward_device_us'])} "
        f"(profiler), {us(summary['event_median_us'])} (CUDA-event median); rel. error {summary['rel_err']:.2e}",
        "", "Per-forward device ops, in launch order:",
        text_table(["#", "kind", "time", "name"], [(i, k, t, short_name(n, 100)) for i, k, t, n in op_rows(summary)]),
        "", f"key_averages over {len(summary['ops_per_forward_each'])} profiled forwards, by self CUDA time:",
        text_table(KEY_AVG_HEADERS, [(short_name(r[0], 50), *r[1:]) for r in key_average_rows(summary)]),
    ])


# ---- Markdown pieces for the site ---------------------------------------------------------------

def environment_md(record: dict, verb: str, detail: str) -> str:
    """The stamp of a capture or run: which GPU and software made it, and when."""
    r = record
    return (f'!!! info "{verb} on {md_cell(r["device"])} ({r["capability"]})"\n'
            f'    {r["date"]} · driver {r["driver"]} · torch {r["torch"]} · CUDA {r["cuda"]} · cuDNN {r["cudnn"]} · '
            f'Triton {r["triton"]} · {detail}')


def stamp_md(summary) -> str:
    s = summary
    missing = f"\n\n{unavailable_md(s)}" if "unavailable" in s else ""
    detail = f'shape {tuple(s["shape"])} {s["dtype"]}, causal · snippet hash `{s["source_hash"]}`'
    return environment_md(s, "Captured", detail) + missing


def unavailable_md(summary) -> str:
    return f'!!! warning "Not available on this machine"\n    {md_cell(summary["unavailable"])}'


def key_averages_md(summary) -> str:
    rows = [(md_code(short_name(r[0], 70)), *r[1:]) for r in key_average_rows(summary)]
    return md_table(KEY_AVG_HEADERS, rows, ["---", "---:", "---:", "---:", "---:", "---:"])


def launching_path(summary, op) -> list[str]:
    """The aten ops enclosing a device op's launch, outermost first (e.g. masked_fill > clone > copy_)."""
    t = op["launch_start_us"]
    return [c["name"] for c in summary["cpu_ops"] if c["start_us"] <= t <= c["start_us"] + c["duration_us"]]


def common_prefix(paths: list[list[str]]) -> list[str]:
    """The enclosing ops every path shares (e.g. scaled_dot_product_attention > _scaled_dot_product_attention_math)."""
    prefix = []
    for names_at in zip(*paths):
        if len(set(names_at)) != 1:
            break
        prefix.append(names_at[0])
    return prefix if all(len(p) > len(prefix) for p in paths) else prefix[:-1]


def ops_md(summary, mark: str | None = None) -> str:
    """The per-forward device ops in launch order; rows whose kind or name contains `mark` are flagged."""
    paths = [[n.removeprefix("aten::") for n in launching_path(summary, op)] for op in summary["ops"]]
    shared = common_prefix(paths)
    rows = []
    for i, (op, path) in enumerate(zip(summary["ops"], paths), 1):
        flagged = mark and (mark.lower() in op["kind"].lower() or mark.lower() in op["name"].lower())
        kind = KIND_LABEL[op["kind"]]
        info = names.explain(op["name"])
        rows.append((i, f"**{kind}** ⟵" if flagged else kind, us(op["duration_us"]), md_kernel(op["name"]),
                     info["library"], UNIT_LABEL[info["math_unit"]],
                     md_cell(" › ".join(path[len(shared):])).replace("_", "&#95;") or "—",  # _to_copy: no emphasis
                     md_launch(op["launch"])))
    where = (f" Every op is launched inside <code>{md_cell(' › '.join(shared))}</code>; *launched from* shows "
             f"the ops below that." if shared else "")
    total = (f"\n\n{summary['ops_per_forward']} device ops in one forward, {us(summary['forward_device_us'])} of device "
             f"time (sum of their durations, profiler); CUDA-event median of the whole forward "
             f"{us(summary['event_median_us'])} over {summary['settings']['event_reps']} runs. Hover a kernel for its "
             f"full name.{where}")
    return md_table(["#", "kind", "time", "kernel", "library", "math unit", "launched from", "launch API"],
                    rows, ["---:", "---", "---:", "---", "---", "---", "---", "---"]) + total


def ops_diff(a, b):
    """Edit script between two op lists, compared by (kind, name): what b drops from a and adds."""
    key = lambda s: [(op["kind"], op["name"]) for op in s["ops"]]
    ka, kb = key(a), key(b)
    removed, added = [], []
    for tag, i1, i2, j1, j2 in SequenceMatcher(a=ka, b=kb, autojunk=False).get_opcodes():
        if tag in ("delete", "replace"):
            removed += [(i + 1, a["ops"][i]) for i in range(i1, i2)]
        if tag in ("insert", "replace"):
            added += [(j + 1, b["ops"][j]) for j in range(j1, j2)]
    return removed, added


def ops_diff_md(a, b) -> str:
    removed, added = ops_diff(a, b)
    rows = [("−", f"#{i} in {a['stage']}", KIND_LABEL[op["kind"]], us(op["duration_us"]), md_kernel(op["name"]))
            for i, op in removed]
    rows += [("+", f"#{i} in {b['stage']}", KIND_LABEL[op["kind"]], us(op["duration_us"]), md_kernel(op["name"]))
             for i, op in added]
    if not rows:
        return f"The two op lists are the same: {a['ops_per_forward']} ops each."
    saved = a["forward_device_us"] - b["forward_device_us"]
    return (md_table(["", "where", "kind", "time", "name"], rows) +
            f"\n\n{a['stage']}: {a['ops_per_forward']} ops, {us(a['forward_device_us'])}; "
            f"{b['stage']}: {b['ops_per_forward']} ops, {us(b['forward_device_us'])} "
            f"(device time {'saved' if saved >= 0 else 'added'}: {us(abs(saved))}).")


# ---- the trace picture ---------------------------------------------------------------------------

PALETTE = {"kernel": "#4e79a7", "memcpy": "#e15759", "memset": "#f28e2b", "cpu": "#9c755f", "launch": "#59a14f"}


def nice_step(span_us: float) -> float:
    """A round tick interval giving 4 to 10 ticks over the span."""
    for step in (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 5000, 10000):
        if span_us / step <= 10:
            return step
    return span_us / 10


def trace_svg(summary, trace: dict, width: int = 960) -> str:
    """One forward as an SVG timeline: CPU ops (nested) above their launches, GPU ops below.

    Ops are numbered as in the op list; the legend under the lanes names them.
    """
    fwd = trace_mod.median_forward(trace_mod.forwards(trace, summary["label"]))
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
    esc = lambda s: html.escape(str(s), quote=True)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" '
             f'font-family="sans-serif" font-size="11" role="img" aria-label="{esc(summary["stage"])} forward trace">',
             f'<text x="{left}" y="14">one forward of {esc(summary["stage"])}: {us(end)} from the start of the '
             f'annotation to the end of its last GPU op</text>']
    step = nice_step(end)
    for i in range(int(end // step) + 1):  # time axis under the GPU lane
        tx = x(i * step)
        parts.append(f'<line x1="{tx:.1f}" y1="{y_cpu - 4}" x2="{tx:.1f}" y2="{y_gpu + row_h + 2}" stroke="#eee"/>'
                     f'<text x="{tx:.1f}" y="{y_gpu - 6}" fill="#888" font-size="9">{us(i * step)}</text>')
    for label, y in (("CPU", y_cpu), ("launch", y_launch), ("GPU", y_gpu)):
        parts.append(f'<text x="4" y="{y + 13}" font-weight="bold">{label}</text>')
    parts.append(f'<rect x="{x(0):.1f}" y="{y_cpu}" width="{fwd.cpu_us * scale:.1f}" height="{row_h - 2}" '
                 f'fill="#bab0ac"><title>{esc(summary["label"])} {us(fwd.cpu_us)}</title></rect>'
                 f'<text x="{x(0) + 3:.1f}" y="{y_cpu + 12}">{esc(summary["label"])}</text>')
    for op in cpu:
        y = y_cpu + op.depth * row_h
        w = max(op.duration_us * scale, 1)
        parts.append(f'<rect x="{x(op.start_us):.1f}" y="{y}" width="{w:.1f}" height="{row_h - 2}" '
                     f'fill="{PALETTE["cpu"]}" fill-opacity="{1 - 0.2 * op.depth:.1f}">'
                     f'<title>{esc(op.name)} {us(op.duration_us)}</title></rect>')
        if w > 7 * len(op.name.split("::")[-1]):
            parts.append(f'<text x="{x(op.start_us) + 2:.1f}" y="{y + 12}" fill="white">{esc(op.name.split("::")[-1])}</text>')
    for i, op in enumerate(fwd.ops, 1):
        lx, gx = x(op.launch_start_us), x(op.start_us)
        gw = max(op.duration_us * scale, 1.5)
        parts.append(f'<line x1="{lx:.1f}" y1="{y_launch + row_h - 2}" x2="{gx:.1f}" y2="{y_gpu}" stroke="#999" '
                     f'stroke-dasharray="2,2"/>'
                     f'<rect x="{lx:.1f}" y="{y_launch}" width="2" height="{row_h - 2}" fill="{PALETTE["launch"]}">'
                     f'<title>{esc(op.launch)}</title></rect>'
                     f'<rect x="{gx:.1f}" y="{y_gpu}" width="{gw:.1f}" height="{row_h - 2}" fill="{PALETTE[op.kind]}">'
                     f'<title>{i}. {esc(op.name)} {us(op.duration_us)}</title></rect>'
                     f'<text x="{gx + gw / 2:.1f}" y="{y_gpu + row_h + 12}" text-anchor="middle">{i}</text>')
        parts.append(f'<text x="{left}" y="{legend_y + 16 * (i - 1)}"><tspan font-weight="bold">{i}</tspan> '
                     f'{KIND_LABEL[op.kind]} · {us(op.duration_us)} · {esc(names.label(op.name))}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


# ---- footprint, CPU side -------------------------------------------------------------------------

def footprint_rows(summary, props: dict):
    """Per kernel: grid, block, registers, shared memory, and theoretical occupancy from `props`."""
    rows = []
    for i, op in enumerate(summary["ops"], 1):
        if op["kind"] != "kernel":
            continue
        threads = op["block"][0] * op["block"][1] * op["block"][2]
        occ = occupancy.theoretical(op["registers"], threads, op["shared_memory"], props)
        rows.append({"index": i, "name": op["name"], "grid": op["grid"], "block": op["block"], "threads": threads,
                     "registers": op["registers"], "shared_memory": op["shared_memory"],
                     "achieved_occupancy": op.get("achieved_occupancy"), **occ})
    return rows


def footprint_md(summary, props: dict) -> str:
    """One column per kernel, occupancy first: what each kernel asks of an SM, and how many fit."""
    kernels = footprint_rows(summary, props)
    fields = [
        ("**theoretical occupancy**", lambda r: f"**{r['occupancy_pct']:.1f} %**"),
        ("warps per SM", lambda r: f"{r['warps_per_sm']} of {r['max_warps']}"),
        ("blocks per SM (limited by)", lambda r: f"{r['blocks_per_sm']} ({r['limiter']})"),
        ("registers per thread", lambda r: r["registers"]),
        ("threads per block", lambda r: "×".join(map(str, r["block"])) + (f" = {r['threads']}" if r["block"][1:] != [1, 1] else "")),
        ("shared memory per block", lambda r: f"{r['shared_memory'] / 1024:.1f} KiB"),
        ("grid (blocks)", lambda r: "×".join(map(str, r["grid"]))),
        ("trace's est. achieved", lambda r: "—" if r["achieved_occupancy"] is None else f"{r['achieved_occupancy']} %"),
    ]
    headers = ["op #"] + [f"#{r['index']} {md_kernel(r['name'])}" for r in kernels]
    rows = [(name, *(get(r) for r in kernels)) for name, get in fields]
    return md_table(headers, rows, ["---"] + ["---:"] * len(kernels)) + (
        f"\n\n*Theoretical occupancy* is computed by attnprof from each kernel's registers, shared memory and "
        f"block size against this GPU's per-SM limits ({props['regsPerMultiprocessor']} registers, "
        f"{props['sharedMemPerMultiprocessor'] // 1024} KiB shared memory, "
        f"{props['maxThreadsPerMultiprocessor'] // 32} warps, from the trace's deviceProperties). "
        f"*Est. achieved* is the profiler's own field, copied as recorded; it is an estimate, "
        f"and it reads 0 for many kernels on this machine.")


def cpu_md(summary, max_depth: int = 2) -> str:
    """The aten ops of one forward with their CPU time, and the launch API each device op used."""
    rows = []
    for c in summary["cpu_ops"]:
        if c["depth"] > max_depth:
            continue
        launched = [o for o in summary["ops"] if c["start_us"] <= o["launch_start_us"] <= c["start_us"] + c["duration_us"]]
        apis = sorted({o["launch"] for o in launched})
        rows.append(("&nbsp;" * 4 * (c["depth"] - 1) + f"<code>{md_cell(c['name'])}</code>", us(c["duration_us"]),
                     len(launched), ", ".join(apis) or "—"))
    return md_table(["aten op (nested)", "CPU time", "device ops launched", "launch API"], rows,
                    ["---", "---:", "---:", "---"]) + (
        f"\n\nThe whole annotated forward took {us(summary['cpu_forward_us'])} of CPU time (median of "
        f"{len(summary['ops_per_forward_each'])} profiled forwards); ops nested deeper than {max_depth} are in the trace.")
