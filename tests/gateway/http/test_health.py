"""``/healthz``'s answer as values, and the JSON the handler writes of them (SPEC 2).

Each body is the JSON as clients and operators read it; the comparison is of the
serialised text, so the key order is kept too.
"""

from __future__ import annotations

import json

import pytest

from gateway.http.handlers import healthz_body
from gateway.http.health import (
    EngineHealth,
    FetcherPart,
    HealthAnswer,
    NotChecked,
    TargetHealth,
)
from gateway.tools.search.searxng import SearxngHealth

UP, DOWN = TargetHealth("unix:/a", True), TargetHealth("unix:/b", False)
DOWN_SAYS = (
    "The fetcher at unix:/b does not answer: start it (tigress-fetcher serve, or make run) "
    "or set TIGRESS_FETCHER; pages cannot be read until it answers."
)

CASES: dict[str, tuple[HealthAnswer, dict[str, object]]] = {
    "nothing_checked": (
        HealthAnswer(
            (EngineHealth("http://e/v1", True, "The engine http://e/v1 answers."),),
            NotChecked(),
            NotChecked(),
        ),
        {
            "status": "ok",
            "engines": [
                {"engine": "http://e/v1", "ok": True, "says": "The engine http://e/v1 answers."}
            ],
            "searxng": {
                "checked": False,
                "ok": None,
                "detail": "not checked",
                "says": "SearXNG is not checked.",
            },
            "fetcher": {
                "checked": False,
                "ok": None,
                "detail": "not checked",
                "says": "The fetcher is not checked.",
            },
        },
    ),
    "one_target_down": (
        HealthAnswer(
            (EngineHealth("a", True, "A."),),
            SearxngHealth(ok=True, url="http://s"),
            FetcherPart((UP, DOWN)),
        ),
        {
            "status": "degraded",
            "engines": [{"engine": "a", "ok": True, "says": "A."}],
            "searxng": {
                "checked": True,
                "ok": True,
                "url": "http://s",
                "says": "SearXNG at http://s answers.",
            },
            "fetcher": {
                "checked": True,
                "ok": False,
                "targets": [
                    {"target": "unix:/a", "ok": True, "says": "The fetcher at unix:/a answers."},
                    {"target": "unix:/b", "ok": False, "says": DOWN_SAYS},
                ],
                "says": DOWN_SAYS,
            },
        },
    ),
    "searxng_down": (
        HealthAnswer(
            (EngineHealth("a", False, "Down."),),
            SearxngHealth(ok=False, url="http://s", problem="P."),
            FetcherPart((UP,)),
        ),
        {
            "status": "degraded",
            "engines": [{"engine": "a", "ok": False, "says": "Down."}],
            "searxng": {
                "checked": True,
                "ok": False,
                "url": "http://s",
                "problem": "P.",
                "says": "P.",
            },
            "fetcher": {
                "checked": True,
                "ok": True,
                "targets": [
                    {"target": "unix:/a", "ok": True, "says": "The fetcher at unix:/a answers."}
                ],
                "says": "The fetcher answers.",
            },
        },
    ),
    "no_targets": (
        HealthAnswer((), NotChecked(), FetcherPart(())),
        {
            "status": "ok",
            "engines": [],
            "searxng": {
                "checked": False,
                "ok": None,
                "detail": "not checked",
                "says": "SearXNG is not checked.",
            },
            "fetcher": {"checked": True, "ok": True, "targets": [], "says": "The fetcher answers."},
        },
    ),
}


@pytest.mark.parametrize(("answer", "body"), list(CASES.values()), ids=list(CASES))
def test_healthz_writes_each_part_with_its_sentence(
    answer: HealthAnswer, body: dict[str, object]
) -> None:
    assert json.dumps(healthz_body(answer)) == json.dumps(body)
