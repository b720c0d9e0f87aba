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

import dataclasses
import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from fetcher import config
from fetcher.client import NO_LISTS, DomainLists, parse_domains
from fetcher.config import Bad, Field, build, convert, read, where

T = TypeVar("T")

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
    origin = env.get("TIGRESS_CONFIG", "")
    if origin:
        table = _checked(config.read_toml(Path(origin), "TIGRESS_CONFIG"))
    unknown = config.problem(unknown_keys(table), origin)
    if unknown is not None:
        raise SettingsError(unknown.message)
    others = {name: field for name, field in FIELDS.items() if name not in _KEY_SOURCES}
    values = _checked(read(others, table, origin, env))
    listen = values.get("listen", config.parse_listen(DEFAULT_LISTEN))
    assert isinstance(listen, config.Listen)
    keys = _checked(_api_keys(table, origin, env))
    if not keys and not listen.is_loopback:
        raise SettingsError(
            f"{where(FIELDS['listen'], 'listen', origin, env)}: refusing to listen on "
            f"non-loopback address {listen.host!r} without access keys (set TIGRESS_API_KEYS "
            "or TIGRESS_API_KEYS_FILE)"
        )
    keyed = {
        "chats_per_key": KEYED_CHATS_PER_KEY,
        "requests_per_minute_per_key": KEYED_REQUESTS_PER_MINUTE,
    }
    fetcher = values.get("fetcher_target", values.get("fetcher.listen", (DEFAULT_FETCHER,)))
    if not fetcher:
        name = where(FIELDS["fetcher_target"], "fetcher_target", origin, env)
        raise SettingsError(f"{name}: no fetcher target given")
    return build(
        Settings,
        values,
        listen_host=listen.host,
        listen_port=listen.port,
        engines=_engines(table, env, origin, values.get("engine_url")),
        fetcher=fetcher,
        api_keys=keys,
        budgets=build(Budgets, values, "budgets."),
        timeouts=build(Timeouts, values, "timeouts."),
        limits=build(Limits, values, "limits.", keyed if keys else {}),
        mcp=build(
            McpSettings,
            values,
            "mcp.",
            {"sessions_per_key": KEYED_MCP_SESSIONS_PER_KEY if keys else 0},
        ),
        allow_media_urls=values.get("media_urls") == "allow",
        source_lists=build(
            DomainLists,
            {
                "deny": values.get("fetcher.deny_domains", ()),
                "allow": values.get("fetcher.allow_domains", ()),
            },
        ),
    )


def _checked(value: T | Bad) -> T:
    """The value, or the :class:`SettingsError` its :class:`~fetcher.config.Bad` says."""
    if isinstance(value, Bad):
        raise SettingsError(value.message)
    return value


#: Where the access keys may come from after ``TIGRESS_API_KEYS``, in the order they win.
_KEY_SOURCES = ("api_keys_file", "api_keys")


def _api_keys(
    table: Mapping[str, Any], origin: str, env: Mapping[str, str]
) -> tuple[str, ...] | Bad:
    """The access keys of the first source that gives any: ``TIGRESS_API_KEYS``, then
    ``api_keys_file`` (``TIGRESS_API_KEYS_FILE`` over the file's), then ``api_keys``.

    # Security
    Rule: a source that is not used is neither read nor checked, so the variable wins
    over the file as every variable does (a keys file the file still names, removed once
    the keys moved to the environment, does not stop start-up). A source that is used is
    checked in full, and no key is repeated in a message. Proved by
    ``tests/gateway/test_settings.py::test_the_keys_variable_wins_and_the_files_keys_are_not_read``.
    """
    found: object = ()
    if env.get("TIGRESS_API_KEYS"):
        found = convert(_KEYS, env["TIGRESS_API_KEYS"], "api_keys", "TIGRESS_API_KEYS", text=True)
    else:
        for name in _KEY_SOURCES:
            given = read({name: FIELDS[name]}, table, origin, env)
            if isinstance(given, Bad) or name in given:
                found = given if isinstance(given, Bad) else given[name]
                break
    assert isinstance(found, tuple | Bad)
    return found


def _host_port(value: str) -> config.Listen | Bad:
    """``host:port`` (``[v6]:port`` for IPv6) as the gateway listens on it."""
    try:
        listen = config.parse_listen(value)
    except ValueError as exc:
        return Bad(str(exc))
    return Bad("expected HOST:PORT") if listen.unix_path is not None else listen


def _http_url(url: str) -> str | Bad:
    """An ``http(s)://host[:port]/...`` address."""
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        return Bad("not an http(s) URL")
    try:
        _ = parts.port
    except ValueError:
        return Bad("bad port")
    return url


def _without_password(raw: object) -> str:
    """An address as a message repeats it: any user name and password left out.

    # Security
    Rule: a settings message never repeats the credentials an address carries (they
    reach the journal), not even a password holding ``/``, ``?`` or ``#``, with which the
    address parses without credentials (and is refused for its port): then all between
    ``//`` and the last ``@`` is left out. Proved by
    ``tests/gateway/test_settings.py::test_a_bad_address_is_named_without_its_password``.
    """
    if not isinstance(raw, str) or "@" not in raw:
        return repr(raw)
    try:
        parts = urlsplit(raw)
    except ValueError:
        return "(an address with credentials)"
    if "@" in parts.netloc:
        return repr(urlunsplit(parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2])))
    scheme, slashes, rest = raw.partition("//")
    if not slashes or "@" not in rest:
        return repr(raw)
    return repr(f"{scheme}//***@{rest.rpartition('@')[2]}")


def _origins(values: tuple[str, ...]) -> tuple[str, ...] | Bad:
    """Origins as browsers send them: ``scheme://host[:port]``, nothing after."""
    for value in values:
        parts = urlsplit(value)
        try:
            _ = parts.port
        except ValueError:
            return Bad(f"{value!r} has a bad port")
        if (
            parts.scheme not in {"http", "https"}
            or not parts.hostname
            or parts.path
            or parts.query
            or parts.fragment
            or "@" in parts.netloc
        ):
            return Bad(f"{value!r} is not an origin (scheme://host[:port])")
    return values


def _networks(values: tuple[str, ...]) -> tuple[str, ...] | Bad:
    """Addresses or networks (``127.0.0.1``, ``10.0.0.0/8``)."""
    for value in values:
        try:
            ipaddress.ip_network(value, strict=False)
        except ValueError:
            return Bad(f"{value!r} is not an address or a network (10.0.0.0/8)")
    return values


def _domains(values: tuple[str, ...]) -> tuple[str, ...] | Bad:
    """The operator's lists, normalised by the fetcher's own function."""
    parsed = parse_domains(values)
    return parsed if isinstance(parsed, tuple) else Bad(parsed.detail)


def _keys(keys: tuple[str, ...]) -> tuple[str, ...] | Bad:
    # Short keys are guessable; a key with spaces cannot be sent as a Bearer token.
    if any(len(key) < 16 or any(c.isspace() for c in key) for key in keys):
        return Bad("every key needs 16 or more characters and no spaces")
    return keys


def _keys_file(path: str) -> tuple[str, ...] | Bad:
    """The keys of a file, one a line (``#`` starts a comment line)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        return Bad(f"cannot be read ({exc.strerror})")
    lines = (line.strip() for line in text.splitlines())
    return _keys(tuple(line for line in lines if line and not line.startswith("#")))


#: SearXNG's names of categories and engines: letters, digits, spaces (engine names such
#: as "google news"), "-", "_", ".".
_SEARXNG_NAME = re.compile(r"[\w .-]{1,64}")
#: A language as SearXNG takes it: ``all``, ``auto``, ``en``, ``en-US``, ``zh-Hans-CN``...
_SEARXNG_LANGUAGE = re.compile(r"[A-Za-z]{2,8}(?:-[A-Za-z0-9]{1,8}){0,2}")


def _searxng_names(names: tuple[str, ...]) -> tuple[str, ...] | Bad:
    """Names SearXNG knows (it ignores others), each once."""
    for name in names:
        # A comma would split one name in two on SearXNG's side.
        if not _SEARXNG_NAME.fullmatch(name):
            return Bad(f"{name!r} is not a SearXNG name")
    return tuple(dict.fromkeys(names))


def _language(value: str) -> str | Bad:
    """The search language SearXNG is asked for (empty: its own)."""
    value = value.strip()
    if value and not _SEARXNG_LANGUAGE.fullmatch(value):
        return Bad("not a language (en, de-DE, all, auto)")
    return value


_KEYS = Field("list", items="keys", secret=True, check=_keys)
_URL = Field("str", check=_http_url, shown=_without_password)
_SECONDS = Field("float", 0, above=True)
_ORIGINS = Field("list", items="origins", check=_origins)
_NAMES = Field("list", items="names", text_in_toml=True, check=_searxng_names)
_DOMAINS = Field("list", items="domains", text_in_toml=True, check=_domains)

#: Every setting of the TOML file by dotted name, with the variable that overrides it.
#: ``fetcher.*`` are keys of the fetcher's own ``[fetcher]`` table that the gateway reads
#: too (it checks that table itself): the operator's lists (``deny_domains`` and
#: ``allow_domains`` belong to the fetcher, which enforces them on every address it opens;
#: the gateway drops search results under them, so one list is written once), and where
#: it listens (where the gateway finds it by default).
FIELDS: dict[str, Field] = {
    "listen": Field("str", variable="TIGRESS_LISTEN", check=_host_port),
    "engine_url": dataclasses.replace(_URL, variable="TIGRESS_ENGINE_URL"),
    "api_keys": _KEYS,
    "api_keys_file": Field("str", variable="TIGRESS_API_KEYS_FILE", check=_keys_file),
    "max_body_bytes": Field("int", 1024),
    "media_urls": Field("str", choices=("refuse", "allow")),
    "searxng_url": dataclasses.replace(_URL, variable="TIGRESS_SEARXNG_URL"),
    "searxng_results": Field("int", 1),
    "searxng_categories": dataclasses.replace(_NAMES, variable="TIGRESS_SEARXNG_CATEGORIES"),
    "searxng_language": Field("str", variable="TIGRESS_SEARXNG_LANGUAGE", check=_language),
    "searxng_engines": dataclasses.replace(_NAMES, variable="TIGRESS_SEARXNG_ENGINES"),
    "allowed_origins": dataclasses.replace(_ORIGINS, variable="TIGRESS_ALLOWED_ORIGINS"),
    "trusted_proxies": Field(
        "list", items="addresses or networks", variable="TIGRESS_TRUSTED_PROXIES", check=_networks
    ),
    "fetcher_target": Field("list", items="targets", text_in_toml=True, variable="TIGRESS_FETCHER"),
    "budgets.searches": Field("int", 0),
    "budgets.pages": Field("int", 0),
    **{f"timeouts.{each.name}": _SECONDS for each in fields(Timeouts)},
    "limits.max_chats": Field("int", 1),
    "limits.max_connections": Field("int", 1),
    "limits.chats_per_key": Field("int", 0),
    "limits.requests_per_minute_per_key": Field("int", 0),
    "limits.connections_per_client": Field("int", 1),
    "limits.max_answer_bytes": Field("int", 64 * 1024),
    "mcp.sessions_per_key": Field("int", 0),
    "mcp.max_sessions": Field("int", 1),
    "mcp.session_idle": _SECONDS,
    "mcp.allowed_origins": dataclasses.replace(_ORIGINS, variable="TIGRESS_MCP_ALLOWED_ORIGINS"),
    "mcp.sessions_per_client": Field("int", 1),
    "fetcher.listen": Field("list", items="addresses", text_in_toml=True),
    "fetcher.deny_domains": dataclasses.replace(_DOMAINS, variable="TIGRESS_FETCHER_DENY_DOMAINS"),
    "fetcher.allow_domains": dataclasses.replace(
        _DOMAINS, variable="TIGRESS_FETCHER_ALLOW_DOMAINS"
    ),
}
#: The keys of each ``[[engines]]`` entry.
ENGINE_FIELDS: dict[str, Field] = {
    "url": _URL,
    "models": Field("list", items="names"),
    "api_key_env": Field("str"),
    "name": Field("str"),
}
_READ = [*FIELDS, *(f"engines[].{key}" for key in ENGINE_FIELDS)]

#: The TOML file's keys: the top level's, and each table's (``engines``: each entry's).
TOP_KEYS = frozenset(name.partition(".")[0].removesuffix("[]") for name in _READ)
TABLE_KEYS: dict[str, frozenset[str]] = {
    table: frozenset(name.partition(".")[2] for name in _READ if name.startswith(f"{table}"))
    for table in ("engines", "budgets", "timeouts", "limits", "mcp")
}
#: The variables the gateway reads (``TIGRESS_FETCHER_*`` are the fetcher's: it names
#: its own unknown ones).
VARIABLES = frozenset(
    {"TIGRESS_CONFIG", "TIGRESS_API_KEYS"} | {f.variable for f in FIELDS.values() if f.variable}
)


def unknown_keys(table: Mapping[str, Any]) -> list[str]:
    """Every key of the TOML file that no setting reads, with its likely meaning.

    The top level and each known table are checked (``[fetcher]`` is the fetcher's), so
    one start-up names every typo of the file at once (``fetcher.config``).

    Returns:
        One description per unknown key (``'budgets.serches' (did you mean
        'budgets.searches'?)``), in the file's order.
    """
    return config.unknown_keys(table, _READ, open_tables=("fetcher",))


def unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """The ``TIGRESS_*`` variables nothing reads (the fetcher's ``TIGRESS_FETCHER_*``
    aside), each with its likely meaning, sorted; the gateway logs them as a warning
    (the environment is shared with the operator's shell, so it does not stop)."""
    return config.unknown_variables(
        environ, VARIABLES, prefix="TIGRESS_", others="TIGRESS_FETCHER_"
    )


#: Whether a host names only this machine (``localhost``, 127.0.0.0/8, ``::1``).
is_loopback = config.is_loopback


def _engines(
    table: Mapping[str, Any], env: Mapping[str, str], origin: str, default_url: object
) -> tuple[EngineSettings, ...]:
    """The default engine (``engine_url``) unless only ``[[engines]]`` are given, then those."""
    engines: list[EngineSettings] = []
    extra = table.get("engines", [])
    if not isinstance(extra, list):
        raise SettingsError(f"{origin}: engines must be an array of tables ([[engines]])")
    if default_url or not extra:
        engines.append(EngineSettings(url=str(default_url or DEFAULT_ENGINE_URL).rstrip("/")))
    for i, entry in enumerate(extra):
        at = f"{origin}: engines[{i}]"
        if not isinstance(entry, dict):
            raise SettingsError(f"{at} must be a table")
        values = _checked(read(ENGINE_FIELDS, entry, origin, {}, prefix=f"engines[{i}]."))
        url, key_env = values.get("url"), values.get("api_key_env")
        if not isinstance(url, str):
            raise SettingsError(f"{at}.url must be a string")
        if key_env is not None and not env.get(str(key_env)):
            raise SettingsError(f"{at}.api_key_env names no set environment variable")
        key = env[str(key_env)] if key_env is not None else None
        engines.append(build(EngineSettings, values, url=url.rstrip("/"), api_key=key))
    return tuple(engines)
