"""The chat page in a real browser against a real gateway (SPEC 2a, 4).

Headless Chromium drives the page served by the gateway on uvicorn; a scripted fake engine
answers over HTTP; under the Web switch the phase A stand-in tools produce the
``searched`` and ``read`` events and number the sources. Pass-through tests (Web off)
let the engine itself write ``thor_event`` chunks, which is how the ``citations`` event
and hostile event fields reach the page until the research tools emit them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from tests.gateway.conftest import KEY
from tests.gateway.fake_engine import (
    MODEL,
    Data,
    Pause,
    Reply,
    Stall,
    Step,
    chunk,
    tool_reply,
)
from tests.page.browser import OUTPUT, Page
from tests.page.research import FAILED_PAGE, RESULTS, stand_in_research
from tests.page.stack import Stack

pytestmark = pytest.mark.browser


def event_chunk(event: dict[str, Any]) -> Data:
    """A tool event as the gateway writes it: an empty delta and ``thor_event``."""
    obj = chunk({})
    obj["thor_event"] = event
    return Data(obj)


def streamed(*steps: Step, reasoning: str = "") -> Reply:
    """A streamed answer: the role chunk, optional reasoning, the steps, the stop chunk."""
    head: list[Step] = [Data(chunk({"role": "assistant", "content": ""}))]
    if reasoning:
        head.append(Data(chunk({"reasoning_content": reasoning})))
    return Reply([*head, *steps, Data(chunk({}, "stop"))])


def say(text: str) -> Data:
    return Data(chunk({"content": text}))


def search(query: str, **extra: str) -> Reply:
    return tool_reply(("web_search", json.dumps({"query": query, **extra})))


def read(url: str) -> Reply:
    return tool_reply(("fetch_page_content_recursive", json.dumps({"url": url})))


def ready(page: Page, *, web: bool) -> None:
    """Open the page, give it the key, wait for the models, set the Web switch."""
    page.open()
    page.enter_key(KEY)
    page.wait_models()
    page.set_web(web)


def test_web_answer_streams_tokens_tool_events_and_linked_citations(
    page: Page, stack: Stack
) -> None:
    stack.script(
        search("what is tigress", time_range="week"),
        read(RESULTS[0][0]),
        streamed(
            say("## Tigress\n\nTigress is a gateway [1] "),
            Pause(),
            say("that reads pages for the model [1, 2]."),
        ),
    )
    ready(page, web=True)
    page.ask("What is Tigress?")

    # The engine is paused mid-answer: the first words are on the page already.
    page.wait_text(".msg.assistant .answer", "Tigress is a gateway")
    assert page.visible("#stop")
    assert "reads pages" not in page.text(".msg.assistant .answer")
    searched = page.wait_text(".events .searched", "searched:")
    assert searched.text == (
        "searched: “what is tigress” · past week · 2 results · no answer from brave (timeout)"
    )
    stack.release()
    page.wait_answer_done()
    assert not page.visible("#stop")

    answer = page.last_answer()
    lines = [e.text for e in answer.find_elements(By.CSS_SELECTOR, ".events li")]
    assert lines == [
        searched.text,
        "read: Tigress introduction docs.tigress.test",
        "could not read: docs.tigress.test — the page took too long",
    ]
    link = answer.find_element(By.CSS_SELECTOR, ".events .read:not(.failed) a")
    assert link.get_attribute("href") == RESULTS[0][0]
    assert link.get_attribute("target") == "_blank"
    assert link.get_attribute("rel") == "noopener noreferrer"
    failed = answer.find_element(By.CSS_SELECTOR, ".events .failed a")
    assert failed.get_attribute("href") == FAILED_PAGE

    assert answer.find_element(By.CSS_SELECTOR, ".answer h2").text == "Tigress"
    cites = answer.find_elements(By.CSS_SELECTOR, ".answer .cite-link")
    assert [c.text for c in cites] == ["1", "1", "2"]
    cites[2].click()
    target = page.until(lambda: page.displayed(".sources li:target"), "the cited source")
    source = target.find_element(By.CSS_SELECTOR, "a")
    assert target.get_attribute("value") == "2"
    assert source.get_attribute("href") == RESULTS[1][0]
    assert source.text == RESULTS[1][1]
    assert source.get_attribute("rel") == "noopener noreferrer"

    # The Web switch reached the gateway: it offered the engine its tools.
    first = stack.chats()[0]
    assert [t["function"]["name"] for t in first["tools"]] == [
        "web_search",
        "fetch_page_content_recursive",
    ]


def test_stop_mid_answer_cancels_the_work_on_the_server(page: Page, stack: Stack) -> None:
    stack.script(search("slow question"), streamed(say("The first words"), Stall()))
    ready(page, web=True)
    page.ask("A slow question")
    page.wait_text(".msg.assistant .answer", "The first words")

    page.find("#stop").click()

    assert stack.engine_saw_cancel()
    page.wait_text(".msg.assistant .note", "Stopped.")
    assert page.text(".msg.assistant .answer") == "The first words"
    assert page.visible("#send")


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
    stack.script(search("names"), streamed(say("Named [1]."), reasoning="Thinking."))
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
    assert page.find(".cite-link").accessible_name == "source 1: Tigress introduction"
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


def test_hostile_answer_is_shown_as_text_and_nothing_runs(page: Page, stack: Stack) -> None:
    canary = stack.canary.url
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
    hostile_title = f"<img src={canary}/title onerror=alert(1)>"
    stack.script(
        streamed(
            event_chunk(
                {
                    "type": "searched",
                    "queries": ["<script>alert(1)</script>"],
                    "results": 1,
                    "unresponsive_engines": [["<b>x</b>", "<img src=x onerror=alert(1)>"]],
                }
            ),
            event_chunk(
                {
                    "type": "read",
                    "url": "javascript:alert(1)",
                    "final_url": "javascript:alert(1)",
                    "title": hostile_title,
                    "ok": True,
                }
            ),
            event_chunk(
                {
                    "type": "sources",
                    "sources": [
                        {"n": 1, "url": "javascript:alert(1)", "title": hostile_title},
                        {"n": 2, "url": "data:text/html,<script>alert(1)</script>", "title": "d"},
                    ],
                }
            ),
            say(answer),
            reasoning=f'<img src="{canary}/reasoning" onerror="alert(1)">',
        )
    )
    ready(page, web=False)
    page.ask("Show me something nasty")
    page.wait_answer_done()
    done = page.last_answer()

    assert page.alert_text() is None
    assert page.driver.execute_script("return window.__pwned") is None
    assert page.all("#messages script, #messages img, #messages iframe, #messages object") == []
    hrefs = page.driver.execute_script(
        "return [...document.querySelectorAll('#messages [href]')]"
        ".map((a) => a.getAttribute('href'))"
    )
    assert all(h.startswith(("http://", "https://", "#")) for h in hrefs), hrefs
    # The citations point into the list, where the unsafe addresses are plain text.
    assert done.find_elements(By.CSS_SELECTOR, ".sources a") == []
    assert len(done.find_elements(By.CSS_SELECTOR, ".sources .unsafe-link")) == 2
    text = done.find_element(By.CSS_SELECTOR, ".answer").get_attribute("textContent") or ""
    assert "<script>window.__pwned = 'script';" in text
    assert f'<img src="{canary}/img" onerror=' in text
    assert "[click me](javascript:window.__pwned='link')" in text
    assert hostile_title in (done.get_attribute("textContent") or "")
    assert stack.call(lambda: list(stack.canary.paths)) == []
    assert page.violations() == []


def test_reload_keeps_the_conversation(page: Page, stack: Stack) -> None:
    stack.script(search("tigress"), streamed(say("Tigress reads the web [1].")))
    ready(page, web=True)
    prompt = page.find("#prompt")
    prompt.send_keys("Remember this", Keys.SHIFT, Keys.ENTER, Keys.SHIFT, "and this")
    assert prompt.get_attribute("value") == "Remember this\nand this"  # Shift+Enter: a line
    prompt.send_keys(Keys.ENTER)
    page.wait_answer_done()
    before = page.last_answer().text

    page.driver.refresh()

    page.wait_text(".msg.user .bubble", "Remember this\nand this")
    page.wait_text(".msg.assistant .answer", "Tigress reads the web [1].")
    assert page.last_answer().text == before
    assert page.find(".msg.assistant .cite-link").get_attribute("href") is not None
    assert not page.visible("#key-dialog")  # the key was kept too
    assert page.find("#web").is_selected()  # and the Web switch
    page.wait_models()


def test_citations_event_marks_numbers_that_are_not_sources(page: Page, stack: Stack) -> None:
    sources = [{"n": 1, "url": RESULTS[0][0], "title": RESULTS[0][1]}]
    stack.script(
        streamed(
            event_chunk({"type": "sources", "sources": sources}),
            say("Known [1]. Made up [7]."),
            event_chunk({"type": "citations", "cited": [1], "unknown": [7]}),
        )
    )
    ready(page, web=False)
    page.ask("Cite something")
    page.wait_answer_done()
    answer = page.last_answer()

    assert [c.text for c in answer.find_elements(By.CSS_SELECTOR, ".cite-link")] == ["1"]
    unknown = answer.find_element(By.CSS_SELECTOR, ".cite-unknown")
    assert unknown.text == "7"
    assert unknown.get_attribute("aria-label") == "7, not one of this answer's sources"
    assert answer.find_element(By.CSS_SELECTOR, ".sources li").text == (
        f"{RESULTS[0][1]} docs.tigress.test"
    )


def test_engine_down_is_told_in_words(page: Page, stack: Stack) -> None:
    ready(page, web=False)
    stack.stop_engine()
    page.ask("Anyone there?")

    error = page.wait_text(".msg.assistant .error", "The model engine is not answering")
    assert "Is it running?" in error.text
    assert page.visible(".msg.assistant .actions")


def test_screenshots_at_desktop_and_phone_width_light_and_dark(page: Page, stack: Stack) -> None:
    stack.script(
        search("tigress design", time_range="month"),
        read(RESULTS[0][0]),
        streamed(
            Pause(),
            Data(chunk({"reasoning_content": "The user asks about the design. Search, read."})),
            say(
                "## How Tigress answers\n\n"
                "Tigress keeps the model away from the network: the **gateway** runs the "
                "tool loop [1], and the **fetcher** is the only process that reads the web "
                "[2].\n\n"
                "- Searches go through your own SearXNG [1].\n"
                "- Pages are read over https only, two hops at most [2].\n\n"
                "| Part | Job |\n|---|---|\n| gateway | the chat API |\n| fetcher | the web |\n\n"
                "```sh\nmake run\n```\n\nA number that is not a source: [9]."
            ),
        ),
    )
    ready(page, web=True)
    page.ask("How does Tigress answer from the web?")
    # Paused before the answer: the progress line names the site being read.
    page.wait_text(".msg.assistant .progress", "reading docs.tigress.test…")
    shots = []
    with page.emulating(phone=False, dark=False):
        shots.append(page.screenshot("working-desktop-light"))
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


def test_gateway_without_keys_never_asks_for_one(driver: WebDriver) -> None:
    with Stack(stand_in_research, api_keys=()) as stack:
        page = Page(driver, stack.url)
        stack.script(streamed(say("No key needed.")))
        page.open()
        page.wait_models()
        assert not page.visible("#key-dialog")
        assert not page.visible("#forget-key")
        page.ask("Hello?")
        page.wait_text(".msg.assistant .answer", "No key needed.")
        driver.get("about:blank")
