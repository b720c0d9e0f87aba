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
     "results": N, "unresponsive_engines": [[name, reason], ...], "error": null|"<cause>"}
    {"type": "read", "url": ..., "final_url": ..., "title": ..., "ok": true|false,
     "reason": null|"<fetcher reason word>"|"<gateway word>"}
    {"type": "sources", "sources": [{"n": 1, "url": ..., "title": ...}, ...]}
    {"type": "citations", "cited": [n, ...], "unknown": [n, ...]}

`Working` is an addition to SPEC 4 (it has no "tool started" event): without it a client
cannot tell a tool at work from the model at work.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway.tools.ledger import Source


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
    """

    queries: tuple[str, ...]
    time_range: str | None = None
    kind: str | None = None
    results: int = 0
    unresponsive_engines: tuple[tuple[str, str], ...] = ()
    error: str | None = None

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
        }


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
            ``failed``, ``budget``).
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


@dataclass(frozen=True, slots=True)
class Sources:
    """The ledger's list, sent before the answer rounds (or after an early answer)."""

    sources: tuple[Source, ...]

    def payload(self) -> dict[str, Any]:
        """The ``thor_event`` object."""
        return {
            "type": "sources",
            "sources": [{"n": s.n, "url": s.url, "title": s.title} for s in self.sources],
        }


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


#: Every tool event.
ThorEvent = Working | Searched | Read | Sources | Citations
