"""A bounded pool of worker processes whose tasks have limits that really hold (I/O).

Turning a hostile page into text can cost seconds of CPU and hundreds of megabytes; done
on a thread, that work cannot be stopped, only abandoned, and it starves everything else.
Here each task runs in a worker process under three limits, :class:`WorkLimits`:

- CPU time: the worker lowers its own soft ``RLIMIT_CPU`` to the task's allowance; past
  it the kernel sends ``SIGXCPU``, which ends the worker (no handler, no core file);
- memory: the worker's address space (``RLIMIT_AS``) is capped at start; an allocation
  past it fails inside the task (``MemoryError``);
- wall-clock time, and cancellation: the worker running a task that overran, or whose
  caller gave up (crawl deadline, client gone, shutdown), is killed.

Each task gets a worker of its own, forked for it and killed after it: a worker that one
hostile page subverted never sees another page (another read's least of all), and no
state of one task reaches the next. Workers are forked from a ``forkserver`` process that
has imported ``preload`` once, so a worker starts in milliseconds and never inherits the
gRPC server's threads or sockets; one is started ahead for each free place, so a task
rarely waits for its start. (Before its task a forkserver's child imports the parent's
main module again, unless it is a package's ``__main__``, as ``python -m fetcher`` is: a
program that runs the pool from ``python -m some.module`` or a script pays that import on
every page.) At most ``workers`` tasks run at once; more wait, in order.
:attr:`WorkerPool.waiting` and :attr:`WorkerPool.busy` are what health and metrics report.

A worker has read hostile bytes, so what it sends back is untrusted input. Tasks go to
a worker pickled (the fetcher wrote them), but answers come back as one length-prefixed
JSON document of at most ``max_reply_bytes``, never as a pickle, whose loading would run
whatever code a subverted worker named. A task therefore returns plain JSON values
(:data:`Wire`) and its caller checks them field by field (``fetcher.html.extract`` does, for a
page). A worker cannot start processes of its own (``RLIMIT_NPROC`` 0), so killing it
stops all of its work. Frames on the worker's socket (one task, one answer)::

    parent ── 4-byte big-endian length, pickle of (function, args, kwargs, cpu) ──▶ worker
    parent ◀── 4-byte big-endian length, JSON {"value": ...} | {"error": "..."} ── worker
                                                 | {"memory": true}

The interface is one coroutine, :meth:`WorkerPool.run`, that returns the task's value or a
:class:`Stopped` value: page rendering (``fetcher.crawl``) uses it, and any other
untrusted-input work can.

PDFs, parsed by a far larger native library, do not come here: ``fetcher.pdf.worker``
runs each in a fresh ``python -I`` process and reads its answer as JSON.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import functools
import json
import math
import multiprocessing
import os
import pickle
import resource
import signal
import socket
import time
import traceback
from collections.abc import Callable, Coroutine, Sequence
from multiprocessing.process import BaseProcess
from typing import Any, ParamSpec, TypeAlias

from fetcher.errors import TaskError
from fetcher.isolation.places import Places

__all__ = ["Stopped", "Wire", "WorkLimits", "WorkerPool"]

P = ParamSpec("P")

#: What a task may return: JSON values, which cross back from the worker as JSON.
Wire: TypeAlias = "bool | int | float | str | list[Wire] | dict[str, Wire] | None"

MIB = 1024 * 1024
#: The largest answer a worker may send; a page's answer is at most about 100 KB.
MAX_REPLY_BYTES = MIB
#: Exit status of a worker that ran out of memory while answering that it had.
EXIT_MEMORY = 86
_HEADER = 4
#: Characters of a task's error (message and traceback) that travel back.
_ERROR_CHARS = 4000
#: Seconds a worker that closed its socket gets to exit before it is killed.
_EXIT_WAIT = 1.0


@dataclasses.dataclass(frozen=True, slots=True)
class WorkLimits:
    """What one task may use. Tests pass smaller ones; production uses the defaults.

    Attributes:
        cpu_seconds: CPU time of one task (whole seconds: the kernel counts in seconds).
        memory_bytes: Address space of a worker process, its interpreter included.
        wall_seconds: Wall-clock time of one task once a worker has taken it.
    """

    cpu_seconds: int = 3
    # Measured (bench/memory.py): a fresh worker starts at about 50 MiB of address space;
    # the extraction corpus's pages peak at 64 MiB at most, 2 MiB hostile pages at 100 to
    # 200 MiB, and only a few of tiny elements (500,000 list items) need more (350 to 400
    # MiB: stopped, like most of them already were at the CPU limit). Two workers at this
    # cap fit the fetcher unit's MemoryMax beside the PDF workers (tests/deploy/test_units.py).
    memory_bytes: int = 256 * MIB
    wall_seconds: float = 10.0


@dataclasses.dataclass(frozen=True, slots=True)
class Stopped:
    """A task that was stopped at a limit, or whose worker died or answered nonsense.

    Attributes:
        why: ``cpu``, ``memory``, ``wall`` or ``crashed``.
        detail: One line for people.
    """

    why: str
    detail: str


# --- the worker's side -------------------------------------------------------------------


def _start_worker(memory_bytes: int) -> None:
    """Runs once in each new worker: its memory cap, no core files, no child processes,
    a lower priority."""
    # prlimit(2), not setrlimit(2): the unit's SystemCallFilter=~@resources denies the
    # latter; lowering one's own limits needs no privilege either way.
    resource.prlimit(0, resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.prlimit(0, resource.RLIMIT_CORE, (0, 0))
    resource.prlimit(0, resource.RLIMIT_NPROC, (0, 0))
    # The event loop and lookups come first; nice(2) is refused under the unit's filter.
    with contextlib.suppress(OSError):
        os.nice(5)


def _within_cpu(cpu_seconds: int, work: Callable[[], Wire]) -> Wire:
    """Runs in the worker: ``work`` with ``cpu_seconds`` more of CPU than used so far
    (its start-up included, the task gets its whole allowance)."""
    used = time.process_time()
    soft = math.ceil(used + cpu_seconds)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.prlimit(0, resource.RLIMIT_CPU, (soft, hard))
    return work()


def _receive(channel: socket.socket) -> bytes | None:
    """One frame from the parent, or None when the parent has gone."""
    header = _receive_exactly(channel, _HEADER)
    if header is None:
        return None
    return _receive_exactly(channel, int.from_bytes(header, "big"))


def _receive_exactly(channel: socket.socket, size: int) -> bytes | None:
    data = bytearray()
    while len(data) < size:
        chunk = channel.recv(min(size - len(data), 1 << 20))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def _answer(task: bytes) -> bytes:
    """Runs one task; its value, error or memory failure as a JSON document."""
    try:
        function, args, kwargs, cpu_seconds = pickle.loads(task)  # noqa: S301 - the parent's
        value = _within_cpu(cpu_seconds, functools.partial(function, *args, **kwargs))
        return json.dumps({"value": value}, ensure_ascii=False, allow_nan=False).encode()
    except MemoryError:
        return b'{"memory": true}'
    except Exception as exc:  # the caller gets the bug as text, never as an object
        text = "".join(traceback.format_exception(exc))
        error = f"{type(exc).__name__}: {exc}"[:_ERROR_CHARS]
        return json.dumps({"error": error, "traceback": text[-_ERROR_CHARS:]}).encode()


def _serve(channel: socket.socket, memory_bytes: int) -> None:
    """A worker's life: limits, one task, one answer (the parent then kills it)."""
    _start_worker(memory_bytes)
    try:
        task = _receive(channel)
        if task is not None:
            reply = _answer(task)
            channel.sendall(len(reply).to_bytes(_HEADER, "big") + reply)
    except MemoryError:
        os._exit(EXIT_MEMORY)


# --- the parent's side -------------------------------------------------------------------


class _BadReply(Exception):
    """The worker's answer is not what the protocol allows."""


@dataclasses.dataclass(eq=False, slots=True)
class _Worker:
    process: BaseProcess
    #: The parent's end of the worker's socket, non-blocking (the event loop's sock_*).
    channel: socket.socket


async def _receive_reply(channel: socket.socket, size: int) -> bytes:
    """Exactly ``size`` bytes from a worker; EOFError when it hangs up first."""
    loop = asyncio.get_running_loop()
    data = bytearray(size)
    view = memoryview(data)
    got = 0
    while got < size:
        count = await loop.sock_recv_into(channel, view[got:])
        if count == 0:
            raise EOFError
        got += count
    return bytes(data)


def _decode(body: bytes) -> dict[str, Any]:
    """A worker's answer as a checked JSON object (untrusted: never unpickled)."""
    try:
        reply = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise _BadReply("an answer that is not JSON") from exc
    if not isinstance(reply, dict) or len(reply.keys() - {"traceback"}) != 1:
        raise _BadReply("an answer of the wrong shape")
    if "error" in reply and not isinstance(reply["error"], str):
        raise _BadReply("an error that is not text")
    if not reply.keys() & {"value", "error", "memory"}:
        raise _BadReply("an answer of the wrong shape")
    return reply


class WorkerPool:
    """A fixed number of worker processes; tasks wait in order for a free one."""

    def __init__(
        self,
        *,
        workers: int = 2,
        limits: WorkLimits | None = None,
        preload: Sequence[str] = (),
        max_reply_bytes: int = MAX_REPLY_BYTES,
    ) -> None:
        """Prepares the pool (the forkserver and the workers start on first use).

        Args:
            workers: Tasks that run at once (processes).
            limits: Each task's limits.
            preload: Modules the forkserver imports once, so workers start ready.
            max_reply_bytes: The largest answer a worker may send.
        """
        self.limits = limits if limits is not None else WorkLimits()
        self.workers = workers
        self.max_reply_bytes = max_reply_bytes
        self._context = multiprocessing.get_context("forkserver")
        self._context.set_forkserver_preload(list(preload))
        self._places = Places(workers)
        self._starting = asyncio.Lock()
        #: Workers started ahead, that have seen no task.
        self._spares: list[_Worker] = []
        self._all: set[_Worker] = set()
        self._background: set[asyncio.Task[None]] = set()
        self._starting_spares = 0
        self._closed = False
        #: Tasks stopped so far, by ``Stopped.why``.
        self.stopped: collections.Counter[str] = collections.Counter()

    @property
    def busy(self) -> int:
        """Tasks running now."""
        return self._places.busy

    @property
    def waiting(self) -> int:
        """Tasks waiting for a worker."""
        return self._places.waiting

    @property
    def saturated(self) -> bool:
        """True when every worker is busy and at least as many tasks again wait."""
        return self.busy >= self.workers and self.waiting >= self.workers

    async def run(
        self, function: Callable[P, Wire], *args: P.args, **kwargs: P.kwargs
    ) -> Wire | Stopped:
        """Runs ``function(*args, **kwargs)`` in a worker, within the limits.

        ``function`` and its arguments must be picklable (a module-level function), and
        its value must be JSON (:data:`Wire`): it comes back as JSON, not as a pickle.
        Cancelling the caller kills the worker running the task.

        Returns:
            The function's value as JSON gave it back (tuples become lists), or
            :class:`Stopped` when a limit stopped it, its worker died or answered
            outside the protocol.

        Raises:
            TaskError: The function raised (``MemoryError`` aside); the error comes as
                text, its type name first.

        # Security
        Work on untrusted input ends within its limits: past ``cpu_seconds`` of CPU the
        kernel ends the worker, past ``memory_bytes`` allocations fail, past
        ``wall_seconds`` (or on cancellation) the worker is killed; at most ``workers``
        run at once, so the event loop, lookups and other reads keep their share of the
        machine. What a worker sends back is read as at most ``max_reply_bytes`` of JSON
        and never unpickled, so a worker subverted by the bytes it parsed can at worst
        lie in JSON, which callers check, about its own task only: it is killed after
        that task and never sees another. Proved by ``tests/fetcher/isolation/test_workers.py``
        (``test_a_worker_answer_is_never_unpickled``,
        ``test_no_worker_sees_a_second_task``, the limit tests) and
        ``tests/fetcher/test_service_crawl.py::test_a_read_beside_five_hostile_ones_succeeds``.
        """
        if self._closed:
            raise RuntimeError("the worker pool is closed")
        try:
            async with self._places.taken():
                result = await self._submit(function, *args, **kwargs)
        finally:
            self._start_spares()
        if isinstance(result, Stopped):
            self.stopped[result.why] += 1
        return result

    async def _submit(
        self, function: Callable[P, Wire], *args: P.args, **kwargs: P.kwargs
    ) -> Wire | Stopped:
        task = pickle.dumps(
            (function, args, kwargs, self.limits.cpu_seconds), protocol=pickle.HIGHEST_PROTOCOL
        )
        worker = await self._checkout()
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.limits.wall_seconds):
                await loop.sock_sendall(worker.channel, len(task).to_bytes(_HEADER, "big") + task)
                header = await _receive_reply(worker.channel, _HEADER)
                size = int.from_bytes(header, "big")
                if size > self.max_reply_bytes:
                    raise _BadReply(f"an answer of {size} bytes")
                reply = _decode(await _receive_reply(worker.channel, size))
        except TimeoutError:
            self._retire_later(worker)
            return Stopped("wall", f"stopped after {self.limits.wall_seconds:g} s")
        except (EOFError, ConnectionError):
            return await self._ended(worker)
        except _BadReply as exc:
            self._retire_later(worker)
            return Stopped("crashed", f"the worker sent {exc}")
        except BaseException:  # cancelled: the work stops with its caller
            self._retire_later(worker)
            raise
        # One task per worker: whatever the page did to it ends with it.
        self._retire_later(worker)
        if "memory" in reply:
            return Stopped("memory", f"over {self.limits.memory_bytes // MIB} MiB of memory")
        if "error" in reply:
            raise TaskError(reply["error"], str(reply.get("traceback", "")))
        value: Wire = reply["value"]
        return value

    async def _checkout(self) -> _Worker:
        """A worker started ahead that is still alive, or a new one."""
        while self._spares:
            worker = self._spares.pop()
            if worker.process.is_alive():
                return worker
            self._retire_later(worker)
        return await self._start()

    def _start_spares(self) -> None:
        """Starts workers ahead, in the background, for the places no task holds."""
        missing = self.workers - self.busy - len(self._spares) - self._starting_spares
        for _ in range(max(0, missing) if not self._closed else 0):
            self._starting_spares += 1
            self._in_background(self._start_spare())

    async def _start_spare(self) -> None:
        try:
            worker = await self._start()
        finally:
            self._starting_spares -= 1
        if self._closed:
            await self._retire(worker)
        else:
            self._spares.append(worker)

    def _in_background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _retire_later(self, worker: _Worker) -> None:
        """Kills a worker now; its process and socket are let go in the background."""
        _kill(worker)
        self._in_background(self._retire(worker))

    async def _start(self) -> _Worker:
        async with self._starting:  # Process.start() is not safe from two threads at once
            parent, child = socket.socketpair()
            process = self._context.Process(
                target=_serve, args=(child, self.limits.memory_bytes), daemon=True
            )
            try:
                # The first start also starts the forkserver (and its preload imports).
                await asyncio.to_thread(process.start)
            except BaseException:
                parent.close()
                raise
            finally:
                child.close()
        parent.setblocking(False)
        worker = _Worker(process, parent)
        self._all.add(worker)
        return worker

    async def _ended(self, worker: _Worker) -> Stopped:
        """Why a worker that hung up ended: its exit status says which limit it met."""
        await asyncio.to_thread(worker.process.join, _EXIT_WAIT)
        code = worker.process.exitcode
        await self._retire(worker)
        if self._closed:
            return Stopped("crashed", "the worker pool is closing")
        if code == -signal.SIGXCPU:
            return Stopped("cpu", f"over {self.limits.cpu_seconds} s of CPU time")
        if code in (-signal.SIGKILL, EXIT_MEMORY):
            # SIGKILL is the kernel's answer to a memory limit it had to enforce itself.
            return Stopped("memory", "the worker was killed")
        return Stopped("crashed", f"the worker ended with status {code}")

    async def _retire(self, worker: _Worker) -> None:
        """Kills a worker (if it still runs) and lets its process and socket go."""
        self._all.discard(worker)
        _kill(worker)
        worker.channel.close()
        # The forkserver reaps the process; joining only collects its status.
        await asyncio.to_thread(worker.process.join, 5.0)
        with contextlib.suppress(ValueError):
            worker.process.close()

    async def aclose(self) -> None:
        """Stops every worker now and waits for the workers' ends to be collected."""
        self.close()
        while self._background:
            await asyncio.gather(*self._background, return_exceptions=True)

    def close(self) -> None:
        """Stops every worker now (tasks still running end as ``crashed``); :meth:`aclose`
        also waits for the background work (workers started ahead, ends collected)."""
        self._closed = True
        spares, self._spares = self._spares, []
        workers, self._all = list(self._all), set()
        for worker in workers:
            _kill(worker)
        for worker in workers:
            worker.process.join(timeout=5)
        # A running task's own coroutine closes its socket when it sees the end.
        for worker in spares:
            worker.channel.close()


def _kill(worker: _Worker) -> None:
    if worker.process.exitcode is None:
        with contextlib.suppress(OSError, ValueError):
            worker.process.kill()
