"""Steps 1-3 of SPEC 7 for one hop: parse, resolve once, check every answer.

This is the address guard shared by the download (before it connects) and by
``python -m fetcher check`` (which never connects). Its only I/O is the one lookup
through the injected resolver.
"""

from __future__ import annotations

from fetcher.errors import HopError, ResolveError
from fetcher.policy import IPAddress, Policy, classify
from fetcher.reasons import Reason
from fetcher.resolver import Resolver
from fetcher.urls import Address, Refused, parse


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
        HopError: ``not_public`` naming the first answer that is not allowed.

    # Security
    Rule 2: if ANY answer is not public the address is refused. Picking the public answer
    instead would let a name that mixes a public and a private address reach the private
    one whenever the connection lands there. The download connects only to answers that
    passed here (rule 3). Tested by ``test_any_non_public_answer_refuses_the_address`` and
    ``tests/fetcher/test_check_cli.py``.
    """
    for answer in answers:
        if not policy.allows_address(answer):
            block = classify(answer).block
            what = block.name if block is not None else "exempt network"
            raise HopError(Reason.NOT_PUBLIC, f"{address.host} has address {answer} ({what})")


async def resolve_and_check(
    address: Address, *, policy: Policy, resolver: Resolver
) -> list[IPAddress]:
    """Resolve ``address`` once and check every answer: :func:`lookup` then
    :func:`check_answers`.

    Returns:
        Every answer, all allowed by the policy, in the resolver's order.
    """
    answers = await lookup(address, resolver)
    check_answers(address, answers, policy)
    return answers
