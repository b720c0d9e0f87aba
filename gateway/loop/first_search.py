"""The gateway's own first search (SPEC 3.2): what it asks, as pure code.

Every Web-on answer searches at least once. When the engine does not make the model call
a tool in round 1 (it ignores or refuses ``tool_choice: "required"``, or the model drifts
into prose), the gateway calls ``web_search`` itself, with the user's last message as the
query: whitespace folded to single spaces and cut at a word boundary to at most
`QUERY_CHARS` characters. `gateway.loop.rounds` decides when; `gateway.loop.turn` runs the call
exactly as it runs a model's (an assistant message with the call, then its tool message,
the budget charged, the ``searched`` event marked ``"by": "gateway"``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from gateway.api.messages import Message

#: The tool the gateway calls, and the most characters of its query (SPEC 3.2).
TOOL = "web_search"
QUERY_CHARS = 200

_WORD = re.compile(r"\S+")


def fold_query(text: str, limit: int = QUERY_CHARS) -> str | None:
    """``text`` on one line, cut at a word boundary to at most ``limit`` characters.

    A first word longer than ``limit`` is cut inside the word (there is no boundary to
    cut at, and an empty query would search nothing). Reads only as far as the cut, so a
    long message costs no more than its first ``limit`` characters of words (and the
    whitespace between them).

    Returns:
        The query, or None when ``text`` has no word at all.
    """
    words: list[str] = []
    used = 0
    for match in _WORD.finditer(text):
        word = match.group()
        if not words:
            words.append(word[:limit])
            used = len(words[0])
        elif used + 1 + len(word) <= limit:
            words.append(word)
            used += 1 + len(word)
        else:
            break
        if used >= limit:
            break
    return " ".join(words) if words else None


def first_query(messages: Sequence[Message]) -> str | None:
    """The query of the gateway's own search: the user's last message, folded (see
    `fold_query`); None when there is no user message with text (an image alone)."""
    for message in reversed(messages):
        if message.role == "user":
            return fold_query(message.text)
    return None
