"""The gateway's client: plain values out, gRPC statuses mapped to clear errors, contract checks.

Errors from the real service (busy, deadline, rejected, shutting down) are covered in
``test_service.py``; here a hand-written servicer breaks the contract on purpose.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from fetcher.client import (
    FetcherClient,
    FetcherProtocolError,
    FetcherUnavailable,
    reason_from_pb,
    report_from_pb,
)
from fetcher.reasons import Reason
from fetcher.report import PageFailed, PageRead, Report
from fetcher.service import reason_to_pb, report_to_pb
from fetcher.v1 import fetcher_pb2, fetcher_pb2_grpc


def test_report_survives_the_round_trip_through_protobuf() -> None:
    report = Report(
        url="https://example.org/",
        pages=(
            PageRead(
                "https://example.org/", "https://www.example.org/", "Home", "Hello", 200, 5, 9, 0
            ),
            PageRead("https://example.org/a", "https://example.org/a", "", "é ü 中", 203, 7, 1, 2),
        ),
        failures=tuple(
            PageFailed(f"https://example.org/{reason}", reason, f"why {reason}", 1)
            for reason in Reason
        ),
        elapsed_ms=1500,
    )
    assert report_from_pb(report_to_pb(report)) == report


@pytest.mark.parametrize("reason", list(Reason), ids=[reason.value for reason in Reason])
def test_every_reason_maps_to_its_wire_value_and_back(reason: Reason) -> None:
    assert reason_from_pb(reason_to_pb(reason)) is reason


@pytest.mark.parametrize(
    "value", [0, len(Reason) + 1, 99, -1], ids=["unspecified", "next", "far", "negative"]
)
def test_unknown_or_unspecified_reason_is_a_protocol_error_not_a_catch_all(value: int) -> None:
    with pytest.raises(FetcherProtocolError, match="reason"):
        reason_from_pb(value)


async def test_client_of_a_fetcher_that_is_not_running_says_unavailable(sock_dir: Path) -> None:
    async with FetcherClient(f"unix:{sock_dir / 'none.sock'}", timeout=2) as client:
        assert not await client.healthy()
        with pytest.raises(FetcherUnavailable) as caught:
            await client.read("https://example.org/", allowed_hosts={"example.org"}, page_limit=1)
    assert caught.value.code == "UNAVAILABLE"
    assert isinstance(caught.value.__cause__, grpc.aio.AioRpcError)


class ContractBreaker(fetcher_pb2_grpc.FetcherServiceServicer):
    """Answers in ways the contract forbids."""

    def __init__(self, reason: int) -> None:
        self.reason = reason

    async def Read(
        self, request: fetcher_pb2.ReadRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> fetcher_pb2.ReadResponse:
        if request.url.endswith("/empty"):
            return fetcher_pb2.ReadResponse()
        failure = fetcher_pb2.PageFailed(url=request.url, reason=self.reason, detail="?")  # type: ignore[arg-type]
        return fetcher_pb2.ReadResponse(
            report=fetcher_pb2.Report(url=request.url, failures=[failure])
        )

    async def ReadStream(
        self, request: fetcher_pb2.ReadRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[fetcher_pb2.ReadStreamResponse]:
        yield fetcher_pb2.ReadStreamResponse(page=fetcher_pb2.PageRead(requested_url=request.url))
        if request.url.endswith("/blank"):
            yield fetcher_pb2.ReadStreamResponse()


async def breaking_server(sock_dir: Path, reason: int) -> grpc.aio.Server:
    server = grpc.aio.server()
    fetcher_pb2_grpc.add_FetcherServiceServicer_to_server(ContractBreaker(reason), server)
    server.add_insecure_port(f"unix:{sock_dir / 'b.sock'}")
    await server.start()
    return server


@pytest.mark.parametrize(
    ("url", "reason", "message"),
    [
        ("https://example.org/", 42, "reason"),
        ("https://example.org/", 0, "reason"),
        ("https://example.org/empty", 1, "without a report"),
    ],
    ids=["unknown-reason", "unspecified-reason", "no-report"],
)
async def test_read_answer_breaking_the_contract_is_a_protocol_error(
    sock_dir: Path, url: str, reason: int, message: str
) -> None:
    server = await breaking_server(sock_dir, reason)
    try:
        async with FetcherClient(f"unix:{sock_dir / 'b.sock'}", timeout=2) as client:
            with pytest.raises(FetcherProtocolError, match=message):
                await client.read(url, allowed_hosts={"example.org"}, page_limit=1)
    finally:
        await server.stop(0)


@pytest.mark.parametrize(
    ("url", "message"),
    [("https://example.org/", "without a report"), ("https://example.org/blank", "empty")],
    ids=["stream-without-report", "empty-event"],
)
async def test_stream_breaking_the_contract_is_a_protocol_error(
    sock_dir: Path, url: str, message: str
) -> None:
    server = await breaking_server(sock_dir, 1)
    try:
        async with FetcherClient(f"unix:{sock_dir / 'b.sock'}", timeout=2) as client:
            items: list[object] = []

            async def drain() -> None:
                async for item in client.read_stream(
                    url, allowed_hosts={"example.org"}, page_limit=1
                ):
                    items.append(item)

            with pytest.raises(FetcherProtocolError, match=message):
                await drain()
            assert len(items) == 1
            assert isinstance(items[0], PageRead)
    finally:
        await server.stop(0)


async def test_proxy_variables_do_not_reroute_calls_to_the_fetcher(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import socket

    from fetcher.settings import Settings, parse_listen
    from testkit.fetcher import running_fetcher

    async def never(*args: object, **kwargs: object) -> Report:
        raise AssertionError("a health check reads nothing")

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = Settings(listen=(parse_listen(f"127.0.0.1:{port}"),))
    async with running_fetcher(settings, never):
        # A proxy that answers nothing: honouring it would make the fetcher unreachable.
        monkeypatch.setenv("grpc_proxy", "http://127.0.0.1:1")
        monkeypatch.setenv("http_proxy", "http://127.0.0.1:1")
        async with FetcherClient(f"127.0.0.1:{port}") as client:
            assert await client.healthy(deadline=2.0)
