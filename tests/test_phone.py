"""The chart, trace and table pages on a 390 px phone (and at 1400 px where it says so), in headless
Chromium: no chart's drawing wider than the screen and its text 11 px or more; the tap tip opaque, at
most 40 % of the screen's height, starting with the op's number, short name and time; every legend row
and tap target at least 24 px tall, and a tap between thin marks listing those under the finger; no
number broken across lines; the naive snippet's masking line on screen; prose lines of about 90
characters at most at 1400 px; every chapter of the ladder and beyond the post asks a guess after at most
GUESS_WORDS words of prose and answers below it; on each ladder chapter the trace figure between the guess
and the lesson (within FIRST_SCREENS px of the title), the lesson ANSWER_GAP_PX or more below the guess, "What
to notice" shown unopened, and no profiled forward's device time but the median's outside folded details; the
letters a chapter teaches by a kernel's name (`f32f32`, `wgmma`) whole on screen in its op list and legend;
every chapter at most CHAPTER_PX tall with nothing opened, and every guess answered by a "What to notice" box
within ANSWER_PX below it. (axe-core's WCAG 2 A/AA rules run on every page, both widths and schemes, in test_browser.py.)

The checks that only read a page run inside test_browser.py's test of each page, on the page it has
already loaded at each width (one load per width and page): `at_wide`, `at_phone_unopened`,
`at_phone_opened` and `at_phone_revealed` below, each on the page in the state its docstring names. The
tap tests, which change the page, load their own."""
import re

import pytest

from attnprof.model.stages import ladder
from attnprof.site.claims.core import LESSON_NUMBERS, LESSON_WORDS  # the claims' own bound, one number
from test_browser import WIDE, PHONE, browser, metrics, server, view  # noqa: F401  (fixtures)

pytestmark = pytest.mark.browser

CHART_PAGES = ["scaling", "roofline", "serving", "fallback"]
TABLE_PAGES = ["verification", "claims", "fused", "naive", "math", "launch-bound"]
PROSE_PAGES = ["naive", "fallback", "verification"]
TARGET_PAGES = [*ladder(), "fused", *CHART_PAGES]
WIDE_PAGES = {*TABLE_PAGES, *CHART_PAGES, *PROSE_PAGES}  # pages with a check at 1400 px here
SMALLEST_TEXT_PX, FINGER_PX, TIP_SHARE, PROSE_CHARS = 11, 24, 0.4, 95
FIRST_SCREENS = 1700  # px below the title's bottom edge: about two phone screens

OPEN_ALL = """
document.querySelectorAll('article details').forEach(d => d.open = true);
"""
REVEAL = """
const reveal = el => {  // open the tab that holds el (and the tabs around that one)
  const block = el.closest('.tabbed-block');
  if (!block) return;
  const i = [...block.parentNode.children].indexOf(block);
  block.closest('.tabbed-set').querySelectorAll(':scope > input')[i].click();
  reveal(block.parentNode);
};
"""

CHARTS = REVEAL + """
const vw = document.documentElement.clientWidth, out = [];
document.querySelectorAll('article .attnprof-figure').forEach((figure, k) => {
  reveal(figure);
  figure.scrollIntoView();
  const shown = [...figure.querySelectorAll(':scope > svg')].filter(s => s.getBoundingClientRect().width > 0);
  if (shown.length !== 1) { out.push(`chart ${k + 1}: ${shown.length} drawings shown`); return; }
  const svg = shown[0], r = svg.getBoundingClientRect(), scale = r.width / svg.viewBox.baseVal.width;
  if (r.left < -0.5 || r.right > vw + 0.5) out.push(`chart ${k + 1}: drawn at x ${Math.round(r.left)}..${Math.round(r.right)} of ${vw} px`);
  const px = Math.min(...[...svg.querySelectorAll('text')].map(t => parseFloat(getComputedStyle(t).fontSize) * scale));
  if (px < arguments[0]) out.push(`chart ${k + 1}: text ${px.toFixed(1)} px`);
  out.push(svg.getAttribute('class'));
});
return out;
"""


def load(browser, server, page, width=PHONE, dark=False):
    metrics(browser, width)  # before loading: the page lays itself out (tables.js) at this width
    browser.get(f"{server}/{page}/")
    view(browser, width, dark)
    browser.execute_script(OPEN_ALL)


def charts(browser, narrow: bool) -> list[str]:
    """Every chart revealed in turn (its tab opened, scrolled to): at 390 px the narrow drawing alone is
    shown, inside the screen, its text SMALLEST_TEXT_PX or more; at 1400 px the wide one alone."""
    found = browser.execute_script(CHARTS, SMALLEST_TEXT_PX)
    if not found:
        return ["no chart found"]
    if narrow:
        return [f"charts: {p}" for p in found if p != "attnprof-narrow"]
    return [] if set(found) == {"attnprof-wide"} else [f"charts: drawings shown {found}, not the wide one alone"]


TIP = """
const tip = document.querySelector('.attnprof-tip');
if (!tip || tip.hidden) return null;
const r = tip.getBoundingClientRect(), style = getComputedStyle(tip);
const shown = [...tip.childNodes].filter(n => n.nodeType === 3 || getComputedStyle(n).display !== 'none')
    .map(n => n.textContent).join('');
return {text: tip.textContent, lines: tip.innerText.split('\\n'), shown, height: r.height, top: r.top,
        viewport: innerHeight, background: style.backgroundColor,
        more: !!tip.querySelector('.attnprof-tip-more'),
        picks: [...tip.querySelectorAll('.attnprof-tip-pick')].map(b => [b.textContent, b.getBoundingClientRect().height])};
"""

TAP = """  // a tap at the element's centre (or at dx px from its left edge), as a finger's lands: on what is on top there
const el = arguments[0], r = el.getBoundingClientRect();
const x = arguments[1] === null ? r.left + r.width / 2 : r.left + arguments[1], y = r.top + r.height / 2;
const hit = document.elementFromPoint(x, y);
hit.dispatchEvent(new MouseEvent('click', {bubbles: true, clientX: x, clientY: y}));
return hit.tagName;
"""


def tap(browser, element, dx=None):
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
    return browser.execute_script(TAP, element, dx)


def opaque(color: str) -> bool:
    return color.startswith("rgb(") or re.fullmatch(r"rgba\(.*,\s*1\)", color) is not None


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_the_tap_tip_is_opaque_short_and_starts_with_the_ops_name_and_time(site, server, browser, dark):
    from selenium.webdriver.common.by import By
    load(browser, server, "naive", dark=dark)
    narrow = browser.find_element(By.CSS_SELECTOR, "article .attnprof-trace svg.attnprof-narrow")
    bars = narrow.find_elements(By.CSS_SELECTOR, ".attnprof-gpu-op")
    rows = narrow.find_elements(By.CSS_SELECTOR, ".attnprof-legend")
    assert len(bars) == len(rows) >= 5
    longest = browser.execute_script("const n = arguments[0].map(b => b.querySelector('title').textContent.length);"
                                     " return n.indexOf(Math.max(...n))", bars)
    for target in (bars[longest], rows[longest]):  # the bar, and its legend row, name the same op
        tap(browser, target)
        tip = browser.execute_script(TIP)
        assert tip, "no tip after a tap"
        # "5 kernel · 359.2 µs · void at::native::elementwise_kernel<128, 4, at::nati...": the name as printed
        legend = browser.execute_script("return arguments[0].textContent", rows[longest])
        number, rest = legend.split(" ", 1)
        kind, time, printed = rest.split(" · ", 2)
        head = tip["lines"][0]  # "5. elementwise [masked_fill] 359.2 µs": the readable name, then the full one
        assert head.startswith(f"{number}. ") and head.endswith(f" {time}"), (head, legend)
        assert opaque(tip["background"]), tip["background"]
        assert tip["height"] <= TIP_SHARE * tip["viewport"] + 0.5, tip
        full = tip["text"].split("\n", 1)[1]
        assert full.startswith(printed.removesuffix("...")), (full[:80], printed)
        assert len(full) > 150 and tip["more"]  # the longest name of naive's forward is a template's
        assert len(tip["shown"].split("\n", 1)[1]) <= 150
        tap(browser, browser.find_element(By.CSS_SELECTOR, "article > p"))  # a tap elsewhere hides it
        assert browser.execute_script(TIP) is None
    tap(browser, bars[longest])
    browser.find_element(By.CSS_SELECTOR, ".attnprof-tip-more").click()
    tip = browser.execute_script(TIP)
    assert tip["shown"] == tip["text"] and tip["height"] <= TIP_SHARE * tip["viewport"] + 0.5  # all of it, scrolling
    browser.execute_script("document.querySelector('.attnprof-tip').hidden = true")


def test_a_tap_between_thin_marks_lists_those_under_the_finger(site, server, browser):
    """The launch row's marks are 2 px wide: a tap beside one lists the launches within half a finger,
    each a button a finger tall that shows its own tip."""
    from selenium.webdriver.common.by import By
    load(browser, server, "naive")
    narrow = browser.find_element(By.CSS_SELECTOR, "article .attnprof-trace svg.attnprof-narrow")
    marks = browser.execute_script(  # each launch mark, with its left and right edges
        "return [...arguments[0].querySelectorAll('rect')].filter(r => (r.querySelector('title') || {}).textContent"
        "?.includes('launches op')).map(r => { const b = r.getBoundingClientRect(); return [r, [b.left, b.right]]; })",
        narrow)
    launches, edges = [m[0] for m in marks], [m[1] for m in marks]
    # a point 1 px right of a mark, on no mark, with two or more marks within half a finger: beside them all
    near = lambda x: [i for i, (lo, hi) in enumerate(edges) if max(lo - x, x - hi, 0) < FINGER_PX / 2]
    spot = next((i, hi + 1) for i, (lo, hi) in enumerate(edges)
                if not any(a <= hi + 1 <= b for a, b in edges) and len(near(hi + 1)) >= 2)
    tap(browser, launches[spot[0]], spot[1] - edges[spot[0]][0])
    tip = browser.execute_script(TIP)
    assert tip and len(tip["picks"]) >= 2 and all(h >= FINGER_PX for _, h in tip["picks"]), tip
    assert any(f"launches op {spot[0] + 1}" in p for p, _ in tip["picks"])
    browser.find_elements(By.CSS_SELECTOR, ".attnprof-tip-pick")[0].click()
    tip = browser.execute_script(TIP)
    assert "launches op" in tip["lines"][0] and not tip["picks"]
    browser.execute_script("document.querySelector('.attnprof-tip').hidden = true")


TARGETS = REVEAL + """
const out = [], finger = arguments[0];
document.querySelectorAll('article .attnprof-trace svg.attnprof-narrow').forEach((svg, k) => {
  reveal(svg);
  svg.closest('.attnprof-trace').scrollIntoView();
  for (const mark of svg.querySelectorAll('rect')) {
    if (!mark.querySelector(':scope > title')) continue;
    const h = mark.getBoundingClientRect().height;
    if (h > 0 && h < finger) out.push(`trace ${k + 1}: "${mark.textContent.split('\\n')[0]}" ${h.toFixed(1)} px tall`);
  }
  for (const row of svg.querySelectorAll('.attnprof-legend')) {
    const h = row.getBoundingClientRect().height;
    if (h < finger) out.push(`trace ${k + 1}: legend row ${row.dataset.op} ${h.toFixed(1)} px tall`);
  }
});
document.querySelectorAll('article .attnprof-figure svg.attnprof-narrow').forEach((svg, k) => {
  reveal(svg);
  svg.scrollIntoView({block: 'center'});
  const tops = [...svg.querySelectorAll('.attnprof-legend text')].map(t => t.getBoundingClientRect().top);
  tops.slice(1).forEach((t, i) => { if (t - tops[i] < finger - 0.5)
    out.push(`chart ${k + 1}: legend rows ${(t - tops[i]).toFixed(1)} px apart`); });
  for (const point of svg.querySelectorAll('.attnprof-point')) {
    const r = point.getBoundingClientRect(), x = r.left + r.width / 2, y = r.top + r.height / 2;
    for (const dx of [-finger / 2 + 2, finger / 2 - 2]) {
      const hit = document.elementFromPoint(x + dx, y);
      if (!hit || !hit.classList.contains('attnprof-point')) {
        out.push(`chart ${k + 1}: a tap ${dx} px from a point misses it`);
        break;
      }
    }
    if (!point.querySelector('title')) out.push(`chart ${k + 1}: a point with nothing to show on a tap`);
  }
});
return out;
"""


BROKEN_NUMBERS = """
const out = [], number = /[-+]?\\d[\\d,]*(?:\\.\\d+)?(?:e[-+]\\d+)?(?:[\\s\\u00a0](?:µs|ms|%|×|KiB|MiB|GiB|TFLOP\\/s|GB\\/s))?/g;
for (const td of document.querySelectorAll('article td')) {
  if (!td.offsetParent) continue;  // a closed tab
  const walker = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
  for (let node; (node = walker.nextNode());) {
    if (node.parentElement.closest('code[title]')) continue;  // a kernel's name, which wraps rather than run off
    for (const m of node.data.matchAll(number)) {
      const range = document.createRange();
      range.setStart(node, m.index);
      range.setEnd(node, m.index + m[0].length);
      const lines = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
      if (lines.size > 1) out.push(`"${m[0]}" breaks across ${lines.size} lines in "${td.textContent.trim().slice(0, 60)}"`);
    }
  }
}
return out;
"""


VERIFICATION_CARDS = """
const t = [...document.querySelectorAll('article table')].find(t => t.textContent.includes('rel. Frobenius'));
return t.hasAttribute('data-cards') && [...t.querySelectorAll('tbody tr')].map(tr =>
    [tr.children[0].textContent.trim(), tr.children[4].textContent.trim()]);
"""


def verification_cards(browser) -> list[str]:
    """The verification table is cards on a phone, the failing paths first, each path's cards together,
    every failure marked "✗ fail"."""
    cards = browser.execute_script(VERIFICATION_CARDS)
    if not cards:
        return ["the verification table is not shown as cards on a phone"]
    problems = []
    statuses = [s for _, s in cards]
    failing = {p for p, s in cards if "fail" in s}
    if not (failing and all(s == "✗ fail" for s in statuses if "fail" in s)):
        problems.append(f"verification cards: no failure, or one not marked '✗ fail': {statuses}")
    paths = list(dict.fromkeys(p for p, _ in cards))
    if paths[:len(failing)] != [p for p in paths if p in failing]:
        problems.append(f"verification cards: the failing paths {sorted(failing)} do not come first: {paths}")
    if [p for p, _ in cards] != sorted((p for p, _ in cards), key=paths.index):
        problems.append(f"verification cards: a path's cards are not together: {[p for p, _ in cards]}")
    return problems


CLAIMS_CARDS = ("return [...document.querySelectorAll('article table')].some(t => t.textContent.includes('verdict') "
                "&& t.hasAttribute('data-cards'))")

MASKING_LINE = """
const code = [...document.querySelectorAll('article pre code')].find(c => c.textContent.includes('masked_fill'));
code.scrollIntoView();
const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT), range = document.createRange();
for (let node; (node = walker.nextNode());) {
  const i = node.data.indexOf('out of place');
  if (i >= 0) { range.setStart(node, i); range.setEnd(node, i + 'out of place'.length); break; }
}
return [Math.max(...[...range.getClientRects()].map(r => r.right)), code.closest('pre').getBoundingClientRect().right];
"""


def masking_line(browser) -> list[str]:
    """The naive snippet's masking line ("... out of place") ends inside its code block on a phone."""
    right, width = browser.execute_script(MASKING_LINE)
    return [] if right <= width + 0.5 else [f"the naive snippet's masking line ends at x {right:.0f}, past its code block's {width:.0f}"]


PROSE = """
const out = [];
for (const p of document.querySelectorAll('article p')) {
  if (p.closest('table, .admonition-title') || !p.offsetParent) continue;
  const words = [], walker = document.createTreeWalker(p, NodeFilter.SHOW_TEXT);
  for (let node; (node = walker.nextNode());) for (const m of node.data.matchAll(/\\S+/g)) {
    const range = document.createRange();
    range.setStart(node, m.index);
    range.setEnd(node, m.index + m[0].length);
    const r = range.getClientRects()[0];
    if (r) words.push([Math.round(r.top), m[0].length + 1]);
  }
  const lines = {};
  for (const [top, n] of words) lines[top] = (lines[top] || 0) + n;
  out.push(Math.max(0, ...Object.values(lines)));
}
return out;
"""


COLUMN_WIDE = ("const c = document.querySelector('article').getBoundingClientRect().width;"
               "return [...document.querySelectorAll('article .attnprof-trace, article .md-typeset__scrollwrap')]"
               ".filter(e => e.offsetParent).every(e => e.getBoundingClientRect().width > 0.9 * c)")


def prose(browser) -> list[str]:
    """At 1400 px prose lines hold about 90 characters at most, while tables and figures keep the column's width."""
    problems = []
    lengths = browser.execute_script(PROSE)
    if not lengths or max(lengths) > PROSE_CHARS:
        problems.append(f"prose: the longest line holds {max(lengths, default=None)} characters (at most {PROSE_CHARS})")
    if not browser.execute_script(COLUMN_WIDE):
        problems.append("prose: a table or trace figure is not as wide as the column")
    return problems


# The chapters that ask a guess, on a phone, nothing opened: at most GUESS_WORDS words of prose before the guess
# (headings and code not counted), and the answer below it. In a ladder chapter the trace figure comes between
# the guess and the lesson, the lesson at least ANSWER_GAP_PX below the guess (a reader meets the trace before
# the answer) unless it is folded, the trace figure within FIRST_SCREENS px of the title and the "What to notice"
# box on the page as laid out.
GUESS_WORDS, ANSWER_GAP_PX = 90, 600
LAYOUT = """
const article = document.querySelector('article'), title = article.querySelector('h1');
const top = el => el.getBoundingClientRect().top + window.scrollY;
const guess = article.querySelector('.admonition.question');
const figure = [...article.querySelectorAll('.attnprof-trace svg')].find(s => s.getBoundingClientRect().width > 0);
const lesson = article.querySelector('.admonition.lesson');
const box = [...article.querySelectorAll('.admonition')]
    .find(a => (a.querySelector('.admonition-title') || {}).textContent === 'What to notice');
let words = 0;
if (guess) {
  const walker = document.createTreeWalker(article, NodeFilter.SHOW_TEXT);
  for (let node; (node = walker.nextNode());) {
    if (!(node.compareDocumentPosition(guess) & Node.DOCUMENT_POSITION_FOLLOWING)) break;
    const el = node.parentElement;
    if (el.closest('pre, h1, h2, h3, h4, h5, h6, svg, script, style, details:not([open])') || !el.offsetParent) continue;
    words += (node.data.match(/\\S+/g) || []).length;
  }
}
return {
  title: title && top(title) + title.getBoundingClientRect().height,
  guess: guess ? top(guess) : null, words: words,
  figure: figure ? top(figure) : null,
  lesson: lesson ? {top: top(lesson), folded: !!lesson.closest('details:not([open])')} : null,
  box: box ? {shown: box.offsetParent !== null && box.getBoundingClientRect().height > 0,
              folded: !!box.closest('details:not([open])'), text: box.textContent.trim().slice(0, 80)} : null,
};
"""


def guess_first(at: dict, ladder_chapter: bool) -> list[str]:
    """A chapter that asks a guess, as LAYOUT reports it: the guess after at most GUESS_WORDS words, its answer
    below it; in a ladder chapter the trace between them, the lesson ANSWER_GAP_PX or more below the guess (or
    folded), the trace within FIRST_SCREENS px of the title and What to notice shown unopened."""
    if at["guess"] is None:
        return ["no guess (a question box) on the page"]
    problems = []
    if at["words"] > GUESS_WORDS:
        problems.append(f"{at['words']} words of prose before the guess (at most {GUESS_WORDS})")
    lesson = at["lesson"]
    if lesson and not lesson["folded"] and lesson["top"] <= at["guess"]:
        problems.append("the lesson comes before the guess it answers")
    if not ladder_chapter:
        return problems
    if at["figure"] is None or not at["guess"] < at["figure"]:
        problems.append(f"no trace figure between the guess and the lesson: {at}")
    elif not 0 < at["figure"] - at["title"] <= FIRST_SCREENS:
        problems.append(f"the trace figure starts {at['figure'] - at['title']:.0f} px below the title (at most {FIRST_SCREENS})")
    if lesson and not lesson["folded"]:
        if at["figure"] is not None and lesson["top"] < at["figure"]:
            problems.append("the lesson comes before the trace")
        if lesson["top"] - at["guess"] < ANSWER_GAP_PX:
            problems.append(f"the lesson starts {lesson['top'] - at['guess']:.0f} px below the guess, on the guess's "
                            f"own screen (at least {ANSWER_GAP_PX}, or folded)")
    if not (at["box"] and at["box"]["shown"] and not at["box"]["folded"]):
        problems.append(f"'What to notice' is not shown unopened: {at['box']}")
    return problems


def guessing() -> list[str]:
    """The chapters that ask a guess: the ladder's rungs (its summary, At a glance, aside) and every chapter beyond
    the post."""
    return [p for p in [*nav_section("The ladder"), *nav_section("Beyond the post")] if p != "at-a-glance"]


def nav_section(name: str) -> list[str]:
    import yaml
    from attnprof.model import store
    config = yaml.load((store.ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)
    entries = next(e[name] for e in config["nav"] if isinstance(e, dict) and name in e)
    return [next(iter(e.values())).removesuffix(".md") for e in entries]


# What a chapter teaches by a kernel's name, in the letters of the name: on a phone, where the op list and the
# trace's legend print it, each part whole on one line and on screen.
TAUGHT = {"math": ["f32f32", "ffma"], "cudnn": ["sm90", "wgmma"], "naive": ["nvjet"]}
SHOWN_WHOLE = """
const parts = arguments[0], vw = document.documentElement.clientWidth, out = {};
const places = {'op list': 'article .attnprof-oplist td code[title]',
                'trace legend': 'article .attnprof-trace svg.attnprof-narrow .attnprof-legend text'};
for (const [place, selector] of Object.entries(places)) for (const part of parts) {
  out[`${part} in the ${place}`] = [...document.querySelectorAll(selector)].filter(el => el.getBoundingClientRect().width > 0)
      .some(el => {
        const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
        for (let node; (node = walker.nextNode());) {
          const i = node.data.indexOf(part);
          if (i < 0) continue;
          const range = document.createRange();
          range.setStart(node, i);
          range.setEnd(node, i + part.length);
          const rects = [...range.getClientRects()].filter(r => r.width > 0);
          if (rects.length === 1 && rects[0].left >= -0.5 && rects[0].right <= vw + 0.5) return true;
        }
        return false;
      });
}
return out;
"""


def taught_names(browser, page) -> list[str]:
    """The letters TAUGHT names for a chapter, whole and on screen in its op list and in its trace's legend."""
    found = browser.execute_script(SHOWN_WHOLE, TAUGHT.get(page, []))
    return [f"the kernel name's “{where}” is not shown whole on screen" for where, ok in found.items() if not ok]


def median_forward_only(browser, page) -> list[str]:
    """A ladder chapter's text outside closed details gives no device time of a profiled forward but the median
    one (its op list's, the number every page gives): each other forward's, as the pages write a time, is absent."""
    from attnprof.analysis import records
    from attnprof.text import us
    s = records.load_summary(page)
    others = {us(x) for x in s["forward_device_us_each"]} - {us(s["forward_device_us"])}
    text = browser.execute_script("return document.querySelector('article').innerText")
    return [f"a profiled forward's device time other than the median, {x}, stands outside folded details"
            for x in sorted(others) if x in text]


# ---- run by test_browser.py's test of each page, on the page it has loaded --------------------------------

def test_every_page_these_checks_name_is_a_page_of_the_site():
    """The checks here run inside the test of each page they name: a page renamed or gone would leave its
    checks unmade rather than failing."""
    from test_browser import PAGES
    named = {*WIDE_PAGES, *TARGET_PAGES, *ladder(), *chapters(), *guessing(), *TAUGHT, "verification", "claims", "naive"}
    assert named <= set(PAGES), f"pages named in test_phone.py that the site does not have: {sorted(named - set(PAGES))}"


def at_wide(browser, page) -> list[str]:
    """`page` loaded at 1400 px, in the light scheme, no details block opened and no tab clicked yet; every
    details block is opened first, as `load` does."""
    if page not in WIDE_PAGES:
        return []
    browser.execute_script(OPEN_ALL)
    problems = []
    if page in TABLE_PAGES:
        problems += [f"number: {p}" for p in browser.execute_script(BROKEN_NUMBERS)[:20]]
    if page in PROSE_PAGES:
        problems += prose(browser)
    if page in CHART_PAGES:  # last: it opens the tabs that hold the charts
        problems += charts(browser, narrow=False)
    return problems


# a chapter's height on a phone, details closed; a guess to its answer, the trace and the op list between them (the
# math backend's lists 20 ops)
CHAPTER_PX, ANSWER_PX = 12_000, 5_000

# Each open guess (a question box) and the first "What to notice" box below it, and the chapter's height.
GUESSES = """
const top = el => el.getBoundingClientRect().top + window.scrollY;
const notices = [...document.querySelectorAll('article .admonition')].filter(a =>
    (a.querySelector('.admonition-title') || {}).textContent === 'What to notice');
const guesses = [...document.querySelectorAll('article .admonition.question')].map(q => {
    const below = notices.map(top).filter(y => y > top(q));
    return [q.querySelector('.admonition-title').textContent, below.length ? Math.min(...below) - top(q) : null];
});
return {height: document.querySelector('article').getBoundingClientRect().height, guesses: guesses};
"""


def chapter_shape(browser) -> list[str]:
    """The chapter at most CHAPTER_PX tall with its details closed, and every guess it opens answered by a
    "What to notice" box that starts within ANSWER_PX below it."""
    found = browser.execute_script(GUESSES)
    problems = [] if found["height"] <= CHAPTER_PX else [
        f"the chapter is {found['height']:,.0f} px tall with its details closed, over {CHAPTER_PX:,}: fold its "
        f"details or split it"]
    for title, gap in found["guesses"]:
        if gap is None or gap > ANSWER_PX:
            problems.append(f"the guess “{title}” is answered by no What to notice box within {ANSWER_PX:,} px below "
                            f"it ({'none below it' if gap is None else f'{gap:,.0f} px'})")
    return problems


# Every chapter's lesson: one short sentence in a box of its own (`!!! lesson`), starting within the first two
# phone screens (LESSON_PX from the page's top at 390 px, nothing opened), of at most LESSON_WORDS words and
# LESSON_NUMBERS numbers (its evidence marker not counted). Content tabs and code inside the screen's width.
SCREEN_PX = 844
LESSON_PX = 2 * SCREEN_PX


def chapters() -> list[str]:
    """The chapters: the top-level pages of mkdocs.yml's nav (docs/*.md), the changelog left out."""
    import yaml
    from attnprof.model import store
    config = yaml.load((store.ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)
    def paths(entries):
        for entry in entries:
            for target in ([entry] if isinstance(entry, str) else entry.values()):
                yield from ([target] if isinstance(target, str) else paths(target))
    return ["" if p == "index.md" else p.removesuffix(".md") for p in paths(config["nav"])
            if "/" not in p and p != "changelog.md"]


LESSON = """
const boxes = [...document.querySelectorAll('article .admonition.lesson')];
const guess = document.querySelector('article .admonition.question');
return boxes.map(box => {
  const body = box.cloneNode(true);
  body.querySelectorAll('.admonition-title, sup, .footnote-ref').forEach(e => e.remove());
  const r = box.getBoundingClientRect();
  return {top: r.top + window.scrollY, shown: box.offsetParent !== null && r.height > 0, asked: !!guess,
          folded: !!box.closest('details:not([open])'), text: body.textContent.replace(/\\s+/g, ' ').trim()};
});
"""
NUMBER = re.compile(r"(?<![\w.\-])\d[\d,]*(?:\.\d+)?")


def lesson_problems(found: list[dict]) -> list[str]:
    """The lesson boxes found on a chapter, as LESSON returns them: exactly one, shown unopened, starting within
    LESSON_PX of the page's top unless the chapter asks a guess first (then guess_first places it), one sentence of
    at most LESSON_WORDS words and LESSON_NUMBERS numbers."""
    if len(found) != 1:
        return [f"{len(found)} lesson boxes (one, `!!! lesson`, near the top)"]
    box, problems = found[0], []
    if not box["shown"] or box["folded"]:
        problems.append(f"the lesson is not shown unopened: “{box['text'][:60]}”")
    if box["top"] > LESSON_PX and not box.get("asked"):  # a chapter that asks first answers after (guess_first)
        problems.append(f"the lesson starts {box['top']:,.0f} px down the page, below the first two screens ({LESSON_PX:,} px)")
    words, numbers = box["text"].split(), NUMBER.findall(box["text"])
    if len(words) > LESSON_WORDS:
        problems.append(f"the lesson has {len(words)} words (at most {LESSON_WORDS}): “{box['text']}”")
    if len(numbers) > LESSON_NUMBERS:
        problems.append(f"the lesson states {len(numbers)} numbers {numbers} (at most {LESSON_NUMBERS}): “{box['text']}”")
    if len(re.findall(r"[.!?](?:\s|$)", box["text"])) != 1:
        problems.append(f"the lesson is not one sentence: “{box['text']}”")
    return problems


OVERFLOW = """
const vw = document.documentElement.clientWidth, out = [];
document.querySelectorAll('article .tabbed-labels > label').forEach(l => {
  const r = l.getBoundingClientRect();
  if (r.width > 0 && (r.right > vw + 0.5 || r.left < -0.5)) out.push(`tab “${l.textContent.trim()}” at x ${Math.round(r.left)}..${Math.round(r.right)} of ${vw} px`);
});
document.querySelectorAll('article .highlight pre, article .highlight-ipynb pre').forEach(pre => {
  if (pre.offsetParent && pre.scrollWidth > pre.clientWidth + 1) out.push(`code block “${pre.textContent.trim().slice(0, 40)}” scrolls sideways`);
});
return out;
"""


def at_phone_unopened(browser, page) -> list[str]:
    """`page` loaded at 390 px, in the light scheme, no details block opened and no tab clicked."""
    problems = []
    if page in guessing():
        problems += [f"guess: {p}" for p in guess_first(browser.execute_script(LAYOUT), page in ladder())]
    if page in ladder():
        problems += median_forward_only(browser, page)
    if page in chapters():
        problems += [f"lesson: {p}" for p in lesson_problems(browser.execute_script(LESSON))]
    problems += browser.execute_script(OVERFLOW)
    return problems + ([] if page.startswith("notebooks") else chapter_shape(browser))


def at_phone_opened(browser, page) -> list[str]:
    """`page` at 390 px in the light scheme with every details block opened (as `load` leaves it), no tab clicked."""
    browser.execute_script(OPEN_ALL)
    problems = []
    if page in TABLE_PAGES:
        problems += [f"number: {p}" for p in browser.execute_script(BROKEN_NUMBERS)[:20]]
    if page == "verification":
        problems += verification_cards(browser)
    if page == "claims" and not browser.execute_script(CLAIMS_CARDS):
        problems.append("the claims table is not shown as cards on a phone")
    if page == "naive":
        problems += masking_line(browser)
    if page in TAUGHT:
        problems += taught_names(browser, page)
    return problems


def at_phone_revealed(browser, page) -> list[str]:
    """`page` at 390 px in the light scheme, details opened; each check opens the tab of what it looks at."""
    problems = []
    if page in CHART_PAGES:
        problems += charts(browser, narrow=True)
    if page in TARGET_PAGES:
        problems += [f"finger: {p}" for p in browser.execute_script(TARGETS, FINGER_PX)[:20]]
    return problems


def test_a_new_price_redraws_every_cost_with_its_range(site, server, browser):
    """The cost table's price box, offline: a new price per GPU-hour redraws every row's dollars from the
    tokens/s the cell carries, its median and its range's ends alike, as the build wrote them at the default."""
    load(browser, server, "end-to-end")
    cells = """return [...document.querySelectorAll('td.attnprof-cost')].map(c =>
        [c.textContent, +c.dataset.tokensPerS, c.dataset.tokensPerSRange.split(' ').map(Number)])"""
    before = browser.execute_script(cells)
    assert before and any("[" in text for text, _, _ in before)
    browser.execute_script("const i = document.getElementById('attnprof-price'); i.value = '7.00'; "
                           "i.dispatchEvent(new Event('input'))")
    for (text, tps, (slow, fast)), (after, _, _) in zip(before, browser.execute_script(cells)):
        dollars = lambda rate, price: f"{price / 3600 / rate * 1e6:.3f}"
        ends = dollars(fast, 7.0), dollars(slow, 7.0)  # the fastest process's dollars first
        spread = "" if ends[0] == ends[1] else f" [{ends[0]}–{ends[1]}]"
        assert text.split(" ")[0] == dollars(tps, 3.5) and after == dollars(tps, 7.0) + spread, (text, after)


def test_a_lessons_number_opens_its_evidence_under_it_and_closes_it(site, server, browser):
    """A checked sentence's number, tapped on a phone: its evidence (the note in the page's closed Evidence box)
    opens under the paragraph that holds it, the page's box itself staying closed; a second tap closes it."""
    metrics(browser, PHONE)
    browser.get(f"{server}/backward/")
    view(browser, PHONE, False)
    closed = "return [...document.querySelectorAll('article details')].filter(d => d.querySelector('[id^=\"fn:evidence-\"]') && !d.open).length"
    assert browser.execute_script(closed) == 1  # the page's evidence, folded
    link = browser.find_element("css selector", 'a.footnote-ref[href="#fn:evidence-1"]')
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", link)
    link.click()
    opened = browser.execute_script("""
        const box = document.querySelector('.attnprof-evidence[data-for="fn:evidence-1"]');
        if (!box) return null;
        const block = document.querySelector('a.footnote-ref[href="#fn:evidence-1"]').closest('p, li');
        return {after: block.nextElementSibling === box || block.contains(box), text: box.textContent,
                note: document.getElementById('fn:evidence-1').textContent.replace('↩', '').trim(),
                shown: box.getBoundingClientRect().height > 0};""")
    assert opened and opened["after"] and opened["shown"], opened
    assert opened["text"].strip() == opened["note"] and "device time" in opened["text"]
    assert browser.execute_script(closed) == 1 and "#fn:" not in browser.current_url  # no jump to the box
    link.click()
    assert browser.execute_script("return document.querySelectorAll('.attnprof-evidence').length") == 0


def test_two_notes_of_one_paragraph_open_in_their_numbers_order(site, server, browser):
    """Two lessons' numbers in one paragraph, the later tapped first: their evidence opens under the paragraph
    in the numbers' order, each labelled with its number."""
    metrics(browser, PHONE)
    browser.get(f"{server}/backward/")
    refs = browser.execute_script("""
        const p = [...document.querySelectorAll('article p')].find(
            p => p.querySelectorAll('a.footnote-ref[href^="#fn:evidence-"]').length >= 2);
        return p ? [...p.querySelectorAll('a.footnote-ref[href^="#fn:evidence-"]')].slice(0, 2) : null;""")
    assert refs, "no paragraph on the backward page holds two lessons' numbers"
    for link in reversed(refs):
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'}); arguments[0].click()", link)
    order = browser.execute_script("""
        const p = arguments[0].closest('p'), out = [];
        for (let el = p.nextElementSibling; el && el.classList.contains('attnprof-evidence'); el = el.nextElementSibling)
            out.push([el.dataset.for, el.getAttribute('aria-label')]);
        return out;""", refs[0])
    numbers = [int(r.text) for r in refs]
    assert [f for f, _ in order] == [r.get_attribute("href").split("#")[1] for r in refs], order
    assert [label for _, label in order] == [f"Evidence {n}" for n in numbers], order


def test_a_lesson_out_of_place_too_long_or_missing_is_caught():
    """lesson_problems on boxes as LESSON reports them: a good one passes; one below two screens, one of 31
    words, one with three numbers, two sentences, none at all, each fails."""
    good = {"top": 900.0, "shown": True, "folded": False, "text": "The math backend launches 20 device ops against 7."}
    assert lesson_problems([good]) == []
    assert "below the first two screens" in lesson_problems([{**good, "top": LESSON_PX + 1}])[0]
    assert "31 words" in lesson_problems([{**good, "text": " ".join(["word"] * 30) + " end."}])[0]
    assert "3 numbers" in lesson_problems([{**good, "text": "It takes 1.5 µs, 2 µs and 3,000 µs."}])[0]
    assert "not one sentence" in lesson_problems([{**good, "text": "One. Two."}])[0]
    assert "not shown unopened" in lesson_problems([{**good, "folded": True}])[0]
    assert lesson_problems([]) and lesson_problems([good, good])
    assert {"", "naive", "math", "model-attention", "launch-bound"} <= set(chapters()) and "changelog" not in chapters()


def test_a_guess_too_late_or_answered_on_its_own_screen_is_caught():
    """guess_first on pages as LAYOUT reports them: a ladder chapter laid out as asked passes; one with 91 words
    before its guess, its lesson 599 px below the guess or above the trace, or no guess at all, each fails; a
    folded lesson may sit anywhere; a chapter beyond the post needs no trace."""
    good = {"title": 100.0, "guess": 900.0, "words": 90, "figure": 1400.0, "lesson": {"top": 2600.0, "folded": False},
            "box": {"shown": True, "folded": False, "text": "What to notice"}}
    assert guess_first(good, True) == []
    assert "91 words" in guess_first({**good, "words": 91}, True)[0]
    assert "599 px below the guess" in guess_first({**good, "lesson": {"top": 1499.0, "folded": False}}, True)[0]
    assert "before the trace" in " ".join(guess_first({**good, "lesson": {"top": 1300.0, "folded": False}}, True))
    assert guess_first({**good, "lesson": {"top": 1000.0, "folded": True}}, True) == []
    assert guess_first({**good, "guess": None}, True) == ["no guess (a question box) on the page"]
    assert guess_first({**good, "figure": None}, False) == []
    assert "before the guess" in guess_first({**good, "lesson": {"top": 800.0, "folded": False}}, False)[0]
    assert {"math", "naive", "scaling", "model-attention", "claims"} <= set(guessing()) and "at-a-glance" not in guessing()

