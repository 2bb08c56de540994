"""What a reader sees on the built pages: no talk of the machine that made the site or of the site's own
history, and an Open-in-Perfetto control beside every trace figure."""
import html
import re

from attnprof.model.stages import ladder

# Phrases about where or how the site was built rather than about attention, GPUs and software.
PROCESS_TALK = [
    r"this machine", r"that machine", r"not available here", r"installed here", r"(?:could not be )?run here\b",
    r"the figure the text quotes", r"before these counters", r"kernel decoder said so",
    r"reads like a refusal", r"host name", r"\bDNS\b", r"does not resolve", r"no route to the Hub",
    r"at build time", r"this build\b",
]
SCRIPT = re.compile(r"<script\b.*?</script>", re.S | re.I)
# a trace figure is drawn twice (wide, and narrow for a phone): its wide drawing marks the figure
TRACE_FIGURE = re.compile(r'<svg\b(?=[^>]*\battnprof-wide\b)[^>]*aria-label="(?:(?P<stage>[\w.-]+) (?:forward|backward) trace'
                          r'|(?P<record>[\w.-]+): ranks on one timeline)"')
CONTROL = re.compile(r'<a\b[^>]*class="[^"]*\battnprof-perfetto\b[^"]*"[^>]*>')
HEADING = re.compile(r"<h[1-3]\b")


def pages(site):
    return sorted(site.rglob("*.html"))


def reader_text(path) -> str:
    """The page as a reader meets it: text and attributes (tooltips, labels), no scripts, entities decoded."""
    return html.unescape(SCRIPT.sub("", path.read_text()))


def test_no_page_talks_of_the_machine_or_the_build(site):
    found = []
    for path in pages(site):
        text = reader_text(path)
        for pattern in PROCESS_TALK:
            for m in re.finditer(pattern, text, re.I):
                found.append(f"{path.relative_to(site)}: …{text[max(0, m.start() - 60):m.end() + 40]}…")
    assert not found, "\n".join(found)


def article(path) -> str:
    page = path.read_text()
    return page.split("<article", 1)[1].split("</article>", 1)[0] if "<article" in page else ""


def test_every_trace_figure_has_an_open_in_perfetto_control(site):
    """Between a trace figure and the next figure or heading: exactly one control, and it opens that
    figure's own committed trace."""
    with_figures, problems = set(), []
    for path in pages(site):
        body = article(path)
        found = list(TRACE_FIGURE.finditer(body))
        for i, m in enumerate(found):
            with_figures.add(path.parent.name)
            end = found[i + 1].start() if i + 1 < len(found) else len(body)
            heading = HEADING.search(body, m.end(), end)
            after = body[m.end():heading.start() if heading else end]
            controls = CONTROL.findall(after)
            name = m.group("stage") or m.group("record")
            where = f"{path.relative_to(site)}: the figure of {name}"
            if len(controls) != 1:
                problems.append(f"{where} has {len(controls)} Open-in-Perfetto controls")
                continue
            href = re.search(r'href="([^"]*)"', controls[0]).group(1)
            trace = href.rsplit("/", 1)[-1]
            if not (trace.startswith(name) and trace.endswith(".trace.json.gz")):
                problems.append(f"{where} opens {href}")
            elif not (path.parent / href).resolve().exists():
                problems.append(f"{where} opens {href}, which the site does not hold")
    assert not problems, "\n".join(problems)
    assert {*ladder(), "fused", "reading-a-profile", "launch-bound", "backward", "two-gpus"} <= with_figures

