"""Gateway settings: built-in defaults, then a TOML file, then environment variables.

SPEC section 9. A bad value stops start-up with a `SettingsError` that names the setting
(and where it came from); nothing is guessed. Keys are read here and never printed: the
`Settings` repr hides them.

The TOML file (path in ``TIGRESS_CONFIG``)::

    listen = "127.0.0.1:8000"
    engine_url = "http://127.0.0.1:8080/v1"   # the default engine (models from its /models)
    api_keys_file = "/etc/tigress/keys"        # or api_keys = ["..."]
    max_body_bytes = 1048576
    media_urls = "refuse"                      # "allow": engines may fetch media addresses
    searxng_url = "http://127.0.0.1:8888"
    searxng_results = 6                        # results kept per search
    searxng_categories = ["general"]           # SearXNG's own parameters (default: its own)
    searxng_language = "en"
    searxng_engines = ["duckduckgo", "brave"]
    fetcher_target = ["unix:/run/fetcher/fetcher.sock"]   # default: [fetcher] listen below
    allowed_origins = ["https://chat.example.org"]  # pages of other origins that may send
    trusted_proxies = ["127.0.0.1"]            # peers whose X-Forwarded-For/-Host are believed

    [fetcher]                                  # the fetcher process's own settings
    listen = "unix:/run/fetcher/fetcher.sock"
    deny_domains = ["example.net"]             # read by the gateway too (docs/sources-and-cache.md)
    allow_domains = []

    [[engines]]                                # more engines, each serving named models
    url = "http://127.0.0.1:8001/v1"
    name = "vllm"                              # optional: how logs and /healthz name it
    models = ["qwen3-coder"]                   # empty or absent: ask the engine's /models
    api_key_env = "VLLM_KEY"                   # optional: the engine's own key, from the env

    [budgets]
    searches = 16
    pages = 12

    [limits]
    max_chats = 512                            # chats at once; past it 503 + Retry-After
    max_connections = 1024                     # client connections; past it 503, closed
    chats_per_key = 16                         # per key; 0 = off (default 0 without keys)
    requests_per_minute_per_key = 600          # per key; 0 = off (default 0 without keys)
    connections_per_client = 256               # client connections of one client address
    max_answer_bytes = 67108864                # relayed per answer; past it the answer is cut

    [mcp]                                      # the MCP endpoint at /mcp (README: MCP)
    sessions_per_key = 8                       # per key; 0 = off (default 0 without keys)
    sessions_per_client = 16                   # keyless: per client address, oldest idle evicted
    max_sessions = 256                         # open sessions in all
    session_idle = 900                         # seconds without a request before one expires
    allowed_origins = ["http://127.0.0.1:8080"]   # browser pages that may call /mcp

    [timeouts]                                 # seconds
    engine_connect = 5
    engine_read = 300
    tool = 120
    keepalive = 10
    models_cache = 60
    models_failure_cache = 5                   # a failed /models look-up is trusted this long
    health_cache = 2                           # /healthz answers are reused this long
    client_header = 10                         # a request's head must arrive within this
    client_body = 30                           # its body within this
    client_idle = 5                            # an idle kept-alive connection is closed
    shutdown_grace = 10                        # answers in flight at SIGTERM get this long
    searxng = 15                               # a whole search; above SearXNG's own limit
    answer = 1800                              # the longest one answer may stream
"""

from __future__ import annotations

import ipaddress
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from fetcher.client import NO_LISTS, DomainLists, parse_domains
from fetcher.names import unknown_names

DEFAULT_ENGINE_URL = "http://127.0.0.1:8080/v1"
DEFAULT_SEARXNG_URL = "http://127.0.0.1:8888"
DEFAULT_LISTEN = "127.0.0.1:8000"
#: The fetcher's socket in the run folder that ``make run`` uses.
DEFAULT_FETCHER = "unix:run/fetcher.sock"
DEFAULT_MAX_BODY_BYTES = 1024 * 1024


class SettingsError(Exception):
    """Raised when a setting has a bad value; the message names the setting."""


@dataclass(frozen=True)
class EngineSettings:
    """One OpenAI-compatible engine.

    Attributes:
        url: Base URL ending before ``/chat/completions`` (``http://host:port/v1``).
        models: Model names it serves; empty means "ask the engine's ``/models``".
        api_key: The engine's own key, sent as Bearer; never logged.
    """

    url: str
    models: tuple[str, ...] = ()
    api_key: str | None = field(default=None, repr=False)
    name: str = ""

    @property
    def label(self) -> str:
        """How logs, errors and ``/healthz`` name the engine: its configured name, else
        its address without any user name or password."""
        return self.name or self.address

    @property
    def address(self) -> str:
        """The engine's base URL without any user name or password."""
        parts = urlsplit(self.url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        try:
            port = parts.port
        except ValueError:
            port = None
        netloc = f"{host}:{port}" if port is not None else host
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


@dataclass(frozen=True)
class Budgets:
    """Per-answer budgets (SPEC 8)."""

    searches: int = 16
    pages: int = 12


@dataclass(frozen=True)
class Timeouts:
    """Timeouts in seconds."""

    engine_connect: float = 5.0
    #: Longest silence from an engine, prompt processing included.
    engine_read: float = 300.0
    tool: float = 120.0
    #: Interval of SSE keep-alive comments while nothing else is sent.
    keepalive: float = 10.0
    #: How long a discovered model list is trusted.
    models_cache: float = 60.0
    #: How long a failed model look-up is trusted (the engine is not asked again sooner).
    models_failure_cache: float = 5.0
    #: How long a /healthz answer is reused.
    health_cache: float = 2.0
    #: A client's request head must arrive within this (slow-header connections closed).
    client_header: float = 10.0
    #: A client's request body must arrive within this (408 after).
    client_body: float = 30.0
    #: A kept-alive client connection with no request is closed after this.
    client_idle: float = 5.0
    #: At SIGTERM, answers in flight get this long before they end with an error chunk.
    shutdown_grace: float = 10.0
    #: A whole SearXNG search; above SearXNG's outgoing.max_request_timeout.
    searxng: float = 15.0
    #: The longest one answer may run, streaming included (an engine that never stops).
    answer: float = 1800.0


@dataclass(frozen=True)
class Limits:
    """How much the gateway takes on (0 per key means off).

    Attributes:
        max_chats: Chats served at once; past it a chat gets 503 with Retry-After.
        max_connections: Client connections open at once; past it a new connection gets
            503 and is closed.
        chats_per_key: Chats at once per access key (429 past it).
        requests_per_minute_per_key: API requests per minute per key (429 past it).
        connections_per_client: Client connections one client (`gateway.http.browsers.client_of`)
            may have open at once; past it a new one gets 503 and is closed.
        max_answer_bytes: Bytes one answer may relay (the engine's in pass-through, the
            model's text in the Web loop); past it the answer ends with an error.
    """

    max_chats: int = 512
    max_connections: int = 1024
    chats_per_key: int = 0
    requests_per_minute_per_key: int = 0
    connections_per_client: int = 256
    max_answer_bytes: int = 64 * 1024 * 1024


@dataclass(frozen=True)
class McpSettings:
    """The MCP endpoint (``/mcp``): its sessions and the browser pages that may use it.

    Attributes:
        sessions_per_key: Sessions one access key may have open (0 is off); past it a new
            session is refused with 429.
        max_sessions: Sessions open in all; past it a new session is refused with 503.
        session_idle: Seconds a session may go without a request in flight before it
            expires (its ledger and budgets with it).
        allowed_origins: Web origins (``scheme://host[:port]``) whose pages may call
            ``/mcp`` from a browser; a request with any other ``Origin`` is refused (403).
        sessions_per_client: Without keys, sessions one client (`gateway.http.browsers.client_of`)
            may have open; at the limit its oldest idle session is ended for a new one.
    """

    sessions_per_key: int = 0
    max_sessions: int = 256
    session_idle: float = 900.0
    allowed_origins: tuple[str, ...] = ()
    sessions_per_client: int = 16


#: Sessions per key when keys are configured and the file says nothing.
KEYED_MCP_SESSIONS_PER_KEY = 8

#: Per-key limits when keys are configured and the file says nothing.
KEYED_CHATS_PER_KEY = 16
KEYED_REQUESTS_PER_MINUTE = 600


@dataclass(frozen=True)
class Settings:
    """Everything the gateway's composition root needs."""

    listen_host: str = "127.0.0.1"
    listen_port: int = 8000
    engines: tuple[EngineSettings, ...] = (EngineSettings(DEFAULT_ENGINE_URL),)
    searxng_url: str = DEFAULT_SEARXNG_URL
    searxng_results: int = 6
    fetcher: tuple[str, ...] = (DEFAULT_FETCHER,)
    api_keys: tuple[str, ...] = field(default=(), repr=False)
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    budgets: Budgets = Budgets()
    timeouts: Timeouts = Timeouts()
    limits: Limits = Limits()
    mcp: McpSettings = McpSettings()
    #: Let engines fetch media addresses in messages themselves (see README: the risk).
    allow_media_urls: bool = False
    #: Origins (``scheme://host[:port]``) of pages other than the gateway's own that may
    #: send requests from a browser (any other ``Origin`` is 403, SPEC 2).
    allowed_origins: tuple[str, ...] = ()
    #: Peers (addresses or networks) whose ``X-Forwarded-For`` and ``X-Forwarded-Host``
    #: are believed: the operator's reverse proxy.
    trusted_proxies: tuple[str, ...] = ()
    #: The operator's lists (``[fetcher]`` ``deny_domains`` / ``allow_domains``, the same
    #: keys and variables the fetcher reads): search results under them are dropped.
    source_lists: DomainLists = NO_LISTS
    #: SearXNG's own ``categories``, ``language`` and ``engines`` parameters (empty: not
    #: sent, SearXNG's defaults apply).
    searxng_categories: tuple[str, ...] = ()
    searxng_language: str = ""
    searxng_engines: tuple[str, ...] = ()


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Build the settings from defaults, the TOML file and the environment.

    Args:
        environ: The environment to read (``os.environ`` by default).

    Returns:
        Checked settings.

    Raises:
        SettingsError: A value is bad, a file cannot be read, or the gateway would listen
            on a non-loopback address without access keys.
    """
    env = os.environ if environ is None else environ
    table: dict[str, Any] = {}
    config_path = env.get("TIGRESS_CONFIG")
    if config_path:
        table = _read_toml(config_path)
    toml = _Source(table, f"{config_path}")

    unknown = unknown_keys(table)
    if unknown:
        plural = "s" if len(unknown) > 1 else ""
        raise SettingsError(f"{config_path}: unknown setting{plural}: {', '.join(unknown)}")

    listen = env.get("TIGRESS_LISTEN") or toml.str_("listen", DEFAULT_LISTEN)
    where = "TIGRESS_LISTEN" if env.get("TIGRESS_LISTEN") else "listen"
    host, port = parse_listen(listen, where)

    engines = _engines(table, env, toml)
    searxng_url = env.get("TIGRESS_SEARXNG_URL") or toml.str_("searxng_url", DEFAULT_SEARXNG_URL)
    _check_http_url(searxng_url, "TIGRESS_SEARXNG_URL / searxng_url")

    fetcher_env = env.get("TIGRESS_FETCHER")
    if fetcher_env:
        fetcher = tuple(t.strip() for t in fetcher_env.split(",") if t.strip())
    else:
        raw = table.get("fetcher_target", _fetcher_listen(table) or [DEFAULT_FETCHER])
        raw = [raw] if isinstance(raw, str) else raw
        if not isinstance(raw, list) or not all(isinstance(t, str) and t for t in raw):
            raise SettingsError(
                f"{config_path}: fetcher_target must be a string or a list of strings"
            )
        fetcher = tuple(raw)
    if not fetcher:
        raise SettingsError("TIGRESS_FETCHER: no fetcher target given")

    keys = _api_keys(table, env, toml)
    if not keys and not is_loopback(host):
        raise SettingsError(
            f"{where}: refusing to listen on non-loopback address {host!r} without access "
            "keys (set TIGRESS_API_KEYS or TIGRESS_API_KEYS_FILE)"
        )

    max_body = toml.int_("max_body_bytes", DEFAULT_MAX_BODY_BYTES, minimum=1024)
    budgets_table = toml.sub("budgets", {"searches", "pages"})
    budgets = Budgets(
        searches=budgets_table.int_("searches", Budgets.searches, minimum=0),
        pages=budgets_table.int_("pages", Budgets.pages, minimum=0),
    )
    timeout_names = [f.name for f in fields(Timeouts)]
    timeouts_table = toml.sub("timeouts", set(timeout_names))
    defaults = Timeouts()
    timeouts = Timeouts(
        **{name: timeouts_table.float_(name, getattr(defaults, name)) for name in timeout_names}
    )
    limits_table = toml.sub(
        "limits",
        {
            "max_chats",
            "max_connections",
            "chats_per_key",
            "requests_per_minute_per_key",
            "connections_per_client",
            "max_answer_bytes",
        },
    )
    keyed = bool(keys)
    limits = Limits(
        max_chats=limits_table.int_("max_chats", Limits.max_chats, minimum=1),
        max_connections=limits_table.int_("max_connections", Limits.max_connections, minimum=1),
        chats_per_key=limits_table.int_(
            "chats_per_key", KEYED_CHATS_PER_KEY if keyed else 0, minimum=0
        ),
        requests_per_minute_per_key=limits_table.int_(
            "requests_per_minute_per_key", KEYED_REQUESTS_PER_MINUTE if keyed else 0, minimum=0
        ),
        connections_per_client=limits_table.int_(
            "connections_per_client", Limits.connections_per_client, minimum=1
        ),
        max_answer_bytes=limits_table.int_(
            "max_answer_bytes", Limits.max_answer_bytes, minimum=64 * 1024
        ),
    )
    mcp = _mcp(toml, env, keyed=keyed)
    media = toml.str_("media_urls", "refuse")
    if media not in ("refuse", "allow"):
        raise SettingsError(f'{config_path}: media_urls must be "refuse" or "allow"')
    return Settings(
        listen_host=host,
        listen_port=port,
        engines=engines,
        searxng_url=searxng_url,
        searxng_results=toml.int_("searxng_results", Settings.searxng_results, minimum=1),
        fetcher=fetcher,
        api_keys=keys,
        max_body_bytes=max_body,
        budgets=budgets,
        timeouts=timeouts,
        limits=limits,
        mcp=mcp,
        allow_media_urls=media == "allow",
        allowed_origins=_origins(
            env, table, "TIGRESS_ALLOWED_ORIGINS", "allowed_origins", toml.origin
        ),
        trusted_proxies=_proxies(env, table, toml.origin),
        source_lists=_source_lists(table, env, config_path or ""),
        searxng_categories=_names(toml, env, "categories"),
        searxng_language=_language(toml, env),
        searxng_engines=_names(toml, env, "engines"),
    )


def _source_lists(table: dict[str, Any], env: Mapping[str, str], path: str) -> DomainLists:
    """The operator's lists, read where the fetcher reads them.

    ``deny_domains`` and ``allow_domains`` belong to the fetcher (it enforces them on every
    address it opens); the gateway reads the same keys of the same file's ``[fetcher]``
    table, and the same ``TIGRESS_FETCHER_DENY_DOMAINS`` / ``TIGRESS_FETCHER_ALLOW_DOMAINS``
    variables, so one list is written once. Normalised by the fetcher's own function.
    """
    section = table.get("fetcher", {})
    if not isinstance(section, dict):
        raise SettingsError(f"{path}: [fetcher] must be a table")
    lists: dict[str, tuple[str, ...]] = {}
    for name in ("deny_domains", "allow_domains"):
        variable = f"TIGRESS_FETCHER_{name.upper()}"
        raw: Any
        if variable in env:
            where, raw = variable, env[variable].split(",")
        else:
            where, raw = f"{path}: fetcher.{name}", section.get(name, [])
        if isinstance(raw, str):
            raw = raw.split(",")
        if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
            raise SettingsError(f"{where} must be a list of domains")
        parsed = parse_domains(raw)
        if not isinstance(parsed, tuple):
            raise SettingsError(f"{where}: {parsed.detail}")
        lists[name] = parsed
    return DomainLists(deny=lists["deny_domains"], allow=lists["allow_domains"])


#: SearXNG's names of categories and engines: letters, digits, spaces (engine names such
#: as "google news"), "-", "_", ".".
_SEARXNG_NAME = re.compile(r"[\w .-]{1,64}")
#: A language as SearXNG takes it: ``all``, ``auto``, ``en``, ``en-US``, ``zh-Hans-CN``...
_SEARXNG_LANGUAGE = re.compile(r"[A-Za-z]{2,8}(?:-[A-Za-z0-9]{1,8}){0,2}")


def _names(toml: _Source, env: Mapping[str, str], what: str) -> tuple[str, ...]:
    """``searxng_categories`` or ``searxng_engines``: a TOML list, or comma-separated text
    in ``TIGRESS_SEARXNG_<WHAT>``; each a name SearXNG knows (it ignores others)."""
    variable = f"TIGRESS_SEARXNG_{what.upper()}"
    raw: Any
    if variable in env:
        where, raw = variable, env[variable].split(",")
    else:
        where, raw = f"{toml.origin}: searxng_{what}", toml.table.get(f"searxng_{what}", [])
    if isinstance(raw, str):
        raw = raw.split(",")
    if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
        raise SettingsError(f"{where} must be a list of names")
    names = [item.strip() for item in raw if item.strip()]
    for name in names:
        # A comma would split one name in two on SearXNG's side.
        if not _SEARXNG_NAME.fullmatch(name):
            raise SettingsError(f"{where}: {name!r} is not a SearXNG {what[:-1]} name")
    return tuple(dict.fromkeys(names))


def _language(toml: _Source, env: Mapping[str, str]) -> str:
    """``searxng_language``: the search language SearXNG is asked for (empty: its own)."""
    if "TIGRESS_SEARXNG_LANGUAGE" in env:
        where, value = "TIGRESS_SEARXNG_LANGUAGE", env["TIGRESS_SEARXNG_LANGUAGE"].strip()
    else:
        where, value = f"{toml.origin}: searxng_language", toml.str_("searxng_language", "")
    if value and not _SEARXNG_LANGUAGE.fullmatch(value):
        raise SettingsError(f"{where}: {value!r} is not a language (en, de-DE, all, auto)")
    return value


#: The TOML file's keys: the top level's, and each table's (``engines``: each entry's).
#: The ``[fetcher]`` table is the fetcher process's own section of a shared file (it
#: checks it itself).
TOP_KEYS = frozenset(
    {
        "listen",
        "engine_url",
        "api_keys",
        "api_keys_file",
        "max_body_bytes",
        "media_urls",
        "searxng_url",
        "searxng_results",
        "searxng_categories",
        "searxng_language",
        "searxng_engines",
        "allowed_origins",
        "trusted_proxies",
        "fetcher_target",
        "fetcher",
        "engines",
        "budgets",
        "timeouts",
        "limits",
        "mcp",
    }
)
TABLE_KEYS: dict[str, frozenset[str]] = {
    "engines": frozenset({"url", "models", "api_key_env", "name"}),
    "budgets": frozenset({"searches", "pages"}),
    "timeouts": frozenset(f.name for f in fields(Timeouts)),
    "limits": frozenset(
        {
            "max_chats",
            "max_connections",
            "chats_per_key",
            "requests_per_minute_per_key",
            "connections_per_client",
            "max_answer_bytes",
        }
    ),
    "mcp": frozenset(
        {
            "sessions_per_key",
            "max_sessions",
            "session_idle",
            "allowed_origins",
            "sessions_per_client",
        }
    ),
}
#: The variables the gateway reads (``TIGRESS_FETCHER_*`` are the fetcher's: it names
#: its own unknown ones).
VARIABLES = frozenset(
    {
        "TIGRESS_CONFIG",
        "TIGRESS_ENGINE_URL",
        "TIGRESS_SEARXNG_URL",
        "TIGRESS_API_KEYS",
        "TIGRESS_API_KEYS_FILE",
        "TIGRESS_LISTEN",
        "TIGRESS_FETCHER",
        "TIGRESS_MCP_ALLOWED_ORIGINS",
        "TIGRESS_ALLOWED_ORIGINS",
        "TIGRESS_TRUSTED_PROXIES",
        "TIGRESS_SEARXNG_CATEGORIES",
        "TIGRESS_SEARXNG_LANGUAGE",
        "TIGRESS_SEARXNG_ENGINES",
    }
)


def unknown_keys(table: Mapping[str, Any]) -> list[str]:
    """Every key of the TOML file that no setting reads, with its likely meaning.

    The top level and each known table are checked (``[fetcher]`` is the fetcher's), so
    one start-up names every typo of the file at once (``fetcher.names``).

    Returns:
        One description per unknown key (``'budgets.serches' (did you mean
        'budgets.searches'?)``), in the file's order.
    """
    found = unknown_names(table, TOP_KEYS)
    for name, allowed in TABLE_KEYS.items():
        value = table.get(name)
        entries = value if name == "engines" and isinstance(value, list) else [value]
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict):
                continue  # a wrong type is named by the setting's own check
            prefix = f"engines[{i}]." if name == "engines" else f"{name}."
            found += unknown_names(
                [prefix + key for key in entry], [prefix + key for key in allowed]
            )
    return found


def unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """The ``TIGRESS_*`` variables nothing reads (the fetcher's ``TIGRESS_FETCHER_*``
    aside), each with its likely meaning, sorted; the gateway logs them as a warning
    (the environment is shared with the operator's shell, so it does not stop)."""
    given = sorted(
        name
        for name in environ
        if name.startswith("TIGRESS_") and not name.startswith("TIGRESS_FETCHER_")
    )
    return unknown_names(given, VARIABLES)


def _mcp(toml: _Source, env: Mapping[str, str], *, keyed: bool) -> McpSettings:
    table = toml.sub(
        "mcp",
        {
            "sessions_per_key",
            "max_sessions",
            "session_idle",
            "allowed_origins",
            "sessions_per_client",
        },
    )
    origins = _origins(
        env, table.table, "TIGRESS_MCP_ALLOWED_ORIGINS", "mcp.allowed_origins", toml.origin
    )
    return McpSettings(
        sessions_per_key=table.int_(
            "sessions_per_key", KEYED_MCP_SESSIONS_PER_KEY if keyed else 0, minimum=0
        ),
        max_sessions=table.int_("max_sessions", McpSettings.max_sessions, minimum=1),
        session_idle=table.float_("session_idle", McpSettings.session_idle),
        allowed_origins=origins,
        sessions_per_client=table.int_(
            "sessions_per_client", McpSettings.sessions_per_client, minimum=1
        ),
    )


def _origins(
    env: Mapping[str, str], table: dict[str, Any], variable: str, name: str, origin: str
) -> tuple[str, ...]:
    """A list of origins from ``variable`` (comma-separated) or the TOML key ``name``."""
    if env.get(variable) is not None:
        where = variable
        raw: Any = [o.strip() for o in env[variable].split(",") if o.strip()]
    else:
        where = f"{origin}: {name}"
        raw = table.get(name.rpartition(".")[2], [])
    if not isinstance(raw, list) or not all(isinstance(o, str) for o in raw):
        raise SettingsError(f"{where} must be a list of origins")
    return tuple(_check_origin(o, where) for o in raw)


def _proxies(env: Mapping[str, str], table: dict[str, Any], origin: str) -> tuple[str, ...]:
    """``trusted_proxies``: addresses or networks (``127.0.0.1``, ``10.0.0.0/8``)."""
    if env.get("TIGRESS_TRUSTED_PROXIES") is not None:
        where = "TIGRESS_TRUSTED_PROXIES"
        raw: Any = [p.strip() for p in env[where].split(",") if p.strip()]
    else:
        where = f"{origin}: trusted_proxies"
        raw = table.get("trusted_proxies", [])
    if not isinstance(raw, list) or not all(isinstance(p, str) for p in raw):
        raise SettingsError(f"{where} must be a list of addresses or networks")
    for entry in raw:
        try:
            ipaddress.ip_network(entry.strip(), strict=False)
        except ValueError as exc:
            raise SettingsError(
                f"{where}: {entry!r} is not an address or a network (10.0.0.0/8)"
            ) from exc
    return tuple(p.strip() for p in raw)


def _check_origin(value: str, where: str) -> str:
    """An origin as browsers send it: ``scheme://host[:port]``, nothing after."""
    parts = urlsplit(value)
    try:
        _ = parts.port
    except ValueError as exc:
        raise SettingsError(f"{where}: {value!r} has a bad port") from exc
    if (
        parts.scheme not in {"http", "https"}
        or not parts.hostname
        or parts.path
        or parts.query
        or parts.fragment
        or "@" in parts.netloc
    ):
        raise SettingsError(f"{where}: {value!r} is not an origin (scheme://host[:port])")
    return value


def _fetcher_listen(table: dict[str, Any]) -> str | None:
    """The fetcher's own ``[fetcher] listen`` in a shared file: where to find it by default."""
    section = table.get("fetcher")
    listen = section.get("listen") if isinstance(section, dict) else None
    return listen if isinstance(listen, str) and listen else None


def parse_listen(value: str, where: str) -> tuple[str, int]:
    """Split ``host:port`` (``[v6]:port`` for IPv6) and check both parts.

    Raises:
        SettingsError: The value is not a host and a port in 0-65535.
    """
    host, sep, port_text = value.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise SettingsError(f"{where}: {value!r} is not host:port")
    return host, int(port_text)


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _engines(
    table: dict[str, Any], env: Mapping[str, str], toml: _Source
) -> tuple[EngineSettings, ...]:
    engines: list[EngineSettings] = []
    env_url = env.get("TIGRESS_ENGINE_URL")
    default_url = env_url or toml.str_("engine_url", "")
    extra = table.get("engines", [])
    if not isinstance(extra, list):
        raise SettingsError(f"{toml.origin}: engines must be an array of tables ([[engines]])")
    if default_url or not extra:
        url = default_url or DEFAULT_ENGINE_URL
        _check_http_url(url, "TIGRESS_ENGINE_URL" if env_url else "engine_url")
        engines.append(EngineSettings(url=url.rstrip("/")))
    for i, entry in enumerate(extra):
        where = f"{toml.origin}: engines[{i}]"
        if not isinstance(entry, dict):
            raise SettingsError(f"{where} must be a table")
        unknown = set(entry) - {"url", "models", "api_key_env", "name"}
        if unknown:
            raise SettingsError(f"{where}: unknown setting {sorted(unknown)[0]!r}")
        entry_url = entry.get("url")
        if not isinstance(entry_url, str):
            raise SettingsError(f"{where}.url must be a string")
        _check_http_url(entry_url, f"{where}.url")
        models = entry.get("models", [])
        if not isinstance(models, list) or not all(isinstance(m, str) and m for m in models):
            raise SettingsError(f"{where}.models must be a list of names")
        key_env = entry.get("api_key_env")
        key: str | None = None
        if key_env is not None:
            if not isinstance(key_env, str) or not env.get(key_env):
                raise SettingsError(f"{where}.api_key_env names no set environment variable")
            key = env[key_env]
        name = entry.get("name", "")
        if not isinstance(name, str):
            raise SettingsError(f"{where}.name must be a string")
        engines.append(
            EngineSettings(url=entry_url.rstrip("/"), models=tuple(models), api_key=key, name=name)
        )
    return tuple(engines)


def _api_keys(table: dict[str, Any], env: Mapping[str, str], toml: _Source) -> tuple[str, ...]:
    if env.get("TIGRESS_API_KEYS"):
        keys = [k.strip() for k in env["TIGRESS_API_KEYS"].split(",")]
        where = "TIGRESS_API_KEYS"
    elif env.get("TIGRESS_API_KEYS_FILE") or "api_keys_file" in table:
        path = env.get("TIGRESS_API_KEYS_FILE") or toml.str_("api_keys_file", "")
        where = "TIGRESS_API_KEYS_FILE" if env.get("TIGRESS_API_KEYS_FILE") else "api_keys_file"
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise SettingsError(f"{where}: cannot read {path!r} ({exc.strerror})") from exc
        keys = [line.strip() for line in text.splitlines() if not line.strip().startswith("#")]
    else:
        raw = table.get("api_keys", [])
        where = "api_keys"
        if not isinstance(raw, list) or not all(isinstance(k, str) for k in raw):
            raise SettingsError(f"{toml.origin}: api_keys must be a list of strings")
        keys = [k.strip() for k in raw]
    keys = [k for k in keys if k]
    for key in keys:
        # Short keys are guessable; a key with spaces cannot be sent as a Bearer token.
        if len(key) < 16 or any(c.isspace() for c in key):
            raise SettingsError(f"{where}: every key needs 16 or more characters and no spaces")
    return tuple(keys)


def _check_http_url(url: str, where: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise SettingsError(f"{where}: {url!r} is not an http(s) URL")
    try:
        _ = parts.port
    except ValueError as exc:
        raise SettingsError(f"{where}: {url!r} has a bad port") from exc


def _read_toml(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as exc:
        raise SettingsError(f"TIGRESS_CONFIG: cannot read {path!r} ({exc.strerror})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"TIGRESS_CONFIG: {path!r} is not valid TOML ({exc})") from exc


class _Source:
    """Typed reads from one TOML table, with errors naming the setting."""

    def __init__(self, table: dict[str, Any], origin: str, prefix: str = "") -> None:
        self.table = table
        self.origin = origin
        self.prefix = prefix

    def _name(self, key: str) -> str:
        return f"{self.origin}: {self.prefix}{key}"

    def sub(self, key: str, allowed: set[str]) -> _Source:
        value = self.table.get(key, {})
        if not isinstance(value, dict):
            raise SettingsError(f"{self._name(key)} must be a table")
        for name in value:
            if name not in allowed:
                raise SettingsError(f"{self._name(key)}: unknown setting {name!r}")
        return _Source(value, self.origin, f"{self.prefix}{key}.")

    def str_(self, key: str, default: str) -> str:
        value = self.table.get(key, default)
        if not isinstance(value, str):
            raise SettingsError(f"{self._name(key)} must be a string")
        return value

    def int_(self, key: str, default: int, *, minimum: int) -> int:
        value = self.table.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise SettingsError(f"{self._name(key)} must be an integer of at least {minimum}")
        return value

    def float_(self, key: str, default: float) -> float:
        value = self.table.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise SettingsError(f"{self._name(key)} must be a positive number of seconds")
        return float(value)
