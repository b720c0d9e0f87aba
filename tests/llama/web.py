"""The Web switch in front of a real llama-server: a gateway in this process, the recorder
between it and the engine, and the checks every Web answer must pass on the wire.

The gateway is the production composition (`gateway.app.create_app` on uvicorn), one per
test so what it learns about an engine ("required" memory) starts from nothing. Its tools
are the real research tools (SearXNG stand-in, fetcher service) or the gateway tests'
`FakeSearch` where a case needs no web.
"""

from __future__ import annotations

import asyncio
import fcntl
import itertools
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any

import trustme
from prometheus_client import CollectorRegistry

from gateway.app import create_app
from gateway.http.serving import uvicorn_config
from gateway.metrics import GatewayMetrics
from gateway.settings import EngineSettings, Settings, Timeouts
from gateway.tools.base import Tool
from testkit.origin import Origin, running_origin
from tests.gateway.servers import serve
from tests.llama.build import cache_root
from tests.llama.conftest import GATEWAY_KEY
from tests.llama.recorder import Forwarded, Recorder

#: Generous engine timeouts (a loaded 2-core machine); keep-alives every 2 s.
WEB_TIMEOUTS = Timeouts(engine_connect=5.0, engine_read=90.0, tool=30.0, keepalive=2.0)
#: The port of the origin whose address a prompt carries. The greedy model's choices
#: depend on every token of its prompt, the port's digits included: with an ephemeral
#: port it wrote the second of two calls on about nine runs in ten. A fixed port keeps
#: the prompt the same on every run. Below Linux's ephemeral range (32768-60999), so no
#: connection is given it by chance; runs on one machine take turns (`fixed_origin`).
ORIGIN_PORT = 24446


@asynccontextmanager
async def fixed_origin(ca: trustme.CA) -> AsyncIterator[Origin]:
    """The HTTPS test origin on 127.0.0.1:`ORIGIN_PORT`, one suite run of this machine at
    a time (a lock file beside the llama-server build; released on exit or crash)."""
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with (root / f"origin-{ORIGIN_PORT}.lock").open("w") as handle:
        await asyncio.to_thread(fcntl.flock, handle, fcntl.LOCK_EX)
        async with running_origin(ca, ORIGIN_PORT) as origin:
            yield origin


@dataclass(frozen=True)
class WebGateway:
    """A running gateway and the recorder in front of its engine.

    Attributes:
        api: The gateway's OpenAI base URL.
        recorder: What the gateway sent the engine, and what it answered.
    """

    api: str
    recorder: Recorder


@asynccontextmanager
async def web_gateway(
    engine: str, *, tools: Iterable[Tool] | None = None, **changes: Any
) -> AsyncIterator[WebGateway]:
    """A gateway whose only engine is ``engine`` (its ``.../v1``), through a recorder.

    Args:
        engine: The llama-server's OpenAI base URL.
        tools: The tools offered (the real research tools when None).
        changes: `gateway.settings.Settings` fields (budgets, searxng_url, fetcher...).
    """
    async with Recorder(engine) as recorder:
        settings = Settings(
            engines=(EngineSettings(recorder.url),),
            api_keys=(GATEWAY_KEY,),
            timeouts=WEB_TIMEOUTS,
        )
        settings = replace(settings, **changes)
        metrics = GatewayMetrics(CollectorRegistry())
        app = create_app(settings, tools=tools, metrics=metrics)
        config = uvicorn_config(app, settings, metrics, log_level="warning")
        async with serve(app, config) as url:
            yield WebGateway(f"{url}/v1", recorder)


def web_body(
    model: str, messages: list[dict[str, Any]], *, stream: bool, **fields: Any
) -> dict[str, Any]:
    """A Web-on request with the suite's deterministic sampling."""
    return {
        "model": model,
        "messages": messages,
        "stream": stream,
        "thor_web_search": True,
        "temperature": 0,
        "seed": 7,
    } | fields


def assert_turns_alternate(chats: list[Forwarded]) -> None:
    """Every round's message list: no two messages of one role in a row (tool results,
    one per call, aside), and each tool result answers a call of the assistant turn
    before it, in call order (SPEC 3.3, 3.6)."""
    for round_number, chat in enumerate(chats, 1):
        messages = chat.body["messages"]
        roles = [m["role"] for m in messages]
        assert roles[0] == "system", round_number
        for before, after in itertools.pairwise(roles):
            assert before != after or after == "tool", (round_number, roles)
        for index, message in enumerate(messages):
            if message["role"] != "assistant" or not message.get("tool_calls"):
                continue
            ids = [call["id"] for call in message["tool_calls"]]
            answers = messages[index + 1 : index + 1 + len(ids)]
            assert [m["role"] for m in answers] == ["tool"] * len(ids), (round_number, roles)
            assert [m["tool_call_id"] for m in answers] == ids, round_number
