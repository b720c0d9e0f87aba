"""Which engine serves which model (SPEC 2): configured names, or the engine's own list.

An engine configured without model names is asked for its ``/models`` (the way
llama-server names the model it loaded). Engines are independent: each has its own
cache (an answer is trusted for ``models_cache`` seconds, a failure for
``models_failure_cache``) and its own single look-up at a time, and look-ups of several
engines run concurrently, so a hung engine delays only requests that need it, at most
once per failure-cache period.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from gateway.engine.client import EngineClient
from gateway.errors import EngineError, EngineUnreachableError, UnknownModelError
from gateway.settings import EngineSettings


@dataclass(frozen=True)
class ModelEntry:
    """One model a configured engine serves."""

    model: str
    engine: EngineSettings


class _Engine:
    """One engine's look-ups: the last answer or failure, and when it came."""

    def __init__(self, settings: EngineSettings) -> None:
        self.settings = settings
        self.lock = asyncio.Lock()
        self.names: tuple[str, ...] = settings.models
        self.error: EngineError | None = None
        self.at = float("-inf")


class ModelDirectory:
    """Maps model names to engines, asking engines without configured names."""

    def __init__(
        self,
        engines: tuple[EngineSettings, ...],
        client: EngineClient,
        *,
        cache_seconds: float = 60.0,
        failure_seconds: float = 5.0,
        probe_seconds: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._engines = [_Engine(e) for e in engines]
        self._client = client
        self._cache_seconds = cache_seconds
        self._failure_seconds = failure_seconds
        self._probe_seconds = probe_seconds
        self._clock = clock
        #: Look-ups a resolve stopped waiting for: they finish (bounded by the probe
        #: timeout) so their answer or failure is cached.
        self._background: set[asyncio.Future[EngineSettings | EngineError | None]] = set()

    def _fresh(self, engine: _Engine) -> bool:
        if engine.settings.models:
            return True
        age = self._clock() - engine.at
        return age < (self._failure_seconds if engine.error else self._cache_seconds)

    async def _names(self, engine: _Engine) -> tuple[str, ...]:
        """The engine's names, from the cache or one look-up shared by concurrent askers.

        Raises:
            EngineError: The last look-up failed (also when it failed recently).
        """
        if not self._fresh(engine):
            async with engine.lock:
                if not self._fresh(engine):
                    await self._look_up(engine)
        if engine.error is not None:
            raise engine.error
        return engine.names

    async def _look_up(self, engine: _Engine, wait: float | None = None) -> EngineError | None:
        """Ask the engine; cache its answer, and its failure when this is a routing
        look-up (``wait`` None: a health probe's short deadline says nothing about
        routing). Returns the failure, None when the engine answered."""
        configured = bool(engine.settings.models)
        try:
            names = await self._client.list_models(
                engine.settings, wait=self._probe_seconds if wait is None else wait
            )
        except EngineError as exc:
            if not configured and wait is None:
                engine.error, engine.at = exc, self._clock()
            return exc
        if not configured:
            # Configured names route without asking; a probe never replaces them.
            engine.names, engine.error, engine.at = tuple(names), None, self._clock()
        return None

    async def entries(self) -> tuple[list[ModelEntry], list[EngineError]]:
        """Every model of every engine that answered, and the errors of those that did not
        (engines asked concurrently)."""

        async def one(engine: _Engine) -> tuple[str, ...] | EngineError:
            try:
                return await self._names(engine)
            except EngineError as exc:
                return exc

        answers = await asyncio.gather(*(one(e) for e in self._engines))
        entries: list[ModelEntry] = []
        errors: list[EngineError] = []
        for engine, answer in zip(self._engines, answers, strict=True):
            if isinstance(answer, EngineError):
                errors.append(answer)
            else:
                entries.extend(ModelEntry(name, engine.settings) for name in answer)
        return entries, errors

    async def resolve(self, model: str) -> EngineSettings:
        """The engine serving ``model``.

        Configured names and fresh caches are read first, in configuration order; only
        engines whose lists are unknown or stale are asked, concurrently, and the first
        that names the model wins (a hung engine never delays another's answer).

        Raises:
            UnknownModelError: No engine serves it (and every engine answered).
            EngineError: It was not found and some engine could not be asked.
        """
        stale: list[_Engine] = []
        for engine in self._engines:
            if not self._fresh(engine):
                stale.append(engine)
            elif engine.error is None and model in engine.names:
                return engine.settings
        errors = [e.error for e in self._engines if e not in stale and e.error is not None]
        pending = {asyncio.ensure_future(self._ask(e, model)): e for e in stale}
        try:
            for next_done in asyncio.as_completed(pending):
                found = await next_done
                if isinstance(found, EngineSettings):
                    return found
                if found is not None:
                    errors.append(found)
        finally:
            for task in pending:
                if not task.done():
                    self._background.add(task)
                    task.add_done_callback(self._background.discard)
        if errors:
            raise EngineUnreachableError(
                "The model engine that would serve this model cannot be reached "
                f"({', '.join(sorted({e.engine for e in errors if e.engine}))})."
            ) from errors[0]
        raise UnknownModelError(f"The model {model!r} does not exist.")

    async def _ask(self, engine: _Engine, model: str) -> EngineSettings | EngineError | None:
        try:
            names = await self._names(engine)
        except EngineError as exc:
            return exc
        return engine.settings if model in names else None

    async def aclose(self) -> None:
        """Stop look-ups still running in the background."""
        for task in list(self._background):
            task.cancel()
        if self._background:
            await asyncio.wait(self._background)

    async def probe(self, wait: float) -> list[tuple[EngineSettings, EngineError | None]]:
        """Whether each engine answers its ``/models`` within ``wait`` seconds (for
        ``/healthz``): None, or the failure saying why not; an answer also refreshes the
        engine's cached list. Not behind the engine's look-up lock: a probe never waits
        for a hung look-up."""

        async def one(engine: _Engine) -> EngineError | None:
            return await self._look_up(engine, wait)

        results = await asyncio.gather(*(one(e) for e in self._engines))
        return [(e.settings, ok) for e, ok in zip(self._engines, results, strict=True)]
