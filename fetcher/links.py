"""Same-site links of a page: which addresses the crawl may follow next (SPEC 7, step 8).

Pure functions. A link survives when it resolves (against ``<base href>`` or the page's final
address) to an ``http`` or ``https`` address without user info and without a port other than
443 (or the port of the page itself: production pages are on 443 only, test origins are not);
it is then written as ``https://host/path?query`` (http upgraded, fragment dropped, host
lower-cased and IDNA-encoded, unsafe path characters percent-encoded) and kept only when its
host is on the same site as the start page. Links are deduplicated and capped at
:data:`MAX_LINKS`, main-content links first (inside ``main``/``article``/``[role=main]``), then
the rest of the body, then navigation, headers, footers and sidebars. Links to files the
reader cannot read (images, media, archives, fonts, office documents) are skipped so they do
not take places among the 24.

"Same site" means the same registrable domain (eTLD+1) under the Public Suffix List shipped by
``publicsuffixlist``, private section included: ``a.github.io`` and ``b.github.io`` are different
sites, ``www.example.co.uk`` and ``news.example.co.uk`` are one. An IP address, or a host that is
itself a public suffix, is a site of its own.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING
from urllib.parse import quote, urljoin, urlsplit

import idna
from publicsuffixlist import PublicSuffixList

if TYPE_CHECKING:
    from lxml.html import HtmlElement

__all__ = [
    "MAX_LINKS",
    "normalize_host",
    "page_links",
    "resolve_link",
    "same_site_links",
    "site_of",
]

MAX_LINKS = 24

_SCHEMES = frozenset({"http", "https"})
_HOST_CHARS = re.compile(r"[a-z0-9_-]+(?:\.[a-z0-9_-]+)*")
# WHATWG URL: a host whose last label is a number is an IPv4 address in some notation
# (2130706433, 0x7f.1, 017700000001), whatever the resolver later makes of it.
_NUMERIC_LABEL = re.compile(r"(?:0x[0-9a-f]*|[0-9]+)")
# Browsers drop these from hrefs before parsing (WHATWG URL: ASCII tab or newline).
_HREF_NOISE = str.maketrans("", "", "\t\n\r")
_SCHEME = re.compile(r"([a-zA-Z][a-zA-Z0-9+.-]*):")
_ABSOLUTE_HOST = re.compile(r"\s*(?:[hH][tT][tT][pP][sS]?:)?//([A-Za-z0-9.:-]+)(?:[/?#]|\Z)")
_C0_AND_SPACE = "".join(chr(code) for code in range(0x21))
_PATH_SAFE = "/%:@!$&'()*+,;=-._~"
_QUERY_SAFE = _PATH_SAFE + "?"
_UNREADABLE = re.compile(
    r"\.(?:jpe?g|png|gif|webp|avif|svg|ico|bmp|tiff?|heic|mp[34]|m4[av]|mov|avi|mkv|webm|ogg|"
    r"oga|wav|flac|aac|zip|gz|tgz|bz2|xz|7z|rar|tar|exe|dmg|msi|deb|rpm|apk|iso|woff2?|ttf|"
    r"otf|eot|css|js|pdf|docx?|xlsx?|pptx?|odt|ods|epub)$",
    re.IGNORECASE,
)

_CHROME_ROLES = frozenset(
    {"navigation", "banner", "contentinfo", "complementary", "search", "menu", "menubar"}
)


@functools.cache
def _psl() -> PublicSuffixList:
    # Loading the bundled list takes ~70 ms: do it once, on first use, never from the network.
    return PublicSuffixList()


def _is_ip_literal(host: str) -> bool:
    if ":" in host:
        return True
    labels = host.rstrip(".").split(".")
    return bool(labels) and _NUMERIC_LABEL.fullmatch(labels[-1]) is not None


def normalize_host(host: str) -> str | None:
    """Put a host in the form sites are compared in.

    Args:
        host: A host name or IP literal as found in a URL (any case, perhaps Unicode,
            perhaps with a trailing dot or IPv6 brackets).

    Returns:
        The lower-case ASCII form (IDNA/UTS 46 for Unicode names, compressed form for IPv6,
        no trailing dot), or ``None`` if it is not a usable host.
    """
    if len(host) > 1_000:  # longer than any name IDNA could bring under 253 octets
        return None
    host = host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if ":" in host:
        try:
            return ipaddress.IPv6Address(host).compressed
        except ValueError:
            return None
    host = host.removesuffix(".")
    if not host:
        return None
    if not host.isascii():
        try:
            host = idna.encode(host, uts46=True).decode("ascii")
        except (idna.IDNAError, UnicodeError, ValueError):
            return None
    if len(host) > 253 or not _HOST_CHARS.fullmatch(host):
        return None
    return host


@functools.lru_cache(maxsize=4096)
def site_of(host: str) -> str:
    """Return the site of a host: its registrable domain under the Public Suffix List.

    # Security
    Rule: two hosts are on one site only when their registrable domains are equal. Threat:
    a page on ``attacker.github.io`` or ``evil.co.uk`` steering the crawl to a neighbour that
    merely shares a public suffix. Callers may rely on: a public suffix (``github.io``,
    ``co.uk``) and an IP literal are each a site of their own, so they never match another
    host. Proved by ``tests/fetcher/test_links.py::test_site_of``.

    Args:
        host: A host name or IP literal.

    Returns:
        The registrable domain (``news.example.co.uk`` -> ``example.co.uk``); the host itself
        when it is an IP literal, a public suffix, or not a valid host name.
    """
    normal = normalize_host(host)
    if normal is None:
        return host.strip().lower()
    if _is_ip_literal(normal):
        return normal
    registrable = _psl().privatesuffix(normal)
    return registrable if isinstance(registrable, str) else normal


_HTTPS_ONLY = frozenset({443})


def _resolve(href: str, base: str, ports: frozenset[int] = _HTTPS_ONLY) -> tuple[str, str] | None:
    """Resolve an href: ``(address, host)``, or ``None``; see :func:`resolve_link`."""
    href = href.strip(_C0_AND_SPACE).translate(_HREF_NOISE)
    scheme = _SCHEME.match(href)
    if scheme is not None and scheme.group(1).lower() not in _SCHEMES:
        return None  # javascript:, mailto:, data:, tel: ... (and no need to parse further)
    try:
        parts = urlsplit(href if scheme is not None else urljoin(base, href))
        port = parts.port
    except ValueError:
        return None
    if parts.scheme.lower() not in _SCHEMES or "@" in parts.netloc:
        return None
    if port is not None and port not in ports:
        return None
    host = normalize_host(parts.hostname or "")
    if host is None:
        return None
    path = quote(parts.path, safe=_PATH_SAFE) or "/"
    if _UNREADABLE.search(path):
        return None
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and port != 443:
        netloc = f"{netloc}:{port}"
    query = quote(parts.query, safe=_QUERY_SAFE)
    address = f"https://{netloc}{path}?{query}" if query else f"https://{netloc}{path}"
    return address, host


def resolve_link(href: str, base: str, *, ports: frozenset[int] = _HTTPS_ONLY) -> str | None:
    """Resolve one ``href`` to the absolute https address the crawl would request.

    Args:
        href: The attribute value as written in the page.
        base: The address relative links resolve against (``<base href>`` or the page's).
        ports: The ports a link may name explicitly (an explicit 443 is dropped).

    Returns:
        ``https://host[/path][?query]``, or ``None`` for links that cannot be followed:
        other schemes (``javascript:``, ``mailto:``, ``data:`` ...), user info, a port not
        in ``ports``, a malformed host, or a file type the reader cannot read.
    """
    resolved = _resolve(href, base, ports)
    return resolved[0] if resolved is not None else None


def _surely_elsewhere(href: str, wanted: str) -> bool:
    """A cheap early "no" for absolute links to other sites, which most pages are full of.

    It only ever rejects a link whose written host is on another site; anything it lets
    through is still fully resolved and checked.
    """
    match = _ABSOLUTE_HOST.match(href)
    if match is None:
        return False
    host = match.group(1).rpartition(":")[0] or match.group(1)
    return site_of(host) != wanted


def same_site_links(
    hrefs: Iterable[str],
    *,
    base: str,
    site: str,
    exclude: str | None = None,
    limit: int = MAX_LINKS,
    ports: frozenset[int] = _HTTPS_ONLY,
) -> tuple[str, ...]:
    """Resolve hrefs and keep the first ``limit`` distinct ones on ``site``.

    # Security
    Rule: only https addresses on the start page's site, without user info or a foreign
    port, leave this function. Threat: a page sending the crawl to another site (a shared
    hosting neighbour, an IP address, an internal name) or smuggling credentials. Callers may
    rely on: every result satisfies :func:`resolve_link` and has ``site_of(host) ==
    site_of(site)``. The address checks of SPEC 7 step 1-4 still run on every hop.
    Proved by ``tests/fetcher/test_links.py``.

    Args:
        hrefs: Raw ``href`` values, best first.
        base: The address relative links resolve against.
        site: The site links must be on (a registrable domain, or any host of it).
        exclude: An address to leave out (the page itself).
        limit: The most links to return.
        ports: The ports a link may name explicitly.

    Returns:
        Absolute https addresses, in the order given, without duplicates.
    """
    wanted = site_of(site)
    seen: set[str] = set()
    if exclude is not None:
        seen.add(exclude)
    kept: list[str] = []
    tried: set[str] = set()
    for href in hrefs:
        if len(kept) >= limit:
            break
        if href in tried or _surely_elsewhere(href, wanted):
            continue
        tried.add(href)
        resolved = _resolve(href, base, ports)
        if resolved is None or resolved[0] in seen:
            continue
        seen.add(resolved[0])
        if site_of(resolved[1]) == wanted:
            kept.append(resolved[0])
    return tuple(kept)


def _base_address(root: HtmlElement, url: str) -> str:
    """The address relative links resolve against: the first ``<base href>``, else ``url``."""
    for base in root.iter("base"):
        href = base.get("href")
        if href is None:
            continue
        try:
            candidate = urljoin(url, href.strip())
            scheme = urlsplit(candidate).scheme.lower()
        except ValueError:
            return url
        # A base with another scheme (javascript:, data:) would poison every relative link.
        return candidate if scheme in _SCHEMES else url
    return url


def _anchors_under(landmarks: Iterable[HtmlElement]) -> dict[HtmlElement, None]:
    """The ``<a href>`` elements inside any of the landmarks, in order, without repeats."""
    found: dict[HtmlElement, None] = {}
    for landmark in landmarks:
        for anchor in landmark.iter("a"):
            if anchor.get("href") is not None:
                found[anchor] = None
    return found


def _ranked_hrefs(root: HtmlElement) -> Iterator[str]:
    """Yield href values best first: main content, then the rest of the body, then chrome.

    A generator, so the work stops once the caller has its 24 links: on most pages the
    main content alone supplies them. Anchors key sets and dicts: lxml hands back the same
    proxy object for a node while a reference to it is alive, which these containers keep.
    """
    with_role = root.xpath("//body//*[@role]")
    # nav/aside/menu and chrome roles are chrome even inside an article (a table of
    # contents, a "read next" box); header/footer only outside it (byline, tags).
    chrome = _anchors_under(
        [
            *root.iter("nav", "aside", "menu"),
            *(e for e in with_role if e.get("role") in _CHROME_ROLES),
        ]
    )
    main = _anchors_under(
        [*root.iter("main", "article"), *(e for e in with_role if e.get("role") == "main")]
    )
    for anchor in main:
        if anchor not in chrome:
            yield str(anchor.get("href"))
    edge = _anchors_under(root.iter("header", "footer"))
    later: list[HtmlElement] = []
    for anchor in root.iter("a"):
        if anchor in main and anchor not in chrome:
            continue
        if anchor in chrome or anchor in edge:
            later.append(anchor)
        elif anchor.get("href") is not None:
            yield str(anchor.get("href"))
    for anchor in later:
        yield str(anchor.get("href"))


def page_links(root: HtmlElement, *, url: str, site: str | None = None) -> tuple[str, ...]:
    """Collect a page's same-site links from its parsed, unpruned tree.

    Args:
        root: The document root as parsed (before any pruning).
        url: The page's final address.
        site: The site links must be on; ``None`` means the site of ``url``.

    Returns:
        At most :data:`MAX_LINKS` https addresses, main-content links first.
    """
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        # Links may stay on the page's own port: 443 in production, where the downloader
        # refuses any other; a test origin's port in tests.
        ports = _HTTPS_ONLY | {parts.port} if parts.port else _HTTPS_ONLY
    except ValueError:
        return ()
    own = resolve_link(url, url, ports=ports)
    return same_site_links(
        _ranked_hrefs(root),
        base=_base_address(root, url),
        site=site if site is not None else host,
        exclude=own,
        ports=ports,
    )
