"""Nothing a record can smuggle onto a page (issue 40): a payload of markup in every string of a copy of the
records (summaries, runs, counters, a reader's captures, kernel and device names in the traces and the ncu
reports) reaches the built site, `report` and `display` as text, never as an element, an attribute, a script
or a directive; and it is escaped once (the text a reader sees is the payload itself)."""
import csv
import gzip
import io
import json
import shutil
from html.parser import HTMLParser
from pathlib import Path

import markdown
import pytest

from attnprof.analysis import records
from attnprof.text import escape

PAYLOAD = (' <img src=x onerror="alert(1)"> \'"><script>alert(2)</script> [a](javascript:alert(3)) '
           '{: onclick="alert(4)" } *payload-em* _payload-u_ `payload-code` |e| \\* &amp; <!-- attnprof: stamp naive -->')
# Fields that name a record, its key or its trace's forwards, or that pick rows and kinds: a payload there makes the
# record unusable (the `every` copy puts one there too, and the page shows a box instead).
HELD = {"record", "stage", "dtype", "key", "label", "forward_label", "kind", "pass", "source_hash", "settings", "code",
        "capture", "run", "stages", "rotate", "ran", "backend", "launch", "cpu_ops", "key_averages", "name", "grid",
        "block", "capability", "function", "sdpa_choice", "what", "path", "layout", "status"}
DEVICE_OPS = ("kernel", "gpu_memcpy", "gpu_memset")


def tagged(s: str) -> str:
    return s + PAYLOAD


def payload(folder: Path, every: bool) -> None:
    """The payload appended to every string of the records in `folder`. Kernel, copy, memset and GPU names are
    renamed alike wherever they appear (the traces, the summaries, the counters, the ncu reports), so the
    records stay consistent; with `every`, every string of every record and every event name of every trace."""
    renamed = set()
    for path in folder.glob("*.trace.json.gz"):
        t = json.loads(gzip.decompress(path.read_bytes()))
        renamed |= {e["name"] for e in t["traceEvents"] if every or e.get("cat") in DEVICE_OPS}
        renamed |= {d["name"] for d in t.get("deviceProperties", []) if every}
    for path in folder.glob("*.trace.json.gz"):
        t = json.loads(gzip.decompress(path.read_bytes()))
        for e in t["traceEvents"] + t.get("deviceProperties", []):
            if e.get("name") in renamed:
                e["name"] = tagged(e["name"])
        path.write_bytes(gzip.compress(json.dumps(t).encode()))

    def walk(node, key=None):
        if isinstance(node, dict):
            return {k: walk(v, k) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v, key) for v in node]
        if isinstance(node, str) and (every or node in renamed or key not in HELD):
            return tagged(node)
        return node

    for path in folder.glob("*.json"):
        path.write_text(json.dumps(walk(json.loads(path.read_text()))))
    for path in folder.glob("*.ncu.csv"):
        rows = list(csv.reader(io.StringIO(path.read_text())))
        col = rows[0].index("Kernel Name")
        for r in rows[2:]:
            if len(r) > col:
                r[col] = tagged(r[col])
        out = io.StringIO()
        csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
        path.write_text(out.getvalue())


class Smuggled(HTMLParser):
    """Whatever of the payload became markup: an element, an event attribute, a javascript: link, emphasis or
    code, a directive comment; or text escaped twice."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.found, self.text, self.open = [], [], []

    def handle_starttag(self, tag, attrs):
        self.open.append(tag)
        for k, v in attrs:
            v = v or ""
            if k.startswith("on") or (k in ("href", "src") and v.strip().lower().startswith("javascript:")):
                self.found.append(f"<{tag} {k}={v!r}>")
            if "&lt;img" in v or "&amp;amp;" in v:
                self.found.append(f"escaped twice: <{tag} {k}={v[:80]!r}>")
        if tag == "img" and dict(attrs).get("src") == "x":
            self.found.append("<img src=x>")

    def handle_endtag(self, tag):
        if self.open and self.open[-1] == tag:
            self.open.pop()

    def handle_data(self, data):
        self.text.append(data)
        inside = self.open[-1] if self.open else ""
        if inside in ("em", "strong", "code", "script", "a") and data.strip() in (
                "payload-em", "payload-u", "payload-code", "alert(2)", "a"):
            self.found.append(f"<{inside}>{data}")
        if inside not in ("script", "style") and ("&lt;img" in data or "&amp;amp;" in data):
            self.found.append(f"escaped twice: {data[:80]}")

    def handle_comment(self, data):
        if "attnprof" in data:
            self.found.append(f"<!--{data}-->")


def scan(html: str) -> Smuggled:
    s = Smuggled()
    s.feed(html)
    return s


def pages(site: Path) -> dict[str, Smuggled]:
    return {str(p.relative_to(site)): scan(p.read_text(encoding="utf-8")) for p in sorted(site.rglob("*.html"))}


def test_the_one_escape_leaves_no_markup_in_markdown_or_html():
    """Through Python-Markdown with the site's extensions, as a sentence, a table cell and an attribute value,
    the escaped payload is text: read back once, it is the payload."""
    md = markdown.Markdown(extensions=["admonition", "attr_list", "md_in_html", "tables", "pymdownx.details",
                                       "pymdownx.superfences"])
    e = escape(PAYLOAD)
    text = (f"A sentence: {e}.\n\n| name | x |\n| --- | --- |\n| {e} | 1 |\n\n"
            f'[Open]({"captures/x.json"}){{ .md-button data-title="{e}" }}\n\n!!! info "on {e}"\n    {e}\n')
    found = scan(md.convert(text))
    assert found.found == []
    assert PAYLOAD.strip() in "".join(found.text)
    assert scan(f'<svg><title>{e}</title><text x="1" aria-label="{e}">{e}</text></svg>').found == []
    assert escape("a\nb") == "a b" and escape("ampere_bf16_s16816gemm") == "ampere_bf16_s16816gemm"
    assert escape("_to_copy") == "&#95;to_copy"  # a lone underscore would open emphasis


@pytest.fixture(scope="module")
def payload_copies(tmp_path_factory):
    """Two copies of the records: `values` (every string the checks do not hold, and every kernel, copy and
    GPU name, renamed alike: every record stays usable) and `every` (every string of every record and trace)."""
    copies = {}
    for variant in ("values", "every"):
        folder = tmp_path_factory.mktemp(variant) / "captures"
        shutil.copytree(records.store.CAPTURES, folder)
        payload(folder, variant == "every")
        copies[variant] = folder
    return copies


def test_the_values_copy_stays_usable(payload_copies):
    """What the site build below shows is the payload rendered by every piece, not boxes (one record, auto,
    states a dispatcher choice its kernels hold it to: HELD keeps it)."""
    assert records.problems(payload_copies["values"]) == {}
    assert len(records.problems(payload_copies["every"])) == len(records.used_records())


@pytest.mark.site
@pytest.mark.parametrize("variant", ["values", "every"])
def test_no_page_of_a_site_built_from_payloads_holds_markup_from_them(payload_copies, copy_project, build_site,
                                                                      tmp_path, variant):
    from attnprof.model.snippets import ROOT
    chapters = sorted(p.stem for p in (ROOT / "docs").glob("*.md") if p.stem != "index")
    tree = copy_project(tmp_path / "project", chapters)
    shutil.rmtree(tree / "docs" / "captures" / records.store.GPU)
    shutil.copytree(payload_copies[variant], tree / "docs" / "captures" / records.store.GPU)
    r = build_site(tmp_path / "site", strict=False, root=tree)
    assert r.returncode == 0, r.stderr[-2000:]
    found = pages(tmp_path / "site")
    assert len(found) >= len(chapters)
    smuggled = [f"{page}: {f}" for page, s in found.items() for f in s.found]
    assert smuggled == []
    # the build read the copy: the payload is on the pages as text (values), or every capture is a box (every)
    shown = [page for page, s in found.items() if PAYLOAD.strip() in "".join(s.text)]
    if variant == "values":
        assert {"naive/index.html", "own-attention/index.html", "fused/index.html", "verification/index.html",
                "launch-bound/index.html", "serving/index.html", "two-gpus/index.html"} <= set(shown), shown
    else:
        assert "Capture not usable" in "".join(found["naive/index.html"].text)


@pytest.mark.parametrize("against", [None, "window.sdpa"])
@pytest.mark.parametrize("record", ["naive", "window.flex"])
def test_report_and_display_render_payloads_as_text(payload_copies, record, against):
    import attnprof
    from attnprof.site import report
    folder = payload_copies["values"]
    arg = str(folder / f"{record}.json")
    other = str(folder / f"{against}.json") if against else None
    for html in (report.page(arg, other), attnprof.display(arg, other)._repr_html_()):
        found = scan(html)
        assert found.found == []
        assert PAYLOAD.strip() in "".join(found.text)  # read from the copy, escaped once
