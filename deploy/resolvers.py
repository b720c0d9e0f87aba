"""fetcher.service's DNS drop-in: the resolvers ``/etc/resolv.conf`` names, allowed by address.

The fetcher's sandbox denies every private, loopback and link-local range at the kernel
(``IPAddressDeny=``), and resolvers often live in exactly those ranges: systemd-resolved's
stub at 127.0.0.53, a cloud VPC resolver at 10.x.x.2 or 169.254.169.253, a home router at
192.168.x.1. Without an allow for its address every lookup fails at once (``dns``).
``IPAddressAllow=`` wins over ``IPAddressDeny=``, so one ``/32`` (or ``/128``) per resolver
opens exactly it, and nothing else.

Run by ``deploy/install.sh`` with the system Python (standard library only)::

    python3 deploy/resolvers.py /etc/resolv.conf > resolvers.conf

Notes go to stderr. When the stub 127.0.0.53 is the resolver, only the stub is allowed:
systemd-resolved asks its upstream servers from its own process, never from the
fetcher's, so the upstreams need no hole in the fetcher's sandbox.
"""

from __future__ import annotations

import ipaddress
import sys
from collections.abc import Sequence
from pathlib import Path

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
#: glibc reads at most this many ``nameserver`` lines (MAXNS); later ones are never asked.
MAXNS = 3
RESOLVED_STUBS = frozenset(ipaddress.ip_address(a) for a in ("127.0.0.53", "127.0.0.54"))


def nameservers(resolv_conf: str) -> list[IPAddress]:
    """The resolvers glibc will ask, in order (at most three, duplicates dropped).

    Args:
        resolv_conf: The text of ``/etc/resolv.conf``.

    Returns:
        Their addresses; an IPv6 zone (``fe80::1%eth0``) is cut off, because
        ``IPAddressAllow=`` takes bare addresses. Lines that are not a valid
        ``nameserver ADDRESS`` are ignored, as glibc ignores them.
    """
    found: list[IPAddress] = []
    for line in resolv_conf.splitlines():
        words = line.split()
        if len(words) < 2 or words[0] != "nameserver":
            continue
        try:
            address = ipaddress.ip_address(words[1].partition("%")[0])
        except ValueError:
            continue
        if address not in found:
            found.append(address)
    return found[:MAXNS]


def dropin(servers: Sequence[IPAddress], *, source: str = "/etc/resolv.conf") -> str:
    """The drop-in's text: one ``IPAddressAllow=`` per resolver.

    # Security
    Opens the fetcher's kernel-level backstop (SPEC 9, "except the DNS resolver") for the
    resolvers' addresses only, one host each. ``IPAddressAllow=`` cannot name a port, so
    the fetcher's sandbox lets it reach every port of these addresses; its own checks
    (rule 2) still refuse them as page addresses. Proved by
    ``tests/deploy/test_install.py`` and, under a real systemd,
    ``tests/deploy/test_systemd.py::test_fetcher_resolves_through_a_resolver_in_a_denied_range``.
    """
    lines = [
        f"# Written by deploy/install.sh from {source}: the resolvers the fetcher asks.",
        "# IPAddressAllow= wins over the unit's IPAddressDeny= and names addresses, not",
        "# ports. Run `make install` again when the resolvers change.",
        "[Service]",
    ]
    for server in servers:
        lines.append(f"IPAddressAllow={server}/{server.max_prefixlen}")
    return "\n".join(lines) + "\n"


def notes(servers: Sequence[IPAddress]) -> list[str]:
    """What the operator should know about these resolvers (printed by the installer)."""
    if not servers:
        return [
            "no nameserver line: glibc would ask 127.0.0.1, which is not allowed "
            "automatically (it would open every local service on 127.0.0.1 to the fetcher); "
            "add IPAddressAllow=127.0.0.1/32 to the drop-in if a resolver listens there"
        ]
    said = []
    for server in servers:
        if server in RESOLVED_STUBS:
            said.append(
                f"allowing {server}: systemd-resolved's stub (its upstreams are asked by "
                "resolved itself and need no allow)"
            )
        elif server.is_loopback:
            said.append(
                f"allowing {server} (every port: IPAddressAllow= names addresses only); a "
                "local resolver on its own address (e.g. 127.0.0.53) would open less"
            )
        else:
            said.append(f"allowing {server} (every port: IPAddressAllow= names addresses only)")
    return said


def main(argv: Sequence[str]) -> int:
    """Prints the drop-in for the file named in ``argv`` (``/etc/resolv.conf`` by default)."""
    source = argv[0] if argv else "/etc/resolv.conf"
    try:
        text = Path(source).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        print(f"resolvers: cannot read {source}: {exc.strerror}", file=sys.stderr)
        return 1
    servers = nameservers(text)
    for note in notes(servers):
        print(f"resolvers: {note}", file=sys.stderr)
    sys.stdout.write(dropin(servers, source=source))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
