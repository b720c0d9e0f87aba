"""The whole fetcher behind gRPC: real server on a Unix socket, real crawl, real HTTPS origin.

Loopback is reached only through the explicit test policy (``tests/support/fixtures.py``);
the static resolver maps the origin's names to 127.0.0.1 and a few extra names to
addresses each rule must refuse.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from fetcher.client import FetcherClient
from fetcher.isolation.workers import WorkerPool
from fetcher.metrics import exposition
from fetcher.net.download import Limits
from fetcher.net.policy import Policy
from fetcher.reasons import Reason
from fetcher.report import PageFailed, PageRead, Report
from fetcher.server import SERVICE_NAME, FetcherServer
from fetcher.v1 import fetcher_pb2, fetcher_pb2_grpc
from testkit import tasks
from testkit.fetcher import running_fetcher, unix_settings
from testkit.hostile import nested_landmarks
from testkit.origin import Origin, Reply, html, redirect
from tests.fetcher.pdf.maker import make_pdf
from tests.support.fetcher_service import FetcherService
from tests.support.fetcher_service import running_fetcher as running_service

#: A PDF whose only page is a drawing: no text layer.
SCAN = make_pdf([[]])


@dataclasses.dataclass
class Fetcher:
    """A running fetcher service wired like production, and a client with the production
    deadline."""

    service: FetcherService
    client: FetcherClient

    @property
    def server(self) -> FetcherServer:
        return self.service.server

    def records(self) -> list[dict[str, object]]:
        return self.service.records()


@contextlib.asynccontextmanager
async def wired_fetcher(
    sock_dir: Path,
    policy: Policy,
    ssl_context: ssl.SSLContext,
    pool: WorkerPool,
    *,
    max_bytes: int = 64 * 1024,
) -> AsyncIterator[Fetcher]:
    """The service as ``fetcher serve`` builds it, with test parts at the seams we own."""
    async with (
        running_service(
            sock_dir,
            policy=policy,
            ssl_context=ssl_context,
            limits=Limits(page_timeout=2.0, max_bytes=max_bytes),
            pool=pool,
        ) as service,
        service.client() as client,
    ):
        yield Fetcher(service, client)


@pytest.fixture
async def fetcher(
    sock_dir: Path,
    test_policy: Policy,
    client_ssl_context: ssl.SSLContext,
    render_pool: WorkerPool,
) -> AsyncIterator[Fetcher]:
    async with wired_fetcher(sock_dir, test_policy, client_ssl_context, render_pool) as running:
        yield running


def page(title: str, *links: str, body: str = "") -> Reply:
    """An HTML page with a title, a paragraph and a list of links."""
    anchors = "".join(f'<li><a href="{link}">{link}</a></li>' for link in links)
    return html(
        f"<html><head><title>{title}</title></head><body><main><h1>{title}</h1>"
        f"<p>{body or 'Text of ' + title}.</p><ul>{anchors}</ul></main></body></html>"
    )


def site(origin: Origin) -> None:
    """A small site: a start page linking to two pages, one of which links further."""
    origin.routes["/"] = page("Start", "/a", "/b", body="The start page of a small test site")
    origin.routes["/a"] = page("Page A", "/c")
    origin.routes["/b"] = page("Page B")
    origin.routes["/c"] = page("Page C")


async def test_read_happy_path_returns_the_start_page_as_text(
    origin: Origin, fetcher: Fetcher
) -> None:
    site(origin)
    report = await fetcher.client.read(
        origin.url("/"), allowed_hosts={"origin.test"}, page_limit=1, request_id="happy-1"
    )
    assert report.failures == ()
    assert report.url == origin.url("/")
    (start,) = report.pages
    assert (start.title, start.status, start.depth) == ("Start", 200, 0)
    assert start.requested_url == start.final_url == origin.url("/")
    assert start.bytes > 0
    assert "start page of a small test site" in start.text
    (record,) = fetcher.records()
    assert (record["outcome"], record["status"], record["ip"]) == ("ok", 200, "127.0.0.1")
    assert record["request_id"] == "happy-1"


async def test_read_happy_path_returns_the_pages_of_a_local_https_site(
    origin: Origin, fetcher: Fetcher
) -> None:
    site(origin)
    report = await fetcher.client.read(
        origin.url("/"), allowed_hosts={"origin.test"}, page_limit=6, request_id="happy-1"
    )
    assert report.failures == ()
    titles = [page.title for page in report.pages]
    assert titles[0] == "Start"
    assert set(titles) == {"Start", "Page A", "Page B", "Page C"}
    start = report.pages[0]
    assert start.status == 200
    assert start.bytes > 0
    assert start.depth == 0
    assert "start page of a small test site" in start.text
    assert {page.depth for page in report.pages} == {0, 1, 2}
    records = fetcher.records()
    assert len(records) == 4
    assert {record["request_id"] for record in records} == {"happy-1"}


async def test_stream_sends_a_read_event_per_page_then_the_report(
    origin: Origin, fetcher: Fetcher
) -> None:
    site(origin)
    items = [
        item
        async for item in fetcher.client.read_stream(
            origin.url("/"), allowed_hosts={"origin.test"}, page_limit=3
        )
    ]
    *pages, report = items
    assert isinstance(report, Report)
    assert len(pages) == 3
    assert all(isinstance(page, PageRead) for page in pages)
    assert {page.title for page in pages if isinstance(page, PageRead)} == {
        page.title for page in report.pages
    }


async def test_page_limit_bounds_the_pages_read(origin: Origin, fetcher: Fetcher) -> None:
    site(origin)
    report = await fetcher.client.read(origin.url("/"), allowed_hosts={"origin.test"}, page_limit=2)
    assert len(report.pages) == 2


def _refusal_cases(origin: Origin) -> dict[Reason, str]:
    """One start address per reason the first page can fail with (routes set here too)."""
    origin.routes["/missing"] = Reply(status=404, body=b"gone")
    origin.routes["/image"] = Reply(headers=(("Content-Type", "image/png"),), body=b"\x89PNG")
    origin.routes["/big"] = html("<p>" + "x" * (70 * 1024) + "</p>")
    origin.routes["/scan.pdf"] = Reply(headers=(("Content-Type", "application/pdf"),), body=SCAN)
    for n in range(5):
        origin.routes[f"/loop{n}"] = redirect(f"/loop{n + 1}")
    return {
        Reason.SCHEME: "ftp://origin.test/file",
        Reason.PORT: "https://origin.test:8443/",
        Reason.USERINFO: origin.url("/").replace("https://", "https://user:pw@"),
        Reason.MALFORMED: "https://exa mple.test/",
        Reason.NOT_IN_ANSWER: origin.url("/", host="other.test"),
        Reason.NOT_PUBLIC: f"https://private.test:{origin.port}/",
        Reason.DNS: f"https://nowhere.test:{origin.port}/",
        Reason.CONNECT: "https://origin.test/",  # port 443 on 127.0.0.1: nobody listens
        Reason.TLS: f"https://untrusted.test:{origin.port}/",
        Reason.TOO_LARGE: origin.url("/big"),
        Reason.CONTENT_TYPE: origin.url("/image"),
        Reason.HTTP_STATUS: origin.url("/missing"),
        Reason.REDIRECTS: origin.url("/loop0"),
        Reason.UNREADABLE: origin.url("/scan.pdf"),
    }


@pytest.mark.parametrize(
    "reason",
    [reason for reason in Reason if reason not in (Reason.TIMEOUT, Reason.INTERNAL)],
    ids=[reason.value for reason in Reason if reason not in (Reason.TIMEOUT, Reason.INTERNAL)],
)
async def test_each_refusal_reason_arrives_over_grpc_as_the_enum(
    origin: Origin, fetcher: Fetcher, reason: Reason
) -> None:
    url = _refusal_cases(origin)[reason]
    allowed = {"origin.test", "private.test", "nowhere.test", "untrusted.test", "exa mple.test"}
    report = await fetcher.client.read(url, allowed_hosts=allowed, page_limit=1)
    assert report.first_page_failed
    assert [failure.reason for failure in report.failures] == [reason]
    record = fetcher.records()[-1]
    assert record["reason"] == reason.value


async def test_slow_page_within_a_short_deadline_arrives_as_timeout(
    origin: Origin, fetcher: Fetcher
) -> None:
    origin.routes["/slow"] = Reply(delay=1.2, body=b"late")
    report = await fetcher.client.read(
        origin.url("/slow"), allowed_hosts={"origin.test"}, page_limit=1, deadline=0.6
    )
    assert [failure.reason for failure in report.failures] == [Reason.TIMEOUT]


async def test_cancelled_call_stops_the_download(origin: Origin, fetcher: Fetcher) -> None:
    sent = asyncio.Event()
    stopped_early = asyncio.Event()

    async def trickle() -> AsyncIterator[bytes]:
        try:
            for _ in range(200):  # 4 s of one byte every 20 ms, if nobody stops it
                yield b"x"
                sent.set()
                await asyncio.sleep(0.02)
        finally:
            stopped_early.set()

    origin.routes["/trickle"] = Reply(headers=(("Content-Type", "text/plain"),), body=trickle)
    call = asyncio.create_task(
        fetcher.client.read(origin.url("/trickle"), allowed_hosts={"origin.test"}, page_limit=1)
    )
    await asyncio.wait_for(sent.wait(), 2)
    call.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await call
    # The origin notices the dropped connection long before its 4 s body would end,
    # and well before the page's own 2 s limit.
    await asyncio.wait_for(stopped_early.wait(), 1.0)
    for _ in range(100):
        if fetcher.server.servicer.in_flight == 0:
            break
        await asyncio.sleep(0.01)
    assert fetcher.server.servicer.in_flight == 0


async def test_metrics_count_the_reads_hops_and_calls(origin: Origin, fetcher: Fetcher) -> None:
    site(origin)
    origin.routes["/old"] = redirect("/")
    await fetcher.client.read(origin.url("/old"), allowed_hosts={"origin.test"}, page_limit=1)
    await fetcher.client.read(
        origin.url("/", host="other.test"), allowed_hosts={"origin.test"}, page_limit=1
    )
    body, _ = exposition(fetcher.server.metrics.registry)
    values = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    }
    assert values[("tigress_fetcher_fetches_total", (("outcome", "ok"), ("reason", "none")))] == 1
    assert values[("tigress_fetcher_redirects_total", ())] == 1
    refused = (("outcome", "refused"), ("reason", "not_in_answer"))
    assert values[("tigress_fetcher_fetches_total", refused)] == 1
    assert values[("tigress_fetcher_pages_per_read_count", ())] == 2
    assert values[("tigress_fetcher_pages_per_read_sum", ())] == 1
    assert values[("tigress_fetcher_grpc_handled_total", (("code", "OK"), ("method", "Read")))] == 2
    assert values[("tigress_fetcher_reads_in_flight", ())] == 0


async def test_failed_link_gets_its_own_line_and_the_rest_is_read(
    origin: Origin, fetcher: Fetcher
) -> None:
    origin.routes["/"] = page("Start", "/good", "/broken")
    origin.routes["/good"] = page("Good")
    origin.routes["/broken"] = Reply(status=500, body=b"oops")
    report = await fetcher.client.read(origin.url("/"), allowed_hosts={"origin.test"}, page_limit=6)
    assert [page.title for page in report.pages] == ["Start", "Good"]
    assert report.failures == (
        PageFailed(
            url=origin.url("/broken"),
            reason=Reason.HTTP_STATUS,
            detail=report.failures[0].detail,
            depth=1,
        ),
    )


async def test_refusal_details_never_carry_resolved_addresses(
    origin: Origin, fetcher: Fetcher
) -> None:
    """Issue 15 item C: private.test resolves to 10.0.0.7; only the fetch log may say so."""
    origin.routes["/go"] = redirect(f"https://private.test:{origin.port}/")
    direct = await fetcher.client.read(
        f"https://private.test:{origin.port}/", allowed_hosts={"private.test"}, page_limit=1
    )
    redirected = await fetcher.client.read(
        origin.url("/go"), allowed_hosts={"origin.test"}, page_limit=1
    )
    for report in (direct, redirected):
        (failure,) = report.failures
        assert failure.reason is Reason.NOT_PUBLIC
        assert "private.test" in failure.detail
        assert "10.0.0.7" not in failure.detail
    refused = [r for r in fetcher.records() if r["reason"] == "not_public"]
    assert [r["ip"] for r in refused] == ["10.0.0.7", "10.0.0.7"]


async def test_a_megabyte_long_link_does_not_fail_the_read(
    origin: Origin,
    sock_dir: Path,
    test_policy: Policy,
    client_ssl_context: ssl.SSLContext,
    render_pool: WorkerPool,
) -> None:
    """Issue 15 item D: the start page is read and the report fits in one message."""
    long_link = "/" + "x" * 1_200_000
    origin.routes["/"] = html(
        f'<title>Start</title><main><p>Text.</p><a href="{long_link}">long</a>'
        '<a href="/a">a</a></main>'
    )
    origin.routes["/a"] = page("A")
    async with wired_fetcher(
        sock_dir, test_policy, client_ssl_context, render_pool, max_bytes=2 * 1024 * 1024
    ) as running:
        report = await running.client.read(
            origin.url("/"), allowed_hosts={"origin.test"}, page_limit=6
        )
        streamed = [
            item
            async for item in running.client.read_stream(
                origin.url("/"), allowed_hosts={"origin.test"}, page_limit=6
            )
        ]
    assert [p.title for p in report.pages] == ["Start", "A"]
    assert isinstance(streamed[-1], Report)
    assert [p.title for p in streamed[-1].pages] == ["Start", "A"]


async def test_a_read_beside_five_hostile_ones_succeeds(
    origin: Origin,
    sock_dir: Path,
    test_policy: Policy,
    client_ssl_context: ssl.SSLContext,
    render_pool: WorkerPool,
) -> None:
    """Issue 15 item A: hostile pages are read (or cut) within their limits in the render
    workers, and a legitimate read beside five of them still gets its page."""
    origin.routes["/hostile"] = Reply(
        headers=(("Content-Type", "text/html"),), body=nested_landmarks()
    )
    site(origin)
    async with wired_fetcher(
        sock_dir, test_policy, client_ssl_context, render_pool, max_bytes=3 * 1024 * 1024
    ) as running:
        hostile = [
            asyncio.create_task(
                running.client.read(
                    origin.url("/hostile"), allowed_hosts={"origin.test"}, page_limit=1
                )
            )
            for _ in range(5)
        ]
        while render_pool.busy == 0:
            await asyncio.sleep(0.01)
        legitimate = await running.client.read(
            origin.url("/"), allowed_hosts={"origin.test"}, page_limit=1
        )
        reports = await asyncio.gather(*hostile)
    assert [p.title for p in legitimate.pages] == ["Start"]
    for report in reports:
        # Read within the limits, or cut at one of them: never a failed call.
        read = [p.title for p in report.pages] == ["Hostile"]
        cut = [f.reason for f in report.failures] in ([Reason.TIMEOUT], [Reason.TOO_LARGE])
        assert read or cut, report


async def test_health_shows_a_saturated_render_pool(
    sock_dir: Path, render_pool: WorkerPool, tmp_path: Path
) -> None:
    """The service's health name is NOT_SERVING while every worker is busy and as many
    pages again wait; the overall name stays SERVING."""

    async def never(*args: object, **kwargs: object) -> Report:
        raise AssertionError("no read in this test")

    settings = unix_settings(sock_dir)
    async with (
        running_fetcher(settings, never, pool=render_pool),
        FetcherClient(settings.listen[0].target) as client,
    ):
        busy = [
            asyncio.create_task(render_pool.run(tasks.tick, str(tmp_path / f"t{n}"), 3.0))
            for n in range(4)
        ]
        while await client.healthy(service=SERVICE_NAME):
            await asyncio.sleep(0.05)
        assert await client.healthy()
        await asyncio.gather(*busy)
        while not await client.healthy(service=SERVICE_NAME):
            await asyncio.sleep(0.05)


# A gateway that was taken over asks for anything, in raw gRPC: every rule still holds.
HOSTILE_HOSTS = [
    "*",
    "*.test",
    ".test",
    "test",
    "127.0.0.1",
    "0x7f.1",
    "2130706433",
    "localhost",
    "::1",
    "[::1]",
    "[::ffff:127.0.0.1]",
    "10.0.0.7",
    "private.test",
    "origin.test",
    "169.254.169.254",
]
HOSTILE_ASKS = [
    ("https://127.0.0.1/", Reason.NOT_PUBLIC),
    ("https://0x7f.1/", Reason.NOT_PUBLIC),
    ("https://2130706433/", Reason.NOT_PUBLIC),
    ("https://[::1]/", Reason.NOT_PUBLIC),
    ("https://[::ffff:127.0.0.1]/", Reason.NOT_PUBLIC),
    ("https://169.254.169.254/latest/meta-data/", Reason.NOT_PUBLIC),
    ("https://origin.test/", Reason.NOT_PUBLIC),
    ("https://private.test/", Reason.NOT_PUBLIC),
    ("https://evil.test/", Reason.NOT_IN_ANSWER),
    ("https://a.origin.test/", Reason.NOT_IN_ANSWER),
    ("http://origin.test:8080/", Reason.PORT),
    ("https://origin.test:22/", Reason.PORT),
    ("file:///etc/passwd", Reason.SCHEME),
    ("gopher://127.0.0.1:6379/_INFO", Reason.SCHEME),
    ("https://user:pw@origin.test/", Reason.USERINFO),
    ("https://origin.test\\@127.0.0.1/", Reason.MALFORMED),
    ("", Reason.MALFORMED),
]


@pytest.mark.parametrize(
    ("url", "reason"), HOSTILE_ASKS, ids=[u or "empty" for u, _ in HOSTILE_ASKS]
)
async def test_a_taken_over_gateway_cannot_loosen_any_rule(
    sock_dir: Path,
    client_ssl_context: ssl.SSLContext,
    render_pool: WorkerPool,
    url: str,
    reason: Reason,
) -> None:
    """Production policy; the gateway's allowed hosts are wildcards, IP literals and local
    names, and its page limit the largest the wire allows: the fetcher refuses anyway."""
    async with wired_fetcher(sock_dir, Policy(), client_ssl_context, render_pool) as running:
        target = running.server.settings.listen[0].target
        async with grpc.aio.insecure_channel(target) as channel:
            stub = fetcher_pb2_grpc.FetcherServiceStub(channel)
            request = fetcher_pb2.ReadRequest(
                url=url, allowed_hosts=HOSTILE_HOSTS, page_limit=2**32 - 1, request_id="x"
            )
            response = await stub.Read(request, timeout=10)
    failures = [f.reason for f in response.report.failures]
    assert failures == [fetcher_pb2.Reason.Value(f"REASON_{reason.name}")]
    assert list(response.report.pages) == []
    assert [r["reason"] for r in running.records()] == [reason.value]
    assert all(r["outcome"] == "refused" for r in running.records())


async def test_a_request_over_the_message_limit_is_refused_before_it_is_read(
    sock_dir: Path, client_ssl_context: ssl.SSLContext, render_pool: WorkerPool
) -> None:
    """gRPC's own receive cap (1 MiB, ``max_message_bytes``) refuses a huge request."""
    async with wired_fetcher(sock_dir, Policy(), client_ssl_context, render_pool) as running:
        target = running.server.settings.listen[0].target
        options = [("grpc.max_send_message_length", 8 * 1024 * 1024)]
        async with grpc.aio.insecure_channel(target, options=options) as channel:
            stub = fetcher_pb2_grpc.FetcherServiceStub(channel)
            request = fetcher_pb2.ReadRequest(
                url="https://origin.test/",
                allowed_hosts=[f"{n}{'a' * 240}.test" for n in range(5000)],
                page_limit=1,
            )
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.Read(request, timeout=10)
    assert caught.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert running.records() == []
