"""``/healthz``: whether the gateway's engines, SearXNG and fetcher answer, cached briefly.

One check asks every engine's ``/models``, SearXNG's ``/healthz`` and the fetcher's health
service at once, each bounded by its own timeout; its answer is reused for
``health_cache`` seconds and concurrent callers share one check, so a storm of health
probes (or a hung engine) costs one look-up per period. Engines are named by
`EngineSettings.label` (configured name, else the address without credentials).

The answer is a value (`HealthAnswer`: one typed part per engine, SearXNG and the
fetcher); the ``/healthz`` handler alone writes it as JSON. Every part has a sentence an
operator can act on (SPEC 2), what answers or why not and what to change
(`engine_says`, `searxng_says`, `fetcher_says`, `target_says`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from gateway.engine.models import ModelDirectory
from gateway.errors import EngineError, EngineTimeoutError, EngineUnreachableError
from gateway.settings import EngineSettings
from gateway.tools.search.searxng import SearxngHealth

#: Longest wait for one engine's answer to a health probe.
PROBE_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class NotChecked:
    """A part the app was built without a probe for (tests of other parts)."""


@dataclass(frozen=True, slots=True)
class EngineHealth:
    """One engine's part of ``/healthz``.

    Attributes:
        engine: Its `EngineSettings.label`.
        ok: It answered ``/models``.
        says: The sentence for it (`engine_says`).
    """

    engine: str
    ok: bool
    says: str


@dataclass(frozen=True, slots=True)
class TargetHealth:
    """One fetcher target's answer to the gRPC health service.

    Attributes:
        target: The target as configured (``unix:/run/...`` or ``host:port``).
        ok: It answered SERVING before the deadline.
    """

    target: str
    ok: bool


@dataclass(frozen=True, slots=True)
class FetcherPart:
    """The fetcher's part of ``/healthz``: every configured target's answer."""

    targets: tuple[TargetHealth, ...]

    @property
    def ok(self) -> bool:
        """Every target answers."""
        return all(target.ok for target in self.targets)


#: The fetcher's part of /healthz (``gateway.http.fetcher_health.FetcherHealth`` in production).
FetcherProbe = Callable[[], Awaitable[FetcherPart | NotChecked]]
#: SearXNG's part of /healthz (``gateway.tools.search.searxng.SearxngClient.probe`` in production).
SearxngProbe = Callable[[], Awaitable[SearxngHealth | NotChecked]]


@dataclass(frozen=True, slots=True)
class HealthAnswer:
    """One health check's answer: every part, each with what it says.

    Attributes:
        engines: Each engine, in the configured order.
        searxng: SearXNG's probe, or not checked.
        fetcher: The fetcher's targets, or not checked.
    """

    engines: tuple[EngineHealth, ...]
    searxng: SearxngHealth | NotChecked
    fetcher: FetcherPart | NotChecked

    @property
    def status(self) -> Literal["ok", "degraded"]:
        """``degraded`` when any part checked does not answer."""
        healthy = (
            all(engine.ok for engine in self.engines)
            and (isinstance(self.searxng, NotChecked) or self.searxng.ok)
            and (isinstance(self.fetcher, NotChecked) or self.fetcher.ok)
        )
        return "ok" if healthy else "degraded"


async def not_checked() -> NotChecked:
    """For apps built without a probe of a part (tests of other parts): says so plainly."""
    return NotChecked()


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


def searxng_says(part: SearxngHealth | NotChecked) -> str:
    """SearXNG's sentence: it answers, its problem (what to change), or not checked."""
    if isinstance(part, NotChecked):
        return "SearXNG is not checked."
    if part.ok:
        return f"SearXNG at {part.url} answers."
    return part.problem or "SearXNG does not answer."


def target_says(target: TargetHealth) -> str:
    """One fetcher target's sentence: it answers, or what to do about it."""
    if target.ok:
        return f"The fetcher at {target.target} answers."
    return (
        f"The fetcher at {target.target} does not answer: start it (tigress-fetcher serve, "
        "or make run) or set TIGRESS_FETCHER; pages cannot be read until it answers."
    )


def fetcher_says(part: FetcherPart | NotChecked) -> str:
    """The fetcher's sentence: it answers, each target that does not, or not checked."""
    if isinstance(part, NotChecked):
        return "The fetcher is not checked."
    down = [target_says(target) for target in part.targets if not target.ok]
    return " ".join(down) if down else "The fetcher answers."


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
        self._answer: HealthAnswer | None = None
        self._at = float("-inf")

    async def check(self) -> HealthAnswer:
        """Every part's answer (reused for ``cache_seconds``; concurrent callers share
        one check)."""
        if self._answer is not None and self._clock() - self._at < self._cache_seconds:
            return self._answer
        async with self._lock:
            if self._answer is None or self._clock() - self._at >= self._cache_seconds:
                self._answer = await self._fresh()
                self._at = self._clock()
            return self._answer

    async def _fresh(self) -> HealthAnswer:
        probes, searxng, fetcher = await asyncio.gather(
            self._models.probe(PROBE_SECONDS), self._searxng(), self._fetcher()
        )
        engines = tuple(
            EngineHealth(engine.label, error is None, engine_says(engine, error))
            for engine, error in probes
        )
        return HealthAnswer(engines, searxng, fetcher)
