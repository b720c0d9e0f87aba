"""Properties that must not depend on how bytes or fragments were cut."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gateway.api.chunks import CallFragment
from gateway.engine.proxy import relay
from gateway.loop.calls import RawCall, ToolCallAssembler
from gateway.settings import EngineSettings

EVENTS = [
    {"choices": [{"index": 0, "delta": {"content": "Hé"}}]},
    {"choices": [{"index": 0, "delta": {"content": "llo\n\nworld"}}]},
    {"choices": [], "usage": {"total_tokens": 3}},
]
BODY = "".join(f"data: {json.dumps(e)}\n\n" for e in EVENTS).encode() + b"data: [DONE]\n\n"


def cut(data: bytes, points: list[int]) -> list[bytes]:
    bounds = [0, *sorted({p % (len(data) + 1) for p in points}), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds) if b > a]


class Parts:
    """An engine answer's body arriving in the given pieces (the read side of
    `gateway.engine.http.EngineExchange`)."""

    def __init__(self, parts: list[bytes]) -> None:
        self._parts = list(parts)

    async def read(self) -> bytes:
        await asyncio.sleep(0)
        return self._parts.pop(0) if self._parts else b""


async def relayed(parts: list[bytes]) -> bytes:
    out = b""
    answer: Any = Parts(parts)
    async for piece in relay(answer, EngineSettings("http://127.0.0.1:1/v1")):
        # Every piece forwarded is whole events.
        assert piece.data.endswith(b"\n\n")
        out += piece.data
    return out


@given(st.lists(st.integers(min_value=0), max_size=12))
def test_pass_through_forwards_the_same_bytes_however_they_arrive(points: list[int]) -> None:
    assert asyncio.run(relayed(cut(BODY, points))) == BODY


@given(st.lists(st.integers(min_value=0), max_size=8))
def test_pass_through_adds_done_when_missing_however_cut(points: list[int]) -> None:
    body = BODY.removesuffix(b"data: [DONE]\n\n")
    assert asyncio.run(relayed(cut(body, points))) == body + b"data: [DONE]\n\n"


ARGUMENTS = ['{"query": "rust jobs berlin", "time_range": "week"}', '{"url": "https://a.example/"}']


@given(
    st.lists(st.integers(min_value=1, max_value=60), min_size=1, max_size=6),
    st.lists(st.booleans(), max_size=20),
)
def test_tool_call_fragments_join_the_same_however_cut(
    sizes: list[int], interleave: list[bool]
) -> None:
    pieces: list[list[str]] = []
    for text in ARGUMENTS:
        parts, at, i = [], 0, 0
        while at < len(text):
            size = sizes[i % len(sizes)]
            parts.append(text[at : at + size])
            at += size
            i += 1
        pieces.append(parts)
    assembler = ToolCallAssembler()
    assembler.add(CallFragment(0, "a", "web_search"))
    assembler.add(CallFragment(1, "b", "fetch"))
    queues = [list(p) for p in pieces]
    turn = 0
    while any(queues):
        pick = 1 if (interleave[turn % len(interleave)] if interleave else False) else 0
        if not queues[pick]:
            pick = 1 - pick
        assembler.add(CallFragment(pick, arguments=queues[pick].pop(0)))
        turn += 1
    assert assembler.calls() == [
        RawCall("a", "web_search", ARGUMENTS[0]),
        RawCall("b", "fetch", ARGUMENTS[1]),
    ]
