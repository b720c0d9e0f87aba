"""The gateway's client of the fetcher service: plain values out, clear errors, a deadline per call.

This module and the generated contract (``fetcher.v1``) are all the gateway imports from
the fetcher side. Protobuf stops here: answers are converted to the plain values of
``fetcher.report`` (refusals are :class:`~fetcher.report.PageFailed` values with a
:class:`~fetcher.reasons.Reason`, never errors). An exception means the read itself could
not be done; the tree::

    FetcherClientError          base: no report came back
    ├── FetcherUnavailable      raised when the fetcher is not running, unreachable or
    │                           shutting down (UNAVAILABLE)
    ├── FetcherBusy             raised when the fetcher already runs its maximum of reads
    │                           (RESOURCE_EXHAUSTED); try later or tell the model
    ├── FetcherTimeout          raised when the call's deadline passed (DEADLINE_EXCEEDED)
    ├── FetcherRejected         raised when the request broke a bound of the contract
    │                           (INVALID_ARGUMENT): a bug in the caller
    ├── FetcherProtocolError    raised when an answer breaks the contract (an unknown
    │                           reason, a missing report) or the method is unknown
    └── FetcherFailed           raised for any other status (INTERNAL: a fetcher bug)

Cancelling the awaiting task cancels the call, and the fetcher cancels its downloads.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator, Collection, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import grpc
from grpc_health.v1 import health_pb2

from fetcher.net.domains import NO_LISTS, DomainLists, parse_domains, written_host_refusal
from fetcher.reasons import Reason
from fetcher.report import PageFailed, PageRead, Report
from fetcher.settings import DEV_SOCKET
from fetcher.v1 import fetcher_pb2, fetcher_pb2_grpc

# The report values, the reason vocabulary and the operator's lists (one decision on both
# sides of the boundary) are part of what the gateway imports: it may import only this
# module and the generated contract (tests/test_architecture.py).
__all__ = [
    "DEFAULT_TIMEOUT",
    "NO_LISTS",
    "DomainLists",
    "FetcherBusy",
    "FetcherClient",
    "FetcherClientError",
    "FetcherFailed",
    "FetcherProtocolError",
    "FetcherRejected",
    "FetcherTimeout",
    "FetcherUnavailable",
    "PageFailed",
    "PageRead",
    "Reason",
    "Report",
    "channel_options",
    "default_target",
    "failure_from_pb",
    "page_from_pb",
    "parse_domains",
    "reason_from_pb",
    "report_from_pb",
    "written_host_refusal",
]

MIB = 1024 * 1024
#: A read takes at most 30 s on the fetcher's side; the default call deadline leaves room
#: for the hop and the conversion.
DEFAULT_TIMEOUT = 32.0


#: The gRPC metadata key that carries a read's request id (SPEC 9): the gateway's id of
#: the chat, which the fetcher writes in each fetch log record of the read.
REQUEST_ID_METADATA = "tigress-request-id"


def request_metadata(request_id: str) -> tuple[tuple[str, str], ...]:
    """The call's metadata: the request id, when there is one."""
    return ((REQUEST_ID_METADATA, request_id),) if request_id else ()


def default_target() -> str:
    """The development socket (``unix:<cwd>/run/fetcher.sock``), as the fetcher's default."""
    return f"unix:{Path.cwd() / DEV_SOCKET}"


class FetcherClientError(Exception):
    """Base class: the read could not be done, so there is no report.

    Attributes:
        code: The gRPC status name (``UNAVAILABLE``...), or ``""`` for contract breaches.
        details: The fetcher's or gRPC's explanation.
    """

    def __init__(self, message: str, *, code: str = "", details: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.details = details


class FetcherUnavailable(FetcherClientError):
    """Raised when the fetcher is not running, cannot be reached or is shutting down."""


class FetcherBusy(FetcherClientError):
    """Raised when the fetcher refuses the read because it runs its maximum already."""


class FetcherTimeout(FetcherClientError):
    """Raised when the call's deadline passed before the report came back."""


class FetcherRejected(FetcherClientError):
    """Raised when the fetcher rejects the request as breaking a bound of the contract."""


class FetcherProtocolError(FetcherClientError):
    """Raised when an answer breaks the contract or the fetcher does not know the method."""


class FetcherFailed(FetcherClientError):
    """Raised for any other gRPC status (a bug inside the fetcher)."""


_ERRORS: dict[grpc.StatusCode, tuple[type[FetcherClientError], str]] = {
    grpc.StatusCode.UNAVAILABLE: (FetcherUnavailable, "the fetcher is not available"),
    grpc.StatusCode.RESOURCE_EXHAUSTED: (FetcherBusy, "the fetcher is busy"),
    grpc.StatusCode.DEADLINE_EXCEEDED: (FetcherTimeout, "the read took too long"),
    grpc.StatusCode.INVALID_ARGUMENT: (FetcherRejected, "the fetcher rejected the request"),
    grpc.StatusCode.UNIMPLEMENTED: (FetcherProtocolError, "the fetcher lacks this method"),
}


@contextlib.contextmanager
def _translate_errors() -> Iterator[None]:
    """Turns gRPC errors into this module's errors (the one place that does it)."""
    try:
        yield
    except grpc.aio.AioRpcError as exc:
        code = exc.code()
        details = exc.details() or ""
        kind, message = _ERRORS.get(code, (FetcherFailed, "the fetcher failed"))
        raise kind(f"{message}: {details}", code=code.name, details=details) from exc


def reason_from_pb(value: int) -> Reason:
    """The vocabulary word of a wire enum value.

    Raises:
        FetcherProtocolError: ``REASON_UNSPECIFIED`` or a value this build does not know;
            never mapped to a catch-all.
    """
    try:
        name = fetcher_pb2.Reason.Name(value)  # type: ignore[arg-type]
    except ValueError:
        name = ""
    word = name.removeprefix("REASON_")
    if not name.startswith("REASON_") or word not in Reason.__members__:
        raise FetcherProtocolError(f"the fetcher sent a reason this gateway does not know: {value}")
    return Reason[word]


def page_from_pb(page: fetcher_pb2.PageRead) -> PageRead:
    """Converts a page that was read."""
    return PageRead(
        requested_url=page.requested_url,
        final_url=page.final_url,
        title=page.title,
        text=page.text,
        status=page.status,
        bytes=page.body_bytes,
        elapsed_ms=page.elapsed_ms,
        depth=page.depth,
    )


def failure_from_pb(page: fetcher_pb2.PageFailed) -> PageFailed:
    """Converts a page that failed or was refused."""
    return PageFailed(
        url=page.url, reason=reason_from_pb(page.reason), detail=page.detail, depth=page.depth
    )


def report_from_pb(report: fetcher_pb2.Report) -> Report:
    """Converts a whole report."""
    return Report(
        url=report.url,
        pages=tuple(page_from_pb(page) for page in report.pages),
        failures=tuple(failure_from_pb(page) for page in report.failures),
        elapsed_ms=report.elapsed_ms,
    )


def channel_options(max_message_bytes: int) -> list[tuple[str, Any]]:
    """Client channel options, matching the server's (see ``fetcher.server.grpc_options``).

    Message sizes are capped in both directions; keepalive pings every 30 s find dead TCP
    peers (the server accepts them); calls are spread round-robin over every address the
    target names (``ipv4:10.0.0.11:7443,10.0.0.12:7443`` for scale-out). Proxy variables
    (``http_proxy``, ``grpc_proxy``) are ignored, as ``trust_env=False`` does for httpx: the
    environment must not reroute the gateway's calls to the fetcher.
    """
    return [
        ("grpc.enable_http_proxy", 0),
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.keepalive_time_ms", 30_000),
        ("grpc.keepalive_timeout_ms", 10_000),
        ("grpc.service_config", json.dumps({"loadBalancingConfig": [{"round_robin": {}}]})),
    ]


class FetcherClient:
    """An async client of one fetcher target (one channel, shared by every call).

    Create it inside the running event loop; close it with :meth:`close` or ``async with``.
    """

    def __init__(
        self,
        target: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_message_bytes: int = 1 * MIB,
        credentials: grpc.ChannelCredentials | None = None,
    ) -> None:
        """Opens a channel (connections are made on the first call).

        Args:
            target: ``unix:PATH`` or ``host:port`` (several: ``ipv4:a:p,b:p``); the
                development socket when ``None``.
            timeout: The default deadline of each call, in seconds.
            max_message_bytes: The message size limit, both directions.
            credentials: TLS credentials (with a client certificate) for TCP replicas.
        """
        self.target = target or default_target()
        self.timeout = timeout
        options = channel_options(max_message_bytes)
        if credentials is None:
            self._channel = grpc.aio.insecure_channel(self.target, options=options)
        else:
            self._channel = grpc.aio.secure_channel(self.target, credentials, options=options)
        self._stub = fetcher_pb2_grpc.FetcherServiceStub(self._channel)
        # Called by path: the health stubs' type hints lack the stub's methods.
        self._health_check = self._channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString,
        )

    async def __aenter__(self) -> FetcherClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Closes the channel, cancelling calls still running."""
        await self._channel.close()

    @staticmethod
    def _request(
        url: str, allowed_hosts: Collection[str], page_limit: int
    ) -> fetcher_pb2.ReadRequest:
        return fetcher_pb2.ReadRequest(
            url=url, allowed_hosts=sorted(allowed_hosts), page_limit=max(0, page_limit)
        )

    async def read(
        self,
        url: str,
        *,
        allowed_hosts: Collection[str],
        page_limit: int,
        request_id: str = "",
        deadline: float | None = None,
    ) -> Report:
        """Reads an address and the same-site pages it links to.

        Args:
            url: The address (from this answer's search results or the user's words).
            allowed_hosts: Rule 1's hosts for this answer.
            page_limit: The page budget left (at least 1).
            request_id: Ties the fetch log's records to this request (sent as the
                ``tigress-request-id`` metadata: 1 to 64 of ``A-Z a-z 0-9 . _ : -``).
            deadline: Seconds this call may take (the client's ``timeout`` when ``None``);
                the fetcher fits its work into what is left of it.

        Returns:
            The report; refused or failed pages are values inside it.

        Raises:
            FetcherClientError: One of its subclasses, when no report came back.
        """
        request = self._request(url, allowed_hosts, page_limit)
        with _translate_errors():
            response = await self._stub.Read(
                request, timeout=deadline or self.timeout, metadata=request_metadata(request_id)
            )
        if not response.HasField("report"):
            raise FetcherProtocolError("the fetcher answered without a report")
        return report_from_pb(response.report)

    async def read_stream(
        self,
        url: str,
        *,
        allowed_hosts: Collection[str],
        page_limit: int,
        request_id: str = "",
        deadline: float | None = None,
    ) -> AsyncGenerator[PageRead | PageFailed | Report, None]:
        """Like :meth:`read`, but yields each page as it is finished, then the report.

        The last item is always the :class:`~fetcher.report.Report`; closing the generator
        early (``contextlib.aclosing``) cancels the call (and the fetcher's downloads).

        Raises:
            FetcherClientError: One of its subclasses, when the read could not be done.
        """
        request = self._request(url, allowed_hosts, page_limit)
        call = self._stub.ReadStream(
            request, timeout=deadline or self.timeout, metadata=request_metadata(request_id)
        )
        finished = False
        try:
            with _translate_errors():
                async for message in call:
                    event = message.WhichOneof("event")
                    if event == "page":
                        yield page_from_pb(message.page)
                    elif event == "failure":
                        yield failure_from_pb(message.failure)
                    elif event == "report":
                        finished = True
                        yield report_from_pb(message.report)
                    else:
                        raise FetcherProtocolError("the fetcher sent an empty stream event")
            if not finished:
                raise FetcherProtocolError("the fetcher ended the stream without a report")
        finally:
            call.cancel()

    async def healthy(self, *, deadline: float = 1.0, service: str = "") -> bool:
        """True when the fetcher answers health checks with ``SERVING``.

        Args:
            deadline: Seconds to wait for the answer.
            service: ``""`` asks whether the process is up and taking reads;
                ``"tigress.fetcher.v1.FetcherService"`` also says ``NOT_SERVING`` while
                its render workers are saturated (reads then wait their turn).

        Never raises for an unreachable or stopping fetcher: that is ``False``.
        """
        request = health_pb2.HealthCheckRequest(service=service)
        try:
            answer = await self._health_check(request, timeout=deadline)
        except grpc.aio.AioRpcError:
            return False
        return bool(answer.status == health_pb2.HealthCheckResponse.SERVING)
