"""What the fetcher does for systemd (I/O): adopt the sockets it passes in, tell it the state.

Both are no-ops outside systemd. Socket activation is used only for ``/metrics``
(``deploy/systemd/fetcher-metrics.socket``): the sandbox denies loopback to the fetcher
itself, ingress included, while a listener systemd created is not covered by it. gRPC
cannot be socket-activated with PyPI's grpcio (see ``shared/notes/systemd-grpc-metrics.md``).
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Mapping

#: systemd passes inherited sockets from this descriptor on (sd_listen_fds(3)).
LISTEN_FDS_START = 3


def systemd_listeners(
    environ: Mapping[str, str], *, first_fd: int = LISTEN_FDS_START
) -> list[socket.socket]:
    """The listening sockets systemd passed to this process (``LISTEN_FDS``), if any.

    # Security
    Only when ``LISTEN_PID`` names this process: a child that inherited the variables
    must not adopt descriptors meant for its parent. Adopted descriptors are made
    non-inheritable (render workers never hold them). Proved by
    ``tests/fetcher/test_metrics.py::test_systemd_listeners_adopt_passed_sockets_only_for_this_process``.
    """
    if environ.get("LISTEN_PID") != str(os.getpid()):
        return []
    try:
        count = int(environ.get("LISTEN_FDS", "0"))
    except ValueError:
        return []
    listeners = []
    for fd in range(first_fd, first_fd + count):
        os.set_inheritable(fd, False)
        listeners.append(socket.socket(fileno=fd))
    return listeners


def sd_notify(message: str, environ: Mapping[str, str]) -> None:
    """Tells systemd about the service's state (``Type=notify``); a no-op elsewhere."""
    address = environ.get("NOTIFY_SOCKET", "")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    with (
        contextlib.suppress(OSError),
        socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as notify,
    ):
        notify.sendto(message.encode(), address)
