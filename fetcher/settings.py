"""The fetcher service's settings: built-in defaults, a TOML file, environment variables.

Later sources win: defaults, then the ``[fetcher]`` table of the TOML file (``--config``,
else ``TIGRESS_FETCHER_CONFIG``, else ``TIGRESS_CONFIG``), then ``TIGRESS_FETCHER_<NAME>``
variables, then command-line flags. Every value is checked once, here; a bad one stops
start-up with a :class:`~fetcher.errors.ConfigError` that names the setting, where it came
from and what was wrong. Unknown keys in the TOML table are errors too (a typo must not
silently leave a default in force): all of them are named at once, each with the setting
it most likely meant (``fetcher.names``). Unknown ``TIGRESS_FETCHER_*`` variables are named
the same way by :func:`unknown_variables`, which ``serve`` logs as a warning, not an error:
the environment is shared with the operator's shell, and a stray variable changes nothing.

This module only decides; it opens no socket. The composition root (``fetcher.server``)
turns a :class:`Settings` into listeners.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import math
import ssl
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from fetcher.errors import ConfigError
from fetcher.isolation.zygote import WorkLimits
from fetcher.names import unknown_names
from fetcher.net.domains import DomainLists, parse_domains
from fetcher.net.download import PDF_MAX_BYTES, PDF_MAX_BYTES_CEILING
from fetcher.net.urls import Refused
from fetcher.pdf.reader import CRAWL_CHAR_LIMIT
from fetcher.pdf.result import PdfLimits

ENV_PREFIX = "TIGRESS_FETCHER_"
#: The development socket, relative to the directory the processes are started from
#: (the project root under ``make run``); production passes ``unix:/run/fetcher/fetcher.sock``.
DEV_SOCKET = Path("run") / "fetcher.sock"
MIB = 1024 * 1024


@dataclasses.dataclass(frozen=True, slots=True)
class Listen:
    """One address to serve gRPC on.

    Attributes:
        target: The gRPC address string (``unix:/abs/path`` or ``host:port``).
        unix_path: The socket's path for a Unix listener, else ``None``.
        host: The host of a TCP listener (an IP address or a name), else ``None``.
    """

    target: str
    unix_path: Path | None = None
    host: str | None = None

    @property
    def is_loopback(self) -> bool:
        """True for a Unix socket or a TCP address on the loopback interface."""
        if self.unix_path is not None:
            return True
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host or "").is_loopback
        except ValueError:
            return False


@dataclasses.dataclass(frozen=True, slots=True)
class CaBundle:
    """Certificate authorities the fetcher trusts besides the system store (read at start).

    Attributes:
        path: The PEM file the certificates were read from.
        pem: Its text, as read once at start-up.
        certificates: How many certificates it holds (one or more).
    """

    path: Path
    pem: str = dataclasses.field(repr=False)
    certificates: int

    def __str__(self) -> str:
        plural = "" if self.certificates == 1 else "s"
        return f"{self.path} ({self.certificates} certificate{plural})"


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    """Everything the fetcher service can be told at start-up.

    Attributes:
        listen: Where gRPC is served; a Unix socket by default.
        max_concurrent_reads: Reads handled at once; one more is refused with
            RESOURCE_EXHAUSTED at once (never queued).
        read_deadline_seconds: The longest a read may take, whatever the caller's deadline.
        deadline_margin_seconds: Kept back from the caller's deadline, so the report is
            sent before the caller gives up.
        shutdown_grace_seconds: After SIGTERM, how long in-flight reads may still finish.
        crawl_concurrency: Pages of one hop fetched at once within one read.
        render_workers: Worker processes that turn pages into text at once
            (``fetcher.isolation.workers``), each a fresh confined process
            (``fetcher.isolation.zygote``).
        pdf_workers: PDFs read at once, each in a worker process of its own
            (``fetcher.pdf.reader``); the fetcher holds at most twice as many PDF bodies
            in memory at once.
        worker_memory_mib: Address space of every render and PDF worker
            (``RLIMIT_AS``, 256; at most 512): raising it means raising the unit's
            ``MemoryMax`` (deploy/systemd/README.md, "Memory"). Its other limits are
            fixed: no file writes, no processes, no core files, 16 descriptors, the
            seccomp filter.
        page_cpu_seconds: CPU time of one page's render (3 s); past it, ``timeout``.
        page_wall_seconds: Wall-clock time of one page's render (10 s).
        pdf_cpu_seconds: CPU time of one PDF's reading (5 s).
        pdf_wall_seconds: Wall-clock time of one PDF's reading (8 s, under the page's
            10 s deadline in the crawl).
        pdf_max_bytes: A PDF's body limit (16 MiB); a bigger one is ``too_large``, never
            cut. At most :data:`~fetcher.net.download.PDF_MAX_BYTES_CEILING` (64 MiB),
            which no setting can raise.
        max_message_bytes: The gRPC message size limit, both directions.
        metrics_listen: ``host:port`` for a /metrics listener of its own (development
            only: the production sandbox blocks it; there systemd passes the listener).
        log_sink: ``auto``, ``journal`` or ``json`` for the fetch log.
        tls_cert_file: Server certificate (PEM) for TCP listeners; enables mutual TLS.
        tls_key_file: The certificate's private key (PEM).
        tls_client_ca_file: CA bundle (PEM) that client certificates must chain to.
        extra_ca_file: Certificate authorities trusted for web pages in addition to (never
            instead of) the system store: a TLS-inspecting egress proxy, a private host.
        deny_domains: Domains never read, nor any name under them (``denied``); the
            gateway drops search results under them too. Normalised like addresses.
        allow_domains: When not empty, the only domains (and names under them) that are
            read; every other host is ``denied``. Lists only tighten rules 1-7.
        cache_bytes: The page cache's size (``fetcher.pagecache``); 0 turns it off.
        cache_seconds: How long a page read stays in the cache (failures: at most 30 s).
    """

    listen: tuple[Listen, ...] = ()
    max_concurrent_reads: int = 16
    read_deadline_seconds: float = 30.0
    deadline_margin_seconds: float = 0.25
    shutdown_grace_seconds: float = 10.0
    crawl_concurrency: int = 4
    render_workers: int = 2
    pdf_workers: int = 2
    worker_memory_mib: int = 256
    page_cpu_seconds: int = 3
    page_wall_seconds: float = 10.0
    pdf_cpu_seconds: int = 5
    pdf_wall_seconds: float = 8.0
    pdf_max_bytes: int = PDF_MAX_BYTES
    max_message_bytes: int = 1 * MIB
    metrics_listen: str = ""
    log_sink: str = "auto"
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    tls_client_ca_file: Path | None = None
    extra_ca_file: CaBundle | None = None
    deny_domains: tuple[str, ...] = ()
    allow_domains: tuple[str, ...] = ()
    cache_bytes: int = 64 * MIB
    cache_seconds: float = 600.0

    @property
    def lists(self) -> DomainLists:
        """The operator's lists, as the downloader applies them."""
        return DomainLists(deny=self.deny_domains, allow=self.allow_domains)

    @property
    def page_limits(self) -> WorkLimits:
        """The render workers' limits."""
        return WorkLimits(
            cpu_seconds=self.page_cpu_seconds,
            memory_bytes=self.worker_memory_mib * MIB,
            wall_seconds=self.page_wall_seconds,
        )

    @property
    def pdf_limits(self) -> PdfLimits:
        """The PDF workers' limits (the crawl's character limit, the body limit)."""
        return PdfLimits(
            memory_bytes=self.worker_memory_mib * MIB,
            cpu_seconds=self.pdf_cpu_seconds,
            wall_seconds=self.pdf_wall_seconds,
            char_limit=CRAWL_CHAR_LIMIT,
        )

    @property
    def tls(self) -> bool:
        """True when TCP listeners use mutual TLS."""
        return self.tls_cert_file is not None


def parse_listen(value: str, *, base: Path | None = None) -> Listen:
    """Parses one listen address.

    Args:
        value: ``unix:PATH``, ``unix:///PATH`` or ``HOST:PORT`` (``[v6]:PORT`` for IPv6).
        base: Directory that a relative Unix path is resolved against (the working
            directory when ``None``).

    Returns:
        The parsed address, with a Unix path made absolute.

    Raises:
        ValueError: The address has no usable form; the message says why.
    """
    value = value.strip()
    if value.startswith("unix-abstract:"):
        # Abstract sockets ignore file permissions: anyone on the host could connect.
        raise ValueError("abstract Unix sockets have no permissions; use unix:PATH")
    if value.startswith("unix:"):
        raw = value.removeprefix("unix:")
        if raw.startswith("//"):
            raw = raw.removeprefix("//")
        if not raw:
            raise ValueError("unix: needs a path")
        path = Path(raw)
        if not path.is_absolute():
            path = (base or Path.cwd()) / path
        return Listen(target=f"unix:{path}", unix_path=path)
    host, sep, port_text = value.rpartition(":")
    if not sep or not host:
        raise ValueError("expected unix:PATH or HOST:PORT")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError("write an IPv6 address in brackets: [::1]:PORT")
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"port {port_text!r} is not a number from 1 to 65535")
    shown = f"[{host}]" if ":" in host else host
    return Listen(target=f"{shown}:{int(port_text)}", host=host)


@dataclasses.dataclass(frozen=True, slots=True)
class _Field:
    kind: str  # "int", "float", "str", "path", "listen", "ca_bundle", "domains"
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    #: Said after the maximum when a value is over it (why the maximum is what it is).
    ceiling: str = ""
    #: The ``serve --<name>`` flag's help text.
    help: str = ""
    #: The flag's metavar.
    metavar: str = "N"


_FIELDS: dict[str, _Field] = {
    "listen": _Field(
        "listen",
        help="where to serve gRPC, comma-separated (default: unix:run/fetcher.sock)",
        metavar="unix:PATH|HOST:PORT",
    ),
    "max_concurrent_reads": _Field(
        "int", 1, 10_000, help="reads handled at once; one more is refused (default: 16)"
    ),
    "read_deadline_seconds": _Field(
        "float", 1, 600, help="the longest a read may take (default: 30)", metavar="S"
    ),
    "deadline_margin_seconds": _Field(
        "float",
        0,
        10,
        help="kept back from the caller's deadline for the report (default: 0.25)",
        metavar="S",
    ),
    "shutdown_grace_seconds": _Field(
        "float", 0, 600, help="after SIGTERM, how long reads may finish (default: 10)", metavar="S"
    ),
    "crawl_concurrency": _Field(
        "int", 1, 64, help="pages of one hop downloaded at once (default: 4)"
    ),
    "render_workers": _Field("int", 1, 32, help="page rendering processes (default: 2)"),
    "pdf_workers": _Field("int", 1, 16, help="PDF reading processes at once (default: 2)"),
    "worker_memory_mib": _Field(
        "int",
        128,
        512,
        ceiling="a worker's cap; the unit's MemoryMax must hold every worker at it",
        help="address space of every render and PDF worker in MiB (default: 256)",
        metavar="MIB",
    ),
    "page_cpu_seconds": _Field(
        "int", 1, 30, help="CPU time of one page's render (default: 3)", metavar="S"
    ),
    "page_wall_seconds": _Field(
        "float", 1, 60, help="wall-clock time of one page's render (default: 10)", metavar="S"
    ),
    "pdf_cpu_seconds": _Field(
        "int", 1, 30, help="CPU time of one PDF's reading (default: 5)", metavar="S"
    ),
    "pdf_wall_seconds": _Field(
        "float", 1, 60, help="wall-clock time of one PDF's reading (default: 8)", metavar="S"
    ),
    "pdf_max_bytes": _Field(
        "int",
        64 * 1024,
        PDF_MAX_BYTES_CEILING,
        ceiling="64 MiB, the hard ceiling of a PDF's size, which no setting can raise",
        help="a PDF's body limit in bytes (default: 16 MiB, at most 64 MiB)",
        metavar="BYTES",
    ),
    "max_message_bytes": _Field(
        "int", 64 * 1024, 64 * MIB, help="gRPC message size limit (default: 1 MiB)", metavar="BYTES"
    ),
    "metrics_listen": _Field(
        "str", help="a /metrics port of its own (development)", metavar="HOST:PORT"
    ),
    "log_sink": _Field(
        "str", choices=("auto", "journal", "json"), help="fetch log sink (default: auto)"
    ),
    "tls_cert_file": _Field(
        "path", help="server certificate of TCP listeners (mutual TLS)", metavar="PEM"
    ),
    "tls_key_file": _Field("path", help="the server certificate's private key", metavar="PEM"),
    "tls_client_ca_file": _Field(
        "path", help="CA that client certificates must chain to", metavar="PEM"
    ),
    "extra_ca_file": _Field(
        "ca_bundle",
        help="CAs trusted in addition to the system store (an egress proxy's)",
        metavar="PEM",
    ),
    "deny_domains": _Field(
        "domains", help="domains never read, nor their subdomains", metavar="DOMAIN,..."
    ),
    "allow_domains": _Field(
        "domains",
        help="when set, the only domains read (and their subdomains)",
        metavar="DOMAIN,...",
    ),
    "cache_bytes": _Field(
        "int",
        0,
        4096 * MIB,
        help="page cache size in bytes; 0 turns it off (default: 64 MiB)",
        metavar="BYTES",
    ),
    "cache_seconds": _Field(
        "float", 1, 86_400, help="how long a page stays cached (default: 600)", metavar="S"
    ),
}

#: Every setting's name, in the order of the table above (``serve`` makes a flag of each).
SETTING_NAMES: tuple[str, ...] = tuple(_FIELDS)
#: Variables the fetcher reads besides ``TIGRESS_FETCHER_<NAME>``.
OTHER_VARIABLES = ("TIGRESS_FETCHER_CONFIG",)


def flag_help(name: str) -> tuple[str, str, tuple[str, ...]]:
    """The ``serve --<name>`` flag's help text, metavar and choices (empty: any value)."""
    field = _FIELDS[name]
    return field.help, field.metavar, field.choices


def _convert(name: str, field: _Field, raw: object, source: str) -> object:
    """Turns one raw value (TOML value, variable text or flag text) into its typed form."""

    def bad(why: str) -> ConfigError:
        return ConfigError(f"{source}: bad value {raw!r} for {name}: {why}")

    if field.kind == "listen":
        items: list[object]
        if isinstance(raw, str):
            items = [part for part in raw.split(",") if part.strip()]
        elif isinstance(raw, list):
            items = list(raw)
        else:
            raise bad("expected a string or a list of strings")
        if not items:
            raise bad("at least one address is needed")
        parsed = []
        for item in items:
            if not isinstance(item, str):
                raise bad("expected a string or a list of strings")
            try:
                parsed.append(parse_listen(item))
            except ValueError as exc:
                raise bad(str(exc)) from exc
        return tuple(parsed)
    if field.kind == "domains":
        return _domains(raw, bad)
    if field.kind in ("int", "float"):
        number: float
        if isinstance(raw, bool):
            raise bad("expected a number")
        if isinstance(raw, int | float):
            number = raw
        elif isinstance(raw, str):
            try:
                number = int(raw) if field.kind == "int" else float(raw)
            except ValueError as exc:
                raise bad(
                    f"expected {'an integer' if field.kind == 'int' else 'a number'}"
                ) from exc
        else:
            raise bad("expected a number")
        if field.kind == "int" and not isinstance(number, int):
            raise bad("expected an integer")
        if not math.isfinite(number):
            raise bad("expected a finite number")
        if field.minimum is not None and number < field.minimum:
            raise bad(f"must be at least {_bound(field.minimum, field.kind)}")
        if field.maximum is not None and number > field.maximum:
            note = f" ({field.ceiling})" if field.ceiling else ""
            raise bad(f"must be at most {_bound(field.maximum, field.kind)}{note}")
        return int(number) if field.kind == "int" else float(number)
    if not isinstance(raw, str):
        raise bad("expected a string")
    if field.choices and raw not in field.choices:
        raise bad(f"expected one of {', '.join(field.choices)}")
    if field.kind == "path":
        return Path(raw) if raw else None
    if field.kind == "ca_bundle":
        return read_ca_bundle(Path(raw), source) if raw else None
    return raw


def _domains(raw: object, bad: Callable[[str], ConfigError]) -> tuple[str, ...]:
    """A domain list: a TOML list of strings, or comma-separated text (variables, flags)."""
    if isinstance(raw, str):
        entries = raw.split(",")
    elif isinstance(raw, list) and all(isinstance(item, str) for item in raw):
        entries = raw
    else:
        raise bad("expected a list of domains (or comma-separated text)")
    parsed = parse_domains(entries)
    if isinstance(parsed, Refused):
        raise bad(parsed.detail)
    return parsed


def _bound(value: float, kind: str) -> str:
    """A bound as people read it: whole numbers in full (67108864, not 6.71089e+07)."""
    return str(int(value)) if kind == "int" else f"{value:g}"


def read_ca_bundle(path: Path, source: str) -> CaBundle:
    """Reads the extra certificate authorities once, at start-up.

    Args:
        path: A PEM file with one or more certificates.
        source: Where the setting came from, for the message.

    Returns:
        The certificates' text and count.

    Raises:
        ConfigError: The file cannot be read or holds no valid PEM certificate; the
            message names ``extra_ca_file``.

    # Security
    Every certificate in the file can vouch for any host name, so whoever holds one of
    their keys can read and change the pages the fetcher reads (that is what a
    TLS-inspecting proxy does). The file only ever adds to the system store, is named at
    start-up (in the settings lines and the "serving on" line), and a file that is not
    exactly readable PEM stops start-up rather than silently trusting less or more.
    Proved by ``tests/fetcher/net/test_extra_ca.py``.
    """

    def bad(why: str) -> ConfigError:
        return ConfigError(f"{source}: bad value {str(path)!r} for extra_ca_file: {why}")

    try:
        text = path.read_text(encoding="ascii")
    except OSError as exc:
        raise bad(f"cannot be read ({exc.strerror})") from exc
    except UnicodeDecodeError as exc:
        raise bad("not a PEM file (DER? convert it with openssl x509 -inform der)") from exc
    count = text.count("-----BEGIN CERTIFICATE-----")
    if count == 0:
        raise bad("no PEM certificate in it")
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cadata=text)
    except ssl.SSLError as exc:
        raise bad(f"not a valid PEM certificate bundle ({exc.reason or exc})") from exc
    return CaBundle(path=path, pem=text, certificates=count)


def _check_whole(settings: Settings) -> Settings:
    """Checks the rules that involve several settings at once."""
    tls_files = (settings.tls_cert_file, settings.tls_key_file, settings.tls_client_ca_file)
    if any(tls_files) and not all(tls_files):
        raise ConfigError(
            "tls_cert_file, tls_key_file and tls_client_ca_file must be set together "
            "(TCP listeners use mutual TLS)"
        )
    for path in filter(None, tls_files):
        if not path.is_file():
            raise ConfigError(f"bad value for a TLS file: {str(path)!r} is not a readable file")
    for listen in settings.listen:
        # Security: plain TCP beyond loopback would make the fetcher an open proxy for
        # anyone on the network; remote replicas need mutual TLS.
        if listen.unix_path is None and not listen.is_loopback and not settings.tls:
            raise ConfigError(
                f"bad value {listen.target!r} for listen: a TCP address beyond loopback "
                "needs tls_cert_file, tls_key_file and tls_client_ca_file"
            )
    if settings.metrics_listen:
        try:
            metrics = parse_listen(settings.metrics_listen)
        except ValueError as exc:
            raise ConfigError(
                f"bad value {settings.metrics_listen!r} for metrics_listen: {exc}"
            ) from exc
        if metrics.unix_path is not None or not metrics.is_loopback:
            raise ConfigError(
                f"bad value {settings.metrics_listen!r} for metrics_listen: "
                "expected a loopback HOST:PORT"
            )
    return settings


def load_settings(
    *,
    environ: Mapping[str, str],
    config_file: Path | None = None,
    overrides: Mapping[str, str | None] | None = None,
) -> Settings:
    """Builds the settings from every source, checking each value.

    Args:
        environ: The process environment (``os.environ`` in production).
        config_file: A TOML file given on the command line; when ``None`` the
            ``TIGRESS_FETCHER_CONFIG`` or ``TIGRESS_CONFIG`` variable may name one.
        overrides: Command-line values by setting name (``None`` means not given).

    Returns:
        The checked settings.

    Raises:
        ConfigError: A value, a key or the file is bad; the message names it.

    # Security
    No setting can switch a network rule off: loopback and private addresses are the
    downloader's policy, which is not configurable here, and a PDF's size limit can be
    lowered but never raised past its 64 MiB ceiling. Plain TCP beyond loopback and
    abstract Unix sockets (no file permissions) are refused, so only the gateway's group
    or a client with a certificate can make the fetcher read. Proved by
    ``tests/fetcher/test_service_settings.py::test_bad_value_stops_start_up_naming_it``.
    """
    values: dict[str, object] = {"listen": (parse_listen(f"unix:{DEV_SOCKET}"),)}
    path_text = environ.get("TIGRESS_FETCHER_CONFIG") or environ.get("TIGRESS_CONFIG")
    path = config_file or (Path(path_text) if path_text else None)
    if path is not None:
        table = _read_toml(path)
        unknown = unknown_names(table, _FIELDS)
        if unknown:
            plural = "s" if len(unknown) > 1 else ""
            raise ConfigError(f"{path}: unknown setting{plural} in [fetcher]: {', '.join(unknown)}")
        for name, raw in table.items():
            values[name] = _convert(name, _FIELDS[name], raw, f"{path} [fetcher]")
    for name, field in _FIELDS.items():
        variable = ENV_PREFIX + name.upper()
        if variable in environ:
            values[name] = _convert(name, field, environ[variable], variable)
    for name, raw in (overrides or {}).items():
        if raw is not None:
            values[name] = _convert(name, _FIELDS[name], raw, f"--{name.replace('_', '-')}")
    return _check_whole(Settings(**values))  # type: ignore[arg-type]


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as file:
            document = tomllib.load(file)
    except OSError as exc:
        raise ConfigError(f"config file {str(path)!r} cannot be read: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {str(path)!r} is not valid TOML: {exc}") from exc
    table = document.get("fetcher", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [fetcher] must be a table")
    return table


def changes(settings: Settings, *, base: Path | None = None) -> str:
    """The start-up log's one line: the settings that differ from the defaults.

    Args:
        settings: The checked settings.
        base: What the default socket's relative path is resolved against (the working
            directory when ``None``), so the default listen address is not called a change.

    Returns:
        ``settings: the defaults`` or ``settings changed from the defaults: name = value,
        ...`` (in the settings' order; ``listen`` is on the "serving on" line anyway).
    """
    defaults = Settings(listen=(parse_listen(f"unix:{DEV_SOCKET}", base=base),))
    changed = [
        f"{name} = {_shown(getattr(settings, name))}"
        for name in _FIELDS
        if name != "listen" and getattr(settings, name) != getattr(defaults, name)
    ]
    if not changed:
        return "settings: the defaults"
    return "settings changed from the defaults: " + ", ".join(changed)


def _shown(value: object) -> object:
    """A setting's value as the start-up line says it (a list of domains comma-separated)."""
    if isinstance(value, tuple) and all(isinstance(item, str) for item in value):
        return ",".join(value)
    return value


def unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """The ``TIGRESS_FETCHER_*`` variables no setting reads, each with its likely meaning.

    Args:
        environ: The process environment.

    Returns:
        One description per unknown variable (``fetcher.names.unknown_names``), sorted.
    """
    known = [ENV_PREFIX + name.upper() for name in _FIELDS] + list(OTHER_VARIABLES)
    given = sorted(name for name in environ if name.startswith(ENV_PREFIX))
    return unknown_names(given, known)
