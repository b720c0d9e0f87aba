"""The two-hop crawl against a real local HTTPS site (SPEC 7 steps 8-10)."""

from __future__ import annotations

import ssl
from typing import Any

import pytest

from fetcher.crawl import WORKER_PRELOAD, Crawler
from fetcher.html.extract import REPORT_TEXT_LIMIT
from fetcher.isolation.workers import WorkerPool, WorkLimits
from fetcher.net.download import Downloader, Limits
from fetcher.net.resolver import StaticResolver
from fetcher.outcome import Outcome, TextRecord
from fetcher.reasons import Reason
from fetcher.report import PageFailed, PageRead, Report
from testkit.hostile import nested_landmarks
from testkit.origin import Origin, Reply, html, redirect
from tests.support.fixtures import DownloaderFactory, policy_for

ALLOWED = ("origin.test",)


def page(title: str, *links: str, body: str = "") -> Reply:
    anchors = "".join(f'<li><a href="{link}">{link}</a></li>' for link in links)
    return html(
        f"<html><head><title>{title}</title></head><body><main><h1>{title}</h1>"
        f"<p>{body or 'Text of ' + title}.</p><ul>{anchors}</ul></main></body></html>"
    )


def read_urls(report: Report) -> list[tuple[str, int]]:
    return [(p.requested_url, p.depth) for p in report.pages]


async def test_crawl_is_breadth_first_up_to_two_hops_and_six_pages(
    origin: Origin, crawler: Crawler
) -> None:
    origin.routes["/"] = page("Start", "/a", "/b", "/c")
    origin.routes["/a"] = page("A", "/a1", "/a2")
    origin.routes["/b"] = page("B", "/b1")
    origin.routes["/c"] = page("C")
    origin.routes["/a1"] = page("A1", "/a1x")
    origin.routes["/a2"] = page("A2")
    origin.routes["/b1"] = page("B1")
    report = await crawler(origin.url("/"), allowed_hosts=ALLOWED)
    assert read_urls(report) == [
        (origin.url("/"), 0),
        (origin.url("/a"), 1),
        (origin.url("/b"), 1),
        (origin.url("/c"), 1),
        (origin.url("/a1"), 2),
        (origin.url("/a2"), 2),
    ]
    assert report.failures == ()
    first = report.pages[0]
    assert first.title == "Start"
    assert "Text of Start." in first.text
    assert first.status == 200
    assert first.bytes > 0
    assert {r.target for r in origin.requests} == {"/", "/a", "/b", "/c", "/a1", "/a2"}


async def test_third_hop_is_never_read(origin: Origin, crawler: Crawler) -> None:
    origin.routes["/"] = page("Start", "/a")
    origin.routes["/a"] = page("A", "/b")
    origin.routes["/b"] = page("B", "/c")
    origin.routes["/c"] = page("C")
    report = await crawler(origin.url("/"), allowed_hosts=ALLOWED)
    assert [depth for _, depth in read_urls(report)] == [0, 1, 2]
    assert "/c" not in {r.target for r in origin.requests}


async def test_smaller_page_limit_is_respected(origin: Origin, crawler: Crawler) -> None:
    origin.routes["/"] = page("Start", "/a", "/b")
    origin.routes["/a"] = page("A")
    origin.routes["/b"] = page("B")
    report = await crawler(origin.url("/"), allowed_hosts=ALLOWED, page_limit=2)
    assert len(report.pages) == 2
    one = await crawler(origin.url("/"), allowed_hosts=ALLOWED, page_limit=1)
    assert read_urls(one) == [(origin.url("/"), 0)]


async def test_links_to_other_sites_are_not_followed(origin: Origin, crawler: Crawler) -> None:
    other = origin.url("/x", host="other.test")
    origin.routes["/"] = page("Start", other, "/a", origin.url("/d", host="docs.origin.test"))
    origin.routes["/a"] = page("A")
    origin.routes["/d"] = page("Docs")
    origin.routes["/x"] = page("Other")
    report = await crawler(origin.url("/"), allowed_hosts=ALLOWED)
    assert [url for url, _ in read_urls(report)] == [
        origin.url("/"),
        origin.url("/a"),
        origin.url("/d", host="docs.origin.test"),
    ]


async def test_redirect_may_leave_the_site_but_links_stay_on_the_start_site(
    origin: Origin, crawler: Crawler
) -> None:
    origin.routes["/"] = page("Start", "/go")
    origin.routes["/go"] = redirect(origin.url("/landing", host="other.test"))
    origin.routes["/landing"] = page(
        "Landing", origin.url("/deeper", host="other.test"), origin.url("/back")
    )
    origin.routes["/back"] = page("Back")
    origin.routes["/deeper"] = page("Deeper")
    report = await crawler(origin.url("/"), allowed_hosts=ALLOWED)
    landing = report.pages[1]
    assert landing.requested_url == origin.url("/go")
    assert landing.final_url == origin.url("/landing", host="other.test")
    assert [p.title for p in report.pages] == ["Start", "Landing", "Back"]
    assert "/deeper" not in {r.target for r in origin.requests}


async def test_the_same_address_is_never_read_twice(origin: Origin, crawler: Crawler) -> None:
    origin.routes["/"] = page(
        "Start", "/a", "/a#part", origin.url("/a", host="ORIGIN.test"), "/", "/r"
    )
    origin.routes["/a"] = page("A", "/", "/a")
    origin.routes["/r"] = redirect("/a")
    report = await crawler(origin.url("/"), allowed_hosts=ALLOWED)
    targets = [r.target for r in origin.requests]
    assert targets.count("/") == 1
    assert targets.count("/a") == 2  # once as a link, once as the end of /r's redirect
    # The redirect's landing page was already read: its text is not repeated.
    assert [p.title for p in report.pages] == ["Start", "A"]


async def test_failed_pages_get_one_line_each_and_the_rest_is_read(
    origin: Origin, crawler: Crawler
) -> None:
    origin.routes["/"] = page("Start", "/missing", "/zip", "/ok")
    origin.routes["/zip"] = Reply(headers=(("Content-Type", "application/zip"),), body=b"PK")
    origin.routes["/ok"] = page("Fine")
    report = await crawler(origin.url("/"), allowed_hosts=ALLOWED)
    assert [p.title for p in report.pages] == ["Start", "Fine"]
    assert [(f.url, f.reason, f.depth) for f in report.failures] == [
        (origin.url("/missing"), Reason.HTTP_STATUS, 1),
        (origin.url("/zip"), Reason.CONTENT_TYPE, 1),
    ]
    assert not report.first_page_failed


async def test_first_page_failure_is_reported_plainly_with_nothing_else(
    origin: Origin, crawler: Crawler
) -> None:
    origin.routes["/"] = html("gone", status=500)
    report = await crawler(origin.url("/"), allowed_hosts=ALLOWED)
    assert report.first_page_failed
    assert report.pages == ()
    assert [(f.url, f.reason, f.depth) for f in report.failures] == [
        (origin.url("/"), Reason.HTTP_STATUS, 0)
    ]


async def test_start_host_outside_the_allowed_hosts_is_refused(
    origin: Origin, crawler: Crawler
) -> None:
    report = await crawler(origin.url("/"), allowed_hosts=("other.test",))
    assert report.failures[0].reason is Reason.NOT_IN_ANSWER
    assert origin.requests == []


async def test_slow_page_is_reported_as_timeout_at_the_deadline(
    origin: Origin, make_downloader: DownloaderFactory, render_pool: WorkerPool
) -> None:
    origin.routes["/"] = page("Start", "/slow", "/quick")
    origin.routes["/slow"] = Reply(body=b"<p>late</p>", delay=30)
    origin.routes["/quick"] = page("Quick", "/never")
    origin.routes["/never"] = page("Never")
    async with make_downloader(limits=Limits(page_timeout=20.0)) as downloader:
        read = Crawler(downloader=downloader, pool=render_pool)
        report = await read(origin.url("/"), allowed_hosts=ALLOWED, deadline=5.0)
    assert [p.title for p in report.pages] == ["Start", "Quick"]
    assert [(f.url, f.reason) for f in report.failures] == [(origin.url("/slow"), Reason.TIMEOUT)]
    assert report.elapsed_ms < 20_000  # the crawl's deadline ended it, not the page's limit


async def test_report_text_is_cut_to_the_report_limit(origin: Origin, crawler: Crawler) -> None:
    long = " ".join(["word"] * 4000)  # 20k characters: cut to 12,000 per page
    origin.routes["/"] = page("Start", "/a", "/b", "/c", body=long)
    for name in ("a", "b", "c"):
        origin.routes[f"/{name}"] = page(name, body=long)
    report = await crawler(origin.url("/"), allowed_hosts=ALLOWED)
    assert sum(len(p.text) for p in report.pages) <= REPORT_TEXT_LIMIT
    assert all(len(p.text) <= 12_000 for p in report.pages)
    assert len(report.pages[0].text) > 11_000


async def test_each_page_is_announced_as_it_finishes(origin: Origin, crawler: Crawler) -> None:
    origin.routes["/"] = page("Start", "/a", "/missing")
    origin.routes["/a"] = page("A")
    events: list[PageRead | PageFailed] = []
    report = await crawler(origin.url("/"), allowed_hosts=ALLOWED, on_page=events.append)
    assert len(events) == 3
    assert {type(e) for e in events} == {PageRead, PageFailed}
    assert {e.depth for e in events} == {0, 1}
    assert len(report.pages) + len(report.failures) == 3


class ExplodingDownloader(Downloader):
    """A downloader with a bug on one address (a seam we own)."""

    async def download(self, url: str, **kwargs: Any) -> Outcome:
        if url.endswith("/bug"):
            raise RuntimeError("a bug")
        return await super().download(url, **kwargs)


async def test_a_bug_on_one_page_is_reported_as_a_bug_and_the_others_are_read(
    origin: Origin,
    resolver: StaticResolver,
    client_ssl_context: ssl.SSLContext,
    render_pool: WorkerPool,
    caplog: pytest.LogCaptureFixture,
) -> None:
    origin.routes["/"] = page("Start", "/bug", "/fine")
    origin.routes["/fine"] = page("Fine")
    async with ExplodingDownloader(
        policy=policy_for(origin), resolver=resolver, ssl_context=client_ssl_context
    ) as downloader:
        read = Crawler(downloader=downloader, pool=render_pool)
        report = await read(origin.url("/"), allowed_hosts=ALLOWED)
    assert [p.title for p in report.pages] == ["Start", "Fine"]
    assert [(f.url, f.reason) for f in report.failures] == [(origin.url("/bug"), Reason.INTERNAL)]
    assert report.internal_errors == 1
    bugs = [record for record in caplog.records if record.exc_info]
    assert len(bugs) == 1
    assert "RuntimeError: a bug" in caplog.text


async def test_a_redirect_to_a_page_already_read_is_not_a_timeout_at_the_deadline(
    origin: Origin, make_downloader: DownloaderFactory, render_pool: WorkerPool
) -> None:
    """Issue 15 item 1: /r lands on / (read already); the deadline then fires for /slow."""
    origin.routes["/"] = page("Start", "/r", "/slow")
    origin.routes["/r"] = redirect("/")
    origin.routes["/slow"] = Reply(body=b"<p>late</p>", delay=30)
    async with make_downloader(limits=Limits(page_timeout=20.0)) as downloader:
        read = Crawler(downloader=downloader, pool=render_pool)
        report = await read(origin.url("/"), allowed_hosts=ALLOWED, deadline=5.0)
    assert [p.title for p in report.pages] == ["Start"]
    assert [(f.url, f.reason) for f in report.failures] == [(origin.url("/slow"), Reason.TIMEOUT)]


async def test_a_failure_carries_a_shortened_address(origin: Origin, crawler: Crawler) -> None:
    """Issue 15 item D: a failed page's address and detail stay small."""
    long_target = "/next?" + "q" * 10_000
    origin.routes["/"] = page("Start", "/go")
    origin.routes["/go"] = redirect(long_target)
    report = await crawler(origin.url("/"), allowed_hosts=ALLOWED)
    (failure,) = report.failures
    assert failure.reason is Reason.MALFORMED
    assert len(failure.url) <= 2048
    assert failure.url.startswith(origin.url("/next?qqq"))


async def test_a_megabyte_long_link_is_skipped_and_the_page_is_read(
    origin: Origin, crawler: Crawler
) -> None:
    """Issue 15 item D: links are capped where they are found."""
    origin.routes["/"] = page("Start", "/a", body=f'<a href="/{"x" * 30_000}">long</a>')
    origin.routes["/a"] = page("A")
    report = await crawler(origin.url("/"), allowed_hosts=ALLOWED)
    assert [p.title for p in report.pages] == ["Start", "A"]
    assert report.failures == ()


async def test_a_page_its_renderer_stopped_fails_and_gets_a_text_record(
    origin: Origin, make_downloader: DownloaderFactory
) -> None:
    # A page that takes about a second of CPU to render, and a pool that gives it a
    # millisecond: it fails at the wall limit, and the crawl tells its observer which
    # reader failed and why.
    origin.routes["/"] = Reply(headers=(("Content-Type", "text/html"),), body=nested_landmarks())
    records: list[TextRecord] = []
    pool = WorkerPool(workers=1, limits=WorkLimits(wall_seconds=0.001), preload=WORKER_PRELOAD)
    try:
        async with make_downloader(limits=Limits(max_bytes=3 * 1024 * 1024)) as downloader:
            crawl = Crawler(downloader=downloader, pool=pool, observer=records.append)
            report = await crawl(origin.url("/"), allowed_hosts=ALLOWED, request_id="r-2")
    finally:
        await pool.aclose()
    (failure,) = report.failures
    assert (failure.reason, failure.detail.startswith("reading the page stopped")) == (
        Reason.TIMEOUT,
        True,
    )
    assert [(r.url, r.reader, r.reason, r.request_id) for r in records] == [
        (origin.url("/"), "html", Reason.TIMEOUT, "r-2")
    ]


class LyingPool(WorkerPool):
    """A render pool whose worker was subverted by the page it read (a seam we own): it
    answers the page's text with links to another site."""

    def __init__(self, links: list[str]) -> None:
        super().__init__(workers=1)
        self.links = links

    async def run(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        return {"title": "Start", "text": "x", "links": self.links}


async def test_links_a_worker_made_up_are_never_followed(
    origin: Origin, downloader: Downloader, caplog: pytest.LogCaptureFixture
) -> None:
    origin.routes["/"] = page("Start")
    origin.routes["/secret"] = page("Secret")
    pool = LyingPool([origin.url("/secret", host="other.test")])
    try:
        report = await Crawler(downloader=downloader, pool=pool)(
            origin.url("/"), allowed_hosts=ALLOWED
        )
    finally:
        await pool.aclose()
    assert [(f.url, f.reason) for f in report.failures] == [(origin.url("/"), Reason.INTERNAL)]
    assert report.internal_errors == 1
    assert [r.target for r in origin.requests] == ["/"]
    assert "links are not the page's same-site links" in caplog.text
