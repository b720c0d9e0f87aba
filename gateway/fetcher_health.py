"""The fetcher's part of ``/healthz``: does each configured fetcher answer health checks?

The gateway reaches the fetcher only through ``fetcher.client`` (the generated contract
behind it); this probe asks the standard gRPC health service of every target, at once,
with a short deadline, and never raises.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from fetcher.client import FetcherClient

PROBE_DEADLINE = 1.0


class FetcherHealth:
    """Health probe over one long-lived client per fetcher target."""

    def __init__(self, targets: Sequence[str], *, deadline: float = PROBE_DEADLINE) -> None:
        self._targets = tuple(targets)
        self._deadline = deadline
        self._clients: list[FetcherClient] | None = None

    async def __call__(self) -> dict[str, Any]:
        """``{"checked": true, "ok": bool, "targets": [{"target", "ok"}]}``."""
        if self._clients is None:
            # Channels are made inside the running loop that will use them.
            self._clients = [FetcherClient(target) for target in self._targets]
        answers = await asyncio.gather(
            *(client.healthy(deadline=self._deadline) for client in self._clients)
        )
        return {
            "checked": True,
            "ok": all(answers),
            "targets": [
                {"target": target, "ok": ok}
                for target, ok in zip(self._targets, answers, strict=True)
            ],
        }

    async def aclose(self) -> None:
        """Close every channel."""
        clients, self._clients = self._clients or [], None
        for client in clients:
            await client.close()
