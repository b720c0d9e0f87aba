"""What the browser tests script: the engine's replies, the origin's pages, the page's set-up."""

from __future__ import annotations

import json
from typing import Any

from testkit.engine import Data, Reply, Step, chunk, tool_reply
from testkit.origin import Reply as OriginReply
from testkit.origin import html
from tests.page.browser import Page
from tests.support.world import KEY

SEARCH = "web_search"
FETCH = "fetch_page_content_recursive"


def say(text: str) -> Data:
    """One piece of the answer's text."""
    return Data(chunk({"content": text}))


def event_chunk(event: dict[str, Any]) -> Data:
    """A tool event as the gateway writes it (an empty delta and ``thor_event``): what an
    engine behind a pass-through request could forge."""
    obj = chunk({})
    obj["thor_event"] = event
    return Data(obj)


def streamed(*steps: Step, reasoning: str = "") -> Reply:
    """A streamed answer: the role chunk, optional reasoning, the steps, the stop chunk."""
    head: list[Step] = [Data(chunk({"role": "assistant", "content": ""}))]
    if reasoning:
        head.append(Data(chunk({"reasoning_content": reasoning})))
    return Reply([*head, *steps, Data(chunk({}, "stop"))])


def search(query: str, **more: object) -> tuple[str, str]:
    """A web_search call."""
    return (SEARCH, json.dumps({"query": query, **more}))


def fetch(url: str) -> tuple[str, str]:
    """A fetch_page_content_recursive call."""
    return (FETCH, json.dumps({"url": url}))


def calls(*called: tuple[str, str]) -> Reply:
    """One round of tool calls."""
    return tool_reply(*called)


def article(title: str, text: str, links: tuple[str, ...] = ()) -> OriginReply:
    """An HTML page on the origin, linking to ``links`` (paths)."""
    anchors = "".join(f'<a href="{link}">{link}</a> ' for link in links)
    return html(
        f"<html><head><title>{title}</title></head><body><main><h1>{title}</h1>"
        f"<p>{text}</p><p>{anchors}</p></main></body></html>"
    )


def ready(page: Page, *, web: bool, key: str = KEY) -> None:
    """Open the page, give it the key, wait for the models, set the Web switch."""
    page.open()
    page.enter_key(key)
    page.wait_models()
    page.set_web(web)
