"""A PDF among the search results, read end to end: SearXNG stand-in, the real fetcher
service (its PDF worker included), the gateway's tool text and events."""

from __future__ import annotations

import dataclasses
import json

import httpx

from gateway import prompts
from testkit.engine import text_reply, tool_reply
from testkit.origin import Reply
from testkit.searxng import pointed_at, recorded
from tests.e2e.client import body, stream_answer
from tests.e2e.conftest import HOSTS, Gateway, World
from tests.e2e.test_research import FETCH, fetch, search
from tests.fetcher.pdf.maker import Text, make_pdf

PAPER = make_pdf(
    [
        [
            Text(72, 700, b"Citric acid removes limescale from kettles in ten minutes."),
            Text(72, 686, b"Vinegar works too, but leaves a smell."),
        ]
    ],
    title="Descaling kettles: a study",
)


def first_result_at(world: World, path: str) -> None:
    """Every search answers with the recorded results, the first one moved to ``path``."""
    served = pointed_at(recorded("search_normal.json"), HOSTS, world.origin.port)
    document = json.loads(served.body)
    document["results"][0]["url"] = world.url(path)
    world.searxng.default = dataclasses.replace(served, body=json.dumps(document).encode())


def pdf(data: bytes) -> Reply:
    return Reply(headers=(("Content-Type", "application/pdf"),), body=data)


async def test_a_pdf_result_is_read_and_shown_like_any_page(
    world: World, gateway: Gateway, http: httpx.AsyncClient
) -> None:
    start = world.url("/papers/descaling.pdf")
    first_result_at(world, "/papers/descaling.pdf")
    world.origin.routes["/papers/descaling.pdf"] = pdf(PAPER)
    world.engine.script(
        tool_reply(search("kettle descale")),
        tool_reply(fetch(start)),
        text_reply("Citric acid works [1]."),
    )
    answer = await stream_answer(http, gateway.api, body())

    (read,) = answer.of_type("read")
    assert (read["url"], read["final_url"], read["title"], read["ok"]) == (
        start,
        start,
        "Descaling kettles: a study",
        True,
    )
    # The tool text: the untrusted label, ledger number, title, final address, the text.
    text = world.engine.chats[2]["messages"][-1]["content"]
    assert text.startswith(
        prompts.PAGE_LABEL.format(address=start)
        + f"\n[1] Descaling kettles: a study — {start}\n"
        + "Citric acid removes limescale from kettles in ten minutes."
    )
    assert text.endswith("Searches used 1 of 16; pages read 1 of 12")
    assert answer.of_type("citations") == [{"type": "citations", "cited": [1], "unknown": []}]
    # One download, and nothing followed out of the PDF.
    assert [request.target for request in world.origin.requests] == ["/papers/descaling.pdf"]
    assert world.fetcher.metric("tigress_fetcher_texts", {"reader": "pdf", "reason": "none"}) == 1
    labels = {"interface": "chat", "tool": FETCH, "outcome": "ok"}
    assert gateway.metric("tigress_gateway_tool_calls", labels) == 1


async def test_a_pdf_without_text_is_one_line_in_words(
    world: World, gateway: Gateway, http: httpx.AsyncClient
) -> None:
    start = world.url("/papers/scan.pdf")
    first_result_at(world, "/papers/scan.pdf")
    world.origin.routes["/papers/scan.pdf"] = pdf(make_pdf([[]]))
    world.engine.script(
        tool_reply(search("kettle descale")),
        tool_reply(fetch(start)),
        text_reply("The scan could not be read."),
    )
    answer = await stream_answer(http, gateway.api, body())

    (read,) = answer.of_type("read")
    assert (read["ok"], read["reason"]) == (False, "unreadable")
    text = world.engine.chats[2]["messages"][-1]["content"]
    assert text.startswith(
        prompts.FIRST_PAGE_NOT_READ.format(url=start, reason=prompts.reason_words("unreadable"))
    )
    (record,) = [r for r in world.fetcher.records() if r.get("stage") == "text"]
    assert (record["url"], record["reader"], record["reason"]) == (start, "pdf", "unreadable")
