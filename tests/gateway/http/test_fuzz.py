"""A bounded, seeded fuzzer: thousands of mutated chat bodies, never a 5xx from the
gateway itself (issue 8: every bad input gets its OpenAI-shaped 4xx, never a 500)."""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from typing import Any

import httpx
from prometheus_client import CollectorRegistry

from tests.gateway.conftest import AUTH, FakeSearch, GatewayFactory

SEED = 20261201
BODIES = 2000
CONCURRENCY = 16

KEYS = [
    "model",
    "messages",
    "stream",
    "thor_web_search",
    "stream_options",
    "tools",
    "tool_choice",
    "n",
    "max_tokens",
    "temperature",
    "functions",
    "role",
    "content",
    "include_usage",
    "type",
    "image_url",
    "url",
    "text",
    "name",
    "tool_calls",
    "tool_call_id",
    "",
]
STRINGS = [
    "",
    "test-model",
    "hi",
    "\ud83d",
    "\udc00x",
    "\x00",
    "é" * 300,
    "<tool_call>",
    "data:,x",
    "https://169.254.169.254/",
    "user",
    "assistant",
    "system",
    "tool",
    "[DONE]",
    "1e309",
]


def value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(12 if depth < 3 else 8)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice([0, -1, 1, 2**63, -(2**70), 10**400])
    if kind == 3:
        return rng.choice([0.5, -0.0, 1e308, float("nan"), float("inf")])
    if kind in (4, 5, 6, 7):
        return rng.choice(STRINGS)
    if kind in (8, 9):
        return [value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if kind == 10:
        return {rng.choice(KEYS): value(rng, depth + 1) for _ in range(rng.randrange(4))}
    nesting = rng.choice([10, 500, 2000])
    return json.loads("[" * nesting + "]" * nesting) if nesting < 900 else "[" * nesting


def base(rng: random.Random) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "user", "content": "What is new in Rust?"}
    if rng.random() < 0.3:
        message["content"] = [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": rng.choice(STRINGS)}},
        ]
    body: dict[str, Any] = {"model": "test-model", "messages": [message]}
    for key, choices in (
        ("stream", [True, False]),
        ("thor_web_search", [True, False]),
        ("stream_options", [{"include_usage": True}]),
    ):
        if rng.random() < 0.5:
            body[key] = rng.choice(choices)
    return body


def mutate(rng: random.Random, body: dict[str, Any]) -> None:
    for _ in range(rng.randrange(1, 4)):
        target: dict[str, Any] = body
        messages = body.get("messages")
        if isinstance(messages, list) and messages and isinstance(messages[0], dict):
            target = rng.choice([body, messages[0]])
        action = rng.randrange(3)
        if action == 0 and target:
            target.pop(rng.choice(list(target)), None)
        else:
            target[rng.choice(KEYS)] = value(rng)


def encode(rng: random.Random, body: dict[str, Any]) -> bytes:
    text = json.dumps(body, ensure_ascii=rng.random() < 0.5, allow_nan=True)
    raw = text.encode("utf-8", "surrogatepass")
    cut = rng.randrange(10)
    if cut == 0 and raw:
        raw = raw[: rng.randrange(len(raw))]
    elif cut == 1 and raw:
        at = rng.randrange(len(raw))
        raw = raw[:at] + bytes([rng.randrange(256)]) + raw[at + 1 :]
    elif cut == 2:
        raw = b"\xef\xbb\xbf" + raw  # a byte-order mark
    elif cut == 3:
        raw = raw.replace(b'"model"', b'"model": 1, "model"', 1)  # a duplicate key
    return raw


async def test_thousands_of_mutated_bodies_never_get_a_5xx(
    gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    rng = random.Random(SEED)
    bodies = []
    for _ in range(BODIES):
        body = base(rng)
        mutate(rng, body)
        bodies.append(encode(rng, body))
    statuses: Counter[int] = Counter()
    failures: list[tuple[int, bytes, str]] = []
    registry = CollectorRegistry()
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    for raw in bodies:
        queue.put_nowait(raw)
    async with gateway_at(tools=[FakeSearch()], registry=registry) as url:

        async def worker() -> None:
            while not queue.empty():
                raw = queue.get_nowait()
                response = await http.post(
                    f"{url}/v1/chat/completions",
                    content=raw,
                    headers=AUTH | {"Content-Type": "application/json"},
                )
                statuses[response.status_code] += 1
                if response.status_code >= 500:
                    failures.append((response.status_code, raw[:300], response.text[:300]))
                elif response.status_code >= 400:
                    error = response.json()["error"]
                    assert isinstance(error["message"], str)

        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
        # Streams settle their metrics just after their last bytes went out.
        async with asyncio.timeout(10):
            while registry.get_sample_value("tigress_gateway_inflight_chats") != 0:
                await asyncio.sleep(0.01)
    print(dict(statuses))
    assert failures == []
    # The fuzzer reached both sides: answers and refusals.
    assert statuses[200] > 100
    assert statuses[400] > 100
