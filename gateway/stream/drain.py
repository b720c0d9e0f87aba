"""Graceful shutdown: the grace period answers in flight get after SIGTERM.

`Drain.begin` starts the grace period; new chats are refused from then on (503,
`gateway.errors.ShuttingDownError`). When it ends, every answer still running is
interrupted: its event source is cancelled (engine requests and tools with it) and the
writer ends the stream with an error chunk saying why.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from gateway.errors import ShuttingDownError

#: What a client is told when its answer is cut at the end of the grace period.
CUT_MESSAGE = "The gateway is shutting down; the answer was cut off. Ask again in a moment."
#: Seconds a client is asked to wait before sending a new chat to a draining gateway.
RETRY_AFTER = 5


class Interruptible(Protocol):
    """An answer in flight (`gateway.stream.writer.Pump`)."""

    def interrupt(self, error: ShuttingDownError) -> None:
        """Stop the work now; the stream ends with ``error``."""
        ...


class Drain:
    """The process's shutdown state, shared by every request of one app."""

    def __init__(self) -> None:
        self._running: set[Interruptible] = set()
        self._timer: asyncio.TimerHandle | None = None
        self.draining = False

    def add(self, answer: Interruptible) -> None:
        """Track an answer until `discard`; one started after the grace period ended is
        interrupted at once."""
        self._running.add(answer)

    def discard(self, answer: Interruptible) -> None:
        """Stop tracking an answer."""
        self._running.discard(answer)

    def refuse_new(self) -> None:
        """Raise when draining.

        Raises:
            ShuttingDownError: The gateway is shutting down.
        """
        if self.draining:
            raise ShuttingDownError("The gateway is shutting down.", RETRY_AFTER)

    def begin(self, grace: float) -> None:
        """Start draining: new chats are refused; answers in flight get ``grace`` seconds."""
        if self.draining:
            return
        self.draining = True
        self._timer = asyncio.get_running_loop().call_later(grace, self.cut)

    def cut(self) -> None:
        """End the grace period: interrupt every answer still running."""
        error = ShuttingDownError(CUT_MESSAGE, RETRY_AFTER)
        for answer in list(self._running):
            answer.interrupt(error)

    @property
    def running(self) -> int:
        """Answers in flight."""
        return len(self._running)
