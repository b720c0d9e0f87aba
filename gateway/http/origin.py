"""Which web pages may call the MCP endpoint, and the CORS answer they get. Pure.

The MCP specification (2025-11-25, Streamable HTTP, "Security Warning") requires a server
to validate the ``Origin`` header of every request and to answer 403 when it is present
and not allowed: a web page the user visits could otherwise reach a gateway on the
user's own machine or network (DNS rebinding, or plain cross-site requests), with no key
needed when the gateway runs without keys on loopback. Requests without ``Origin``
(agents, Open WebUI's server, the SDK's client: anything that is not a browser) pass;
a browser always sends ``Origin`` on the POST that opens a session.

A page on an allowed origin (``[mcp] allowed_origins``, e.g. llama-server's web UI)
gets the CORS headers it needs to read the answers and the ``Mcp-Session-Id`` header.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

_DEFAULT_PORTS = {"http": 80, "https": 443}

#: Request headers a browser client of the MCP endpoint sends (answered in preflights).
ALLOWED_HEADERS = (
    "authorization, content-type, accept, mcp-session-id, mcp-protocol-version, last-event-id"
)
#: Methods of the Streamable HTTP transport.
ALLOWED_METHODS = "GET, POST, DELETE"
#: Response headers a browser page may read: the session id the client must send back.
EXPOSED_HEADERS = "mcp-session-id"
#: Seconds a browser may cache a preflight answer.
PREFLIGHT_MAX_AGE = "600"


class OriginVerdict(enum.Enum):
    """What the ``Origin`` header of one request means."""

    ABSENT = "absent"  # not a browser's cross-origin request: no CORS headers
    ALLOWED = "allowed"  # an allowed page: answer with CORS headers
    REFUSED = "refused"  # any other page: 403


def normalise_origin(origin: str) -> str | None:
    """``scheme://host[:port]`` lower-cased, default port dropped; None if not an origin.

    ``null`` (sandboxed frames, ``file:`` pages), user info, a path, a query or a
    fragment make it not an origin.
    """
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if (
        scheme not in _DEFAULT_PORTS
        or not host
        or "@" in parts.netloc
        or parts.path
        or parts.query
        or parts.fragment
    ):
        return None
    if ":" in host:
        host = f"[{host}]"
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        return f"{scheme}://{host}:{port}"
    return f"{scheme}://{host}"


@dataclass(frozen=True)
class OriginPolicy:
    """The allowed origins of one gateway, normalised once."""

    allowed: frozenset[str]

    @classmethod
    def of(cls, origins: Iterable[str]) -> OriginPolicy:
        """The policy allowing ``origins`` (entries that are not origins allow nothing)."""
        normalised = (normalise_origin(o) for o in origins)
        return cls(frozenset(o for o in normalised if o is not None))

    def check(self, origin: str | None) -> OriginVerdict:
        """Judge one request's ``Origin`` header (None when absent).

        # Security
        Rule: a request to ``/mcp`` whose ``Origin`` is present and not one of
        ``[mcp] allowed_origins`` is refused with 403 before its key is looked at
        (MCP 2025-11-25, Streamable HTTP: servers MUST validate Origin).
        Threat: a web page in the user's browser driving the research tools of a gateway
        it can reach (DNS rebinding to loopback, or cross-site requests on a LAN); with
        no keys configured on loopback nothing else would stop it.
        Callers may rely on: ``ALLOWED`` only for an exact match after normalisation
        (scheme and host case, default port); ``null``, malformed values and look-alikes
        (another port, scheme or subdomain) are ``REFUSED``; an absent header is
        ``ABSENT`` (not a browser page). Proved by ``tests/gateway/mcp/test_origin.py``
        and, end to end, ``tests/e2e/test_mcp.py::test_a_foreign_origin_is_refused``.
        """
        if origin is None:
            return OriginVerdict.ABSENT
        normalised = normalise_origin(origin)
        if normalised is not None and normalised in self.allowed:
            return OriginVerdict.ALLOWED
        return OriginVerdict.REFUSED


def cors_headers(origin: str, *, preflight: bool) -> list[tuple[bytes, bytes]]:
    """The CORS response headers for an allowed ``origin`` (as the browser sent it)."""
    headers = [
        (b"access-control-allow-origin", origin.encode("latin-1")),
        (b"vary", b"Origin"),
    ]
    if preflight:
        headers += [
            (b"access-control-allow-methods", ALLOWED_METHODS.encode()),
            (b"access-control-allow-headers", ALLOWED_HEADERS.encode()),
            (b"access-control-max-age", PREFLIGHT_MAX_AGE.encode()),
        ]
    else:
        headers.append((b"access-control-expose-headers", EXPOSED_HEADERS.encode()))
    return headers
