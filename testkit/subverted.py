"""What a subverted worker tries, as tasks a real worker runs (the red team's, issue 23).

A parser bug that gives a page or PDF code execution in its worker is simulated by running
these functions as the worker's task: the worker is real (forked by the pool's zygote,
limited and filtered before the task), so whatever they manage, such a page would too.
Each tries one thing and says what came of it; under the filter every one of them but
:func:`named_unix_sockets`, :func:`answer_then_linger` and :func:`write_stderr` is killed
at its first refused system call (``tests/fetcher/isolation/test_subverted_worker.py``).
"""

from __future__ import annotations

import ctypes
import os
import posix
import resource
import signal
import socket
import time
from pathlib import Path

from fetcher.isolation.workers import Wire
from fetcher.isolation.zygote import WORKER_CHANNEL

__all__ = [
    "answer_then_linger",
    "bind_unix",
    "connect_tcp",
    "connect_unix",
    "exec_shell",
    "fork",
    "kill",
    "named_unix_sockets",
    "ptrace",
    "raise_limit",
    "raw_socket",
    "rename",
    "socketpair",
    "spawn",
    "udp_socket",
    "unlink",
    "write_file",
    "write_stderr",
]


def named_unix_sockets() -> Wire:
    """The paths of every named Unix socket in ``/proc/net/unix`` (reading is allowed)."""
    with open("/proc/net/unix", encoding="utf-8") as table:
        rows = table.read().splitlines()[1:]
    paths: list[Wire] = []
    paths += sorted({row.split()[7] for row in rows if len(row.split()) > 7})
    return paths


def connect_unix(path: str) -> Wire:
    """Connects to the Unix socket at ``path`` (the fetcher's gRPC socket among them)."""
    channel = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    channel.connect(path)
    return f"connected to {path}"


def bind_unix(path: str) -> Wire:
    """Binds a listener of its own at ``path`` (an impostor of the gRPC socket)."""
    channel = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    channel.bind(path)
    return f"bound {path}"


def connect_tcp(port: int) -> Wire:
    """Connects to a loopback TCP port."""
    socket.create_connection(("127.0.0.1", port), timeout=2)
    return "connected"


def udp_socket() -> Wire:
    """Sends a UDP datagram to loopback."""
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", 9))
    return "sent"


def raw_socket() -> Wire:
    """Opens a raw IP socket (root could, without the filter)."""
    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    return "opened"


def socketpair() -> Wire:
    """Makes a new socket pair (a channel the fetcher never gave it)."""
    socket.socketpair()
    return "paired"


def fork() -> Wire:
    """Forks: a child would outlive the worker's kill."""
    if os.fork() == 0:
        time.sleep(60)
        posix._exit(0)
    return "forked"


def spawn() -> Wire:
    """Starts a program without fork (posix_spawn: clone/vfork)."""
    os.posix_spawn("/bin/sleep", ["sleep", "60"], {})
    return "spawned"


def exec_shell() -> Wire:
    """Replaces itself with a shell."""
    os.execv("/bin/sh", ["sh", "-c", "sleep 60"])


def unlink(path: str) -> Wire:
    """Removes ``path`` (the gRPC socket, to bind an impostor there)."""
    os.unlink(path)
    return "unlinked"


def rename(path: str) -> Wire:
    """Moves ``path`` aside."""
    os.rename(path, path + ".moved")
    return "renamed"


def write_file(path: str, mode: str) -> Wire:
    """Opens ``path`` to write (``w``, ``a``, ``r+`` or ``x``)."""
    with open(path, mode) as file:
        file.write("owned")
    return "written"


def write_stderr() -> Wire:
    """Writes to its inherited stderr (the fetcher's log): refused without a kill."""
    try:
        os.write(2, b"forged log line\n")
    except OSError as exc:
        return f"refused: {exc.strerror}"
    return "written"


def raise_limit(name: str) -> Wire:
    """Raises its own limit ``RLIMIT_<name>`` back to unlimited."""
    which = getattr(resource, f"RLIMIT_{name}")
    resource.setrlimit(which, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    return "raised"


def kill(pid: int) -> Wire:
    """Sends SIGKILL to ``pid`` (its zygote, the fetcher)."""
    os.kill(pid, signal.SIGKILL)
    return "killed"


def ptrace(pid: int) -> Wire:
    """Attaches to ``pid`` with ptrace(2), to run code in it."""
    ptrace_attach = 16
    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.ptrace(ptrace_attach, pid, None, None))


def answer_then_linger(seconds: float) -> Wire:
    """Answers on its channel itself, then stays on as if it could outlive its task."""
    reply = b'{"value": %d}' % os.getpid()
    os.write(WORKER_CHANNEL, len(reply).to_bytes(4, "big") + reply)
    time.sleep(seconds)
    return "still here"


# Seen from outside the workers (the tests and the in-unit suite): what is left of them.


def session_of(pid: int) -> int | None:
    """The session id of a live (not zombie) process, or None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return None if fields[0] in ("Z", "X") else int(fields[3])


def zygote_session(zygote: int) -> set[int]:
    """Every live process of the zygote's session (a worker's children would stay in it:
    ``setsid`` is refused)."""
    pids = {int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()}
    return {pid for pid in pids if session_of(pid) == zygote}
