"""Worker processes for untrusted bytes: one fresh, confined process per task (I/O).

Pages (``fetcher.isolation.workers`` for ``fetcher.crawl``) and PDFs (``fetcher.pdf.worker``)
are both turned into text here, the same way: a **zygote** process, started once per pool as a new
program (``python -I -B -m fetcher.isolation.zygote``, so it holds nothing of the fetcher's
memory), imports the reader once and forks one **worker** per task. The worker confines
itself before it reads a byte of its task, runs it, answers and exits; a worker that a page
subverted never sees another page::

    fetcher ══control (inherited socketpair)══▶ zygote ──fork──▶ worker (fd 3: its channel)
       │  one message per worker: its limits + its channel's far end (SCM_RIGHTS)
       │◀═ {"id", "pid"} and its pidfd when forked, {"id", "status"} when it ended ═╝
       └──────────── task frame (pickle, ours) ──▶ worker: limits, seccomp, task
       ◀─────────── answer frame (JSON, capped, checked) ──┘

Where a fresh worker's time goes (bench/worker_start.py and bench/grpc_hop.py, measured on
the 2-core machine): a new interpreter costs about 40 ms, the HTML reader's imports about
400 ms and PDFium's about 80 ms, the reader's first page another 65 ms (the Public Suffix
List); a fork and exit of the warmed render zygote about 2 ms of CPU (its page tables: the
zygote holds 13 MiB of anonymous memory, so it imports nothing a worker does not need:
the fetcher's end is ``fetcher.isolation.control``), the worker's confinement 0.2 to 0.3
ms (the filter built once in the zygote), and its first page about 2 ms more than a later
one would (some 700 pages of the zygote's heap copied on write). So a worker is forked,
never started, the zygote renders one page before it forks anything, and a worker forked
ahead of its task renders a small page of ours once confined (``warm_up``), taking those
copies before a read waits for it.

**The control channel is no socket a worker can find.** It is an unnamed socketpair the
zygote inherits at start; a worker closes it (and every descriptor but its channel) before
anything else, and the filter then refuses ``socket``, ``connect`` and the rest, so no
worker can ask for a process without limits (the forkserver this replaces listened on a
named socket in ``/tmp``, which a subverted worker found and used).

**Confinement** (:func:`confine`, before the task is read): ``RLIMIT_AS`` (memory),
``RLIMIT_CPU`` (the task's seconds; ``SIGXCPU`` ends it), ``RLIMIT_FSIZE`` 0 (no file
grows), ``RLIMIT_NOFILE`` (a few descriptors), ``RLIMIT_NPROC`` 0 and ``RLIMIT_CORE`` 0; then
``no_new_privs`` and a seccomp filter built with libseccomp (``pyseccomp``, never a
hand-written BPF program): only what reading needs is allowed (reading any descriptor it
holds, writing its channel alone, memory, time, signals to itself, opening files read-only
for lazy imports, exit); anything else kills the whole worker (``SECCOMP_RET_KILL_PROCESS``):
``socket``, ``connect``, ``bind``, ``execve``, ``fork``/``clone``, ``ptrace``, ``kill`` of
another process, opening for writing, ``unlink``, ``rename``, ``chmod``, raising a limit.
Killing rather than failing the call is deliberate: no reader makes these calls, so one that
does is a subverted worker, and it ends at its first attempt, visibly (:class:`Stopped`
``confined``: the read is ``internal``, the fetch log and
``tigress_fetcher_worker_stops_total{why="confined"}`` say so). Writes to any other descriptor
(a library's warning on stderr) and terminal ``ioctl`` calls fail harmlessly instead.

**Answers are untrusted.** A worker answers once: a 4-byte big-endian length and one JSON
document of at most ``max_reply_bytes`` (:func:`decode_answer` checks its shape), never a
pickle. Tasks go to a worker pickled: the fetcher wrote them.

The zygote itself never reads untrusted bytes (only the fetcher's control messages), is
not dumpable (a same-user process cannot read or write its memory through ``/proc``),
runs under a filter of its own once its preload is done (:func:`zygote_filter`: no
sockets, no programs, no file removed, moved or written), and kills its workers and exits
when the fetcher's end of the control channel closes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import importlib
import json
import os
import pickle
import resource
import selectors
import signal
import socket
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

__all__ = [
    "CONTROL_BYTES",
    "MAX_REPLY_BYTES",
    "MIB",
    "WORKER_CHANNEL",
    "BadAnswer",
    "Stopped",
    "Wire",
    "WorkLimits",
    "confine",
    "decode_answer",
    "stopped_by",
    "worker_filter",
]

#: What a task may return: JSON values, which cross back from the worker as JSON.
Wire: TypeAlias = "bool | int | float | str | list[Wire] | dict[str, Wire] | None"

MIB = 1024 * 1024
#: The largest answer a worker may send; a page's answer is at most about 100 KB, a PDF's
#: (48,000 characters, escaped) a few hundred KB.
MAX_REPLY_BYTES = MIB
#: Exit status of a worker that ran out of memory while answering that it had.
EXIT_MEMORY = 86
#: The descriptor a worker's channel has in the worker (the only one it may write).
WORKER_CHANNEL = 3
_HEADER = 4
#: Characters of a task's error (message and traceback) that travel back.
_ERROR_CHARS = 4000
CONTROL_BYTES = 4096

# Flags that make open(2) create, truncate or write: a worker opening with any is killed.
_WRITE_FLAGS = (
    os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_EXCL | 0o20000000
)  # the last is __O_TMPFILE (Python has no name for it alone)

#: System calls a worker makes for any argument: reading what it holds, memory, time,
#: signals, its own identity, exit. Measured: the extraction and PDF corpora read under
#: the filter (tests/fetcher/isolation/test_subverted_worker.py, test_corpus_quality.py).
_ALLOWED = (
    "read", "readv", "pread64", "preadv", "lseek", "close", "fstat", "newfstatat", "stat",
    "lstat", "statx", "access", "faccessat", "faccessat2", "getdents64", "readlink",
    "readlinkat", "getcwd", "brk", "mmap", "munmap", "mremap", "mprotect", "madvise",
    "futex", "set_robust_list", "get_robust_list", "rseq", "restart_syscall",
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack", "clock_gettime",
    "clock_getres", "gettimeofday", "time", "nanosleep", "clock_nanosleep", "getpid",
    "gettid", "getppid", "getuid", "geteuid", "getgid", "getegid", "uname", "sysinfo",
    "sched_yield", "sched_getaffinity", "getrusage", "times", "getrandom", "getrlimit",
    "exit", "exit_group", "membarrier",
)  # fmt: skip
#: ``fcntl`` commands a worker may give (reading and setting a descriptor's flags).
_FCNTL = ("F_GETFD", "F_SETFD", "F_GETFL", "F_SETFL")


@dataclasses.dataclass(frozen=True, slots=True)
class WorkLimits:
    """What one task may use; pages and PDFs have one each (the settings ``page_*`` and
    ``pdf_*``). Tests pass smaller ones.

    Attributes:
        cpu_seconds: CPU time of one task (whole seconds: the kernel counts in seconds).
        memory_bytes: Address space of a worker process, its interpreter included.
        wall_seconds: Wall-clock time of one task once a worker has taken it.
        files: Open file descriptors a worker may hold (its channel and a few for Python).
    """

    cpu_seconds: int = 3
    # Measured (bench/memory.py): a fresh worker starts at about 50 MiB of address space;
    # the extraction corpus's pages peak at 64 MiB at most, 2 MiB hostile pages at 100 to
    # 200 MiB, and only a few of tiny elements (500,000 list items) need more (350 to 400
    # MiB: stopped, like most of them already were at the CPU limit). Two workers at this
    # cap fit the fetcher unit's MemoryMax beside the PDF workers (tests/deploy/test_units.py).
    memory_bytes: int = 256 * MIB
    wall_seconds: float = 10.0
    files: int = 16


@dataclasses.dataclass(frozen=True, slots=True)
class Stopped:
    """A task that was stopped at a limit, or whose worker died or answered nonsense.

    Attributes:
        why: ``cpu``, ``memory``, ``wall``, ``confined`` (the worker made a system call its
            filter refuses) or ``crashed``.
        detail: One line for people.
    """

    why: str
    detail: str


class BadAnswer(Exception):
    """A worker's answer is not what the protocol allows."""


# --- the worker's side (runs in a forked worker, before and after confinement) ----------


def worker_filter(pid: int) -> Any:
    """The seccomp filter of the worker whose process id is ``pid`` (not yet loaded).

    Returns:
        A ``pyseccomp.SyscallFilter``: kill by default, the calls above allowed.

    # Security
    Rule: a worker may read what it holds, write its channel (:data:`WORKER_CHANNEL`)
    only, map memory, read clocks, signal itself, open files read-only and exit; any other
    system call kills it. Threat: a page or PDF that took over its worker through a parser
    bug, going on to reach the fetcher's sockets, the network, the file system, other
    processes or a process without limits. Callers rely on: once loaded (it cannot be
    unloaded; children would inherit it, but ``fork`` is refused), nothing the worker runs
    can do more. Proof: tests/fetcher/isolation/test_subverted_worker.py (each refused call from a
    real worker of each pool; tests/deploy/test_systemd.py runs the same inside the fetcher
    unit) and tests/fetcher/isolation/test_zygote.py (the rules, both sides).
    """
    return with_self(base_filter(), pid)


def base_filter() -> Any:
    """Every rule of :func:`worker_filter` but those naming the worker's process id: the
    zygote builds it once (1.5 ms of libseccomp calls), each forked worker adds its own."""
    import pyseccomp as seccomp  # noqa: PLC0415 - loaded by the zygote, before any fork

    rules = seccomp.SyscallFilter(seccomp.KILL_PROCESS)
    # A call through another architecture's table (int 0x80) kills the process too, not
    # only its thread (libseccomp's default).
    rules.set_attr(seccomp.Attr.ACT_BADARCH, seccomp.KILL_PROCESS)
    for name in _ALLOWED:
        rules.add_rule(seccomp.ALLOW, name)
    for name in ("write", "writev"):
        rules.add_rule(seccomp.ALLOW, name, seccomp.Arg(0, seccomp.EQ, WORKER_CHANNEL))
        rules.add_rule(seccomp.ERRNO(errno.EBADF), name, seccomp.Arg(0, seccomp.NE, WORKER_CHANNEL))
    for command in _FCNTL:
        rules.add_rule(seccomp.ALLOW, "fcntl", seccomp.Arg(1, seccomp.EQ, getattr(fcntl, command)))
    rules.add_rule(seccomp.ERRNO(errno.ENOTTY), "ioctl")
    # Opening read-only (a lazy import, a codec): any flag that writes kills.
    rules.add_rule(seccomp.ALLOW, "openat", seccomp.Arg(2, seccomp.MASKED_EQ, _WRITE_FLAGS, 0))
    rules.add_rule(seccomp.ALLOW, "open", seccomp.Arg(1, seccomp.MASKED_EQ, _WRITE_FLAGS, 0))
    # Reading a limit is allowed, setting one is not (prlimit64 with no new value).
    rules.add_rule(seccomp.ALLOW, "prlimit64", seccomp.Arg(2, seccomp.EQ, 0))
    return rules


def with_self(rules: Any, pid: int) -> Any:
    """``rules`` and signals to the process ``pid`` itself (abort(3) is how PDFium reports
    a failed allocation); ``kill`` of any other process stays refused."""
    import pyseccomp as seccomp  # noqa: PLC0415

    rules.add_rule(seccomp.ALLOW, "kill", seccomp.Arg(0, seccomp.EQ, pid))
    rules.add_rule(seccomp.ALLOW, "tgkill", seccomp.Arg(0, seccomp.EQ, pid))
    return rules


#: What the zygote itself may never do (it forks, reaps and talks on its inherited channel):
#: no new socket, no program, no file removed, moved or written, no debugger.
_ZYGOTE_REFUSED = (
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4", "execve",
    "execveat", "unlink", "unlinkat", "rename", "renameat", "renameat2", "link", "linkat",
    "symlink", "symlinkat", "mkdir", "mkdirat", "rmdir", "chmod", "fchmod", "fchmodat",
    "truncate", "ftruncate", "ptrace", "process_vm_writev", "mount", "setrlimit",
)  # fmt: skip


def zygote_filter() -> Any:
    """The zygote's own seccomp filter, loaded once its preload is done (its workers add
    theirs on top): it allows by default and kills on :data:`_ZYGOTE_REFUSED`.

    # Security
    Rule: the process that forks workers cannot create sockets, run programs or change
    the file system (the gRPC socket's directory above all). Threat: the zygote reads only
    the fetcher's control messages, so this guards against a bug of ours there, not
    against pages. Proof: tests/fetcher/isolation/test_zygote.py (the rules).
    """
    import pyseccomp as seccomp  # noqa: PLC0415

    rules = seccomp.SyscallFilter(seccomp.ALLOW)
    rules.set_attr(seccomp.Attr.ACT_BADARCH, seccomp.KILL_PROCESS)
    for name in _ZYGOTE_REFUSED:
        rules.add_rule(seccomp.KILL_PROCESS, name)
    # Opening for writing (O_WRONLY, O_RDWR, O_CREAT...): refused, not fatal.
    for name, arg in (("openat", 2), ("open", 1)):
        for flag in (os.O_WRONLY, os.O_RDWR, os.O_CREAT, os.O_TRUNC, os.O_APPEND):
            rules.add_rule(
                seccomp.ERRNO(errno.EACCES), name, seccomp.Arg(arg, seccomp.MASKED_EQ, flag, flag)
            )
    return rules


def _resource_limits(limits: WorkLimits) -> tuple[tuple[int, int, int], ...]:
    return (
        (resource.RLIMIT_AS, limits.memory_bytes, limits.memory_bytes),
        # SIGXCPU at the soft limit ends the worker; SIGKILL one second later if not.
        (resource.RLIMIT_CPU, limits.cpu_seconds, limits.cpu_seconds + 1),
        (resource.RLIMIT_FSIZE, 0, 0),
        (resource.RLIMIT_NOFILE, limits.files, limits.files),
        (resource.RLIMIT_NPROC, 0, 0),
        (resource.RLIMIT_CORE, 0, 0),
    )


def confine(limits: WorkLimits, rules: Any) -> None:  # pragma: no cover - confined workers
    """Confines the calling process for good: its limits, then its seccomp filter.

    ``resource.prlimit`` makes the prlimit64 call, which the fetcher unit's
    ``SystemCallFilter=~@resources`` allows (it denies setrlimit); lowering one's own
    limits needs no privilege. libseccomp sets ``no_new_privs`` before loading the filter.
    A worker's CPU time starts at zero at its fork, so the task gets its whole allowance.

    # Security
    ``rules`` is :func:`base_filter`'s (built once in the zygote); see
    :func:`worker_filter`. Proved by tests/fetcher/isolation/test_subverted_worker.py.
    """
    for which, soft, hard in _resource_limits(limits):
        resource.prlimit(0, which, (soft, hard))
    with_self(rules, os.getpid()).load()


def answer(task: bytes) -> bytes:
    """Runs one task (a pickle of function, args, kwargs); its value, error or memory
    failure as a JSON document."""
    try:
        function, args, kwargs = pickle.loads(task)  # noqa: S301 - the fetcher's own
        value = function(*args, **kwargs)
        return json.dumps({"value": value}, ensure_ascii=False, allow_nan=False).encode()
    except MemoryError:
        return b'{"memory": true}'
    except Exception as exc:  # the caller gets the bug as text, never as an object
        text = "".join(traceback.format_exception(exc))
        error = f"{type(exc).__name__}: {exc}"[:_ERROR_CHARS]
        return json.dumps({"error": error, "traceback": text[-_ERROR_CHARS:]}).encode()


def _read_exactly(fd: int, size: int) -> bytes | None:
    data = bytearray()
    while len(data) < size:
        chunk = os.read(fd, min(size - len(data), 1 << 20))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def serve_task(fd: int) -> None:
    """A worker's task: one frame from the fetcher, one answer frame back."""
    header = _read_exactly(fd, _HEADER)
    task = None if header is None else _read_exactly(fd, int.from_bytes(header, "big"))
    if task is None:
        return  # the fetcher let this worker go unused
    reply = answer(task)
    frame = len(reply).to_bytes(_HEADER, "big") + reply
    view = memoryview(frame)
    while view:
        view = view[os.write(fd, view) :]


def _worker(
    channel: int, limits: WorkLimits, rules: Any, warm_up: Callable[[], object] | None
) -> None:  # pragma: no cover - a child
    """A worker's whole life, in the zygote's forked child: never returns.

    A spare (forked ahead of its task) first runs ``warm_up``, once confined: the pool's
    own constant work (a small page), so the copy-on-write faults that a fresh process
    takes on its first page (about 700 pages of the zygote's heap, 2 ms) are taken before
    its task arrives, not while a read waits for it.
    """
    status = 0
    try:
        os.dup2(channel, WORKER_CHANNEL)
        # Nothing of the zygote's (its control channel, other workers' pidfds) stays open.
        os.closerange(WORKER_CHANNEL + 1, os.sysconf("SC_OPEN_MAX"))
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        confine(limits, rules)
        if warm_up is not None:
            warm_up()
        serve_task(WORKER_CHANNEL)
    except MemoryError:
        status = EXIT_MEMORY
    except BaseException:
        status = 1
    # posix._exit, not os._exit: coverage wraps the latter to write its data file, which a
    # confined worker may not open (it would be killed for trying).
    import posix  # noqa: PLC0415

    posix._exit(status)


# --- the zygote (a program of its own) ---------------------------------------------------


def _zygote(
    control: socket.socket, preload: Sequence[str], warm_up: str
) -> None:  # pragma: no cover
    """The zygote's loop: one fork per control message, one status per ended worker.

    ``warm_up`` names the spares' warm-up (``module:function``, "" for none; see
    :func:`_worker`).

    Measured by the tests through the workers it forks; its own lines run in a process
    started with its own interpreter, whose coverage data the tests do not combine.
    """
    for name in preload:
        importlib.import_module(name)
    module, _, function = warm_up.partition(":")
    warm = getattr(importlib.import_module(module), function) if warm_up else None
    import gc  # noqa: PLC0415

    rules = base_filter()
    zygote_filter().load()
    # Forked workers would otherwise copy the heap page by page as their collector walks it.
    gc.freeze()
    # Not dumpable: processes of the same user cannot ptrace it or open /proc/PID/mem.
    with contextlib.suppress(OSError, AttributeError):
        _set_not_dumpable()
    selector = selectors.DefaultSelector()
    selector.register(control, selectors.EVENT_READ, None)
    workers: dict[int, tuple[int, int]] = {}  # pidfd -> (id, pid)
    try:
        _fork_workers(control, selector, workers, rules, warm)
    except OSError:
        pass  # the fetcher has gone: its end of the control channel closed
    finally:
        for _ident, pid in workers.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _fork_workers(
    control: socket.socket,
    selector: selectors.BaseSelector,
    workers: dict[int, tuple[int, int]],
    rules: Any,
    warm_up: Callable[[], object] | None,
) -> None:  # pragma: no cover - runs in the zygote
    """Until the control channel closes: a worker per message, a status per end."""
    while True:
        for key, _ in selector.select():
            if key.data is None:
                message, fds, _flags, _address = socket.recv_fds(control, CONTROL_BYTES, 1)
                if not message:
                    return
                request = json.loads(message)
                limits = WorkLimits(**request["limits"])
                pid = os.fork()
                if pid == 0:
                    _worker(fds[0], limits, rules, warm_up if request.get("warm") else None)
                os.close(fds[0])
                pidfd = os.pidfd_open(pid)
                workers[pidfd] = (request["id"], pid)
                selector.register(pidfd, selectors.EVENT_READ, pid)
                # The pidfd goes to the fetcher too: it kills this worker by it, never by
                # a pid that may name another process once this one is reaped.
                reply = json.dumps({"id": request["id"], "pid": pid}).encode()
                socket.send_fds(control, [reply], [pidfd])
            else:
                pidfd = key.fd
                selector.unregister(pidfd)
                ident, pid = workers.pop(pidfd)
                os.close(pidfd)
                _, status = os.waitpid(pid, 0)
                code = os.waitstatus_to_exitcode(status)
                control.sendall(json.dumps({"id": ident, "status": code}).encode())


def _set_not_dumpable() -> None:  # pragma: no cover - runs in the zygote
    import ctypes  # noqa: PLC0415

    pr_set_dumpable = 4
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_dumpable, 0, 0, 0, 0)


def _main(argv: list[str]) -> int:  # pragma: no cover - the zygote's entry point
    control = socket.socket(fileno=int(argv[0]))
    sys.path[:] = json.loads(argv[1])
    _zygote(control, argv[3:], argv[2])
    return 0


# --- what the fetcher checks (pure) ---------------------------------------------------


def decode_answer(body: bytes) -> dict[str, Any]:
    """A worker's answer as a checked JSON object (untrusted: never unpickled).

    Raises:
        BadAnswer: Not JSON, or not one of ``value``, ``error`` (text, with an optional
            ``traceback``) and ``memory``.
    """
    try:
        reply = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise BadAnswer("an answer that is not JSON") from exc
    if not isinstance(reply, dict) or len(reply.keys() - {"traceback"}) != 1:
        raise BadAnswer("an answer of the wrong shape")
    if "error" in reply and not isinstance(reply["error"], str):
        raise BadAnswer("an error that is not text")
    if not reply.keys() & {"value", "error", "memory"}:
        raise BadAnswer("an answer of the wrong shape")
    return reply


def stopped_by(code: int, limits: WorkLimits) -> Stopped:
    """Why a worker that hung up before answering ended, from its exit status."""
    if code == -signal.SIGXCPU:
        return Stopped("cpu", f"over {limits.cpu_seconds} s of CPU time")
    if code == -signal.SIGSYS:
        return Stopped("confined", "the worker made a system call its confinement refuses")
    if code in (-signal.SIGKILL, -signal.SIGABRT, EXIT_MEMORY):
        # SIGKILL is the kernel's answer to a memory limit it had to enforce itself;
        # SIGABRT is PDFium's to an allocation that failed.
        return Stopped("memory", f"over {limits.memory_bytes // MIB} MiB of memory")
    return Stopped("crashed", f"the worker ended with status {code}")


if __name__ == "__main__":  # pragma: no cover - the zygote
    sys.exit(_main(sys.argv[1:]))
