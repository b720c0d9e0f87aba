"""The client connection limits' state and answers, apart from the server that applies
them (`gateway.http.uvicorn_seam.GuardedProtocol`, the one place that knows uvicorn's
internals).

`ConnectionGuard` holds one server's count of open connections and each client's share;
the answers are whole HTTP/1.1 responses in the OpenAI error shape, written to the socket
before it closes (no ASGI app runs for them).
"""

from __future__ import annotations

import json

from gateway.http.browsers import TrustedProxies
from gateway.metrics import GatewayMetrics

#: The most a request head (target and header lines) may take.
MAX_HEAD_BYTES = 64 * 1024


def _error_response(status: int, reason: bytes, message: str, code: str, extra: bytes) -> bytes:
    body = json.dumps(
        {"error": {"message": message, "type": "invalid_request_error", "code": code}}
    ).encode()
    return (
        b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
        b"connection: close\r\n%s\r\n" % (status, reason, len(body), extra)
    ) + body


#: A connection past ``max_connections``.
BUSY = _error_response(
    503,
    b"Service Unavailable",
    "The gateway has as many connections open as it may; try again shortly.",
    "overloaded",
    b"retry-after: 1\r\n",
)
#: A connection past its client's ``connections_per_client``.
CLIENT_BUSY = _error_response(
    503,
    b"Service Unavailable",
    "This client has as many connections open to the gateway as one client may; close "
    "some or try again shortly.",
    "overloaded",
    b"retry-after: 1\r\n",
)
#: Malformed HTTP, or a request head over `MAX_HEAD_BYTES`.
MALFORMED = _error_response(400, b"Bad Request", "Invalid HTTP request.", "invalid_request", b"")


class ConnectionGuard:
    """The connection count and limits shared by every connection of one server."""

    def __init__(
        self,
        *,
        max_connections: int,
        header_seconds: float,
        metrics: GatewayMetrics,
        per_client: int = 256,
        proxies: TrustedProxies | None = None,
    ):
        self.max_connections = max_connections
        self.header_seconds = header_seconds
        self.metrics = metrics
        self.per_client = per_client
        self.proxies = proxies if proxies is not None else TrustedProxies()
        self.open = 0
        #: Open connections of each client (connections not yet known to a client, from
        #: a trusted proxy before their first head, are not in it).
        self.clients: dict[str, int] = {}

    def take(self, client: str) -> bool:
        """Count one more connection of ``client``; False (nothing counted) past its share.

        # Security
        Rule: one client (`gateway.http.browsers.client_of`) has at most
        ``connections_per_client`` connections open; one more is answered 503 and closed.
        Threat: one client holding the whole ``max_connections`` with silent connections
        (1,024 by default), locking every other client out until the header timeout.
        Callers may rely on: the count of a client never passing the share. Proved by
        ``tests/gateway/http/test_fair_share.py``.
        """
        count = self.clients.get(client, 0)
        if count >= self.per_client:
            return False
        self.clients[client] = count + 1
        return True

    def give_back(self, client: str) -> None:
        """One connection of ``client`` closed, or moved to another client."""
        count = self.clients.get(client, 0) - 1
        if count > 0:
            self.clients[client] = count
        else:
            self.clients.pop(client, None)
