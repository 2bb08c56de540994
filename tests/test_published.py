"""What gets published: no machine details in the captures, pages within their weight, no broken
internal link or anchor."""
import gzip
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from attnprof.model import store

ABSOLUTE_PATH = re.compile(r"(?:^|[\s'\"(=])/(?:home|root|tmp|opt|usr|var|work|Users|mnt|srv)/")
pytestmark = pytest.mark.site
PAGE_LIMIT = 1_000_000  # bytes: HTML plus its own images, scripts and stylesheets (traces excluded)
HTML_LIMIT = 150_000  # bytes: a page's own HTML, raw (what a phone parses before it shows anything)


def strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


def published_files():
    return sorted(store.CAPTURES.glob("*.json")) + sorted(store.CAPTURES.glob("*.trace.json.gz"))


def test_captures_and_traces_carry_no_paths_users_or_hosts():
    import socket
    host = socket.gethostname()
    for path in published_files():
        data = json.loads(gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_text())
        for text in strings(data):
            assert not ABSOLUTE_PATH.search(text), f"{path.name}: absolute path in {text[:120]!r}"
            assert host not in text or len(host) < 4, f"{path.name}: host name in {text[:120]!r}"
        if path.suffix == ".gz":
            assert "traceName" not in data and "hostname" not in data


def test_scrub_removes_paths_and_process_names():
    events = {"traceName": "/tmp/x/trace.json", "traceEvents": [
        {"ph": "M", "name": "process_name", "args": {"name": "python3 /home/alice/run.py"}},
        {"ph": "X", "name": "k", "args": {"file": "/home/alice/x.py", "grid": [1, 1, 1]}}]}
    out = store.scrub(events)
    assert "traceName" not in out
    assert out["traceEvents"][0]["args"]["name"] == "process"
    assert out["traceEvents"][1]["args"] == {"grid": [1, 1, 1]}


class Refs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.refs, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        for key in ("href", "src"):
            if a.get(key) and not (tag == "link" and a.get("rel") in ("canonical", "alternate")):
                self.refs.append((tag, a.get("rel"), a[key]))


def parse(path: Path) -> Refs:
    r = Refs()
    r.feed(path.read_text())
    return r


def pages(site):
    return sorted(p for p in site.rglob("*.html") if p.name != "404.html")


def local(page: Path, ref: str) -> Path | None:
    if re.match(r"^[a-z]+:", ref) or ref.startswith("//"):
        return None
    target = (page.parent / ref.split("#")[0].split("?")[0]).resolve()
    return target / "index.html" if target.is_dir() else target


def test_every_page_is_within_its_weight(site):
    for page in pages(site):
        total = page.stat().st_size
        for tag, rel, ref in parse(page).refs:
            if tag in ("img", "script") or (tag == "link" and rel == "stylesheet"):
                target = local(page, ref)
                if target and target.is_file():
                    total += target.stat().st_size
        assert total <= PAGE_LIMIT, f"{page.relative_to(site)} weighs {total / 1e6:.2f} MB"


def test_no_page_is_over_150_kb_of_html(site):
    heavy = {str(page.relative_to(site)): page.stat().st_size for page in pages(site)}
    heavy = {name: size for name, size in heavy.items() if size > HTML_LIMIT}
    assert len(list(pages(site))) > 20 and not heavy, (
        f"pages over {HTML_LIMIT // 1000} KB of raw HTML: "
        + ", ".join(f"{name} {size / 1000:.0f} KB" for name, size in sorted(heavy.items())))


def test_a_long_name_is_sent_once_and_every_copy_points_at_it(site):
    """The math chapter lists its kernels in several tables: each long name is written out once, and
    each later copy names that one (names.js fills it in)."""
    page = (site / "math" / "index.html").read_text()
    names = re.findall(r' title="([^"]{100,})"', page)
    assert names and len(names) == len(set(names))
    firsts = set(re.findall(r' title="[^"]*" data-name="(\d+)"', page))
    copies = re.findall(r'data-same="(\d+)"', page)
    assert copies and set(copies) <= set(firsts)


def test_internal_links_and_anchors_resolve(site):
    ids = {}
    for page in pages(site):
        refs = parse(page)
        for tag, rel, ref in refs.refs:
            target = local(page, ref)
            if target is None or ref.startswith("#") and len(ref) == 1:
                continue
            if ref.startswith("#"):
                target = page
            assert target.exists(), f"{page.relative_to(site)} links to missing {ref}"
            if "#" in ref and target.suffix == ".html":
                anchor = ref.split("#", 1)[1]
                if target not in ids:
                    ids[target] = parse(target).ids
                assert anchor in ids[target], f"{page.relative_to(site)} links to missing anchor {ref}"


def test_the_pages_workflow_builds_strictly_without_recapturing():
    import yaml
    workflow = yaml.safe_load((store.ROOT / ".github" / "workflows" / "pages.yml").read_text())
    steps = [s.get("run", "") for s in workflow["jobs"]["build"]["steps"]]
    assert any("ATTNPROF_RECAPTURE=never mkdocs build --strict" in s for s in steps)
    assert any(s.get("uses", "").startswith("actions/upload-pages-artifact") for s in workflow["jobs"]["build"]["steps"])
    readme = (store.ROOT / "README.md").read_text()
    ci = (store.ROOT / ".ci" / "run").read_text()
    test_command = next(l for l in readme.splitlines() if l.rstrip().endswith("&& pytest"))
    assert test_command.strip() in ci
