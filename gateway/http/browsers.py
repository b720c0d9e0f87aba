"""What a request may be, since browsers are clients too: the Host, Origin and POST media
type rules of SPEC 2, and who the client is. Pure.

A hostile page the user visits can make the browser send requests to the gateway: a form
post or a ``no-cors`` fetch (``text/plain``, no preflight) to a gateway on the user's
own machine, or, after re-pointing its own name at 127.0.0.1 (DNS rebinding), requests
the browser thinks are the page's own. The rules here stop both:

- ``POST`` must be ``Content-Type: application/json``: a page can send that to another
  origin only after a CORS preflight, which the gateway never grants (`media_type_ok`).
- An ``Origin`` that is neither the gateway's own (the host and port the browser used:
  the request's ``Host``, or the forwarded host when the peer is a trusted proxy) nor
  listed in ``allowed_origins`` is refused (`origin_allowed`).
- Without keys, only a ``Host`` of ``localhost``, ``*.localhost`` or an IP address is
  answered (`gateway.http.auth.addressed_to_loopback`): a rebound page's requests name its
  own host.
- Two ``Host`` headers, or one holding a comma, are malformed (`host_problem`): which
  one a part reads would decide what is allowed.

The client (`client_of`) is the peer address, or the address a trusted proxy forwarded:
behind a reverse proxy every peer is the proxy, and per-client limits must not throttle
everyone together.
"""

from __future__ import annotations

import enum
import functools
import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from gateway.http.auth import addressed_to_loopback
from gateway.http.origin import OriginPolicy, OriginVerdict, normalise_origin

_DEFAULT_PORTS = {"http": 80, "https": 443}

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class Refusal(enum.StrEnum):
    """Why a request is refused before any route sees it (the metric's ``reason``)."""

    BAD_HOST = "bad_host"  # two Host headers, or one holding a comma (400)
    FOREIGN_HOST = "foreign_host"  # no keys, and the Host is a name not loopback (403)
    FOREIGN_ORIGIN = "foreign_origin"  # an Origin neither the gateway's nor allowed (403)
    MEDIA_TYPE = "media_type"  # a POST that is not application/json (415)


@dataclass(frozen=True)
class TrustedProxies:
    """The reverse proxies whose forwarded headers the operator trusts (``trusted_proxies``)."""

    networks: tuple[Network, ...] = ()

    @classmethod
    def of(cls, entries: Iterable[str]) -> TrustedProxies:
        """The proxies at ``entries``: addresses or networks (``127.0.0.1``, ``10.0.0.0/8``),
        already checked by the settings."""
        return cls(tuple(ipaddress.ip_network(e.strip(), strict=False) for e in entries))

    def trusts(self, peer: str | None) -> bool:
        """Whether the peer address ``peer`` is one of the trusted proxies."""
        if peer is None or not self.networks:
            return False
        try:
            address = ipaddress.ip_address(peer)
        except ValueError:
            return False
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        return any(address in network for network in self.networks)


#: The request headers the rules read.
_READ = frozenset({b"host", b"origin", b"content-type", b"x-forwarded-host", b"x-forwarded-for"})


@dataclass(frozen=True)
class Head:
    """What the rules read of one request's head (every value as the client sent it).

    Attributes:
        method: The request method.
        hosts: Every ``Host`` header.
        origin: The ``Origin`` header, or None.
        content_types: Every ``Content-Type`` header.
        peer: The address the connection came from, or None (a Unix socket).
        forwarded_hosts: Every ``X-Forwarded-Host`` header.
        forwarded_for: Every ``X-Forwarded-For`` header.
    """

    method: str
    hosts: tuple[str, ...] = ()
    origin: str | None = None
    content_types: tuple[str, ...] = ()
    peer: str | None = None
    forwarded_hosts: tuple[str, ...] = ()
    forwarded_for: tuple[str, ...] = ()

    @classmethod
    def of(cls, method: str, headers: Sequence[tuple[bytes, bytes]], peer: str | None) -> Head:
        """The head of an ASGI request (``scope["headers"]``, lower-case names)."""
        found: dict[bytes, list[str]] = {}
        for name, value in headers:
            if name in _READ:
                found.setdefault(name, []).append(value.decode("latin-1"))
        origins = found.get(b"origin", [])
        return cls(
            method=method,
            hosts=tuple(found.get(b"host", [])),
            # Two Origin headers: the first judged; a browser never sends two.
            origin=origins[0] if origins else None,
            content_types=tuple(found.get(b"content-type", [])),
            peer=peer,
            forwarded_hosts=tuple(found.get(b"x-forwarded-host", [])),
            forwarded_for=tuple(found.get(b"x-forwarded-for", [])),
        )


def _last_entry(values: Sequence[str]) -> str | None:
    """The last entry of a comma-separated header sent once or more: the one the proxy
    next to the gateway wrote (those before it came from further away, or the client)."""
    entries = [e.strip() for value in values for e in value.split(",")]
    entries = [e for e in entries if e]
    return entries[-1] if entries else None


def host_problem(head: Head) -> Refusal | None:
    """``BAD_HOST`` for two ``Host`` headers or one holding a comma, else None.

    # Security
    Rule (SPEC 2): a request with two ``Host`` headers, or a ``Host`` holding a comma,
    is refused with 400 before anything reads its host.
    Threat: parts reading different hosts of one request (the first, the last, or the
    part of ``localhost:80,evil.example`` before the port): the keyless host rule
    passes ``localhost`` while a browser's origin check, a proxy or a log sees
    ``evil.example``.
    Callers may rely on: when None, at most one ``Host``, without a comma. Proved by
    ``tests/gateway/http/test_browsers.py``.
    """
    if len(head.hosts) > 1 or any("," in host for host in head.hosts):
        return Refusal.BAD_HOST
    return None


def effective_host(head: Head, proxies: TrustedProxies) -> str | None:
    """The host the client addressed: the trusted proxy's forwarded host, else ``Host``."""
    if proxies.trusts(head.peer):
        forwarded = _last_entry(head.forwarded_hosts)
        if forwarded is not None:
            return forwarded
    return head.hosts[0] if head.hosts else None


def client_of(head: Head, proxies: TrustedProxies) -> str | None:
    """Who the client is for the per-client limits: the address a trusted proxy forwarded
    (the last ``X-Forwarded-For`` entry, the one it wrote), else the peer address.

    # Security
    Rule: per-client limits count by this address; forwarded headers are believed only
    from a peer in ``trusted_proxies``.
    Threat: behind a reverse proxy every peer is the proxy, so a per-peer limit would
    throttle everyone together; believing a forwarded header from anyone else would let
    a client pose as many clients and pass its limits.
    Callers may rely on: the peer address unless the peer is trusted and forwarded a
    valid address. Proved by ``tests/gateway/http/test_browsers.py``.
    """
    if proxies.trusts(head.peer):
        forwarded = _last_entry(head.forwarded_for)
        if forwarded is not None:
            try:
                return str(ipaddress.ip_address(forwarded))
            except ValueError:
                pass
    return head.peer


def _host_and_port(host: str) -> tuple[str, int | None] | None:
    """``host[:port]`` (``[v6][:port]``) lower-cased; None when it is not one."""
    value = host.strip().lower()
    if value.startswith("["):
        close = value.find("]")
        if close == -1:
            return None
        name, rest = value[: close + 1], value[close + 1 :]
        if rest and not rest.startswith(":"):
            return None
        port_text = rest[1:] if rest else ""
    else:
        name, colon, port_text = value.partition(":")
        if colon and not port_text:
            return None
    if not name:
        return None
    if not port_text:
        return name, None
    if not port_text.isdigit() or len(port_text) > 5:
        return None
    return name, int(port_text)


@functools.lru_cache(maxsize=1024)
def is_own_origin(origin: str, host: str | None) -> bool:
    """Whether ``origin`` is the gateway's own: the host and port the browser used.

    A ``Host`` without a port is the default port of the page's scheme (a TLS proxy in
    front: the browser's scheme is https, the gateway's http). Cached: a client sends the
    same pair with every request (the cache is bounded, so varied pairs cost only time).
    """
    normalised = normalise_origin(origin)
    if normalised is None or host is None:
        return False
    parts = urlsplit(normalised)
    name = parts.netloc.rpartition(":")[0] if parts.port is not None else parts.netloc
    port = parts.port if parts.port is not None else _DEFAULT_PORTS[parts.scheme]
    addressed = _host_and_port(host)
    if addressed is None or addressed[0].removesuffix(".") != name.removesuffix("."):
        return False
    return addressed[1] == port or (addressed[1] is None and port == _DEFAULT_PORTS[parts.scheme])


def origin_allowed(head: Head, *, allowed: OriginPolicy, proxies: TrustedProxies) -> bool:
    """Whether the request's ``Origin`` may reach the gateway.

    # Security
    Rule (SPEC 2): a request carrying an ``Origin`` that is neither the gateway's own
    (the request's ``Host``, or the forwarded host when the peer is a trusted proxy) nor
    one of ``allowed_origins`` is refused with 403, on every route. No ``Origin`` (not a
    browser, or a browser's same-origin GET) passes.
    Threat: a page on another site driving the local model, the fetcher and the MCP
    tools through the user's browser (a form post, a ``no-cors`` fetch), or reading
    ``/healthz``'s addresses.
    Callers may rely on: True only for an absent ``Origin``, the gateway's own origin or
    an exact allowed one after normalisation (`gateway.http.origin.normalise_origin`);
    ``null`` and malformed values are refused. Proved by
    ``tests/gateway/http/test_browsers.py``.
    """
    if head.origin is None:
        return True
    if is_own_origin(head.origin, effective_host(head, proxies)):
        return True
    return bool(allowed.allowed) and allowed.check(head.origin) is OriginVerdict.ALLOWED


def media_type_ok(head: Head) -> bool:
    """Whether the request may carry its body: anything but ``POST``, or one ``POST``
    with ``Content-Type: application/json`` (parameters such as ``charset`` allowed).

    # Security
    Rule (SPEC 2): every ``POST`` carries ``Content-Type: application/json``, else 415.
    Threat: a page's form post or ``no-cors`` fetch (``text/plain``,
    ``application/x-www-form-urlencoded``, ``multipart/form-data``, or no type), which a
    browser sends to any origin without a preflight; the Origin check stops those that
    say where they come from, this stops those that do not (old browsers, extensions).
    Callers may rely on: True for a POST only with exactly one ``Content-Type`` whose
    media type is ``application/json``. Proved by ``tests/gateway/http/test_browsers.py``.
    """
    if head.method != "POST":
        return True
    if len(head.content_types) != 1:
        return False
    media_type = head.content_types[0].partition(";")[0].strip().lower()
    return media_type == "application/json"


def judge(
    head: Head,
    *,
    keyless: bool,
    allowed: OriginPolicy,
    proxies: TrustedProxies,
    check_origin: bool = True,
) -> Refusal | None:
    """The first rule ``head`` breaks, or None: host, keyless host, origin, media type.

    Args:
        head: The request's head.
        keyless: No access keys are configured (the keyless host rule applies).
        allowed: ``allowed_origins``.
        proxies: ``trusted_proxies``.
        check_origin: False where another guard judges the Origin with its own list
            (``/mcp``: `gateway.mcp.http.McpOriginGuard`).
    """
    problem = host_problem(head)
    if problem is not None:
        return problem
    if keyless and not addressed_to_loopback(effective_host(head, proxies)):
        return Refusal.FOREIGN_HOST
    if check_origin and not origin_allowed(head, allowed=allowed, proxies=proxies):
        return Refusal.FOREIGN_ORIGIN
    if not media_type_ok(head):
        return Refusal.MEDIA_TYPE
    return None
