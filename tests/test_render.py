"""Rendering from captures: escaping of real kernel names, op-list diffs, the SVG timeline, the
piece registry and the Markdown extension."""
import xml.etree.ElementTree as ET

import markdown
import pytest

from attnprof.model import store
from attnprof.analysis import records
from attnprof.analysis import trace
from attnprof.site import extension
from attnprof.site.render import plots, tables
from attnprof.text import escape
from attnprof.site.build import Build
from attnprof.site.registry import expand
from attnprof.model.procedure import LABEL

MASKED_FILL = next(op["name"] for op in records.load_summary("naive")["ops"] if "masked_fill" in op["name"])


@pytest.fixture(scope="module")
def build():
    return Build(problems={})


def test_table_cells_escape_html_and_pipes():
    cell = escape("void f<a|b, c&d>(x) ::g")
    assert "<" not in cell and ">" not in cell and "|" not in cell
    assert "&lt;a&#124;b, c&amp;d&gt;" in cell
    code = tables.kernel(MASKED_FILL)
    assert code.count("<code") == 1 and "&lt;" in code.split('"')[1]  # the full name survives in the tooltip


def test_table_aligns_columns_as_asked():
    md = tables.table(["a", "b", "c"], [(1, 2, 3)], "rl")
    assert md.splitlines()[1] == "| ---: | --- | --- |"


def test_ops_table_has_one_row_per_op_and_marks_the_memcpy(build):
    md = tables.ops(build.summary("naive"), mark="Memcpy")
    rows = [l for l in md.splitlines() if l.startswith("| ") and l[2:3].isdigit()]
    assert len(rows) == build.summary("naive")["ops_per_forward"]
    marked = [r for r in rows if "⟵" in r]
    assert len(marked) == 1 and "Memcpy DtoD" in marked[0]
    assert all(r.count(" | ") == 6 for r in rows)  # no stray pipes from kernel names


def test_diff_naive_to_inplace_is_the_memcpy(build):
    md = expand(build, "diff", ["naive", "inplace"])
    lines = [l for l in md.splitlines() if l.startswith("| −") or l.startswith("| +")]
    assert len(lines) == 1 and "Memcpy" in lines[0] and "saved" in md


def test_timeline_is_well_formed_and_labels_every_op(h200, build):
    """Both drawings (wide, and narrow for a phone) list every op in a legend row that points at it (data-op, which
    names.js follows to the bar), its name as the profiler prints it; the wide drawing names each op once in its
    bar's hover text, readable name and time on the first line and the full name under it, which names.js lends
    the narrow drawing's bars, bar for bar (a full name is sent once)."""
    from attnprof.analysis import kernel_names
    ns = "{http://www.w3.org/2000/svg}"
    drawings = ET.fromstring(plots.timeline(build.summary("naive"), build.forwards("naive")[1])).findall(ns + "svg")
    assert [d.get("class") for d in drawings] == ["attnprof-wide", "attnprof-narrow"]
    ops = trace.median_forward(trace.forwards(h200("naive"), LABEL)).ops
    for root in drawings:
        bars = [e for e in root.iter(ns + "rect") if e.get("class") == "attnprof-gpu-op"]
        assert len(bars) == len(ops)
        rows = [g for g in root.iter(ns + "g") if g.get("class") == "attnprof-legend"]
        assert [g.get("data-op") for g in rows] == [str(i) for i in range(1, len(ops) + 1)]
        legend = ["".join(g.find(ns + "text").itertext()) for g in rows]
        assert all(text.endswith(kernel_names.printed(op.name)) for text, op in zip(legend, ops)), legend
        if root.get("class") == "attnprof-narrow":
            assert all(b.find(ns + "title") is None for b in bars)
            continue
        titles = [e.find(ns + "title").text for e in bars]
        assert [t.split(".")[0] for t in titles] == [str(i) for i in range(1, len(ops) + 1)]
        masked = next(t for t in titles if "masked_fill" in t)
        head, full = masked.split("\n")
        assert head.endswith("µs") and "[masked_fill]" in head and full.startswith("void at::native::")


def test_problem_captures_render_as_a_box():
    md = expand(Build(problems={"naive": "capture 'naive' is stale: run it"}), "ops", ["naive"])
    assert md.startswith('!!! failure') and "stale" in md


def test_what_a_piece_declares_decides_how_an_unusable_or_unavailable_record_renders():
    stale = Build(problems={"naive": "capture 'naive' is stale: run it"})
    assert expand(stale, "ops", ["naive"]).startswith("!!! failure")  # a block piece: the box with the reason
    assert expand(stale, "value", ["naive", "scores_size"]) == "**(capture not usable: see the box above)**"  # inline
    committed = Build(problems={})
    assert expand(committed, "ops", ["hub"]).startswith('!!! warning "Did not run"')  # reads a capture that did not run
    assert "Captured on" in expand(committed, "stamp", ["hub"])  # declared to render for one
    with pytest.raises(TypeError, match="needs a record name"):
        expand(committed, "ops", [])


def test_an_unavailable_stage_renders_a_note_not_a_table(build):
    assert expand(build, "ops", ["hub"]).startswith('!!! warning "Did not run"')
    assert "Captured on" in expand(build, "stamp", ["hub"])


def md(build, text):
    return markdown.markdown(text, extensions=["admonition", extension.PiecesExtension(build=build)])


def test_extension_inlines_the_trace_svg_and_indents_inside_an_admonition(build):
    html = md(build, '!!! note "n"\n    <!-- attnprof: trace naive -->\n\nS: <!-- attnprof: value naive ops -->.')
    assert '<div class="admonition note">' in html and html.count("<svg") == 2 and "<title>" in html  # wide, narrow
    assert "<svg" in html and "&lt;svg" not in html  # raw HTML, not escaped into text
    assert f"S: {build.summary('naive')['ops_per_forward']}." in html and "attnprof:" not in html


def test_extension_names_an_unknown_piece(build):
    with pytest.raises(extension.PieceError, match="unknown piece 'nope'"):
        md(build, "<!-- attnprof: nope naive -->")


def test_timeline_numbers_every_op_once_and_no_labels_overlap(h200, build):
    """Each GPU op's number is in its bar or in exactly one label under the lane (a range for neighbours
    too close to label apart), and the labels under the lane never overlap."""
    import re
    svg = plots.timeline(build.summary("math"), build.forwards("math")[1])
    ns = "{http://www.w3.org/2000/svg}"
    n = len(trace.median_forward(trace.forwards(h200("math"), LABEL)).ops)
    for figure in ET.fromstring(svg).findall(ns + "svg"):  # the wide drawing and the phone's
        texts = [(float(t.get("x")), float(t.get("y")), "".join(t.itertext()), t.get("fill")) for t in figure.iter(ns + "text")]
        inside = {int(m.group(1)) for x, y, s, fill in texts if fill == "white" and (m := re.match(r"^(\d+)\b", s))}
        below = [(x, s) for x, y, s, fill in texts if fill != "white" and re.fullmatch(r"\d+(–\d+)?", s)]  # a bare number in a bar is inside
        covered = set()
        for _, s in below:
            a, _, b = s.partition("–")
            covered |= set(range(int(a), int(b or a) + 1))
        assert covered | inside == set(range(1, n + 1)) and not covered & inside
        boxes = sorted((x - len(s) * plots.CHAR_W / 2, x + len(s) * plots.CHAR_W / 2) for x, s in below)
        assert all(b[0] >= a[1] for a, b in zip(boxes, boxes[1:])), boxes
        assert figure.get("font-size") == "12" and figure.get("fill") == "currentColor"  # legible, in the page's colour


def test_label_groups_merge_only_what_would_collide():
    assert plots.label_groups([10, 100, 200]) == [[0], [1], [2]]
    groups = plots.label_groups([10, 12, 14, 16, 200])
    assert groups[-1] == [4] and sum(len(g) for g in groups) == 5


def test_timeline_launch_lines_stay_clear_of_the_time_axis(h200, build):
    svg = plots.timeline(build.summary("math"), build.forwards("math")[1])
    ns = "{http://www.w3.org/2000/svg}"
    for root in ET.fromstring(svg).findall(ns + "svg"):  # wide, then narrow
        connectors = [l for l in root.iter(ns + "line") if l.get("stroke-dasharray") == "2,2"]
        axis = [t for t in root.iter(ns + "text") if (t.text or "").endswith(("µs", "ms"))]
        assert connectors and axis
        assert max(float(l.get("y2")) for l in connectors) < min(float(t.get("y")) for t in axis) - 20


def test_a_piece_that_fails_fails_the_build_and_a_missing_run_is_a_box(tmp_path, monkeypatch):
    """Only a record that is missing or unusable may render as a box; any other error is raised."""
    import shutil
    from attnprof.site import registry
    monkeypatch.setitem(registry.PIECES, "broken", {})
    registry.piece("broken")(lambda build: max([]))
    with pytest.raises(ValueError):
        expand(Build(), "broken", [])
    folder = tmp_path / "captures"
    shutil.copytree(store.CAPTURES, folder)
    (folder / "run-fastest.json").unlink()
    box = expand(Build(folder), "fastest", [])
    assert box.startswith('!!! failure') and "run-fastest.json is missing" in box


def test_a_stages_gaps_line_reads_its_capture_alone():
    """A stage's gaps line gives its profiled gaps and points to the chapter that times a stream: it reads no
    run, so an unusable timing run changes nothing in it."""
    why = "record of run 'timing' is missing (run-timing.json): run it"
    with_run = expand(Build(problems={}), "gaps", ["naive"])
    without = expand(Build(problems={"run-timing": why}), "gaps", ["naive"])
    assert without == with_run and "(launch-bound.md) times a stream" in with_run and "bound**" not in with_run


def test_a_name_wraps_at_its_joints_on_a_phone_and_nowhere_else():
    """A narrow cell breaks a name after `::` and `_` and between camelCase words, never inside a word the
    chapters teach (`f32f32`, `DtoD`)."""
    from attnprof.site.render import tables
    assert "cuda<wbr>Launch<wbr>Kernel" in tables.kernel("cudaLaunchKernel")
    assert "aten::<wbr>transpose" in tables.kernel("aten::transpose")
    assert "Memcpy DtoD" in tables.kernel("Memcpy DtoD (Device -> Device)")
    assert "f32f32" in tables.kernel("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas")
