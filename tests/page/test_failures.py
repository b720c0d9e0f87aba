"""What went wrong, in words on the page: SearXNG and the fetcher failing, spent budgets,
every reason a page was not read, a busy gateway and a key over its limit.

The failures are real ones of the real parts (``tests/page/stack.py``): a SearXNG
limiter's recorded 429, a stopped SearXNG, a killed fetcher, the fetcher refusing
addresses under its own rules.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any
from urllib.parse import urlsplit

import pytest
from selenium.webdriver.common.by import By

from gateway.settings import Budgets, Limits
from testkit.origin import Reply, redirect
from testkit.searxng import recorded
from tests.page.browser import Page
from tests.page.chat import article, calls, fetch, ready, say, search, streamed
from tests.page.stack import Stack

pytestmark = pytest.mark.browser


def event_lines(page: Page) -> list[str]:
    """The tool-event lines of the last answer."""
    return [e.text for e in page.last_answer().find_elements(By.CSS_SELECTOR, ".events li")]


def test_search_and_fetcher_failures_are_told_in_words(page: Page, stack: Stack) -> None:
    start = stack.origin_url("/kettle/descale")
    stack.serve("/kettle/descale", article("Descaling", "Never read."))
    answers = stack.world.searxng.answers
    stack.call(answers.__setitem__, "limited", recorded("limiter_429_json_request_5.txt"))
    stack.call(answers.__setitem__, "json off", recorded("json_disabled_403.html"))
    stack.script(
        calls(search("limited")),
        calls(search("json off")),
        # Held until SearXNG and the fetcher are down.
        dataclasses.replace(calls(search("down"), fetch(start)), hold_head=True),
        streamed(say("Nothing could be searched or read.")),
    )
    ready(page, web=True)
    page.ask(f"What does {start} say?")  # the user's address may be read (rule 1)
    page.until(lambda: len(event_lines(page)) == 2, "two searched lines")
    stack.wait(stack.world.searxng.stop)
    stack.kill_fetcher()
    stack.release()
    page.wait_answer_done()

    host = urlsplit(start).netloc
    lines = event_lines(page)
    assert lines[:2] == [
        "search failed: “limited” — the search engine's limiter refused the gateway "
        "(too many requests)",
        "search failed: “json off” — the search engine (SearXNG) does not allow JSON answers",
    ]
    assert sorted(lines[2:]) == [
        f"could not read: {host}/kettle/descale — the page reader (fetcher) is not running",
        "search failed: “down” — the search engine (SearXNG) cannot be reached",
    ]
    failed = page.last_answer().find_elements(By.CSS_SELECTOR, ".events li.failed")
    assert len(failed) == 4
    assert page.text(".msg.assistant .answer") == "Nothing could be searched or read."
    for dark in (False, True):
        with page.emulating(phone=False, dark=dark):
            page.screenshot(f"failures-desktop-{'dark' if dark else 'light'}")


@pytest.mark.parametrize("stack", [{"budgets": Budgets(searches=1, pages=1)}], indirect=True)
def test_spent_budgets_are_told_in_words(page: Page, stack: Stack) -> None:
    first, second = stack.origin_url("/kettle/descale"), stack.origin_url("/kettle/more")
    stack.serve("/kettle/descale", article("Descaling", "Use citric acid."))
    stack.serve("/kettle/more", article("More", "Never read."))
    # One round: the second search and the second read find their budgets spent (the
    # calls start in order; the user's addresses may be read).
    stack.script(
        calls(search("kettle"), search("descale"), fetch(first), fetch(second)),
        streamed(say("From one page [1].")),
    )
    ready(page, web=True)
    page.ask(f"Compare {first} and {second}")
    page.wait_answer_done()

    host = urlsplit(first).netloc
    # The reads run at once: the second is refused while the first holds the one page,
    # so it says held (as its tool text does), not spent.
    held = "the rest of the page budget is held by the other reads running now"
    assert sorted(event_lines(page)) == [
        f"could not read: {host}/kettle/more — {held}",
        "not searched: “descale” — the search budget for this answer is spent",
        f"read: Descaling {host}",
        "searched: “kettle” · 6 results · no answer from brave (too many requests), "
        "duckduckgo (HTTP connection error), google (timeout)",
    ]
    assert page.text(".msg.assistant .answer") == "From one page [1]."


#: Addresses the fetcher refuses or fails on, each with the page's words for its reason.
#: ``{o}`` is the origin's ``origin.test:port``, ``{other}`` its ``other.test:port``.
REASONS = [
    ("https://{o}/missing", "the site answered with an error"),
    ("https://{o}/image.png", "not a page that can be read as text"),
    ("https://{o}/huge", "the page is too large"),
    ("https://{o}/loop", "too many redirects"),
    ("https://{other}/", "not in this answer's search results"),
    ("https://private.test/", "the address is not on the public internet"),
    ("https://nowhere.test/", "the name was not found"),
    ("https://origin.test:8443/", "only the standard https port is read"),
    ("ftp://origin.test/", "only https addresses are read"),
    ("https://user@{o}/", "addresses with a user name are not read"),
    ("https://origin.test:99999/", "the address is not valid"),
]


@pytest.mark.parametrize("stack", [{"budgets": Budgets(pages=100)}], indirect=True)
def test_every_read_failure_reason_is_told_in_words(page: Page, stack: Stack) -> None:
    origin = urlsplit(stack.origin_url("/")).netloc
    other = urlsplit(stack.origin_url("/", host="other.test")).netloc
    stack.serve("/image.png", Reply(headers=(("Content-Type", "image/png"),), body=b"\x89PNG"))
    stack.serve("/huge", article("Huge", "x " * 50_000))
    stack.serve("/loop", redirect(stack.origin_url("/loop")))
    addresses = [address.format(o=origin, other=other) for address, _ in REASONS]
    stack.script(calls(*(fetch(a) for a in addresses)), streamed(say("None could be read.")))
    ready(page, web=True)
    # The user names the hosts (rule 1), not other.test.
    page.ask(f"Read {stack.origin_url('/')}, https://private.test/ and https://nowhere.test/")
    page.wait_answer_done()

    lines = page.last_answer().find_elements(By.CSS_SELECTOR, ".events li")
    assert len(lines) == len(REASONS)
    shown: dict[str, Any] = {}
    for line in lines:
        assert "failed" in (line.get_attribute("class") or "")
        kind, _, rest = line.text.partition(": ")
        assert kind == "could not read"
        where, _, words = rest.partition(" — ")
        shown[words] = where
    assert sorted(shown) == sorted(words for _, words in REASONS)
    assert shown["only https addresses are read"] == "ftp://origin.test/"  # not a link
    assert shown["too many redirects"] == f"{origin}/loop"


@pytest.mark.parametrize("stack", [{"limits": Limits(max_chats=1)}], indirect=True)
def test_a_busy_gateway_is_told_with_its_retry_after(page: Page, stack: Stack) -> None:
    ready(page, web=False)
    with stack.chat_held_open():
        page.ask("Anyone free?")
        error = page.wait_text(".msg.assistant .error", "The gateway is busy.")
    assert error.text == "The gateway is busy. Try again in 1 s."
    assert page.visible(".msg.assistant .actions")


@pytest.mark.parametrize(
    "stack", [{"limits": Limits(requests_per_minute_per_key=2)}], indirect=True
)
def test_a_key_over_its_requests_per_minute_is_told_with_its_retry_after(
    page: Page, stack: Stack
) -> None:
    stack.script(streamed(say("The first answer.")))
    ready(page, web=False)  # the model list is the first request of the minute
    page.ask("One")
    page.wait_answer_done()
    page.ask("Two")

    error = page.wait_text(".msg.assistant .error", "Too many requests for this key.")
    assert re.fullmatch(r"Too many requests for this key\. Try again in \d+ s\.", error.text)
    assert int(error.text.split()[-2]) >= 20  # two a minute: the next one in about 30 s
