"""The operator's lists on the wire (SPEC 7 step 2): the first address, every redirect hop,
every crawl link; after rule 1 and before any lookup; never loosening a rule."""

from __future__ import annotations

import pytest

from fetcher.crawl import Crawler
from fetcher.isolation.workers import WorkerPool
from fetcher.net.domains import DomainLists, parse_domains
from fetcher.net.resolver import StaticResolver
from fetcher.net.urls import Refused
from fetcher.outcome import Downloaded, Failed, HopRecord, Outcome
from fetcher.reasons import Reason
from fetcher.report import PageFailed
from testkit.origin import Origin, html, redirect
from tests.support.fixtures import DownloaderFactory

ALLOWED = ("origin.test",)


def lists(*, deny: tuple[str, ...] = (), allow: tuple[str, ...] = ()) -> DomainLists:
    parsed_deny, parsed_allow = parse_domains(deny), parse_domains(allow)
    assert not isinstance(parsed_deny, Refused)
    assert not isinstance(parsed_allow, Refused)
    return DomainLists(deny=parsed_deny, allow=parsed_allow)


def failed(outcome: Outcome, reason: Reason) -> Failed:
    assert isinstance(outcome, Failed), outcome
    assert outcome.reason is reason, outcome
    return outcome


@pytest.mark.parametrize(
    "operator",
    [
        lists(deny=("origin.test",)),
        lists(deny=("ORIGIN.TEST.",)),
        lists(allow=("other.test",)),
    ],
)
async def test_first_address_is_denied_before_any_lookup(
    origin: Origin, make_downloader: DownloaderFactory, operator: DomainLists
) -> None:
    resolver = StaticResolver({"origin.test": ["127.0.0.1"]})
    hops: list[HopRecord] = []
    async with make_downloader(lists=operator, resolver=resolver, observer=hops.append) as d:
        outcome = await d.download(origin.url("/"), allowed_hosts=ALLOWED)
    refused = failed(outcome, Reason.DENIED)
    assert "operator's" in refused.detail
    assert resolver.calls == []
    assert origin.requests == []
    assert [(h.outcome, h.reason) for h in hops] == [("refused", Reason.DENIED)]


async def test_rule_1_is_checked_first(origin: Origin, make_downloader: DownloaderFactory) -> None:
    async with make_downloader(lists=lists(deny=("origin.test",))) as d:
        outcome = await d.download(origin.url("/"), allowed_hosts=("other.test",))
    failed(outcome, Reason.NOT_IN_ANSWER)


async def test_an_allow_list_does_not_loosen_rule_1(
    origin: Origin, make_downloader: DownloaderFactory
) -> None:
    async with make_downloader(lists=lists(allow=("origin.test", "other.test"))) as d:
        outcome = await d.download(origin.url("/", host="other.test"), allowed_hosts=ALLOWED)
    failed(outcome, Reason.NOT_IN_ANSWER)
    assert origin.requests == []


async def test_an_allow_list_does_not_loosen_rule_2(
    origin: Origin, make_downloader: DownloaderFactory
) -> None:
    # The test policy exempts only 127.0.0.1; 127.0.0.2 is loopback and stays refused.
    resolver = StaticResolver({"origin.test": ["127.0.0.2"]})
    async with make_downloader(lists=lists(allow=("origin.test",)), resolver=resolver) as d:
        outcome = await d.download(origin.url("/"), allowed_hosts=ALLOWED)
    failed(outcome, Reason.NOT_PUBLIC)


async def test_an_allowed_host_is_read_as_without_lists(
    origin: Origin, make_downloader: DownloaderFactory
) -> None:
    origin.routes["/"] = html("<p>hello</p>")
    async with make_downloader(lists=lists(allow=("origin.test",), deny=("ads.test",))) as d:
        outcome = await d.download(origin.url("/"), allowed_hosts=ALLOWED)
    assert isinstance(outcome, Downloaded)


async def test_every_redirect_hop_is_checked(
    origin: Origin, make_downloader: DownloaderFactory
) -> None:
    origin.routes["/"] = redirect(origin.url("/next"))
    origin.routes["/next"] = redirect(origin.url("/there", host="other.test"))
    origin.routes["/there"] = html("<p>not to be read</p>")
    hops: list[HopRecord] = []
    async with make_downloader(lists=lists(deny=("other.test",)), observer=hops.append) as d:
        outcome = await d.download(origin.url("/"), allowed_hosts=ALLOWED)
    refused = failed(outcome, Reason.DENIED)
    assert refused.url == origin.url("/there", host="other.test")
    assert refused.redirects == 2
    assert [h.outcome for h in hops] == ["redirect", "redirect", "refused"]
    assert [r.target for r in origin.requests] == ["/", "/next"]


async def test_a_redirect_outside_the_allow_list_is_denied(
    origin: Origin, make_downloader: DownloaderFactory
) -> None:
    origin.routes["/"] = redirect(origin.url("/there", host="other.test"))
    async with make_downloader(lists=lists(allow=("origin.test",))) as d:
        outcome = await d.download(origin.url("/"), allowed_hosts=ALLOWED)
    failed(outcome, Reason.DENIED)
    assert [r.sni for r in origin.requests] == ["origin.test"]


async def test_every_crawl_link_is_checked(
    origin: Origin, make_downloader: DownloaderFactory, render_pool: WorkerPool
) -> None:
    docs = origin.url("/d", host="docs.origin.test")
    origin.routes["/"] = html(
        f'<html><title>Start</title><main><h1>Start</h1><p>Text.</p><a href="/a">a</a>'
        f'<a href="{docs}">docs</a></main></html>'
    )
    origin.routes["/a"] = html("<title>A</title><p>Page A.</p>")
    origin.routes["/d"] = html("<title>D</title><p>Page D.</p>")
    async with make_downloader(lists=lists(deny=("docs.origin.test",))) as d:
        crawler = Crawler(downloader=d, pool=render_pool)
        report = await crawler(origin.url("/"), allowed_hosts=ALLOWED)
    assert [p.title for p in report.pages] == ["Start", "A"]
    assert report.failures == (PageFailed(docs, Reason.DENIED, report.failures[0].detail, 1),)
    assert "docs.origin.test" not in {r.sni for r in origin.requests}
