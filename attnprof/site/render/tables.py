"""Markdown made from captures: one table helper, every name escaped (text.escape), and the tables of a
capture (key_averages, the op list and its diff, footprint, CPU side) with the boxes around them."""
from __future__ import annotations

import re

from ...analysis import counters as ncu, kernel_names, oplist
from ...analysis.oplist import KEY_AVERAGES_HEADERS, KIND_LABEL
from ...model.procedure import MEASURED_ONCE
from ...text import escape, shape, size, us

def unit(math_unit: str) -> str:
    """A decoded math unit as the pages write it: "CUDA cores", "Tensor Cores (wgmma)", "none"."""
    return math_unit.replace("cuda cores", "CUDA cores").replace("tensor cores", "Tensor Cores")
LAUNCH_API = {"cu": "CUDA driver API", "cuda": "CUDA runtime API"}


def whole(text: str) -> str:
    """Text that a narrow cell breaks between words, never at a hyphen ("FlashAttention-4" stays one)."""
    return text.replace("-", "\u2011")


def closed(box: str) -> str:
    """An admonition (`!!! kind "title"`) as a closed box: its title shown, its body a tap away."""
    return "???" + box.removeprefix("!!!")


def table(headers, rows, align: str = "") -> str:
    """A Markdown table; `align` has one letter per column, l (the default) or r, e.g. "lrr"."""
    align = align.ljust(len(headers), "l")
    headers = [whole(h) for h in headers]
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join("---:" if a == "r" else "---" for a in align) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def code(text) -> str:
    """Text as inline code inside a table cell, escaped for HTML."""
    return f"<code>{escape(text)}</code>"


def launch(api: str) -> str:
    """A launch call as code, with the API it belongs to as its tooltip."""
    return f'<code title="{LAUNCH_API["cuda" if api.startswith("cuda") else "cu"]}">{escape(api)}</code>'


def kernel(name: str, printed=kernel_names.printed) -> str:
    """A kernel's name as the profiler prints it, as code free to wrap after an underscore, a `::` or inside a
    camelCase word (a phone wraps it rather than cut it, and `ffma` or `f32f32` stays whole), its full name in the tooltip; then, where it says more, the
    readable gloss (kernel_names.gloss) in small print."""
    gloss = kernel_names.gloss(name)
    shown = re.sub(r"(?<=[a-z]{3})(?=[A-Z][a-z])|(?<=::)", "<wbr>", escape(printed(name)))  # cudaLaunch|Kernel, aten::|mm
    shown = shown.replace("_", "&#95;<wbr>")  # an entity: `_<wbr>_` would start emphasis
    return f'<code title="{escape(name)}">{shown}</code>' + (f"<br><small>{escape(gloss)}</small>" if gloss else "")


def environment(record: dict, verb: str, detail: str) -> str:
    """The stamp of a capture or run: which GPU and software made it, and when."""
    e = {k: escape(record[k]) for k in ("device", "capability", "date", "driver", "torch", "cuda", "cudnn", "triton")}
    return (f'!!! info "{verb} on {e["device"]} ({e["capability"]})"\n'
            f'    {e["date"]} · driver {e["driver"]} · torch {e["torch"]} · CUDA {e["cuda"]} · cuDNN {e["cudnn"]} · '
            f'Triton {e["triton"]} · {detail}')


def stamp(s) -> str:
    missing = f"\n\n{unavailable(s)}" if "unavailable" in s else ""
    detail = f'shape {escape(tuple(s["shape"]))} {escape(s["dtype"])}, causal · snippet hash {code(s["source_hash"])}'
    if "function" in s:  # a reader's capture: its file and function, and the hash of the file's code
        detail = (f'shape {escape(tuple(s["shape"]))} {escape(s["dtype"])} · <code>{escape(s["file"])}:{escape(s["function"])}</code> · '
                  f'code hash {code(s["source_hash"])}')
    return environment(s, "Captured", detail + measured_once([s])) + missing


def measured_once(parts: list[dict], more=(), rest="the trace and the raw timings") -> str:
    """The stamp's line on what was measured once (procedure.MEASURED_ONCE: the fields `parts` hold, and
    `more`); the rest is recomputed from the trace and the raw timings by every build."""
    once = [what for key, what in MEASURED_ONCE.items() if any(key in p for p in parts)] + list(more)
    if not once:
        return ""
    return (f"  \n    Measured once, when captured: {', '.join(once)}.  \n    Every other figure is recomputed from "
            f"{rest}.")


def why_unavailable(raw: str) -> str:
    """One clause on why a stage did not run, read off the reason its capture recorded, in terms of the
    software and hardware: the site's own Markdown, never the recorded message (shown folded, by raw_reasons)."""
    if "No module named" in raw or "ModuleNotFoundError" in raw:
        return "its Python package was not installed where it was captured"
    if "kernels hub" in raw and ("trust" in raw or "connect" in raw.lower()):
        # kernels' first request asks the Hub about the publisher; offline, that request fails
        return "`get_kernel` could not ask the Hugging Face Hub whether the publisher is trusted, so no kernel was loaded"
    if "out of memory" in raw.lower():
        return "it ran out of GPU memory"
    return "it failed to load or to run (the recorded reason says how)"


NOT_RUN = "did not run"  # what a table says of a stage whose capture recorded a reason instead of a profile


MASKED_ROW = {"NaN": "NaN", "zeros": "zeros", "other": "finite, non-zero values"}  # what a fully masked row held


def raw_reasons(items) -> str:
    """The reasons as recorded, (title, raw) pairs, in a collapsed block under what explains them."""
    items = list(dict.fromkeys(items))
    if not items:
        return ""
    return ('\n\n??? note "The reason as recorded"\n'
            + "\n".join(f"    - **{escape(t)}**: {escape(r)}" for t, r in items))


def unavailable(summary) -> str:
    raw = summary["unavailable"]
    return (f'!!! warning "Did not run"\n    {escape(summary.get("title", summary["stage"]))} did not run: '
            f'{why_unavailable(raw)}.\n\n    ??? note "The reason as recorded"\n        {escape(raw)}')


def key_averages(summary) -> str:
    rows = [(kernel(r["name"], kernel_names.as_table), r["calls"], us(r["self_cpu_us"]), us(r["cpu_total_us"]),
             us(r["self_device_us"]), us(r["device_total_us"])) for r in summary["key_averages"]]
    names = [r["name"] for r in summary["key_averages"]]
    twice = sorted({n for n in names if names.count(n) > 1})
    note = (f"\n\n{', '.join(code(n) for n in twice)} appears twice: PyTorch lists a "
            f"`record_function` range once for the CPU and once for the GPU work inside it."
            if twice else "")
    return table(KEY_AVERAGES_HEADERS, rows, "lrrrrr") + note


def common_prefix(paths: list[list[str]]) -> list[str]:
    """The enclosing ops every path shares (e.g. scaled_dot_product_attention › _scaled_dot_product_attention_math),
    leaving each path at least one op of its own."""
    prefix = []
    for at in zip(*paths):
        if len(set(at)) != 1:
            break
        prefix.append(at[0])
    return prefix if all(len(p) > len(prefix) for p in paths) else prefix[:-1]


def ops(summary, mark: str | None = None) -> str:
    """The per-forward device ops in launch order; rows whose kind or name contains `mark` are flagged."""
    paths = [[n.removeprefix("aten::") for n in oplist.launching_path(summary, op)] for op in summary["ops"]]
    shared = common_prefix(paths)
    rows = []
    for i, (op, path) in enumerate(zip(summary["ops"], paths), 1):
        flagged = mark and (mark.lower() in op["kind"].lower() or mark.lower() in op["name"].lower())
        info = kernel_names.explain(op["name"])
        name = f"<strong>{kernel(op['name'])}</strong> ⟵" if flagged else kernel(op["name"])
        rows.append((i, us(op["duration_us"]), name, info["library"], unit(info["math_unit"]),
                     escape(" › ".join(path[len(shared):])) or "—",
                     launch(op["launch"])))
    where = (f" Every op is launched inside <code>{escape(' › '.join(shared))}</code>; *launched from* shows the "
             f"ops below that." if shared else "")
    n = summary["ops_per_forward"]
    total = (f"\n\n{n} device op{'s' if n != 1 else ''} in the forward drawn, {us(summary['forward_device_us'])} of device "
             f"time (sum of their durations, profiler)"
             + f". Shape {'×'.join(map(str, summary['shape']))}, {escape(summary['dtype'])}. Hover a kernel for its "
               f"full name, a launch call for its API.{where}")
    return ('<div class="attnprof-oplist" markdown>\n\n'  # on a phone the stylesheet stacks each row (extra.css)
            + table(["#", "time", "kernel, copy or fill", "library", "math unit", "launched from", "launch API"],
                    rows, "rr") + "\n\n</div>" + total)


def ops_diff(a, b, which: str) -> str:
    """The ops one forward has that the other lacks, then each forward's op count and device time: `which` forward
    of each (both the same kind, so that their difference is like with like), named beside the times."""
    removed, added = oplist.ops_diff(a, b)
    rows = [(sign, f"#{i} in {escape(s['stage'])}", KIND_LABEL[op["kind"]], us(op["duration_us"]), kernel(op["name"]))
            for sign, s, ops in (("−", a, removed), ("+", b, added)) for i, op in ops]
    if not rows:
        return f"The two op lists are the same: {a['ops_per_forward']} ops each."
    saved = a["forward_device_us"] - b["forward_device_us"]
    name = lambda s: escape(s.get("title") or s["stage"])
    return (table(["", "where", "kind", "time", "name"], rows) +
            f"\n\n{name(a)}: {a['ops_per_forward']} ops, {us(a['forward_device_us'])}; "
            f"{name(b)}: {b['ops_per_forward']} ops, {us(b['forward_device_us'])} "
            f"(device time of each forward drawn, the {which}; "
            f"device time {'saved' if saved >= 0 else 'added'}: {us(abs(saved))}).")


OCCUPANCY_GUIDE = "reading-a-profile.md#occupancy"  # where occupancy is explained, once
COUNTERS_GUIDE = "reading-a-profile.md#hardware-counters"  # where the counters' columns and verdict are


def footprint_columns(summary, props: dict, measured: list[dict] | None = None, only: str | None = None):
    """Each kernel of one forward with what it asks of an SM: (footprint row, achieved occupancy) pairs, the
    achieved value measured by Nsight Compute (`measured`: a counters record's kernels, in launch order)
    where counters exist, else the trace's own estimate; and whether it was measured."""
    rows = oplist.footprint_rows(summary, props)
    pairs = ncu.paired(summary["ops"], measured) if measured is not None else None
    achieved = ([k.get("warps_active_pct") for _, k in pairs] if pairs else [r["achieved_occupancy"] for r in rows])
    return [(r, a) for r, a in zip(rows, achieved) if not only or only in r["name"]], bool(pairs)


def footprint_table(headers: list[str], kernels, measured: bool) -> str:
    """One column per kernel, occupancy first, then a line that links to where occupancy is explained
    (and, for the trace's estimate, says how far to trust it)."""
    fields = [
        ("**theoretical occupancy**", lambda r, a: f"**{r['occupancy_pct']:.1f} %**"),
        ("achieved (Nsight Compute)" if measured else "trace's est. achieved",
         lambda r, a: "—" if a is None else (f"{a:.1f} %" if measured else f"{a} %")),
        ("warps per SM", lambda r, a: f"{r['warps_per_sm']} of {r['max_warps']}"),
        ("blocks per SM (limited by)", lambda r, a: f"{r['blocks_per_sm']} ({r['limiter']})"),
        ("registers per thread", lambda r, a: r["registers"]),
        ("threads per block", lambda r, a: r["threads"]),
        ("shared memory per block", lambda r, a: f"{r['shared_memory'] / 1024:.1f} KiB"),
        ("grid (blocks)", lambda r, a: shape(r["grid"])),
    ]
    body = [(name, *(get(r, a) for r, a in kernels)) for name, get in fields]
    if measured:
        note = (f"*Theoretical* occupancy from the footprint, *achieved* measured by Nsight Compute over one forward "
                f"([how each is obtained]({OCCUPANCY_GUIDE})).")
    else:
        zeros = sum(1 for _, a in kernels if a == 0)
        note = (f"*Theoretical* occupancy from the footprint ([how it is computed]({OCCUPANCY_GUIDE})). *Est. "
                f"achieved* is the profiler's own field, copied as recorded: an estimate, not a measurement"
                + (f", and it reads 0 for {zeros} of the {len(kernels)} kernels in this table." if zeros else "."))
    return table(headers, body, "l" + "r" * len(kernels)) + "\n\n" + note


def counter_pct(kernel_: dict, key: str, space: str = "\u00a0") -> str:
    """One of Nsight Compute's percents of a kernel, to a tenth; a dash where it gave none."""
    return "—" if kernel_.get(key) is None else f"{kernel_[key]:.1f}{space}%"


def counters(record: dict, capture: dict) -> str:
    """Each kernel of one forward as Nsight Compute measured it: occupancy, pipes, throughput, verdict.
    Kernels are named as the capture names them where the two lists agree."""
    pairs = ncu.paired(capture["ops"], record["kernels"]) or [({"name": k["name"]}, k) for k in record["kernels"]]
    rows = []
    for op, k in pairs:
        pct = lambda key: counter_pct(k, key)
        dram = "—" if k.get("dram_bytes") is None else f"{pct('dram_throughput_pct')} ({size(k['dram_bytes'])})"
        rows.append((kernel(op["name"]), f"{pct('warps_active_pct')} of {pct('theoretical_occupancy_pct')} "
                     f"({ncu.limiter(k) or '—'})", pct("tensor_pipe_pct"), pct("fma_pipe_pct"),
                     f"{pct('sm_throughput_pct')} / {pct('memory_throughput_pct')}", dram, pct("l2_hit_pct"),
                     f"**{ncu.verdict(k)}**"))
    return (table(["kernel", "warps active of theoretical (limit)", "tensor pipe", "FP32 FMA pipe",
                   "SM / memory throughput", "DRAM (of peak, bytes)", "L2 hit", "verdict"], rows, "llrrllrl")
            + f"\n\nMeasured by Nsight Compute {escape(ncu.version(record['ncu']))} on {escape(record['device'])}, {escape(record['date'])}, "
              f"over one forward with the clocks unlocked ([reading the columns and the verdict]({COUNTERS_GUIDE})).")


def cpu(summary, max_depth: int = 2, shown_cpu_us: float | None = None) -> str:
    """The aten ops of one forward with their CPU time, and the launch API each device op used.
    `shown_cpu_us` is the CPU time of that forward (the one the trace picture shows)."""
    rows = []
    for c in summary["cpu_ops"]:
        if c["depth"] > max_depth:
            continue
        launched = [o for o in summary["ops"] if c["start_us"] <= o["launch_start_us"] <= c["start_us"] + c["duration_us"]]
        apis = sorted({o["launch"] for o in launched})
        rows.append(("&nbsp;" * 4 * (c["depth"] - 1) + f"<code>{escape(c['name'])}</code>", us(c["duration_us"]),
                     len(launched), ", ".join(apis) or "—"))
    return table(["aten op (nested)", "CPU time", "device ops launched", "launch API"], rows, "lrr") + (
        f"\n\nThese rows come from the forward the trace picture shows (of the profiled forwards, the one "
        f"whose device time is the median){f', whose annotation took {us(shown_cpu_us)} of CPU time' if shown_cpu_us else ''}. "
        f"*CPU time / forward*, elsewhere on these pages, is the median over the "
        f"{len(summary['ops_per_forward_each'])} profiled forwards: {us(summary['cpu_forward_us'])}. Ops nested "
        f"deeper than {max_depth} are in the trace.")
