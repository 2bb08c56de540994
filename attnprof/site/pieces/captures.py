"""The pieces over stage captures (`<!-- attnprof: ops naive mark=Memcpy -->`, ...): each gives Markdown from
the build's committed captures, and declares what it reads where it is registered (registry.py).
"""
from __future__ import annotations

import statistics

from ...analysis import hardware, kernel_names, oplist, summary
from ...analysis.flops import causal_flops, device_tflops, tflops
from ...model.procedure import SCHEDULE
from ...model.stages import DEFAULT_SHAPE, ITEMSIZE, STAGES, ladder, select
from ...text import escape, dims, ms, shape, us
from ..build import Build
from ..render import plots, tables
from ..words import CAPTURE_RUN, CPU, DEVICE, MEDIAN, ONE_CALL, count, listed, plain_title, short, title
from ..registry import ALL, one_of, piece
from .gpu import name as gpu_name
from .timing import own_stream_line


@piece("stamp", captures=1, unavailable=True)
def stamp(build: Build, record, folded=None):
    """Which GPU and software made a capture; `folded=yes`: as a closed box, one of a chapter's details."""
    text = tables.stamp(build.summary(record))
    return tables.closed(text) if folded == "yes" else text


@piece("key-averages", captures=1)
def key_averages(build: Build, record):
    return tables.key_averages(build.summary(record))


@piece("ops", captures=1)
def ops(build: Build, record, mark=None):
    """One forward's device ops: the forward the trace figure draws, the median one."""
    s = build.summary(record)
    build.number(record, DEVICE, MEDIAN, us(s[f"{s.get('pass', 'forward')}_device_us"]))  # as its caption states it
    return tables.ops(s, mark)


@piece("diff", captures=2)
def diff(build: Build, a, b):
    """What one drawn (median) forward's op list has that the other's lacks, device times noted as theirs."""
    shown = {record: build.summary(record) for record in (a, b)}
    for record, s in shown.items():
        build.number(record, DEVICE, MEDIAN, us(s["forward_device_us"]))
    return tables.ops_diff(shown[a], shown[b], MEDIAN)


TRACE_GUIDE = "reading-a-profile.md#the-trace"  # where a trace figure and its controls are explained, once


def trace_controls(build: Build, record: str, label: str) -> str:
    """A trace figure's controls: Open in Perfetto (perfetto.js; without JavaScript a download), file, summary."""
    at = build.link(record)
    return (f"[:material-chart-timeline: Open in Perfetto]({at}/{record}.trace.json.gz)"
            f"{{ .md-button .attnprof-perfetto data-title=\"{escape(label)}\" }} "
            f"[:material-download: {record}.trace.json.gz]({at}/{record}.trace.json.gz){{ .md-button }} "
            f"[summary&nbsp;JSON]({at}/{record}.json)")


def drawn(build: Build, record, explained=None) -> str:
    """Which profiled forward (or backward) a page draws and lists: the one whose device time is the median."""
    s = build.summary(record)
    what = s.get("pass", "forward")
    fwds, shown = build.forwards(record)
    guide = "" if explained == "here" else f" ([reading a trace]({TRACE_GUIDE}))"
    said = lambda quantity, method, x: build.number(record, quantity, method, us(x)) if what == "forward" else us(x)
    return (f"The {what} of {title(s)} drawn here is the one of the {len(fwds)} profiled whose device time is the "
            f"median, {said(DEVICE, MEDIAN, shown.device_us)} ([why](methods.md#which-forward-a-page-shows)). The op "
            f"list shows the same one{guide}. The trace file holds the whole profile"
            f"{', each backward after its forward' if what == 'backward' else ''}.")


@piece("drawn", captures=1)
def drawn_piece(build: Build, record):
    """The caption of a trace figure drawn with `caption=folded`, for a chapter's details."""
    return drawn(build, record)


@piece("trace", captures=1)
def trace(build: Build, record, explained=None, caption=None, cpu_depth=None, axis=None):
    """One forward (or backward) as a figure, its caption and controls. `explained=here`: no link to the
    explanation; `caption=folded`: the caption left to the chapter's details (`drawn`); `cpu_depth=N`: the CPU
    lane N levels deep; `axis=A,B`: one time axis with A's and B's traces, so their lengths compare."""
    s = build.summary(record)
    what = s.get("pass", "forward")
    label = f"{plain_title(s)}, one {what}: {s['device']}, {' × '.join(map(str, s['shape']))}, {s['dtype']}"
    said = "" if caption == "folded" else f"*{drawn(build, record, explained)}*\n\n"
    depth = plots.CPU_DEPTH if cpu_depth is None else int(cpu_depth)
    others = [r for r in (axis or "").split(",") if r and r != record]
    span = max((plots.drawn_span(build.forwards(r)[1]) for r in others), default=0)
    scaled = (f"*Drawn on one time axis with the trace{'s' if len(others) > 1 else ''} of "
              f"{listed([title(build.summary(r)) for r in others])}, so their lengths compare.*\n\n" if others else "")
    idle = (f"From the first launch to the last op's end, the GPU ran none of this {what}'s ops for "
            f"{100 * oplist.gaps(s).idle_share:.0f} % of the time: the shaded stretches of the GPU lane.\n\n")
    return (f"{plots.timeline(s, build.forwards(record)[1], cpu_depth=depth, axis_us=span)}\n\n{idle}{scaled}{said}"
            + trace_controls(build, record, label))


def gemm_us(s: dict) -> float:
    """Device time of one forward's matmuls (the cuBLAS kernels)."""
    return sum(op["duration_us"] for op in s["ops"] if kernel_names.explain(op["name"])["library"].startswith("cuBLAS"))


def _a100_ratio(s: dict) -> str:
    ref = hardware.FIGURES[s["stage"]]["forward_us"]
    return f"{ref / s['forward_device_us']:.2f}×" if ref else "—"


VALUES = {
    "ops": lambda b, s: str(s["ops_per_forward"]),
    "gemm_time": lambda b, s: us(gemm_us(s)),
    "gemm_share": lambda b, s: f"{100 * gemm_us(s) / s['forward_device_us']:.0f} %",
    "other_time": lambda b, s: us(s["forward_device_us"] - gemm_us(s)),
    "a100_time": lambda b, s: us(hardware.FIGURES[s["stage"]]["forward_us"]),
    "a100_cpu": lambda b, s: us(hardware.FIGURES[s["stage"]]["cpu_us"]),
    "a100_ratio": lambda b, s: _a100_ratio(s),
    "sms": lambda b, s: str(b.device_properties(s["record"])["numSms"]),
    "sm_registers": lambda b, s: f"{b.device_properties(s['record'])['regsPerMultiprocessor']:,}",
    "sm_warps": lambda b, s: str(b.device_properties(s["record"])["maxThreadsPerMultiprocessor"]
                                 // b.device_properties(s["record"]).get("warpSize", 32)),
    "device_time": lambda b, s: b.number(s["record"], DEVICE, MEDIAN, us(s["forward_device_us"])),
    "event_median": lambda b, s: b.number(s["record"], ONE_CALL, CAPTURE_RUN, us(s["event_median_us"])),
    "cpu_time": lambda b, s: b.number(s["record"], CPU, MEDIAN, us(s["cpu_forward_us"])),
    "rel_err": lambda b, s: f"{s['rel_err']:.1e}",
    "device": lambda b, s: escape(s["device"]),
    "backend_ran": lambda b, s: kernel_names.fingerprint(op["name"] for op in s["ops"]),
    "occupancy": lambda b, s: ", ".join(f"{r['occupancy_pct']:.1f} %" for r in
                                        oplist.footprint_rows(s, b.device_properties(s["record"]))),
    "a100_ops": lambda b, s: str(hardware.FIGURES[s["stage"]]["ops"]),
    "scores_size": lambda b, s: f"{scores_bytes(s) / 2**20:.0f} MiB",
    "first_call": lambda b, s: ms(s["first_call_ms"]),
    "arch": lambda b, s: kernel_names.explain(summary.longest_kernel(s)["name"])["arch"] or "no architecture",
    "launch": lambda b, s: f"`{summary.longest_kernel(s)['launch']}`",
}


def scores_bytes(s: dict) -> int:
    """The size of one B×H×S×S score tensor in the capture's dtype."""
    b, h, n, _ = s["shape"]
    return b * h * n * n * ITEMSIZE[s["dtype"]]


@piece("gaps", captures=1)
def gaps(build: Build, record):
    """How much of a profiled forward's span the GPU waited for launches, and the timing run's verdict."""
    s = build.summary(record)
    g = oplist.gaps(s)
    return (f"**Gaps** (profiled, [defined here](launch-bound.md#reading-the-gaps)): the GPU ran this "
            f"forward's ops for {us(g.busy_us)} of a {us(g.span_us)} span from first launch to last op end, idle "
            f"**{100 * g.idle_share:.0f} %** of it. Median launch latency {us(statistics.median_high(g.launch_latency_us))} per op (launch "
            f"call → op start under the profiler, time queued behind earlier ops included). The profiler slows "
            f"the CPU side, so these gaps are not a verdict"
            + (": [When the GPU waits for Python](launch-bound.md) times a stream of these forwards without it."
               if s["stage"] in STAGES else "." + own_stream_line(s)))


@piece("launch", captures=ALL)
def launch(build: Build, *records):
    """Gaps across profiled captures: busy, span, idle share, launch latency, CPU time (one call: the timing
    table's, on the same page)."""
    rows = []
    for record in records:
        s = build.summary(record)
        g = oplist.gaps(s)
        rows.append((title(s), shape(s["shape"]), us(g.busy_us), us(g.span_us), f"{100 * g.idle_share:.0f} %",
                     us(statistics.median_high(g.launch_latency_us)), us(s["cpu_forward_us"])))
    return (tables.table(["stage", "shape B×H×S×D", "GPU busy (profiled)", "span (profiled)",
                          "GPU idle (of the profiled span)", "median launch latency (profiled)",
                          "CPU time / forward (profiled)"], rows, "llrrrrr")
            + f"\n\nbf16, causal; from each stage's capture ({count(SCHEDULE['active'])} profiled forwards, the one "
              f"with the median device time).")


def per_forward(build: Build, s: dict, quantity: str) -> str:
    """A capture's figure per forward as every table of several stages states it: its summary's (the median)."""
    field, method = {DEVICE: ("forward_device_us", MEDIAN), ONE_CALL: ("event_median_us", CAPTURE_RUN),
                     CPU: ("cpu_forward_us", MEDIAN)}[quantity]
    return build.number(s["record"], quantity, method, us(s[field]))


@piece("value", captures=1, unavailable=True, inline=True)
def value(build: Build, record, field):
    """One number from a capture, inline in prose, so no figure in the text is typed by hand."""
    return one_of(VALUES, field, "value")(build, build.summary(record))


@piece("ratio", captures=2, inline=True)
def ratio(build: Build, a, b):
    """How many times longer capture `a` took than `b`: device time per forward."""
    x = build.summary(a)["forward_device_us"] / build.summary(b)["forward_device_us"]
    return f"{x:.2f}×" if x < 10 else f"{x:.1f}×"  # as diff's table gives it: 1.04×, not a rounded 1.0×


@piece("footprint", captures=1)
def footprint(build: Build, record, only=None):
    """Each kernel's footprint and occupancy, a column each by its op-list number; `only=TEXT` filters names."""
    counted = build.counters(record)
    kernels, measured = tables.footprint_columns(build.summary(record), build.device_properties(record),
                                                 counted["kernels"] if counted else None, only)
    headers = ["op # in the list"] + [f"#{r['index']} {tables.kernel(r['name'])}" for r, _ in kernels]
    return tables.footprint_table(headers, kernels, measured)


@piece("footprint-compare", captures=ALL)
def footprint_compare(build: Build, *records):
    """Several captures' main kernels in one footprint table, each column headed by its stage."""
    measured = [build.counters(record) for record in records]
    if not all(measured):  # one row of achieved occupancy means one method: the trace's estimate for all
        measured = [None] * len(records)
    columns, flags = [], []
    for record, m in zip(records, measured):
        s = build.summary(record)
        kernels, was_measured = tables.footprint_columns(s, build.device_properties(record), m and m["kernels"])
        at = s["ops"].index(summary.longest_kernel(s)) + 1
        main = next(ka for ka in kernels if ka[0]["index"] == at)
        columns.append((f"{title(s)} ({tables.kernel(main[0]['name'])})", main))
        flags.append(was_measured)
    return tables.footprint_table(["metric"] + [h for h, _ in columns], [k for _, k in columns], all(flags))


@piece("counter", captures=1, inline=True)
def counter(build: Build, record, kernel, field):
    """`counter math xmma_gemm fma_pipe_pct`: that field of every kernel whose name holds `xmma_gemm`, inline."""
    measured = build.counters_of(record)
    if field not in measured["kernels"][0]:
        raise KeyError(f"unknown counter {field!r} (known: {', '.join(measured['kernels'][0])})")
    values = [k[field] for k in measured["kernels"] if kernel in k["name"]]
    if not values:
        raise ValueError(f"no kernel of {record!r} has {kernel!r} in its name")
    return " and ".join(f"{v:.1f} %" if field.endswith("_pct") else f"{v:,.0f}" for v in values)


@piece("counters", captures=1)
def counters(build: Build, record):
    return tables.counters(build.counters_of(record), build.summary(record))


@piece("cpu", captures=1)
def cpu(build: Build, record, depth="2"):
    _, drawn_ = build.forwards(record)  # the forward the trace figure shows: the median one
    return tables.cpu(build.summary(record), int(depth), drawn_.cpu_us)


@piece("kernels", captures=1)
def kernels(build: Build, record):
    """Each distinct kernel of one forward, decoded."""
    seen, said, rows = set(), {}, []
    for op in build.summary(record)["ops"]:
        if op["kind"] != "kernel" or op["name"] in seen:
            continue
        seen.add(op["name"])
        e = kernel_names.explain(op["name"])
        # a description is said once per table; a later kernel of the same kind points back to the first
        what = f"as for {said[e['summary']]}, above" if e["summary"] in said else escape(e["summary"])
        said.setdefault(e["summary"], tables.kernel(op["name"]))
        rows.append((tables.kernel(op["name"]), e["library"], tables.unit(e["math_unit"]), e["dtype"] or "—", e["arch"] or "—",
                     e["tile"] or "—", what))
    return tables.table(["kernel", "library", "math unit", "dtype", "arch", "tile", "what it is"], rows)


@piece("dispatch", captures=1)
def dispatch(build: Build, record):
    """What SDPA's dispatcher said for these inputs, and which backend the kernels show ran."""
    s = build.summary(record)
    rows = [(b, "yes" if e["eligible"] else "no", escape("; ".join(e["reasons"])) or "—")
            for b, e in s["eligibility"].items()]
    ran = kernel_names.fingerprint(op["name"] for op in s["ops"])
    return (tables.table(["fused backend", "eligible for these inputs", "PyTorch's reasons (can_use_*, debug)"], rows)
            + f"\n\nLeft free, the dispatcher picks **{s['sdpa_choice']}** (`torch._fused_sdp_choice`). "
              f"The kernels of this capture show that **{ran}** ran.")


@piece("compare", captures=ALL, unavailable=True)
def compare(build: Build, *records):
    """Several captures side by side: what ran, how long, how fast (one method, so they rank alike), how accurate."""
    rows, reasons, own = [], [], False
    for record in records:
        s = build.summary(record)
        if "unavailable" in s:
            rows.append((title(s), tables.NOT_RUN, "—", "—", "—", "—", tables.why_unavailable(s["unavailable"])))
            reasons.append((plain_title(s), s["unavailable"]))
            continue
        kernels = summary.kernels(s)
        main = summary.longest(kernels)
        own |= "function" in s  # a reader's function: what it computes, and so its FLOPs, are its own
        rows.append((title(s), tables.kernel(main["name"]), s["ops_per_forward"], per_forward(build, s, DEVICE),
                     "—" if "function" in s else f"{device_tflops(s):.0f}", f"{s['rel_err']:.1e}",
                     f"{len(kernels)} kernel(s); layout {s.get('layout', 'BHSD')}"))
    return (tables.table(["stage", "longest kernel", "ops / forward", "device time / forward (profiler)",
                          "TFLOP/s (causal, device time)", "rel. error vs fp64", "notes"], rows, "llrrrr")
            + f"\n\nShape {dims(build.summary(records[0])['shape'])}, bf16, causal. *Device time*: the sum of one profiled "
              f"forward's device op durations, the forward whose device time is the median of the profiled ones; "
              f"*TFLOP/s*: causal FLOPs (4·B·H·S²·D, halved by the mask) over that time."
            + (" A reader's function does work of its own (a window, a whole layer), so it gets none." if own else "")
            + tables.raw_reasons(reasons))


@piece("side-by-side", captures=ALL)
def side_by_side(build: Build, *records):
    """Several stages in one compact table: what ran, its longest op, time on each side, how it launched."""
    rows = []
    for record in records:
        s = build.summary(record)
        longest = summary.longest(s["ops"])
        rows.append((f"[{title(s)}]({escape(s['stage'])}.md)", s["ops_per_forward"],
                     kernel_names.fingerprint(op["name"] for op in s["ops"]), tables.kernel(longest["name"]),
                     f"{100 * longest['duration_us'] / s['forward_device_us']:.0f} %",
                     per_forward(build, s, DEVICE), per_forward(build, s, CPU),
                     ", ".join(tables.launch(a) for a in sorted({op["launch"] for op in s["ops"]}))))
    return (tables.table(["stage", "ops / forward", "backend that ran (from its kernels)", "longest op",
                          "its share of device time", "device time / forward", "CPU time / forward", "launch APIs"],
                         rows, "lrllrrr")
            + "\n\nEach stage's full op list is on its chapter; the row links to it.")


@piece("kernel-compare", captures=ALL)
def kernel_compare(build: Build, *records):
    """Several captures' attention kernels: device time, rate, launch grid and what a block asks of an SM."""
    rows = []
    for record in records:
        s = build.summary(record)
        longest = summary.longest_kernel(s)
        k = next(r for r in oplist.footprint_rows(s, build.device_properties(record))
                 if r["index"] == s["ops"].index(longest) + 1)
        time = longest["duration_us"]
        blocks = summary.blocks(k)
        rows.append((title(s), tables.kernel(k["name"]), s["ops_per_forward"], us(time),
                     f"{tflops(causal_flops(s['shape']), time):.0f}",
                     f"{shape(k['grid'])} ({blocks / s['sm_count']:.2f} × the SMs)",
                     f"{k['threads']} ({k['threads'] // 128} warpgroup{'s' if k['threads'] >= 256 else ''})",
                     k["registers"], f"{k['shared_memory'] / 1024:.0f} KiB", k["blocks_per_sm"]))
    return tables.table(["stage", "attention kernel", "device ops / forward", "kernel time (profiler)",
                         "TFLOP/s (profiler kernel time)",
                         "grid (blocks ÷ SMs)", "threads per block", "regs/thread", "smem/block", "blocks resident per SM"],
                        rows, "llrrrllrrr") + (
        f"\n\nShape {dims(build.summary(records[0])['shape'])}, bf16, causal; kernel time from the profiler's trace of the median "
        f"profiled forward; TFLOP/s counts causal FLOPs over that time.")


@piece("providers")
def providers(build: Build):
    """Every third-party provider: where it comes from, its layout, and whether its capture ran it."""
    rows = []
    for name in select(group="provider"):
        st = STAGES[name]
        if name in build.problems:
            status = f"capture not usable: {escape(build.problems[name])}"
        elif build.is_unavailable(name):
            status = f"{tables.NOT_RUN} (its section says why)"
        else:
            status = f"ran (captured on {escape(build.summary(name)['device'])})"
        rows.append((st.title, st.provider, f"`snippets/{st.snippet}.py`", st.layout, status))
    return tables.table(["provider", "from", "code", "layout it takes", "status"], rows)


@piece("compile", captures=1)
def compile_time(build: Build, record):
    s = build.summary(record)
    return (f"First call (compilation included): **{ms(s['first_call_ms'])}**; steady state: "
            f"**{us(s['event_median_us'])}** per forward (one call: CUDA-event median of "
            f"{s['settings']['event_reps']} calls after {s['settings']['warmup_calls']} warm-up calls; "
            f"shape {shape(s['shape'])}).")


GISTS = {  # each rung in a few words: its chapter says the rest
    "naive": "a kernel per line, plus a copy",
    "inplace": "the copy gone",
    "math": "fp32, mask rebuilt per call",
    "efficient": "one fused kernel",
    "flash": "one fused kernel (FlashAttention-2)",
    "cudnn": "fused kernel, driver-API launch",
    "auto": "SDPA's own pick",
}


@piece("glance")
def glance(build: Build):
    rows = []
    for name in ladder():
        link = f"[{STAGES[name].title}]({name}.md)"
        if name in build.problems:
            rows.append((link, "capture not usable", *["—"] * 5, escape(build.problems[name])))
            continue
        s = build.summary(name)
        if "unavailable" in s:
            rows.append((link, tables.NOT_RUN, *["—"] * 5, tables.why_unavailable(s["unavailable"])))
            continue
        rows.append((link, s["ops_per_forward"], per_forward(build, s, DEVICE), per_forward(build, s, CPU), f"{100 * oplist.gaps(s).idle_share:.0f} %", f"{device_tflops(s):.0f}",
                     f"{s['rel_err']:.1e}", GISTS[name]))
    return tables.table(
        ["stage", "ops / forward", "device time / forward (profiler)", "CPU time / forward (profiler)", "GPU idle (of span, profiler)", "TFLOP/s (causal, device time)",
         "rel. error vs fp64", "in short"], rows, "lrrrrrr") + (
        f"\n\nShape {dims(DEFAULT_SHAPE)} (the post's), bf16, causal; each stage's capture, its own run.")


@piece("glance-a100")
def glance_a100(build: Build):
    """Each rung here beside the post's A100 figures: ops, device time, their ratio, CPU time."""
    rows, memset_apart = [], []  # the rungs whose count is the post's plus their Memsets
    for name in ladder():
        if name in build.problems or build.is_unavailable(name):
            continue
        s, ref = build.summary(name), hardware.FIGURES[name]
        memsets = sum(op["kind"] == "memset" for op in s["ops"])
        if memsets and ref["ops"] is not None and s["ops_per_forward"] - memsets == ref["ops"]:
            memset_apart.append(short(name))
        rows.append((f"[{STAGES[name].title}]({name}.md)", s["ops_per_forward"], "—" if ref["ops"] is None else ref["ops"],
                     per_forward(build, s, DEVICE), us(ref["forward_us"]), _a100_ratio(s),
                     per_forward(build, s, CPU), us(ref["cpu_us"])))
    gpu = gpu_name(build)
    return (tables.table(["stage", f"ops ({gpu})", "ops (A100)", f"device time / forward ({gpu}, profiler)",
                          "forward CUDA time (A100, profiler)", f"A100 ÷ {gpu}", f"CPU time / forward ({gpu}, profiler)",
                          "CPU time (A100, profiler)"], rows, "lrrrrrrr")
            + f"\n\nA100 columns: the figures published in [*{hardware.SOURCE_TITLE}*]({hardware.SOURCE}) "
              f"({hardware.POST_GPU.name}), quoted, not measured by us; a dash where the post gives none."
            + (f" The {gpu}'s op count less its Memset (a small fill the library launches before its kernel) is the "
               f"post's count for {listed(memset_apart)}; the post does not say whether it counted memsets."
               if memset_apart else ""))


@piece("a100-kernels")
def a100_kernels(build: Build):
    """The kernel the post saw on the A100 beside the longest matmul or attention kernel of ours, per stage."""
    rows = []
    for name, theirs in hardware.KERNELS.items():
        if name in build.problems:
            continue
        compute = [op for op in summary.kernels(build.summary(name))  # the matmul or attention kernel
                   if not kernel_names.explain(op["name"])["library"].startswith(("ATen", "CUDA runtime"))]
        ours = summary.longest(compute)["name"]
        rows.append((f"[{STAGES[name].title}]({name}.md)", tables.kernel(theirs) if " " not in theirs
                     else escape(theirs), tables.kernel(ours),
                     kernel_names.explain(ours)["arch"] or "—"))
    return (tables.table(["stage", "A100 kernel (the post)",
                          f"{gpu_name(build)} kernel (ours: its longest matmul or attention kernel)",
                          "arch in our kernel's name"], rows)
            + f"\n\nA100 kernels as published in [*{hardware.SOURCE_TITLE}*]({hardware.SOURCE}).")
