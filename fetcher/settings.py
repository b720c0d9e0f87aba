"""The fetcher service's settings: built-in defaults, a TOML file, environment variables.

Later sources win: defaults, then the ``[fetcher]`` table of the TOML file (``--config``,
else ``TIGRESS_FETCHER_CONFIG``, else ``TIGRESS_CONFIG``), then ``TIGRESS_FETCHER_<NAME>``
variables, then command-line flags. Every value is checked once, here; a bad one stops
start-up with a :class:`~fetcher.errors.ConfigError` that names the setting, where it came
from and what was wrong. Unknown keys in the TOML table are errors too (a typo must not
silently leave a default in force): all of them are named at once, each with the setting
it most likely meant. The rules are the gateway's too: this module declares the settings
(one :class:`~fetcher.config.Field` each), ``fetcher.config`` reads and checks them.
Unknown ``TIGRESS_FETCHER_*`` variables are named the same way by
:func:`unknown_variables`, which ``serve`` logs as a warning, not an error: the
environment is shared with the operator's shell, and a stray variable changes nothing.

This module only decides; it opens no socket. The composition root (``fetcher.server``)
turns a :class:`Settings` into listeners.
"""

from __future__ import annotations

import dataclasses
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fetcher import config
from fetcher.config import (
    Bad,
    Field,
    convert,
    problem,
    read,
    read_toml,
    unknown_keys,
)
from fetcher.errors import ConfigError
from fetcher.isolation.zygote import WorkLimits
from fetcher.net.domains import DomainLists, parse_domains
from fetcher.net.download import PDF_MAX_BYTES, PDF_MAX_BYTES_CEILING
from fetcher.net.urls import Refused
from fetcher.pdf.reader import CRAWL_CHAR_LIMIT
from fetcher.pdf.result import PdfLimits

#: Where a listen address is parsed (shared with the gateway); callers name them here.
Listen = config.Listen
parse_listen = config.parse_listen

ENV_PREFIX = "TIGRESS_FETCHER_"
#: The development socket, relative to the directory the processes are started from
#: (the project root under ``make run``); production passes ``unix:/run/fetcher/fetcher.sock``.
DEV_SOCKET = Path("run") / "fetcher.sock"
MIB = 1024 * 1024


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


def _listens(items: tuple[str, ...]) -> tuple[Listen, ...] | Bad:
    if not items:
        return Bad("at least one address is needed")
    try:
        return tuple(parse_listen(item) for item in items)
    except ValueError as exc:
        return Bad(str(exc))


def _domains(items: tuple[str, ...]) -> tuple[str, ...] | Bad:
    parsed = parse_domains(items)
    return Bad(parsed.detail) if isinstance(parsed, Refused) else parsed


def _path(raw: str) -> Path | None:
    return Path(raw) if raw else None


def _bundle(raw: str) -> CaBundle | Bad | None:
    return read_ca_bundle(Path(raw)) if raw else None


FIELDS: dict[str, Field] = {
    "listen": Field(
        "list",
        text_in_toml=True,
        items="addresses",
        check=_listens,
        help="where to serve gRPC, comma-separated (default: unix:run/fetcher.sock)",
        metavar="unix:PATH|HOST:PORT",
    ),
    "max_concurrent_reads": Field(
        "int", 1, 10_000, help="reads handled at once; one more is refused (default: 16)"
    ),
    "read_deadline_seconds": Field(
        "float", 1, 600, help="the longest a read may take (default: 30)", metavar="S"
    ),
    "deadline_margin_seconds": Field(
        "float",
        0,
        10,
        help="kept back from the caller's deadline for the report (default: 0.25)",
        metavar="S",
    ),
    "shutdown_grace_seconds": Field(
        "float", 0, 600, help="after SIGTERM, how long reads may finish (default: 10)", metavar="S"
    ),
    "crawl_concurrency": Field(
        "int", 1, 64, help="pages of one hop downloaded at once (default: 4)"
    ),
    "render_workers": Field("int", 1, 32, help="page rendering processes (default: 2)"),
    "pdf_workers": Field("int", 1, 16, help="PDF reading processes at once (default: 2)"),
    "worker_memory_mib": Field(
        "int",
        128,
        512,
        ceiling="a worker's cap; the unit's MemoryMax must hold every worker at it",
        help="address space of every render and PDF worker in MiB (default: 256)",
        metavar="MIB",
    ),
    "page_cpu_seconds": Field(
        "int", 1, 30, help="CPU time of one page's render (default: 3)", metavar="S"
    ),
    "page_wall_seconds": Field(
        "float", 1, 60, help="wall-clock time of one page's render (default: 10)", metavar="S"
    ),
    "pdf_cpu_seconds": Field(
        "int", 1, 30, help="CPU time of one PDF's reading (default: 5)", metavar="S"
    ),
    "pdf_wall_seconds": Field(
        "float", 1, 60, help="wall-clock time of one PDF's reading (default: 8)", metavar="S"
    ),
    "pdf_max_bytes": Field(
        "int",
        64 * 1024,
        PDF_MAX_BYTES_CEILING,
        ceiling="64 MiB, the hard ceiling of a PDF's size, which no setting can raise",
        help="a PDF's body limit in bytes (default: 16 MiB, at most 64 MiB)",
        metavar="BYTES",
    ),
    "max_message_bytes": Field(
        "int", 64 * 1024, 64 * MIB, help="gRPC message size limit (default: 1 MiB)", metavar="BYTES"
    ),
    "metrics_listen": Field(
        "str", help="a /metrics port of its own (development)", metavar="HOST:PORT"
    ),
    "log_sink": Field(
        "str", choices=("auto", "journal", "json"), help="fetch log sink (default: auto)"
    ),
    "tls_cert_file": Field(
        "str", check=_path, help="server certificate of TCP listeners (mutual TLS)", metavar="PEM"
    ),
    "tls_key_file": Field(
        "str", check=_path, help="the server certificate's private key", metavar="PEM"
    ),
    "tls_client_ca_file": Field(
        "str", check=_path, help="CA that client certificates must chain to", metavar="PEM"
    ),
    "extra_ca_file": Field(
        "str",
        check=_bundle,
        help="CAs trusted in addition to the system store (an egress proxy's)",
        metavar="PEM",
    ),
    "deny_domains": Field(
        "list",
        text_in_toml=True,
        items="domains",
        check=_domains,
        help="domains never read, nor their subdomains",
        metavar="DOMAIN,...",
    ),
    "allow_domains": Field(
        "list",
        text_in_toml=True,
        items="domains",
        check=_domains,
        help="when set, the only domains read (and their subdomains)",
        metavar="DOMAIN,...",
    ),
    "cache_bytes": Field(
        "int",
        0,
        4096 * MIB,
        help="page cache size in bytes; 0 turns it off (default: 64 MiB)",
        metavar="BYTES",
    ),
    "cache_seconds": Field(
        "float", 1, 86_400, help="how long a page stays cached (default: 600)", metavar="S"
    ),
}
# Each setting's variable is TIGRESS_FETCHER_<NAME>.
FIELDS = {
    name: dataclasses.replace(field, variable=ENV_PREFIX + name.upper())
    for name, field in FIELDS.items()
}

#: Every setting's name, in the order of the table above (``serve`` makes a flag of each).
SETTING_NAMES: tuple[str, ...] = tuple(FIELDS)
#: Variables the fetcher reads besides ``TIGRESS_FETCHER_<NAME>``.
OTHER_VARIABLES = ("TIGRESS_FETCHER_CONFIG",)


def flag_help(name: str) -> tuple[str, str, tuple[str, ...]]:
    """The ``serve --<name>`` flag's help text, metavar and choices (empty: any value)."""
    field = FIELDS[name]
    return field.help, field.metavar, field.choices


def read_ca_bundle(path: Path) -> CaBundle | Bad:
    """Reads the extra certificate authorities once, at start-up.

    Args:
        path: A PEM file with one or more certificates.

    Returns:
        The certificates' text and count, or why they cannot be used (the file cannot
        be read or holds no valid PEM certificate).

    # Security
    Every certificate in the file can vouch for any host name, so whoever holds one of
    their keys can read and change the pages the fetcher reads (that is what a
    TLS-inspecting proxy does). The file only ever adds to the system store, is named at
    start-up (in the settings lines and the "serving on" line), and a file that is not
    exactly readable PEM stops start-up rather than silently trusting less or more.
    Proved by ``tests/fetcher/net/test_extra_ca.py``.
    """
    try:
        text = path.read_text(encoding="ascii")
    except OSError as exc:
        return Bad(f"cannot be read ({exc.strerror})")
    except UnicodeDecodeError:
        return Bad("not a PEM file (DER? convert it with openssl x509 -inform der)")
    count = text.count("-----BEGIN CERTIFICATE-----")
    if count == 0:
        return Bad("no PEM certificate in it")
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cadata=text)
    except ssl.SSLError as exc:
        return Bad(f"not a valid PEM certificate bundle ({exc.reason or exc})")
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
    named_by = "--config" if config_file else "TIGRESS_FETCHER_CONFIG"
    if config_file is None and not environ.get(named_by):
        named_by = "TIGRESS_CONFIG"
    path_text = environ.get("TIGRESS_FETCHER_CONFIG") or environ.get("TIGRESS_CONFIG")
    path = config_file or (Path(path_text) if path_text else None)
    table: dict[str, Any] = {}
    if path is not None:
        document = read_toml(path, named_by)
        if isinstance(document, Bad):
            raise ConfigError(document.message)
        table = document.get("fetcher", {})
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: [fetcher] must be a table")
        unknown = problem(unknown_keys(table, FIELDS), str(path), " in [fetcher]")
        if unknown is not None:
            raise ConfigError(unknown.message)
    given = read(FIELDS, table, f"{path} [fetcher]", environ)
    if isinstance(given, Bad):
        raise ConfigError(given.message)
    values |= given
    for name, raw in (overrides or {}).items():
        if raw is not None:
            flag = f"--{name.replace('_', '-')}"
            value = convert(FIELDS[name], raw, name, flag, text=True)
            if isinstance(value, Bad):
                raise ConfigError(value.message)
            values[name] = value
    return _check_whole(Settings(**values))  # type: ignore[arg-type]


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
        for name in FIELDS
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
    known = [field.variable for field in FIELDS.values()] + list(OTHER_VARIABLES)
    return config.unknown_variables(environ, known, prefix=ENV_PREFIX)
