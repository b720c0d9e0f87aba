"""Who may use the API, and how much: the key check and the per-key limits (SPEC 2).

`Access` is the ASGI middleware in front of every route: an API route (``/v1/...``) and
the MCP endpoint (``/mcp``) pass only with a configured key (checked once, here, before
any handler) and within that key's requests-per-minute; the key's position goes into the
request's state for the concurrent-chat limit (chats, and MCP tool calls) and for the
MCP session limits. `KeyLimits` decides (clock injected, no I/O).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.errors import ForeignHostError, GatewayError, RateLimitError
from gateway.http.auth import KeyChecker, addressed_to_loopback
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
    ``tests/gateway/test_findings.py``.
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
    Without keys, such a request also names a loopback host
    (`gateway.http.auth.addressed_to_loopback`: no DNS rebinding). Proved by
    ``test_api_routes_need_the_key``, ``test_unknown_api_routes_need_the_key`` and
    ``test_without_keys_only_a_loopback_host_reaches_the_api`` in
    ``tests/gateway/http/test_app.py``, and ``test_a_wrong_or_missing_key_is_refused`` in
    ``tests/e2e/test_mcp.py``.
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
        authorization = host = None
        for name, value in scope["headers"]:
            if name == b"authorization" and authorization is None:
                authorization = value.decode("latin-1")
            elif name == b"host" and host is None:
                host = value.decode("latin-1")
        try:
            if not self._keys.required and not addressed_to_loopback(host):
                raise ForeignHostError(
                    "This gateway has no access keys, so it answers only requests addressed "
                    "to localhost or an IP address; configure keys to reach it by a name."
                )
            key = self._keys.check(authorization)
            self._limits.admit(key)
        except GatewayError as exc:
            if scope["path"] == CHAT_PATH:
                Tally(self._metrics, request_id=request_id_of(scope)).close(outcome_of(exc), exc)
            if scope["path"] == MCP_PATH:
                reason = (
                    "rate_limited"
                    if isinstance(exc, RateLimitError)
                    else "host"
                    if isinstance(exc, ForeignHostError)
                    else "auth"
                )
                self._metrics.mcp_refused.labels(reason).inc()
                rpc = JSONResponse(exc.rpc_body(), status_code=exc.status, headers=exc.headers())
                await rpc(scope, receive, send)
                return
            await error_response(exc)(scope, receive, send)
            return
        scope.setdefault("state", {})["key"] = key
        await self._app(scope, receive, send)
