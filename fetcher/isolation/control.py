"""The fetcher's end of a zygote (I/O): starts it, asks it for workers, learns how they
ended.

The zygote and its workers are ``fetcher.isolation.zygote``, a program of its own; this
module is what the fetcher runs: it starts that program with an inherited unnamed control
channel, sends it one message per worker (its limits, and the far end of the worker's own
channel as SCM_RIGHTS), and hands each :class:`Worker` to the pool
(``fetcher.isolation.workers``). It holds the event loop's side (asyncio, subprocess),
which the zygote never imports: every module in the zygote's memory is copied into each
worker's page tables at its fork, so the zygote holds only what a worker needs.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

from fetcher.errors import IsolationError
from fetcher.isolation.zygote import CONTROL_BYTES, WorkLimits

__all__ = ["Worker", "Zygote"]


@dataclasses.dataclass(eq=False, slots=True)
class Worker:
    """A worker forked for one task: its process id, a pidfd for it (the zygote's, passed
    over the control channel), the fetcher's end of its channel (non-blocking) and its
    exit status once the zygote collected it."""

    pid: int
    pidfd: int
    channel: socket.socket
    ended: asyncio.Future[int]

    def kill(self) -> None:
        """SIGKILL to this worker, never to another process.

        # Security
        Rule: the fetcher signals a worker through a pidfd, which names that process
        alone. Threat: a signal by process id reaching an unrelated process of the
        fetcher's user that was given the id after the zygote reaped the worker (the
        zygote reaps first and reports after, so the fetcher cannot know in time).
        Callers rely on: after :meth:`release` the pidfd is gone and this does nothing
        (its number may name another descriptor by then). Proof:
        tests/fetcher/isolation/test_workers.py (``test_a_worker_is_killed_by_its_pidfd``).
        """
        if self.pidfd >= 0:
            with contextlib.suppress(OSError):  # ended already: nothing to kill
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)

    def release(self) -> None:
        """Closes the fetcher's end of the worker's channel and its pidfd (once)."""
        self.channel.close()
        if self.pidfd >= 0:
            os.close(self.pidfd)
            self.pidfd = -1


class Zygote:
    """The fetcher's end of one zygote: forks workers on request, tells how they ended.

    Started on the first :meth:`fork` (inside the event loop that uses it), so a pool
    built before the loop runs starts nothing; :meth:`close` kills it and its workers.
    """

    def __init__(self, preload: Sequence[str], warm_up: str | None = None) -> None:
        """Args:
        preload: Modules the zygote imports once, before it forks any worker.
        warm_up: ``module:function`` that a worker forked ahead (``fork(warm=True)``)
            runs once confined, before it reads its task; None for none.
        """
        self.preload = tuple(preload)
        self.warm_up = warm_up
        self._process: subprocess.Popen[bytes] | None = None
        self._control: socket.socket | None = None
        self._reader: asyncio.Task[None] | None = None
        self._started: dict[int, asyncio.Future[tuple[int, int]]] = {}
        self._ended: dict[int, asyncio.Future[int]] = {}
        self._next = 0
        self._lock = asyncio.Lock()

    @property
    def pid(self) -> int | None:
        """The zygote's process id, once started."""
        return self._process.pid if self._process is not None else None

    def _start(self) -> socket.socket:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._process = subprocess.Popen(  # noqa: S603 - our interpreter, our module
                [
                    sys.executable,
                    "-I",  # no PYTHON* variables, no user site, no current directory
                    "-B",  # no .pyc writes: a worker may not open a file for writing
                    "-m",
                    "fetcher.isolation.zygote",
                    str(theirs.fileno()),
                    json.dumps(sys.path),
                    self.warm_up or "",
                    *self.preload,
                ],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                start_new_session=True,  # a terminal's Ctrl-C goes to the fetcher only
                # Nothing of the fetcher's environment (LC_ALL: PDFium and Python read text
                # as UTF-8); not the coverage tool's either, whose fork hook would write its
                # data from confined workers, which the filter refuses (their code is
                # measured in-process: tests/fetcher/isolation/test_zygote.py).
                env={"LC_ALL": "C.UTF-8"},
            )
        except OSError as exc:
            ours.close()
            raise IsolationError(f"the worker zygote did not start: {exc}") from exc
        finally:
            theirs.close()
        ours.setblocking(False)
        self._control = ours
        self._reader = asyncio.get_running_loop().create_task(self._read(ours))
        return ours

    async def _read(self, control: socket.socket) -> None:
        """Takes the zygote's messages; when it is gone, every waiting worker ends."""
        try:
            while True:
                message, fds = await _receive_with_fds(control)
                if not message:
                    break
                self._take(json.loads(message), fds)
        except (OSError, ValueError, KeyError, TypeError):  # pragma: no cover - a zygote gone bad
            pass
        finally:
            waiting: list[asyncio.Future[Any]] = [*self._started.values(), *self._ended.values()]
            for future in waiting:
                if not future.done():
                    future.set_exception(IsolationError("the worker zygote has gone"))
                    # Whoever awaits it gets the error; a spare's end that nobody awaits
                    # any more is no error worth a warning.
                    future.exception()
            self._started.clear()
            self._ended.clear()

    def _take(self, reply: dict[str, int], fds: list[int]) -> None:
        """One message of the zygote's: a worker forked (its pid and pidfd) or ended.

        A fork's reply whose pidfd did not come (the kernel drops descriptors the fetcher
        has no room for) fails that fork: the worker, never given a task, ends when the
        fork closes its channel."""
        if "pid" in reply:
            started = self._started.pop(reply["id"], None)
            if started is not None and not started.done():
                if len(fds) == 1:
                    started.set_result((reply["pid"], fds[0]))
                    return
                started.set_exception(IsolationError("the worker's pidfd did not come"))
        else:
            ended = self._ended.pop(reply["id"], None)
            if ended is not None and not ended.done():
                ended.set_result(reply["status"])
        for fd in fds:  # a pidfd nobody waits for any more
            os.close(fd)

    async def fork(self, limits: WorkLimits, *, warm: bool = False) -> Worker:
        """A new worker under ``limits``, confined before it reads its task; ``warm``: it
        runs the zygote's warm-up first (a worker forked ahead of its task).

        Raises:
            IsolationError: The zygote could not be started or has gone.
        """
        loop = asyncio.get_running_loop()
        async with self._lock:  # messages and their replies in one order
            control = self._control
            if control is None:
                control = self._start()
            ident = self._next
            self._next += 1
            started: asyncio.Future[tuple[int, int]] = loop.create_future()
            ended: asyncio.Future[int] = loop.create_future()
            self._started[ident] = started
            self._ended[ident] = ended
            ours, theirs = socket.socketpair()
            try:
                request = {"id": ident, "limits": dataclasses.asdict(limits), "warm": warm}
                message = json.dumps(request)
                await _send_with_fd(control, message.encode(), theirs.fileno())
            except OSError as exc:
                ours.close()
                self._started.pop(ident, None)
                self._ended.pop(ident, None)
                raise IsolationError(f"the worker zygote has gone: {exc}") from exc
            finally:
                theirs.close()
        try:
            pid, pidfd = await started
        except BaseException:
            ours.close()
            if started.done() and not started.cancelled() and started.exception() is None:
                os.close(started.result()[1])  # forked as the caller gave up
            raise
        ours.setblocking(False)
        return Worker(pid, pidfd, ours, ended)

    async def aclose(self) -> None:
        """Stops the zygote (its workers are killed with it) and waits for its end."""
        process = self.close()
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)
        if process is not None:
            await asyncio.to_thread(process.wait)

    def close(self) -> subprocess.Popen[bytes] | None:
        """Closes the control channel: the zygote kills its workers and exits; returns
        its process, to be waited for."""
        if self._reader is not None:
            self._reader.cancel()
        if self._control is not None:
            self._control.close()
        return self._process


async def _send_with_fd(control: socket.socket, message: bytes, fd: int) -> None:
    """One control message carrying one descriptor, waiting while the channel is full."""
    loop = asyncio.get_running_loop()
    fds = array.array("i", [fd])
    while True:
        try:
            control.sendmsg([message], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
            return
        except BlockingIOError:  # pragma: no cover - 32 workers' messages never fill it
            writable = loop.create_future()
            loop.add_writer(control, writable.set_result, None)
            try:
                await writable
            finally:
                loop.remove_writer(control)


async def _receive_with_fds(control: socket.socket) -> tuple[bytes, list[int]]:
    """One control message and the descriptors it carries, waiting until one comes."""
    loop = asyncio.get_running_loop()
    while True:
        try:
            message, fds, _flags, _address = socket.recv_fds(control, CONTROL_BYTES, 1)
            return message, fds
        except BlockingIOError:
            readable = loop.create_future()
            loop.add_reader(control, readable.set_result, None)
            try:
                await readable
            finally:
                loop.remove_reader(control)
