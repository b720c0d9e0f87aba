"""One settings mechanism for both processes: typed fields read from a TOML file and the
environment, each problem named by where it came from.

A process declares its settings as a table of :class:`Field` by dotted TOML name
(``budgets.searches``; the fetcher's names are those of its ``[fetcher]`` table). The
same rules then hold for both: a variable wins over the file; an integer is refused as a
float, a boolean or text that is not one; bounds are checked at both ends; a list is a
TOML list or comma-separated text in a variable or flag, its items stripped and blanks
dropped; an empty variable is as if unset, except for a list (an empty list). A bad value
is a :class:`Bad` whose message names the file and key, the variable or the flag, the
value (never a secret's) and why: ``tigress.toml: bad value 0 for limits.max_chats: must
be at least 1``. Every unknown key (at every table level) and every unknown variable is
named at once with a "did you mean" (``fetcher.names``).

Pure apart from reading the files a setting names; holds nothing of the fetcher (the
gateway imports it).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import math
import tomllib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

from fetcher.names import unknown_names

T = TypeVar("T")


@dataclasses.dataclass(frozen=True, slots=True)
class Bad:
    """A setting that cannot be used: the message says which, where from, and why."""

    message: str


@dataclasses.dataclass(frozen=True, slots=True)
class Field:
    """One setting: its kind, its bounds, the variable that may give it, its check.

    Attributes:
        kind: ``int``, ``float``, ``str`` or ``list`` (of strings).
        minimum: The smallest value allowed (``above``: only values over it).
        maximum: The largest value allowed.
        above: The minimum itself is refused (a timeout of 0 would be none).
        ceiling: Said after the maximum when a value is over it (why it is what it is).
        choices: The only texts allowed (empty: any).
        items: What a list holds, for the message (``domains``).
        text_in_toml: A list may also be one comma-separated string in the file.
        secret: The value is never repeated in a message (access keys).
        shown: How a message repeats the value (an address without its password);
            None: as it is.
        variable: The environment variable that gives the setting (empty: none).
        check: Turns the typed value into the setting's value, or a :class:`Bad` saying
            why it cannot be one.
        help: The ``serve --<name>`` flag's help text (the fetcher's).
        metavar: The flag's metavar.
    """

    kind: Literal["int", "float", "str", "list"]
    minimum: float | None = None
    maximum: float | None = None
    above: bool = False
    ceiling: str = ""
    choices: tuple[str, ...] = ()
    items: str = "strings"
    text_in_toml: bool = False
    secret: bool = False
    shown: Callable[[object], str] | None = None
    variable: str = ""
    check: Callable[[Any], object] | None = None
    help: str = ""
    metavar: str = "N"


def read_toml(path: Path, named_by: str) -> dict[str, Any] | Bad:
    """The TOML document at ``path``, or a :class:`Bad` naming the file and what named it
    (``TIGRESS_CONFIG``, ``--config``)."""
    try:
        with path.open("rb") as file:
            return tomllib.load(file)
    except OSError as exc:
        return Bad(f"{named_by}: config file {str(path)!r} cannot be read: {exc.strerror}")
    except tomllib.TOMLDecodeError as exc:
        return Bad(f"{named_by}: config file {str(path)!r} is not valid TOML: {exc}")


def convert(field: Field, raw: object, name: str, source: str, *, text: bool) -> object:
    """One raw value (a TOML value, or a variable's or flag's ``text``) as the setting's
    value, or a :class:`Bad` naming ``source`` and ``name``."""
    said = field.shown(raw) if field.shown is not None else repr(raw)
    shown = "" if field.secret else f" {said}"
    value = _typed(field, raw, text=text)
    if isinstance(value, Bad):
        return Bad(f"{source}: bad value{shown} for {name}: {value.message}")
    if field.check is not None:
        value = field.check(value)
        if isinstance(value, Bad):
            return Bad(f"{source}: bad value{shown} for {name}: {value.message}")
    return value


def _typed(field: Field, raw: object, *, text: bool) -> object:
    """``raw`` as the field's kind within its bounds, or a :class:`Bad` saying why not."""
    if field.kind == "list":
        if isinstance(raw, str) and (text or field.text_in_toml):
            entries: list[object] = list(raw.split(","))
        elif isinstance(raw, list):
            entries = raw
        else:
            entries = [None]
        if not all(isinstance(entry, str) for entry in entries):
            other = " (or comma-separated text)" if field.text_in_toml else ""
            return Bad(f"expected a list of {field.items}{other}")
        return tuple(entry.strip() for entry in entries if isinstance(entry, str) and entry.strip())
    if field.kind == "str":
        if not isinstance(raw, str):
            return Bad("expected a string")
        if field.choices and raw not in field.choices:
            return Bad(f"expected one of {', '.join(field.choices)}")
        return raw
    whole = field.kind == "int"
    wanted = "an integer" if whole else "a number"
    if isinstance(raw, str) and text:
        try:
            raw = int(raw) if whole else float(raw)
        except ValueError:
            return Bad(f"expected {wanted}")
    if (
        isinstance(raw, bool)
        or not isinstance(raw, int | float)
        or (whole and isinstance(raw, float))
    ):
        return Bad(f"expected {wanted}")
    if not math.isfinite(raw):
        return Bad("expected a finite number")
    low, high = field.minimum, field.maximum
    if low is not None and (raw <= low if field.above else raw < low):
        return Bad(f"must be {'more than' if field.above else 'at least'} {_bound(low, whole)}")
    if high is not None and raw > high:
        note = f" ({field.ceiling})" if field.ceiling else ""
        return Bad(f"must be at most {_bound(high, whole)}{note}")
    return int(raw) if whole else float(raw)


def _bound(value: float, whole: bool) -> str:
    """A bound as people read it: whole numbers in full (67108864, not 6.71089e+07)."""
    return str(int(value)) if whole else f"{value:g}"


def read(
    fields: Mapping[str, Field],
    table: Mapping[str, Any],
    origin: str,
    environ: Mapping[str, str],
    *,
    prefix: str = "",
) -> dict[str, object] | Bad:
    """The settings given by the file's ``table`` or the environment, by dotted name.

    Args:
        fields: The settings, by dotted name within ``table``.
        table: The TOML table they are read from.
        origin: How messages name the file (its path, ``tigress.toml [fetcher]``).
        environ: The environment; a field's variable wins over the file.
        prefix: Put before each name in messages (``engines[0].``).

    Returns:
        The converted value of every setting that was given (a setting not given keeps
        its default), or the first :class:`Bad`.
    """
    values: dict[str, object] = {}
    for name, field in fields.items():
        variable = _variable(field, environ)
        if variable is not None:
            value = convert(field, variable, name, field.variable, text=True)
        else:
            found = _lookup(table, name, origin, prefix)
            if found is None:
                continue
            if isinstance(found, Bad):
                return found
            value = convert(field, found[0], prefix + name, origin, text=False)
        if isinstance(value, Bad):
            return value
        values[name] = value
    return values


def _lookup(
    table: Mapping[str, Any], name: str, origin: str, prefix: str
) -> tuple[object] | Bad | None:
    """The file's value of the dotted ``name``: found, a table that is not one, or absent."""
    *tables, key = name.split(".")
    for depth, part in enumerate(tables):
        inner = table.get(part, {})
        if not isinstance(inner, dict):
            return Bad(f"{origin}: [{prefix}{'.'.join(tables[: depth + 1])}] must be a table")
        table = inner
    return (table[key],) if key in table else None


def _variable(field: Field, environ: Mapping[str, str]) -> str | None:
    """The text of the field's variable when it gives the setting: set and not empty, or
    empty for a list (the empty list); else None (the file decides)."""
    text = environ.get(field.variable) if field.variable else None
    return text if text is not None and (text or field.kind == "list") else None


def where(field: Field, name: str, origin: str, environ: Mapping[str, str]) -> str:
    """Where a setting's value came from, for a message about several settings at once:
    its variable when that gave it (the rule of :func:`read`), else the file and key."""
    return field.variable if _variable(field, environ) is not None else f"{origin}: {name}"


def unknown_keys(
    table: Mapping[str, Any], names: Iterable[str], *, open_tables: Iterable[str] = ()
) -> list[str]:
    """Every key of ``table`` that no setting of ``names`` reads, at every table level,
    each with the key it likely meant (``'budgets.serches' (did you mean
    'budgets.searches'?)``), in the file's order.

    Args:
        table: The TOML document (or table).
        names: The dotted names read; ``engines[].url`` for a key of each entry of an
            array of tables.
        open_tables: Tables whose keys are not checked here (another process's).
    """
    return _unknown(table, list(names), "", tuple(open_tables))


def _unknown(
    table: Mapping[str, Any], names: list[str], prefix: str, skip: tuple[str, ...]
) -> list[str]:
    heads = dict.fromkeys(name.partition(".")[0] for name in names)
    found = unknown_names(
        [prefix + key for key in table], [prefix + h.removesuffix("[]") for h in heads]
    )
    for head in heads:
        key = head.removesuffix("[]")
        inner = [name.partition(".")[2] for name in names if name.startswith(head + ".")]
        if not inner or prefix + key in skip:
            continue
        value = table.get(key)
        entries = value if head.endswith("[]") and isinstance(value, list) else [value]
        for i, entry in enumerate(entries):
            if isinstance(entry, dict):  # a wrong type is named by the setting's own check
                at = f"{prefix}{key}[{i}]." if head.endswith("[]") else f"{prefix}{key}."
                found += _unknown(entry, inner, at, skip)
    return found


def unknown_variables(
    environ: Mapping[str, str], known: Iterable[str], *, prefix: str, others: str = ""
) -> list[str]:
    """The variables starting with ``prefix`` that are not ``known`` (those starting with
    ``others`` aside: another process's), each with its likely meaning, sorted."""
    given = sorted(
        name
        for name in environ
        if name.startswith(prefix) and not (others and name.startswith(others))
    )
    return unknown_names(given, known)


def problem(unknown: list[str], origin: str, where: str = "") -> Bad | None:
    """The one message naming every unknown key of a file, or ``None`` when none is."""
    if not unknown:
        return None
    plural = "s" if len(unknown) > 1 else ""
    return Bad(f"{origin}: unknown setting{plural}{where}: {', '.join(unknown)}")


def build(
    make: Callable[..., T],
    values: Mapping[str, object],
    prefix: str = "",
    defaults: Mapping[str, object] | None = None,
    **explicit: object,
) -> T:
    """``make`` (a settings dataclass) from the values given under ``prefix`` (a table's
    ``budgets.``) that are its fields: over ``defaults``, under ``explicit``; what none
    gives keeps the dataclass default."""
    names = getattr(make, "__dataclass_fields__")  # noqa: B009
    given = {
        name.removeprefix(prefix): value
        for name, value in values.items()
        if name.startswith(prefix) and name.removeprefix(prefix) in names
    }
    return make(**(dict(defaults or {}) | given | explicit))


@dataclasses.dataclass(frozen=True, slots=True)
class Listen:
    """One address to listen on.

    Attributes:
        target: The address as gRPC takes it (``unix:/abs/path`` or ``host:port``).
        unix_path: The socket's path for a Unix listener, else ``None``.
        host: The host of a TCP listener (an IP address or a name), else ``None``.
        port: The port of a TCP listener, else ``None``.
    """

    target: str
    unix_path: Path | None = None
    host: str | None = None
    port: int | None = None

    @property
    def is_loopback(self) -> bool:
        """True for a Unix socket or a TCP address on the loopback interface."""
        return self.unix_path is not None or is_loopback(self.host or "")


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


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
    return Listen(target=f"{shown}:{int(port_text)}", host=host, port=int(port_text))
