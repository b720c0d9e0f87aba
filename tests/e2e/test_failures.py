"""When a part fails or goes away mid-answer: SearXNG, the fetcher, the client, the engine.

Every failure ends in a clear tool result the model reads (and the answer goes on), or a
clear HTTP error before anything was sent; nothing hangs.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import replace

import httpx
import pytest

from fetcher.net.policy import Policy
from gateway import prompts
from gateway.settings import EngineSettings, Timeouts
from testkit.engine import text_reply, tool_reply
from testkit.origin import Reply, Request, html
from testkit.searxng import Served, recorded, refusing_url
from tests.e2e.client import Answer, KeepAlive, body, stream_answer
from tests.e2e.conftest import AUTH, E2E_TIMEOUTS, Gateway, GatewayFactory, World
from tests.support.fetcher_service import running_fetcher, socket_folder

SEARCH = "web_search"
FETCH = "fetch_page_content_recursive"


def search(query: str) -> tuple[str, str]:
    return (SEARCH, json.dumps({"query": query}))


def fetch(url: str) -> tuple[str, str]:
    return (FETCH, json.dumps({"url": url}))


async def eventually(condition: Callable[[], bool], within: float = 10.0) -> None:
    for _ in range(int(within / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition never held")


def held_page(
    asked: asyncio.Event, release: asyncio.Event
) -> Callable[[Request], Awaitable[Reply]]:
    async def handler(_: Request) -> Reply:
        asked.set()
        await release.wait()
        return html("<html><head><title>Late</title></head><body>Late.</body></html>")

    return handler


def last_tool_message(world: World, chat: int) -> str:
    message = world.engine.chats[chat]["messages"][-1]
    assert message["role"] == "tool"
    content = message["content"]
    assert isinstance(content, str)
    return content


# --- SearXNG ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("served", "cause", "advice"),
    [
        (None, "unreachable", "set TIGRESS_SEARXNG_URL to where it runs"),
        (recorded("json_disabled_403.html"), "json_disabled", "add json to search.formats"),
        (recorded("limiter_429_json_request_5.txt"), "rate_limited", "botdetection.ip_lists"),
    ],
    ids=["down", "403-json-off", "429-limiter"],
)
async def test_a_searxng_failure_is_a_clear_tool_result_and_the_answer_goes_on(
    world: World,
    gateway_for: GatewayFactory,
    http: httpx.AsyncClient,
    served: Served | None,
    cause: str,
    advice: str,
) -> None:
    world.engine.script(tool_reply(search("kettle")), text_reply("The search failed."))
    with refusing_url() as nowhere:
        changes = {"searxng_url": nowhere} if served is None else {}
        if served is not None:
            world.searxng.default = served
        async with gateway_for(**changes) as gateway:
            answer = await stream_answer(http, gateway.api, body())
            health = (await http.get(f"{gateway.url}/healthz")).json()
    assert answer.text == "The search failed."
    assert answer.sequence[-1] == "[DONE]"
    (searched,) = answer.of_type("searched")
    assert (searched["results"], searched["error"]) == (0, cause)
    text = last_tool_message(world, 1)
    assert text.startswith('Results for "kettle":\nThe search failed: ')
    assert advice in text
    assert text.endswith("Searches used 1 of 16; pages read 0 of 12")  # failed searches count
    assert gateway.metric("tigress_gateway_searxng_errors", {"cause": cause}) == 1
    assert (
        gateway.metric(
            "tigress_gateway_tool_calls", {"interface": "chat", "tool": SEARCH, "outcome": "error"}
        )
        == 1
    )
    # /healthz asks SearXNG's own /healthz: only a SearXNG that is down shows there.
    assert health["searxng"]["ok"] is (served is not None)
    if served is None:
        assert "cannot be reached" in health["searxng"]["problem"]
        assert health["status"] == "degraded"


# --- The fetcher --------------------------------------------------------------------------


async def test_the_fetcher_killed_mid_answer_is_a_clear_result_and_the_answer_goes_on(
    world: World, gateway: Gateway, http: httpx.AsyncClient
) -> None:
    world.results_on_origin()
    asked, release = asyncio.Event(), asyncio.Event()
    world.origin.routes["/kettle/descale"] = held_page(asked, release)
    start = world.url("/kettle/descale")
    world.engine.script(
        tool_reply(search("kettle")),
        tool_reply(fetch(start)),
        text_reply("From the results only [1]."),
    )

    async def kill_when_asked() -> None:
        await asked.wait()
        await world.fetcher.kill()

    killer = asyncio.create_task(kill_when_asked())
    answer = await stream_answer(http, gateway.api, body())
    await killer
    release.set()
    assert answer.text == "From the results only [1]."
    # The page is told why nothing was read.
    assert answer.of_type("read") == [
        {
            "type": "read",
            "url": start,
            "final_url": start,
            "title": "",
            "ok": False,
            "reason": "unavailable",
        }
    ]
    assert last_tool_message(world, 2).startswith(prompts.FETCH_UNAVAILABLE.format(url=start))
    assert (
        gateway.metric(
            "tigress_gateway_tool_calls", {"interface": "chat", "tool": FETCH, "outcome": "error"}
        )
        == 1
    )
    health = (await http.get(f"{gateway.url}/healthz")).json()
    assert health["fetcher"]["ok"] is False
    assert health["status"] == "degraded"


async def test_a_busy_fetcher_is_a_clear_result(
    world: World,
    gateway_for: GatewayFactory,
    http: httpx.AsyncClient,
    test_policy: Policy,
    client_ssl_context: ssl.SSLContext,
) -> None:
    world.results_on_origin()
    asked, release = asyncio.Event(), asyncio.Event()
    world.origin.routes["/kettle/descale"] = held_page(asked, release)
    world.origin.routes["/guides/kettles"] = html("<title>Guide</title>")
    with socket_folder() as folder:
        async with (
            running_fetcher(
                folder, policy=test_policy, ssl_context=client_ssl_context, max_concurrent_reads=1
            ) as busy,
            busy.client() as other,
            gateway_for(fetcher=(busy.target,)) as gateway,
        ):
            # Another reader holds the fetcher's only read slot.
            holder = asyncio.create_task(
                other.read(
                    world.url("/kettle/descale"),
                    allowed_hosts=["origin.test"],
                    page_limit=1,
                )
            )
            await asked.wait()
            guide = world.url("/guides/kettles")
            world.engine.script(
                tool_reply(search("kettle")), tool_reply(fetch(guide)), text_reply("Later.")
            )
            answer = await stream_answer(http, gateway.api, body())
            release.set()
            await holder
    assert answer.text == "Later."
    assert last_tool_message(world, 2).startswith(
        prompts.FETCH_BUSY.format(url=guide, scope="answer")
    )


async def test_a_read_past_its_deadline_ends_inside_the_tool_timeout(
    world: World, gateway_for: GatewayFactory, http: httpx.AsyncClient
) -> None:
    world.results_on_origin()
    asked, release = asyncio.Event(), asyncio.Event()
    world.origin.routes["/kettle/descale"] = held_page(asked, release)
    start = world.url("/kettle/descale")
    world.engine.script(
        tool_reply(search("kettle")), tool_reply(fetch(start)), text_reply("Too slow.")
    )
    # The read's deadline is fitted inside the loop's tool timeout, so the fetcher's own
    # "took too long" reaches the model, not the loop's generic timeout.
    timeouts = Timeouts(**{**vars(E2E_TIMEOUTS), "tool": 3.0})
    async with gateway_for(timeouts=timeouts) as gateway:
        answer = await stream_answer(http, gateway.api, body())
    release.set()
    assert answer.text == "Too slow."
    text = last_tool_message(world, 2)
    assert text.split("\n")[0] in (
        prompts.FIRST_PAGE_NOT_READ.format(url=start, reason="the page took too long"),
        prompts.FETCH_TIMEOUT.format(url=start),
    )
    assert (
        gateway.metric(
            "tigress_gateway_tool_calls", {"interface": "chat", "tool": FETCH, "outcome": "timeout"}
        )
        == 1
    )


# --- The client -----------------------------------------------------------------------------


async def test_a_client_leaving_mid_crawl_cancels_the_fetchers_read(
    world: World, gateway: Gateway, http: httpx.AsyncClient
) -> None:
    world.results_on_origin()
    asked, release = asyncio.Event(), asyncio.Event()
    world.origin.routes["/kettle/descale"] = held_page(asked, release)
    world.engine.script(
        tool_reply(search("kettle")),
        tool_reply(fetch(world.url("/kettle/descale"))),
        text_reply("Never asked for."),
    )

    async def leave_during_the_crawl(answer: Answer) -> bool:
        return not (asked.is_set() and isinstance(answer.items[-1], KeepAlive))

    answer = await stream_answer(http, gateway.api, body(), on_item=leave_during_the_crawl)
    assert answer.sequence[-1] == ":"
    cancelled = {"method": "ReadStream", "code": "CANCELLED"}
    await eventually(lambda: world.fetcher.metric("tigress_fetcher_grpc_handled", cancelled) == 1)
    assert world.fetcher.server.servicer.in_flight == 0
    await eventually(
        lambda: (
            gateway.metric(
                "tigress_gateway_chat_requests", {"mode": "web", "outcome": "client_closed"}
            )
            == 1
        )
    )
    release.set()
    assert len(world.engine.chats) == 2  # the model was never asked again


async def test_a_client_leaving_mid_search_closes_the_searxng_request(
    world: World, gateway: Gateway, http: httpx.AsyncClient
) -> None:
    world.searxng.default = replace(recorded("search_normal.json"), hang=True)
    world.engine.script(tool_reply(search("kettle")), text_reply("Never asked for."))

    async def leave_during_the_search(answer: Answer) -> bool:
        return not (world.searxng.searches() and isinstance(answer.items[-1], KeepAlive))

    answer = await stream_answer(http, gateway.api, body(), on_item=leave_during_the_search)
    assert answer.sequence[-1] == ":"
    await eventually(lambda: world.searxng.abandoned == 1)
    await eventually(
        lambda: (
            gateway.metric(
                "tigress_gateway_chat_requests", {"mode": "web", "outcome": "client_closed"}
            )
            == 1
        )
    )
    assert len(world.engine.chats) == 1  # the model was never asked again


# --- Nothing else running ---------------------------------------------------------------------


async def test_with_nothing_running_health_says_what_is_missing_and_a_chat_gets_502(
    world: World, gateway_for: GatewayFactory, http: httpx.AsyncClient
) -> None:
    with refusing_url() as engine_url, refusing_url() as searxng_url, socket_folder() as folder:
        engine = f"{engine_url}/v1"
        missing = f"unix:{folder / 'absent.sock'}"
        async with gateway_for(
            engines=(EngineSettings(engine),), searxng_url=searxng_url, fetcher=(missing,)
        ) as gateway:
            health = (await http.get(f"{gateway.url}/healthz")).json()
            chat = await http.post(
                f"{gateway.api}/chat/completions", json=body(stream=True), headers=AUTH
            )
    assert health["status"] == "degraded"
    assert [(e["engine"], e["ok"]) for e in health["engines"]] == [(engine, False)]
    assert "Start the model server there" in health["engines"][0]["says"]
    assert health["searxng"]["ok"] is False
    assert searxng_url in health["searxng"]["problem"]
    assert health["searxng"]["says"] == health["searxng"]["problem"]
    assert [(t["target"], t["ok"]) for t in health["fetcher"]["targets"]] == [(missing, False)]
    assert f"The fetcher at {missing} does not answer: start it" in health["fetcher"]["says"]
    assert chat.status_code == 502
    assert engine in chat.json()["error"]["message"]


async def test_a_healthy_setup_reports_every_part(
    world: World, gateway: Gateway, http: httpx.AsyncClient
) -> None:
    health = (await http.get(f"{gateway.url}/healthz")).json()
    target = world.fetcher.target
    assert health == {
        "status": "ok",
        "engines": [
            {
                "engine": world.engine.url,
                "ok": True,
                "says": f"The engine {world.engine.url} answers.",
            }
        ],
        "searxng": {
            "checked": True,
            "ok": True,
            "url": world.searxng.url,
            "says": f"SearXNG at {world.searxng.url} answers.",
        },
        "fetcher": {
            "checked": True,
            "ok": True,
            "targets": [
                {"target": target, "ok": True, "says": f"The fetcher at {target} answers."}
            ],
            "says": "The fetcher answers.",
        },
    }
