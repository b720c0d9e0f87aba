"""The page's renderer (gateway/static/render.js), run in the browser on hostile input.

Both sides of each rule: the addresses that may become links and those that may not; the
Markdown that becomes elements and the markup that must stay text. One gateway and one
page load serve the whole table.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from selenium.webdriver.chrome.webdriver import WebDriver

from tests.page.browser import Page
from tests.page.stack import Stack

pytestmark = pytest.mark.browser

#: The elements the renderer may create for an answer, and the attributes it may set.
ELEMENTS = {
    "P", "H1", "H2", "H3", "H4", "H5", "H6", "UL", "OL", "LI", "BLOCKQUOTE", "TABLE",
    "THEAD", "TBODY", "TR", "TH", "TD", "HR", "PRE", "CODE", "EM", "STRONG", "S", "BR",
    "A", "SPAN", "DIV",
}  # fmt: skip
ATTRIBUTES = {"href", "target", "rel", "referrerpolicy", "class", "start", "title", "aria-label"}

RENDER = """
const [source, done] = arguments;
import('/static/render.js').then((render) => {
  const box = document.createElement('div');
  box.append(render.renderMarkdown(source, null));
  const nodes = [...box.querySelectorAll('*')];
  done({
    elements: nodes.map((n) => n.tagName),
    attributes: nodes.flatMap((n) => [...n.attributes].map((a) => a.name)),
    hrefs: nodes.filter((n) => n.hasAttribute('href')).map((n) => n.getAttribute('href')),
    text: box.textContent,
  });
}, (error) => done({error: String(error)}));
"""


@pytest.fixture(scope="module")
def render_page(driver: WebDriver) -> Iterator[Page]:
    with Stack() as stack:
        page = Page(driver, stack.url)
        page.open()
        yield page
        driver.get("about:blank")


def safe_href(page: Page, raw: str) -> Any:
    return page.driver.execute_async_script(
        "const [raw, done] = arguments;"
        "import('/static/render.js').then((r) => done(r.safeHref(raw)));",
        raw,
    )


def render(page: Page, source: str) -> dict[str, Any]:
    result: dict[str, Any] = page.driver.execute_async_script(RENDER, source)
    assert "error" not in result, result
    return result


@pytest.mark.parametrize(
    ("raw", "href"),
    [
        ("https://example.org/a?b#c", "https://example.org/a?b#c"),
        ("http://example.org", "http://example.org/"),
        ("HTTPS://EXAMPLE.ORG/", "https://example.org/"),
        ("https:example.org", "https://example.org/"),
        ("javascript:alert(1)", None),
        ("JaVaScRiPt:alert(1)", None),
        ("  javascript:alert(1)", None),
        ("java\tscript:alert(1)", None),
        ("java\nscript:alert(1)", None),
        ("\x01javascript:alert(1)", None),
        ("vbscript:msgbox(1)", None),
        ("data:text/html,<script>alert(1)</script>", None),
        ("file:///etc/passwd", None),
        ("blob:https://example.org/x", None),
        ("mailto:a@example.org", None),
        ("ftp://example.org/", None),
        ("//example.org/x", None),
        ("/v1/models", None),
        ("#top", None),
        ("", None),
    ],
    ids=[
        "https", "http", "upper-case", "no-slashes", "javascript", "mixed-case-javascript",
        "leading-space", "tab-inside", "newline-inside", "control-char", "vbscript", "data",
        "file", "blob", "mailto", "ftp", "scheme-relative", "relative", "fragment", "empty",
    ],
)  # fmt: skip
def test_only_absolute_http_addresses_become_links(
    render_page: Page, raw: str, href: str | None
) -> None:
    assert safe_href(render_page, raw) == href


@pytest.mark.parametrize(
    ("source", "text"),
    [
        ("<script>alert(1)</script>", "<script>alert(1)</script>"),
        ("a <img src=x onerror=alert(1)> b", "a <img src=x onerror=alert(1)> b"),
        ('<a href="https://example.org">x</a>', '<a href="https://example.org">x</a>'),
        ("<div>\n\n*x*\n\n</div>", "<div>x</div>"),
        ("<iframe src=https://example.org></iframe>", "<iframe src=https://example.org></iframe>"),
        ("<svg onload=alert(1)>", "<svg onload=alert(1)>"),
        ("&lt;script&gt;", "<script>"),
        ("[x](javascript:alert(1))", "[x](javascript:alert(1))"),
        ("<javascript:alert(1)>", "<javascript:alert(1)>"),
        ("[x][r]\n\n[r]: javascript:alert(1)", "[x][r][r]: javascript:alert(1)"),
        ("![t](https://example.org/p.png)", "!t"),
        ('[x](https://example.org "title")', "x"),
        ("`<b>code</b>`", "<b>code</b>"),
        ("```html\n<script>alert(1)</script>\n```", "<script>alert(1)</script>\n"),
        ("| a |\n|--:|\n| 1 |", "a1"),
    ],
    ids=[
        "script", "img-onerror", "raw-anchor", "html-block", "iframe", "svg", "entity",
        "javascript-link", "javascript-autolink", "javascript-reference", "image",
        "link-title", "inline-code", "fenced-code", "aligned-table",
    ],
)  # fmt: skip
def test_markup_in_answers_stays_text(render_page: Page, source: str, text: str) -> None:
    result = render(render_page, source)
    assert set(result["elements"]) <= ELEMENTS, result["elements"]
    assert set(result["attributes"]) <= ATTRIBUTES, result["attributes"]
    assert all(h.startswith(("http://", "https://")) for h in result["hrefs"]), result["hrefs"]
    assert result["text"] == text


def test_markdown_keeps_its_structure(render_page: Page) -> None:
    result = render(
        render_page,
        "# T\n\n1. a\n2. b\n\n- **c** _d_ ~~e~~\n\n> q\n\n```py\nx = 1\n```\n\n"
        "| h |\n|:-:|\n| v |\n\nsee https://example.org/x\n\n---",
    )
    assert result["elements"] == [
        "H1", "OL", "LI", "LI", "UL", "LI", "STRONG", "EM", "S", "BLOCKQUOTE", "P", "PRE",
        "CODE", "DIV", "TABLE", "THEAD", "TR", "TH", "TBODY", "TR", "TD", "P", "A", "HR",
    ]  # fmt: skip
    assert result["hrefs"] == ["https://example.org/x"]
