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



OPLIST_ROW = re.compile(r'<tr>\s*<td[^>]*>(\d+)</td>\s*<td[^>]*>([^<]*)</td>')
TRACE_OP = re.compile(r"<title>(\d+)\. [^<\n]*?([\d.,]+\s(?:µs|ms|s))(?:\n|</title>)")  # names are escaped: no <
WIDE_SVG = re.compile(r'<svg\b[^>]*\battnprof-wide\b.*?</svg>', re.S)


def trace_and_list(body: str) -> tuple[dict, dict]:
    """The durations a page's first trace figure (its wide drawing) and its first op list give each op
    number, as the reader sees them."""
    figure = WIDE_SVG.search(body).group(0)
    listed = body.split('<div class="attnprof-oplist">', 1)[1].split("</table>", 1)[0]
    return ({int(n): html.unescape(t) for n, t in TRACE_OP.findall(figure)},
            {int(n): html.unescape(t).strip() for n, t in OPLIST_ROW.findall(listed)})


def test_the_trace_figure_and_the_op_list_show_the_same_forward(site):
    """On every ladder page the figure and the list are one profiled forward: each op's duration reads the
    same in both (three profiled forwards differ in the last digits, so two forwards would not)."""
    for stage in ladder():
        drawn, listed = trace_and_list(article(site / stage / "index.html"))
        assert listed and drawn == listed, (stage, drawn, listed)


def test_a_list_from_another_forward_would_be_caught():
    """The comparison reads real differences: naive's three profiled forwards give op 5 three durations."""
    from attnprof.analysis import records, trace
    from attnprof.model import store
    from attnprof.text import us
    s = records.load_summary("naive")
    fwds = trace.forwards(trace.load(store.trace_path(store.CAPTURES, "naive")), s["label"])
    assert len({us(f.ops[4].duration_us) for f in fwds}) > 1


CODE = ("the code, its changed line marked", re.compile(r'<span class="hll">'))
LESSON_ORDER = [  # what a ladder chapter shows, in this order, before anything folded: the guess asked before the
    CODE,        # trace is drawn, the answer after it
    ("the guess, open", re.compile(r'<div class="admonition question">\s*<p class="admonition-title">Guess first')),
    ("the trace", WIDE_SVG),
    ("the op list", re.compile(r'<div class="attnprof-oplist">')),
    ("the lesson, open", re.compile(r'<div class="admonition lesson">\s*<p class="admonition-title">The lesson')),
    ("What to notice, open", re.compile(r'<div class="admonition abstract">\s*<p class="admonition-title">What to notice')),
    ("the details", re.compile(r'<h2 id="details"')),
]
FOLDED = ['<div class="admonition info">', "<strong>Gaps</strong>", "drawn here is the one of the"]  # stamp, gaps, caption
PIN = {"naive": "masked_fill(", "inplace": "masked_fill_(", "math": "SDPBackend.MATH", "efficient": "SDPBackend.EFFICIENT",
       "flash": "SDPBackend.FLASH", "cudnn": "SDPBackend.CUDNN", "auto": "scaled_dot_product_attention"}


def test_every_ladder_chapter_has_one_shape(site):
    """Code (the changed line highlighted), the guess open, the trace, the op list, the lesson open, What to notice
    open, then the details; the stamp, the gaps and the trace's caption only inside closed boxes."""
    for stage in ladder():
        body = article(site / stage / "index.html")
        at = [(what, pattern.search(body)) for what, pattern in LESSON_ORDER]
        assert all(m for _, m in at), (stage, [what for what, m in at if not m])
        starts = [m.start() for _, m in at]
        assert starts == sorted(starts), (stage, [what for what, _ in sorted(at, key=lambda a: a[1].start())])
        code = dict(at)[CODE[0]].start()
        marked = html.unescape(re.sub(r"<[^>]+>", "", body[code:].split("\n", 1)[0]))  # the first marked line
        assert PIN[stage] in marked, (stage, marked)
        lesson = body[:starts[-1]]
        assert not any(m in lesson for m in FOLDED), stage
        details = body[starts[-1]:]
        assert '<details class="info">' in details and "<strong>Gaps</strong>" in details, stage
