"""A bounded pool of worker processes whose tasks have limits that really hold (I/O).

Turning a hostile page into text can cost seconds of CPU and hundreds of megabytes; done
on a thread, that work cannot be stopped, only abandoned, and it starves everything else.
Here each task runs in a worker process of its own, forked for it by the pool's zygote and
confined before it reads its task (``fetcher.isolation.zygote``: memory, CPU time, no files, no
processes, a seccomp filter), and killed when it overruns its wall-clock time or its
caller gives up (crawl deadline, client gone, shutdown).

Each task gets a worker of its own: a worker that one hostile page subverted never sees
another page (another read's least of all), and no state of one task reaches the next. One
worker is forked ahead for each free place, so a task rarely waits for its fork. At most
``workers`` tasks run at once; more wait, in order. :attr:`WorkerPool.waiting` and
:attr:`WorkerPool.busy` are what health and metrics report.

A worker has read hostile bytes, so what it sends back is untrusted input: one
length-prefixed JSON document of at most ``max_reply_bytes``, never a pickle
(``fetcher.isolation.zygote.decode_answer``). A task therefore returns plain JSON values
(:data:`Wire`) and its caller checks them field by field (``fetcher.html.extract`` does, for a
page; ``fetcher.pdf.worker`` for a PDF). Frames on the worker's channel (one task, one
answer)::

    parent ── 4-byte big-endian length, pickle of (function, args, kwargs) ──▶ worker
    parent ◀── 4-byte big-endian length, JSON {"value": ...} | {"error": "..."} ── worker
                                                 | {"memory": true}

The interface is one coroutine, :meth:`WorkerPool.run`, that returns the task's value or a
:class:`Stopped` value: page rendering (``fetcher.crawl``) and PDF reading
(``fetcher.pdf.reader``) each have a pool, with their own preload and limits.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import pickle
import socket
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, ParamSpec

from fetcher.errors import IsolationError, TaskError
from fetcher.isolation.control import Worker, Zygote
from fetcher.isolation.places import Places
from fetcher.isolation.zygote import (
    MAX_REPLY_BYTES,
    MIB,
    BadAnswer,
    Stopped,
    Wire,
    WorkLimits,
    decode_answer,
    stopped_by,
)

__all__ = ["MIB", "Stopped", "Wire", "WorkLimits", "WorkerPool"]

P = ParamSpec("P")

_HEADER = 4
#: Seconds a worker that closed its channel gets to exit before it is killed.
_EXIT_WAIT = 1.0


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


class WorkerPool:
    """A fixed number of worker processes; tasks wait in order for a free one."""

    def __init__(
        self,
        *,
        workers: int = 2,
        limits: WorkLimits | None = None,
        preload: Sequence[str] = (),
        warm_up: str | None = None,
        max_reply_bytes: int = MAX_REPLY_BYTES,
    ) -> None:
        """Prepares the pool (its zygote and the workers start on first use).

        Args:
            workers: Tasks that run at once (processes).
            limits: Each task's limits.
            preload: Modules the zygote imports once, so workers start ready.
            warm_up: ``module:function`` each worker forked ahead runs once confined,
                before its task (constant work of ours: its first-page costs taken early).
            max_reply_bytes: The largest answer a worker may send.
        """
        self.limits = limits if limits is not None else WorkLimits()
        self.workers = workers
        self.max_reply_bytes = max_reply_bytes
        self._zygote = Zygote(preload, warm_up)
        self._places = Places(workers)
        #: Workers forked ahead, that have seen no task.
        self._spares: list[Worker] = []
        self._all: set[Worker] = set()
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

    @property
    def worker_pids(self) -> frozenset[int]:
        """Process ids of the workers that may still run (spares and tasks')."""
        return frozenset(worker.pid for worker in self._all if not worker.ended.done())

    @property
    def zygote_pid(self) -> int | None:
        """The zygote's process id, once the first worker was asked for."""
        return self._zygote.pid

    async def run(
        self, function: Callable[P, Wire], *args: P.args, **kwargs: P.kwargs
    ) -> Wire | Stopped:
        """Runs ``function(*args, **kwargs)`` in a worker, within the limits.

        ``function`` and its arguments must be picklable (a module-level function), and
        its value must be JSON (:data:`Wire`): it comes back as JSON, not as a pickle.
        Cancelling the caller kills the worker running the task.

        Returns:
            The function's value as JSON gave it back (tuples become lists), or
            :class:`Stopped` when a limit stopped it, its worker broke its confinement,
            died or answered outside the protocol.

        Raises:
            TaskError: The function raised (``MemoryError`` aside); the error comes as
                text, its type name first.
            fetcher.errors.IsolationError: The zygote could not start or has gone.

        # Security
        Work on untrusted input ends within its limits: past ``cpu_seconds`` of CPU the
        kernel ends the worker, past ``memory_bytes`` allocations fail, past
        ``wall_seconds`` (or on cancellation) the worker is killed, and a system call
        outside its filter kills it (``fetcher.isolation.zygote.worker_filter``); at most
        ``workers`` run at once, so the event loop, lookups and other reads keep their
        share of the machine. What a worker sends back is read as at most
        ``max_reply_bytes`` of JSON and never unpickled, so a worker subverted by the
        bytes it parsed can at worst lie in JSON, which callers check, about its own task
        only: it is killed after that task and never sees another. Proved by
        ``tests/fetcher/isolation/test_workers.py`` (``test_a_worker_answer_is_never_unpickled``,
        ``test_no_worker_sees_a_second_task``, the limit tests),
        ``tests/fetcher/isolation/test_subverted_worker.py`` and
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
        task = pickle.dumps((function, args, kwargs), protocol=pickle.HIGHEST_PROTOCOL)
        worker = await self._checkout()
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.limits.wall_seconds):
                await loop.sock_sendall(worker.channel, len(task).to_bytes(_HEADER, "big") + task)
                header = await _receive_reply(worker.channel, _HEADER)
                size = int.from_bytes(header, "big")
                if size > self.max_reply_bytes:
                    raise BadAnswer(f"an answer of {size} bytes")
                reply = decode_answer(await _receive_reply(worker.channel, size))
        except TimeoutError:
            self._retire_later(worker)
            return Stopped("wall", f"stopped after {self.limits.wall_seconds:g} s")
        except (EOFError, ConnectionError):
            return await self._ended(worker)
        except BadAnswer as exc:
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

    async def _checkout(self) -> Worker:
        """A worker forked ahead that is still alive, or a new one."""
        while self._spares:
            worker = self._spares.pop()
            if not worker.ended.done():
                return worker
            self._retire_later(worker)
        return await self._start()

    def _start_spares(self) -> None:
        """Forks workers ahead, in the background, for the places no task holds or awaits
        (a task that waits forks its own: at most ``workers`` workers exist at once)."""
        taken = self.busy + self.waiting
        missing = self.workers - taken - len(self._spares) - self._starting_spares
        for _ in range(max(0, missing) if not self._closed else 0):
            self._starting_spares += 1
            self._in_background(self._start_spare())

    async def _start_spare(self) -> None:
        try:
            worker = await self._start(warm=True)
        except IsolationError:
            # The zygote has gone or cannot fork: nothing waits on a spare, and the next
            # task's own fork says so to its read (no "exception never retrieved" here).
            return
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

    def _retire_later(self, worker: Worker) -> None:
        """Kills a worker now; its channel and status are let go in the background."""
        self._all.discard(worker)
        worker.kill()
        self._in_background(self._retire(worker))

    async def _start(self, *, warm: bool = False) -> Worker:
        # The first fork also starts the zygote (and its preload imports).
        worker = await self._zygote.fork(self.limits, warm=warm)
        self._all.add(worker)
        return worker

    async def _ended(self, worker: Worker) -> Stopped:
        """Why a worker that hung up ended: its exit status says which limit it met."""
        try:
            code = await asyncio.wait_for(asyncio.shield(worker.ended), _EXIT_WAIT)
        except TimeoutError:
            code = None
        except BaseException:  # cancelled: the worker goes all the same
            self._retire_later(worker)
            raise
        await self._retire(worker)
        if self._closed:
            return Stopped("crashed", "the worker pool is closing")
        if code is None:
            return Stopped("crashed", "the worker hung up without answering")
        return stopped_by(code, self.limits)

    async def _retire(self, worker: Worker) -> None:
        """Kills a worker (if it still runs) and lets its channel and status go (its pidfd
        and channel even when this is cancelled)."""
        self._all.discard(worker)
        worker.kill()
        try:
            # The zygote reaps the process; its status only needs collecting.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(worker.ended), 5.0)
        finally:
            worker.release()

    async def aclose(self) -> None:
        """Stops every worker now and waits for the zygote's end to be collected."""
        self.close()
        while self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        await self._zygote.aclose()

    def close(self) -> None:
        """Stops every worker now (a task still running raises ``IsolationError``, as when
        the zygote has gone); :meth:`aclose`
        also waits for the background work (workers forked ahead, ends collected)."""
        self._closed = True
        spares, self._spares = self._spares, []
        workers, self._all = list(self._all), set()
        for worker in workers:
            worker.kill()
        # A running task's own coroutine lets its worker go when it sees the end.
        for worker in spares:
            worker.release()
        self._zygote.close()
