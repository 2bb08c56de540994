"""The `align` piece: two captures compared as `python -m attnprof diff` compares them (compare.py),
rendered as Markdown: times, the stream verdict, TFLOP/s and numerics side by side, then the op lists aligned by
kernel family. Names from a reader's code or from kernels are escaped (tables.cell, tables.kernel)."""
from __future__ import annotations

from ...analysis import compare
from ...text import escape, shape, us
from ..render import tables
from ..build import Build
from ..registry import piece

def markdown(d: dict) -> str:
    a, b = d["a"], d["b"]
    name = lambda m: f"<code>{escape(m['record'])}</code>"
    ops = [(compare.SIGN[r["status"]], r["a_index"] or "", r["b_index"] or "", escape(r["family"]),
            tables.kernel(r["a_name"]) if r["a_name"] else "", us(r["a_us"]) if r["a_name"] else "",
            tables.kernel(r["b_name"]) if r["b_name"] else "", us(r["b_us"]) if r["b_name"] else "")
           for r in d["ops"]]
    c = d["counts"]
    return (tables.table(["", f"A: {name(a)}", f"B: {name(b)}", "B ÷ A"], compare.metric_rows(d), "lrrr")
            + f"\n\nA is *{escape(a['title'])}*, B is *{escape(b['title'])}*; {_both(a, b)}. "
              f"Device and CPU time per forward come from the profiler (the median "
              f"profiled forward); one call is the CUDA-event median over single calls. A stream of calls is launch-bound when, "
              f"unprofiled, back to back runs at the CPU's enqueue pace rather than a CUDA-graph replay's "
              f"([the rule](launch-bound.md)). Relative error of A against "
              f"{escape(a['reference'])}, of B against {escape(b['reference'])}.{_streams(a, b)}\n\n"
            + tables.table(["", "A #", "B #", "family", "A op", "time", "B op", "time"], ops, "lrrllrlr")
            + f"\n\nOp lists aligned by kernel family (the library that made a kernel; Memcpy, Memset): "
              f"{c['same']} the same (=), {c['changed']} changed to another kernel of the family (~), "
              f"{c['removed']} only in A (−), {c['added']} only in B (+). Hover a kernel for its full name.")


def _streams(a, b) -> str:
    """What a stream cell cannot say: where GPU only is the profiler's estimate and why, or why there is no verdict."""
    return "".join(f" A stream of calls of {tag}: {escape(m['stream_note'])}." for tag, m in (("A", a), ("B", b))
                   if m["stream_note"])


def _both(a, b) -> str:
    """Where and at what shape the two ran, said once when it is the same."""
    where = (f"both on {escape(a['device'])}" if a["device"] == b["device"]
             else f"on {escape(a['device'])} and {escape(b['device'])}")
    sa, sb = f"{shape(a['shape'])} {escape(a['dtype'])}", f"{shape(b['shape'])} {escape(b['dtype'])}"
    return f"{where}, {'at ' + sa if sa == sb else f'at {sa} and {sb}'}"


@piece("align", captures=2)
def align(build: Build, a, b):
    return markdown(compare.diff(build.summary(a), build.summary(b)))
