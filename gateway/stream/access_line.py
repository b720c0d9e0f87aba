"""The access line of one chat (SPEC 9): what the gateway's log says once a chat ends.

One line per chat request, refused ones included::

    chat 3f2a9c01d4e5b6a7 key=#1 model=qwen3 engine=local web=on rounds=2 searches=3
    pages=4 tokens=512 outcome=ok ms=8123

``key`` is the key's position in the configured list, counted from 1 (``none`` without
keys, or when the request was refused before its key was known): never the key.
``model`` is the name the client asked for, and so the client's words: it is cut to 64
characters, with anything but printable non-space characters written as ``?``, so it
cannot forge a line or a field. ``searches`` counts the queries sent to SearXNG and
``pages`` the pages read (not those refused or failed); ``tokens`` the pieces of
model-written text sent to the client. Under systemd the same values are journal fields
(``CHAT_REQUEST_ID``, ``CHAT_OUTCOME``, ...: ``journalctl -u gateway CHAT_OUTCOME=
engine_error``). Pure: `gateway.stream.writer.Tally` logs it.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The longest model name the line shows.
MAX_MODEL_CHARS = 64


def key_name(key: int | None) -> str:
    """How logs name a key: ``#1`` for the first configured key, ``none`` without one."""
    return f"#{key + 1}" if key is not None and key >= 0 else "none"


def safe_word(text: str, limit: int = MAX_MODEL_CHARS) -> str:
    """``text`` as one field of a log line: printable, no spaces, at most ``limit``
    characters, ``-`` when empty."""
    word = "".join(c if c.isprintable() and not c.isspace() else "?" for c in text[:limit])
    return word or "-"


@dataclass(frozen=True, slots=True)
class ChatRecord:
    """What one chat did, as its access line tells it.

    Attributes:
        request_id: The chat's id (`gateway.http.request_id`), "" when unknown.
        key: The key's position, or None (no keys, or refused before the key was known).
        model: The model asked for ("" before the body was read).
        engine: The engine's label (`EngineSettings.label`), "" when none was chosen.
        mode: ``web``, ``proxy`` or ``none`` (refused before the body said).
        rounds: Engine rounds.
        searches: Queries sent to SearXNG.
        pages: Pages read.
        tokens: Pieces of model-written text sent.
        outcome: The chat-requests metric's outcome word.
        ms: Milliseconds from arrival to the end.
    """

    request_id: str
    key: int | None
    model: str
    engine: str
    mode: str
    rounds: int
    searches: int
    pages: int
    tokens: int
    outcome: str
    ms: int

    @property
    def web(self) -> str:
        """``on``, ``off``, or ``-`` when the body never said."""
        return {"web": "on", "proxy": "off"}.get(self.mode, "-")

    def line(self) -> str:
        """The access line."""
        return (
            f"chat {self.request_id or '-'} key={key_name(self.key)} "
            f"model={safe_word(self.model)} engine={safe_word(self.engine, 200)} "
            f"web={self.web} rounds={self.rounds} searches={self.searches} "
            f"pages={self.pages} tokens={self.tokens} outcome={self.outcome} ms={self.ms}"
        )

    def fields(self) -> dict[str, str]:
        """The journal fields of the line (``CHAT_*``)."""
        return {
            "CHAT_REQUEST_ID": self.request_id or "-",
            "CHAT_KEY": key_name(self.key),
            "CHAT_MODEL": safe_word(self.model),
            "CHAT_ENGINE": safe_word(self.engine, 200),
            "CHAT_WEB": self.web,
            "CHAT_ROUNDS": str(self.rounds),
            "CHAT_SEARCHES": str(self.searches),
            "CHAT_PAGES": str(self.pages),
            "CHAT_TOKENS": str(self.tokens),
            "CHAT_OUTCOME": self.outcome,
            "CHAT_MS": str(self.ms),
        }
