"""The pages beyond the post, rendered from the committed H200 run records."""
import re
import xml.etree.ElementTree as ET

import pytest

from attnprof.site.claims import published as claims
from attnprof.site.pieces import runs as findings
from attnprof.site.render import plots
from attnprof.site.build import Build

BUILD = Build(problems={})
NS = "{http://www.w3.org/2000/svg}"


@pytest.mark.parametrize("name", list(findings.FIGURES))
def test_every_figure_is_well_formed_svg(name):
    root = ET.fromstring(findings.FIGURES[name](BUILD))
    assert root.tag.endswith("svg") and len(list(root.iter("{http://www.w3.org/2000/svg}path"))) >= 1


def test_line_chart_skips_missing_points_and_says_why():
    svg = plots.line_chart({"a": [(1, 2.0), (2, None)], "b": [(1, 1.0), (2, 3.0)]}, "x", "y", "t")
    root = ET.fromstring(svg)
    markers = [c for c in root.iter(f"{NS}circle") if c.find(f"{NS}title") is not None]
    assert "OOM past the last point" in svg and len(markers) == 3


def test_cost_follows_from_measured_throughput():
    html = findings.cost(BUILD, "32")
    cells = re.findall(r'data-tokens-per-s="([\d.e+]+)">([\d.]+)<', html)
    graphed = [r for r in BUILD.run("decode_step") if "back_to_back_us" in r.get("graph", {})]
    assert graphed  # each decode step also replayed from a CUDA graph: a row of its own
    assert len(cells) == len(BUILD.run("e2e")) + len(BUILD.run("decode_step")) + len(graphed)
    assert "decode, CUDA graph" in html and "launch-bound" in html  # the eager rows say who sets the pace
    for tps, dollars in cells:
        assert float(dollars) == pytest.approx(findings.DEFAULT_PRICE / 3600 / float(tps) * 1e6, abs=1e-3)
    assert 'id="attnprof-price"' in html


def test_claims_table_covers_every_claim_with_a_verdict():
    rows = [l for l in claims.claims(BUILD).splitlines() if l.startswith("| ") and l[2].isdigit()]
    assert len(rows) == 7
    assert all(l.rstrip(" |").split("|")[-1].strip() for l in rows)


def test_fallback_table_names_the_backend_that_ran():
    md = findings.fallback(BUILD)
    assert "fast path" in md and "**math**" in md  # the strided case fell back to math on the H200


def test_verify_table_shows_the_naive_nan():
    md = findings.verify_table(BUILD)
    naive_masked = [l for l in md.splitlines() if l.startswith("| naive") and "| yes |" in l]
    assert naive_masked and all("NaN" in l for l in naive_masked)


def test_fallback_reasons_are_pytorchs_own_words():
    md = findings.fallback_reasons(BUILD)
    assert "does not support non-null attn_mask" in md and "stride 1" in md
    assert "[W" not in md and "Triggered internally" not in md


def test_claims_reuse_the_facts_of_the_tables():
    share = findings.softmax_share(BUILD)
    assert f"{share['time_pct']:.0f} %" in claims.softmax_time(BUILD)[2]
    flash = [x["speedup"] for x in findings.speedups(BUILD) if x["path"] == "flash"]
    assert f"{max(flash):.1f}×" in claims.flash_speed(BUILD)[2]
