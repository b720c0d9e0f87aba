"""Unknown setting names, each with the known name it most likely meant.

Both processes check their TOML tables and their ``TIGRESS_*`` variables with this one
helper (the gateway may import it: it is pure and holds nothing of the fetcher's), so a
typo is named the same way everywhere: every unknown name at once, not only the first,
each with a "did you mean" when a known name is close (``difflib``'s ratio of at least
0.6, the cut-off its ``get_close_matches`` uses by default).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable


def suggestion(name: str, known: Iterable[str]) -> str:
    """The known name closest to ``name``, or ``""`` when none is close.

    Args:
        name: The name that was not recognised.
        known: Every name that would have been.

    Returns:
        The closest known name (compared without case, and without the prefix all
        known names share), or an empty string.
    """
    folded = [k.lower() for k in known]
    # The part every known name shares (``TIGRESS_``, ``budgets.``) says nothing about
    # which one was meant, and would make any two names look alike: compared without it.
    prefix = os.path.commonprefix(folded) if len(folded) > 1 else ""  # noqa: RUF071
    shared = len(prefix) if name.lower().startswith(prefix) else 0
    by_folded = {candidate.lower()[shared:]: candidate for candidate in known}
    close = difflib.get_close_matches(name.lower()[shared:], list(by_folded), n=1)
    return by_folded[close[0]] if close else ""


def unknown_names(given: Iterable[str], known: Iterable[str]) -> list[str]:
    """Each name of ``given`` that is not in ``known``, described for a person.

    Args:
        given: The names found (TOML keys or variable names), in the order found.
        known: The names that are recognised.

    Returns:
        One description per unknown name, in the order given: ``'enigne_url' (did you
        mean 'engine_url'?)``, or just the quoted name when nothing known is close.
    """
    known = tuple(known)
    described = []
    for name in given:
        if name in known:
            continue
        near = suggestion(name, known)
        described.append(f"{name!r} (did you mean {near!r}?)" if near else repr(name))
    return described
