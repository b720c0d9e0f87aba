"""web_search and a Web-on chat against the real SearXNG (pinned commit, loopback engines,
its limiter on with a real Valkey/Redis), beside the tests on the recorded answers."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest

from fetcher.client import DomainLists
from gateway import prompts
from gateway.tools.ledger import PAGES, SEARCHES, BudgetCounter, Ledger
from gateway.tools.search.answer import FailureCause, SearchAnswer, SearchFailure, read_answer
from gateway.tools.search.searxng import SEARCH_HEADERS, SearxngClient, http_client
from testkit.engine import text_reply, tool_reply
from testkit.origin import Origin, html
from tests.e2e.client import body, stream_answer
from tests.gateway.tools.search.searching import search_once
from tests.llama.processes import Served
from tests.searxng.conftest import GatewayFactory
from tests.searxng.real import ResultServer
from tests.support.world import World

#: A loopback address outside the instance's pass_ip list: searches from it meet the whole
#: limiter (4 JSON searches an hour per address), so only one test uses it.
LIMITED_ADDRESS = "127.0.0.2"


@pytest.fixture
async def searxng_http() -> AsyncIterator[httpx.AsyncClient]:
    async with http_client(timeout=10.0) as client:
        yield client


def client_of(served: Served, http: httpx.AsyncClient, **options: object) -> SearxngClient:
    return SearxngClient(http, served.url, timeout=10.0, **options)  # type: ignore[arg-type]


async def search(client: SearxngClient, ledger: Ledger, **arguments: object) -> str:
    done = await search_once(
        arguments, client=client, ledger=ledger, budgets=BudgetCounter({SEARCHES: 16, PAGES: 12})
    )
    assert done.outcome == "ok", done.text
    return done.text


async def test_web_search_reads_the_real_searxngs_answer(
    real_searxng: Served, results: ResultServer, searxng_http: httpx.AsyncClient
) -> None:
    ledger = Ledger()
    text = await search(client_of(real_searxng, searxng_http), ledger, query="kettle descale")
    # Both general engines were asked, with SearXNG's own parameters.
    assert sorted(results.paths()) == ["/brave", "/json"]
    urls = [source.url for source in ledger.sources()]
    assert set(urls) == {
        results.result_url(path, "kettle descale", n)
        for path in ("/json", "/brave")
        for n in (1, 2, 3)
    }
    assert text.startswith('Results for "kettle descale":\n[1] ')
    # The Brave client maps a date; SearXNG's HTML is stripped from snippets.
    brave_first = urls.index(results.result_url("/brave", "kettle descale", 1)) + 1
    assert f"[{brave_first}] brave kettle descale 1 — " in text
    assert "(published 2026-10-01)" in text
    assert "<b>" not in text
    assert "kettle descale from json, result 1." in text


async def test_a_time_range_reaches_the_engines_as_searxng_sends_it(
    real_searxng: Served, results: ResultServer, searxng_http: httpx.AsyncClient
) -> None:
    answer = await client_of(real_searxng, searxng_http).search("descale", time_range="week")
    assert isinstance(answer, SearchAnswer)
    asked = {a.path: a.params for a in results.asked}
    assert asked["/json"]["hours"] == "168"
    assert asked["/brave"]["time_range"] == "past_week"


async def test_the_operators_engines_categories_and_language_are_searxngs_own(
    real_searxng: Served, results: ResultServer, searxng_http: httpx.AsyncClient
) -> None:
    only_json = client_of(real_searxng, searxng_http, engines=("loopjson",), language="de-DE")
    answer = await only_json.search("entkalken")
    assert isinstance(answer, SearchAnswer)
    assert [(a.path, a.params["lang"]) for a in results.asked] == [("/json", "de")]
    assert {hit.url for hit in answer.hits} == {
        results.result_url("/json", "entkalken", n) for n in (1, 2, 3)
    }
    results.clear()
    news = client_of(real_searxng, searxng_http, categories=("news",), language="fr")
    answer = await news.search("détartrer")
    assert isinstance(answer, SearchAnswer)
    assert [(a.path, a.params["lang"]) for a in results.asked] == [("/news", "fr")]
    assert all(hit.url.startswith("https://docs.origin.test:") for hit in answer.hits)
    results.clear()
    both = client_of(real_searxng, searxng_http, categories=("general", "news"))
    await both.search("boil")
    assert sorted(results.paths()) == ["/brave", "/json", "/news"]


async def test_an_engine_that_fails_is_named_in_the_tool_text(
    real_searxng: Served, results: ResultServer, searxng_http: httpx.AsyncClient
) -> None:
    client = client_of(real_searxng, searxng_http, engines=("loopjson", "loop500"))
    text = await search(client, Ledger(), query="kettle limescale")
    assert "/err500" in results.paths()
    assert prompts.SEARCH_UNRESPONSIVE.format(engines="loop500 (HTTP error)") in text


async def test_the_operators_lists_remove_results_of_the_real_searxng(
    real_searxng: Served, results: ResultServer, searxng_http: httpx.AsyncClient
) -> None:
    lists = DomainLists(deny=("www.origin.test",))
    ledger = Ledger()
    text = await search(client_of(real_searxng, searxng_http, lists=lists), ledger, query="rinse")
    assert {source.url for source in ledger.sources()} == {
        results.result_url("/json", "rinse", n) for n in (1, 2, 3)
    }
    assert prompts.SEARCH_REMOVED_BY_LISTS.format(count=3, results="results") in text


async def test_the_limiter_lets_the_gateways_searches_through_and_stops_a_bot(
    real_searxng: Served, results: ResultServer
) -> None:
    """From an address the instance does not pass, the limiter judges each request:
    the gateway's headers get an answer, a default Python client gets SearXNG's 429,
    which the gateway reads as the limiter's refusal."""
    transport = httpx.AsyncHTTPTransport(local_address=LIMITED_ADDRESS)
    async with httpx.AsyncClient(transport=transport, trust_env=False, timeout=10.0) as http:
        answer = await SearxngClient(http, real_searxng.url, timeout=10.0).search("scale")
        assert isinstance(answer, SearchAnswer), answer
        assert answer.hits
        bot = await http.get(f"{real_searxng.url}/search", params={"q": "scale", "format": "json"})
    assert bot.status_code == 429
    read = read_answer(
        bot.status_code,
        bot.headers.get("content-type", ""),
        bot.content,
        None,
        limit=6,
        origin=real_searxng.url,
    )
    assert isinstance(read, SearchFailure)
    assert read.cause is FailureCause.RATE_LIMITED
    assert SEARCH_HEADERS["User-Agent"].startswith("Tigress/")


async def test_a_web_on_chat_searches_the_real_searxng_and_reads_what_it_found(
    world: World,
    origin: Origin,
    results: ResultServer,
    gateway_for: GatewayFactory,
) -> None:
    results.origin_port = origin.port
    start = results.result_url("/json", "kettle descale", 1)
    origin.routes["/json/kettle-descale/1"] = html(
        "<html><title>Descaling</title><main><h1>Descaling</h1>"
        "<p>Citric acid removes limescale.</p></main></html>"
    )
    world.engine.script(
        tool_reply(("web_search", json.dumps({"query": "kettle descale"}))),
        tool_reply(("fetch_page_content_recursive", json.dumps({"url": start}))),
        text_reply("Use citric acid [1]."),
    )
    lists = DomainLists(deny=("www.origin.test",))
    async with (
        gateway_for(source_lists=lists, searxng_categories=("general",)) as gateway,
        httpx.AsyncClient(timeout=30, trust_env=False) as http,
    ):
        answer = await stream_answer(http, gateway.api, body())
    searched = answer.of_type("searched")[0]
    assert (searched["queries"], searched["results"], searched["error"]) == (
        ["kettle descale"],
        3,
        None,
    )
    assert [(r["url"], r["title"], r["ok"]) for r in answer.of_type("read")] == [
        (start, "Descaling", True)
    ]
    sources = answer.of_type("sources")[0]["sources"]
    assert sources[0] == {"n": 1, "url": start, "title": "json kettle descale 1", "read": True}
    assert all("www.origin.test" not in s["url"] for s in sources)
    assert answer.of_type("citations") == [{"type": "citations", "cited": [1], "unknown": []}]
    assert answer.text == "Use citric acid [1]."
    # What the model read of the search: the real SearXNG's results, three removed.
    tool_messages = [m for m in world.engine.chats[1]["messages"] if m["role"] == "tool"]
    assert (
        prompts.SEARCH_REMOVED_BY_LISTS.format(count=3, results="results")
        in (tool_messages[0]["content"])
    )
    assert sorted(results.paths()) == ["/brave", "/json"]
