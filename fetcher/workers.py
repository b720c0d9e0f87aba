"""A bounded pool of worker processes whose tasks have limits that really hold (I/O).

Turning a hostile page into text can cost seconds of CPU and hundreds of megabytes; done
on a thread, that work cannot be stopped, only abandoned, and it starves everything else.
Here each task runs in a worker process under three limits, :class:`WorkLimits`:

- CPU time: before each task the worker lowers its own soft ``RLIMIT_CPU`` to the CPU it
  has used plus the task's allowance; past it the kernel sends ``SIGXCPU``, which ends
  the worker (no handler, no core file);
- memory: the worker's address space (``RLIMIT_AS``) is capped once, at start; an
  allocation past it fails inside the task (``MemoryError``);
- wall-clock time, and cancellation: the worker running a task that overran, or whose
  caller gave up (crawl deadline, client gone, shutdown), is terminated.

A worker that ended is replaced by a fresh one (pebble does that). At most ``workers``
tasks run at once; more wait, in order, for a free worker. :attr:`WorkerPool.waiting`
and :attr:`WorkerPool.busy` are what health and metrics report. Workers are forked from a
``forkserver`` process that has imported ``preload`` once, so a replacement is ready in
milliseconds and never inherits the gRPC server's threads or sockets.

The interface is one coroutine, :meth:`WorkerPool.run`, that returns the task's result or a
:class:`Stopped` value: page rendering (``fetcher.crawl``) uses it.

What this pool does not contain: pebble returns results by pickle, and its workers live
for many tasks. A worker that a crafted page took over (a memory bug in libxml2, say)
could answer with a pickle that runs its code in the fetcher, or read and change the
later pages it renders, other reads' included. That is accepted for pages, for now: the
parsing is libxml2 and pure Python over at most 2 MiB, and closing it means a pool of our
own (JSON answers, a fresh process per page or a clean zygote to fork from). PDFs,
parsed by a far larger native library, do not come here: ``fetcher.pdfworker`` runs each
in a fresh process and reads its answer as JSON.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import dataclasses
import functools
import math
import multiprocessing
import os
import resource
import signal
import time
from collections.abc import Callable, Sequence
from typing import ParamSpec, TypeVar

import pebble

__all__ = ["Stopped", "WorkLimits", "WorkerPool"]

P = ParamSpec("P")
T = TypeVar("T")

MIB = 1024 * 1024


@dataclasses.dataclass(frozen=True, slots=True)
class WorkLimits:
    """What one task may use. Tests pass smaller ones; production uses the defaults.

    Attributes:
        cpu_seconds: CPU time of one task (whole seconds: the kernel counts in seconds).
        memory_bytes: Address space of a worker process, its interpreter included.
        wall_seconds: Wall-clock time of one task once a worker has taken it.
    """

    cpu_seconds: int = 3
    memory_bytes: int = 640 * MIB
    wall_seconds: float = 10.0


@dataclasses.dataclass(frozen=True, slots=True)
class Stopped:
    """A task that was stopped at a limit, or whose worker died.

    Attributes:
        why: ``cpu``, ``memory``, ``wall`` or ``crashed``.
        detail: One line for people.
    """

    why: str
    detail: str


def _start_worker(memory_bytes: int) -> None:
    """Runs once in each new worker: its memory cap, no core files, a lower priority."""
    # prlimit(2), not setrlimit(2): the unit's SystemCallFilter=~@resources denies the
    # latter; lowering one's own limits needs no privilege either way.
    resource.prlimit(0, resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.prlimit(0, resource.RLIMIT_CORE, (0, 0))
    # The event loop and lookups come first; nice(2) is refused under the unit's filter.
    with contextlib.suppress(OSError):
        os.nice(5)


def _within_cpu(cpu_seconds: int, work: Callable[[], T]) -> T:
    """Runs in the worker: ``work`` with ``cpu_seconds`` more of CPU than used so far."""
    used = time.process_time()
    soft = math.ceil(used + cpu_seconds)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.prlimit(0, resource.RLIMIT_CPU, (soft, hard))
    return work()


class WorkerPool:
    """A fixed number of worker processes; tasks wait in order for a free one."""

    def __init__(
        self,
        *,
        workers: int = 2,
        limits: WorkLimits | None = None,
        preload: Sequence[str] = (),
    ) -> None:
        """Starts the pool (the forkserver and the workers start on first use).

        Args:
            workers: Tasks that run at once (processes).
            limits: Each task's limits.
            preload: Modules the forkserver imports once, so workers start ready.
        """
        self.limits = limits if limits is not None else WorkLimits()
        self.workers = workers
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(list(preload))
        self._pool = pebble.ProcessPool(
            max_workers=workers,
            initializer=_start_worker,
            initargs=(self.limits.memory_bytes,),
            context=context,
        )
        self._slots = asyncio.Semaphore(workers)
        self._busy = 0
        self._waiting = 0
        self._closed = False
        #: Tasks stopped so far, by ``Stopped.why``.
        self.stopped: collections.Counter[str] = collections.Counter()

    @property
    def busy(self) -> int:
        """Tasks running now."""
        return self._busy

    @property
    def waiting(self) -> int:
        """Tasks waiting for a worker."""
        return self._waiting

    @property
    def saturated(self) -> bool:
        """True when every worker is busy and at least as many tasks again wait."""
        return self._busy >= self.workers and self._waiting >= self.workers

    async def run(self, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T | Stopped:
        """Runs ``function(*args, **kwargs)`` in a worker, within the limits.

        ``function`` and its arguments must be picklable (a module-level function).
        Cancelling the caller terminates the worker running the task.

        Returns:
            The function's result, or :class:`Stopped` when a limit stopped it or its
            worker died. Exceptions the function raises (other than ``MemoryError``)
            are raised here.

        # Security
        Work on untrusted input ends within its limits: past ``cpu_seconds`` of CPU the
        kernel ends the worker, past ``memory_bytes`` allocations fail, past
        ``wall_seconds`` (or on cancellation) the worker is terminated; at most
        ``workers`` run at once, so the event loop, lookups and other reads keep their
        share of the machine. Proved by ``tests/fetcher/test_workers.py`` and
        ``tests/fetcher/test_service_crawl.py::test_a_read_beside_five_hostile_ones_succeeds``.
        """
        if self._closed:
            raise RuntimeError("the worker pool is closed")
        self._waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self._waiting -= 1
        self._busy += 1
        try:
            result = await self._submit(function, *args, **kwargs)
        finally:
            self._busy -= 1
            self._slots.release()
        if isinstance(result, Stopped):
            self.stopped[result.why] += 1
        return result

    async def _submit(
        self, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs
    ) -> T | Stopped:
        try:
            work = functools.partial(function, *args, **kwargs)
            future = self._pool.submit(
                _within_cpu, self.limits.wall_seconds, self.limits.cpu_seconds, work
            )
            return await asyncio.wrap_future(future)
        except TimeoutError:
            return Stopped("wall", f"stopped after {self.limits.wall_seconds:g} s")
        except MemoryError:
            return Stopped("memory", f"over {self.limits.memory_bytes // MIB} MiB of memory")
        except pebble.ProcessExpired as exc:
            if exc.exitcode == -signal.SIGXCPU:
                return Stopped("cpu", f"over {self.limits.cpu_seconds} s of CPU time")
            if exc.exitcode == -signal.SIGKILL:
                # The kernel's answer to a memory limit it had to enforce itself.
                return Stopped("memory", "the worker was killed")
            return Stopped("crashed", f"the worker ended with status {exc.exitcode}")
        except concurrent.futures.CancelledError:
            # The pool cancelled the task (it is closing), not our caller.
            return Stopped("crashed", "the worker pool is closing")

    def close(self) -> None:
        """Stops every worker now (tasks still running are cancelled)."""
        self._closed = True
        self._pool.stop()  # type: ignore[no-untyped-call]
        self._pool.join(timeout=5)
