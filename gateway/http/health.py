"""``/healthz``: whether the gateway's engines, SearXNG and fetcher answer, cached briefly.

One check asks every engine's ``/models``, SearXNG's ``/healthz`` and the fetcher's health
service at once, each bounded by its own timeout; its answer is reused for
``health_cache`` seconds and concurrent callers share one check, so a storm of health
probes (or a hung engine) costs one look-up per period. Engines are named by
`EngineSettings.label` (configured name, else the address without credentials).

Every part carries ``says``: one sentence an operator can act on (SPEC 2), what answers
or why not and what to change (`engine_says`, `searxng_says`, `fetcher_says`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from gateway.engine.models import ModelDirectory
from gateway.errors import EngineError, EngineTimeoutError, EngineUnreachableError
from gateway.settings import EngineSettings

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


def engine_says(engine: EngineSettings, error: EngineError | None) -> str:
    """The engine's sentence: it answers, or its failure and what to do about it."""
    if error is None:
        return f"The engine {engine.label} answers."
    if isinstance(error, EngineTimeoutError):
        return (
            f"{error.message} Is it still loading its model, overloaded or hung, or is the "
            "address filtered (a firewall, IPAddressAllow= under systemd)? Chats time out "
            "until it answers."
        )
    if isinstance(error, EngineUnreachableError):
        return (
            f"{error.message} Start the model server there (llama-server, vLLM, Ollama) or "
            "set TIGRESS_ENGINE_URL (or engine_url); chats get 502 until it answers."
        )
    return error.message


def searxng_says(part: dict[str, Any]) -> str:
    """SearXNG's sentence: it answers, its problem (what to change), or not checked."""
    if not part.get("checked", True):
        return "SearXNG is not checked."
    if part.get("ok"):
        return f"SearXNG at {part.get('url', '')} answers."
    return str(part.get("problem") or "SearXNG does not answer.")


def fetcher_says(part: dict[str, Any]) -> dict[str, Any]:
    """The fetcher's part with a sentence for it and for each target."""
    if not part.get("checked", True):
        return {**part, "says": "The fetcher is not checked."}
    targets = [
        {
            **target,
            "says": f"The fetcher at {target['target']} answers."
            if target.get("ok")
            else f"The fetcher at {target['target']} does not answer: start it "
            "(tigress-fetcher serve, or make run) or set TIGRESS_FETCHER; pages cannot be "
            "read until it answers.",
        }
        for target in part.get("targets", [])
    ]
    down = [t for t in targets if not t.get("ok")]
    says = " ".join(t["says"] for t in down) if down else "The fetcher answers."
    return {**part, "targets": targets, "says": says}


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
        engines = [
            {"engine": engine.label, "ok": error is None, "says": engine_says(engine, error)}
            for engine, error in probes
        ]
        searxng = {**searxng, "says": searxng_says(searxng)}
        fetcher = fetcher_says(fetcher)
        healthy = (
            all(error is None for _, error in probes)
            and searxng.get("ok") is not False
            and fetcher.get("ok") is not False
        )
        return {
            "status": "ok" if healthy else "degraded",
            "engines": engines,
            "searxng": searxng,
            "fetcher": fetcher,
        }
