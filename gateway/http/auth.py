"""Access keys: the Bearer check of every API route (SPEC 2).

Pure: no I/O, no logging. The keys come from `gateway.settings`.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from collections.abc import Iterable

from gateway.errors import AuthError


class KeyChecker:
    """Checks ``Authorization`` header values against the configured keys.

    # Security
    Rule: every API route needs ``Authorization: Bearer <key>`` with a configured key.
    Threat: a guessed key found by timing the comparison, or a key leaked in logs.
    Keys and candidates are hashed first, so every comparison is between two 32-byte
    digests, and every configured key is compared (no early exit), so the time taken does
    not depend on how much of a key matched or on which key matched. The key never appears
    in an error message. Callers may rely on `check` raising `AuthError` for anything but
    an exact configured key. Proved by ``test_anything_but_a_configured_key_is_refused``
    in ``tests/gateway/test_pure.py`` and ``test_api_routes_need_the_key`` in ``test_app.py``.
    """

    def __init__(self, keys: Iterable[str]) -> None:
        self._digests = tuple(_digest(k) for k in keys)

    @property
    def required(self) -> bool:
        """Whether keys are configured at all (a loopback-only gateway may run without)."""
        return bool(self._digests)

    def check(self, authorization: str | None) -> int:
        """Accept the header value or raise.

        Args:
            authorization: The raw ``Authorization`` header, or ``None`` when absent.

        Returns:
            Which configured key it is (its position), for the per-key limits; ``-1``
            when no keys are configured (everyone is the same anonymous client).

        Raises:
            AuthError: Keys are configured and the header is missing, not a Bearer
                credential, or not a configured key.
        """
        if not self._digests:
            return -1
        scheme, _, token = (authorization or "").strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise AuthError("Missing access key: send Authorization: Bearer <key>.")
        candidate = _digest(token.strip())
        found = -1
        for index, digest in enumerate(self._digests):
            # No early exit, and the same work whichever key matches.
            same = hmac.compare_digest(candidate, digest)
            found = index if same else found
        if found < 0:
            raise AuthError("Wrong access key.")
        return found


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


def addressed_to_loopback(host: str | None) -> bool:
    """Whether a request's ``Host`` header may reach a gateway that has no keys.

    # Security
    Rule: without access keys (allowed only on a loopback listener) the API and ``/mcp``
    answer only requests whose ``Host`` is ``localhost``, a ``*.localhost`` name or an
    IP address (or that have no ``Host``: not a browser).
    Threat: DNS rebinding: a web page the user visits re-points its own name at
    127.0.0.1 and then, as the same origin, drives the local model and the research
    tools with no key needed, and reads the answers (as Ollama's CVE-2024-28224 did).
    A browser's ``Host`` is the page's name, so a rebound request names the attacker's
    host; a name the user chose (``localhost``) or an IP address cannot be rebound.
    Callers may rely on: False for any other name, whatever its case, port or trailing
    dot. Proved by ``test_without_keys_only_a_loopback_host_reaches_the_api`` in
    ``tests/gateway/http/test_app.py``.
    """
    if host is None:
        return True
    value = host.strip().lower()
    if value.startswith("["):
        name = value[1 : value.find("]")] if "]" in value else ""
    else:
        name = value.rpartition(":")[0] if ":" in value else value
    name = name.removesuffix(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True
