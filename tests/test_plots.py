"""The charts as a reader sees them: one colour per path on every chart, legends a phone shows, tick
labels in plain units, labels no series crosses, overlapping series said to overlap, timelines that
keep their size."""
import re
import xml.etree.ElementTree as ET

import pytest

from attnprof.site.pieces import runs as findings
from attnprof.site.render import plots
from attnprof.site.build import Build
from attnprof.site.render.svg import PATH_COLOR, INK
from attnprof.model.stages import STAGES
from attnprof.model.snippets import ROOT

BUILD = Build(problems={})
NS = "{http://www.w3.org/2000/svg}"
PHONE_VIEW = 390 - 2 * 16  # what a 390 px phone shows of a figure before scrolling (the column's padding aside)


def svg_of(name):
    return ET.fromstring(findings.FIGURES[name](BUILD))


def markers(root):
    """{series name: fill} of the data points (the circles that carry a hover title)."""
    out = {}
    for c in root.iter(f"{NS}circle"):
        title = c.find(f"{NS}title")
        if title is not None:
            out.setdefault(title.text.rsplit(": ", 1)[0], set()).add(c.get("fill"))
    return out


def test_a_path_has_one_colour_on_every_chart_and_no_two_paths_share_one():
    seen = {}
    for name in findings.FIGURES:
        for series, fills in markers(svg_of(name)).items():
            assert len(fills) == 1, (name, series, fills)
            seen.setdefault(series, set()).update(fills)
    titled = {STAGES[k].title: k for k in PATH_COLOR if k in STAGES}
    paths = [s for s in seen if s in titled]
    assert len(paths) >= 8  # the sweep's paths, on the scaling charts and the roofline
    for series in paths:
        assert seen[series] == {PATH_COLOR[titled[series]]}, series
    assert len(set(PATH_COLOR.values())) == len(PATH_COLOR)
    flex = markers(svg_of("recompile"))
    assert set().union(*flex.values()) == {PATH_COLOR["flex"]}  # FlexAttention's colour, under another name


def test_the_roof_is_in_the_pages_colour_and_every_point_is_named_beside_it():
    root = svg_of("roofline")
    roof = [p for p in root.iter(f"{NS}path") if p.get("stroke") == INK and p.get("d").count("L") > 2]
    assert len(roof) == 1 and INK not in PATH_COLOR.values()  # the curve; its name's leader is in its colour too
    points = findings._roofline_points(BUILD)
    labels = {t.text: float(t.get("y")) for t in root.iter(f"{NS}text") if t.get("y") and float(t.get("y")) < plots.CHART.height}
    assert {name for name, _, _ in points} <= set(labels)
    fused = sorted(labels[name] for name, intensity, _ in points if intensity == points[-1][1])
    assert len(fused) >= 6 and all(b - a >= 13 for a, b in zip(fused, fused[1:]))  # stacked points, labels apart


@pytest.mark.parametrize("name", list(findings.FIGURES))
def test_the_legend_sits_under_the_plot_and_fits_a_phones_drawing(name):
    """Wide, the legend is under the plot; narrow (a phone's), every row ends inside the drawing and is
    as tall as a tap target, and each series is numbered there as at its line's end."""
    for frame in (plots.CHART, plots.CHART_NARROW):
        root = ET.fromstring(findings.FIGURES[name](BUILD, frame))
        rows = [g for g in root.iter(f"{NS}g") if g.get("class") == "attnprof-legend"]
        assert len(rows) >= len(markers(root))
        baselines = [float(g.find(f"{NS}text").get("y")) for g in rows]
        assert all(b - a == frame.row for a, b in zip(baselines, baselines[1:])), baselines
        for g in rows:
            t = g.find(f"{NS}text")
            text = "".join(t.itertext())
            assert float(t.get("y")) > frame.height - frame.bottom, text
            if frame is plots.CHART_NARROW:
                assert float(t.get("x")) + len(text) * frame.char_w <= plots.NARROW, text
    narrow = ET.fromstring(findings.FIGURES[name](BUILD, plots.CHART_NARROW))
    numbered = {"".join(t.itertext()).split(" ", 1)[0] for g in narrow.iter(f"{NS}g") if g.get("class") == "attnprof-legend"
                for t in g.iter(f"{NS}text") if t.find(f"{NS}tspan") is not None}
    at_ends = {t.text for t in narrow.iter(f"{NS}text") if t.get("font-weight") == "bold" and (t.text or "").isdigit()}
    assert at_ends and at_ends <= numbered, (at_ends, numbered)


def test_time_ticks_read_in_one_unit_with_no_trailing_zeros():
    assert plots.time_ticks(20_000) == [(0, "0 ms"), (2000, "2 ms"), (4000, "4 ms"), (6000, "6 ms"), (8000, "8 ms"),
                                        (10000, "10 ms"), (12000, "12 ms"), (14000, "14 ms"), (16000, "16 ms"),
                                        (18000, "18 ms"), (20000, "20 ms")]
    assert [label for _, label in plots.time_ticks(30.1)] == ["0 µs", "5 µs", "10 µs", "15 µs", "20 µs", "25 µs", "30 µs"]
    assert [label for _, label in plots.time_ticks(3100)][:3] == ["0 ms", "0.5 ms", "1 ms"]


def test_memory_ticks_read_in_mib_and_gib():
    root = svg_of("sweep-memory-d128")
    ticks = [t.text for t in root.iter(f"{NS}text") if t.get("text-anchor") == "end"]
    assert ticks and all(re.fullmatch(r"\d+ (MiB|GiB)", t) for t in ticks), ticks
    assert "64 MiB" in ticks and "1 GiB" in ticks
    assert plots.size_tick(2 ** 36) == "64 GiB" and plots.byte_ticks(2 ** 20, 2 ** 40)[:2] == [2 ** 20, 2 ** 24]


def test_the_timelines_last_tick_label_ends_inside_the_figure():
    for record in ("cudnn_graph", "flash-1x16x256x64", "naive"):
        svg = plots.timeline(BUILD.summary(record), BUILD.forwards(record)[1])
        root = ET.fromstring(svg).find(f"{NS}svg")
        width = float(root.get("viewBox").split()[2])
        ticks = [t for t in root.iter(f"{NS}text") if re.fullmatch(r"[\d.]+ (µs|ms)", t.text or "")]
        assert ticks and not any(".000" in t.text for t in ticks)
        for t in ticks:
            x, w = float(t.get("x")), len(t.text) * plots.CHAR_W
            right = {"start": x + w, "middle": x + w / 2, "end": x}[t.get("text-anchor")]
            assert right <= width, (record, t.text, right, width)


def series_points(root):
    """The drawn series (paths in a colour, not the reference lines), as lists of (x, y) in px."""
    out = []
    for p in root.iter(f"{NS}path"):
        if p.get("stroke") in (None, INK, "none") or not p.get("d", "").startswith("M"):
            continue
        out.append([tuple(map(float, xy.split(","))) for xy in re.findall(r"[ML]([\d.]+,[\d.]+)", p.get("d"))])
    return out


@pytest.mark.parametrize("name", ["decode", "sweep-tflops-d64", "sweep-tflops-d128"])
def test_reference_line_labels_sit_where_no_series_crosses_them(name):
    root = svg_of(name)
    backs = [r for r in root.iter(f"{NS}rect") if "md-default-bg-color" in (r.get("style") or "")]
    dashed = [l for l in root.iter(f"{NS}line") if l.get("stroke-dasharray") == "6,3"]
    assert dashed  # every reference line is in the legend; where no place beside it is clear, only there
    drawn = dict(enumerate(series_points(root)))
    assert drawn
    for r in backs:
        x, y, w, h = (float(r.get(k)) for k in ("x", "y", "width", "height"))
        assert not plots._crosses((x, y, x + w, y + h - 1), drawn), name


def test_crossing_is_detected():
    assert plots._crosses((10, 10, 50, 20), {"a": [(0, 0), (60, 30)]})
    assert not plots._crosses((10, 10, 50, 20), {"a": [(0, 40), (60, 40)]})


def test_series_that_draw_one_line_are_striped_and_said_to_overlap():
    root = svg_of("sweep-memory-d128")
    striped = [p for p in root.iter(f"{NS}path") if p.get("stroke-dashoffset")]
    assert len(striped) == 5 and len({p.get("stroke-dashoffset") for p in striped}) == 5
    assert len({p.get("stroke") for p in striped}) == 5
    assert any("these five overlap" in (t.text or "") for t in root.iter(f"{NS}text"))
    assert plots.overlapping({"a": [(0, 0), (.5, 0)], "b": [(0, .003), (.5, .005)], "c": [(0, .05), (.5, .05)]}) == [["a", "b"]]
    assert not any("overlap" in (t.text or "") for t in svg_of("sweep-tflops-d128").iter(f"{NS}text"))


@pytest.mark.parametrize("name", ["sweep-memory-d128", "sweep-memory-d64"])
def test_a_phone_chart_says_the_same_lines_overlap_as_the_wide_one(name):
    html = plots.chart(lambda frame: findings.FIGURES[name](BUILD, frame))
    said = [[t.text for t in svg.iter(f"{NS}text") if "overlap" in (t.text or "")]
            for svg in ET.fromstring(html).iter(f"{NS}svg")]
    assert len(said) == 2 and said[0] == said[1] and said[0], said


def test_the_rank_timeline_never_shrinks_below_its_drawn_size():
    """Wide, it keeps its drawn size; a phone gets the narrow drawing, fitted to its width with 12 px text."""
    record = "cp-allgather-w2-1x16x32768x128"
    html = plots.ranks_timeline(BUILD.summary(record), plots.rank_forwards(BUILD.summary(record), BUILD.trace(record)))
    wide, narrow = ET.fromstring(html).findall(f"{NS}svg")
    css = (ROOT / "docs" / "stylesheets" / "extra.css").read_text()
    min_width = float(re.search(r"\.attnprof-ranks svg\.attnprof-wide \{ min-width: (\d+)px", css).group(1))
    assert html.startswith('<div class="attnprof-trace attnprof-ranks" data-search-exclude="">')
    assert wide.get("class") == "attnprof-wide" and narrow.get("class") == "attnprof-narrow"
    assert float(wide.get("viewBox").split()[2]) <= min_width and wide.get("font-size") == "12"
    assert float(narrow.get("viewBox").split()[2]) == plots.NARROW <= 390 and narrow.get("font-size") == "12"
    for root in (wide, narrow):
        sizes = {t.get("font-size") for t in root.iter(f"{NS}text")}
        assert sizes == {None}  # every label at the figure's 12 px
        legend = [t for t in root.iter(f"{NS}text") if t.text in {label for _, label in plots.RANK_LANES.values()}]
        assert len(legend) == 3 and all(float(t.get("x")) + len(t.text) * plots.CHAR_W <= PHONE_VIEW for t in legend)


def test_a_trace_has_a_narrow_drawing_whose_lines_fit_it():
    """The phone's drawing of a trace: every line of its heading and legend ends inside its width."""
    html = plots.timeline(BUILD.summary("fa4-1x16x8192x128"), BUILD.forwards("fa4-1x16x8192x128")[1])
    wide, narrow = ET.fromstring(html).findall(f"{NS}svg")
    assert float(wide.get("viewBox").split()[2]) == 1040 and float(narrow.get("viewBox").split()[2]) == plots.NARROW
    for t in narrow.iter(f"{NS}text"):
        if t.get("text-anchor") not in (None, "start"):
            continue
        lines = [s for s in t.findall(f"{NS}tspan") if s.get("x")]  # a wrapped text: a line per tspan, each at its x
        if lines:
            for line in lines:
                assert float(line.get("x")) + len(line.text) * plots.CHAR_W <= plots.NARROW + 2, line.text
        else:
            text = "".join(t.itertext())
            assert float(t.get("x")) + len(text) * plots.CHAR_W <= plots.NARROW + 2, text
    assert len(narrow.findall(f".//{NS}rect[@class='attnprof-gpu-op']")) == BUILD.summary("fa4-1x16x8192x128")["ops_per_forward"]


def test_a_narrow_trace_keeps_its_time_labels_apart():
    """On a phone's 380 px drawing, one tick at least every 80 px, so labels like "125 µs" never touch."""
    for end in (61.0, 210.0, 1163.0, 98_000.0):
        ticks = plots.time_ticks(end, 380)
        assert 2 <= len(ticks) <= 380 // 80 + 1, (end, ticks)
