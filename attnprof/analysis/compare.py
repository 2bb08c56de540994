"""Two captures compared: `python -m attnprof diff A B`, the `align` piece and the notebooks' diff.

A and B are records (`flash`, `my.attention`: looked for in the reader's captures, then the site's set) or
paths of captures. The op lists are aligned by kernel family (the kind and library that made it): an op of
the same family at the same place is the same op or a changed one; the rest were removed from A or added in
B. Beside them: device and CPU time per forward, the stream verdict, TFLOP/s and numerics. Pure (no torch).
"""
from __future__ import annotations

import textwrap
from difflib import SequenceMatcher
from pathlib import Path

from . import kernel_names, oplist, records, timing
from ..model import own, store
from ..text import shape, short, text_table, us
from .flops import device_tflops
from .oplist import KIND_LABEL


def folders(captures=None) -> list[Path]:
    """Where a record is looked for: the reader's captures (`--captures`; attnprof-captures/), then the site's."""
    mine, site = Path(captures or own.DEFAULT_OUT), Path(store.CAPTURES)
    return [site] if mine.resolve() == site.resolve() else [mine, site]


NO_CAPTURE = "give a record such as flash or window.flex, or the path of a capture's .json"


def locate(arg: str, captures=None) -> tuple[str, Path]:
    """(record, folder) of a capture named by its record or by the path of its summary JSON. A record is
    looked for in `folders(captures)`; found in two of them, it is one line naming both files."""
    path = Path(arg)
    if arg.endswith(".json"):
        if not path.is_file():
            raise FileNotFoundError(f"no capture {arg!r}: give a record such as flash, or the path of a capture's .json")
        return path.name.removesuffix(".json"), path.parent
    if "/" in arg or arg.startswith("."):
        raise ValueError(f"bad record {arg!r}: give a record such as flash or my.attention, or the path of a "
                         f"capture's .json")
    where = folders(captures)
    found = [f for f in where if store.summary_path(f, arg).is_file()]
    if len(found) > 1:
        raise ValueError(f"two captures are named {arg!r}: {' and '.join(str(store.summary_path(f, arg)) for f in found)}"
                         f"; give the path of the one you mean")
    if not found:
        try:
            fix = records.kind_of(arg).fix(arg)
        except ValueError:  # not a name any record has
            raise ValueError(f"no capture {arg!r}: {NO_CAPTURE}") from None
        places = " nor ".join(f"{f}/" for f in where)
        raise store.CaptureMissing(f"no capture {arg!r} ({arg}.json is {'in neither' if len(where) > 1 else 'not in'} "
                                   f"{places}): {fix}")
    return arg, found[0]


def load(arg: str, captures=None) -> dict:
    """A usable capture (present, with its trace, not unavailable), read as the pages read it; one line when it is not."""
    record, where = locate(arg, captures)
    try:
        summary = records.load_summary(record, where)
    except ValueError as e:
        if "unknown stage" in str(e) or "not a capture name" in str(e):
            raise ValueError(f"no capture {arg!r}: {NO_CAPTURE}") from None
        raise
    if "unavailable" in summary:
        raise ValueError(f"capture {record!r} is a record that it could not run: {summary['unavailable']}")
    return summary


def family(op: dict) -> str:
    """A kernel's family is the library that made it (e.g. "ATen softmax"); a copy or fill is Memcpy or Memset."""
    return kernel_names.explain(op["name"])["library"] if op["kind"] == "kernel" else KIND_LABEL[op["kind"]]


def align(a: dict, b: dict) -> list[dict]:
    """One row per op of either list, in launch order: same, changed, removed or added (1-based indices)."""
    fa, fb = [family(op) for op in a["ops"]], [family(op) for op in b["ops"]]
    rows = []
    def row(status, i=None, j=None):
        op_a = a["ops"][i] if i is not None else None
        op_b = b["ops"][j] if j is not None else None
        rows.append({"status": status, "family": family(op_a or op_b),
                     "a_index": None if i is None else i + 1, "b_index": None if j is None else j + 1,
                     "a_name": op_a and op_a["name"], "b_name": op_b and op_b["name"],
                     "a_us": op_a and op_a["duration_us"], "b_us": op_b and op_b["duration_us"]})
    for tag, i1, i2, j1, j2 in SequenceMatcher(a=fa, b=fb, autojunk=False).get_opcodes():
        if tag == "equal":
            for i, j in zip(range(i1, i2), range(j1, j2)):
                row("same" if a["ops"][i]["name"] == b["ops"][j]["name"] else "changed", i, j)
            continue
        for i in range(i1, i2):
            row("removed", i=i)
        for j in range(j1, j2):
            row("added", j=j)
    return rows


def metrics(s: dict) -> dict:
    """What diff sets side by side; the stream verdict is the capture's own (timing.record_stream), with how GPU
    only was had (`stream_gpu_only`) and what its cell cannot say (`stream_note`)."""
    g = oplist.gaps(s)
    st = timing.record_stream(s)
    label, note = st.label, st.note
    if not decided(st):
        label = f"{label} (within {timing.HOST_MARGIN:g}×)"
        note = "; ".join(filter(None, [note, (
            f"{st.verdict} on this host by less than the {timing.HOST_MARGIN:g}× margin that decides it (back to back "
            f"{us(st.back_to_back.median)}, GPU only {us(st.gpu_only.median)}, CPU enqueue {us(st.enqueue.median)} per "
            f"call). A host whose CPU enqueues "
            f"at another pace may give another verdict")]))
    return {"record": s["record"], "title": s.get("title", s["stage"]), "device": s["device"], "shape": s["shape"],
            "dtype": s["dtype"], "ops_per_forward": s["ops_per_forward"],
            "device_us": s["forward_device_us"], "cpu_us": s["cpu_forward_us"], "event_median_us": s.get("event_median_us"),
            "gpu_idle_share": g.idle_share, "stream": st.verdict, "stream_gpu_only": st.basis,
            "stream_label": label, "stream_note": note, "stream_decided": decided(st),
            "tflops": None if "function" in s else device_tflops(s), "rel_err": s.get("rel_err"),
            "reference": s.get("reference", "attention in float64 (causal)"),
            "event_reps": s.get("settings", {}).get("event_reps")}


def decided(st: timing.Stream) -> bool:
    """Whether a capture's stream verdict is decided (timing.Verdict.decided); one naming no side always is."""
    if st.verdict not in ("GPU-bound", "launch-bound"):
        return True
    return timing.Verdict(st.verdict, None, st.back_to_back, st.gpu_only, st.enqueue, None).decided


def diff(a: dict, b: dict) -> dict:
    """The whole comparison, as `diff --json` prints it."""
    rows = align(a, b)
    ma, mb = metrics(a), metrics(b)
    return {"a": ma, "b": mb, "ops": rows,
            "counts": {s: sum(r["status"] == s for r in rows) for s in ("same", "changed", "removed", "added")},
            "ratios": {k: mb[k] / ma[k] if ma[k] and mb[k] is not None else None for k in ("device_us", "cpu_us", "event_median_us", "tflops")}}


METRIC_ROWS = [  # (label, key, format)
    ("device ops / forward", "ops_per_forward", str),
    ("device time / forward (profiler)", "device_us", None),
    ("CPU time / forward (profiler)", "cpu_us", None),
    ("CUDA-event median, one call", "event_median_us", None),
    ("GPU idle (of span)", "gpu_idle_share", lambda x: f"{100 * x:.0f} %"),
    ("a stream of calls", "stream_label", str),
    ("TFLOP/s (causal, device time)", "tflops", lambda x: "—" if x is None else f"{x:.0f}"),
    ("rel. error vs float64", "rel_err", lambda x: "—" if x is None else f"{x:.1e}"),
]


SIGN = {"same": "=", "changed": "~", "removed": "−", "added": "+"}  # an aligned op's status, as one mark


def metric_rows(d: dict) -> list[tuple]:
    """(label, A's value, B's value, B ÷ A where it has one) for every row of METRIC_ROWS."""
    return [(label, (fmt or us)(d["a"][key]), (fmt or us)(d["b"][key]),
             f"{d['ratios'][key]:.2f}×" if d["ratios"].get(key) is not None else "") for label, key, fmt in METRIC_ROWS]


def text(d: dict, width: int = 100) -> str:
    """The comparison for a terminal, no line longer than `width` characters."""
    a, b = d["a"], d["b"]
    head = [short(f"{tag}  {m['record']}: {m['title']} · {m['device']} · {shape(m['shape'])} {m['dtype']}", width)
            for tag, m in (("A", a), ("B", b))]
    op = lambda name, t: "" if name is None else f"{short(kernel_names.label(name, 20), 20)} {us(t)}"
    rows = [(r["a_index"] or "", r["b_index"] or "", SIGN[r["status"]], short(r["family"], 22),
             op(r["a_name"], r["a_us"]), op(r["b_name"], r["b_us"])) for r in d["ops"]]
    c = d["counts"]
    lines = [
        *head, "",
        text_table(["", "A", "B", "B ÷ A"], metric_rows(d)), "",
        f"Op lists aligned by kernel family: {c['same']} same (=), {c['changed']} changed (~), "
        f"{c['removed']} removed (−), {c['added']} added (+)",
        text_table(["A#", "B#", "", "family", "A op, time", "B op, time"], rows),
        "",
        "Times per forward: profiler device time (median profiled forward), its CPU time, and the CUDA-event",
        f"median of {a['event_reps'] or 'the'} single calls. A stream of calls: launch-bound when back to back runs at",
        "the CPU's enqueue pace, GPU-bound when at a CUDA-graph replay's (unprofiled; analysis/timing.py).",
        *(short(f"Numerics of {tag}: relative error against {m['reference']}.", width) for tag, m in (("A", a), ("B", b))),
        *(line for tag, m in (("A", a), ("B", b)) if m["stream_note"]
          for line in textwrap.wrap(f"A stream of calls of {tag}: {m['stream_note']}.", width)),
    ]
    return "\n".join(line.rstrip() for line in "\n".join(lines).split("\n"))
