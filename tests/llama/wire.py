"""Talking to a real OpenAI-compatible server: requests, SSE events, and the suite's prompts."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx

#: Generous: a shared 2-core machine under load runs the 135M model at a few tokens/s.
TIMEOUT = httpx.Timeout(90.0, connect=10.0)
#: Greedy decoding and a fixed seed: the small model answers the same way every run.
SAMPLING: dict[str, Any] = {"temperature": 0, "seed": 7}

WEB_SEARCH = {
    "type": "function",
    "function": {
        "name": "web_search",
        "description": "Search the web.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string"}},
            "required": ["query"],
        },
    },
}


def call_block(query: str) -> str:
    """A Hermes-style call, as the Qwen2.5 template asks the model to write it."""
    arguments = json.dumps({"name": "web_search", "arguments": {"query": query}})
    return f"<tool_call>\n{arguments}\n</tool_call>"


def repeat(text: str) -> list[dict[str, Any]]:
    """Messages asking the model to write `text` back exactly (the 135M model does)."""
    return [{"role": "user", "content": f"Repeat exactly, with nothing else:\n{text}"}]


def echo(text: str) -> list[dict[str, Any]]:
    """`repeat` with one example turn first: under the gateway's Web system line the 135M
    model explains a bare `<tool_call>` block instead of repeating it, but after one
    repeated example it repeats this one too (with either template)."""
    return [
        *repeat("<b>Hello</b>"),
        {"role": "assistant", "content": "<b>Hello</b>"},
        *repeat(text),
    ]


@dataclass(frozen=True)
class Streamed:
    """A streamed answer, read to its end.

    Attributes:
        status: The HTTP status.
        content_type: The Content-Type header.
        raw: The body's bytes as sent.
        events: The `data:` payloads decoded as JSON, in order (`[DONE]` not included).
        done: Whether the last `data:` line was `[DONE]`.
    """

    status: int
    content_type: str
    raw: bytes
    events: list[dict[str, Any]]
    done: bool

    def choice_events(self) -> list[dict[str, Any]]:
        """The events that carry a choice (not the usage-only chunk)."""
        return [e for e in self.events if e.get("choices")]

    def content(self) -> str:
        """The streamed text, joined."""
        return "".join(e["choices"][0]["delta"].get("content") or "" for e in self.choice_events())

    def tool_call_fragments(self) -> list[dict[str, Any]]:
        """Every `delta.tool_calls` entry, in order."""
        return [
            fragment
            for e in self.choice_events()
            for fragment in e["choices"][0]["delta"].get("tool_calls") or []
        ]

    def finish_reason(self) -> str | None:
        """The last choice event's finish reason."""
        reasons = [e["choices"][0].get("finish_reason") for e in self.choice_events()]
        return next((r for r in reversed(reasons) if r), None)


def headers(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


def post(base: str, body: dict[str, Any], key: str | None = None) -> httpx.Response:
    """A non-streaming POST to `base/chat/completions`."""
    return httpx.post(f"{base}/chat/completions", json=body, headers=headers(key), timeout=TIMEOUT)


def stream(base: str, body: dict[str, Any], key: str | None = None) -> Streamed:
    """A streaming POST to `base/chat/completions`, read to its end and decoded."""
    raw = b""
    with httpx.stream(
        "POST", f"{base}/chat/completions", json=body, headers=headers(key), timeout=TIMEOUT
    ) as response:
        for part in response.iter_raw():
            raw += part
    events: list[dict[str, Any]] = []
    done = False
    for line in raw.decode().splitlines():
        if not line.startswith("data:"):
            continue
        data = line[len("data:") :].strip()
        done = data == "[DONE]"
        if not done:
            events.append(json.loads(data))
    return Streamed(
        status=response.status_code,
        content_type=response.headers.get("content-type", ""),
        raw=raw,
        events=events,
        done=done,
    )


def tokens_predicted(base: str) -> int:
    """llama-server's count of tokens written since it started (`--metrics`), cancelled
    answers included."""
    text = httpx.get(base.removesuffix("/v1") + "/metrics", timeout=TIMEOUT).text
    for line in text.splitlines():
        if line.startswith("llamacpp:tokens_predicted_total "):
            return int(float(line.split()[1]))
    raise AssertionError("llama-server's /metrics has no llamacpp:tokens_predicted_total")
