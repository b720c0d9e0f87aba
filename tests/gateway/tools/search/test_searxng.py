"""The SearXNG client over real HTTP: the stand-in serves each recorded answer as recorded."""

from __future__ import annotations

import dataclasses
import json
import re

import httpx
import pytest

from gateway.tools.search.answer import FailureCause, SearchAnswer, SearchFailure, read_answer
from gateway.tools.search.searxng import (
    SEARCH_HEADERS,
    USER_AGENT,
    SearxngClient,
    SearxngHealth,
    http_client,
)
from testkit.searxng import (
    SearxngStandIn,
    Served,
    index,
    recorded,
    refusing_url,
    search_files,
)

# SearXNG's bot pattern is matched at the start of the User-Agent (searx/botdetection);
# these are the entries a project name could collide with.
BOT_PREFIXES = re.compile(r"(unknown|curl|wget|python|java|go-http-client|okhttp|headless)", re.I)


@pytest.mark.parametrize("file", search_files())
async def test_every_recorded_answer_reads_the_same_over_http(
    file: str, searxng: SearxngStandIn, searxng_client: SearxngClient
) -> None:
    served = recorded(file)
    searxng.default = served
    result = await searxng_client.search("kettle")
    expected = read_answer(
        served.status,
        served.content_type,
        served.body,
        served.server_timing,
        limit=6,
        origin=searxng.url,
    )
    assert result == expected
    assert isinstance(result, SearchAnswer) is (index()[file]["status"] == 200)


async def test_the_request_is_the_json_api_in_english(
    searxng: SearxngStandIn, searxng_client: SearxngClient
) -> None:
    await searxng_client.search("kettle descaling")
    (asked,) = searxng.asked
    assert asked.path == "/search"
    assert asked.params == {"q": "kettle descaling", "format": "json", "locale": "en"}


async def test_a_time_range_is_sent_only_when_set(
    searxng: SearxngStandIn, searxng_client: SearxngClient
) -> None:
    await searxng_client.search("kettle", time_range="week")
    await searxng_client.search("kettle", time_range=None)
    assert [asked.params.get("time_range") for asked in searxng.asked] == ["week", None]


async def test_the_headers_pass_searxngs_limiter(
    searxng: SearxngStandIn, searxng_client: SearxngClient
) -> None:
    await searxng_client.search("kettle")
    headers = searxng.asked[0].headers
    assert "text/html" in headers["accept"]
    assert {"gzip", "deflate"} & {e.strip() for e in headers["accept-encoding"].split(",")}
    assert headers["accept-language"]
    assert headers["user-agent"] == USER_AGENT
    assert "Tigress" in USER_AGENT
    assert not BOT_PREFIXES.match(USER_AGENT)
    assert headers.get("connection", "").lower() != "close"


def test_the_limiter_probe_accepted_these_header_forms() -> None:
    # The recorded limiter run: the request that got 200 had a browser Accept, gzip and an
    # Accept-Language; ours has the same three properties (see the test above).
    probe = json.loads(recorded("limiter_200_json_request_1.json").body)
    assert probe["results"]
    assert SEARCH_HEADERS["Accept"].startswith("text/html")


async def test_at_most_the_configured_number_of_results_comes_back(
    searxng: SearxngStandIn, searxng_http: httpx.AsyncClient
) -> None:
    client = SearxngClient(searxng_http, searxng.url, results_per_query=3)
    result = await client.search("kettle")
    assert isinstance(result, SearchAnswer)
    assert len(result.hits) == 3


async def test_a_base_url_with_a_path_and_a_slash_is_joined_once(
    searxng: SearxngStandIn, searxng_http: httpx.AsyncClient
) -> None:
    client = SearxngClient(searxng_http, searxng.url + "/")
    assert isinstance(await client.search("kettle"), SearchAnswer)
    assert searxng.asked[0].path == "/search"


async def test_refused_connection_names_the_address_and_the_setting(
    searxng_http: httpx.AsyncClient,
) -> None:
    with refusing_url() as url:
        result = await SearxngClient(searxng_http, url).search("kettle")
    assert isinstance(result, SearchFailure)
    assert result.cause is FailureCause.UNREACHABLE
    assert url in result.operator  # for /healthz; the model's sentence never names it
    assert url not in result.message
    assert "TIGRESS_SEARXNG_URL" in result.message
    assert "refused" in result.message.lower()


async def test_an_unanswered_search_times_out_as_a_value(
    searxng: SearxngStandIn, searxng_http: httpx.AsyncClient
) -> None:
    searxng.default = dataclasses.replace(recorded("search_normal.json"), hang=True)
    client = SearxngClient(searxng_http, searxng.url, timeout=0.3)
    result = await client.search("kettle")
    assert isinstance(result, SearchFailure)
    assert result.cause is FailureCause.TIMEOUT
    assert "0.3 seconds" in result.message
    assert "max_request_timeout" in result.message


async def test_a_slow_answer_within_the_timeout_is_read(
    searxng: SearxngStandIn, searxng_client: SearxngClient
) -> None:
    searxng.default = dataclasses.replace(recorded("search_normal.json"), delay=0.2)
    assert isinstance(await searxng_client.search("kettle"), SearchAnswer)


async def test_a_connection_dropped_mid_answer_is_a_broken_value(
    searxng: SearxngStandIn, searxng_client: SearxngClient
) -> None:
    searxng.default = dataclasses.replace(recorded("search_normal.json"), cut=True)
    result = await searxng_client.search("kettle")
    assert isinstance(result, SearchFailure)
    assert result.cause is FailureCause.BROKEN
    assert "broke" in result.message


async def test_the_probe_reports_a_healthy_searxng(
    searxng: SearxngStandIn, searxng_client: SearxngClient
) -> None:
    health = await searxng_client.probe()
    assert health == SearxngHealth(ok=True, url=searxng.url)
    assert [asked.path for asked in searxng.asked] == ["/healthz"]


async def test_the_probe_reports_a_refused_searxng_with_what_to_change(
    searxng_http: httpx.AsyncClient,
) -> None:
    with refusing_url() as url:
        health = await SearxngClient(searxng_http, url).probe()
    assert not health.ok
    assert health.cause is FailureCause.UNREACHABLE
    assert "TIGRESS_SEARXNG_URL" in health.problem


async def test_the_probe_reports_a_wrong_address(
    searxng: SearxngStandIn, searxng_client: SearxngClient
) -> None:
    searxng.health = Served(404, "text/html", b"<h1>Not Found</h1>")
    health = await searxng_client.probe()
    assert (health.ok, health.cause) == (False, FailureCause.HTTP_STATUS)
    assert "HTTP 404" in health.problem


async def test_the_probe_of_a_hanging_searxng_ends(
    searxng: SearxngStandIn, searxng_client: SearxngClient
) -> None:
    searxng.health = Served(200, "text/plain", b"OK", hang=True)
    health = await searxng_client.probe(deadline=0.2)
    assert (health.ok, health.cause) == (False, FailureCause.TIMEOUT)


async def test_a_redirect_is_not_followed(
    searxng: SearxngStandIn, searxng_client: SearxngClient
) -> None:
    with refusing_url() as elsewhere:
        searxng.default = Served(
            302, "text/html", b"", headers=(("Location", f"{elsewhere}/search?q=kettle"),)
        )
        result = await searxng_client.search("kettle")
    assert isinstance(result, SearchFailure)
    assert (result.cause, result.status) == (FailureCause.HTTP_STATUS, 302)
    assert len(searxng.asked) == 1


async def test_proxy_variables_do_not_reroute_searches(
    searxng: SearxngStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    with refusing_url() as proxy:
        for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.setenv(name, proxy)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        async with http_client(timeout=5.0) as http:
            result = await SearxngClient(http, searxng.url).search("kettle")
    assert isinstance(result, SearchAnswer)
