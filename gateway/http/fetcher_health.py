"""The fetcher's part of ``/healthz``: does each configured fetcher answer health checks?

The gateway reaches the fetcher only through ``fetcher.client`` (the generated contract
behind it); this probe asks the standard gRPC health service of every target, at once,
with a short deadline, and never raises. It uses the clients the composition root built
for the page reader (one channel per target, closed by the root).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from fetcher.client import FetcherClient
from gateway.http.health import FetcherPart, TargetHealth

PROBE_DEADLINE = 1.0


class FetcherHealth:
    """Health probe over one long-lived client per fetcher target."""

    def __init__(
        self, clients: Sequence[FetcherClient], *, deadline: float = PROBE_DEADLINE
    ) -> None:
        self._clients = tuple(clients)
        self._deadline = deadline

    async def __call__(self) -> FetcherPart:
        """Each target's answer, in the configured order."""
        answers = await asyncio.gather(
            *(client.healthy(deadline=self._deadline) for client in self._clients)
        )
        return FetcherPart(
            tuple(
                TargetHealth(client.target, ok)
                for client, ok in zip(self._clients, answers, strict=True)
            )
        )
