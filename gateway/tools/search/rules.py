"""web_search's rules (SPEC 6): schema, arguments, time ranges, kind widening, the charge.

Pure: decides, never does I/O. A call is read into a :class:`SearchCall` (or an
:class:`ArgumentProblem` the model can act on), charged against the answer's search
budget (:func:`charge`: each of the model's queries is one search), and planned into the
SearXNG requests to send (:func:`plan`: the model's own words first, then the angles of
its ``kind``, which are free).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gateway import prompts
from gateway.tools.ledger import SEARCHES, BudgetCounter, BudgetKind

NAME = "web_search"
#: What a call spends: one search per query; once spent, the tool rounds end (SPEC 8).
BUDGET: BudgetKind = SEARCHES
#: ``queries`` adds at most this many searches to ``query`` (SPEC 6).
MAX_MORE_QUERIES = 3
#: A query longer than this is a paragraph, not a search.
MAX_QUERY_CHARS = 400


class Kind(enum.StrEnum):
    """How a search is widened."""

    JOBS = "jobs"
    PEOPLE = "people"


class TimeRange(enum.StrEnum):
    """The ranges SearXNG accepts (anything else gets a 400 from it)."""

    DAY = "day"
    WEEK = "week"
    MONTH = "month"
    YEAR = "year"


#: SPEC 6's aliases, besides the four names themselves.
TIME_RANGE_ALIASES = {
    "today": TimeRange.DAY,
    "7d": TimeRange.WEEK,
    "30d": TimeRange.MONTH,
    "12m": TimeRange.YEAR,
}


@dataclass(frozen=True)
class Angle:
    """One widening of a ``kind``: the words added, and words that show a query has it.

    Attributes:
        words: Appended to the model's query.
        covered_by: If any of these (whole words, case folded) is in the query already, the
            angle adds nothing and is left out.
    """

    words: str
    covered_by: tuple[str, ...]


#: SPEC 6's angles, in order.
ANGLES: dict[Kind, tuple[Angle, ...]] = {
    Kind.JOBS: (
        Angle("job posting", ("posting", "postings", "job posting")),
        Angle("careers", ("careers", "career")),
        Angle("linkedin jobs", ("linkedin",)),
    ),
    Kind.PEOPLE: (
        Angle("recruiter", ("recruiter", "recruiters", "recruiting")),
        Angle('"hiring manager"', ("hiring manager", "manager")),
        Angle('"we are hiring"', ("hiring", "hire", "we are hiring")),
        Angle("site:linkedin.com", ("linkedin", "site:linkedin.com")),
    ),
}

#: The ``tools`` entry (SPEC 6).
SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": NAME,
        "description": prompts.WEB_SEARCH_DESCRIPTION,
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": prompts.WEB_SEARCH_QUERY_DESCRIPTION},
                "queries": {
                    "type": "array",
                    "items": {"type": "string"},
                    "maxItems": MAX_MORE_QUERIES,
                    "description": prompts.WEB_SEARCH_QUERIES_DESCRIPTION,
                },
                "kind": {
                    "type": "string",
                    "enum": [kind.value for kind in Kind],
                    "description": prompts.WEB_SEARCH_KIND_DESCRIPTION,
                },
                "time_range": {
                    "type": "string",
                    "enum": [value.value for value in TimeRange],
                    "description": prompts.WEB_SEARCH_TIME_RANGE_DESCRIPTION,
                },
            },
            "required": ["query"],
        },
    },
}

_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class SearchCall:
    """A call's arguments, read.

    Attributes:
        queries: The model's queries, ``query`` first, whitespace folded, without repeats.
        kind: The widening, if any.
        time_range: The range sent to SearXNG, if any.
        notes: Lines for the model about arguments that were set aside (an unknown
            ``kind`` or ``time_range``, queries past the third).
    """

    queries: tuple[str, ...]
    kind: Kind | None = None
    time_range: TimeRange | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ArgumentProblem:
    """Arguments that cannot be searched; ``message`` is the tool result (nothing is spent)."""

    message: str


def read_arguments(arguments: Mapping[str, Any]) -> SearchCall | ArgumentProblem:
    """Read a web_search call's arguments.

    Lenient where a model's slip has one meaning (``queries`` as a single string, an
    unknown ``kind`` or ``time_range``, more than 3 more queries: the call runs and the
    text says what was set aside); a problem only when there is nothing sound to search.
    """
    query = arguments.get("query")
    if not isinstance(query, str) or not fold(query):
        return ArgumentProblem(prompts.SEARCH_NO_QUERY)
    more = arguments.get("queries")
    if more is None:
        more = []
    elif isinstance(more, str):
        more = [more]
    if not isinstance(more, list) or not all(isinstance(q, str) for q in more):
        return ArgumentProblem(prompts.SEARCH_BAD_QUERIES)
    notes: list[str] = []
    queries: list[str] = []
    seen: set[str] = set()
    dropped: list[str] = []
    for written in [query, *more]:
        text = fold(written)
        if not text or text.casefold() in seen:
            continue
        if len(text) > MAX_QUERY_CHARS:
            return ArgumentProblem(prompts.SEARCH_QUERY_TOO_LONG.format(most=MAX_QUERY_CHARS))
        if len(queries) > MAX_MORE_QUERIES:
            dropped.append(text)
            continue
        seen.add(text.casefold())
        queries.append(text)
    if dropped:
        notes.append(
            prompts.SEARCH_EXTRA_QUERIES.format(most=MAX_MORE_QUERIES, queries=quoted(dropped))
        )
    kind, kind_note = kind_of(arguments.get("kind"))
    time_range, range_note = time_range_of(arguments.get("time_range"))
    notes += [note for note in (kind_note, range_note) if note]
    return SearchCall(tuple(queries), kind=kind, time_range=time_range, notes=tuple(notes))


def fold(text: str) -> str:
    """Whitespace runs folded to one space, ends trimmed."""
    return _SPACE.sub(" ", text).strip()


def quoted(queries: list[str] | tuple[str, ...]) -> str:
    """``"a"; "b"`` for the model."""
    return "; ".join(f'"{q}"' for q in queries)


def time_range_of(value: object) -> tuple[TimeRange | None, str]:
    """SPEC 6's time range, and a note when a value was given but is not one.

    Anything unknown means no range, never an error, and is never sent to SearXNG (it
    answers 400 to an invalid value).
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return None, ""
    text = value.strip().lower() if isinstance(value, str) else ""
    if text in TimeRange.__members__.values():
        return TimeRange(text), ""
    if text in TIME_RANGE_ALIASES:
        return TIME_RANGE_ALIASES[text], ""
    return None, prompts.SEARCH_UNKNOWN_TIME_RANGE.format(value=_shown(value))


def kind_of(value: object) -> tuple[Kind | None, str]:
    """The widening, and a note when a value was given but is not one."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None, ""
    text = value.strip().lower() if isinstance(value, str) else ""
    if text in Kind.__members__.values():
        return Kind(text), ""
    return None, prompts.SEARCH_UNKNOWN_KIND.format(value=_shown(value))


def _shown(value: object) -> str:
    text = value if isinstance(value, str) else repr(value)
    return f'"{fold(text)[:40]}"'


def angles(query: str, kind: Kind | None) -> tuple[str, ...]:
    """The widened queries of ``query`` (without the query itself), in SPEC 6's order.

    An angle the query already covers is left out: a query that already says "hiring" is
    not widened with "we are hiring".
    """
    if kind is None:
        return ()
    words = query.casefold()
    return tuple(
        f"{query} {angle.words}"
        for angle in ANGLES[kind]
        if not any(_has_words(words, cover) for cover in angle.covered_by)
    )


def _has_words(text: str, words: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(words.casefold())}(?!\w)", text) is not None


@dataclass(frozen=True)
class PlannedSearch:
    """One request to SearXNG.

    Attributes:
        query: The model's query it belongs to.
        text: What SearXNG is asked (the query, or the query with an angle).
        angle: True for a widening (free of charge; its results come after the query's).
    """

    query: str
    text: str
    angle: bool = False


def plan(queries: tuple[str, ...], kind: Kind | None) -> tuple[PlannedSearch, ...]:
    """Every SearXNG request of a call: each query's own words first, then its angles."""
    planned: list[PlannedSearch] = []
    for query in queries:
        planned.append(PlannedSearch(query, query))
        planned += [PlannedSearch(query, text, angle=True) for text in angles(query, kind)]
    return tuple(planned)


@dataclass(frozen=True)
class Charge:
    """What the budget covered.

    Attributes:
        searched: The queries to run (a prefix of the call's queries).
        skipped: The queries past the budget (not run).
    """

    searched: tuple[str, ...]
    skipped: tuple[str, ...]


def charge(call: SearchCall, budgets: BudgetCounter) -> Charge:
    """Take one search per query from the budget; queries past it are not run.

    Angles are not charged (SPEC 6). ``searched`` empty means the budget was spent before
    the call: answer with ``prompts.SEARCH_BUDGET_SPENT`` and run nothing.
    """
    granted = budgets.take(BUDGET, len(call.queries))
    return Charge(searched=call.queries[:granted], skipped=call.queries[granted:])
