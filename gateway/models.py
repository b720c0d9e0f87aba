"""Which engine serves which model (SPEC 2): configured names, or the engine's own list.

An engine configured without model names is asked for its ``/models`` (cached for the
``models_cache`` timeout), the way llama-server names the model it loaded.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from gateway.engine import EngineClient
from gateway.errors import EngineError, EngineUnreachableError, UnknownModelError
from gateway.settings import EngineSettings


@dataclass(frozen=True)
class ModelEntry:
    """One model a configured engine serves."""

    model: str
    engine: EngineSettings


class ModelDirectory:
    """Maps model names to engines, asking engines without configured names."""

    def __init__(
        self,
        engines: tuple[EngineSettings, ...],
        client: EngineClient,
        *,
        cache_seconds: float = 60.0,
        probe_seconds: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._engines = engines
        self._client = client
        self._cache_seconds = cache_seconds
        self._probe_seconds = probe_seconds
        self._clock = clock
        self._discovered: dict[str, tuple[float, tuple[str, ...]]] = {}
        self._lock = asyncio.Lock()

    async def _names(self, engine: EngineSettings) -> tuple[str, ...]:
        if engine.models:
            return engine.models
        now = self._clock()
        cached = self._discovered.get(engine.url)
        if cached is not None and now - cached[0] < self._cache_seconds:
            return cached[1]
        names = tuple(await self._client.list_models(engine, wait=self._probe_seconds))
        self._discovered[engine.url] = (now, names)
        return names

    async def entries(self) -> tuple[list[ModelEntry], list[EngineError]]:
        """Every model of every engine that answered, and the errors of those that did not."""
        entries: list[ModelEntry] = []
        errors: list[EngineError] = []
        async with self._lock:
            for engine in self._engines:
                try:
                    names = await self._names(engine)
                except EngineError as exc:
                    errors.append(exc)
                    continue
                entries.extend(ModelEntry(name, engine) for name in names)
        return entries, errors

    async def resolve(self, model: str) -> EngineSettings:
        """The engine serving ``model``.

        Raises:
            UnknownModelError: No engine serves it (and every engine answered).
            EngineError: It was not found and some engine could not be asked.
        """
        # Configured names first: no engine has to be reachable to route them.
        for engine in self._engines:
            if model in engine.models:
                return engine
        entries, errors = await self.entries()
        for entry in entries:
            if entry.model == model:
                return entry.engine
        if errors:
            raise EngineUnreachableError(
                "The model engine that would serve this model cannot be reached."
            ) from errors[0]
        raise UnknownModelError(f"The model {model!r} does not exist.")

    async def probe(self) -> list[tuple[EngineSettings, bool]]:
        """Whether each engine answers its ``/models`` now (for ``/healthz``)."""

        async def one(engine: EngineSettings) -> bool:
            try:
                await self._client.list_models(engine, wait=self._probe_seconds)
            except EngineError:
                return False
            return True

        results = await asyncio.gather(*(one(e) for e in self._engines))
        return list(zip(self._engines, results, strict=True))
