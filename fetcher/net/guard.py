"""Steps 1-3 of SPEC 7 for one hop: parse, resolve once, check every answer.

This is the address guard shared by the download (before it connects) and by
``python -m fetcher check`` (which never connects). Its only I/O is the one lookup
through the injected resolver. What it lets through is a :class:`CheckedAddress`, the only
thing the transport (``fetcher.net.transport``) accepts, and only this module makes one: so
"connect only to what was checked" is carried by the types (``mypy --strict``), not by a
convention.
"""

from __future__ import annotations

import dataclasses

from fetcher.errors import HopError, NotPublicError, ResolveError
from fetcher.net.policy import IPAddress, Policy
from fetcher.net.resolver import Resolver
from fetcher.net.urls import Address, Refused, parse
from fetcher.reasons import Reason

# The key only this module holds: CheckedAddress refuses to be made without it.
_MINT = object()


@dataclasses.dataclass(frozen=True, slots=True)
class CheckedAddress:
    """A (host name, IP, port) whose IP was resolved for that name and passed rule 2.

    Attributes:
        host: The normalised host name (or IP literal): SNI, certificate name, Host header.
        ip: The address the connection goes to, checked by the policy.
        port: The TCP port.

    # Security
    Rule 3: the transport connects only to a ``CheckedAddress``, and only
    :func:`resolve_and_check` makes one, after the policy allowed its IP. Building one
    anywhere else raises ``TypeError``. Proved by
    ``tests/fetcher/net/test_download.py::test_only_the_guard_makes_a_checked_address``.
    """

    host: str
    ip: IPAddress
    port: int
    mint: dataclasses.InitVar[object] = None

    def __post_init__(self, mint: object) -> None:
        if mint is not _MINT:
            raise TypeError("a CheckedAddress is made by fetcher.net.guard only")


def parse_address(url: str, policy: Policy) -> Address:
    """Parse ``url`` under ``policy``'s ports.

    Raises:
        HopError: With ``scheme``, ``port``, ``userinfo`` or ``malformed``.
    """
    address = parse(url, ports=policy.ports)
    if isinstance(address, Refused):
        raise HopError(address.reason, address.detail)
    return address


async def lookup(address: Address, resolver: Resolver) -> list[IPAddress]:
    """The one lookup of a hop (none for an IP-literal host).

    Raises:
        HopError: ``dns`` when the name does not resolve.
    """
    if address.ip is not None:
        return [address.ip]
    try:
        return await resolver.resolve(address.host)
    except ResolveError as exc:
        raise HopError(Reason.DNS, f"{address.host} does not resolve: {exc}") from exc


def check_answers(address: Address, answers: list[IPAddress], policy: Policy) -> None:
    """Refuse the address unless every answer is allowed (rule 2).

    Raises:
        NotPublicError: ``not_public``; it carries the refused answer for the fetch log,
            while its detail names only the host that was asked for.

    # Security
    Rule 2: if ANY answer is not public the address is refused. Picking the public answer
    instead would let a name that mixes a public and a private address reach the private
    one whenever the connection lands there. The detail, which travels to the gateway and
    so to the model, never holds a resolved address: a name's internal DNS answers stay in
    the operator's fetch log. Tested by ``test_any_non_public_answer_refuses_the_address``,
    ``tests/fetcher/test_check_cli.py`` and, over gRPC,
    ``test_refusal_details_never_carry_resolved_addresses``.
    """
    for answer in answers:
        if not policy.allows_address(answer):
            if address.ip is not None:
                detail = f"{address.host} is not a public address"
            else:
                detail = f"{address.host} resolves to an address that is not public"
            raise NotPublicError(detail, answer)


async def resolve_and_check(
    address: Address, *, policy: Policy, resolver: Resolver
) -> list[CheckedAddress]:
    """Resolve ``address`` once and check every answer: :func:`lookup` then
    :func:`check_answers`.

    Returns:
        One :class:`CheckedAddress` per answer, all allowed by the policy, in the
        resolver's order.
    """
    answers = await lookup(address, resolver)
    check_answers(address, answers, policy)
    return [CheckedAddress(address.host, answer, address.port, _MINT) for answer in answers]
