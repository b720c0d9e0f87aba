"""web_search's pure rules: schema, arguments, time ranges, kind widening, the charge."""

from __future__ import annotations

import re
from typing import Any

import pytest

from gateway import prompts
from gateway.tools.ledger import PAGES, SEARCHES, BudgetCounter
from gateway.tools.search.rules import (
    SCHEMA,
    ArgumentProblem,
    Kind,
    PlannedSearch,
    SearchCall,
    TimeRange,
    angles,
    charge,
    plan,
    read_arguments,
    time_range_of,
)


def call_of(arguments: dict[str, Any]) -> SearchCall:
    call = read_arguments(arguments)
    assert isinstance(call, SearchCall), call
    return call


def test_schema_offers_query_queries_kind_and_time_range() -> None:
    function = SCHEMA["function"]
    assert function["name"] == "web_search"
    assert function["description"] == prompts.WEB_SEARCH_DESCRIPTION
    properties = function["parameters"]["properties"]
    assert set(properties) == {"query", "queries", "kind", "time_range"}
    assert properties["queries"]["maxItems"] == 3
    assert properties["kind"]["enum"] == ["jobs", "people"]
    assert properties["time_range"]["enum"] == ["day", "week", "month", "year"]
    assert function["parameters"]["required"] == ["query"]


def test_the_description_is_one_sentence() -> None:
    # SPEC 3.1: each tool is a name, one sentence and a schema.
    description = prompts.WEB_SEARCH_DESCRIPTION
    assert description.endswith(".")
    assert not re.search(r"[.!?]\s", description), description


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("day", TimeRange.DAY),
        ("week", TimeRange.WEEK),
        ("month", TimeRange.MONTH),
        ("year", TimeRange.YEAR),
        ("today", TimeRange.DAY),
        ("7d", TimeRange.WEEK),
        ("30d", TimeRange.MONTH),
        ("12m", TimeRange.YEAR),
        (" Week ", TimeRange.WEEK),
        ("TODAY", TimeRange.DAY),
        (None, None),
        ("", None),
        ("fortnight", None),
        ("24h", None),
        ("1y", None),
        ("None", None),  # SearXNG reads the string "None" as no range; so do we
        (7, None),
    ],
)
def test_time_range_and_its_aliases(value: object, expected: TimeRange | None) -> None:
    assert time_range_of(value)[0] == expected


def test_an_unknown_time_range_is_no_range_with_a_note_never_an_error() -> None:
    call = call_of({"query": "kettle", "time_range": "fortnight"})
    assert call.time_range is None
    assert call.notes == (prompts.SEARCH_UNKNOWN_TIME_RANGE.format(value='"fortnight"'),)


def test_a_missing_time_range_has_no_note() -> None:
    assert call_of({"query": "kettle", "time_range": None}).notes == ()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, prompts.SEARCH_NO_QUERY),
        ({"query": ""}, prompts.SEARCH_NO_QUERY),
        ({"query": "   \n"}, prompts.SEARCH_NO_QUERY),
        ({"query": 42}, prompts.SEARCH_NO_QUERY),
        ({"query": ["a", "b"]}, prompts.SEARCH_NO_QUERY),
        ({"query": "a", "queries": {"b": 1}}, prompts.SEARCH_BAD_QUERIES),
        ({"query": "a", "queries": ["b", 3]}, prompts.SEARCH_BAD_QUERIES),
        ({"query": "x" * 401}, prompts.SEARCH_QUERY_TOO_LONG.format(most=400)),
        ({"query": "a", "queries": ["y" * 401]}, prompts.SEARCH_QUERY_TOO_LONG.format(most=400)),
    ],
    ids=[
        "none",
        "empty",
        "blank",
        "number",
        "list",
        "queries-dict",
        "queries-number",
        "long",
        "long-more",
    ],
)
def test_arguments_with_nothing_sound_to_search_are_a_clear_problem(
    arguments: dict[str, Any], message: str
) -> None:
    assert read_arguments(arguments) == ArgumentProblem(message)


def test_a_query_of_400_characters_is_searched() -> None:
    assert call_of({"query": "x" * 400}).queries == ("x" * 400,)


def test_queries_are_folded_and_repeats_dropped() -> None:
    call = call_of(
        {"query": "  kettle   descaling ", "queries": ["Kettle Descaling", "", "citric  acid"]}
    )
    assert call.queries == ("kettle descaling", "citric acid")


def test_a_single_string_in_queries_is_one_more_query() -> None:
    assert call_of({"query": "a", "queries": "b"}).queries == ("a", "b")


def test_up_to_three_more_queries_are_searched_and_the_rest_named() -> None:
    call = call_of({"query": "q0", "queries": ["q1", "q2", "q3", "q4", "q5"]})
    assert call.queries == ("q0", "q1", "q2", "q3")
    assert call.notes == (prompts.SEARCH_EXTRA_QUERIES.format(most=3, queries='"q4"; "q5"'),)


def test_kind_is_read_case_insensitively_and_an_unknown_kind_is_a_note() -> None:
    assert call_of({"query": "a", "kind": "Jobs"}).kind is Kind.JOBS
    unknown = call_of({"query": "a", "kind": "news"})
    assert unknown.kind is None
    assert unknown.notes == (prompts.SEARCH_UNKNOWN_KIND.format(value='"news"'),)


@pytest.mark.parametrize(
    ("query", "kind", "expected"),
    [
        ("acme", None, ()),
        ("acme", Kind.JOBS, ("acme job posting", "acme careers", "acme linkedin jobs")),
        (
            "acme",
            Kind.PEOPLE,
            (
                "acme recruiter",
                'acme "hiring manager"',
                'acme "we are hiring"',
                "acme site:linkedin.com",
            ),
        ),
        ("acme careers", Kind.JOBS, ("acme careers job posting", "acme careers linkedin jobs")),
        (
            "acme job postings",
            Kind.JOBS,
            ("acme job postings careers", "acme job postings linkedin jobs"),
        ),
        ("acme LinkedIn", Kind.JOBS, ("acme LinkedIn job posting", "acme LinkedIn careers")),
        (
            "acme hiring",
            Kind.PEOPLE,
            (
                "acme hiring recruiter",
                'acme hiring "hiring manager"',
                "acme hiring site:linkedin.com",
            ),
        ),
        (
            "acme recruiters linkedin",
            Kind.PEOPLE,
            (
                'acme recruiters linkedin "hiring manager"',
                'acme recruiters linkedin "we are hiring"',
            ),
        ),
        # Whole words only: "careering" does not say "career", "hirings" does not say "hiring".
        (
            "careering",
            Kind.JOBS,
            ("careering job posting", "careering careers", "careering linkedin jobs"),
        ),
    ],
    ids=[
        "no-kind",
        "jobs",
        "people",
        "jobs-covered",
        "postings",
        "linkedin",
        "hiring",
        "two-covered",
        "whole-words",
    ],
)
def test_kind_widens_with_the_angles_the_query_does_not_cover(
    query: str, kind: Kind | None, expected: tuple[str, ...]
) -> None:
    assert angles(query, kind) == expected


def test_the_plan_searches_each_querys_own_words_before_its_angles() -> None:
    assert plan(("a", "b"), Kind.JOBS) == (
        PlannedSearch("a", "a"),
        PlannedSearch("a", "a job posting", angle=True),
        PlannedSearch("a", "a careers", angle=True),
        PlannedSearch("a", "a linkedin jobs", angle=True),
        PlannedSearch("b", "b"),
        PlannedSearch("b", "b job posting", angle=True),
        PlannedSearch("b", "b careers", angle=True),
        PlannedSearch("b", "b linkedin jobs", angle=True),
    )


def test_each_query_is_one_search_and_angles_are_free() -> None:
    budgets = BudgetCounter({SEARCHES: 16, PAGES: 12})
    charged = charge(call_of({"query": "a", "queries": ["b", "c"], "kind": "people"}), budgets)
    assert (charged.searched, charged.skipped) == (("a", "b", "c"), ())
    assert budgets.spent(SEARCHES) == 3


def test_queries_past_the_budget_are_not_searched() -> None:
    budgets = BudgetCounter({SEARCHES: 16, PAGES: 12})
    budgets.take(SEARCHES, 14)
    charged = charge(call_of({"query": "a", "queries": ["b", "c", "d"]}), budgets)
    assert (charged.searched, charged.skipped) == (("a", "b"), ("c", "d"))
    assert budgets.spent(SEARCHES) == 16


def test_a_call_after_the_budget_is_spent_searches_nothing() -> None:
    budgets = BudgetCounter({SEARCHES: 1, PAGES: 12})
    budgets.take(SEARCHES, 1)
    charged = charge(call_of({"query": "a"}), budgets)
    assert (charged.searched, charged.skipped) == ((), ("a",))
    assert budgets.spent(SEARCHES) == 1
