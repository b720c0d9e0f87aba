"""The operator's lists and SearXNG parameters in web_search (SPEC 6), against the stand-in."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from fetcher.client import DomainLists, parse_domains
from gateway import prompts
from gateway.settings import SettingsError, load_settings
from gateway.tools.ledger import PAGES, SEARCHES, BudgetCounter, Ledger
from gateway.tools.search.searxng import SearxngClient, search_parameters
from gateway.tools.search.source_lists import denied
from testkit.searxng import SearxngStandIn, recorded
from tests.gateway.tools.search.searching import search_once

#: search_normal.json's six results, in SearXNG's order.
RESULTS = [
    "https://example.org/kettle/descale",
    "https://example.com/blog/citric-vs-vinegar",
    "https://energy.example.org/boiling",
    "https://shop.example.net/guides/kettles",
    "https://recalls.example.gov/notice/77",
    "https://forum.example.com/t/12345",
]


def lists(*, deny: tuple[str, ...] = (), allow: tuple[str, ...] = ()) -> DomainLists:
    parsed_deny, parsed_allow = parse_domains(deny), parse_domains(allow)
    assert isinstance(parsed_deny, tuple)
    assert isinstance(parsed_allow, tuple)
    return DomainLists(deny=parsed_deny, allow=parsed_allow)


@pytest.mark.parametrize(
    ("url", "operator", "expected"),
    [
        ("https://example.com/x", lists(deny=("example.com",)), True),
        ("https://www.example.com/x", lists(deny=("example.com",)), True),
        ("https://evilexample.com/x", lists(deny=("example.com",)), False),
        ("http://WWW.EXAMPLE.COM./x", lists(deny=("example.com",)), True),
        ("https://xn--bcher-kva.de/", lists(deny=("bücher.de",)), True),
        ("https://bücher.de/", lists(deny=("xn--bcher-kva.de",)), True),
        ("https://example.org/", lists(allow=("example.com",)), True),
        ("https://docs.example.com/", lists(allow=("example.com",)), False),
        ("https://user@example.com/", lists(allow=("example.com",)), True),
        ("https://user@example.com/", lists(deny=("example.org",)), False),
        ("https://example.com/", DomainLists(), False),
    ],
)
def test_a_result_is_removed_when_the_fetcher_would_deny_it(
    url: str, operator: DomainLists, expected: bool
) -> None:
    assert denied(url, operator) is expected


def client_with(
    searxng: SearxngStandIn, http: httpx.AsyncClient, **options: object
) -> SearxngClient:
    return SearxngClient(http, searxng.url, timeout=5.0, **options)  # type: ignore[arg-type]


async def test_denied_results_get_no_number_and_the_text_says_how_many(
    searxng: SearxngStandIn, searxng_http: httpx.AsyncClient
) -> None:
    client = client_with(searxng, searxng_http, lists=lists(deny=("example.com", "example.net")))
    ledger = Ledger()
    done = await search_once(
        {"query": "kettle"},
        client=client,
        ledger=ledger,
        budgets=BudgetCounter({SEARCHES: 16, PAGES: 12}),
    )
    kept = [RESULTS[0], RESULTS[2], RESULTS[4]]
    assert [source.url for source in ledger.sources()] == kept
    for url in set(RESULTS) - set(kept):
        assert url not in done.text
    assert prompts.SEARCH_REMOVED_BY_LISTS.format(count=3, results="results") in done.text
    assert done.event is not None
    assert done.event.results == 3


async def test_denied_results_do_not_take_places_of_the_results_kept(
    searxng: SearxngStandIn, searxng_http: httpx.AsyncClient
) -> None:
    client = SearxngClient(
        searxng_http, searxng.url, timeout=5.0, results_per_query=2, lists=lists(deny=("org",))
    )
    ledger = Ledger()
    await search_once(
        {"query": "kettle"},
        client=client,
        ledger=ledger,
        budgets=BudgetCounter({SEARCHES: 16, PAGES: 12}),
    )
    assert [source.url for source in ledger.sources()] == [RESULTS[1], RESULTS[3]]


async def test_an_allow_list_keeps_only_its_domains_and_says_so_once_for_one(
    searxng: SearxngStandIn, searxng_http: httpx.AsyncClient
) -> None:
    client = client_with(
        searxng,
        searxng_http,
        lists=lists(
            allow=("example.org", "example.com", "example.net", "example.gov"),
            deny=("forum.example.com",),
        ),
    )
    ledger = Ledger()
    done = await search_once(
        {"query": "kettle"},
        client=client,
        ledger=ledger,
        budgets=BudgetCounter({SEARCHES: 16, PAGES: 12}),
    )
    assert [source.url for source in ledger.sources()] == RESULTS[:5]
    assert prompts.SEARCH_REMOVED_BY_LISTS.format(count=1, results="result") in done.text


async def test_when_every_result_is_removed_the_text_says_it_was_the_lists(
    searxng: SearxngStandIn, searxng_http: httpx.AsyncClient
) -> None:
    client = client_with(searxng, searxng_http, lists=lists(allow=("example.edu",)))
    ledger = Ledger()
    done = await search_once(
        {"query": "kettle", "kind": "jobs"},
        client=client,
        ledger=ledger,
        budgets=BudgetCounter({SEARCHES: 16, PAGES: 12}),
    )
    assert ledger.sources() == []
    # Four searches (the query and its angles) found the same six: six removed, not 24.
    assert prompts.SEARCH_ALL_REMOVED.format(count=6) in done.text
    assert prompts.SEARCH_NO_HITS not in done.text


async def test_without_lists_nothing_is_removed_or_said(
    searxng: SearxngStandIn, searxng_client: SearxngClient
) -> None:
    ledger = Ledger()
    done = await search_once(
        {"query": "kettle"},
        client=searxng_client,
        ledger=ledger,
        budgets=BudgetCounter({SEARCHES: 16, PAGES: 12}),
    )
    assert [source.url for source in ledger.sources()] == RESULTS
    assert "source lists" not in done.text


async def test_operator_parameters_are_sent_as_searxngs_own(
    searxng: SearxngStandIn, searxng_http: httpx.AsyncClient
) -> None:
    client = client_with(
        searxng,
        searxng_http,
        categories=("general", "news"),
        language="de-DE",
        engines=("duckduckgo", "google news"),
    )
    searxng.answers["kettle"] = recorded("search_normal.json")
    await client.search("kettle", time_range="week")
    (asked,) = searxng.asked
    assert asked.params == {
        "q": "kettle",
        "format": "json",
        "locale": "en",
        "categories": "general,news",
        "language": "de-DE",
        "engines": "duckduckgo,google news",
        "time_range": "week",
    }


async def test_no_operator_parameters_send_nothing_more(
    searxng: SearxngStandIn, searxng_client: SearxngClient
) -> None:
    await searxng_client.search("kettle")
    assert set(searxng.asked[0].params) == {"q", "format", "locale"}
    assert search_parameters((), "", ()) == {}


def test_the_gateway_reads_the_lists_from_the_fetchers_table(tmp_path: Path) -> None:
    config = tmp_path / "tigress.toml"
    config.write_text(
        'searxng_categories = ["general", "it"]\nsearxng_language = "en-GB"\n'
        'searxng_engines = "duckduckgo, brave"\n'
        '[fetcher]\ndeny_domains = ["Ads.Example.COM."]\nallow_domains = ["bücher.de"]\n'
    )
    settings = load_settings({"TIGRESS_CONFIG": str(config)})
    assert settings.source_lists == DomainLists(
        deny=("ads.example.com",), allow=("xn--bcher-kva.de",)
    )
    assert settings.searxng_categories == ("general", "it")
    assert settings.searxng_language == "en-GB"
    assert settings.searxng_engines == ("duckduckgo", "brave")
    overridden = load_settings(
        {
            "TIGRESS_CONFIG": str(config),
            "TIGRESS_FETCHER_DENY_DOMAINS": "tracker.test",
            "TIGRESS_FETCHER_ALLOW_DOMAINS": "",
            "TIGRESS_SEARXNG_LANGUAGE": "fr",
            "TIGRESS_SEARXNG_ENGINES": "",
        }
    )
    assert overridden.source_lists == DomainLists(deny=("tracker.test",), allow=())
    assert (overridden.searxng_language, overridden.searxng_engines) == ("fr", ())
    defaults = load_settings({})
    assert defaults.source_lists.empty
    assert (defaults.searxng_categories, defaults.searxng_language) == ((), "")


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('[fetcher]\ndeny_domains = ["*.example.com"]\n', "fetcher.deny_domains"),
        ("[fetcher]\nallow_domains = [3]\n", "fetcher.allow_domains"),
        ('searxng_categories = ["a,b"]\n', "searxng_categories"),
        ("searxng_engines = 7\n", "searxng_engines"),
        ('searxng_language = "en_US!"\n', "searxng_language"),
        ("searxng_language = 1\n", "searxng_language"),
    ],
)
def test_bad_lists_and_parameters_stop_start_up_naming_them(
    tmp_path: Path, text: str, named: str
) -> None:
    config = tmp_path / "tigress.toml"
    config.write_text(text)
    with pytest.raises(SettingsError, match=named):
        load_settings({"TIGRESS_CONFIG": str(config)})
