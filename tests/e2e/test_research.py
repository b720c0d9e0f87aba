"""A Web-on answer end to end: search through the SearXNG stand-in, read through the real
fetcher service, cite from the ledger. Only the model and the search engine are stand-ins."""

from __future__ import annotations

import asyncio
import json

import httpx

from tests.e2e.client import Answer, KeepAlive, body, stream_answer
from tests.e2e.conftest import Gateway, World
from tests.gateway.fake_engine import text_reply, tool_reply
from tests.support.origin import Reply, Request, html

SEARCH = "web_search"
FETCH = "fetch_page_content_recursive"


def search(query: str, **more: object) -> tuple[str, str]:
    return (SEARCH, json.dumps({"query": query, **more}))


def fetch(url: str) -> tuple[str, str]:
    return (FETCH, json.dumps({"url": url}))


def page(title: str, text: str, links: str = "") -> Reply:
    return html(
        f"<html><head><title>{title}</title></head><body><main><h1>{title}</h1>"
        f"<p>{text}</p>{links}</main></body></html>"
    )


async def test_search_read_and_cite_with_events_in_order_and_keep_alives(
    world: World, gateway: Gateway, http: httpx.AsyncClient
) -> None:
    world.results_on_origin()
    start = world.url("/kettle/descale")
    page_asked = asyncio.Event()
    release_page = asyncio.Event()
    first_read_seen = asyncio.Event()

    async def slow_page(request: Request) -> Reply:
        # Held until the client has seen a keep-alive while the crawl runs.
        page_asked.set()
        await release_page.wait()
        return page("Descaling", "Use citric acid.", '<a href="/kettle/more">More</a>')

    async def second_page(request: Request) -> Reply:
        # Held until the client has seen the first page's read event: events go out
        # page by page, not when the crawl ends.
        await first_read_seen.wait()
        return page("More on descaling", "Rinse twice.")

    world.origin.routes["/kettle/descale"] = slow_page
    world.origin.routes["/kettle/more"] = second_page
    world.engine.script(
        tool_reply(search("kettle descale")),
        tool_reply(fetch(start)),
        text_reply("## Descaling\n", "Use citric acid [1], rinse twice [7]. See [12]."),
    )

    async def watch(answer: Answer) -> bool:
        last = answer.items[-1]
        if isinstance(last, KeepAlive) and page_asked.is_set():
            release_page.set()
        if answer.of_type("read"):
            first_read_seen.set()
        return True

    answer = await stream_answer(http, gateway.api, body(), on_item=watch)

    assert [s for s in answer.sequence if s != ":"] == [
        "searched",
        "read",
        "read",
        "sources",
        "citations",
        "[DONE]",
    ]
    between = answer.sequence[answer.sequence.index("searched") : answer.sequence.index("read")]
    assert ":" in between  # keep-alives flowed while the page was slow
    searched = answer.of_type("searched")[0]
    assert searched["queries"] == ["kettle descale"]
    assert searched["results"] == 6
    assert searched["error"] is None
    assert [(r["url"], r["title"], r["ok"]) for r in answer.of_type("read")] == [
        (start, "Descaling", True),
        (world.url("/kettle/more"), "More on descaling", True),
    ]
    sources = answer.of_type("sources")[0]["sources"]
    assert [s["n"] for s in sources] == [1, 2, 3, 4, 5, 6, 7]
    assert sources[0] == {"n": 1, "url": start, "title": "Kettle descaling guide"}
    assert sources[6]["url"] == world.url("/kettle/more")
    assert answer.of_type("citations") == [{"type": "citations", "cited": [1, 7], "unknown": [12]}]
    assert answer.text == "## Descaling\nUse citric acid [1], rinse twice [7]. See [12]."
    assert answer.chunks[-1]["choices"][0]["finish_reason"] == "stop"

    # What the model read: numbered results, then the pages with the untrusted label.
    search_result = world.engine.chats[1]["messages"][-1]
    assert search_result["role"] == "tool"
    assert f"[1] Kettle descaling guide — {start}" in search_result["content"]
    assert search_result["content"].endswith("Searches used 1 of 16; pages read 0 of 12")
    read_result = world.engine.chats[2]["messages"][-1]["content"]
    assert read_result.startswith(f"[1] Descaling — {start}\nUntrusted text from {start}.")
    assert "Rinse twice." in read_result
    assert read_result.endswith("Searches used 1 of 16; pages read 2 of 12")

    for tool in (SEARCH, FETCH):
        labels = {"interface": "chat", "tool": tool, "outcome": "ok"}
        assert gateway.metric("tigress_gateway_tool_calls", labels) == 1
    assert gateway.metric("tigress_gateway_unknown_citations") == 1
