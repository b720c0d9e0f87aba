"""Keys: only a configured Bearer key passes; without keys everything does."""

from __future__ import annotations

import pytest

from gateway.errors import AuthError
from gateway.http.auth import KeyChecker

# --- Keys ------------------------------------------------------------------------------------

GOOD = "k" * 20


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "Bearer",
        "Bearer ",
        f"Basic {GOOD}",
        f"Bearer {GOOD}x",
        f"Bearer {GOOD[:-1]}",
        "Bearer other-key-0123456789",
    ],
    ids=["absent", "empty", "no-token", "blank-token", "basic", "longer", "shorter", "other"],
)
def test_anything_but_a_configured_key_is_refused(header: str | None) -> None:
    with pytest.raises(AuthError) as caught:
        KeyChecker([GOOD, "second-key-0123456789"]).check(header)
    assert GOOD not in str(caught.value)


@pytest.mark.parametrize(
    "header", [f"Bearer {GOOD}", f"bearer {GOOD}", "Bearer second-key-0123456789"]
)
def test_configured_keys_are_accepted(header: str) -> None:
    KeyChecker([GOOD, "second-key-0123456789"]).check(header)


def test_without_keys_everything_is_accepted() -> None:
    KeyChecker([]).check(None)
