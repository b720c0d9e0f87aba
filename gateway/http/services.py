"""What every handler uses, built once in the app's lifespan and complete from then on."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from gateway.engine.client import EngineClient
from gateway.engine.models import ModelDirectory
from gateway.errors import BusyError
from gateway.http.access import KeyLimits
from gateway.http.health import Health
from gateway.loop.turn import FilterFactory, RequiredMemory
from gateway.mcp.http import McpEndpoint
from gateway.metrics import GatewayMetrics
from gateway.settings import Settings
from gateway.stream.drain import Drain
from gateway.tools.base import ToolBox

#: Seconds a client is asked to wait when the gateway has its limit of chats running.
SATURATED_RETRY_AFTER = 1


class ChatSlots:
    """The gateway-wide limit of chats served at once (``limits.max_chats``)."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self.running = 0

    @contextmanager
    def take(self) -> Iterator[None]:
        """Hold one slot for the block.

        Raises:
            BusyError: Every slot is taken (503 with Retry-After: the gateway is
                saturated, not the engine).
        """
        if self.running >= self._limit:
            raise BusyError(
                "The gateway is answering as many chats as it may; try again shortly.",
                SATURATED_RETRY_AFTER,
            )
        self.running += 1
        try:
            yield
        finally:
            self.running -= 1


@dataclass(frozen=True)
class Services:
    """The gateway's parts for one process (see `gateway.app.create_app`)."""

    settings: Settings
    metrics: GatewayMetrics
    engines: EngineClient
    models: ModelDirectory
    health: Health
    tools: ToolBox
    filter_factory: FilterFactory
    memory: RequiredMemory
    slots: ChatSlots
    key_limits: KeyLimits
    drain: Drain
    mcp: McpEndpoint
