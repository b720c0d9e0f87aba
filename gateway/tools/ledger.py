"""The source ledger and the per-answer budgets (SPEC 8). Pure: decides, never does I/O.

One `Ledger` and one `BudgetCounter` live for one answer (the counter holds each
`BudgetKind` a tool declares, SPEC 8's two always); the tools receive them in their
`gateway.tools.base.ToolContext` and the loop reads them for the sources list and the trailer.
The ledger also remembers how each source was found (`Found`): rule 1 (SPEC 7) allows the
hosts of search results only, so a page read (or where its redirects landed) never widens
what may be opened next.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from urllib.parse import urlsplit, urlunsplit

from gateway import prompts
from gateway.settings import Budgets

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


@dataclass(frozen=True, slots=True)
class BudgetKind:
    """One kind of per-answer budget, as the tool that spends it declares it
    (`gateway.tools.base.Tool.budget`).

    Attributes:
        name: What is counted: the counter's key ("searches", "pages").
        setting: The ``[budgets]`` setting its limit comes from (a field of
            `gateway.settings.Budgets`).
        trailer: Its part of the budget trailer, ``{used}`` and ``{limit}`` filled in.
        ends_tools: Once it is spent the tool rounds end (SPEC 3.5: the search budget).
    """

    name: str
    setting: str
    trailer: str
    ends_tools: bool = False


#: SPEC 8's budgets: 16 searches (each query and sub-question is one) and 12 pages read.
SEARCHES = BudgetKind("searches", "searches", prompts.SEARCHES_TRAILER, ends_tools=True)
PAGES = BudgetKind("pages", "pages", prompts.PAGES_TRAILER)
#: The budgets every answer and MCP session has, whatever its tools: the trailer names them.
ANSWER_BUDGETS = (SEARCHES, PAGES)


class BudgetCounter:
    """What one answer spent of each kind of budget, against its limit.

    Reads running at the same time reserve what they may spend before they run
    (`reserve`), so together they never pass a limit; `settle` charges what was spent.
    A kind the counter does not hold has a limit of 0: nothing of it may be spent.
    """

    def __init__(self, limits: Mapping[BudgetKind, int]) -> None:
        """Args:
        limits: Each kind's limit, in trailer order.
        """
        self._kinds = {kind.name: kind for kind in limits}
        self._limits = {kind.name: max(limit, 0) for kind, limit in limits.items()}
        #: Spent, and reserved by calls still running (`reserve`).
        self._taken = dict.fromkeys(self._limits, 0)
        #: Of `_taken`, what calls still running reserved: not spent yet.
        self._held = dict.fromkeys(self._limits, 0)

    @classmethod
    def of(cls, settings: Budgets, kinds: Iterable[BudgetKind] = ()) -> BudgetCounter:
        """The counter of one answer: SPEC 8's budgets and the tools' own kinds, each
        limited by the ``[budgets]`` setting it names (0 for a setting that is not one)."""
        table = {f.name: getattr(settings, f.name) for f in fields(settings)}
        every = dict.fromkeys([*ANSWER_BUDGETS, *kinds])
        return cls({kind: int(table.get(kind.setting, 0)) for kind in every})

    def limit(self, kind: BudgetKind) -> int:
        """The most of ``kind`` one answer may spend."""
        return self._limits.get(kind.name, 0)

    def taken(self, kind: BudgetKind) -> int:
        """What was spent of ``kind``, and what calls still running hold of it."""
        return self._taken.get(kind.name, 0)

    def held(self, kind: BudgetKind) -> int:
        """What calls still running hold of ``kind`` (not spent yet)."""
        return self._held.get(kind.name, 0)

    def spent(self, kind: BudgetKind) -> int:
        """What was spent of ``kind`` (the holds of calls still running left out): the
        trailer's count."""
        return max(0, self.taken(kind) - self.held(kind))

    def left(self, kind: BudgetKind) -> int:
        """What may still be taken of ``kind``."""
        return max(0, self.limit(kind) - self.taken(kind))

    @property
    def tools_spent(self) -> bool:
        """Whether a budget whose end ends the tool rounds is spent (SPEC 3.5)."""
        return any(k.ends_tools and not self.left(k) for k in self._kinds.values())

    def take(self, kind: BudgetKind, wanted: int) -> int:
        """Spend up to ``wanted`` of ``kind``; return how much was granted (maybe 0)."""
        granted = min(max(wanted, 0), self.left(kind))
        if granted:
            self._taken[kind.name] += granted
        return granted

    def give_back(self, kind: BudgetKind, unused: int) -> None:
        """Return what was taken of ``kind`` and not spent (a crawl that stopped early)."""
        if kind.name in self._taken:
            self._taken[kind.name] = max(0, self._taken[kind.name] - max(unused, 0))

    def reserve(self, kind: BudgetKind, wanted: int) -> int:
        """Hold up to ``wanted`` of ``kind`` for a call about to run; return how much
        (maybe 0).

        It counts against the limit at once, so calls running at the same time never
        pass it together, but it is not spent until `settle`.
        """
        granted = self.take(kind, wanted)
        if granted:
            self._held[kind.name] += granted
        return granted

    def settle(self, kind: BudgetKind, reserved: int, spent: int) -> None:
        """End a reservation of ``reserved`` of which ``spent`` was spent: the budget is
        charged for that only."""
        if kind.name in self._held:
            self._held[kind.name] = max(0, self._held[kind.name] - reserved)
        self.give_back(kind, reserved - min(max(spent, 0), reserved))

    def trailer(self) -> str:
        """The last line of every tool result: each budget's part, in order (SPEC 5)."""
        return prompts.BUDGET_TRAILER_JOIN.join(
            kind.trailer.format(used=self.spent(kind), limit=self.limit(kind))
            for kind in self._kinds.values()
        )
