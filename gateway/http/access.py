"""Who may use the API, and how much: the browser rules, the key check and the per-key
limits (SPEC 2).

`BrowserGuard` is the outermost ASGI middleware: the Host, Origin and POST media type
rules of `gateway.http.browsers`, on every route; it puts who the client is into the
request's state (MCP sessions per client). `Access` comes after it: an API route
(``/v1/...``) and the MCP endpoint (``/mcp``) pass only with a configured key (checked
once, here, before any handler) and within that key's requests-per-minute; the key's
position goes into the request's state for the concurrent-chat limit (chats, and MCP
tool calls) and for the MCP session limits. `KeyLimits` decides (clock injected, no I/O).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.errors import (
    BadHostError,
    ForeignHostError,
    ForeignOriginError,
    GatewayError,
    MediaTypeError,
    RateLimitError,
)
from gateway.http.auth import KeyChecker
from gateway.http.browsers import Head, Refusal, TrustedProxies, client_of, judge
from gateway.http.origin import OriginPolicy
from gateway.http.request_id import request_id_of
from gateway.metrics import GatewayMetrics
from gateway.stream.writer import Tally, error_response, outcome_of

#: The chat route: a refusal here is also a chat request with mode ``none``.
CHAT_PATH = "/v1/chat/completions"
#: The MCP endpoint: refusals are answered as JSON-RPC errors.
MCP_PATH = "/mcp"


def needs_key(path: str) -> bool:
    """Whether requests to ``path`` need an access key (the API and the MCP endpoint)."""
    return path.startswith("/v1/") or path == MCP_PATH


@dataclass
class _Bucket:
    tokens: float
    at: float
    chats: int = 0


class KeyLimits:
    """Per-key requests per minute (a token bucket that holds one minute's worth) and
    concurrent chats. A limit of 0 is off.

    # Security
    Rule: one access key gets at most ``chats_per_key`` chats at once and
    ``requests_per_minute_per_key`` API requests a minute (429 with Retry-After past
    either); on by default wherever keys are configured.
    Threat: one leaked or greedy key keeping every engine and the fetcher busy for all
    other users.
    Callers may rely on: `admit` and `chat` raise `RateLimitError` past the limits and
    never for another key. Proved by ``test_a_key_over_its_concurrent_chats_gets_429`` and
    ``test_a_key_over_its_requests_per_minute_gets_429_with_retry_after`` in
    ``tests/gateway/http/test_key_limits.py``.
    """

    def __init__(
        self,
        *,
        chats_per_key: int,
        requests_per_minute: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._chats = chats_per_key
        self._rpm = requests_per_minute
        self._clock = clock
        self._keys: dict[int, _Bucket] = {}

    def _bucket(self, key: int) -> _Bucket:
        bucket = self._keys.get(key)
        if bucket is None:
            bucket = self._keys[key] = _Bucket(float(self._rpm), self._clock())
        return bucket

    def admit(self, key: int) -> None:
        """Count one request of ``key``.

        Raises:
            RateLimitError: The key used its requests for this minute; ``Retry-After`` is
                when the next one is allowed.
        """
        if not self._rpm:
            return
        bucket = self._bucket(key)
        now = self._clock()
        rate = self._rpm / 60.0
        bucket.tokens = min(float(self._rpm), bucket.tokens + (now - bucket.at) * rate)
        bucket.at = now
        if bucket.tokens < 1.0:
            wait = math.ceil((1.0 - bucket.tokens) / rate)
            raise RateLimitError(
                f"Too many requests for this key: at most {self._rpm} a minute.", wait
            )
        bucket.tokens -= 1.0

    @contextmanager
    def chat(self, key: int) -> Iterator[None]:
        """Hold one of ``key``'s concurrent chats for the block.

        Raises:
            RateLimitError: The key already has its limit of chats running.
        """
        if not self._chats:
            yield
            return
        bucket = self._bucket(key)
        if bucket.chats >= self._chats:
            raise RateLimitError(f"Too many chats at once for this key: at most {self._chats}.", 1)
        bucket.chats += 1
        try:
            yield
        finally:
            bucket.chats -= 1


#: What each refusal of the browser rules is answered with.
_REFUSALS: dict[Refusal, GatewayError] = {
    Refusal.BAD_HOST: BadHostError("A request must carry one Host header, without a comma."),
    Refusal.FOREIGN_HOST: ForeignHostError(
        "This gateway has no access keys, so it answers only requests addressed to "
        "localhost or an IP address; configure keys to reach it by a name."
    ),
    Refusal.FOREIGN_ORIGIN: ForeignOriginError(
        "This Origin may not use the gateway: only its own pages and the origins in the "
        "allowed_origins setting may."
    ),
    Refusal.MEDIA_TYPE: MediaTypeError("A POST must carry Content-Type: application/json."),
}
#: The ``/mcp`` refusal metric's reason for each.
_MCP_REASONS = {
    Refusal.BAD_HOST: "bad_host",
    Refusal.FOREIGN_HOST: "host",
    Refusal.FOREIGN_ORIGIN: "origin",
    Refusal.MEDIA_TYPE: "media_type",
}


class BrowserGuard:
    """ASGI middleware: the browser rules of SPEC 2 on every route, before anything else.

    # Security
    Rule: a request with two ``Host`` headers or a comma in one is 400; without keys,
    one whose host (the forwarded one from a trusted proxy) is not ``localhost``,
    ``*.localhost`` or an IP address is 403, ``/healthz``, ``/metrics`` and the page
    included; one whose ``Origin`` is neither the gateway's own nor in
    ``allowed_origins`` is 403 (``/mcp`` judges Origin with its own list, after this:
    `gateway.mcp.http.McpOriginGuard`); a ``POST`` without ``Content-Type:
    application/json`` is 415. Checked here, once, before routing, so no route can miss
    it. Threat: a hostile page in the user's browser driving or reading the gateway
    (cross-site form posts and ``no-cors`` fetches, DNS rebinding). Callers may rely on
    every request reaching a route having passed `gateway.http.browsers.judge`. Proved by
    ``tests/gateway/http/test_browsers.py``.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        keyless: bool,
        allowed: OriginPolicy,
        proxies: TrustedProxies,
        metrics: GatewayMetrics,
    ) -> None:
        self._app = app
        self._keyless = keyless
        self._allowed = allowed
        self._proxies = proxies
        self._metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        client = scope.get("client")
        head = Head.of(scope["method"], scope["headers"], client[0] if client else None)
        path = scope["path"]
        refusal = judge(
            head,
            keyless=self._keyless,
            allowed=self._allowed,
            proxies=self._proxies,
            check_origin=path != MCP_PATH,
        )
        if refusal is None:
            # Who the client is, for the per-client limits (MCP sessions without keys).
            scope.setdefault("state", {})["client"] = client_of(head, self._proxies)
            await self._app(scope, receive, send)
            return
        self._metrics.refused.labels(refusal.value).inc()
        error = _REFUSALS[refusal]
        if path == CHAT_PATH:
            Tally(self._metrics).close(outcome_of(error), error)
        if path == MCP_PATH:
            self._metrics.mcp_refused.labels(_MCP_REASONS[refusal]).inc()
            rpc = JSONResponse(error.rpc_body(), status_code=error.status)
            await rpc(scope, receive, send)
            return
        await error_response(error)(scope, receive, send)


class Access:
    """ASGI middleware: the key check and requests-per-minute of every API route.

    # Security
    Rule: every ``/v1/`` route and ``/mcp`` need ``Authorization: Bearer <key>`` with a
    configured key; the check runs here, once, before routing, so no handler can forget
    it.
    Threat: an open model and tool loop on an address others can reach; a handler added
    later without its own check; the research tools over MCP used without a key.
    Callers may rely on: a request reaching a ``/v1/`` handler or the MCP endpoint carried
    a configured key (or none are configured, which settings allow only on loopback), and
    its position is ``scope["state"]["key"]``. ``/healthz`` and ``/metrics`` need no key.
    Without keys, every request also named a loopback host (`BrowserGuard`, before
    this: no DNS rebinding). Proved by ``test_api_routes_need_the_key`` and
    ``test_unknown_api_routes_need_the_key`` in ``tests/gateway/http/test_app.py``, and
    ``test_a_wrong_or_missing_key_is_refused`` in ``tests/e2e/test_mcp.py``.
    """

    def __init__(
        self, app: ASGIApp, *, keys: KeyChecker, limits: KeyLimits, metrics: GatewayMetrics
    ) -> None:
        self._app = app
        self._keys = keys
        self._limits = limits
        self._metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not needs_key(scope["path"]):
            await self._app(scope, receive, send)
            return
        authorization = None
        for name, value in scope["headers"]:
            if name == b"authorization" and authorization is None:
                authorization = value.decode("latin-1")
        try:
            key = self._keys.check(authorization)
            self._limits.admit(key)
        except GatewayError as exc:
            if scope["path"] == CHAT_PATH:
                Tally(self._metrics, request_id=request_id_of(scope)).close(outcome_of(exc), exc)
            if scope["path"] == MCP_PATH:
                reason = "rate_limited" if isinstance(exc, RateLimitError) else "auth"
                self._metrics.mcp_refused.labels(reason).inc()
                rpc = JSONResponse(exc.rpc_body(), status_code=exc.status, headers=exc.headers())
                await rpc(scope, receive, send)
                return
            await error_response(exc)(scope, receive, send)
            return
        scope.setdefault("state", {})["key"] = key
        await self._app(scope, receive, send)
