"""The source ledger and the per-answer budgets (SPEC 8). Pure: decides, never does I/O.

One `Ledger` and one `BudgetCounter` live for one answer; the tools receive them in their
`gateway.tools.base.ToolContext` and the loop reads them for the sources list and the trailer.
The ledger also remembers how each source was found (`Found`): rule 1 (SPEC 7) allows the
hosts of search results only, so a page read (or where its redirects landed) never widens
what may be opened next.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from gateway import prompts

_DEFAULT_PORTS = {"http": 80, "https": 443}


class Found(enum.Enum):
    """How a source came into the ledger."""

    SEARCH = "search"  # a search result: its host is allowed by rule 1
    PAGE = "page"  # a page a read reached (a start page, a link, a redirect's end)


@dataclass(frozen=True)
class Source:
    """One numbered source.

    Attributes:
        n: Its number, from 1.
        url: The address as first seen.
        title: Its title ("" when none is known yet).
        searched: Some search of this answer returned it (rule 1 allows its host).
    """

    n: int
    url: str
    title: str
    searched: bool = False


def normalise_url(url: str) -> str:
    """The form two addresses are compared in: scheme and host lower-cased, default port
    and fragment dropped. Anything unparseable is compared as written."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return url.strip()
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    if port is not None and port != _DEFAULT_PORTS.get(scheme):
        host = f"{host}:{port}"
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = f"{userinfo}@{host}" if userinfo else host
    return urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))


class Ledger:
    """Numbers every source from 1 in the order first seen; a number never changes."""

    def __init__(self) -> None:
        self._by_key: dict[str, Source] = {}

    def add(self, url: str, title: str = "", *, found: Found) -> int:
        """Number ``url`` (or return the number it already has).

        A later, non-empty title fills in a source first seen without one; a page read
        first and found by a search later counts as searched from then on.
        """
        key = normalise_url(url)
        searched = found is Found.SEARCH
        known = self._by_key.get(key)
        if known is not None:
            if (not known.title and title) or (searched and not known.searched):
                self._by_key[key] = Source(
                    known.n, known.url, known.title or title, known.searched or searched
                )
            return known.n
        source = Source(len(self._by_key) + 1, url, title, searched)
        self._by_key[key] = source
        return source.n

    def number(self, url: str) -> int | None:
        """The number of ``url``, if it has one."""
        known = self._by_key.get(normalise_url(url))
        return None if known is None else known.n

    def sources(self) -> list[Source]:
        """All sources in number order."""
        return sorted(self._by_key.values(), key=lambda s: s.n)

    def searched_urls(self) -> list[str]:
        """Addresses of the sources a search returned, in number order (rule 1's hosts).

        # Security
        Rule 1 (SPEC 7): only search results (and the user's own addresses, added by the
        caller) may be opened; a page read, a link it followed or where a redirect
        landed is numbered for citing but is not listed here, so reading cannot widen
        what may be read. Proved by ``tests/gateway/test_pure.py``
        (``test_pages_read_do_not_widen_rule_1``) and, end to end,
        ``tests/e2e/test_research.py::test_a_redirect_elsewhere_does_not_widen_rule_1``.
        """
        return [s.url for s in self.sources() if s.searched]

    def sources_message(self) -> str:
        """The sources list sent before the answer rounds."""
        lines = [prompts.SOURCES_HEADING]
        sources = self.sources()
        if not sources:
            lines.append(prompts.NO_SOURCES)
        for source in sources:
            lines.append(
                prompts.SOURCE_LINE.format(
                    n=source.n, title=source.title or source.url, url=source.url
                )
            )
        return "\n".join(lines)


class BudgetCounter:
    """Searches and pages used in one answer, against their limits."""

    def __init__(self, searches: int, pages: int) -> None:
        self.searches_limit = searches
        self.pages_limit = pages
        self.searches_used = 0
        self.pages_used = 0

    @property
    def searches_left(self) -> int:
        """Searches still allowed."""
        return max(0, self.searches_limit - self.searches_used)

    @property
    def pages_left(self) -> int:
        """Pages still allowed."""
        return max(0, self.pages_limit - self.pages_used)

    @property
    def searches_spent(self) -> bool:
        """Whether no search is left (the tool rounds stop then)."""
        return self.searches_left == 0

    def take_searches(self, wanted: int) -> int:
        """Reserve up to ``wanted`` searches; return how many were granted (maybe 0)."""
        granted = min(max(wanted, 0), self.searches_left)
        self.searches_used += granted
        return granted

    def take_pages(self, wanted: int) -> int:
        """Reserve up to ``wanted`` pages; return how many were granted (maybe 0)."""
        granted = min(max(wanted, 0), self.pages_left)
        self.pages_used += granted
        return granted

    def give_back_pages(self, unused: int) -> None:
        """Return reserved pages that were not read (a crawl that stopped early)."""
        self.pages_used = max(0, self.pages_used - max(unused, 0))

    def trailer(self) -> str:
        """The last line of every tool result."""
        return prompts.BUDGET_TRAILER.format(
            searches_used=self.searches_used,
            searches_limit=self.searches_limit,
            pages_used=self.pages_used,
            pages_limit=self.pages_limit,
        )
