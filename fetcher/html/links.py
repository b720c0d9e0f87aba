"""Same-site links of a page: which addresses the crawl may follow next (SPEC 7, step 8).

Pure functions. A link is resolved against ``<base href>`` or the page's final address
(:func:`fetcher.net.urls.resolve_reference`) and then read by the download's own parser,
:func:`fetcher.net.urls.parse`: there is one address parser, so the host whose site is judged here
is the host the download connects to (http upgraded, ``:80`` of an http link dropped like
that of a redirect, fragment dropped, IDNA/UTS 46 and numeric hosts normalised). A link
survives when that parse accepts it under the page's ports (443, or the page's own port:
production pages are on 443 only, test origins are not), its address is at most
:data:`MAX_LINK_LENGTH` characters, and its host is on the same site as the start page.
Links are deduplicated and capped at :data:`MAX_LINKS`, main-content links first (inside
``main``/``article``/``[role=main]``), then the rest of the body, then navigation, headers,
footers and sidebars. Links to files the reader cannot read (images, media, archives, fonts,
office documents) are skipped so they do not take places among the 24; links to PDFs are
kept, since the crawl reads PDFs (and follows no links out of them).

"Same site" means the same registrable domain (eTLD+1) under the Public Suffix List shipped by
``publicsuffixlist``, private section included: ``a.github.io`` and ``b.github.io`` are different
sites, ``www.example.co.uk`` and ``news.example.co.uk`` are one. An IP address, or a host that is
itself a public suffix, is a site of its own.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, cast

from publicsuffixlist import PublicSuffixList

from fetcher.net.urls import Address, Refused, normalise_host, parse, resolve_reference

if TYPE_CHECKING:
    from lxml.html import HtmlElement

__all__ = [
    "MAX_LINKS",
    "MAX_LINK_LENGTH",
    "are_page_links",
    "page_links",
    "resolve_link",
    "same_site_links",
    "site_of",
]

MAX_LINKS = 24
#: Longer links are skipped: real ones are far shorter (sitemaps cap them at 2,048), and a
#: link travels in the report when it fails, so its size is bounded where it is found.
MAX_LINK_LENGTH = 2048

# Browsers drop these from hrefs before parsing (WHATWG URL: ASCII tab or newline).
_HREF_NOISE = str.maketrans("", "", "\t\n\r")
_C0_AND_SPACE = "".join(chr(code) for code in range(0x21))
_ABSOLUTE_HOST = re.compile(r"\s*(?:[hH][tT][tT][pP][sS]?:)?//([A-Za-z0-9.:-]+)(?:[/?#]|\Z)")
_UNREADABLE = re.compile(
    r"\.(?:jpe?g|png|gif|webp|avif|svg|ico|bmp|tiff?|heic|mp[34]|m4[av]|mov|avi|mkv|webm|ogg|"
    r"oga|wav|flac|aac|zip|gz|tgz|bz2|xz|7z|rar|tar|exe|dmg|msi|deb|rpm|apk|iso|woff2?|ttf|"
    r"otf|eot|css|js|docx?|xlsx?|pptx?|odt|ods|epub)$",
    re.IGNORECASE,
)

_CHROME_TAGS = frozenset({"nav", "aside", "menu"})
_CHROME_ROLES = frozenset(
    {"navigation", "banner", "contentinfo", "complementary", "search", "menu", "menubar"}
)
_MAIN_TAGS = frozenset({"main", "article"})
_EDGE_TAGS = frozenset({"header", "footer"})

_HTTPS_ONLY = frozenset({443})
# Every TCP port, to read the page's own address whatever its port. A range, not a set: a
# set of 65,535 ints held 4 MB in every process, which each render worker's fork copied the
# page tables of (and building it per call cost ~5 ms).
_ANY_PORT = range(1, 65536)


@functools.cache
def _psl() -> PublicSuffixList:
    # Loading the bundled list takes ~70 ms: do it once, on first use, never from the network.
    return PublicSuffixList()


@functools.lru_cache(maxsize=4096)
def _site_of_normal(host: str, is_ip: bool) -> str:
    if is_ip:
        return host
    registrable = _psl().privatesuffix(host)
    return registrable if isinstance(registrable, str) else host


def site_of(host: str) -> str:
    """Return the site of a host: its registrable domain under the Public Suffix List.

    The host is normalised by the address parser's own :func:`fetcher.net.urls.normalise_host`
    first, so ``2130706433`` is the site ``127.0.0.1``, as the download would see it.

    # Security
    Rule: two hosts are on one site only when their registrable domains are equal. Threat:
    a page on ``attacker.github.io`` or ``evil.co.uk`` steering the crawl to a neighbour that
    merely shares a public suffix. Callers may rely on: a public suffix (``github.io``,
    ``co.uk``) and an IP literal are each a site of their own, so they never match another
    host. Proved by ``tests/fetcher/html/test_links.py::test_site_of``.

    Args:
        host: A host name or IP literal (IPv6 with or without brackets).

    Returns:
        The registrable domain (``news.example.co.uk`` -> ``example.co.uk``); the host itself
        when it is an IP literal, a public suffix, or not a valid host name.
    """
    written = host.strip()
    if ":" in written and not written.startswith("["):
        written = f"[{written}]"  # a bare IPv6 address
    normal = normalise_host(written)
    if isinstance(normal, Refused):
        return host.strip().lower()
    return _site_of_normal(normal[0], normal[1] is not None)


def _address_site(address: Address) -> str:
    return _site_of_normal(address.host, address.ip is not None)


def _follow(href: str, base: Address, ports: frozenset[int]) -> Address | None:
    """Resolve an href with the one parser: the address to request, or ``None``."""
    if len(href) > 4 * MAX_LINK_LENGTH:
        return None  # longer than any link kept, whatever its spaces and noise
    href = href.strip(_C0_AND_SPACE).translate(_HREF_NOISE)
    address = parse(resolve_reference(base, href), ports=ports)
    if isinstance(address, Refused) or len(address.url) > MAX_LINK_LENGTH:
        return None
    if _UNREADABLE.search(address.target.partition("?")[0]):
        return None
    return address


def resolve_link(href: str, base: str, *, ports: frozenset[int] = _HTTPS_ONLY) -> str | None:
    """Resolve one ``href`` to the absolute https address the crawl would request.

    Args:
        href: The attribute value as written in the page.
        base: The address relative links resolve against (``<base href>`` or the page's).
        ports: The ports a link may name explicitly (an explicit 443 is dropped).

    Returns:
        The normalised address (:attr:`fetcher.net.urls.Address.url`), or ``None`` for links
        that cannot be followed: other schemes (``javascript:``, ``mailto:``, ``data:``
        ...), user info, a port not in ``ports``, anything the parser refuses, an address
        over :data:`MAX_LINK_LENGTH` characters, or a file type the reader cannot read.
    """
    page = parse(base, ports=ports)
    if isinstance(page, Refused):
        return None
    address = _follow(href, page, ports)
    return address.url if address is not None else None


def _surely_elsewhere(href: str, wanted: str, known: dict[str, bool]) -> bool:
    """A cheap early "no" for absolute links to other sites, which most pages are full of.

    It only ever rejects a link whose written host is on another site, normalised by the
    parser's own :func:`fetcher.net.urls.normalise_host` (the pattern admits no ``@``, ``%``,
    ``[`` or ``\\``, so the parser would find the same host); anything it lets through is
    still fully parsed and checked. ``known`` holds the answers for the written hosts met so
    far on the page (a page links to a few hosts many times).
    """
    match = _ABSOLUTE_HOST.match(href)
    if match is None:
        return False
    written = match.group(1).rpartition(":")[0] or match.group(1)
    elsewhere = known.get(written)
    if elsewhere is None:
        normal = normalise_host(written)
        elsewhere = not isinstance(normal, Refused) and (
            _site_of_normal(normal[0], normal[1] is not None) != wanted
        )
        known[written] = elsewhere
    return elsewhere


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
    port, leave this function, each exactly as :func:`fetcher.net.urls.parse` reads it. Threat:
    a page sending the crawl to another site (a shared hosting neighbour, an IP address, an
    internal name), smuggling credentials, or a parser differential between the crawl's
    same-site decision and the download's connection. Callers may rely on: every result
    ``r`` satisfies ``parse(r).url == r`` and ``site_of(parse(r).host) == site_of(site)``.
    The address checks of SPEC 7 steps 1-4 still run on every hop. Proved by
    ``tests/fetcher/html/test_links.py``
    (``test_same_site_decision_and_download_agree_on_the_host``).

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
    page = parse(base, ports=ports)
    if isinstance(page, Refused):
        return ()
    wanted = site_of(site)
    seen: set[str] = set()
    if exclude is not None:
        seen.add(exclude)
    kept: list[str] = []
    # Each distinct href is judged once; both hold at most what the page's hrefs hold.
    tried: set[str] = set()
    hosts: dict[str, bool] = {}
    for href in hrefs:
        if len(kept) >= limit:
            break
        if href in tried:
            continue
        tried.add(href)
        if _surely_elsewhere(href, wanted, hosts):
            continue
        address = _follow(href, page, ports)
        if address is None or address.url in seen:
            continue
        seen.add(address.url)
        if _address_site(address) == wanted:
            kept.append(address.url)
    return tuple(kept)


def _base_address(root: HtmlElement, page: Address, ports: frozenset[int]) -> Address:
    """The address relative links resolve against: the first ``<base href>``, else the page."""
    for base in root.iter("base"):
        href = base.get("href")
        if href is None:
            continue
        # A base the parser refuses (javascript:, data:, another port) would poison every
        # relative link: the page's own address is used instead.
        candidate = parse(resolve_reference(page, href.strip()), ports=ports)
        return candidate if isinstance(candidate, Address) else page
    return page


# What an element and its ancestors say about the links inside it (bit flags).
_IN_MAIN, _IN_CHROME, _IN_EDGE, _IN_BODY = 1, 2, 4, 8


def _landmarks(element: HtmlElement, around: int) -> int:
    """The flags of ``element``: those of its parent (``around``) and what it adds."""
    tag = element.tag
    if not isinstance(tag, str):
        return around
    role = element.get("role") if around & _IN_BODY else None
    if tag in _MAIN_TAGS or role == "main":
        around |= _IN_MAIN
    if tag in _CHROME_TAGS or role in _CHROME_ROLES:
        around |= _IN_CHROME
    if tag in _EDGE_TAGS:
        around |= _IN_EDGE
    if tag == "body":
        around |= _IN_BODY
    return around


def _ranked_hrefs(root: HtmlElement) -> Iterator[str]:
    """Yield href values best first: main content, then the rest of the body, then chrome.

    nav/aside/menu and chrome roles are chrome even inside an article (a table of contents,
    a "read next" box); header/footer only outside it (byline, tags).

    Only anchors and their ancestors are looked at, in document order, with the chain of
    open ancestors on a stack: an anchor climbs to the nearest ancestor already on it, so
    each element is classified once and popped once (linear in the page, memory bounded by
    its depth, whatever its nesting: nested landmarks used to cost depth x links). The
    stack keeps the lxml proxies alive, so an element is the same key each time it is met.
    """
    main: list[str] = []
    body: list[str] = []
    later: list[str] = []
    stack: list[tuple[HtmlElement, int]] = [(root, _landmarks(root, 0))]
    depth_of: dict[HtmlElement, int] = {root: 0}
    for anchor in root.iter("a"):
        href = anchor.get("href")
        if href is None:
            continue
        climbed: list[HtmlElement] = []
        element = anchor
        # The root is on the stack and every anchor is inside it: the climb ends there.
        while element not in depth_of:
            climbed.append(element)
            element = cast("HtmlElement", element.getparent())
        # The anchor's open ancestors are the stack up to the one reached; the rest closed.
        depth = depth_of[element]
        for closed, _ in stack[depth + 1 :]:
            del depth_of[closed]
        del stack[depth + 1 :]
        flags = stack[depth][1]
        for opened in reversed(climbed):
            flags = _landmarks(opened, flags)
            depth_of[opened] = len(stack)
            stack.append((opened, flags))
        if flags & _IN_CHROME:
            later.append(href)
        elif flags & _IN_MAIN:
            main.append(href)
        elif flags & _IN_EDGE:
            later.append(href)
        else:
            body.append(href)
    yield from main
    yield from body
    yield from later


def page_links(root: HtmlElement, *, url: str, site: str | None = None) -> tuple[str, ...]:
    """Collect a page's same-site links from its parsed, unpruned tree.

    Args:
        root: The document root as parsed (before any pruning).
        url: The page's final address.
        site: The site links must be on; ``None`` means the site of ``url``.

    Returns:
        At most :data:`MAX_LINKS` https addresses, main-content links first.
    """
    # Links may stay on the page's own port: 443 in production, where the downloader
    # refuses any other; a test origin's port in tests.
    page = parse(url, ports=_ANY_PORT)
    if isinstance(page, Refused):
        return ()
    ports = _HTTPS_ONLY | {page.port}
    return same_site_links(
        _ranked_hrefs(root),
        base=_base_address(root, page, ports).url,
        site=site if site is not None else page.host,
        exclude=page.url,
        ports=ports,
    )


def are_page_links(links: Sequence[str], *, url: str, site: str) -> bool:
    """Whether ``links`` could be what :func:`page_links` found on the page at ``url``.

    That is: at most :data:`MAX_LINKS` distinct addresses, each exactly as the address
    parser writes it, at most :data:`MAX_LINK_LENGTH` long, on https with the page's
    ports (443, or the page's own), of a type the reader can read, on ``site``.

    # Security
    Links come back from a render worker, a process that parsed hostile bytes; the crawl
    follows them only when this holds, so a subverted or buggy worker cannot send the
    crawl to another site, another port or past the link cap. Proved by
    ``tests/fetcher/html/test_links.py::test_are_page_links``.
    """
    page = parse(url, ports=_ANY_PORT)
    if isinstance(page, Refused):
        return not links
    ports = _HTTPS_ONLY | {page.port}
    kept = same_site_links(links, base=page.url, site=site, limit=MAX_LINKS, ports=ports)
    return len(links) <= MAX_LINKS and kept == tuple(links)
