"""The page tells the truth about the web: a Web-on answer without a search that found
anything says so and why, sources read are told apart from those known only by their
search result, the gateway's own first search reads like any other, and the only model is
the one picked.

The end-to-end tests run the real gateway, research tools, SearXNG stand-in and fetcher
(``tests/page/stack.py``); the table of `webNote` runs the page's own renderer on one
page load.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
import trustme
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By

from testkit.engine import MODEL
from testkit.searxng import recorded
from tests.page.browser import Page
from tests.page.chat import article, calls, fetch, ready, say, search, streamed
from tests.page.stack import Stack

pytestmark = pytest.mark.browser

QUESTION = "How do I descale a kettle?"
#: SearXNG's engines that did not answer, in the recorded answer of a search.
SILENT = "brave (too many requests), duckduckgo (HTTP connection error), google (timeout)"


def event_lines(page: Page) -> list[str]:
    return [e.text for e in page.last_answer().find_elements(By.CSS_SELECTOR, ".events li")]


def source_lines(page: Page, css: str) -> list[str]:
    items = page.last_answer().find_elements(By.CSS_SELECTOR, css)
    return [str(i.get_attribute("textContent") or "") for i in items]


def test_the_gateways_search_reads_like_any_other_and_sources_say_what_was_read(
    page: Page, stack: Stack
) -> None:
    start = stack.origin_url("/kettle/descale")
    stack.serve("/kettle/descale", article("Descaling", "Use citric acid."))
    stack.script(
        # Round 1 ignores "required" and answers from memory: held, dropped, never shown.
        streamed(say("From memory: kettles never need descaling.")),
        # Round 2, after the gateway's own search: the model reads the first result.
        calls(fetch(start)),
        streamed(say("Use citric acid [1].")),
    )
    ready(page, web=True)
    page.ask(QUESTION)
    page.wait_answer_done()

    host = urlsplit(start).netloc
    assert event_lines(page) == [
        # The gateway's search: the same line a model's search gets.
        f"searched: “{QUESTION}” · 6 results · no answer from {SILENT}",
        f"read: Descaling {host}",
    ]
    assert page.text(".msg.assistant .answer") == "Use citric acid [1]."
    assert "From memory" not in page.last_answer().text
    assert stack.searches() == [QUESTION]
    assert [c["tool_choice"] for c in stack.chats()] == ["required", "auto", "auto"]

    # The cited source was read; the other five are known only by their snippets.
    assert source_lines(page, ".sources > ol li") == [f"Kettle descaling guide {host} · read"]
    others = source_lines(page, ".more-sources li")
    assert len(others) == 5
    assert all(line.endswith(" · snippet only") for line in others), others
    how = page.last_answer().find_element(By.CSS_SELECTOR, ".more-sources .how")
    assert how.get_attribute("title") == (
        "The model saw only this search result's title and snippet, not the page."
    )
    assert not page.visible(".msg.assistant .web-note")  # it did search, and found


def test_a_web_answer_without_a_search_that_answered_says_so_and_why(
    page: Page, stack: Stack
) -> None:
    answers = stack.world.searxng.answers
    stack.call(answers.__setitem__, QUESTION, recorded("json_disabled_403.html"))
    stack.call(answers.__setitem__, "kettle", recorded("json_disabled_403.html"))
    stack.script(
        streamed(say("Prose instead of a call.")),  # the gateway searches: refused
        calls(search("kettle")),  # the model tries again: refused too
        streamed(say("Descaling is easy.")),
    )
    ready(page, web=True)
    page.ask(QUESTION)
    page.wait_answer_done()

    note = page.wait_text(
        ".msg.assistant .web-note",
        "not searched: the search engine (SearXNG) does not allow JSON answers",
    )
    assert note.is_displayed()
    # Said before the answer is read: the line comes first.
    below = note.find_elements(By.XPATH, "following-sibling::div[contains(@class, 'answer')]")
    assert len(below) == 1
    assert event_lines(page) == [
        f"search failed: “{QUESTION}” — the search engine (SearXNG) does not allow JSON answers",
        "search failed: “kettle” — the search engine (SearXNG) does not allow JSON answers",
    ]
    assert page.text(".msg.assistant .answer") == "Descaling is easy."
    for dark in (False, True):
        with page.emulating(phone=False, dark=dark):
            page.screenshot(f"web-note-desktop-{'dark' if dark else 'light'}")

    # Web off: nothing to say about the web.
    stack.script(streamed(say("Offline answer.")))
    page.set_web(False)
    page.ask("And without the web?")
    page.wait_answer_done()
    assert page.text(".msg.assistant:last-child .answer") == "Offline answer."
    assert not page.visible(".msg.assistant:last-child .web-note")


def test_the_only_model_is_preselected(page: Page, stack: Stack) -> None:
    page.open()
    # A model picked on an earlier visit that this gateway no longer serves.
    page.driver.execute_script("localStorage.setItem('tigress.model', 'gone-model')")
    stack.script(streamed(say("Answered.")))
    ready(page, web=False)
    picker = page.find("#model")
    assert picker.get_attribute("value") == MODEL
    assert [o.text for o in picker.find_elements(By.TAG_NAME, "option")] == [MODEL]
    assert page.driver.execute_script("return localStorage.getItem('tigress.model')") == MODEL
    page.ask("Which model?")
    page.wait_answer_done()
    assert [c["model"] for c in stack.chats()] == [MODEL]


# --- The line, rule by rule (the page's own renderer) ---------------------------------


@pytest.fixture(scope="module")
def render_page(driver: WebDriver, ca: trustme.CA) -> Iterator[Page]:
    with Stack(ca) as stack:
        page = Page(driver, stack.url)
        page.open()
        yield page
        driver.get("about:blank")


def web_note(page: Page, events: list[Any], sources: list[Any]) -> Any:
    return page.driver.execute_async_script(
        "const [events, sources, done] = arguments;"
        "import('/static/render.js').then((r) => done(r.webNote(events, sources)));",
        events,
        sources,
    )


def searched(error: str | None = None, results: int = 3, by: str = "model") -> dict[str, Any]:
    return {"type": "searched", "queries": ["q"], "results": results, "error": error, "by": by}


SOURCE = {"n": 1, "url": "https://example.org/", "title": "Example", "read": False}
READ = {"type": "read", "url": "https://example.org/", "ok": True}


@pytest.mark.parametrize(
    ("events", "sources", "line"),
    [
        ([searched()], [SOURCE], ""),
        ([searched(by="gateway")], [SOURCE], ""),  # the gateway's search counts the same
        ([searched("json_disabled"), searched()], [SOURCE], ""),  # one answered: enough
        (
            [searched(results=0)],
            [],
            "the search found nothing: this answer is not from the web",
        ),
        (
            [searched("json_disabled", by="gateway")],
            [],
            "not searched: the search engine (SearXNG) does not allow JSON answers",
        ),
        (
            [searched("unreachable")],
            [],
            "not searched: the search engine (SearXNG) cannot be reached",
        ),
        (
            [searched("rate_limited")],
            [],
            "not searched: the search engine's limiter refused the gateway (too many requests)",
        ),
        (
            [searched("timeout")],
            [],
            "the search failed: the search engine (SearXNG) did not answer in time",
        ),
        (
            [searched("server_error")],
            [],
            "the search failed: the search engine (SearXNG) had an internal error",
        ),
        (
            [searched("timeout"), searched("budget")],
            [],
            "the search failed: the search engine (SearXNG) did not answer in time",
        ),
        (
            [searched("budget")],
            [],
            "not searched: the search budget for this answer is spent",
        ),
        ([searched("new_cause")], [], "the search failed: new cause"),
        ([READ], [SOURCE], "not searched: only the pages named in the question were read"),
        ([], [], "not searched: the model answered without searching the web"),
        (None, None, "not searched: the model answered without searching the web"),
    ],
    ids=[
        "searched",
        "searched-by-the-gateway",
        "one-of-two-answered",
        "found-nothing",
        "json-disabled",
        "unreachable",
        "rate-limited",
        "timeout",
        "server-error",
        "budget-after-a-failure",
        "budget-alone",
        "unknown-cause",
        "only-the-users-pages",
        "no-event",
        "nothing-at-all",
    ],
)
def test_the_web_note(
    render_page: Page, events: list[Any] | None, sources: list[Any] | None, line: str
) -> None:
    assert web_note(render_page, events or [], sources or []) == line
    if events is None:
        assert web_note(render_page, None, None) == line  # type: ignore[arg-type]
