"""The chat page in a real browser against the real gateway and research tools (SPEC 2a, 4).

Headless Chromium drives the page served by the gateway on uvicorn. Under the Web switch
the gateway runs its production tools: searches go to the SearXNG stand-in (recorded
answers, their results moved to the local HTTPS origin) and pages are read by the
fetcher's gRPC service on a Unix socket, under the explicit test Policy. Only the model
is scripted (the fake engine over HTTP). See ``tests/page/stack.py``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import trustme
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from gateway.settings import EngineSettings
from testkit.engine import MODEL, Data, Pause, Stall, chunk
from testkit.origin import html
from testkit.searxng import Served
from tests.page.browser import OUTPUT, Page
from tests.page.chat import (
    FETCH,
    SEARCH,
    article,
    calls,
    event_chunk,
    fetch,
    ready,
    say,
    search,
    streamed,
)
from tests.page.stack import Stack
from tests.support.world import KEY

pytestmark = pytest.mark.browser

QUESTION = "How do I descale a kettle?"
#: SearXNG's engines that did not answer, in the recorded answer of a week's search.
SILENT = (
    "brave (Suspended: too many requests), duckduckgo (HTTP connection error), google (timeout)"
)


def kettle_site(stack: Stack) -> str:
    """The recorded results' first page, linking to a page and to a missing one; its
    address."""
    stack.serve(
        "/kettle/descale",
        article("Descaling", "Use citric acid.", ("/kettle/more", "/kettle/gone")),
    )
    stack.serve("/kettle/more", article("More on descaling", "Rinse twice."))
    return stack.origin_url("/kettle/descale")


def host(stack: Stack) -> str:
    """The origin as the page shows it (name and port)."""
    return urlsplit(stack.origin_url("/")).netloc


def test_web_answer_streams_tokens_tool_events_and_linked_citations(
    page: Page, stack: Stack
) -> None:
    start = kettle_site(stack)
    stack.call(
        stack.world.searxng.answers.__setitem__,
        "kettle descale",
        stack.world.on_origin("search_time_range_week.json"),
    )
    stack.script(
        calls(search("kettle descale", time_range="week")),
        calls(fetch(start)),
        streamed(
            say("## Descaling\n\nUse citric acid [1] "),
            Pause(),
            say("and rinse twice [5]."),
        ),
    )
    ready(page, web=True)
    page.ask(QUESTION)

    # The engine is paused mid-answer: the first words are on the page already.
    page.wait_text(".msg.assistant .answer", "Use citric acid")
    assert page.visible("#stop")
    assert "rinse twice" not in page.text(".msg.assistant .answer")
    stack.release()
    page.wait_answer_done()
    assert not page.visible("#stop")

    answer = page.last_answer()
    lines = [e.text for e in answer.find_elements(By.CSS_SELECTOR, ".events li")]
    assert lines[:2] == [
        f"searched: “kettle descale” · past week · 4 results · no answer from {SILENT}",
        f"read: Descaling {host(stack)}",
    ]
    # The crawl's other pages finish in either order.
    assert sorted(lines[2:]) == [
        f"could not read: {host(stack)}/kettle/gone — the site answered with an error",
        f"read: More on descaling {host(stack)}",
    ]
    link = answer.find_element(By.CSS_SELECTOR, ".events .read:not(.failed) a")
    assert link.get_attribute("href") == start
    assert link.get_attribute("target") == "_blank"
    assert link.get_attribute("rel") == "noopener noreferrer"
    failed = answer.find_element(By.CSS_SELECTOR, ".events .failed a")
    assert failed.get_attribute("href") == stack.origin_url("/kettle/gone")

    assert answer.find_element(By.CSS_SELECTOR, ".answer h2").text == "Descaling"
    cites = answer.find_elements(By.CSS_SELECTOR, ".answer .cite-link")
    assert [c.text for c in cites] == ["1", "5"]
    cites[1].click()
    target = page.until(lambda: page.displayed(".sources li:target"), "the cited source")
    source = target.find_element(By.CSS_SELECTOR, "a")
    assert target.get_attribute("value") == "5"
    assert source.get_attribute("href") == stack.origin_url("/kettle/more")
    assert source.text == "More on descaling"
    assert source.get_attribute("rel") == "noopener noreferrer"
    assert page.violations() == []  # the strict CSP lets the page do all of this

    # The Web switch reached the gateway: it offered the engine its real tools, and the
    # search and the read went through SearXNG and the fetcher.
    first = stack.chats()[0]
    assert [t["function"]["name"] for t in first["tools"]] == [SEARCH, FETCH]
    assert stack.searches() == ["kettle descale"]
    assert (
        stack.fetcher_metric("tigress_fetcher_grpc_handled", {"method": "ReadStream", "code": "OK"})
        == 1
    )


def test_the_progress_line_says_what_the_tools_do(page: Page, stack: Stack) -> None:
    held = stack.hold("/kettle/descale", article("Descaling", "Use citric acid."))
    stack.script(
        calls(search("kettle descale")),
        calls(fetch(stack.origin_url("/kettle/descale"))),
        streamed(Pause(), say("Citric acid [1].")),
    )
    ready(page, web=True)
    page.ask(QUESTION)

    # While the fetcher waits for the page, the line names the site being read...
    stack.asked(held)
    page.wait_text(".msg.assistant .progress", f"reading {host(stack)}…")
    assert page.text(".msg.assistant .events") == (
        "searched: “kettle descale” · 6 results · no answer from brave (too many requests), "
        "duckduckgo (HTTP connection error), google (timeout)"
    )
    stack.let_go(held)
    # ...then the model is at work again (the tools are done), then writes the answer.
    page.wait_text(".msg.assistant .progress", "thinking…")
    stack.release()
    page.wait_answer_done()
    assert not page.visible(".msg.assistant .progress")


def test_stop_mid_answer_cancels_the_engine_request(page: Page, stack: Stack) -> None:
    stack.script(calls(search("slow question")), streamed(say("The first words"), Stall()))
    ready(page, web=True)
    page.ask("A slow question")
    page.wait_text(".msg.assistant .answer", "The first words")

    page.find("#stop").click()

    assert stack.engine_saw_cancel()
    page.wait_text(".msg.assistant .note", "Stopped.")
    assert page.text(".msg.assistant .answer") == "The first words"
    assert page.visible("#send")
    closed = {"mode": "web", "outcome": "client_closed"}
    stack.until(
        lambda: stack.gateway.metric("tigress_gateway_chat_requests", closed) == 1,
        "the gateway to count the chat closed by its client",
    )


def test_stop_during_a_crawl_cancels_the_fetchers_read(page: Page, stack: Stack) -> None:
    held = stack.hold("/kettle/descale", article("Descaling", "Never shown."))
    stack.script(
        calls(search("kettle")),
        calls(fetch(stack.origin_url("/kettle/descale"))),
        streamed(say("Never asked for.")),
    )
    ready(page, web=True)
    page.ask(QUESTION)
    stack.asked(held)  # the fetcher is reading
    page.wait_text(".msg.assistant .progress", f"reading {host(stack)}…")

    page.find("#stop").click()

    # The fetcher sees the cancel: its streaming read ends CANCELLED, none is left running.
    cancelled = {"method": "ReadStream", "code": "CANCELLED"}
    stack.until(
        lambda: stack.world.fetcher.metric("tigress_fetcher_grpc_handled", cancelled) == 1,
        "the fetcher to count its read cancelled",
    )
    assert stack.fetcher_reads_in_flight() == 0
    page.wait_text(".msg.assistant .note", "Stopped.")
    assert not page.visible(".msg.assistant .progress")
    stack.let_go(held)
    assert len(stack.chats()) == 2  # the model was never asked again


def test_retry_copy_and_new_chat(page: Page, stack: Stack) -> None:
    stack.script(streamed(say("The first words"), Stall()), streamed(say("A **whole** answer.")))
    ready(page, web=False)
    page.ask("Try twice")
    page.wait_text(".msg.assistant .answer", "The first words")
    page.find("#stop").click()
    page.wait_text(".msg.assistant .note", "Stopped.")

    page.wait_text(".msg.assistant .actions button", "Retry").click()

    page.wait_text(".msg.assistant .answer", "A whole answer.")
    page.wait_answer_done()
    assert len(page.all(".msg.assistant")) == 1
    retried = stack.chats()[-1]["messages"]
    assert retried == [{"role": "user", "content": "Try twice"}]  # not the stopped answer

    page.driver.execute_cdp_cmd(
        "Browser.grantPermissions",
        {"origin": stack.url, "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]},
    )
    page.wait_text(".msg.assistant .actions button", "Copy").click()
    page.wait_text(".msg.assistant .actions button", "Copied")
    copied = page.driver.execute_async_script(
        "navigator.clipboard.readText().then(arguments[0], (e) => arguments[0](String(e)))"
    )
    assert copied == "A **whole** answer."  # the Markdown, as the model wrote it

    page.find("#new-chat").click()
    assert page.all("#messages li") == []
    page.driver.refresh()
    page.wait_models()
    assert page.all("#messages li") == []
    assert page.visible("#empty")


def test_controls_have_names_for_screen_readers(page: Page, stack: Stack) -> None:
    stack.script(calls(search("names")), streamed(say("Named [1]."), reasoning="Thinking."))
    ready(page, web=True)
    page.ask("Names?")
    page.wait_answer_done()

    # Hidden controls are out of the accessibility tree (no name to compute): the shown ones.
    controls = [
        c for c in page.all("button, select, input, textarea, a, summary") if c.is_displayed()
    ]
    assert len(controls) > 10
    unnamed = [c.get_attribute("outerHTML") for c in controls if not c.accessible_name.strip()]
    assert unnamed == []
    assert page.find(".cite-link").accessible_name == "source 1: Kettle descaling guide"
    assert page.find("#web").aria_role == "switch"
    reasoning = page.find(".reasoning")
    assert reasoning.get_attribute("open") is None  # folded
    assert not page.find(".reasoning-text").is_displayed()
    page.find(".reasoning summary").click()
    assert page.find(".reasoning-text").text == "Thinking."


def test_wrong_key_gets_a_clear_message_and_the_right_one_works(page: Page) -> None:
    page.open()
    page.enter_key("not-the-key-0123456789")

    page.wait_text("#key-error", "The gateway refused this access key.")
    assert page.visible("#key-dialog")

    page.enter_key(KEY)
    page.wait_models()
    assert [o.text for o in page.all("#model option")] == [MODEL]
    assert not page.visible("#key-dialog")
    # The keyboard is back in the text box: what one types next lands there.
    ActionChains(page.driver).send_keys("typed next").perform()
    assert page.find("#prompt").get_attribute("value") == "typed next"


#: The page's local storage keys (gateway/http/static/store.js).
STORED = {
    "key": "tigress.key",
    "model": "tigress.model",
    "web": "tigress.web",
    "chat": "tigress.chat.v1",
}


def stored(page: Page, name: str) -> str | None:
    """What the page keeps in local storage under ``name`` (None when nothing)."""
    value = page.driver.execute_script("return localStorage.getItem(arguments[0])", STORED[name])
    return None if value is None else str(value)


def test_forget_key_removes_it_from_the_browser_and_asks_again(page: Page, stack: Stack) -> None:
    stack.script(streamed(say("Kept after forgetting.")))
    ready(page, web=True)
    assert stored(page, "key") == KEY
    page.set_web(False)
    page.ask("Remember me")
    page.wait_answer_done()

    page.find("#forget-key").click()

    # Only the key is forgotten: the model, the Web switch and the conversation stay.
    page.until(lambda: page.displayed("#key-input"), "the key dialog")
    assert stored(page, "key") is None
    assert stored(page, "model") == MODEL
    assert stored(page, "web") == "0"
    assert "Kept after forgetting." in (stored(page, "chat") or "")
    assert not page.visible("#key-error")  # asked, not scolded
    assert page.find("#key-input").get_attribute("value") == ""  # the old key is not offered
    assert not page.find("#model").is_enabled()  # nothing to pick without a key
    assert page.text(".msg.assistant .answer") == "Kept after forgetting."

    # Closing the dialog without a key and asking: the page asks for the key again
    # instead of sending the question with the forgotten one.
    page.find("#key-input").send_keys(Keys.ESCAPE)
    page.until(lambda: not page.visible("#key-input"), "the key dialog to close")
    page.ask("Still there?")
    page.until(lambda: page.displayed("#key-input"), "the key dialog again")
    assert len(stack.chats()) == 1
    assert len(page.all(".msg.user")) == 1

    page.driver.refresh()

    # A fresh load finds no key: it asks for one (as on a first visit, with no error),
    # and shows the kept conversation and Web switch behind the dialog.
    page.until(lambda: page.displayed("#key-input"), "the key dialog after the reload")
    assert not page.visible("#key-error")
    assert stored(page, "key") is None
    page.wait_text(".msg.assistant .answer", "Kept after forgetting.")
    assert not page.find("#web").is_selected()
    assert not page.find("#model").is_enabled()

    page.enter_key(KEY)
    page.wait_models()
    assert stored(page, "key") == KEY
    assert not page.visible("#key-dialog")


def hostile_search(stack: Stack, canary: str) -> Served:
    """A SearXNG answer carrying markup: in its titles as entities (SearXNG escapes them;
    the gateway decodes them to text), in an unresponsive engine's name and reason raw."""
    body = {
        "query": "nasty",
        "results": [
            {
                "url": stack.origin_url("/nasty"),
                "title": f"&lt;img src={canary}/title onerror=alert(1)&gt; Nasty",
                "content": "&lt;script&gt;alert(1)&lt;/script&gt;",
            },
            {"url": stack.origin_url("/other"), "title": "&lt;b&gt;Other&lt;/b&gt;"},
        ],
        "unresponsive_engines": [["<img src=x onerror=alert(1)>", "<b>x</b>"]],
    }
    return Served(200, "application/json", json.dumps(body).encode())


def test_hostile_answer_is_shown_as_text_and_nothing_runs(page: Page, stack: Stack) -> None:
    canary = stack.canary.url
    hostile = f"&lt;img src={canary}/page onerror=alert(1)&gt;"
    stack.serve("/nasty", html(f"<html><head><title>{hostile}</title></head><body>x</body>"))
    stack.call(stack.world.searxng.answers.__setitem__, "nasty", hostile_search(stack, canary))
    answer = (
        f"<script>window.__pwned = 'script'; fetch('{canary}/script')</script>\n\n"
        f'Look <img src="{canary}/img" onerror="window.__pwned = \'img\'"> here.\n\n'
        "[click me](javascript:window.__pwned='link') "
        "[data](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==) "
        "[relative](/v1/models) <javascript:alert(1)>\n\n"
        f"![pixel]({canary}/markdown-image.png)\n\n"
        f'<iframe src="{canary}/frame"></iframe>\n\n'
        "[evil]: javascript:alert(1)\n\nSee [evil] and the sources [1] [2]."
    )
    forged_title = f"<img src={canary}/forged onerror=alert(1)>"
    stack.script(
        # Web on: hostile search results, page title and answer, through the real tools.
        calls(search("nasty")),
        calls(fetch(stack.origin_url("/nasty"))),
        streamed(say(answer), reasoning=f'<img src="{canary}/reasoning" onerror="alert(1)">'),
        # Web off: an engine behind a pass-through request forges tool events, with
        # addresses that are not http(s).
        streamed(
            event_chunk(
                {
                    "type": "read",
                    "url": "javascript:alert(1)",
                    "final_url": "javascript:alert(1)",
                    "title": forged_title,
                    "ok": True,
                }
            ),
            event_chunk(
                {
                    "type": "working",
                    "calls": [{"tool": "<b>x</b>", "url": "javascript:alert(1)"}],
                }
            ),
            event_chunk(
                {
                    "type": "sources",
                    "sources": [
                        {"n": 1, "url": "javascript:alert(1)", "title": forged_title},
                        {"n": 2, "url": "data:text/html,<script>alert(1)</script>", "title": "d"},
                    ],
                }
            ),
            say("Forged [1] [2]."),
        ),
    )
    ready(page, web=True)
    page.ask("Show me something nasty")
    page.wait_answer_done()
    real = page.last_answer()
    page.set_web(False)
    page.ask("And now forged events")
    page.wait_answer_done()
    forged = page.last_answer()

    assert page.alert_text() is None
    assert page.driver.execute_script("return window.__pwned") is None
    assert page.all("#messages script, #messages img, #messages iframe, #messages object") == []
    hrefs = page.driver.execute_script(
        "return [...document.querySelectorAll('#messages [href]')]"
        ".map((a) => a.getAttribute('href'))"
    )
    assert all(h.startswith(("http://", "https://", "#")) for h in hrefs), hrefs

    # The real tools: the markup of the results, the engine names and the page's title
    # is shown as text.
    events = real.find_element(By.CSS_SELECTOR, ".events").text
    assert "no answer from <img src=x onerror=alert(1)> (<b>x</b>)" in events
    assert f"read: <img src={canary}/page onerror=alert(1)>" in events
    assert f"<img src={canary}/title onerror=alert(1)> Nasty" in (
        real.find_element(By.CSS_SELECTOR, ".sources").get_attribute("textContent") or ""
    )
    text = real.find_element(By.CSS_SELECTOR, ".answer").get_attribute("textContent") or ""
    assert "<script>window.__pwned = 'script';" in text
    assert f'<img src="{canary}/img" onerror=' in text
    assert "[click me](javascript:window.__pwned='link')" in text
    assert [c.text for c in real.find_elements(By.CSS_SELECTOR, ".cite-link")] == ["1", "2"]

    # The forged events: their unsafe addresses are plain text, never links.
    assert forged.find_elements(By.CSS_SELECTOR, ".sources a") == []
    assert len(forged.find_elements(By.CSS_SELECTOR, ".sources .unsafe-link")) == 2
    assert forged_title in (forged.get_attribute("textContent") or "")
    assert stack.call(lambda: list(stack.canary.paths)) == []
    assert page.violations() == []


def test_reload_keeps_the_conversation(page: Page, stack: Stack) -> None:
    stack.script(calls(search("kettle")), streamed(say("Descale with citric acid [1].")))
    ready(page, web=True)
    prompt = page.find("#prompt")
    prompt.send_keys("Remember this", Keys.SHIFT, Keys.ENTER, Keys.SHIFT, "and this")
    assert prompt.get_attribute("value") == "Remember this\nand this"  # Shift+Enter: a line
    prompt.send_keys(Keys.ENTER)
    page.wait_answer_done()
    before = page.last_answer().text

    page.driver.refresh()

    page.wait_text(".msg.user .bubble", "Remember this\nand this")
    page.wait_text(".msg.assistant .answer", "Descale with citric acid [1].")
    assert page.last_answer().text == before
    assert page.find(".msg.assistant .cite-link").get_attribute("href") is not None
    assert not page.visible("#key-dialog")  # the key was kept too
    assert page.find("#web").is_selected()  # and the Web switch
    page.wait_models()


def test_citations_event_marks_numbers_that_are_not_sources(page: Page, stack: Stack) -> None:
    stack.script(calls(search("kettle")), streamed(say("Known [1]. Made up [12].")))
    ready(page, web=True)
    page.ask(QUESTION)
    page.wait_answer_done()
    answer = page.last_answer()

    # The gateway's loop checked the answer's numbers against its six sources.
    assert [c.text for c in answer.find_elements(By.CSS_SELECTOR, ".cite-link")] == ["1"]
    unknown = answer.find_element(By.CSS_SELECTOR, ".cite-unknown")
    assert unknown.text == "12"
    assert unknown.get_attribute("aria-label") == "12, not one of this answer's sources"
    cited = answer.find_elements(By.CSS_SELECTOR, ".sources > ol li")
    assert [c.text for c in cited] == [f"Kettle descaling guide {host(stack)} · snippet only"]
    assert answer.find_element(By.CSS_SELECTOR, ".more-sources summary").text == (
        "Other sources found (5)"
    )
    assert stack.gateway_metric("tigress_gateway_unknown_citations") == 1


def test_engine_down_is_told_in_words(page: Page, stack: Stack) -> None:
    ready(page, web=False)
    stack.stop_engine()
    page.ask("Anyone there?")

    error = page.wait_text(".msg.assistant .error", "The model engine is not answering")
    assert "Is it running?" in error.text
    assert page.visible(".msg.assistant .actions")


def test_screenshots_at_desktop_and_phone_width_light_and_dark(page: Page, stack: Stack) -> None:
    held = stack.hold(
        "/kettle/descale",
        article("Descaling", "Use citric acid.", ("/kettle/more", "/kettle/gone")),
    )
    stack.serve("/kettle/more", article("More on descaling", "Rinse twice."))
    stack.script(
        calls(search("kettle descale", time_range="month")),
        calls(fetch(stack.origin_url("/kettle/descale"))),
        streamed(
            Pause(),
            Data(chunk({"reasoning_content": "The user asks how to descale. Search, read."})),
            say(
                "## How to descale a kettle\n\n"
                "Fill it with water and **citric acid**, boil, let it stand, then rinse "
                "[1]. Vinegar works too but leaves a smell [2].\n\n"
                "- Rinse twice before the next brew [7].\n"
                "- Descale every month in hard-water areas [3].\n\n"
                "| Acid | Amount |\n|---|---|\n| citric | 2 tbsp |\n| vinegar | 1 cup |\n\n"
                "```sh\nmake run\n```\n\nA number that is not a source: [19]."
            ),
        ),
    )
    ready(page, web=True)
    page.ask("How do I descale a kettle, and how often?")
    # While the fetcher reads, the progress line names the site being read.
    stack.asked(held)
    page.wait_text(".msg.assistant .progress", f"reading {host(stack)}…")
    shots = []
    with page.emulating(phone=False, dark=False):
        shots.append(page.screenshot("working-desktop-light"))
    stack.let_go(held)
    page.wait_text(".msg.assistant .progress", "thinking…")
    stack.release()
    page.wait_answer_done()
    for phone in (False, True):
        for dark in (False, True):
            with page.emulating(phone=phone, dark=dark):
                name = f"chat-{'phone' if phone else 'desktop'}-{'dark' if dark else 'light'}"
                shots.append(page.screenshot(name))
                assert not page.overflows_horizontally(), name
    page.find("#forget-key").click()
    page.until(lambda: page.displayed("#key-input"), "the key dialog")
    for phone, dark in ((False, False), (True, True)):
        with page.emulating(phone=phone, dark=dark):
            name = f"key-{'phone' if phone else 'desktop'}-{'dark' if dark else 'light'}"
            shots.append(page.screenshot(name))
    for shot in shots:
        assert shot.parent == OUTPUT
        assert shot.read_bytes().startswith(b"\x89PNG")


def test_gateway_without_keys_never_asks_for_one(driver: WebDriver, ca: trustme.CA) -> None:
    with Stack(ca, api_keys=()) as stack:
        page = Page(driver, stack.url)
        stack.script(streamed(say("No key needed.")))
        page.open()
        page.wait_models()
        assert not page.visible("#key-dialog")
        assert not page.visible("#forget-key")
        page.ask("Hello?")
        page.wait_text(".msg.assistant .answer", "No key needed.")
        driver.get("about:blank")


def test_a_keyless_gateway_whose_engine_is_down_never_asks_for_a_key(
    driver: WebDriver, ca: trustme.CA
) -> None:
    # Nothing listens on port 9: /v1/models answers 502 when the page loads.
    nowhere = (EngineSettings("http://127.0.0.1:9/v1"),)
    with Stack(ca, api_keys=(), engines=nowhere) as stack:
        page = Page(driver, stack.url)
        page.open()
        notice = "return document.getElementById('notice').textContent"
        page.until(lambda: "not answering" in driver.execute_script(notice), "the notice")
        assert not page.visible("#forget-key")
        page.ask("Hello?")
        # Send says there is no model yet and asks the gateway again (whose answer is the
        # notice again), keeping the question: never the key dialog.
        page.until(lambda: "not answering" in driver.execute_script(notice), "asked again")
        assert page.find("#prompt").get_attribute("value") == "Hello?"
        assert not page.visible("#key-dialog")
        assert not page.visible("#forget-key")
        driver.get("about:blank")


#: Set to a folder (e.g. docs) to write the README's screenshot there: ``TIGRESS_DOCS_SHOT=docs``.
DOCS_SHOT = os.environ.get("TIGRESS_DOCS_SHOT", "")


@pytest.mark.skipif(not DOCS_SHOT, reason="writes docs/page.png only when TIGRESS_DOCS_SHOT asks")
def test_the_readmes_screenshot(page: Page, stack: Stack) -> None:
    stack.serve("/kettle/descale", article("Descaling a kettle", "Use citric acid, then rinse."))
    stack.script(
        calls(search("descale a kettle")),
        calls(fetch(stack.origin_url("/kettle/descale"))),
        streamed(
            say(
                "Fill the kettle with water and two spoons of **citric acid**, boil it, let "
                "it stand for an hour, then rinse twice [1]. In hard-water areas, descale "
                "every month [1]."
            )
        ),
    )
    ready(page, web=True)
    page.ask("How do I descale a kettle?")
    page.wait_answer_done()
    with page.emulating(phone=False, dark=False):
        shot = page.screenshot("readme")
    target = Path(DOCS_SHOT) / "page.png"
    if not target.is_absolute():
        target = Path(__file__).resolve().parents[2] / target
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(shot.read_bytes())
    assert target.read_bytes().startswith(b"\x89PNG")
