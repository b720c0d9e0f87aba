"""The tool events a client sees under the Web switch (SPEC 4), as typed values. Pure.

Each class is one ``thor_event`` type; `payload` gives its JSON object with SPEC 4's field
names exactly. Tools yield `Searched` and `Read` while they run (see `gateway.tools.base`); the
loop itself sends `Working` when a round's calls start and when they have all ended,
`Sources` before the answer rounds and `Citations` after the answer. The page and API
clients read these from the ``thor_event`` field of an empty-delta chunk (``thor_events``
in a ``stream: false`` body, without `Working`, which only says what runs now)::

    {"type": "working", "calls": [{"tool": "web_search", "query": ...},
                                  {"tool": "fetch_page_content_recursive", "url": ...}]}
    {"type": "working", "calls": []}
    {"type": "searched", "queries": [...], "time_range": "week"|null, "kind": "jobs"|null,
     "results": N, "unresponsive_engines": [[name, reason], ...], "error": null|"<cause>",
     "by": "model"|"gateway"}
    {"type": "read", "url": ..., "final_url": ..., "title": ..., "ok": true|false,
     "reason": null|"<fetcher reason word>"|"<gateway word>"}
    {"type": "sources", "sources": [{"n": 1, "url": ..., "title": ..., "read": true}, ...]}
    {"type": "citations", "cited": [n, ...], "unknown": [n, ...]}

`Working` is an addition to SPEC 4 (it has no "tool started" event): without it a client
cannot tell a tool at work from the model at work.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

from gateway import prompts
from gateway.tools.ledger import Source

#: Who made a search: the model's call, or the gateway's own first search (SPEC 3.2, 4).
SearchedBy = Literal["model", "gateway"]


class ThorEvent(Protocol):
    """A tool event: what the stream and MCP need of it, so neither names a tool's event.

    A new tool brings its own event class with these two methods; the page adds one line
    to its event renderer table (``render.js``) to show it.
    """

    def payload(self) -> dict[str, Any]:
        """The ``thor_event`` object (its ``type`` names the event)."""
        ...

    def progress(self) -> str:
        """One line for an MCP client's user (a progress notification's message)."""
        ...


@dataclass(frozen=True, slots=True)
class Searched:
    """One ``web_search`` call ran (one event per call, whatever its sub-queries).

    Attributes:
        queries: Every query searched, the model's own words first.
        time_range: The SearXNG range used (``day``, ``week``, ``month``, ``year``) or None.
        kind: The widening asked for (``jobs``, ``people``) or None.
        results: Results after merging and deduplication.
        unresponsive_engines: SearXNG's ``[name, reason]`` pairs, once per engine name.
        error: Why nothing came back when no search of the call got an answer from
            SearXNG (a `gateway.tools.search.answer.FailureCause` word such as
            ``unreachable`` or ``rate_limited``), or ``budget`` when the search budget
            was spent before the call (nothing was searched: ``queries`` are the ones
            asked), else None. An addition to SPEC 4's fields, so a page can say why a
            search found nothing.
        by: ``gateway`` for the gateway's own first search (SPEC 3.2), else ``model``
            (over MCP, the agent's call).
    """

    queries: tuple[str, ...]
    time_range: str | None = None
    kind: str | None = None
    results: int = 0
    unresponsive_engines: tuple[tuple[str, str], ...] = ()
    error: str | None = None
    by: SearchedBy = "model"

    def payload(self) -> dict[str, Any]:
        """The ``thor_event`` object."""
        return {
            "type": "searched",
            "queries": list(self.queries),
            "time_range": self.time_range,
            "kind": self.kind,
            "results": self.results,
            "unresponsive_engines": [list(pair) for pair in self.unresponsive_engines],
            "error": self.error,
            "by": self.by,
        }

    def progress(self) -> str:
        """``searched: "a", "b" (N results)``."""
        queries = ", ".join(f'"{q}"' for q in self.queries)
        return prompts.MCP_PROGRESS_SEARCHED.format(queries=queries, results=self.results)


@dataclass(frozen=True, slots=True)
class Read:
    """One page of a ``fetch_page_content_recursive`` crawl, read or failed.

    Attributes:
        url: The address asked for.
        final_url: Where it landed after redirects (the asked address when it failed early).
        title: The page title ("" when unknown).
        ok: Whether the page was read.
        reason: The fetcher's reason word when not (``not_public``, ``timeout``, ...); for
            a read that reached no page at all, the gateway's word for why
            (`gateway.tools.fetch.rules.ReadProblem`: ``unavailable``, ``busy``, ``timeout``,
            ``failed``, ``budget``, ``budget_held``).
    """

    url: str
    final_url: str
    title: str
    ok: bool
    reason: str | None = None

    def payload(self) -> dict[str, Any]:
        """The ``thor_event`` object."""
        return {
            "type": "read",
            "url": self.url,
            "final_url": self.final_url,
            "title": self.title,
            "ok": self.ok,
            "reason": self.reason,
        }

    def progress(self) -> str:
        """``read: title — address``, or ``not read: address (reason)``."""
        if self.ok:
            return prompts.MCP_PROGRESS_READ.format(
                title=self.title or self.final_url, url=self.final_url
            )
        return prompts.MCP_PROGRESS_NOT_READ.format(url=self.url, reason=self.reason)


@dataclass(frozen=True, slots=True)
class Sources:
    """The ledger's list, sent before the answer rounds (or after an early answer).

    Each source carries one field more than SPEC 4's ``n``, ``url`` and ``title``:
    ``read``, true when a read of this answer reached the page, false for a source the
    model knows only by its search result's title and snippet (a page can tell the two
    apart).
    """

    sources: tuple[Source, ...]

    def payload(self) -> dict[str, Any]:
        """The ``thor_event`` object."""
        return {
            "type": "sources",
            "sources": [
                {"n": s.n, "url": s.url, "title": s.title, "read": s.read} for s in self.sources
            ],
        }

    def progress(self) -> str:
        """The event's type: the loop's own events are not sent over MCP."""
        return "sources"


@dataclass(frozen=True, slots=True)
class Citations:
    """The ``[n]`` the answer used, checked against the ledger (text never rewritten).

    Attributes:
        cited: Numbers the ledger has, ascending, each once.
        unknown: Numbers it does not have, ascending, each once.
    """

    cited: tuple[int, ...]
    unknown: tuple[int, ...]

    def payload(self) -> dict[str, Any]:
        """The ``thor_event`` object."""
        return {"type": "citations", "cited": list(self.cited), "unknown": list(self.unknown)}

    def progress(self) -> str:
        """The event's type: the loop's own events are not sent over MCP."""
        return "citations"


@dataclass(frozen=True, slots=True)
class RunningCall:
    """One call being run, as `Working` names it.

    Attributes:
        tool: The tool's name.
        subject: The argument that says what it works on (``query`` or ``url``), as
            (name, value), or None for a tool without one.
    """

    tool: str
    subject: tuple[str, str] | None = None

    def payload(self) -> dict[str, Any]:
        """One entry of ``calls``."""
        entry: dict[str, Any] = {"tool": self.tool}
        if self.subject is not None:
            entry[self.subject[0]] = self.subject[1]
        return entry


@dataclass(frozen=True, slots=True)
class Working:
    """What the gateway runs now: a round's calls when they start, none when they have
    all ended (the model is asked again)."""

    calls: tuple[RunningCall, ...]

    def payload(self) -> dict[str, Any]:
        """The ``thor_event`` object."""
        return {"type": "working", "calls": [call.payload() for call in self.calls]}

    def progress(self) -> str:
        """The event's type: the loop's own events are not sent over MCP."""
        return "working"


#: The events SPEC 4 names (a tool may bring its own: `ThorEvent`).
SPEC_EVENTS: tuple[type[ThorEvent], ...] = (Working, Searched, Read, Sources, Citations)
