"""Parse an address the way the fetcher will use it (SPEC 7 step 1), as pure code.

One strict parser decides what the host, port and request target are, and the
connection uses exactly its answer; nothing else re-parses the address later. That
closes the parser differentials listed in ``shared/notes/ssrf.md`` (backslashes, several
``@``, percent-encoded hosts, ``:+443``, zone IDs, NUL truncation).
"""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from collections.abc import Container
from ipaddress import IPv4Address, IPv6Address
from urllib.parse import quote

import idna

from fetcher.reasons import Reason

IPAddress = IPv4Address | IPv6Address

MAX_URL_LENGTH = 8192
MAX_HOST_LENGTH = 253
MAX_LABEL_LENGTH = 63

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
# A DNS name after normalisation. Underscores appear in real host names (not in
# registrable domains), so they are accepted in labels.
_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?")
_DIGITS = re.compile(r"[0-9]+")
# The ASCII characters that are control characters or spaces: C0, space and DEL.
_ASCII_FORBIDDEN = re.compile(r"[\x00-\x20\x7f]")
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
# What may stay unescaped in a request target: RFC 3986 unreserved, sub-delims, ":", "@",
# "/", "?" and "%" (already-escaped bytes are kept as they are).
_TARGET_SAFE = "/?:@!$&'()*+,;=%-._~"


@dataclasses.dataclass(frozen=True, slots=True)
class Address:
    """A parsed https address, ready to check and to connect to.

    Attributes:
        host: The normalised host: lower-case ASCII (IDNA A-labels) without a trailing
            dot, or the canonical text of an IP address (IPv6 without brackets).
        port: The TCP port (443 unless the address names another).
        target: The request target: path and query, never empty, never a fragment.
        ip: The IP address when the host is an IP literal, else None.
    """

    host: str
    port: int
    target: str
    ip: IPAddress | None = None

    @property
    def authority(self) -> str:
        """``host[:port]`` as written in a URL and in the Host header."""
        host = f"[{self.host}]" if isinstance(self.ip, IPv6Address) else self.host
        return host if self.port == 443 else f"{host}:{self.port}"

    @property
    def url(self) -> str:
        """The normalised address as a string."""
        return f"https://{self.authority}{self.target}"


@dataclasses.dataclass(frozen=True, slots=True)
class Refused:
    """An address that cannot be opened, with the vocabulary word saying why."""

    reason: Reason
    detail: str


def _refuse(reason: Reason, detail: str) -> Refused:
    return Refused(reason, detail)


def _forbidden(ch: str) -> bool:
    # Cs: lone surrogates (from undecodable bytes) cannot be encoded into a request.
    return ch.isspace() or unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp")


def _has_control_or_space(text: str) -> bool:
    """Whether ``text`` holds a character :func:`_forbidden` refuses (linear, no exception).

    The ASCII ones are exactly ``_ASCII_FORBIDDEN`` (``test_urls.py`` checks all 128),
    found by one regex scan; only the non-ASCII characters, rare in addresses, are looked
    at one by one. Every href of every page comes through here: a Python loop over each
    character cost ~6 % of the reader's time on the extraction corpus.
    """
    if _ASCII_FORBIDDEN.search(text) is not None:
        return True
    if text.isascii():
        return False
    return any(_forbidden(match.group()) for match in _NON_ASCII.finditer(text))


def parse_ipv4_number(host: str) -> IPv4Address | None:
    """Parse ``host`` as an IPv4 address written the way ``inet_aton`` accepts it.

    Accepts one to four dot-separated parts, each decimal, octal (leading ``0``) or
    hexadecimal (``0x``), the last part filling the remaining bytes (``127.1``,
    ``2130706433``, ``0x7f.1``, ``0177.0.0.1``), and one trailing dot.

    Returns:
        The address, or None when any part is not a number or a value is out of range.
    """
    text = host[:-1] if host.endswith(".") else host
    parts = text.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    values: list[int] = []
    for part in parts:
        value = _inet_aton_part(part)
        if value is None:
            return None
        values.append(value)
    *leading, last = values
    if any(v > 0xFF for v in leading) or last >= 1 << (8 * (5 - len(values))):
        return None
    number = last
    for index, value in enumerate(leading):
        number |= value << (8 * (3 - index))
    return IPv4Address(number)


def _inet_aton_part(part: str) -> int | None:
    # A real part is at most 12 characters plus some zero padding; refusing long ones
    # keeps int() cheap and inside Python's limit on digit strings (4300 digits).
    if len(part) > 32:
        return None
    if part[:2] in ("0x", "0X"):
        digits = part[2:]
        if digits == "":
            return 0
        return int(digits, 16) if re.fullmatch(r"[0-9A-Fa-f]+", digits) else None
    if not _DIGITS.fullmatch(part):
        return None
    if len(part) > 1 and part[0] == "0":
        return int(part, 8) if re.fullmatch(r"[0-7]+", part) else None
    return int(part)


def _looks_numeric(host: str) -> bool:
    """The WHATWG "ends in a number" test: such a host must be an IPv4 address."""
    labels = host.split(".")
    if labels[-1] == "" and len(labels) > 1:
        labels.pop()
    last = labels[-1]
    return bool(_DIGITS.fullmatch(last)) or bool(re.fullmatch(r"0[xX][0-9A-Fa-f]*", last))


def normalise_host(raw: str) -> tuple[str, IPAddress | None] | Refused:
    """Normalise a host as the connection will use it: IP literal or IDNA name.

    Args:
        raw: The host as written, without brackets for IPv6 (pass ``"[...]"`` as is).

    Returns:
        ``(host, ip)`` with ``ip`` set for IP literals, or a :class:`Refused`.

    # Security
    Part of SPEC 7 step 1. Every spelling that the system resolver would read as an IP
    address (numbers in any inet_aton form, full-width and other Unicode digits mapped by
    UTS 46) comes out as the canonical IP, so rule 2 judges the real destination; a host
    with ``%`` (percent-encoding or an IPv6 zone ID), control characters or spaces is
    refused. Tested in ``tests/fetcher/net/test_urls.py``.
    """
    if raw.startswith("["):
        if not raw.endswith("]") or "%" in raw:
            return _refuse(Reason.MALFORMED, "bad IPv6 literal")
        try:
            return str(IPv6Address(raw[1:-1])), IPv6Address(raw[1:-1])
        except ValueError:
            return _refuse(Reason.MALFORMED, "bad IPv6 literal")
    if not raw or "%" in raw or _has_control_or_space(raw):
        return _refuse(Reason.MALFORMED, "empty host or forbidden character in host")
    if raw.isascii():
        host = raw.lower()
    else:
        try:
            host = idna.encode(raw, uts46=True, std3_rules=False, transitional=False).decode()
        except (idna.IDNAError, UnicodeError):
            return _refuse(Reason.MALFORMED, "host is not a valid internationalised name")
        host = host.lower()
    if _looks_numeric(host):
        ip = parse_ipv4_number(host)
        if ip is None:
            return _refuse(Reason.MALFORMED, "host ends in a number but is not an IPv4 address")
        return str(ip), ip
    if host.endswith("."):
        host = host[:-1]
    if not host or len(host) > MAX_HOST_LENGTH:
        return _refuse(Reason.MALFORMED, "host is empty or too long")
    for label in host.split("."):
        if len(label) > MAX_LABEL_LENGTH or not _LABEL.fullmatch(label):
            return _refuse(Reason.MALFORMED, "host is not a valid DNS name")
        if label.startswith("xn--") and not _valid_a_label(label):
            return _refuse(Reason.MALFORMED, "host has an invalid internationalised label")
    return host, None


def _valid_a_label(label: str) -> bool:
    try:
        idna.decode(label)
    except (idna.IDNAError, UnicodeError):
        return False
    return True


def _port(text: str, scheme: str) -> int | Refused:
    if not _DIGITS.fullmatch(text) or len(text) > 5:
        return _refuse(Reason.MALFORMED, "port is not a number")
    port = int(text)
    if port > 65535:
        return _refuse(Reason.MALFORMED, "port out of range")
    # http's own default port means "no port" once the address is upgraded to https.
    if scheme == "http" and port == 80:
        return 443
    return port


def _target(rest: str) -> str:
    path, _, _fragment = rest.partition("#")
    if not path.startswith("/"):
        path = "/" + path
    # Non-ASCII and other unsafe characters are percent-encoded as UTF-8, as browsers do.
    return quote(path, safe=_TARGET_SAFE)


def parse(url: str, *, ports: Container[int] = frozenset({443})) -> Address | Refused:
    """Parse an address for fetching (SPEC 7 step 1).

    Args:
        url: The address as the model, a page or a redirect wrote it.
        ports: The ports allowed (production: 443 only; tests pass their origin's port).

    Returns:
        The :class:`Address` to check and connect to, or a :class:`Refused` with the
        reason (``scheme``, ``port``, ``userinfo`` or ``malformed``). Never raises.

    # Security
    SPEC 7 step 1 and rule 5's "https only": the scheme must be https (http is upgraded),
    the port 443, and the address must carry no user name or password (credentials are
    never sent). Parser tricks are refused rather than interpreted: backslashes, control
    characters and whitespace anywhere, several ``@``, ``%`` in the host, zone IDs, empty
    or over-long hosts, signed or non-decimal ports, addresses longer than 8,192 characters
    before or after normalisation. An empty port is the default one. The fragment is
    dropped. Callers may rely on ``Address.host``/``port`` being exactly what the
    connection will use.
    Proved by the tables in ``tests/fetcher/net/test_urls.py`` and its hypothesis property
    that parsing never raises.
    """
    if len(url) > MAX_URL_LENGTH:
        return _refuse(Reason.MALFORMED, "address too long")
    if "\\" in url or _has_control_or_space(url):
        return _refuse(Reason.MALFORMED, "backslash, control character or space in address")
    scheme_text, colon, rest = url.partition(":")
    if not colon or not _SCHEME.fullmatch(scheme_text):
        return _refuse(Reason.MALFORMED, "no scheme")
    scheme = scheme_text.lower()
    if scheme not in ("https", "http"):
        return _refuse(Reason.SCHEME, f"scheme {scheme!r} is not https")
    if not rest.startswith("//"):
        return _refuse(Reason.MALFORMED, "no // after the scheme")
    rest = rest[2:]
    end = len(rest)
    for delimiter in "/?#":
        index = rest.find(delimiter)
        if index != -1:
            end = min(end, index)
    authority, rest = rest[:end], rest[end:]
    at_count = authority.count("@")
    if at_count > 1:
        return _refuse(Reason.MALFORMED, "several @ in the address")
    if at_count == 1:
        return _refuse(Reason.USERINFO, "user name or password in the address")
    if authority.startswith("["):
        close = authority.find("]")
        if close == -1:
            return _refuse(Reason.MALFORMED, "unclosed IPv6 literal")
        host_text, after = authority[: close + 1], authority[close + 1 :]
        if after and not after.startswith(":"):
            return _refuse(Reason.MALFORMED, "text after an IPv6 literal")
        port_text = after[1:] if after else None
    else:
        host_text, colon, port_text_found = authority.partition(":")
        port_text = port_text_found if colon else None
    port: int = 443
    # An empty port ("host:") means the default port (RFC 3986 3.2.3, WHATWG URL).
    if port_text:
        parsed_port = _port(port_text, scheme)
        if isinstance(parsed_port, Refused):
            return parsed_port
        port = parsed_port
    if port not in ports:
        return _refuse(Reason.PORT, f"port {port} is not allowed")
    normalised = normalise_host(host_text)
    if isinstance(normalised, Refused):
        return normalised
    host, ip = normalised
    address = Address(host=host, port=port, target=_target(rest), ip=ip)
    # Percent-encoding can make the normalised form several times longer than the text.
    if len(address.url) > MAX_URL_LENGTH:
        return _refuse(Reason.MALFORMED, "address too long")
    return address


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 5.2.4 on a path that starts with ``/``."""
    segments = path.split("/")
    kept: list[str] = []
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment in (".", ".."):
            if segment == ".." and len(kept) > 1:
                kept.pop()
            if last:
                kept.append("")
            continue
        kept.append(segment)
    return "/".join(kept)


def resolve_reference(base: Address, reference: str) -> str:
    """Resolve a link or a ``Location`` against the page it appeared on (RFC 3986 5.2).

    Spaces are percent-encoded as browsers do; nothing else is interpreted here: the
    result is only ever used through :func:`parse`, the one parser, so what the crawl
    judges (host, port, site) is exactly what the download will connect to.

    Args:
        base: The parsed address of the page (or of the hop that redirected).
        reference: The href or ``Location`` as written (absolute, scheme-relative,
            absolute-path, relative-path, query-only or fragment-only).

    Returns:
        The absolute address to hand to :func:`parse`.
    """
    reference = reference.replace(" ", "%20")
    scheme = _SCHEME.match(reference)
    if scheme is not None and reference[scheme.end() : scheme.end() + 1] == ":":
        return reference
    if reference.startswith("//"):
        return "https:" + reference
    origin = f"https://{base.authority}"
    base_path, _, _base_query = base.target.partition("?")
    relative, _, _fragment = reference.partition("#")
    if not relative:
        return origin + base.target
    if relative.startswith("?"):
        return origin + base_path + relative
    path, mark, query = relative.partition("?")
    if not path.startswith("/"):
        path = base_path[: base_path.rfind("/") + 1] + path
    return f"{origin}{_remove_dot_segments(path)}{mark}{query}"
