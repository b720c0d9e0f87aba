"""The source ledger and the per-answer budgets (SPEC 8). Pure: decides, never does I/O.

One `Ledger` and one `BudgetCounter` live for one answer; the tools receive them in their
`gateway.tools.base.ToolContext` and the loop reads them for the sources list and the trailer.
The ledger also remembers how each source was found (`Found`): rule 1 (SPEC 7) allows the
hosts of search results only, so a page read (or where its redirects landed) never widens
what may be opened next.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
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
        read: A read of this answer reached the page (its text was given to the model);
            a source not read is known to the model only by its search result's title
            and snippet.
    """

    n: int
    url: str
    title: str
    searched: bool = False
    read: bool = False


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
        first and found by a search later counts as searched from then on, and a search
        result whose page is read later counts as read.
        """
        key = normalise_url(url)
        searched = found is Found.SEARCH
        read = found is Found.PAGE
        known = self._by_key.get(key)
        if known is not None:
            if (
                (not known.title and title)
                or (searched and not known.searched)
                or (read and not known.read)
            ):
                self._by_key[key] = replace(
                    known,
                    title=known.title or title,
                    searched=known.searched or searched,
                    read=known.read or read,
                )
            return known.n
        source = Source(len(self._by_key) + 1, url, title, searched, read)
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
        what may be read. Proved by ``tests/gateway/tools/test_ledger.py``
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
        #: Pages read, and pages reserved by reads still running (`reserve_pages`).
        self.pages_used = 0
        #: Of `pages_used`, the pages reserved by reads still running: not read yet.
        self.pages_held = 0

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

    def reserve_pages(self, wanted: int) -> int:
        """Hold up to ``wanted`` pages for a read about to run; return how many (maybe 0).

        They count against the budget at once, so reads running at the same time never
        pass it together, but they are not pages read until `settle_pages`.
        """
        granted = self.take_pages(wanted)
        self.pages_held += granted
        return granted

    def settle_pages(self, reserved: int, read: int) -> None:
        """End a reservation of ``reserved`` pages of which ``read`` were read: the
        budget is charged for those only."""
        self.pages_held = max(0, self.pages_held - reserved)
        self.give_back_pages(reserved - min(max(read, 0), reserved))

    @property
    def pages_read(self) -> int:
        """Pages read so far (the reservations of reads still running left out)."""
        return max(0, self.pages_used - self.pages_held)

    def page_refusal(self) -> str:
        """The tool text of a read refused because no page is left (`pages_left` is 0).

        Spent means read: while reads running at the same time hold the rest, the text
        says so instead, so it never disagrees with the trailer, which counts pages read.
        """
        if self.pages_held:
            return prompts.PAGE_BUDGET_HELD.format(limit=self.pages_limit)
        return prompts.PAGE_BUDGET_SPENT.format(limit=self.pages_limit)

    def trailer(self) -> str:
        """The last line of every tool result: the pages are pages read."""
        return prompts.BUDGET_TRAILER.format(
            searches_used=self.searches_used,
            searches_limit=self.searches_limit,
            pages_used=self.pages_read,
            pages_limit=self.pages_limit,
        )
