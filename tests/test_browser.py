"""Every page of the built site in a real browser: Debian's headless Chromium, driven by Selenium
through /usr/bin/chromedriver (nothing is downloaded). No console errors, every image loads, tables
are there, downloads resolve; a screenshot of each page is kept in tests/artifacts/."""
import functools
import http.server
import shutil
import threading
import urllib.request

import pytest

from attnprof.stages import ROOT

ARTIFACTS = ROOT / "tests" / "artifacts"
NO_TABLE = {"", "reading-a-profile"}  # pages of prose; every other page shows measurements as tables
INSTALL = "install Debian's browser and its driver: apt-get install chromium chromium-driver"


@pytest.fixture(scope="module")
def server(site):
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
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
                 "--window-size=1400,1800"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    b = webdriver.Chrome(service=Service(executable_path=driver), options=options)
    yield b
    b.quit()


def page_paths(site):
    return sorted(str(p.parent.relative_to(site)).replace(".", "") for p in site.rglob("index.html"))


def test_every_page_in_a_real_browser(site, server, browser):
    ARTIFACTS.mkdir(exist_ok=True)
    problems = []
    for path in page_paths(site):
        url = f"{server}/{path}/" if path else f"{server}/"
        browser.get(url)
        errors = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        broken = browser.execute_script(
            "return [...document.images].filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src)")
        tables = browser.execute_script("return document.querySelectorAll('article table').length")
        downloads = browser.execute_script(
            "return [...document.querySelectorAll('a[href]')].map(a => a.href)"
            ".filter(h => /\\.(gz|json|ipynb)$/.test(h))")
        for href in downloads:
            with urllib.request.urlopen(href) as r:
                if r.status != 200 or not r.read(64):
                    problems.append(f"{path}: download {href} does not resolve")
        browser.save_screenshot(str(ARTIFACTS / f"{path.replace('/', '_') or 'home'}.png"))
        problems += [f"{path}: console error {e}" for e in errors]
        problems += [f"{path}: image did not load {src}" for src in broken]
        if tables == 0 and path not in NO_TABLE and not path.startswith("notebooks"):
            problems.append(f"{path}: no table")
    assert not problems, "\n".join(problems)
    assert len(list(ARTIFACTS.glob("*.png"))) >= len(page_paths(site))
