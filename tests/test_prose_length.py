"""Long sentences in the prose a reader sees (issue 42): outside what the site folds, at most LIMIT sentences of
more than WORDS words on the whole site, counted in the built HTML.

What counts: the text of each page's <article>, less what a reader does not read as prose there: folded boxes
(<details>: `??? note` admonitions, the box that holds a page's evidence notes), code blocks, tables, figures
and drawings, scripts, navigation, the headings' permalink marks, the numbers that open evidence notes, a
notebook's code cells and what mkdocs-jupyter adds around them. Each block (paragraph, list item, heading,
admonition title...) is its own text; inside one, whitespace is normalised, so that a line break in the source
never ends a sentence. A sentence ends at . ? or ! (and any closing quote or bracket) followed by a space and a
capital, a digit, a quote or an opening bracket; not inside a number (1.5) and not after an abbreviation (e.g.).
A word is a whitespace-separated token with a letter or a digit in it (a lone dash is no word)."""
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

pytestmark = pytest.mark.site  # reads the whole built site

WORDS, LIMIT = 40, 5

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
SKIP_TAGS = {"details", "pre", "table", "figure", "svg", "script", "style", "nav", "header", "footer", "button",
             "template", "noscript", "clipboard-copy"}
SKIP_CLASSES = {
    "footnote-ref",  # the number after a lesson that opens its evidence note
    "headerlink", "anchor-link",  # a heading's permalink mark (MkDocs, mkdocs-jupyter)
    "md-source-file",  # the page's dates
    "jp-CodeCell", "jp-InputPrompt", "jp-OutputPrompt", "clipboard-copy-txt", "notice",  # a notebook's code cells
    "attnprof-evidence",  # an evidence note opened under its paragraph (made by evidence.js; never in the HTML)
}
BLOCKS = {"p", "li", "ul", "ol", "dl", "dt", "dd", "div", "blockquote", "section", "article", "summary",
          "h1", "h2", "h3", "h4", "h5", "h6", "br", "hr", "figcaption", "caption", "td", "th"}
ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "cf.", "approx.", "Fig.", "fig.", "et al.", "Eq.")
CODE = "\x01"  # marks where inline code starts: a sentence may start with code (`pytest -m ...`)
END = re.compile(r"""[.?!]["'”’)\]]*(?=\s+["'“‘(\[\x01]?[A-Z0-9\x01])""")


class Article(HTMLParser):
    """The prose of a page's <article> as a list of blocks, each a string, without what SKIP_* names."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.open = []  # the open elements inside <article>: (tag, skipped)
        self.inside = 0  # how deep in <article> elements
        self.blocks, self.current = [], []

    def _break(self):
        text = " ".join("".join(self.current).split())
        if text:
            self.blocks.append(text)
        self.current = []

    def _skipping(self):
        return any(skipped for _, skipped in self.open)

    def handle_starttag(self, tag, attrs):
        if not self.inside:
            if tag == "article":
                self.inside, self.open = 1, [("article", False)]
            return
        attrs = dict(attrs)
        if tag in BLOCKS and not self._skipping():
            self._break()
        if tag in VOID:
            return
        classes = set((attrs.get("class") or "").split())
        skipped = tag in SKIP_TAGS or bool(classes & SKIP_CLASSES) or "hidden" in attrs
        self.open.append((tag, skipped))
        if tag == "code" and not self._skipping():
            self.current.append(CODE)

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID and self.inside:
            self.handle_endtag(tag)

    def handle_endtag(self, tag):
        if not self.inside or tag in VOID:
            return
        names = [t for t, _ in self.open]
        if tag not in names:
            return  # a stray end tag
        while self.open:  # close up to the matching element (an unclosed one inside it closes with it)
            name, _ = self.open.pop()
            if name == tag:
                break
        if not self._skipping() and tag in BLOCKS:
            self._break()
        if not self.open:
            self._break()
            self.inside = 0

    def handle_data(self, data):
        if self.inside and not self._skipping():
            self.current.append(data)


def blocks(page: Path, marked: bool = False) -> list[str]:
    """The prose blocks of `page`; `marked`: with CODE where inline code starts, for `sentences`."""
    parser = Article()
    parser.feed(page.read_text(encoding="utf-8"))
    parser.close()
    parser._break()
    return parser.blocks if marked else [b.replace(CODE, "") for b in parser.blocks]


def sentences(block: str) -> list[str]:
    """`block` cut at its sentence ends (see the module's docstring)."""
    out, start = [], 0
    for m in END.finditer(block):
        last = block[start:m.start() + 1].split()[-1]  # the word that ends at the stop
        if last.endswith(ABBREVIATIONS) or re.fullmatch(r"(?:[A-Za-z]\.){2,}", last):  # e.g., U.S.
            continue
        out.append(block[start:m.end()])
        start = m.end()
    out.append(block[start:])
    return [s.replace(CODE, "").strip() for s in out if s.replace(CODE, "").strip()]


def words(sentence: str) -> int:
    return sum(1 for token in sentence.split() if re.search(r"\w", token))


def pages(site: Path) -> list[Path]:
    return sorted(p for p in site.rglob("index.html") if p.parent.name not in ("search", "assets")
                  and "assets" not in p.relative_to(site).parts)


def long_sentences(site: Path, n: int = WORDS) -> list[tuple[str, int, str]]:
    """(page, words, sentence) for every sentence of more than `n` words outside what the site folds."""
    found = []
    for page in pages(site):
        name = str(page.parent.relative_to(site)).replace(".", "") or "(home)"
        for block in blocks(page, marked=True):
            for s in sentences(block):
                if words(s) > n:
                    found.append((name, words(s), s))
    return found


def report(found) -> str:
    return "\n".join(f"  {page}: {n} words: {' '.join(s.split()[:12])} ..." for page, n, s in found)


def test_sentences_split_where_a_reader_ends_them():
    assert sentences("It ran 1.5 ms faster, e.g. on the H200. Then it stopped! Did it? \"Yes.\" 3 runs (of 4.) Done") \
        == ["It ran 1.5 ms faster, e.g. on the H200.", "Then it stopped!", "Did it?", "\"Yes.\"", "3 runs (of 4.)", "Done"]
    assert sentences(f"Markers narrow it. {CODE}pytest -m site builds it.") == ["Markers narrow it.", "pytest -m site builds it."]
    assert sentences("see torch.nn.functional. The call") == ["see torch.nn.functional.", "The call"]
    assert words("a — b c-d 1.5 ms") == 5


def test_the_counter_reads_the_article_and_leaves_out_what_is_folded(tmp_path):
    page = tmp_path / "index.html"
    page.write_text("<nav><p>Menu item. Another</p></nav><article><h1>Title<a class=\"headerlink\">&para;</a></h1>"
                    "<p>One sentence\nacross two source lines.<sup><a class=\"footnote-ref\">1</a></sup></p>"
                    "<details class=\"note\"><summary>Evidence</summary><p>Folded words.</p></details>"
                    "<div class=\"highlight\"><pre><code>x = 1. Y</code></pre></div><table><tr><td>Cell.</td></tr>"
                    "</table><ul><li>Item <code>f()</code> here.<ul><li>Nested.</li></ul></li></ul><br>"
                    "<figure><svg><title>Drawn.</title></svg></figure></article><footer>Foot.</footer>")
    assert blocks(page) == ["Title", "One sentence across two source lines.", "Item f() here.", "Nested."]


def test_at_most_five_long_sentences_outside_folded_details(site):
    found = long_sentences(site)
    assert len(found) <= LIMIT, (f"{len(found)} sentences of more than {WORDS} words outside folded details "
                                 f"(at most {LIMIT}):\n{report(found)}")


if __name__ == "__main__":  # python tests/test_prose_length.py SITE_DIR: the long sentences of a built site
    import sys
    found = long_sentences(Path(sys.argv[1]))
    print(report(found))
    print(f"{len(found)} sentences of more than {WORDS} words")
