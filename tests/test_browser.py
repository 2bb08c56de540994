"""Every page of the built site in a real browser: Debian's headless Chromium, driven by Selenium
through /usr/bin/chromedriver (nothing is downloaded). No console errors, every image loads, tables
are there and fit their column, trace figures answer hover, downloads resolve, the Perfetto button
hands over the committed trace; screenshots of each page at 1400 px and 390 px, in the light and the
dark scheme, are kept in tests/artifacts/ (whole pages, cut at MAX_SHOT_PX)."""
import base64
import functools
import gzip
import http.server
import shutil
import threading
import time
import urllib.request

import pytest

pytestmark = pytest.mark.browser

from attnprof import records, store
from attnprof.stages import ladder, ROOT

ARTIFACTS = ROOT / "tests" / "artifacts"
NO_TABLE = {"", "reading-a-profile"}  # pages of prose; every other page shows measurements as tables
INSTALL = "install Debian's browser and its driver: apt-get install chromium chromium-driver"
WIDE, PHONE = 1400, 390
MAX_SHOT_PX = 16000  # a screenshot stops here: the longest chapters run past it only in tables already checked

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


@pytest.fixture(scope="module")
def server(site):
    httpd, url = serve(site)
    yield url
    httpd.shutdown()


@pytest.fixture(scope="module")
def stub(tmp_path_factory):
    """The Perfetto stub on a second origin (another port), as ui.perfetto.dev would be."""
    folder = tmp_path_factory.mktemp("perfetto")
    (folder / "index.html").write_bytes(STUB)
    httpd, url = serve(folder)
    yield url + "/"
    httpd.shutdown()


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    assert chromium and driver, f"no chromium/chromedriver on PATH: {INSTALL}"
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--hide-scrollbars", f"--window-size={WIDE},1000"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    b = webdriver.Chrome(service=Service(executable_path=driver), options=options)
    yield b
    b.quit()


def page_paths(site):
    return sorted(str(p.parent.relative_to(site)).replace(".", "") for p in site.rglob("index.html"))


def metrics(browser, width):
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": width, "height": 900, "deviceScaleFactor": 1, "mobile": width < 600})


def view(browser, width, dark):
    """Lay the open page out at `width` CSS px (a phone's viewport below 600 px), in the dark or light
    scheme, switched as a reader does: with the header's toggle."""
    metrics(browser, width)
    scheme = "return document.body.getAttribute('data-md-color-scheme')"
    if (browser.execute_script(scheme) == "slate") != dark:
        browser.execute_script("document.querySelector('label[for^=\"__palette\"]:not([hidden])').click()")
    time.sleep(0.05)
    return browser.execute_script(scheme) == ("slate" if dark else "default")


def shoot(browser, name):
    height = min(browser.execute_script("return document.documentElement.scrollHeight"), MAX_SHOT_PX)
    width = browser.execute_script("return document.documentElement.clientWidth")
    shot = browser.execute_cdp_cmd("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True,
        "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}})
    (ARTIFACTS / f"{name}.png").write_bytes(base64.b64decode(shot["data"]))


def test_every_page_in_a_real_browser(site, server, browser):
    ARTIFACTS.mkdir(exist_ok=True)
    for old in ARTIFACTS.glob("*.png"):
        old.unlink()
    problems = []
    for path in page_paths(site):
        url = f"{server}/{path}/" if path else f"{server}/"
        name = path.replace("/", "_") or "home"
        metrics(browser, WIDE)  # before loading: a page resized after its load can be laid out stale
        browser.get(url)
        view(browser, WIDE, dark=False)
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
        shoot(browser, f"{name}-{WIDE}-light")
        if not view(browser, WIDE, dark=True):
            problems.append(f"{path}: the light/dark toggle did not switch to the dark scheme")
        shoot(browser, f"{name}-{WIDE}-dark")
        view(browser, PHONE, dark=True)
        browser.refresh()  # laid out afresh at a phone's width, as a phone would load it (the scheme is kept)
        for dark in (True, False):
            view(browser, PHONE, dark)
            overflow = browser.execute_script("return document.documentElement.scrollWidth")
            if overflow > PHONE + 1:
                problems.append(f"{path} at {PHONE} px: the page itself scrolls sideways ({overflow} px)")
            shoot(browser, f"{name}-{PHONE}-{'dark' if dark else 'light'}")
    view(browser, WIDE, dark=False)
    assert not problems, "\n".join(problems)
    assert len(list(ARTIFACTS.glob("*.png"))) == 4 * len(page_paths(site))


@pytest.mark.parametrize("stage", ladder())
def test_trace_figures_are_inline_and_answer_hover(site, server, browser, stage):
    """The trace is part of the page, so each bar's <title> shows on hover; its text is not shrunk below
    the page's small print."""
    browser.get(f"{server}/{stage}/")
    figure = browser.execute_script("""
        const svg = document.querySelector('article .attnprof-trace svg');
        if (!svg) return null;
        const small = parseFloat(getComputedStyle(document.querySelector('article table')).fontSize);
        const sizes = [...svg.querySelectorAll('text')].map(t => t.getBoundingClientRect().height)
            .filter(h => h > 0);
        return {titles: [...svg.querySelectorAll('rect > title')].map(t => t.textContent),
                smallest: Math.min(...sizes), small: small};
    """)
    assert figure, f"{stage}: no inline trace figure"
    ops = records.load_summary(stage)["ops_per_forward"]
    assert sum(t.split(".")[0].isdigit() for t in figure["titles"]) >= ops, figure["titles"][:5]
    assert figure["smallest"] >= figure["small"] * 0.9, figure


def test_open_in_perfetto_posts_the_committed_trace(site, server, stub, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    browser.get(f"{server}/naive/")
    home = browser.current_window_handle
    fetched = "return performance.getEntriesByType('resource').map(e => e.name).filter(n => n.endsWith('.gz'))"
    assert browser.execute_script(fetched) == [], "the trace was fetched before anyone clicked"
    browser.execute_script("window.attnprofPerfettoUrl = arguments[0]", stub)
    browser.find_element(By.CSS_SELECTOR, "a.attnprof-perfetto").click()
    WebDriverWait(browser, 10).until(lambda b: len(b.window_handles) == 2)
    browser.switch_to.window(next(h for h in browser.window_handles if h != home))
    try:
        received = WebDriverWait(browser, 20).until(lambda b: b.execute_script("return window.received || null"))
    finally:
        browser.close()
        browser.switch_to.window(home)
    committed = (store.CAPTURES / "naive.trace.json.gz").read_bytes()
    assert gzip.decompress(base64.b64decode(received["base64"])) == gzip.decompress(committed)
    assert "Naive" in received["title"] and received["origin"] == server
