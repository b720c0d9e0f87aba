"""The source ledger and the per-answer budgets (SPEC 8). Pure: decides, never does I/O.

One `Ledger` and one `BudgetCounter` live for one answer; the tools receive them in their
`gateway.tools.ToolContext` and the loop reads them for the sources list and the trailer.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from gateway import prompts

_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class Source:
    """One numbered source."""

    n: int
    url: str
    title: str

    def as_event(self) -> dict[str, object]:
        """The entry of the ``sources`` event."""
        return {"n": self.n, "url": self.url, "title": self.title}


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

    def add(self, url: str, title: str = "") -> int:
        """Number ``url`` (or return the number it already has).

        A later, non-empty title fills in a source first seen without one.
        """
        key = normalise_url(url)
        known = self._by_key.get(key)
        if known is not None:
            if not known.title and title:
                self._by_key[key] = Source(known.n, known.url, title)
            return known.n
        source = Source(len(self._by_key) + 1, url, title)
        self._by_key[key] = source
        return source.n

    def number(self, url: str) -> int | None:
        """The number of ``url``, if it has one."""
        known = self._by_key.get(normalise_url(url))
        return None if known is None else known.n

    def sources(self) -> list[Source]:
        """All sources in number order."""
        return sorted(self._by_key.values(), key=lambda s: s.n)

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
