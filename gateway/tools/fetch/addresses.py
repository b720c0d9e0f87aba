"""Rule 1's allowed hosts: hosts of the search results and of addresses the user wrote.

Pure: decides, never does I/O. The fetcher enforces rule 1 (``fetcher.net.download`` refuses
a start address whose host is not allowed, ``not_in_answer``); the gateway only says
which hosts this answer allows. To allow exactly the host the fetcher will see,
:func:`host_of` splits an address the way ``fetcher.net.urls.parse`` does (scheme, ``//``,
authority up to the first ``/``, ``?`` or ``#``, no user info, IPv6 in brackets, port
dropped) and refuses what it refuses before reading the host. The fetcher normalises the
hosts it receives itself (IDNA/UTS 46, numeric IPv4 forms), so hosts are sent as written,
lower-cased; the gateway imports nothing of the fetcher's internals.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

#: Bounds of ``ReadRequest.allowed_hosts`` in the gRPC contract (``fetcher.proto``): the
#: fetcher rejects a request breaking them, so the gateway never sends one.
MAX_ALLOWED_HOSTS = 1000
MAX_HOST_CHARS = 253
#: ``fetcher.net.urls.MAX_URL_LENGTH``: a longer address is refused whatever its host.
MAX_URL_CHARS = 8192

# A scheme that starts a word: "xhttps://" or "a.https://" is not an address.
_SCHEME_START = re.compile(r"(?<![\w.+-])https?://", re.IGNORECASE)
# A bare "www." name (not inside an address, an e-mail address or a path).
_WWW_START = re.compile(r"(?<![\w.@/:-])www\.", re.IGNORECASE)
# Characters that end an address written in prose (RFC 3986 never has them unescaped).
_TOKEN = re.compile(r"[^\s<>\"`{}|\\^]+")
# Punctuation that closes a sentence or a quote rather than an address (Latin and CJK).
_TRAILING = frozenset(".,;:!?'\"…。、，；：！？」』】〉》")
# A closing bracket ends an address only when the address did not open it.
_CLOSERS = {")": "(", "]": "[", "}": "{", "）": "（"}


def host_of(url: str) -> str | None:
    """The host the fetcher would check for ``url``, or None when it has none to check.

    None when the fetcher refuses the address before rule 1 (not http or https, user
    info, an empty or malformed authority, spaces or control characters, too long).

    # Security
    Rule 1 (SPEC 7): the allowed hosts are derived with the fetcher's own authority
    split, so a written address allows the host the fetcher will connect to and no
    other: ``https://good.example@evil.example/`` allows nothing (the fetcher refuses
    user info), ``https://evil.example#@good.example`` allows ``evil.example`` (the
    fragment starts at ``#``), as ``fetcher.net.urls.parse`` reads them. Callers may rely on
    the result being lower-case, without brackets, port or trailing dot, and at most
    :data:`MAX_HOST_CHARS` long. Proved by ``tests/gateway/tools/fetch/test_addresses.py``.
    """
    if len(url) > MAX_URL_CHARS or "\\" in url or _has_space_or_control(url):
        return None
    scheme, colon, rest = url.partition(":")
    if not colon or scheme.lower() not in ("http", "https") or not rest.startswith("//"):
        return None
    rest = rest[2:]
    end = min((i for i in (rest.find(d) for d in "/?#") if i != -1), default=len(rest))
    authority = rest[:end]
    if "@" in authority:
        return None
    if authority.startswith("["):
        close = authority.find("]")
        after = authority[close + 1 :] if close != -1 else ""
        if close == -1 or (after and not after.startswith(":")):
            return None
        host = authority[1:close]
    else:
        host = authority.partition(":")[0]
    # The fetcher drops one trailing dot ("example.com." is "example.com").
    host = host.lower().removesuffix(".")
    if not host or "%" in host or len(host) > MAX_HOST_CHARS:
        return None
    return host


def _has_space_or_control(text: str) -> bool:
    # As fetcher.net.urls refuses them: such an address never reaches rule 1.
    return any(
        ch.isspace() or unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp") for ch in text
    )


def addresses_in_text(text: str) -> list[str]:
    """Addresses written in ``text``, in order: ``http(s)://...`` and bare ``www.`` names.

    An address ends at white space or a character that cannot be in one (``<>"`{}|\\^``);
    closing punctuation after it (``.``, ``,``, ``)``...) is not part of it. A bare name
    without ``www.`` (``example.com``) is not taken: file names such as ``main.py`` or
    ``notes.md`` look the same. ``www.`` names are read as ``https://``.
    """
    found: list[tuple[int, str]] = []
    for pattern, prefix in ((_SCHEME_START, ""), (_WWW_START, "https://")):
        for start in pattern.finditer(text):
            token = _TOKEN.match(text, start.start())
            if token is None:
                continue
            found.append((start.start(), prefix + _trim(token.group())))
    return [address for _, address in sorted(found)]


def _trim(token: str) -> str:
    """``token`` without the punctuation that follows an address in prose."""
    while token:
        last = token[-1]
        if last in _TRAILING or (
            last in _CLOSERS and token.count(last) > token.count(_CLOSERS[last])
        ):
            token = token[:-1]
        else:
            break
    return token


def hosts_in_text(text: str) -> list[str]:
    """Hosts of the addresses written in ``text``, in order, each once."""
    hosts = (host_of(address) for address in addresses_in_text(text))
    return list(dict.fromkeys(host for host in hosts if host))


def allowed_hosts(source_urls: Iterable[str], user_text: str) -> tuple[str, ...]:
    """Rule 1's hosts for one read: the search results' hosts, then the user's.

    Args:
        source_urls: Addresses of the answer's search results
            (`gateway.tools.ledger.Ledger.searched_urls`; pages read are not among them).
        user_text: The text of the user's messages.

    Returns:
        Each host once, at most :data:`MAX_ALLOWED_HOSTS` (sources first).

    # Security
    Rule 1 (SPEC 7): a page's text cannot widen what may be opened; only the answer's
    search results and the user's own words can. The model's arguments are not a source
    of hosts. Proved by ``tests/gateway/tools/fetch/test_addresses.py`` and, against the
    real fetcher, ``test_fetch_run.py::test_host_outside_the_answer_is_refused``.
    """
    hosts = [host_of(url) for url in source_urls]
    hosts += hosts_in_text(user_text)
    unique = dict.fromkeys(host for host in hosts if host)
    return tuple(unique)[:MAX_ALLOWED_HOSTS]
