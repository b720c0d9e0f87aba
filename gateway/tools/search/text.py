"""web_search's result: merged results, the tool text and the ``searched`` event (SPEC 4, 6).

Pure: decides, never does I/O. :func:`merge` folds the SearXNG answers of one model query
(its own words, then its angles) into one deduplicated list; :func:`tool_text` numbers
every result in the answer's ledger and writes what the model reads; :func:`searched_event`
(and :func:`refused_event` for a call the budget did not cover) is what the client is
shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gateway import prompts
from gateway.tools.events import Searched
from gateway.tools.ledger import Found, Ledger, normalise_url
from gateway.tools.search.answer import (
    Coverage,
    EngineTrouble,
    SearchAnswer,
    SearchFailure,
    SearchHit,
)
from gateway.tools.search.rules import Charge, PlannedSearch, SearchCall, quoted

Answer = SearchAnswer | SearchFailure


@dataclass(frozen=True)
class QueryResults:
    """Everything found for one of the model's queries.

    Attributes:
        query: The model's query.
        hits: Its own results first, then the angles' (alternating), deduplicated by
            normalised address, at most the cap given to :func:`merge`.
        coverage: Results, or which kind of nothing (over every search that answered).
        unresponsive: Engines SearXNG named, once per name.
        instant_answers: SearXNG's answerers' answers, once each.
        failures: Searches of this query that got no answer.
        answered: At least one of its searches got an answer from SearXNG.
    """

    query: str
    hits: tuple[SearchHit, ...]
    coverage: Coverage
    unresponsive: tuple[EngineTrouble, ...] = ()
    instant_answers: tuple[str, ...] = ()
    failures: tuple[SearchFailure, ...] = ()
    answered: bool = True


def merge(query: str, answers: Sequence[tuple[PlannedSearch, Answer]], *, cap: int) -> QueryResults:
    """Fold the answers of one query's searches (own words first, then angles).

    The query's own results come first, in SearXNG's order; the angles' follow, taking
    one from each angle in turn, so every angle is represented before any has two.
    """
    own = [a for p, a in answers if not p.angle and isinstance(a, SearchAnswer)]
    widened = [a for p, a in answers if p.angle and isinstance(a, SearchAnswer)]
    failures = tuple(a for _, a in answers if isinstance(a, SearchFailure))
    found = [*own, *widened]
    ordered: list[SearchHit] = [hit for answer in own for hit in answer.hits]
    longest = max((len(a.hits) for a in widened), default=0)
    ordered += [a.hits[i] for i in range(longest) for a in widened if i < len(a.hits)]
    hits: list[SearchHit] = []
    seen: set[str] = set()
    for hit in ordered:
        key = normalise_url(hit.url)
        if key not in seen and len(hits) < cap:
            seen.add(key)
            hits.append(hit)
    troubles: dict[str, EngineTrouble] = {}
    for answer in found:
        for trouble in answer.unresponsive:
            troubles.setdefault(trouble.name, trouble)
    instant = dict.fromkeys(text for answer in found for text in answer.instant_answers)
    return QueryResults(
        query=query,
        hits=tuple(hits),
        coverage=Coverage.RESULTS if hits else _empty_coverage(found),
        unresponsive=tuple(troubles.values()),
        instant_answers=tuple(instant),
        failures=failures,
        answered=bool(found),
    )


def _empty_coverage(found: list[SearchAnswer]) -> Coverage:
    """Which nothing, over several answers: one that had engines answering says "no hits"."""
    kinds = {answer.coverage for answer in found}
    for kind in (Coverage.NO_HITS, Coverage.UNKNOWN, Coverage.ALL_FAILED):
        if kind in kinds:
            return kind
    return Coverage.NONE_ASKED


def tool_text(
    call: SearchCall, charged: Charge, results: Sequence[QueryResults], ledger: Ledger
) -> tuple[str, int]:
    """The tool message (without the budget trailer, which the loop adds).

    Every result shown gets its ledger number (a known address keeps its number); a
    result already shown for an earlier query of the same call is not repeated, only
    named by its number.

    Returns:
        The text, and how many results it shows.
    """
    blocks: list[str] = []
    shown: set[str] = set()
    count = 0
    for query in results:
        lines = [_heading(query.query, call)]
        failed_alone = not query.answered and query.failures
        if failed_alone:
            lines.append(query.failures[0].message)
        else:
            lines += [
                prompts.SEARCH_INSTANT_ANSWER.format(answer=text) for text in query.instant_answers
            ]
            repeated: list[str] = []
            for hit in query.hits:
                key = normalise_url(hit.url)
                if key in shown:
                    repeated.append(f"[{ledger.add(hit.url, hit.title, found=Found.SEARCH)}]")
                    continue
                shown.add(key)
                count += 1
                lines += _result_lines(hit, ledger)
            if repeated:
                lines.append(prompts.SEARCH_ALREADY_LISTED.format(numbers=", ".join(repeated)))
            if not query.hits:
                lines.append(_nothing(query.coverage, call))
            lines += [
                prompts.SEARCH_PART_FAILED.format(message=message)
                for message in dict.fromkeys(f.message for f in query.failures)
            ]
        if query.unresponsive:
            engines = ", ".join(
                prompts.SEARCH_ENGINE_REASON.format(name=t.name, reason=t.reason)
                for t in query.unresponsive
            )
            lines.append(prompts.SEARCH_UNRESPONSIVE.format(engines=engines))
        blocks.append("\n".join(lines))
    tail: list[str] = []
    if charged.skipped:
        tail.append(prompts.SEARCH_NOT_SEARCHED.format(queries=quoted(charged.skipped)))
    tail += call.notes
    if tail:
        blocks.append("\n".join(tail))
    return "\n\n".join(blocks), count


def _heading(query: str, call: SearchCall) -> str:
    suffix = (
        prompts.SEARCH_HEADING_TIME_RANGE.format(time_range=call.time_range.value)
        if call.time_range is not None
        else ""
    )
    return prompts.SEARCH_HEADING.format(query=query, time_range=suffix)


def _result_lines(hit: SearchHit, ledger: Ledger) -> list[str]:
    n = ledger.add(hit.url, hit.title, found=Found.SEARCH)
    published = (
        prompts.SEARCH_PUBLISHED.format(date=hit.published.date().isoformat())
        if hit.published is not None
        else ""
    )
    line = prompts.SEARCH_RESULT_LINE.format(
        n=n, title=hit.title or prompts.SEARCH_NO_TITLE, url=hit.url, published=published
    )
    return [line, hit.snippet] if hit.snippet else [line]


def _nothing(coverage: Coverage, call: SearchCall) -> str:
    if coverage is Coverage.NO_HITS:
        return prompts.SEARCH_NO_HITS
    if coverage is Coverage.ALL_FAILED:
        return prompts.SEARCH_ALL_FAILED
    if coverage is Coverage.NONE_ASKED:
        if call.time_range is not None:
            return prompts.SEARCH_NONE_ASKED_TIME_RANGE
        return prompts.SEARCH_NONE_ASKED
    return prompts.SEARCH_EMPTY_UNKNOWN


def searched_event(
    call: SearchCall, charged: Charge, results: Sequence[QueryResults], shown: int
) -> Searched:
    """The event for a call that ran (a call refused for budget: :func:`refused_event`)."""
    troubles: dict[str, EngineTrouble] = {}
    for query in results:
        for trouble in query.unresponsive:
            troubles.setdefault(trouble.name, trouble)
    failures = [f for query in results for f in query.failures]
    error = failures[0].cause if failures and not any(q.answered for q in results) else None
    return Searched(
        queries=charged.searched,
        time_range=None if call.time_range is None else call.time_range.value,
        kind=None if call.kind is None else call.kind.value,
        results=shown,
        unresponsive_engines=tuple((t.name, t.reason) for t in troubles.values()),
        error=None if error is None else error.value,
    )


#: The ``error`` of a call the search budget did not cover (nothing was searched).
BUDGET_SPENT = "budget"


def refused_event(call: SearchCall) -> Searched:
    """The event for a call refused because the search budget was spent before it: the
    queries asked, no results, ``error`` `BUDGET_SPENT`."""
    return Searched(
        queries=call.queries,
        time_range=None if call.time_range is None else call.time_range.value,
        kind=None if call.kind is None else call.kind.value,
        error=BUDGET_SPENT,
    )
