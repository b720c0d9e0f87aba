"""Which engine serves which model (SPEC 2): configured names, or the engine's own list.

An engine configured without model names is asked for its ``/models`` (the way
llama-server names the model it loaded). Engines are independent: each has its own
cache (an answer is trusted for ``models_cache`` seconds, a failure for
``models_failure_cache``) and its own single look-up at a time, and look-ups of several
engines run concurrently, so a hung engine delays only requests that need it, at most
once per failure-cache period.

Names (SPEC 2): a request names a model exactly as an engine lists it, or, for a model
the engine names by its file path (llama-server started with ``-m /x/y/Model.Q4.gguf``
lists ``/x/y/Model.Q4.gguf``), by the file's own name with or without ``.gguf``
(`file_aliases`). An unknown model's 404 lists the names served (`unknown_model`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from gateway.engine.client import EngineClient, serves_no_model
from gateway.errors import EngineError, EngineUnreachableError, UnknownModelError
from gateway.settings import EngineSettings

log = logging.getLogger("gateway")


@dataclass(frozen=True)
class ModelEntry:
    """One model a configured engine serves."""

    model: str
    engine: EngineSettings


#: The suffix of llama.cpp's model files, left out of the shorter alias.
_GGUF = ".gguf"
#: An unknown model's 404 names at most this many of the models served (SPEC 2).
LISTED_NAMES = 20


def _aliases_of(name: str) -> tuple[str, ...]:
    """The file-name aliases of one served name: its last path part, and that without
    ``.gguf`` (any case); none for a name that is no file name."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    stem = base[: -len(_GGUF)] if base.lower().endswith(_GGUF) else base
    if base == name and stem == name:
        return ()  # not a path, not a .gguf file: a name like "qwen3"
    return tuple(dict.fromkeys(a for a in (base, stem) if a and a != name))


def file_aliases(names: Iterable[str]) -> dict[str, str]:
    """The aliases of path-named models (SPEC 2), each to the name it stands for.

    ``/x/y/Model.Q4.gguf`` is also ``Model.Q4.gguf`` and ``Model.Q4`` (a Windows path's
    ``\\`` separates parts too; a bare ``Model.Q4.gguf`` is also ``Model.Q4``). An alias two
    different names would give (``/a/M.gguf`` and ``/b/M.gguf``: ``M``) stands for
    neither, and a name that is served as it is never becomes an alias of another.
    """
    served = set(names)
    owners: dict[str, set[str]] = {}
    for name in served:
        for alias in _aliases_of(name):
            owners.setdefault(alias, set()).add(name)
    return {
        alias: next(iter(found))
        for alias, found in owners.items()
        if len(found) == 1 and alias not in served
    }


def unknown_model(model: str, names: Sequence[str]) -> UnknownModelError:
    """The 404 for ``model``, listing at most `LISTED_NAMES` of the names served (each
    once, in the order ``GET /v1/models`` lists them), with their short aliases."""
    distinct = list(dict.fromkeys(names))
    if not distinct:
        return UnknownModelError(f"The model {model!r} does not exist: no model is served.")
    short: dict[str, list[str]] = {}
    for alias, name in file_aliases(distinct).items():
        short.setdefault(name, []).append(alias)
    listed = []
    for name in distinct[:LISTED_NAMES]:
        also = sorted(short.get(name, ()), key=len)
        listed.append(f"{name} (or {also[0]})" if also else name)
    more = len(distinct) - LISTED_NAMES
    tail = f", and {more} more (GET /v1/models lists them all)" if more > 0 else ""
    return UnknownModelError(
        f"The model {model!r} does not exist. Models served: {', '.join(listed)}{tail}."
    )


class _Engine:
    """One engine's look-ups: the last answer or failure, and when it came."""

    def __init__(self, settings: EngineSettings) -> None:
        self.settings = settings
        self.lock = asyncio.Lock()
        self.names: tuple[str, ...] = settings.models
        self.error: EngineError | None = None
        self.at = float("-inf")
        #: Its last look-up (a chat's, or a health probe's) failed: its next answer is logged.
        self.failing = False


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
            # The remembered failure, raised afresh: raising one object again would grow
            # its traceback by these frames every time (and keep every asker's alive).
            raise engine.error.with_traceback(None)
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
            engine.failing = True
            if not configured and wait is None:
                engine.error, engine.at = exc, self._clock()
            return exc
        if engine.failing:
            # The operator read it was down (at start-up, in /healthz or a chat's line).
            log.info("engine %s answers now", engine.settings.label)
            engine.failing = False
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

    async def resolve(self, model: str) -> ModelEntry:
        """The engine serving ``model``, and the name it knows the model by.

        Configured names and fresh caches are read first, in configuration order; only
        engines whose lists are unknown or stale are asked, concurrently, and the first
        that names the model wins (a hung engine never delays another's answer). A name
        no engine lists may be a file-name alias (`file_aliases`) of a name listed by
        the engines that answered; the entry then carries the listed name, which is what
        the engine must be sent.

        Raises:
            UnknownModelError: No engine serves it (and every engine answered); the
                message lists the names served.
            EngineError: It was not found and some engine could not be asked.
        """
        stale: list[_Engine] = []
        for engine in self._engines:
            if not self._fresh(engine):
                stale.append(engine)
            elif engine.error is None and model in engine.names:
                return ModelEntry(model, engine.settings)
        errors = [e.error for e in self._engines if e not in stale and e.error is not None]
        pending = {asyncio.ensure_future(self._ask(e, model)): e for e in stale}
        try:
            for next_done in asyncio.as_completed(pending):
                found = await next_done
                if isinstance(found, EngineSettings):
                    return ModelEntry(model, found)
                if found is not None:
                    errors.append(found)
        finally:
            for task in pending:
                if not task.done():
                    self._background.add(task)
                    task.add_done_callback(self._background.discard)
        # Every engine has answered or failed: the names of those that answered.
        served = [
            ModelEntry(name, e.settings)
            for e in self._engines
            if e.error is None
            for name in e.names
        ]
        listed = file_aliases(entry.model for entry in served).get(model)
        if listed is not None:
            return next(entry for entry in served if entry.model == listed)
        failed = sorted({e.engine for e in errors})
        if len(failed) == 1:
            # One engine could not be asked: its own sentence says why (down, or a server
            # that answers but is not an engine) and what to change.
            raise EngineUnreachableError(
                f"The model engine that would serve this model could not be asked for its "
                f"models: {errors[0].message}",
                engine=failed[0],
            ) from errors[0]
        if errors:
            # Several engines failed: the message names them, the error no one.
            raise EngineUnreachableError(
                "The model engine that would serve this model cannot be reached "
                f"({', '.join(e for e in failed if e)}).",
                engine="",
            ) from errors[0]
        raise unknown_model(model, [entry.model for entry in served])

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
        ``/healthz``): None, or the failure saying why not (an engine that lists no model
        is one: no chat can reach it); an answer also refreshes the
        engine's cached list. Not behind the engine's look-up lock: a probe never waits
        for a hung look-up."""

        async def one(engine: _Engine) -> EngineError | None:
            failure = await self._look_up(engine, wait)
            if failure is None and not engine.names:
                # It answers, but no chat can be routed to it: not healthy.
                return EngineError(serves_no_model(engine.settings), engine=engine.settings.label)
            return failure

        results = await asyncio.gather(*(one(e) for e in self._engines))
        return [(e.settings, ok) for e, ok in zip(self._engines, results, strict=True)]
