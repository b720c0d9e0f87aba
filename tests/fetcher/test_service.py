"""The gRPC service on a real ``grpc.aio`` server over a temporary Unix socket.

The reader (the crawl, in production) is replaced by a scripted one: it is the seam the
servicer owns, and it lets each test hold a read open, fail it, or watch it be cancelled.
Reads through the real crawl and a real HTTPS origin are in ``test_service_crawl.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from pathlib import Path
from typing import Any

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from fetcher.client import (
    FetcherBusy,
    FetcherClient,
    FetcherFailed,
    FetcherRejected,
    FetcherTimeout,
    FetcherUnavailable,
)
from fetcher.metrics import exposition
from fetcher.reasons import Reason
from fetcher.report import PageFailed, PageRead, Report
from fetcher.server import FetcherServer
from fetcher.service import OnPage
from fetcher.v1 import fetcher_pb2, fetcher_pb2_grpc
from testkit.fetcher import running_fetcher, unix_settings

START = "https://origin.test/"
PAGE = PageRead(
    requested_url=START,
    final_url="https://origin.test/home",
    title="Home",
    text="Welcome home.",
    status=200,
    bytes=1234,
    elapsed_ms=12,
    depth=0,
)


def report_of(*items: PageRead | PageFailed, url: str = START) -> Report:
    return Report(
        url=url,
        pages=tuple(item for item in items if isinstance(item, PageRead)),
        failures=tuple(item for item in items if isinstance(item, PageFailed)),
        elapsed_ms=20,
    )


class ScriptedReader:
    """Records each call and runs ``script`` (default: one page read at once)."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.cancelled = asyncio.Event()
        self.script: Callable[[OnPage | None], Awaitable[Report]] = self._one_page

    async def _one_page(self, on_page: OnPage | None) -> Report:
        if on_page is not None:
            on_page(PAGE)
        return report_of(PAGE)

    async def held(self, on_page: OnPage | None) -> Report:
        """Holds the read open until ``release`` is set (or the read is cancelled)."""
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return report_of(PAGE)

    async def __call__(
        self,
        url: str,
        *,
        allowed_hosts: Collection[str],
        page_limit: int,
        deadline: float,
        request_id: str,
        on_page: OnPage | None = None,
    ) -> Report:
        self.calls.append(
            {
                "url": url,
                "allowed_hosts": set(allowed_hosts),
                "page_limit": page_limit,
                "deadline": deadline,
                "request_id": request_id,
            }
        )
        self.started.set()
        return await self.script(on_page)


@contextlib.asynccontextmanager
async def serving(
    sock_dir: Path, reader: ScriptedReader, **settings: Any
) -> AsyncIterator[tuple[FetcherServer, FetcherClient]]:
    """A started server on ``sock_dir/f.sock`` and a client of it; both stopped after."""
    async with running_fetcher(unix_settings(sock_dir, **settings), reader) as server:
        client = FetcherClient(server.settings.listen[0].target, timeout=5.0)
        try:
            yield server, client
        finally:
            await client.close()


@pytest.fixture
def reader() -> ScriptedReader:
    return ScriptedReader()


async def eventually(condition: Callable[[], bool], within: float = 2.0) -> None:
    """Waits until ``condition()`` holds (state another task changes), failing after ``within``."""
    for _ in range(int(within / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition never held")


def handled(server: FetcherServer, method: str, code: str) -> float:
    """The value of the gRPC handled counter for ``method`` and ``code``."""
    body, _ = exposition(server.metrics.registry)
    for family in text_string_to_metric_families(body.decode()):
        if family.name == "tigress_fetcher_grpc_handled":
            for sample in family.samples:
                if sample.name.endswith("_total") and sample.labels == {
                    "method": method,
                    "code": code,
                }:
                    return sample.value
    return 0.0


async def test_read_returns_the_readers_report_as_plain_values(
    sock_dir: Path, reader: ScriptedReader
) -> None:
    failure = PageFailed(
        url="https://origin.test/gone", reason=Reason.HTTP_STATUS, detail="404", depth=1
    )
    reader.script = lambda _on_page: _return(report_of(PAGE, failure))
    async with serving(sock_dir, reader) as (server, client):
        report = await client.read(
            START, allowed_hosts={"origin.test", "other.test"}, page_limit=3, request_id="req-1"
        )
    assert report == report_of(PAGE, failure)
    assert reader.calls[0]["url"] == START
    assert reader.calls[0]["allowed_hosts"] == {"origin.test", "other.test"}
    assert reader.calls[0]["page_limit"] == 3
    assert reader.calls[0]["request_id"] == "req-1"
    await eventually(lambda: handled(server, "Read", "OK") == 1)


async def _return(report: Report) -> Report:
    return report


@pytest.mark.parametrize("reason", list(Reason), ids=[reason.value for reason in Reason])
async def test_each_refusal_reason_arrives_as_the_same_enum_word(
    sock_dir: Path, reader: ScriptedReader, reason: Reason
) -> None:
    refused = PageFailed(url=START, reason=reason, detail="refused", depth=0)
    reader.script = lambda _on_page: _return(report_of(refused))
    async with serving(sock_dir, reader) as (_server, client):
        report = await client.read(START, allowed_hosts={"origin.test"}, page_limit=1)
    assert report.first_page_failed
    assert report.failures[0].reason is reason


async def test_page_limit_above_six_is_lowered_to_six(
    sock_dir: Path, reader: ScriptedReader
) -> None:
    async with serving(sock_dir, reader) as (_server, client):
        await client.read(START, allowed_hosts={"origin.test"}, page_limit=12)
    assert reader.calls[0]["page_limit"] == 6


async def test_missing_request_id_is_made_up_by_the_fetcher(
    sock_dir: Path, reader: ScriptedReader
) -> None:
    async with serving(sock_dir, reader) as (_server, client):
        await client.read(START, allowed_hosts={"origin.test"}, page_limit=1)
    assert len(reader.calls[0]["request_id"]) == 16


@pytest.mark.parametrize(
    ("url", "hosts", "page_limit", "request_id"),
    [
        (START, {"origin.test"}, 0, ""),
        ("https://origin.test/" + "a" * 4096, {"origin.test"}, 1, ""),
        (START, {f"h{n}.test" for n in range(1001)}, 1, ""),
        (START, {"a" * 254}, 1, ""),
        (START, {"origin.test"}, 1, "has space"),
        (START, {"origin.test"}, 1, "x" * 65),
    ],
    ids=["page-limit-zero", "url-too-long", "too-many-hosts", "host-too-long", "bad-id", "long-id"],
)
async def test_request_breaking_a_bound_is_rejected_without_reading(
    sock_dir: Path,
    reader: ScriptedReader,
    url: str,
    hosts: set[str],
    page_limit: int,
    request_id: str,
) -> None:
    async with serving(sock_dir, reader) as (server, client):
        with pytest.raises(FetcherRejected) as caught:
            await client.read(
                url, allowed_hosts=hosts, page_limit=page_limit, request_id=request_id
            )
        await eventually(lambda: handled(server, "Read", "INVALID_ARGUMENT") == 1)
    assert caught.value.code == "INVALID_ARGUMENT"
    assert reader.calls == []


async def test_reader_gets_the_callers_time_left_minus_the_margin(
    sock_dir: Path, reader: ScriptedReader
) -> None:
    async with serving(sock_dir, reader, deadline_margin_seconds=0.5) as (_server, client):
        await client.read(START, allowed_hosts={"origin.test"}, page_limit=1, deadline=3.0)
    # gRPC carries the deadline as a rounded-up timeout: allow it a few milliseconds.
    assert 2.0 < reader.calls[0]["deadline"] <= 2.52


async def test_reader_deadline_is_capped_by_the_read_deadline_setting(
    sock_dir: Path, reader: ScriptedReader
) -> None:
    async with serving(sock_dir, reader, read_deadline_seconds=1.0) as (_server, client):
        await client.read(START, allowed_hosts={"origin.test"}, page_limit=1, deadline=20.0)
    assert reader.calls[0]["deadline"] == 1.0


async def test_deadline_exceeded_cancels_the_read(sock_dir: Path, reader: ScriptedReader) -> None:
    reader.script = reader.held
    async with serving(sock_dir, reader) as (server, client):
        with pytest.raises(FetcherTimeout) as caught:
            await client.read(START, allowed_hosts={"origin.test"}, page_limit=1, deadline=0.3)
        await asyncio.wait_for(reader.cancelled.wait(), 2)
        assert server.servicer.in_flight == 0
    assert caught.value.code == "DEADLINE_EXCEEDED"


async def test_deadline_shorter_than_the_margin_is_refused_at_once(
    sock_dir: Path, reader: ScriptedReader
) -> None:
    async with serving(sock_dir, reader, deadline_margin_seconds=1.0) as (_server, client):
        with pytest.raises(FetcherTimeout):
            await client.read(START, allowed_hosts={"origin.test"}, page_limit=1, deadline=0.5)
    assert reader.calls == []


async def test_cancelled_call_cancels_the_read(sock_dir: Path, reader: ScriptedReader) -> None:
    reader.script = reader.held
    async with serving(sock_dir, reader) as (server, client):
        call = asyncio.create_task(client.read(START, allowed_hosts={"origin.test"}, page_limit=1))
        await asyncio.wait_for(reader.started.wait(), 2)
        call.cancel()
        await asyncio.wait_for(reader.cancelled.wait(), 2)
        with pytest.raises(asyncio.CancelledError):
            await call
        await eventually(lambda: handled(server, "Read", "CANCELLED") == 1)
        assert server.servicer.in_flight == 0


async def test_reads_past_the_bound_get_resource_exhausted_at_once(
    sock_dir: Path, reader: ScriptedReader
) -> None:
    reader.script = reader.held
    async with serving(sock_dir, reader, max_concurrent_reads=2) as (server, client):
        held = [
            asyncio.create_task(client.read(START, allowed_hosts={"origin.test"}, page_limit=1))
            for _ in range(2)
        ]
        await eventually(lambda: server.servicer.in_flight == 2)
        loop = asyncio.get_running_loop()
        began = loop.time()
        with pytest.raises(FetcherBusy) as caught:
            await client.read(START, allowed_hosts={"origin.test"}, page_limit=1)
        assert loop.time() - began < 1.0
        assert caught.value.code == "RESOURCE_EXHAUSTED"
        reader.release.set()
        reports = await asyncio.gather(*held)
        assert all(report.pages == (PAGE,) for report in reports)
        # The bound counts reads in flight, not reads ever made.
        await client.read(START, allowed_hosts={"origin.test"}, page_limit=1)
        await eventually(lambda: handled(server, "Read", "RESOURCE_EXHAUSTED") == 1)


async def test_reader_error_is_internal_with_a_fixed_message(
    sock_dir: Path, reader: ScriptedReader
) -> None:
    async def broken(_on_page: OnPage | None) -> Report:
        raise RuntimeError("secret internals")

    reader.script = broken
    async with serving(sock_dir, reader) as (_server, client):
        with pytest.raises(FetcherFailed) as caught:
            await client.read(START, allowed_hosts={"origin.test"}, page_limit=1)
    assert caught.value.code == "INTERNAL"
    assert "secret" not in str(caught.value)


async def test_report_larger_than_the_message_limit_is_named(
    sock_dir: Path, reader: ScriptedReader
) -> None:
    huge = dataclasses.replace(PAGE, text="x" * 70_000)
    reader.script = lambda _on_page: _return(report_of(huge))
    async with serving(sock_dir, reader, max_message_bytes=64 * 1024) as (_server, client):
        with pytest.raises(FetcherFailed, match="limit"):
            await client.read(START, allowed_hosts={"origin.test"}, page_limit=1)


async def test_stream_sends_each_page_before_the_read_ends(
    sock_dir: Path, reader: ScriptedReader
) -> None:
    second = PageFailed(url="https://origin.test/b", reason=Reason.TIMEOUT, detail="slow", depth=1)

    async def two_pages(on_page: OnPage | None) -> Report:
        assert on_page is not None
        on_page(PAGE)
        await reader.release.wait()
        on_page(second)
        return report_of(PAGE, second)

    reader.script = two_pages
    async with serving(sock_dir, reader) as (server, client):
        stream = client.read_stream(START, allowed_hosts={"origin.test"}, page_limit=2)
        first = await anext(stream)
        assert first == PAGE  # arrived while the read was still held open
        reader.release.set()
        rest = [item async for item in stream]
        await eventually(lambda: handled(server, "ReadStream", "OK") == 1)
    assert rest == [second, report_of(PAGE, second)]


async def test_stream_closed_early_cancels_the_read(sock_dir: Path, reader: ScriptedReader) -> None:
    async def page_then_hold(on_page: OnPage | None) -> Report:
        assert on_page is not None
        on_page(PAGE)
        return await reader.held(on_page)

    reader.script = page_then_hold
    async with serving(sock_dir, reader) as (server, client):
        stream = client.read_stream(START, allowed_hosts={"origin.test"}, page_limit=2)
        assert await anext(stream) == PAGE
        await stream.aclose()
        await asyncio.wait_for(reader.cancelled.wait(), 2)
        await eventually(lambda: server.servicer.in_flight == 0)


async def test_health_is_serving_for_the_server_and_the_service(
    sock_dir: Path, reader: ScriptedReader
) -> None:
    from grpc_health.v1 import health_pb2

    async with serving(sock_dir, reader) as (_server, client):
        assert await client.healthy()
        async with grpc.aio.insecure_channel(client.target) as channel:
            check = channel.unary_unary(
                "/grpc.health.v1.Health/Check",
                request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
                response_deserializer=health_pb2.HealthCheckResponse.FromString,
            )
            answer = await check(
                health_pb2.HealthCheckRequest(service="tigress.fetcher.v1.FetcherService"),
                timeout=2,
            )
    assert answer.status == health_pb2.HealthCheckResponse.SERVING


async def test_shutdown_reports_not_serving_lets_reads_finish_then_stops(
    sock_dir: Path, reader: ScriptedReader
) -> None:
    reader.script = reader.held
    async with serving(sock_dir, reader, shutdown_grace_seconds=5.0) as (server, client):
        in_flight = asyncio.create_task(
            client.read(START, allowed_hosts={"origin.test"}, page_limit=1)
        )
        await asyncio.wait_for(reader.started.wait(), 2)
        stopping = asyncio.create_task(server.stop())
        await eventually(lambda: server.servicer._draining)
        # During the grace period: health says NOT_SERVING, new reads are turned away.
        assert not await client.healthy()
        with pytest.raises(FetcherUnavailable):
            await client.read(START, allowed_hosts={"origin.test"}, page_limit=1)
        reader.release.set()
        report = await in_flight
        await asyncio.wait_for(stopping, 3)
        # After shutdown: nothing listens, the socket file is gone.
        assert not await client.healthy()
        with pytest.raises(FetcherUnavailable):
            await client.read(START, allowed_hosts={"origin.test"}, page_limit=1)
        assert not (sock_dir / "f.sock").exists()
    assert report.pages == (PAGE,)


async def test_shutdown_cancels_reads_that_outlast_the_grace_period(
    sock_dir: Path, reader: ScriptedReader
) -> None:
    reader.script = reader.held
    async with serving(sock_dir, reader) as (server, client):
        in_flight = asyncio.create_task(
            client.read(START, allowed_hosts={"origin.test"}, page_limit=1)
        )
        await asyncio.wait_for(reader.started.wait(), 2)
        loop = asyncio.get_running_loop()
        began = loop.time()
        await server.stop(grace=0.2)
        assert loop.time() - began < 1.5
        await asyncio.wait_for(reader.cancelled.wait(), 2)
        with pytest.raises(FetcherUnavailable):
            await in_flight


async def test_reads_in_flight_gauge_follows_the_reads(
    sock_dir: Path, reader: ScriptedReader
) -> None:
    reader.script = reader.held
    async with serving(sock_dir, reader) as (server, client):
        call = asyncio.create_task(client.read(START, allowed_hosts={"origin.test"}, page_limit=1))
        await asyncio.wait_for(reader.started.wait(), 2)
        assert server.metrics.reads_in_flight._value.get() == 1
        reader.release.set()
        await call
        assert server.metrics.reads_in_flight._value.get() == 0


async def test_generated_stub_reads_and_unknown_methods_are_unimplemented(
    sock_dir: Path, reader: ScriptedReader
) -> None:
    async with (
        serving(sock_dir, reader) as (_server, client),
        grpc.aio.insecure_channel(client.target) as channel,
    ):
        stub = fetcher_pb2_grpc.FetcherServiceStub(channel)
        answer = await stub.Read(
            fetcher_pb2.ReadRequest(url=START, allowed_hosts=["origin.test"], page_limit=1),
            timeout=2,
        )
        assert answer.report.pages[0].title == "Home"
        missing: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(
            "/tigress.fetcher.v1.FetcherService/Nope"
        )
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await missing(b"", timeout=2)
    assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED
