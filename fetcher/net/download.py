"""One page, downloaded safely: every rule, every hop (SPEC 7 steps 1-6).

:meth:`Downloader.download` parses the address, applies rule 1 to the requested host,
resolves once, checks every answer, connects to the checked address only, follows at
most three redirects by hand (each one parsed, resolved, checked and pinned again), and
reads at most the body limit of an allowed type within the page time limit: 2 MiB of a
text type, 16 MiB of a PDF (its own limit, lowered or raised by a setting up to a 64 MiB
ceiling; a PDF cut short has no text, so past the limit it is refused, never cut). At
most a few PDF bodies are held at once (``Limits.pdfs_held``): a PDF past that waits for
room before its body is read. It never raises for anything the web does: the result is
a ``Downloaded`` or a ``Failed``.

No cookie jar exists anywhere on this path, no credentials are ever attached, no
``Referer`` is sent, and the User-Agent is fixed. There is no httpx client here at all:
httpcore's connection pools are driven directly, so there is no proxy variable, netrc
file or cookie jar to consult (what ``trust_env=False`` buys an httpx client), and the TLS
trust store is fixed in ``fetcher.net.transport.default_ssl_context``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ssl
import time
import zlib
from collections.abc import Callable, Collection, Iterator, Sequence

import httpcore

from fetcher.errors import HopError, NotPublicError
from fetcher.net.guard import CheckedAddress, parse_address, resolve_and_check
from fetcher.net.policy import Policy
from fetcher.net.resolver import DnsResolver, Resolver
from fetcher.net.transport import PinnedPools, default_ssl_context
from fetcher.net.urls import Address, Refused, normalise_host, resolve_reference
from fetcher.outcome import Downloaded, Failed, HopRecord, IPAddress, Outcome
from fetcher.reasons import Reason

USER_AGENT = "Tigress/0.1 (page reader for a self-hosted language model)"
ACCEPT = "text/html, text/plain;q=0.9, text/markdown;q=0.9, application/pdf;q=0.8"
TEXT_TYPES = frozenset({"text/html", "text/plain", "text/markdown"})
PDF_TYPE = "application/pdf"
CONTENT_TYPES = TEXT_TYPES | {PDF_TYPE}
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
MIB = 1024 * 1024
#: A PDF's body limit by default, and the most any setting may raise it to.
PDF_MAX_BYTES = 16 * MIB
PDF_MAX_BYTES_CEILING = 64 * MIB
# Compressed bodies of incompressible text are a little larger than their output.
_RAW_SLACK = 64 * 1024


@dataclasses.dataclass(frozen=True, slots=True)
class Limits:
    """Rule 5's limits. Tests pass smaller ones to stay fast; production uses the defaults.

    Attributes:
        page_timeout: Seconds for the whole page, redirects included.
        max_bytes: Decoded body bytes of a text page; one byte more and the page is
            ``too_large``.
        pdf_max_bytes: Decoded body bytes of a PDF (``application/pdf``); one byte more
            and it is ``too_large``, never cut (a cut PDF has no text). At most
            :data:`PDF_MAX_BYTES_CEILING`.
        max_redirects: Redirects followed; one more and the page fails with ``redirects``.
        content_types: Media types that may be read.
        pdfs_held: PDF bodies the process holds at once, from their first byte until
            the caller is done with them (see :meth:`Downloader.download`'s ``hold``);
            one more PDF waits, within its page time, before its body is read.
    """

    page_timeout: float = 10.0
    max_bytes: int = 2 * MIB
    pdf_max_bytes: int = PDF_MAX_BYTES
    max_redirects: int = 3
    content_types: frozenset[str] = CONTENT_TYPES
    pdfs_held: int = 4

    def __post_init__(self) -> None:
        # Settings refuse more with a message; this keeps any other caller honest too.
        if self.pdf_max_bytes > PDF_MAX_BYTES_CEILING:
            raise ValueError(f"pdf_max_bytes is over its ceiling of {PDF_MAX_BYTES_CEILING}")


def allowed_host_set(hosts: Collection[str]) -> frozenset[str]:
    """Normalise allowed hosts the same way addresses are normalised (bad entries dropped)."""
    normalised = set()
    for written in hosts:
        host = written.strip()
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"  # a bare IPv6 address, as urlsplit().hostname gives it
        result = normalise_host(host)
        if not isinstance(result, Refused):
            normalised.add(result[0])
    return frozenset(normalised)


def redirect_target(current: Address, location: str) -> str:
    """``Location`` resolved against the hop that sent it (RFC 3986 5.2), spaces
    percent-encoded as browsers do; the result still goes through the full parser, the
    same one that reads links (``fetcher.net.urls``)."""
    return resolve_reference(current, location)


def _one_value(headers: dict[str, list[str]], name: str, reason: Reason) -> str:
    """The value of a header that must not be said twice in two ways.

    # Security
    Repeated response headers are kept as lists: a server that sends two different
    ``Content-Type`` or ``Location`` values is refused rather than read one way here and
    another way elsewhere (a proxy, a browser). Tested by
    ``test_ambiguous_repeated_headers_are_refused``.
    """
    values = headers.get(name, [])
    if len({value.strip().lower() for value in values}) > 1:
        raise HopError(reason, f"the response has {len(values)} different {name} headers")
    return values[0] if values else ""


def _media_type(header: str) -> tuple[str, str | None]:
    media, *params = header.split(";")
    charset = None
    for param in params:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            charset = value.strip().strip("\"'") or None
    return media.strip().lower(), charset


class _BodyDecoder:
    """Undo Content-Encoding without ever producing more than the caller has room for."""

    def __init__(self, encoding: str) -> None:
        self._zlib: zlib._Decompress | None
        self._maybe_raw = False
        if encoding in ("", "identity"):
            self._zlib = None
        elif encoding in ("gzip", "x-gzip"):
            self._zlib = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self._zlib = zlib.decompressobj(zlib.MAX_WBITS)
            self._maybe_raw = True
        else:
            raise HopError(Reason.CONTENT_TYPE, f"unsupported content encoding {encoding!r}")
        self._first = True

    @property
    def finished(self) -> bool:
        """True once a compressed stream has ended: anything after it is not read."""
        return self._zlib is not None and self._zlib.eof

    def decode(self, data: bytes, room: int) -> bytes:
        """Decode ``data``; returns at most ``room + 1`` bytes so the caller sees overflow.

        # Security
        Rule 5's body limit applies to decoded bytes: a gzip bomb is stopped after
        ``room + 1`` bytes of output, however small its input, because zlib is asked
        for at most that much. Bytes after the end of the compressed stream are never
        kept (the caller stops reading at :attr:`finished`), so trailing junk cannot
        grow memory outside the limit. Tested by ``test_gzip_bomb_stops_at_the_limit``
        and ``test_bytes_after_the_compressed_stream_are_not_read``.
        """
        if self._zlib is None:
            return data[: room + 1]
        try:
            out = self._zlib.decompress(data, room + 1)
        except zlib.error as exc:
            # "deflate" is sometimes sent raw (without the zlib header); decide once.
            if self._first and self._maybe_raw:
                self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
                self._first = False
                return self.decode(data, room)
            raise HopError(Reason.CONNECT, "the compressed body is corrupt") from exc
        self._first = False
        return out


def _tls_failure(exc: BaseException) -> ssl.SSLError | None:
    """The TLS error somewhere in an exception's cause chain, if there is one."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, ssl.SSLError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


@contextlib.contextmanager
def _map_transport_errors() -> Iterator[None]:
    """Translate httpcore's exceptions into the reason vocabulary (one place).

    TLS failures are recognised by type: an :class:`ssl.SSLError` (certificate checks
    raise its subclass :class:`ssl.SSLCertVerificationError`) anywhere in the cause chain
    that httpcore and anyio keep, never by words in a message.
    """
    try:
        yield
    except httpcore.TimeoutException as exc:
        raise HopError(Reason.TIMEOUT, "the server did not answer in time") from exc
    except httpcore.RemoteProtocolError as exc:
        raise _BrokenConnection(str(exc) or "the server closed the connection") from exc
    except (httpcore.NetworkError, httpcore.ProtocolError, ssl.SSLError, OSError) as exc:
        tls = _tls_failure(exc)
        if tls is not None:
            raise HopError(Reason.TLS, str(tls) or "TLS handshake failed") from exc
        raise HopError(Reason.CONNECT, str(exc) or "the connection broke") from exc


class _BrokenConnection(HopError):
    """The server broke the HTTP exchange (closed early, or sent what is not HTTP/1.1)."""

    def __init__(self, detail: str) -> None:
        super().__init__(Reason.CONNECT, detail)


@dataclasses.dataclass(slots=True)
class _Hop:
    """What one hop has found out so far (for its record, even if time runs out), and
    where the download keeps the room a PDF body takes (``hold``)."""

    url: str
    started: float
    hold: contextlib.AsyncExitStack
    resolved_ip: IPAddress | None = None
    refused_ip: IPAddress | None = None
    status: int | None = None
    bytes: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class _Response:
    address: Address
    status: int
    location: str | None
    content_type: str
    charset: str | None
    body: bytes


class Downloader:
    """Downloads single pages under the policy; one per process, shared by all reads."""

    def __init__(
        self,
        *,
        policy: Policy | None = None,
        resolver: Resolver | None = None,
        limits: Limits | None = None,
        ssl_context: ssl.SSLContext | None = None,
        observer: Callable[[HopRecord], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.policy = policy if policy is not None else Policy()
        self.limits = limits if limits is not None else Limits()
        # A resolver this downloader makes is its to close; one passed in is the caller's.
        self._own_resolver: DnsResolver | None = None
        if resolver is None:
            resolver = self._own_resolver = DnsResolver()
        self._resolver = resolver
        self._pools = PinnedPools(ssl_context if ssl_context is not None else default_ssl_context())
        self._observer = observer
        self._clock = clock
        # Room for PDF bodies: 16 MiB each by default, so a crawl of many PDFs must wait
        # for room rather than fill the unit's memory.
        self._pdf_room = asyncio.Semaphore(self.limits.pdfs_held)

    async def aclose(self) -> None:
        """Close every kept connection (and the resolver, when this downloader made it)."""
        await self._pools.aclose()
        if self._own_resolver is not None:
            await self._own_resolver.aclose()

    async def __aenter__(self) -> Downloader:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _ms(self, since: float) -> int:
        return round((self._clock() - since) * 1000)

    async def download(
        self,
        url: str,
        *,
        allowed_hosts: Collection[str],
        request_id: str = "",
        hold: contextlib.AsyncExitStack | None = None,
    ) -> Outcome:
        """Download one page under every rule.

        Args:
            url: The address asked for.
            allowed_hosts: Rule 1's hosts (this answer's search results and the user's
                own addresses). Applied to the requested address; redirects may leave.
            request_id: Carried into every hop record for the fetch log.
            hold: Where the room a PDF body takes is kept: it is given back when the
                caller closes this stack, once done with the body (the crawl: after
                the PDF is read). Without one, it is given back when this returns.

        Returns:
            :class:`Downloaded` or :class:`Failed`; never raises for what the web does.

        # Security
        Rules 1-5 and 7 of SPEC 7, in order, for the first hop and (except rule 1) for
        every redirect: parse strictly; the requested host must be allowed; one lookup;
        every answer public; connect to a checked address only, TLS verified against the
        name; 10 s for the whole page; at most 2 MiB decoded of a text type, or 16 MiB
        of a PDF (``pdf_max_bytes``), refused past it, never cut; only those types; at
        most 3 redirects; no cookies, credentials or Referer. At most ``pdfs_held`` PDF
        bodies are held at once, so PDFs cannot fill the process's memory. Tested in
        ``tests/fetcher/net/test_download.py``, ``test_download_pdf.py`` and
        ``test_request_headers.py``.
        """
        if hold is None:
            async with contextlib.AsyncExitStack() as own:
                return await self.download(
                    url, allowed_hosts=allowed_hosts, request_id=request_id, hold=own
                )
        started = self._clock()
        allowed = allowed_host_set(allowed_hosts)
        redirects = 0
        current = url
        hop = _Hop(current, started, hold)
        try:
            async with asyncio.timeout(self.limits.page_timeout):
                while True:
                    hop = _Hop(current, self._clock(), hold)
                    response = await self._hop(hop, first=redirects == 0, allowed=allowed)
                    if response.location is None:
                        self._record(hop, redirects, None, request_id=request_id)
                        return Downloaded(
                            requested_url=url,
                            final_url=hop.url,
                            status=response.status,
                            content_type=response.content_type,
                            charset=response.charset,
                            body=response.body,
                            elapsed_ms=self._ms(started),
                            resolved_ip=_ip(hop.resolved_ip),
                            redirects=redirects,
                        )
                    target = redirect_target(response.address, response.location)
                    if redirects >= self.limits.max_redirects:
                        raise HopError(
                            Reason.REDIRECTS,
                            f"more than {self.limits.max_redirects} redirects",
                        )
                    self._record(hop, redirects, None, redirect_to=target, request_id=request_id)
                    redirects += 1
                    current = target
        except HopError as exc:
            return self._fail(url, hop, redirects, exc.reason, exc.detail, started, request_id)
        except TimeoutError:
            detail = f"the page took longer than {self.limits.page_timeout:g} s"
            return self._fail(url, hop, redirects, Reason.TIMEOUT, detail, started, request_id)
        except asyncio.CancelledError:
            # The caller gave up (crawl deadline, client gone): the hop is still logged.
            self._record(hop, redirects, Reason.TIMEOUT, request_id=request_id)
            raise
        except Exception:
            # A bug of ours: the caller reports it (``internal``); the hop is logged too.
            self._record(hop, redirects, Reason.INTERNAL, request_id=request_id)
            raise

    def _fail(
        self,
        url: str,
        hop: _Hop,
        redirects: int,
        reason: Reason,
        detail: str,
        started: float,
        request_id: str,
    ) -> Failed:
        self._record(hop, redirects, reason, request_id=request_id)
        return Failed(
            requested_url=url,
            url=hop.url,
            reason=reason,
            detail=detail,
            elapsed_ms=self._ms(started),
            resolved_ip=hop.resolved_ip,
            status=hop.status,
            redirects=redirects,
        )

    def _record(
        self,
        hop: _Hop,
        redirects: int,
        reason: Reason | None,
        *,
        redirect_to: str | None = None,
        request_id: str,
    ) -> None:
        if self._observer is None:
            return
        self._observer(
            HopRecord(
                url=hop.url,
                resolved_ip=hop.resolved_ip,
                refused_ip=hop.refused_ip,
                status=hop.status,
                bytes=hop.bytes,
                elapsed_ms=self._ms(hop.started),
                redirects=redirects,
                reason=reason,
                redirect_to=redirect_to,
                request_id=request_id,
            )
        )

    async def _hop(self, hop: _Hop, *, first: bool, allowed: frozenset[str]) -> _Response:
        address = parse_address(hop.url, self.policy)
        hop.url = address.url
        if first and address.host not in allowed:
            raise HopError(Reason.NOT_IN_ANSWER, f"{address.host} is not an allowed host")
        try:
            answers = await resolve_and_check(address, policy=self.policy, resolver=self._resolver)
        except NotPublicError as exc:
            hop.refused_ip = exc.answer  # for the operator's fetch log, never the detail
            raise
        last_error: HopError | None = None
        for checked in answers:
            hop.resolved_ip = checked.ip
            try:
                return await self._request(hop, address, checked)
            except HopError as exc:
                # Only a failed connect moves on to the next checked address.
                if exc.reason is not Reason.CONNECT or hop.status is not None:
                    raise
                last_error = exc
        assert last_error is not None
        raise last_error

    async def _request(self, hop: _Hop, address: Address, checked: CheckedAddress) -> _Response:
        """One request; repeated once only when a kept-alive connection was found closed.

        # Security
        A server that breaks the exchange on a fresh connection gets the request once: only
        a connection kept alive from an earlier request, which the server may have closed
        meanwhile, earns one new try (RFC 9112 9.3.1 lets a client retry an idempotent
        request then). Tested by ``test_server_that_hangs_up_gets_the_request_once``.
        """
        async with self._pools.lease(checked) as lease:
            opened = lease.backend.connections_opened
            try:
                return await self._exchange(hop, address, lease.pool)
            except _BrokenConnection:
                if lease.backend.connections_opened != opened or hop.status is not None:
                    raise
            return await self._exchange(hop, address, lease.pool)

    async def _exchange(
        self, hop: _Hop, address: Address, pool: httpcore.AsyncConnectionPool
    ) -> _Response:
        headers = [
            (b"Host", address.authority.encode("ascii")),
            (b"User-Agent", USER_AGENT.encode("ascii")),
            (b"Accept", ACCEPT.encode("ascii")),
            (b"Accept-Encoding", b"gzip, deflate"),
        ]
        url = httpcore.URL(
            scheme=b"https",
            host=address.host.encode("ascii"),
            port=address.port,
            target=address.target.encode("ascii"),
        )
        timeout = self.limits.page_timeout
        extensions = {"timeout": {"connect": timeout, "read": timeout, "write": timeout}}
        with _map_transport_errors():
            async with pool.stream("GET", url, headers=headers, extensions=extensions) as response:
                hop.status = response.status
                return await self._read(hop, address, response, _header_lists(response.headers))

    async def _read(
        self,
        hop: _Hop,
        address: Address,
        response: httpcore.Response,
        headers: dict[str, list[str]],
    ) -> _Response:
        status = response.status
        if status in REDIRECT_STATUSES:
            location = _one_value(headers, "location", Reason.MALFORMED)
            if location:
                return _Response(address, status, _header_text(location), "", None, b"")
        if not 200 <= status < 300:
            raise HopError(Reason.HTTP_STATUS, f"the server answered {status}")
        content_type, charset = _media_type(
            _one_value(headers, "content-type", Reason.CONTENT_TYPE)
        )
        if content_type not in self.limits.content_types:
            raise HopError(Reason.CONTENT_TYPE, f"content type {content_type or 'missing'!r}")
        pdf = content_type == PDF_TYPE
        limit = self.limits.pdf_max_bytes if pdf else self.limits.max_bytes
        # Repeated Content-Encoding lines are one list (RFC 9110 5.3): "gzip" twice is two
        # codings, which is not what the fetcher asked for.
        encoding = ", ".join(headers.get("content-encoding", [])).strip().lower()
        declared = headers.get("content-length", [""])[0]
        if encoding in ("", "identity") and declared.isdigit() and int(declared) > limit:
            raise HopError(Reason.TOO_LARGE, f"the body is {declared} bytes, over {limit}")
        if pdf:
            # Waits (within the page time) while as many PDFs as allowed are held.
            await hop.hold.enter_async_context(self._pdf_room)
        decoder = _BodyDecoder(encoding)
        body = bytearray()
        raw = 0
        async for chunk in response.aiter_stream():
            raw += len(chunk)
            body += decoder.decode(chunk, limit - len(body))
            hop.bytes = len(body)
            if len(body) > limit or raw > limit + _RAW_SLACK:
                raise HopError(Reason.TOO_LARGE, f"the body is over {limit} bytes")
            if decoder.finished:
                break
        return _Response(address, status, None, content_type, charset, bytes(body))


def _header_lists(raw: Sequence[tuple[bytes, bytes]]) -> dict[str, list[str]]:
    """Response headers by lower-case name, every value kept in order."""
    headers: dict[str, list[str]] = {}
    for name, value in raw:
        headers.setdefault(name.decode("latin-1").lower(), []).append(value.decode("latin-1"))
    return headers


def _header_text(value: str) -> str:
    """A header value read as latin-1, re-read as UTF-8 when it is (servers send raw UTF-8
    in ``Location``); it still goes through the full address parser afterwards."""
    raw = value.strip().encode("latin-1")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return value.strip()


def _ip(address: IPAddress | None) -> IPAddress:
    if address is None:  # pragma: no cover - a response always comes from a connection
        raise AssertionError("a page was read without a connection")
    return address
