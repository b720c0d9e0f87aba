"""The page's renderer (gateway/http/static/render.js), run in the browser on hostile input.

Both sides of each rule: the addresses that may become links and those that may not; the
Markdown that becomes elements and the markup that must stay text. One gateway and one
page load serve the whole table.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import trustme
from selenium.webdriver.chrome.webdriver import WebDriver

from fetcher.reasons import Reason
from gateway.tools.fetch.rules import ReadProblem
from gateway.tools.search.answer import FailureCause
from gateway.tools.search.text import BUDGET_SPENT
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
def render_page(driver: WebDriver, ca: trustme.CA) -> Iterator[Page]:
    with Stack(ca) as stack:
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


def call(page: Page, function: str, *args: Any) -> Any:
    """``render.<function>(...args)`` in the page."""
    return page.driver.execute_async_script(
        "const [name, args, done] = [arguments[0], arguments[1], arguments[2]];"
        "import('/static/render.js').then((r) => done(r[name](...args)));",
        function,
        list(args),
    )


#: Every reason word a ``read`` event may carry: the fetcher's (SPEC 7,
#: ``fetcher/reasons.py``) and the gateway's for a read that reached no page
#: (``gateway/tools/fetch/rules.py`` ReadProblem).
READ_REASONS = {
    "scheme": "only https addresses are read",
    "port": "only the standard https port is read",
    "userinfo": "addresses with a user name are not read",
    "malformed": "the address is not valid",
    "not_in_answer": "not in this answer's search results",
    "not_public": "the address is not on the public internet",
    "dns": "the name was not found",
    "connect": "the site could not be reached",
    "tls": "the site's certificate was not valid",
    "timeout": "the page took too long",
    "too_large": "the page is too large",
    "content_type": "not a page that can be read as text",
    "http_status": "the site answered with an error",
    "redirects": "too many redirects",
    "internal": "the page reader failed on this page",
    "unreadable": "the document has no readable text (scanned, protected or damaged)",
    "denied": "the operator's source lists do not allow this site",
    "unavailable": "the page reader (fetcher) is not running",
    "busy": "the page reader is busy with other reads",
    "failed": "the page reader failed",
    "budget": "the page budget for this answer is spent",
    "budget_held": "the rest of the page budget is held by the other reads running now",
}


def test_every_read_reason_has_words(render_page: Page) -> None:
    words = {reason: call(render_page, "reasonText", reason) for reason in READ_REASONS}
    assert words == READ_REASONS
    assert {r.value for r in Reason} | {p.value for p in ReadProblem} == set(READ_REASONS)


#: Every ``error`` of a ``searched`` event: SearXNG's failure causes and ``budget``.
SEARCH_ERRORS = {
    "unreachable": "the search engine (SearXNG) cannot be reached",
    "timeout": "the search engine (SearXNG) did not answer in time",
    "broken": "the connection to the search engine (SearXNG) broke",
    "bad_request": "the search engine (SearXNG) rejected the search",
    "json_disabled": "the search engine (SearXNG) does not allow JSON answers",
    "rate_limited": "the search engine's limiter refused the gateway (too many requests)",
    "server_error": "the search engine (SearXNG) had an internal error",
    "http_status": "the search engine (SearXNG) answered with an error",
    "content_type": "the answer was not from the search engine (SearXNG)",
    "not_json": "the answer was not from the search engine (SearXNG)",
    "budget": "the search budget for this answer is spent",
}


def test_every_search_error_has_words(render_page: Page) -> None:
    words = {error: call(render_page, "searchErrorText", error) for error in SEARCH_ERRORS}
    assert words == SEARCH_ERRORS
    assert {c.value for c in FailureCause} | {BUDGET_SPENT} == set(SEARCH_ERRORS)


@pytest.mark.parametrize(
    ("function", "word", "words"),
    [
        ("reasonText", "pdf_encrypted", "pdf encrypted"),
        ("reasonText", "__proto__", "  proto  "),
        ("reasonText", "toString", "toString"),
        ("reasonText", "<b>x</b>", "<b>x</b>"),
        ("reasonText", "", "it could not be read"),
        ("searchErrorText", "new_cause", "new cause"),
        ("searchErrorText", "constructor", "constructor"),
    ],
    ids=["new-word", "proto", "inherited-name", "markup", "empty", "new-cause", "constructor"],
)
def test_an_unknown_word_is_shown_as_itself(
    render_page: Page, function: str, word: str, words: str
) -> None:
    # A word added later (a parallel branch's PDF reasons, say) reads as itself; names of
    # the object's prototype are not looked up.
    assert call(render_page, function, word) == words


@pytest.mark.parametrize(
    ("calls", "line"),
    [
        ([], ""),
        ([{"tool": "web_search", "query": "kettle"}], "searching “kettle”"),
        (
            [{"tool": "fetch_page_content_recursive", "url": "https://example.org:8443/a"}],
            "reading example.org:8443",
        ),
        (
            [
                {"tool": "web_search", "query": "a"},
                {"tool": "web_search", "query": "b"},
                {"tool": "fetch_page_content_recursive", "url": "https://x.example/1"},
                {"tool": "fetch_page_content_recursive", "url": "https://x.example/2"},
            ],
            "searching “a”, “b” and reading x.example",
        ),
        (
            [{"tool": "web_search", "query": q} for q in "abcde"],
            "searching “a”, “b” and 3 more",
        ),
        ([{"tool": "web_search", "query": "x" * 100}], f"searching “{'x' * 59}…”"),
        (
            [{"tool": "fetch_page_content_recursive", "url": "javascript:alert(1)"}],
            "reading a page",
        ),
        ([{"tool": "other_tool"}], "running other_tool"),
        ([None, "x", {"query": 3}], ""),
    ],
    ids=[
        "none", "search", "read", "both", "many", "long-query", "unsafe-address",
        "other-tool", "malformed",
    ],
)  # fmt: skip
def test_the_progress_line_names_what_runs(render_page: Page, calls: list[Any], line: str) -> None:
    assert call(render_page, "workingText", calls) == line
