"""The SearXNG client: one search, one reachability probe (I/O only).

It talks to the configured SearXNG base URL and nowhere else, over an httpx client the
composition root builds with :func:`http_client` (``trust_env=False``, redirects not
followed). What an answer means is decided by ``gateway.tools.search.answer``; this module
only sends the request and hands over what came back. Every failure (refused, timeout,
broken connection, any status, a body that is not JSON) comes back as a
:class:`~gateway.tools.search.answer.SearchFailure` value: :meth:`SearxngClient.search` never
raises, except ``CancelledError`` when the caller is cancelled.
"""

from __future__ import annotations

import asyncio
import os
import socket
from dataclasses import dataclass

import httpx

from fetcher.client import NO_LISTS, DomainLists
from gateway.tools.search.answer import (
    FailureCause,
    SearchAnswer,
    SearchFailure,
    failure,
    read_answer,
)

#: Names the project, and does not start with "Python": SearXNG's limiter treats
#: User-Agents matching its bot pattern (anchored at the start) as bots.
USER_AGENT = "Tigress/0.1 (research gateway for a self-hosted language model)"
#: Headers that pass SearXNG's limiter: Accept must include text/html, Accept-Encoding gzip
#: or deflate, and Accept-Language must be present (``shared/notes/searxng.md`` section 6).
SEARCH_HEADERS = {
    "Accept": "text/html,application/json;q=0.9,*/*;q=0.8",
    "Accept-Encoding": "gzip, deflate",
    "Accept-Language": "en-US,en;q=0.5",
    "User-Agent": USER_AGENT,
}
#: Seconds for a whole search. SearXNG waits for its slowest engine, capped by its
#: outgoing.max_request_timeout (10 s is the value its settings suggest); this is above it.
DEFAULT_TIMEOUT = 15.0
#: Results kept per query (SPEC 6 leaves the number to configuration).
DEFAULT_RESULTS = 6
#: SearXNG answers are a few kilobytes; a body past this is not one.
MAX_BODY_BYTES = 4 * 1024 * 1024
#: Seconds for the /healthz probe.
PROBE_TIMEOUT = 2.0


def http_client(
    *, timeout: float = DEFAULT_TIMEOUT, max_connections: int = 64
) -> httpx.AsyncClient:
    """The httpx client for SearXNG alone, for the composition root to build and close.

    # Security
    SPEC 1: the gateway opens no connection to the open internet. Proxy variables are
    ignored (``trust_env=False``) and redirects are not followed (a redirect is a
    failure value), so a search goes to the configured SearXNG address and nowhere
    else, whatever the environment or SearXNG's answer says. Proved by
    ``tests/gateway/tools/search/test_searxng.py``
    (``test_a_redirect_is_not_followed``, ``test_proxy_variables_do_not_reroute_searches``).
    """
    return httpx.AsyncClient(
        timeout=httpx.Timeout(timeout),
        limits=httpx.Limits(
            max_connections=max_connections, max_keepalive_connections=max_connections
        ),
        trust_env=False,
        follow_redirects=False,
    )


@dataclass(frozen=True)
class SearxngHealth:
    """SearXNG's part of ``/healthz``.

    Attributes:
        ok: SearXNG answered ``/healthz`` with 200.
        url: The configured base URL.
        problem: What is wrong and what to change, when not ok.
        cause: The failure's vocabulary word, when not ok.
    """

    ok: bool
    url: str
    problem: str = ""
    cause: FailureCause | None = None


def search_parameters(
    categories: tuple[str, ...], language: str, engines: tuple[str, ...]
) -> dict[str, str]:
    """The operator's SearXNG parameters as its query string takes them (SPEC 6).

    SearXNG reads ``categories`` and ``engines`` as comma-separated names and ``language``
    as one code; an empty setting sends nothing, so SearXNG's own defaults apply.
    """
    params: dict[str, str] = {}
    if categories:
        params["categories"] = ",".join(categories)
    if language:
        params["language"] = language
    if engines:
        params["engines"] = ",".join(engines)
    return params


class _TooLarge(Exception):
    """The body passed :data:`MAX_BODY_BYTES`."""


class SearxngClient:
    """Searches one SearXNG instance through its JSON API."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        base_url: str,
        *,
        results_per_query: int = DEFAULT_RESULTS,
        timeout: float = DEFAULT_TIMEOUT,
        lists: DomainLists = NO_LISTS,
        categories: tuple[str, ...] = (),
        language: str = "",
        engines: tuple[str, ...] = (),
    ) -> None:
        """Args:
        http: The client from :func:`http_client` (owned by the composition root).
        base_url: SearXNG's base URL (``http://127.0.0.1:8888``, maybe with a path).
        results_per_query: The most results kept of one search.
        timeout: Seconds a whole search may take.
        lists: The operator's lists: results they deny are dropped from every answer.
        categories: SearXNG's ``categories`` parameter (empty: not sent).
        language: SearXNG's ``language`` parameter, the search language (empty: not
            sent). Not ``locale``, which stays ``en`` so reasons come in English.
        engines: SearXNG's ``engines`` parameter (empty: not sent).
        """
        self.base_url = base_url.rstrip("/")
        self.results_per_query = results_per_query
        self.timeout = timeout
        self.lists = lists
        self._http = http
        self._operator_params = search_parameters(categories, language, engines)

    async def search(
        self, query: str, *, time_range: str | None = None
    ) -> SearchAnswer | SearchFailure:
        """Search once: ``GET {base}/search?q=...&format=json&locale=en[&time_range=...]``,
        with the operator's ``categories``, ``language`` and ``engines`` when set.

        Args:
            query: The words to search, as SearXNG should receive them.
            time_range: ``day``, ``week``, ``month`` or ``year`` (checked by the caller:
                SearXNG answers 400 to anything else), or None for no range.

        Returns:
            The answer, or a failure naming its cause and what the operator should change.
        """
        params = {"q": query, "format": "json", "locale": "en", **self._operator_params}
        if time_range:
            params["time_range"] = time_range
        try:
            async with asyncio.timeout(self.timeout):
                status, content_type, body, timing = await self._get("/search", params)
        except (TimeoutError, httpx.TimeoutException):
            return failure(FailureCause.TIMEOUT, origin=self.base_url, timeout=self.timeout)
        except (httpx.HTTPError, _TooLarge) as exc:
            return self._transport_failure(exc)
        return read_answer(
            status,
            content_type,
            body,
            timing,
            limit=self.results_per_query,
            origin=self.base_url,
            lists=self.lists,
        )

    async def probe(self, *, deadline: float = PROBE_TIMEOUT) -> SearxngHealth:
        """Ask SearXNG's ``/healthz``; never raises (except when cancelled)."""
        try:
            async with asyncio.timeout(deadline):
                status, _, _, _ = await self._get("/healthz", {})
        except (TimeoutError, httpx.TimeoutException):
            found = failure(FailureCause.TIMEOUT, origin=self.base_url, timeout=deadline)
        except (httpx.HTTPError, _TooLarge) as exc:
            found = self._transport_failure(exc)
        else:
            if status == 200:
                return SearxngHealth(ok=True, url=self.base_url)
            found = failure(FailureCause.HTTP_STATUS, origin=self.base_url, status=status)
        return SearxngHealth(ok=False, url=self.base_url, problem=found.operator, cause=found.cause)

    async def _get(self, path: str, params: dict[str, str]) -> tuple[int, str, bytes, str | None]:
        url = self.base_url + path
        async with self._http.stream("GET", url, params=params, headers=SEARCH_HEADERS) as response:
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_BODY_BYTES:
                    raise _TooLarge
            return (
                response.status_code,
                response.headers.get("content-type", ""),
                bytes(body),
                response.headers.get("server-timing"),
            )

    def _transport_failure(self, exc: Exception) -> SearchFailure:
        """The one place httpx's errors become failure values."""
        if isinstance(exc, _TooLarge):
            return failure(
                FailureCause.NOT_JSON,
                origin=self.base_url,
                detail=f"more than {MAX_BODY_BYTES // (1024 * 1024)} MiB",
            )
        if isinstance(exc, httpx.ConnectError):
            return failure(FailureCause.UNREACHABLE, origin=self.base_url, detail=_why(exc))
        return failure(FailureCause.BROKEN, origin=self.base_url, detail=_why(exc))


def _why(exc: Exception) -> str:
    """A short reason: the OS error's words when there is one (``Connection refused``)."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, socket.gaierror) and cause.strerror:
            return cause.strerror  # "Name or service not known"
        if isinstance(cause, OSError) and cause.errno and cause.errno > 0:
            return os.strerror(cause.errno)  # asyncio's own text names the address again
        cause = cause.__cause__ or cause.__context__
    return str(exc) or type(exc).__name__
