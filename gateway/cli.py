"""The gateway's command line: serve (the default), ``keygen``, ``--help``, ``--version``.

``tigress-gateway`` (or ``python -m gateway``) with no command serves the gateway; its
settings come from ``TIGRESS_*`` variables and the TOML file ``TIGRESS_CONFIG`` names, not
from flags (README: Settings). ``keygen`` makes an access key: it prints it, and appends
it to a keys file (``api_keys_file``, one key a line) or to the ``TIGRESS_API_KEYS=`` line
of an environment file (systemd's ``/etc/tigress/gateway.env``) when told to.

Parsing and key making import nothing of the server, so ``--help``, ``--version`` and
``keygen`` answer at once and never start it.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import secrets
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

#: Random bytes per key: 256 bits, written as 43 URL-safe characters (no spaces, above
#: the 16 characters `gateway.settings` requires).
KEY_BYTES = 32
KEYS_VARIABLE = "TIGRESS_API_KEYS"

_DESCRIPTION = """\
Tigress gateway: the OpenAI-compatible chat API, the chat page, /mcp and the Web tool loop.

Without a command it serves. Settings come from the environment and a TOML file, not flags:
  TIGRESS_CONFIG       the TOML file (engines, budgets, limits, [fetcher])
  TIGRESS_LISTEN       where to serve (default 127.0.0.1:8000; TOML: listen)
  TIGRESS_ENGINE_URL   the engine's OpenAI base URL (default http://127.0.0.1:8080/v1)
  TIGRESS_SEARXNG_URL  SearXNG (default http://127.0.0.1:8888)
  TIGRESS_FETCHER      the fetcher's gRPC target (default unix:run/fetcher.sock)
  TIGRESS_API_KEYS     access keys, comma-separated (or TIGRESS_API_KEYS_FILE)
The full list: docs/settings.md. Exit status 2: a bad setting (the message names it).
"""


@dataclass(frozen=True)
class Command:
    """What the command line asked for.

    Attributes:
        name: ``serve`` or ``keygen``.
        keys_file: ``keygen``: the keys file to append the key to, if any.
        env_file: ``keygen``: the environment file whose ``TIGRESS_API_KEYS`` gets the key.
    """

    name: str
    keys_file: Path | None = None
    env_file: Path | None = None


def version() -> str:
    """The installed distribution's version (``unknown`` when run from an uninstalled tree)."""
    try:
        return importlib.metadata.version("tigress")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def program_name(argv0: str) -> str:
    """What usage lines call the program: the console script, or ``python -m gateway``."""
    name = Path(argv0).name
    return name if name.startswith("tigress-") else "python -m gateway"


def build_parser(prog: str) -> argparse.ArgumentParser:
    """The gateway's argument parser."""
    parser = argparse.ArgumentParser(
        prog=prog, description=_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    serve = commands.add_parser("serve", help="serve the gateway (what no command does)")
    serve.set_defaults(parser=serve)
    keygen = commands.add_parser(
        "keygen",
        help="make an access key, print it, and optionally add it to a keys or env file",
        description="Make a random access key (256 bits) and print it on stdout.",
    )
    keygen.set_defaults(parser=keygen)
    where = keygen.add_mutually_exclusive_group()
    where.add_argument(
        "--keys-file",
        type=Path,
        metavar="PATH",
        help="append it to this keys file (api_keys_file: one key a line; made 0600)",
    )
    where.add_argument(
        "--env-file",
        type=Path,
        metavar="PATH",
        help=f"add it to {KEYS_VARIABLE}= in this environment file "
        "(e.g. /etc/tigress/gateway.env; made 0600)",
    )
    return parser


def parse(argv: Sequence[str], *, prog: str = "python -m gateway") -> Command:
    """Reads the command line (``--help`` and ``--version`` print and exit 0 here).

    Raises:
        SystemExit: 0 after ``--help`` or ``--version``, 2 on a usage error.
    """
    parser = build_parser(prog)
    args, unknown = parser.parse_known_args(list(argv))
    if unknown:
        # Said by the command's own parser, whose usage line shows what it takes.
        command = getattr(args, "parser", parser)
        command.error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command == "keygen":
        return Command("keygen", keys_file=args.keys_file, env_file=args.env_file)
    return Command("serve")


def new_key() -> str:
    """A fresh access key: 43 URL-safe characters from the system's CSPRNG."""
    return secrets.token_urlsafe(KEY_BYTES)


def add_to_keys_file(path: Path, key: str) -> None:
    """Appends ``key`` as a line of the keys file (created 0600: it holds secrets)."""
    existing = path.read_text(encoding="utf-8") if path.exists() else ""
    separator = "" if not existing or existing.endswith("\n") else "\n"
    _write_private(path, f"{existing}{separator}{key}\n")


def with_key_in_env(text: str, key: str) -> str:
    """An environment file's text with ``key`` added to its ``TIGRESS_API_KEYS=`` line.

    The first uncommented ``TIGRESS_API_KEYS=`` line gets ``,key`` (or ``key`` when it was
    empty); without one, the first commented ``#TIGRESS_API_KEYS=`` line becomes the
    variable; without either, the line is added at the end. Nothing else changes.
    """
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(f"{KEYS_VARIABLE}="):
            value = line.removeprefix(f"{KEYS_VARIABLE}=").strip()
            lines[i] = f"{KEYS_VARIABLE}={value},{key}" if value else f"{KEYS_VARIABLE}={key}"
            return "\n".join(lines) + "\n"
    for i, line in enumerate(lines):
        if line.replace(" ", "").startswith(f"#{KEYS_VARIABLE}="):
            lines[i] = f"{KEYS_VARIABLE}={key}"
            return "\n".join(lines) + "\n"
    return "\n".join([*lines, f"{KEYS_VARIABLE}={key}"]) + "\n"


def add_to_env_file(path: Path, key: str) -> None:
    """Adds ``key`` to the environment file's ``TIGRESS_API_KEYS`` (created 0600)."""
    existing = path.read_text(encoding="utf-8") if path.exists() else ""
    _write_private(path, with_key_in_env(existing, key))


def _write_private(path: Path, text: str) -> None:
    """Writes ``text`` through a 0600 file beside ``path``, then renames it over ``path``
    (a crash never leaves half a keys file; the keys are never world-readable)."""
    temporary = path.with_name(f".{path.name}.new")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(text)
    os.replace(temporary, path)


def main(argv: Sequence[str] | None = None) -> None:
    """The ``tigress-gateway`` command: parse, then make a key or serve.

    Raises:
        SystemExit: With the exit status, except after serving, which returns.
    """
    command = parse(sys.argv[1:] if argv is None else argv, prog=program_name(sys.argv[0]))
    if command.name == "keygen":
        raise SystemExit(keygen(command))
    # The server's modules load only when it is served: --help and keygen stay instant.
    from gateway.__main__ import serve  # noqa: PLC0415

    serve()


def keygen(command: Command) -> int:
    """Runs ``keygen``: prints a new key and adds it where asked; returns the exit status."""
    key = new_key()
    try:
        if command.keys_file is not None:
            add_to_keys_file(command.keys_file, key)
        elif command.env_file is not None:
            add_to_env_file(command.env_file, key)
    except OSError as exc:
        target = command.keys_file or command.env_file
        print(f"gateway: cannot write {str(target)!r}: {exc.strerror}", file=sys.stderr)
        return 1
    print(key)
    return 0
