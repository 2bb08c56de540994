"""The pieces a chapter can ask for, by name: `<!-- attnprof: ops naive mark=Memcpy -->` and so on.

Each piece is a function of committed captures that returns Markdown. A capture that is missing,
corrupt or stale renders as a warning box naming the recapture command (the strict build has already
failed on it by then).
"""
from __future__ import annotations

import html
from functools import lru_cache

from .. import a100, names, store, trace
from . import render
from ..flops import causal_flops
from ..stages import LADDER, PROVIDERS, STAGES


@lru_cache(maxsize=None)
def summary(stage: str) -> dict:
    return store.load_summary(stage)


def is_unavailable(stage: str) -> bool:
    return "unavailable" in summary(stage)


@lru_cache(maxsize=None)
def trace_of(stage: str) -> dict:
    return trace.load(store.trace_path(store.CAPTURES, stage))


def trace_svg(stage: str) -> str:
    return render.trace_svg(summary(stage), trace_of(stage))


def device_properties(stage: str) -> dict:
    return trace_of(stage)["deviceProperties"][0]


def causal_tflops(s: dict) -> float:
    """TFLOP/s of a captured forward: causal FLOPs over its CUDA-event median."""
    return causal_flops(s["shape"]) / (s["event_median_us"] * 1e-6) / 1e12


def _stamp(stage):
    return render.stamp_md(summary(stage))


def _table(stage):
    return render.key_averages_md(summary(stage))


def _ops(stage, mark=None):
    return render.ops_md(summary(stage), mark)


def _diff(a, b):
    return render.ops_diff_md(summary(a), summary(b))


def _trace(stage):
    return (f"![One {stage} forward: CPU ops above, launches, GPU ops below](figures/{stage}-trace.svg)\n\n"
            f"*One forward of `{stage}` from the committed trace. Numbers match the op list; hover a bar "
            f"for its full name and duration.*")


def _download(stage):
    s = summary(stage)
    title = f"{s['title']}: {s['device']}, {' × '.join(map(str, s['shape']))}, {s['dtype']}"
    return (f"[:material-chart-timeline: Open in Perfetto](captures/{stage}.trace.json.gz)"
            f"{{ .md-button .attnprof-perfetto data-title=\"{html.escape(title, quote=True)}\" }} "
            f"[:material-download: {stage}.trace.json.gz](captures/{stage}.trace.json.gz){{ .md-button }} "
            f"[summary JSON](captures/{stage}.json)\n\n"
            f"The whole profile: {len(s['ops_per_forward_each'])} annotated forwards. *Open in Perfetto* hands "
            f"this file to [ui.perfetto.dev](https://ui.perfetto.dev) in a new tab; the file can also be opened "
            f"there by hand (*Open trace file*; it reads the gzipped file as it is) or in `chrome://tracing`. "
            f"Search for `attention_forward` to find the annotated forwards; press `f` to zoom to a selection.")


VALUES = {
    "ops": lambda s: str(s["ops_per_forward"]),
    "device_time": lambda s: render.us(s["forward_device_us"]),
    "event_median": lambda s: render.us(s["event_median_us"]),
    "cpu_time": lambda s: render.us(s["cpu_forward_us"]),
    "rel_err": lambda s: f"{s['rel_err']:.1e}",
    "device": lambda s: s["device"],
    "backend_ran": lambda s: names.fingerprint(op["name"] for op in s["ops"]),
    "sdpa_choice": lambda s: s["sdpa_choice"],
    "occupancy": lambda s: ", ".join(f"{r['occupancy_pct']:.1f} %" for r in
                                     render.footprint_rows(s, device_properties(s["stage"]))),
    "peak_memory": lambda s: f"{s['peak_extra_bytes'] / 2**20:.0f} MiB",
}


def _value(stage, field):
    """One number from a capture, inline in prose, so no figure in the text is typed by hand."""
    if field not in VALUES:
        raise KeyError(f"unknown value {field!r} (known: {', '.join(VALUES)})")
    return VALUES[field](summary(stage))


def _footprint(stage):
    return render.footprint_md(summary(stage), device_properties(stage))


def _cpu(stage, depth="2"):
    return render.cpu_md(summary(stage), int(depth))


def _kernels(stage):
    """Each distinct kernel of one forward, decoded."""
    seen, rows = set(), []
    for op in summary(stage)["ops"]:
        if op["kind"] != "kernel" or op["name"] in seen:
            continue
        seen.add(op["name"])
        e = names.explain(op["name"])
        rows.append((render.md_kernel(op["name"]), e["library"], render.UNIT_LABEL[e["math_unit"]], e["dtype"] or "—", e["arch"] or "—",
                     e["tile"] or "—", render.md_cell(e["summary"])))
    return render.md_table(["kernel", "library", "math unit", "dtype", "arch", "tile", "what it is"], rows)


def _dispatch(stage):
    """What SDPA's dispatcher said for these inputs, and which backend the kernels show ran."""
    s = summary(stage)
    rows = [(b, "yes" if e["eligible"] else "no", render.md_cell("; ".join(e["reasons"])) or "—")
            for b, e in s["eligibility"].items()]
    ran = names.fingerprint(op["name"] for op in s["ops"])
    return (render.md_table(["fused backend", "eligible for these inputs", "PyTorch's reasons (can_use_*, debug)"], rows)
            + f"\n\nLeft free, the dispatcher picks **{s['sdpa_choice']}** (`torch._fused_sdp_choice`). "
              f"The kernels of this capture show that **{ran}** ran.")


def _compare(*records):
    """Several captures side by side: what ran, how long, how fast, how accurate."""
    rows = []
    for record in records:
        s = summary(record)
        title = f"{STAGES[s['stage']].title}"
        if "unavailable" in s:
            rows.append((title, "not available on this machine", "—", "—", "—", "—", "—", render.md_cell(s["unavailable"])))
            continue
        kernels = [op["name"] for op in s["ops"] if op["kind"] == "kernel"]
        main = max((op for op in s["ops"] if op["kind"] == "kernel"), key=lambda op: op["duration_us"])
        rows.append((title, render.md_kernel(main["name"]), s["ops_per_forward"], render.us(s["forward_device_us"]),
                     render.us(s["event_median_us"]), f"{causal_tflops(s):.0f}", f"{s['rel_err']:.1e}",
                     f"{len(kernels)} kernel(s); layout {s.get('layout', 'BHSD')}"))
    b, h, n, d = summary(records[0])["shape"]
    return (render.md_table(["stage", "longest kernel", "ops / forward", "device time / forward", "CUDA-event median",
                             "TFLOP/s (causal, event median)", "rel. error vs fp64", "notes"], rows,
                            ["---", "---", "---:", "---:", "---:", "---:", "---:", "---"])
            + f"\n\nShape B={b}, H={h}, S={n}, D={d}, bf16, causal.")


def _providers(problems):
    """Every third-party provider: where it comes from, its layout, and whether it ran here."""
    rows = []
    for name in PROVIDERS:
        st = STAGES[name]
        if name in problems:
            status = f"capture not usable: {render.md_cell(problems[name])}"
        elif "unavailable" in summary(name):
            status = f"not available on this machine: {render.md_cell(summary(name)['unavailable'])}"
        else:
            status = "ran on this machine"
        rows.append((st.title, st.provider, f"`snippets/{st.snippet}.py`", st.layout, status))
    return render.md_table(["provider", "from", "code", "layout it takes", "status"], rows)


def _compile(record):
    s = summary(record)
    return (f"First call (compilation included): **{s['first_call_ms'] / 1000:.2f} s**; steady state: "
            f"**{render.us(s['event_median_us'])}** per forward (CUDA-event median of "
            f"{s['settings']['event_reps']} calls after {s['settings']['warmup_calls']} warm-up calls).")


LESSONS = {
    "naive": "one kernel per line of Python, plus a hidden copy from the out-of-place masked_fill",
    "inplace": "in place removes the copy; the N×N scores still make several trips through memory",
    "math": "SDPA's reference path: upcasts to fp32, rebuilds the mask every call, many small kernels",
    "efficient": "one fused kernel; the N×N matrix never reaches memory",
    "flash": "one fused FlashAttention-2 kernel, low occupancy by design",
    "cudnn": "cuDNN's fused kernel, launched through the driver API",
    "auto": "what SDPA picks by itself on this GPU",
}


def _glance(problems):
    rows = []
    for name in LADDER:
        stage = STAGES[name]
        link = f"[{stage.title}]({name}.md)"
        if name in problems:
            rows.append((link, "capture not usable", *["—"] * 8, render.md_cell(problems[name])))
            continue
        s, ref = summary(name), a100.FIGURES[name]
        if "unavailable" in s:
            rows.append((link, "not available here", *["—"] * 8, render.md_cell(s["unavailable"])))
            continue
        ratio = f"{ref['forward_us'] / s['forward_device_us']:.1f}×" if ref["forward_us"] else "—"
        rows.append((link, s["ops_per_forward"], render.us(s["forward_device_us"]), render.us(s["event_median_us"]),
                     render.us(s["cpu_forward_us"]), f"{causal_tflops(s):.0f}", f"{s['rel_err']:.1e}",
                     ref["ops"] if ref["ops"] is not None else "—", render.us(ref["forward_us"]), ratio, LESSONS[name]))
    return render.md_table(
        ["stage", "ops / forward", "device time / forward", "CUDA-event median", "CPU time / forward",
         "TFLOP/s (causal, event median)", "rel. error vs fp64", "A100 ops (post)", "A100 forward (post)",
         "A100 ÷ H200 time", "lesson"], rows,
        ["---", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---"])


def _a100_kernels(problems):
    """The kernel the post saw on the A100 beside the longest matmul or attention kernel of ours, per stage."""
    rows = []
    for name, theirs in a100.KERNELS.items():
        if name in problems:
            continue
        compute = [op for op in summary(name)["ops"] if op["kind"] == "kernel"  # the matmul or attention kernel
                   and not names.explain(op["name"])["library"].startswith(("ATen", "CUDA runtime"))]
        ours = max(compute, key=lambda op: op["duration_us"])["name"]
        rows.append((f"[{STAGES[name].title}]({name}.md)", render.md_kernel(theirs) if " " not in theirs
                     else render.md_cell(theirs), render.md_kernel(ours),
                     names.explain(ours)["arch"] or "—"))
    return (render.md_table(["stage", "A100 kernel (the post)", "H200 kernel (ours: its longest matmul or attention kernel)",
                             "arch in our kernel's name"], rows)
            + f"\n\nA100 kernels as published in [*{a100.SOURCE_TITLE}*]({a100.SOURCE}).")


PIECES = {
    "stamp": _stamp, "table": _table, "ops": _ops, "diff": _diff, "trace": _trace, "download": _download,
    "value": _value, "footprint": _footprint, "cpu": _cpu, "kernels": _kernels, "dispatch": _dispatch,
    "compare": _compare, "providers": _providers, "compile": _compile, "glance": _glance,
    "a100-kernels": _a100_kernels,
}


def _problem_box(why: str) -> str:
    return f'!!! failure "Capture not usable"\n    {render.md_cell(why)}'


def expand(name: str, args: list[str], problems: dict[str, str]) -> str:
    """Render the piece `name`; a capture listed in `problems` renders as a box naming the fix."""
    from . import findings  # pieces over measurement runs rather than stage captures
    if name in findings.PIECES:
        try:
            return findings.PIECES[name](*args)
        except (FileNotFoundError, ValueError) as e:
            return _problem_box(str(e))
    if name not in PIECES:
        raise KeyError(f"unknown piece {name!r} (known: {', '.join(PIECES)})")
    positional = [a for a in args if "=" not in a]
    keywords = dict(a.split("=", 1) for a in args if "=" in a)
    if name in ("glance", "providers", "a100-kernels"):  # pieces over many captures handle problems themselves
        return PIECES[name](problems)
    records = positional if name in ("compare", "diff") else positional[:1]
    bad = [r for r in records if r in problems]
    if bad:
        return "**(capture not usable: see the box above)**" if name == "value" else _problem_box(problems[bad[0]])
    if name not in ("stamp", "value", "compare") and is_unavailable(records[0]):
        return render.unavailable_md(summary(records[0]))
    return PIECES[name](*positional, **keywords)
