"""Rendering from captures: escaping of real kernel names, op-list diffs, the SVG picture."""
import xml.etree.ElementTree as ET

from attnprof.site import pieces, render
from attnprof import trace
from tests.conftest import LABEL

MASKED_FILL = next(op["name"] for op in pieces.summary("naive")["ops"] if "masked_fill" in op["name"])


def test_table_cells_escape_html_and_pipes():
    cell = render.md_cell("void f<a|b, c&d>(x) ::g")
    assert "<" not in cell and ">" not in cell and "|" not in cell
    assert "&lt;a&#124;b, c&amp;d&gt;" in cell
    code = render.md_kernel(MASKED_FILL)
    assert code.count("<code") == 1 and "&lt;" in code.split('"')[1]  # the full name survives in the tooltip


def test_ops_table_has_one_row_per_op_and_marks_the_memcpy():
    md = render.ops_md(pieces.summary("naive"), mark="Memcpy")
    rows = [l for l in md.splitlines() if l.startswith("| ") and l[2:3].isdigit()]
    assert len(rows) == pieces.summary("naive")["ops_per_forward"]
    marked = [r for r in rows if "⟵" in r]
    assert len(marked) == 1 and "Memcpy DtoD" in marked[0]
    assert all(r.count(" | ") == 7 for r in rows)  # no stray pipes from kernel names


def test_diff_naive_to_inplace_is_the_memcpy():
    md = pieces.expand("diff", ["naive", "inplace"], problems={})
    lines = [l for l in md.splitlines() if l.startswith("| −") or l.startswith("| +")]
    assert len(lines) == 1 and "Memcpy" in lines[0] and "saved" in md


def test_trace_svg_is_well_formed_and_labels_every_op(h200):
    summary = dict(pieces.summary("naive"))
    svg = render.trace_svg(summary, h200("naive"))
    root = ET.fromstring(svg)
    titles = [t.text for t in root.iter("{http://www.w3.org/2000/svg}title")]
    n = len(trace.median_forward(trace.forwards(h200("naive"), LABEL)).ops)
    assert sum(1 for t in titles if t and t.split(".")[0].isdigit()) == n
    assert any("masked_fill" in t for t in titles if t)


def test_problem_captures_render_as_a_box():
    md = pieces.expand("ops", ["naive"], problems={"naive": "capture of stage 'naive' is stale: run it"})
    assert md.startswith('!!! failure') and "stale" in md
