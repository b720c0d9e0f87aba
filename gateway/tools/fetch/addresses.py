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
from collections.abc import Iterable, Iterator

#: Bounds of ``ReadRequest.allowed_hosts`` in the gRPC contract (``fetcher.proto``): the
#: fetcher rejects a request breaking them, so the gateway never sends one.
MAX_ALLOWED_HOSTS = 1000
MAX_HOST_CHARS = 253
#: ``fetcher.net.urls.MAX_URL_LENGTH``: a longer address is refused whatever its host.
MAX_URL_CHARS = 8192

# Where an address starts: a scheme that starts a word ("xhttps://" or "a.https://" is
# not an address), or a bare "www." name (not inside an address, an e-mail address or a
# path). One pattern, so the starts come in order in one pass.
_START = re.compile(r"(?<![\w.+-])(?:https?://)|(?<![\w.@/:-])(?P<www>www\.)", re.IGNORECASE)
# Characters that end an address written in prose (RFC 3986 never has them unescaped).
_END = re.compile(r"[\s<>\"`{}|\\^]")
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
    # As fetcher.net.urls refuses them: such an address never reaches rule 1. A printable
    # text has none of these categories (nor any space but " "): checked in C first.
    if text.isprintable():
        return " " in text
    return any(
        ch.isspace() or unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp") for ch in text
    )


def address_spans(text: str) -> Iterator[tuple[int, int, bool]]:
    """Where the addresses written in ``text`` are: ``(start, end, bare_www)``, in order.

    Each address ends at white space, at a character that cannot be in one
    (``<>"`{}|\\^``) or where the next address starts (``https://a.example/?u=https://b``
    is two addresses, each allowing its own host), without the punctuation that follows
    an address in prose (see `_trimmed_end`). Addresses longer than
    :data:`MAX_URL_CHARS` (``https://`` counted for a bare ``www.`` name) are left out:
    the fetcher refuses them whatever their host.

    # Security
    Rule: the user's text costs time linear in its length and memory bounded by the
    longest address taken (:data:`MAX_URL_CHARS`), whatever it holds.
    Threat: one chat body freezing the event loop or taking gigabytes (issue 22,
    finding 1: ``"https://" * N`` copied the rest of the text once per start, and
    ``"https://a.example/" + ")" * N`` counted the brackets once per bracket).
    Callers may rely on: the spans are disjoint and in order (so every character is
    looked at a bounded number of times, and what is copied is at most the text), each
    end found by one forward scan shared by the addresses it ends. Proved by
    ``tests/gateway/tools/fetch/test_addresses_cost.py``.
    """
    starts = _START.finditer(text)
    current = next(starts, None)
    # Where the run of address characters containing the current start ends: one scan
    # per run, however many starts the run holds.
    run_end = -1
    while current is not None:
        following = next(starts, None)
        start = current.start()
        if start >= run_end:
            found = _END.search(text, start)
            run_end = found.start() if found is not None else len(text)
        end = run_end if following is None else min(run_end, following.start())
        end = _trimmed_end(text, start, end)
        www = current.group("www") is not None
        if end - start + (len("https://") if www else 0) <= MAX_URL_CHARS:
            yield start, end, www
        current = following


def addresses_in_text(text: str) -> list[str]:
    """Addresses written in ``text``, in order: ``http(s)://...`` and bare ``www.`` names.

    An address ends at white space, a character that cannot be in one (``<>"`{}|\\^``)
    or where the next one starts; closing punctuation after it (``.``, ``,``, ``)``...)
    is not part of it. A bare name without ``www.`` (``example.com``) is not taken: file
    names such as ``main.py`` or ``notes.md`` look the same. ``www.`` names are read as
    ``https://``. See `address_spans`.
    """
    return [_address(text, span) for span in address_spans(text)]


def _address(text: str, span: tuple[int, int, bool]) -> str:
    start, end, www = span
    return ("https://" if www else "") + text[start:end]


def _trimmed_end(text: str, start: int, end: int) -> int:
    """Where the address ``text[start:end]`` ends without the punctuation that follows an
    address in prose: sentence and quote marks, and a closing bracket the address did not
    open (``(https://en.wikipedia.org/wiki/Foo_(bar))`` keeps one). Linear: the brackets
    are counted once, then kept count of as they are dropped."""
    unmatched: dict[str, int] = {}
    while end > start:
        last = text[end - 1]
        if last in _TRAILING:
            end -= 1
            continue
        opener = _CLOSERS.get(last)
        if opener is None:
            break
        if last not in unmatched:
            unmatched[last] = text.count(last, start, end) - text.count(opener, start, end)
        if unmatched[last] <= 0:
            break
        unmatched[last] -= 1
        end -= 1
    return end


def hosts_in_text(text: str) -> list[str]:
    """Hosts of the addresses written in ``text``, in order, each once, at most
    :data:`MAX_ALLOWED_HOSTS` (no read may send more)."""
    hosts: dict[str, None] = {}
    for span in address_spans(text):
        host = host_of(_address(text, span))
        if host:
            hosts[host] = None
            if len(hosts) == MAX_ALLOWED_HOSTS:
                break
    return list(hosts)


def allowed_hosts(source_urls: Iterable[str], user_hosts: Iterable[str]) -> tuple[str, ...]:
    """Rule 1's hosts for one read: the search results' hosts, then the user's.

    Args:
        source_urls: Addresses of the answer's search results
            (`gateway.tools.ledger.Ledger.searched_urls`; pages read are not among them).
        user_hosts: The hosts of the addresses in the user's messages
            (`hosts_in_text`, worked out once per answer).

    Returns:
        Each host once, at most :data:`MAX_ALLOWED_HOSTS` (sources first).

    # Security
    Rule 1 (SPEC 7): a page's text cannot widen what may be opened; only the answer's
    search results and the user's own words can. The model's arguments are not a source
    of hosts. Proved by ``tests/gateway/tools/fetch/test_addresses.py`` and, against the
    real fetcher, ``test_fetch_run.py::test_host_outside_the_answer_is_refused``.
    """
    hosts = [host_of(url) for url in source_urls]
    unique = dict.fromkeys(host for host in [*hosts, *user_hosts] if host)
    return tuple(unique)[:MAX_ALLOWED_HOSTS]
