"""Markdown made from captures: one table helper, cells escaped for kernel names, and the tables of a
capture (key_averages, the op list and its diff, footprint, CPU side) with the boxes around them."""
from __future__ import annotations

import html

from .. import names, oplist
from ..oplist import KIND_LABEL
from ..text import shape, short, size, us

KEY_AVERAGES_HEADERS = ["Name", "Calls", "Self CPU", "CPU total", "Self CUDA", "CUDA total"]


def table(headers, rows, align: str = "") -> str:
    """A Markdown table; `align` has one letter per column, l (the default) or r, e.g. "lrr"."""
    align = align.ljust(len(headers), "l")
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join("---:" if a == "r" else "---" for a in align) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def cell(text) -> str:
    """Escape a value for a Markdown table cell that also survives as HTML (kernel names hold < > | &)."""
    return html.escape(str(text), quote=False).replace("|", "&#124;").replace("\n", " ")


def code(text) -> str:
    """Text as inline code inside a table cell, escaped for HTML."""
    return f"<code>{cell(text)}</code>"


def kernel(name: str) -> str:
    """A kernel's short label as code, its full name in the tooltip (both escaped)."""
    return f'<code title="{html.escape(name, quote=True)}">{cell(names.label(name))}</code>'


def environment(record: dict, verb: str, detail: str) -> str:
    """The stamp of a capture or run: which GPU and software made it, and when."""
    r = record
    return (f'!!! info "{verb} on {cell(r["device"])} ({r["capability"]})"\n'
            f'    {r["date"]} · driver {r["driver"]} · torch {r["torch"]} · CUDA {r["cuda"]} · cuDNN {r["cudnn"]} · '
            f'Triton {r["triton"]} · {detail}')


def stamp(summary) -> str:
    s = summary
    missing = f"\n\n{unavailable(s)}" if "unavailable" in s else ""
    detail = f'shape {tuple(s["shape"])} {s["dtype"]}, causal · snippet hash `{s["source_hash"]}`'
    return environment(s, "Captured", detail) + missing


def unavailable(summary) -> str:
    return f'!!! warning "Not available on this machine"\n    {cell(summary["unavailable"])}'


def key_averages(summary) -> str:
    rows = [(code(short(r["name"], 70)), r["calls"], us(r["self_cpu_us"]), us(r["cpu_total_us"]),
             us(r["self_device_us"]), us(r["device_total_us"])) for r in summary["key_averages"]]
    return table(KEY_AVERAGES_HEADERS, rows, "lrrrrr")


def ops(summary, mark: str | None = None) -> str:
    """The per-forward device ops in launch order; rows whose kind or name contains `mark` are flagged."""
    rows = []
    for i, op in enumerate(summary["ops"], 1):
        flagged = mark and (mark.lower() in op["kind"].lower() or mark.lower() in op["name"].lower())
        kind = KIND_LABEL[op["kind"]]
        path = " › ".join(n.removeprefix("aten::") for n in oplist.launching_path(summary, op))
        info = names.explain(op["name"])
        rows.append((i, f"**{kind}** ⟵" if flagged else kind, us(op["duration_us"]), kernel(op["name"]),
                     info["library"], info["math_unit"], f"{cell(path)} › {op['launch']}"))
    total = (f"\n\n{summary['ops_per_forward']} device ops in one forward, {us(summary['forward_device_us'])} of device "
             f"time (sum of their durations, profiler); CUDA-event median of the whole forward "
             f"{us(summary['event_median_us'])} over {summary['settings']['event_reps']} runs.")
    return table(["#", "kind", "time", "kernel (hover for the full name)", "library", "math unit", "launched from"],
                 rows, "rlr") + total


def ops_diff(a, b) -> str:
    removed, added = oplist.ops_diff(a, b)
    rows = [("−", f"#{i} in {a['stage']}", KIND_LABEL[op["kind"]], us(op["duration_us"]), kernel(op["name"]))
            for i, op in removed]
    rows += [("+", f"#{i} in {b['stage']}", KIND_LABEL[op["kind"]], us(op["duration_us"]), kernel(op["name"]))
             for i, op in added]
    if not rows:
        return f"The two op lists are the same: {a['ops_per_forward']} ops each."
    saved = a["forward_device_us"] - b["forward_device_us"]
    return (table(["", "where", "kind", "time", "name"], rows) +
            f"\n\n{a['stage']}: {a['ops_per_forward']} ops, {us(a['forward_device_us'])}; "
            f"{b['stage']}: {b['ops_per_forward']} ops, {us(b['forward_device_us'])} "
            f"(device time {'saved' if saved >= 0 else 'added'}: {us(abs(saved))}).")


def footprint(summary, props: dict, measured: list[dict] | None = None) -> str:
    """Footprint and theoretical occupancy per kernel; beside it the achieved occupancy that Nsight
    Compute measured (`measured`: a counters record's kernels, in launch order), else the trace's estimate."""
    from ..counters import paired
    rows = oplist.footprint_rows(summary, props)
    if measured is not None and not paired(summary["ops"], measured):
        measured = None  # not the same kernels: pair nothing rather than the wrong rows
    achieved = (["—" if k.get("warps_active_pct") is None else f"**{k['warps_active_pct']:.1f} %**" for k in measured]
                if measured else ["—" if r["achieved_occupancy"] is None else f"{r['achieved_occupancy']} %" for r in rows])
    body = [(r["index"], kernel(r["name"]), shape(r["grid"]), shape(r["block"]),
             r["registers"], f"{r['shared_memory'] / 1024:.1f} KiB", f"{r['blocks_per_sm']} ({r['limiter']})",
             f"{r['warps_per_sm']} / {r['max_warps']}", f"**{r['occupancy_pct']:.1f} %**", a)
            for r, a in zip(rows, achieved)]
    note = ("*Achieved* is the share of warp slots that held a warp while the SM was active, measured by Nsight "
            "Compute over one forward (the counters below)." if measured else
            "*Est. achieved* is the profiler's own field, copied as recorded; it is an estimate, "
            "and it reads 0 for many kernels on this machine.")
    return table(["#", "kernel", "grid", "block", "regs/thread", "smem/block", "blocks/SM (limit)", "warps/SM",
                  "theoretical occupancy", "achieved (Nsight Compute)" if measured else "trace's est. achieved"],
                 body, "rlllrrlrrr") + (
        f"\n\n*Theoretical occupancy* is computed by attnprof from each kernel's registers, shared memory and "
        f"block size against this GPU's per-SM limits ({props['regsPerMultiprocessor']} registers, "
        f"{props['sharedMemPerMultiprocessor'] // 1024} KiB shared memory, "
        f"{props['maxThreadsPerMultiprocessor'] // 32} warps, from the trace's deviceProperties). {note}")


def counters(record: dict, capture: dict) -> str:
    """Each kernel of one forward as Nsight Compute measured it: occupancy, pipes, throughput, verdict.
    Kernels are named as the capture names them where the two lists agree."""
    from .. import counters as c
    pairs = c.paired(capture["ops"], record["kernels"]) or [({"name": k["name"]}, k) for k in record["kernels"]]
    rows = []
    for op, k in pairs:
        pct = lambda key: "—" if k.get(key) is None else f"{k[key]:.1f} %"
        dram = "—" if k.get("dram_bytes") is None else f"{pct('dram_throughput_pct')} ({size(k['dram_bytes'])})"
        rows.append((kernel(op["name"]), f"{pct('warps_active_pct')} of {pct('theoretical_occupancy_pct')} "
                     f"({c.limiter(k) or '—'})", pct("tensor_pipe_pct"), pct("fma_pipe_pct"),
                     f"{pct('sm_throughput_pct')} / {pct('memory_throughput_pct')}", dram, pct("l2_hit_pct"),
                     f"**{c.verdict(k)}**"))
    return (table(["kernel", "warps active of theoretical (limit)", "tensor pipe", "FP32 FMA pipe",
                   "SM / memory throughput", "DRAM (of peak, bytes)", "L2 hit", "verdict"], rows, "llrrllrl")
            + f"\n\nMeasured by Nsight Compute ({cell(record['ncu'])}) on {cell(record['device'])}, {record['date']}, "
              f"over one forward with the clocks unlocked; each percentage is of that unit's peak. *Warps active* is "
              f"the achieved occupancy, beside the theoretical one and the resource that limits it. The *verdict* "
              f"names the busier of SM and memory once it reaches {c.BOUND_AT:.0f} % of its peak, and says "
              f"*latency-bound* when neither does.")


def cpu(summary, max_depth: int = 2) -> str:
    """The aten ops of one forward with their CPU time, and the launch API each device op used."""
    rows = []
    for c in summary["cpu_ops"]:
        if c["depth"] > max_depth:
            continue
        launched = [o for o in summary["ops"] if c["start_us"] <= o["launch_start_us"] <= c["start_us"] + c["duration_us"]]
        apis = sorted({o["launch"] for o in launched})
        rows.append(("&nbsp;" * 4 * (c["depth"] - 1) + f"<code>{cell(c['name'])}</code>", us(c["duration_us"]),
                     len(launched), ", ".join(apis) or "—"))
    return table(["aten op (nested)", "CPU time", "device ops launched", "launch API"], rows, "lrr") + (
        f"\n\nThe whole annotated forward took {us(summary['cpu_forward_us'])} of CPU time (median of "
        f"{len(summary['ops_per_forward_each'])} profiled forwards); ops nested deeper than {max_depth} are in the trace.")
