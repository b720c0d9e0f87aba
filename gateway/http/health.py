"""``/healthz``: whether the gateway's engines, SearXNG and fetcher answer, cached briefly.

One check asks every engine's ``/models``, SearXNG's ``/healthz`` and the fetcher's health
service at once, each bounded by its own timeout; its answer is reused for
``health_cache`` seconds and concurrent callers share one check, so a storm of health
probes (or a hung engine) costs one look-up per period. Engines are named by
`EngineSettings.label` (configured name, else the address without credentials).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from gateway.engine.models import ModelDirectory

#: Longest wait for one engine's answer to a health probe.
PROBE_SECONDS = 1.0

#: One part of /healthz: ``{"checked": bool, "ok": bool | None, ...}``.
Probe = Callable[[], Awaitable[dict[str, Any]]]
#: The fetcher's part of /healthz (``gateway.http.fetcher_health.FetcherHealth`` in production).
FetcherProbe = Probe
#: SearXNG's part of /healthz (``gateway.tools.search.searxng.SearxngClient.health`` in production).
SearxngProbe = Probe


async def not_checked() -> dict[str, Any]:
    """For apps built without a probe of a part (tests of other parts): says so plainly."""
    return {"checked": False, "ok": None, "detail": "not checked"}


#: Kept for callers that name the fetcher's case.
fetcher_not_checked = not_checked


class Health:
    """The cached health answer."""

    def __init__(
        self,
        models: ModelDirectory,
        fetcher: FetcherProbe,
        searxng: SearxngProbe = not_checked,
        *,
        cache_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._models = models
        self._fetcher = fetcher
        self._searxng = searxng
        self._cache_seconds = cache_seconds
        self._clock = clock
        self._lock = asyncio.Lock()
        self._answer: dict[str, Any] | None = None
        self._at = float("-inf")

    async def check(self) -> dict[str, Any]:
        """``{"status": "ok"|"degraded", "engines": [{"engine", "ok"}], "searxng": {...},
        "fetcher": {...}}``; degraded when any part checked does not answer."""
        if self._answer is not None and self._clock() - self._at < self._cache_seconds:
            return self._answer
        async with self._lock:
            if self._answer is None or self._clock() - self._at >= self._cache_seconds:
                self._answer = await self._fresh()
                self._at = self._clock()
            return self._answer

    async def _fresh(self) -> dict[str, Any]:
        probes, searxng, fetcher = await asyncio.gather(
            self._models.probe(PROBE_SECONDS), self._searxng(), self._fetcher()
        )
        engines = [{"engine": engine.label, "ok": ok} for engine, ok in probes]
        healthy = (
            all(ok for _, ok in probes)
            and searxng.get("ok") is not False
            and fetcher.get("ok") is not False
        )
        return {
            "status": "ok" if healthy else "degraded",
            "engines": engines,
            "searxng": searxng,
            "fetcher": fetcher,
        }
