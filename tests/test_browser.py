"""Every page of the built site in a real browser: Debian's headless Chromium, driven by Selenium
through /usr/bin/chromedriver. No console errors, every image loads, tables are there and fit their
column, trace figures answer hover and tap, downloads resolve, the Perfetto button hands over the
committed trace and says so when Perfetto does not answer; on a 390 px phone no page scrolls sideways,
no table header breaks inside a word, an op list's times and a trace's GPU lane are on screen;
axe-core's WCAG 2 A/AA rules find no serious or critical violation in either scheme. With
ATTNPROF_SCREENSHOTS=1, screenshots of each page at 1400 px and 390 px, in the light and the dark scheme,
are kept in tests/artifacts/ (whole pages, cut at MAX_SHOT_PX); no check reads them, so they are not
taken otherwise.

One Chromium per test process (each xdist worker has its own) serves every test that asks for `browser`,
reset between tests to a fresh one's state; each page is its own test, so the workers share the pages.
A page's test loads it once at each width and makes there every check that only reads the page: this
file's and test_phone.py's (charts, tap targets, numbers, cards, prose width, the lesson first on a
phone); the tests that tap or click load their own page.

axe-core (the npm package, version 4) is installed on first use into tests/.axe/ with
`npm install --no-save --prefix tests/.axe axe-core@4`; nothing else is downloaded."""
import atexit
import base64
import functools
import gzip
import http.server
import os
import re
import shutil
import subprocess
import threading
import time
import urllib.request

import pytest

pytestmark = pytest.mark.browser

from attnprof.model import store
from attnprof.analysis import records
from attnprof.model.stages import ladder
from attnprof.model.snippets import ROOT

ARTIFACTS = ROOT / "tests" / "artifacts"
NO_TABLE = {"", "reading-a-profile", "changelog", "contributing", "contributing/gpu-machine",
            "contributing/extending"}  # pages of prose; every other page shows measurements as tables
INSTALL = "install Debian's browser and its driver: apt-get install chromium chromium-driver"
WIDE, PHONE = 1400, 390
MAX_SHOT_PX = 16000  # a screenshot stops here: the longest chapters run past it only in tables already checked
SHOTS = os.environ.get("ATTNPROF_SCREENSHOTS") == "1"  # keep screenshots of every page in ARTIFACTS

# A page that speaks Perfetto's side of the postMessage protocol: it answers "PING" with "PONG" and
# keeps what arrives as {perfetto: {buffer, title}}, base64-encoded, for the test to read.
STUB = b"""<!doctype html><title>Perfetto stub</title><script>
window.addEventListener("message", function (e) {
  if (e.data === "PING") { e.source.postMessage("PONG", "*"); return; }
  if (!e.data || !e.data.perfetto) return;
  var bytes = new Uint8Array(e.data.perfetto.buffer), s = "";
  for (var i = 0; i < bytes.length; i += 8192) s += String.fromCharCode.apply(null, bytes.subarray(i, i + 8192));
  window.received = {title: e.data.perfetto.title, base64: btoa(s), origin: e.origin};
});
</script>"""

# A page that never answers, as ui.perfetto.dev is without internet.
SILENT = b"<!doctype html><title>Perfetto stub that never answers</title>"
PERFETTO_NOTE_S = 10  # the most a reader waits for the button to say something
SHORT_WAIT_MS = 1000  # the wait told to the buttons of all pages but one in the offline test

AXE_DIR = ROOT / "tests" / ".axe"
AXE_JS = AXE_DIR / "node_modules" / "axe-core" / "axe.min.js"
# Only these of axe's WCAG 2 A/AA rules read colours, so only these can change with the scheme: every rule runs
# at each width in one scheme, these in the other scheme too.
COLOUR_RULES = ["color-contrast", "link-in-text-block"]
# axe put into the open page by a script element from `arguments[0]`, unless it is there already (switching
# the scheme keeps it, loading a page drops it), then run by every rule or `arguments[1]` these: the serious and
# critical violations, each in a line; null when axe does not load.
AXE_RUN = """
const done = arguments[arguments.length - 1], src = arguments[0], only = arguments[1];
const run = () => axe.run(document, {runOnly: only ? {type: 'rule', values: only}
                                                   : {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']},
                                     resultTypes: ['violations']}).then(r => done(
  r.violations.filter(v => v.impact === 'serious' || v.impact === 'critical').map(v =>
    `${v.id} (${v.impact}, ${v.nodes.length} nodes): ` + v.nodes.slice(0, 3).map(n =>
      n.target.join(' ') + ' ' + ((n.any[0] || n.all[0] || {}).message || '')).join(' | '))));
if (typeof axe === 'object') { run(); return; }
const script = document.createElement('script');
script.src = src;
script.onload = () => typeof axe === 'object' ? run() : done(null);
script.onerror = () => done(null);
document.head.appendChild(script);
"""

# On a phone: every op list's first time and every trace's GPU lane inside the viewport, as laid out
# (closed tabs and details opened first, each figure looked at in its own tab).
PHONE_CHECKS = """
const out = [], vw = document.documentElement.clientWidth;
document.querySelectorAll('article details').forEach(d => d.open = true);
const shown = el => {  // open the tab that holds el
  const block = el.closest('.tabbed-block');
  if (!block) return;
  const i = [...block.parentNode.children].indexOf(block);
  block.closest('.tabbed-set').querySelectorAll(':scope > input')[i].click();
  shown(block.parentNode);
};
const inside = (r, what) => { if (r.left < -0.5 || r.right > vw + 0.5 || r.width === 0)
  out.push(`${what} at x ${Math.round(r.left)}..${Math.round(r.right)} of a ${vw} px viewport`); };
document.querySelectorAll('article .attnprof-oplist table').forEach((t, k) => {
  shown(t);
  const cell = t.querySelector('tbody tr td:nth-child(2)');
  const wrap = t.closest('.md-typeset__scrollwrap');
  if (wrap) wrap.scrollLeft = 0;
  inside(cell.getBoundingClientRect(), `op list ${k + 1}: the first row's time "${cell.textContent.trim()}"`);
});
document.querySelectorAll('article .attnprof-trace').forEach((f, k) => {
  shown(f);
  f.scrollLeft = 0;
  const bars = [...f.querySelectorAll('.attnprof-gpu-op')].map(b => b.getBoundingClientRect()).filter(r => r.width > 0);
  if (!bars.length) { out.push(`trace figure ${k + 1}: no GPU op drawn on screen`); return; }
  inside({left: Math.min(...bars.map(r => r.left)), right: Math.max(...bars.map(r => r.right)), width: 1},
         `trace figure ${k + 1}: the GPU lane`);
  const text = [...f.querySelectorAll('text')].map(t => t.getBoundingClientRect().height).filter(h => h > 0);
  if (Math.min(...text) < 10) out.push(`trace figure ${k + 1}: text ${Math.min(...text).toFixed(1)} px high`);
});
document.querySelectorAll('article table th').forEach(th => {  // a header word on one line, never broken
  if (!th.offsetParent || th.closest('[data-cards]')) return;
  const walker = document.createTreeWalker(th, NodeFilter.SHOW_TEXT);
  for (let node; (node = walker.nextNode());) {
    if (node.parentElement.closest('code[title]')) continue;  // a kernel's name, which wraps rather than run off

    for (const m of node.data.matchAll(/\\S+/g)) {
      const range = document.createRange();
      range.setStart(node, m.index);
      range.setEnd(node, m.index + m[0].length);
      const lines = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
      if (lines.size > 1) out.push(`table header "${th.textContent.trim()}": the word "${m[0]}" breaks across lines`);
    }
  }
});
return out;
"""

FITS = """
const column = document.querySelector('article.md-content__inner');
const limit = column.getBoundingClientRect().right + 1;
const out = [];
for (const el of column.querySelectorAll('table, svg, img, figure, .attnprof-trace')) {
  if (el.closest('.md-typeset .tabbed-block') && !el.offsetParent) continue;  // a hidden tab
  if (el.closest('svg') && el.closest('svg') !== el) continue;  // a node inside a figure
  if (el.closest('.twemoji, .md-button')) continue;  // icons
  const r = el.getBoundingClientRect();
  if (r.width > 0 && r.right > limit) out.push(`${el.tagName.toLowerCase()} ${Math.round(r.width)} px wide,`
      + ` ${Math.round(r.right - limit)} px past the column: ` + (el.textContent || el.src || '').trim().slice(0, 60));
}
return out;
"""


def serve(folder):
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}"


@pytest.fixture(scope="session")
def server(site):
    httpd, url = serve(site)
    yield url
    httpd.shutdown()


@pytest.fixture(scope="session")
def stub(tmp_path_factory):
    """The Perfetto stub on a second origin (another port), as ui.perfetto.dev would be."""
    folder = tmp_path_factory.mktemp("perfetto")
    (folder / "index.html").write_bytes(STUB)
    httpd, url = serve(folder)
    yield url + "/"
    httpd.shutdown()


@pytest.fixture(scope="session")
def silent(tmp_path_factory):
    """A page on a second origin that never answers the protocol: Perfetto's UI without internet."""
    folder = tmp_path_factory.mktemp("silent")
    (folder / "index.html").write_bytes(SILENT)
    httpd, url = serve(folder)
    yield url + "/"
    httpd.shutdown()


@pytest.fixture(scope="session")
def axe(lock):
    """The address of axe-core 4's script, installed from npm into tests/.axe/ when it is not there yet (by
    one process), served from an origin of its own (so that the browser keeps it compiled between pages)."""
    with lock(AXE_DIR / "install.lock"):
        if not AXE_JS.exists():
            npm = shutil.which("npm")
            assert npm, "no npm on PATH: install Node.js and npm (apt-get install npm), which the test uses for axe-core"
            r = subprocess.run([npm, "install", "--no-save", "--no-audit", "--no-fund", "--prefix", str(AXE_DIR),
                                "axe-core@4"], capture_output=True, text=True, timeout=300)
            assert r.returncode == 0 and AXE_JS.exists(), f"npm could not install axe-core@4 into {AXE_DIR}: {r.stderr[-500:]}"
    httpd, url = serve(AXE_JS.parent)
    yield f"{url}/{AXE_JS.name}"
    httpd.shutdown()


def accessibility(browser, axe_url, only=None) -> list[str]:
    """axe-core's serious and critical WCAG 2 A/AA violations on the open page, by every rule or `only` these."""
    browser.set_script_timeout(60)
    found = browser.execute_async_script(AXE_RUN, axe_url, only)
    assert found is not None, f"axe-core did not load into the page from {axe_url}"
    return found


WINDOW = (WIDE, 1000)  # Chromium's window, CSS px


@functools.cache
def chromium():
    """Headless Chromium, started once per test process and quit when it ends. Timers keep their pace in
    tabs that are not in front (several pages wait on their own timeouts at once)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    binary, driver = shutil.which("chromium"), shutil.which("chromedriver")
    assert binary and driver, f"no chromium/chromedriver on PATH: {INSTALL}"
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-background-timer-throttling", "--disable-renderer-backgrounding",
                 "--disable-backgrounding-occluded-windows", "--hide-scrollbars", f"--window-size={WINDOW[0]},{WINDOW[1]}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    b = webdriver.Chrome(service=Service(executable_path=driver), options=options)
    atexit.register(b.quit)
    return b


@pytest.fixture
def browser():
    """The process's Chromium as a new one would be: one tab showing nothing, its window's size, no emulated
    screen, no stored page state (the scheme a reader chose) and an empty console log."""
    b = chromium()
    home = b.current_window_handle
    b.get_log("browser")
    yield b
    for handle in b.window_handles:
        if handle != home:
            b.switch_to.window(handle)
            b.close()
    b.switch_to.window(home)
    if b.execute_script("return location.protocol").startswith("http"):
        b.execute_script("localStorage.clear(); sessionStorage.clear()")
    b.get("about:blank")
    b.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    b.set_window_size(*WINDOW)
    b.get_log("browser")


def page_paths(site):
    return sorted(str(p.parent.relative_to(site)).replace(".", "") for p in site.rglob("index.html"))


def source_pages() -> list[str]:
    """The pages a build makes, named as page_paths names them, read off the sources (so that each page is
    a test of its own): each Markdown page under docs/, the notebooks' pages among them (notebooks.write_all)."""
    docs = ROOT / "docs"
    chapters = [str(p.relative_to(docs).with_suffix("")) for p in docs.rglob("*.md")]
    return sorted("" if c == "index" else c.removesuffix("/index") for c in chapters)


PAGES = source_pages()


def metrics(browser, width):
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": width, "height": 900, "deviceScaleFactor": 1, "mobile": width < 600})


# Switch the scheme as a reader does, with the header's toggle, unless it is the one asked for; after a
# switch, answer once two frames have passed (Material turns transitions off while it switches, until the
# next frame). Answers the scheme.
SCHEME = """
const done = arguments[arguments.length - 1], dark = arguments[0];
const scheme = () => document.body.getAttribute('data-md-color-scheme');
if ((scheme() === 'slate') === dark) { done(scheme()); return; }
document.querySelector('label[for^="__palette"]:not([hidden])').click();
requestAnimationFrame(() => requestAnimationFrame(() => done(scheme())));
"""


def scheme(browser, dark) -> bool:
    """Put the open page in the dark or light scheme, switched as a reader does: with the header's toggle.
    Whether the page shows that scheme now."""
    return browser.execute_async_script(SCHEME, dark) == ("slate" if dark else "default")


def view(browser, width, dark):
    """Lay the open page out at `width` CSS px (a phone's viewport below 600 px), in the dark or light
    scheme, switched as a reader does: with the header's toggle."""
    metrics(browser, width)
    return scheme(browser, dark)


def shoot(browser, name):
    height = min(browser.execute_script("return document.documentElement.scrollHeight"), MAX_SHOT_PX)
    width = browser.execute_script("return document.documentElement.clientWidth")
    shot = browser.execute_cdp_cmd("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True,
        "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}})
    (ARTIFACTS / f"{name}.png").write_bytes(base64.b64decode(shot["data"]))


@pytest.fixture(scope="session")
def shots(run_once):
    """Whether screenshots are kept (ATTNPROF_SCREENSHOTS=1); when they are, those of an earlier run are
    cleared first, once, so the folder holds this run's alone."""
    def clear(_):
        ARTIFACTS.mkdir(exist_ok=True)
        for old in ARTIFACTS.glob("*.png"):
            old.unlink()
    if SHOTS:
        run_once("artifacts-cleared", clear)
    return SHOTS


def perfetto_controls(browser) -> list[str]:
    """Each trace figure of the open page without an Open-in-Perfetto link after it (before the next figure)."""
    return browser.execute_script("""
        const figures = [...document.querySelectorAll('article .attnprof-trace')];
        const links = [...document.querySelectorAll('article a.attnprof-perfetto')];
        const after = (a, b) => a.compareDocumentPosition(b) & Node.DOCUMENT_POSITION_FOLLOWING;
        return figures.filter((f, i) => !links.some(a => after(f, a) && (i + 1 === figures.length || after(a, figures[i + 1]))))
            .map(f => f.querySelector('svg').getAttribute('aria-label'));
    """)


def test_the_browser_opens_every_built_page(site):
    assert page_paths(site) == PAGES, (f"the browser test opens {PAGES} (read off docs/ and the notebooks), "
                                       f"the build made {page_paths(site)}: make source_pages() find every page")


# The trace is part of the page, so each bar's <title> shows on hover; its text is not shrunk below the
# page's small print.
TRACE_FIGURE = """
const svg = document.querySelector('article .attnprof-trace svg');
if (!svg) return null;
const small = parseFloat(getComputedStyle(document.querySelector('article table')).fontSize);
const sizes = [...svg.querySelectorAll('text')].map(t => t.getBoundingClientRect().height)
    .filter(h => h > 0);
return {titles: [...svg.querySelectorAll('rect > title')].map(t => t.textContent),
        smallest: Math.min(...sizes), small: small};
"""


def trace_answers_hover(browser, stage) -> list[str]:
    """A ladder chapter's trace figure is inline, a <title> on each of its forward's ops, its text no smaller
    than 0.9 times the tables' (on the page as loaded at 1400 px)."""
    figure = browser.execute_script(TRACE_FIGURE)
    if not figure:
        return ["no inline trace figure"]
    problems = []
    ops = records.load_summary(stage)["ops_per_forward"]
    if sum(t.split(".")[0].isdigit() for t in figure["titles"]) < ops:
        problems.append(f"the trace figure names fewer than its {ops} ops on hover: {figure['titles'][:5]}")
    if figure["smallest"] < figure["small"] * 0.9:
        problems.append(f"the trace figure's text is {figure['smallest']:.1f} px high, the tables' {figure['small']:.1f} px")
    return problems


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p or "home")
def test_every_page_in_a_real_browser(path, server, browser, axe, shots):
    """Each page loaded once at each width, every check of it made there: this file's, and those of
    test_phone.py that read a page as laid out (their docstrings say in which state of the page)."""
    import test_phone as phone  # here: test_phone imports this module
    problems = []
    url = f"{server}/{path}/" if path else f"{server}/"
    name = path.replace("/", "_") or "home"
    metrics(browser, WIDE)  # before loading: a page resized after its load can be laid out stale
    browser.get(url)
    scheme(browser, dark=False)
    errors = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    broken = browser.execute_script(
        "return [...document.images].filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src)")
    tables = browser.execute_script("return document.querySelectorAll('article table').length")
    downloads = browser.execute_script(
        "return [...document.querySelectorAll('a[href]')].map(a => a.href)"
        ".filter(h => /\\.(gz|json|ipynb)$/.test(h))")
    for href in sorted(set(downloads)):
        with urllib.request.urlopen(href) as r:
            if r.status != 200 or not r.read(64):
                problems.append(f"{path}: download {href} does not resolve")
    problems += [f"{path}: console error {e}" for e in errors]
    problems += [f"{path}: image did not load {src}" for src in broken]
    if tables == 0 and path not in NO_TABLE and not path.startswith("notebooks"):
        problems.append(f"{path}: no table")
    if not path.startswith("notebooks"):
        problems += [f"{path} at {WIDE} px: {p}" for p in browser.execute_script(FITS)]
        problems += [f"{path}: trace figure '{f}' has no Open-in-Perfetto button after it" for f in perfetto_controls(browser)]
    if path in ladder():
        problems += [f"{path} at {WIDE} px: {p}" for p in trace_answers_hover(browser, path)]
    if shots:
        shoot(browser, f"{name}-{WIDE}-light")
    problems += [f"{path} at {WIDE} px, light: axe: {v}" for v in accessibility(browser, axe)]
    if not scheme(browser, dark=True):
        problems.append(f"{path}: the light/dark toggle did not switch to the dark scheme")
    if shots:
        shoot(browser, f"{name}-{WIDE}-dark")
    problems += [f"{path} at {WIDE} px, dark: axe: {v}" for v in accessibility(browser, axe, COLOUR_RULES)]
    if path in phone.WIDE_PAGES:  # test_phone's checks at 1400 px, in the light scheme; they open the page's details
        scheme(browser, dark=False)
        problems += [f"{path} at {WIDE} px: {p}" for p in phone.at_wide(browser, path)]
        scheme(browser, dark=True)
    metrics(browser, PHONE)
    browser.refresh()  # laid out afresh at a phone's width, as a phone would load it (the dark scheme is kept)
    for dark in (True, False):
        shade = "dark" if dark else "light"
        scheme(browser, dark)
        overflow = browser.execute_script("return document.documentElement.scrollWidth")
        if overflow > PHONE + 1:
            problems.append(f"{path} at {PHONE} px: the page itself scrolls sideways ({overflow} px)")
        if shots:
            shoot(browser, f"{name}-{PHONE}-{shade}")
        problems += [f"{path} at {PHONE} px, {shade}: axe: {v}"
                     for v in accessibility(browser, axe, None if dark else COLOUR_RULES)]
    # in the light scheme now: test_phone's checks at 390 px, around this file's own
    problems += [f"{path} at {PHONE} px: {p}" for p in phone.at_phone_unopened(browser, path)]
    problems += [f"{path} at {PHONE} px: {p}" for p in phone.at_phone_opened(browser, path)]
    problems += [f"{path} at {PHONE} px: {p}" for p in browser.execute_script(PHONE_CHECKS)]
    problems += [f"{path} at {PHONE} px: {p}" for p in phone.at_phone_revealed(browser, path)]
    assert not problems, "\n".join(problems)
    if shots:
        kept = [f"{name}-{width}-{shade}.png" for width in (WIDE, PHONE) for shade in ("light", "dark")]
        assert all((ARTIFACTS / f).exists() for f in kept), f"{path}: screenshots missing from {ARTIFACTS}: {kept}"


def test_open_in_perfetto_posts_the_committed_trace(site, server, stub, browser, perfetto_received):
    browser.get(f"{server}/naive/")
    fetched = "return performance.getEntriesByType('resource').map(e => e.name).filter(n => n.endsWith('.gz'))"
    assert browser.execute_script(fetched) == [], "the trace was fetched before anyone clicked"
    received = perfetto_received(browser, stub)
    committed = (store.CAPTURES / "naive.trace.json.gz").read_bytes()
    assert gzip.decompress(base64.b64decode(received["base64"])) == gzip.decompress(committed)
    assert "Naive" in received["title"] and received["origin"] == server


# In a page at 1400 px whose buttons talk to `arguments[0]` (a Perfetto page that never answers) and wait
# `arguments[1]` ms for it (null: the reader's wait), with every details block open: note the time from the
# clicks until every button's line says that Perfetto did not answer, taken in the page (so pages in other
# tabs can wait at the same time), then click each button as a reader would, at once on every button.
# Answers how many buttons it clicked.
CLICK_OFFLINE = """
const buttons = [...document.querySelectorAll('article a.attnprof-perfetto')];
if (!buttons.length) return 0;
window.attnprofPerfettoUrl = arguments[0];
if (arguments[1] !== null) window.attnprofPerfettoTimeoutMs = arguments[1];
document.querySelectorAll('article details').forEach(d => d.open = true);
const lines = () => buttons.map(a => a.attnprofNote);
window.attnprofClicked = performance.now();
new MutationObserver((_, watcher) => {
  if (lines().every(n => n && n.textContent.includes('did not answer'))) {
    window.attnprofAnswered = performance.now() - window.attnprofClicked;
    watcher.disconnect();
  }
}).observe(document.querySelector('article'), {childList: true, subtree: true, characterData: true});
for (const b of buttons) {
  b.scrollIntoView({block: 'center'});
  b.click();
}
return buttons.length;
"""
# Wait in the page until its buttons have answered or `arguments[0]` ms have passed since the clicks: the
# seconds they took, or null.
ANSWERED = """
const done = arguments[arguments.length - 1], until = arguments[0];
(function poll() {
  if (window.attnprofAnswered !== undefined) done(window.attnprofAnswered / 1000);
  else if (performance.now() - window.attnprofClicked > until) done(null);
  else setTimeout(poll, 100);
})();
"""
NOTES = ("return [...document.querySelectorAll('article a.attnprof-perfetto')].map(a => a.attnprofNote ?"
         " [a.attnprofNote.textContent, !!a.attnprofNote.querySelector('a[href$=\".gz\"]'),"
         " a.getAttribute('aria-busy')] : null)")


def test_every_open_in_perfetto_control_answers_offline(site, server, silent, browser):
    """Against a Perfetto page that never answers, every Open-in-Perfetto button (each trace figure has its
    own: test_every_page_in_a_real_browser) says so and offers the trace as a download. The page with the
    most buttons waits as a reader does and must answer within PERFETTO_NOTE_S seconds; the others, each in
    its own tab while it waits, are told a wait of SHORT_WAIT_MS (the same code, a shorter wait)."""
    from selenium.webdriver.support.ui import WebDriverWait
    problems, waiting = [], {}  # tab -> (page, the wait it was told: None for the reader's)
    home = browser.current_window_handle
    buttons = {path: len(re.findall(r'<a [^>]*class="[^"]*\battnprof-perfetto\b', (site / path / "index.html").read_text()))
               for path in page_paths(site) if not path.startswith("notebooks")}
    for k, path in enumerate(sorted((p for p in buttons if buttons[p]), key=lambda p: -buttons[p])):
        browser.switch_to.new_window("tab")
        metrics(browser, WIDE)
        browser.get(f"{server}/{path}/" if path else f"{server}/")
        # a new tab can hand back control before its page is in it (seen with Chromium 150): wait for its buttons
        WebDriverWait(browser, 10).until(lambda b: b.execute_script(
            "return document.querySelectorAll('article a.attnprof-perfetto').length") == buttons[path])
        wait = None if k == 0 else SHORT_WAIT_MS
        assert browser.execute_script(CLICK_OFFLINE, silent, wait) == buttons[path], f"{path}: not every button clicked"
        waiting[browser.current_window_handle] = path, wait
    browser.set_script_timeout(PERFETTO_NOTE_S + 30)
    for tab, (path, wait) in waiting.items():  # the tabs wait at the same time: a later tab has answered by its turn
        browser.switch_to.window(tab)
        answered = browser.execute_async_script(ANSWERED, (PERFETTO_NOTE_S + 1) * 1000)
        for i, n in enumerate(browser.execute_script(NOTES)):
            if not (n and "did not answer" in n[0] and n[1] and n[2] is None):
                problems.append(f"{path}: Open-in-Perfetto button {i + 1} showed no message with a download link "
                                f"within {PERFETTO_NOTE_S} s of a silent Perfetto page: {n}")
        if wait is None and answered is not None and answered > PERFETTO_NOTE_S:
            problems.append(f"{path}: the Perfetto buttons took {answered:.1f} s to say that Perfetto did not answer")
    assert sum(wait is None for _, wait in waiting.values()) == 1 and len(waiting) >= 2, waiting
    assert not problems, "\n".join(problems)


def test_a_tap_shows_a_full_name(site, server, browser):
    """Touch has no hover: tapping a kernel's short name in the op list, or a GPU op in the trace, shows
    its full name in a caption."""
    from selenium.webdriver.common.by import By
    metrics(browser, PHONE)
    browser.get(f"{server}/naive/")
    code = browser.find_element(By.CSS_SELECTOR, "article .attnprof-oplist td code[title]")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", code)
    code.click()
    tip = browser.find_element(By.CSS_SELECTOR, ".attnprof-tip")
    shown = lambda: browser.execute_script("return arguments[0].textContent", tip)
    assert tip.is_displayed() and shown() == code.get_attribute("title")
    bars = browser.find_elements(By.CSS_SELECTOR, "article .attnprof-trace svg.attnprof-narrow .attnprof-gpu-op")
    bar = max(bars, key=lambda b: float(b.get_attribute("width")))  # the widest: a finger's target
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", bar)
    bar.click()
    title = browser.execute_script("return arguments[0].querySelector('title').textContent", bar)
    assert tip.is_displayed() and shown() == title and re.match(r"\d+\. ", title)  # "5. elementwise …"
    text = browser.find_element(By.CSS_SELECTOR, "article > p")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", text)
    text.click()
    assert not tip.is_displayed()
    metrics(browser, WIDE)
