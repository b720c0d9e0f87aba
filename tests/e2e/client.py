"""Reading the gateway's SSE answer as it arrives: chunks, tool events, keep-alive comments."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.e2e.conftest import AUTH


@dataclass(frozen=True)
class KeepAlive:
    """An SSE comment line (``: keep-alive``)."""


Item = dict[str, Any] | KeepAlive | str


@dataclass
class Answer:
    """Everything one streamed answer sent, in order."""

    items: list[Item] = field(default_factory=list)

    @property
    def chunks(self) -> list[dict[str, Any]]:
        """The ``data:`` objects."""
        return [i for i in self.items if isinstance(i, dict)]

    @property
    def events(self) -> list[dict[str, Any]]:
        """The ``thor_event`` objects, in order."""
        return [c["thor_event"] for c in self.chunks if "thor_event" in c]

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        """The tool events of one type."""
        return [e for e in self.events if e["type"] == kind]

    @property
    def text(self) -> str:
        """The visible answer."""
        return "".join(
            c["choices"][0]["delta"].get("content") or "" for c in self.chunks if c.get("choices")
        )

    @property
    def sequence(self) -> list[str]:
        """Event types, keep-alives (``:``) and the end (``[DONE]``), in order."""
        out: list[str] = []
        for item in self.items:
            if isinstance(item, KeepAlive):
                out.append(":")
            elif isinstance(item, str):
                out.append(item)
            elif "thor_event" in item:
                out.append(item["thor_event"]["type"])
        return out


def body(*questions: str, stream: bool = True, **fields: Any) -> dict[str, Any]:
    """A Web-on chat request."""
    messages = [{"role": "user", "content": q} for q in questions] or [
        {"role": "user", "content": "How do I descale a kettle?"}
    ]
    return {
        "model": "test-model",
        "messages": messages,
        "stream": stream,
        "thor_web_search": True,
    } | fields


async def stream_answer(
    http: httpx.AsyncClient,
    api: str,
    request: dict[str, Any],
    *,
    on_item: Callable[[Answer], Awaitable[bool]] | None = None,
) -> Answer:
    """Post ``request`` and read the SSE answer line by line.

    Args:
        on_item: Called after every item; returning False stops reading (the client
            goes away: the connection is closed).
    """
    answer = Answer()
    async with http.stream(
        "POST", f"{api}/chat/completions", json=request, headers=AUTH
    ) as response:
        assert response.status_code == 200, await response.aread()
        async for line in response.aiter_lines():
            if line.startswith(":"):
                answer.items.append(KeepAlive())
            elif line.startswith("data: "):
                data = line[len("data: ") :]
                answer.items.append(data if data == "[DONE]" else json.loads(data))
            else:
                continue
            if on_item is not None and not await on_item(answer):
                break
    return answer
