"""The ladder's chapters on a 390 px phone, laid out by headless Chromium: the lesson comes first. The trace
figure starts within FIRST_SCREENS px below the title, and the "What to notice" box is on the page as laid
out, with nothing opened."""
import pytest

pytestmark = pytest.mark.browser

from attnprof.model.stages import ladder
from test_browser import PHONE, browser, metrics, server  # noqa: F401  (fixtures: headless Chromium, the site served)

FIRST_SCREENS = 1700  # px below the title's bottom edge: about two phone screens

LAYOUT = """
const title = document.querySelector('article h1');
const figure = [...document.querySelectorAll('article .attnprof-trace svg')].find(s => s.getBoundingClientRect().width > 0);
const box = [...document.querySelectorAll('article .admonition')]
    .find(a => (a.querySelector('.admonition-title') || {}).textContent === 'What to notice');
const top = el => el.getBoundingClientRect().top + window.scrollY;
return {
  title: title && top(title) + title.getBoundingClientRect().height,
  figure: figure ? top(figure) : null,
  box: box ? {shown: box.offsetParent !== null && box.getBoundingClientRect().height > 0,
              folded: !!box.closest('details:not([open])'), text: box.textContent.trim().slice(0, 80)} : null,
};
"""


@pytest.mark.parametrize("stage", ladder())
def test_the_trace_and_what_to_notice_come_first_on_a_phone(site, server, browser, stage):
    metrics(browser, PHONE)  # before loading, so the page is laid out at a phone's width
    browser.get(f"{server}/{stage}/")
    at = browser.execute_script(LAYOUT)
    assert at["title"] is not None and at["figure"] is not None, (stage, at)
    below = at["figure"] - at["title"]
    assert 0 < below <= FIRST_SCREENS, f"{stage}: the trace figure starts {below:.0f} px below the title"
    assert at["box"] and at["box"]["shown"] and not at["box"]["folded"], (stage, at["box"])
