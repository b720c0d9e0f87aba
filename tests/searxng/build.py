"""Builds the real SearXNG the `tests/searxng` suite talks to, once per machine.

`make searxng` (a prerequisite of `make test`) runs this module. SearXNG is not on PyPI:
its source tree at a pinned commit is in `../shared/vendor/searxng/` beside the
repository (CI runs with shared/ beside the clone), hash-checked here. The tree is
unpacked and given a virtual environment of its own from its `requirements.txt` (from
PyPI, with pip), in a per-user cache outside the repository
(`~/.cache/tigress/searxng/<commit>-r<recipe>`), so clean checkouts and later runs reuse
it. A file lock makes parallel runs build once. Nothing else is fetched, and SearXNG
itself never reaches the internet in the tests (its settings have only loopback engines:
`tests/searxng/settings.yml`).

Run as `python -m tests.searxng.build` (prints the ready directory), or import
`ready_paths` / `missing` to find a build without building. When the tarball is not
beside the repository, or the build fails, it says why and exits 0: the suite then skips
its SearXNG tests with that reason (`tests/searxng/conftest.py`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

#: The pin: the commit the recorded answers in shared/fixtures/searxng came from.
COMMIT = "9fea41204fdfa7a5cfa15b0ebd12904c520478ce"
TARBALL_SHA256 = "d0d6f8c8643371d34d55a55859016146ab8675c3016881c12c594e699cb6c26d"
#: Bump when the way the venv is made changes, so an old build is not taken for the new.
RECIPE = 1
ROOT = Path(__file__).resolve().parents[2]
#: Where the tarball is: shared/ beside the repository, or TIGRESS_SHARED_DIR (a worktree
#: whose parent folder holds no shared/).
SHARED = Path(os.environ.get("TIGRESS_SHARED_DIR") or ROOT.parent / "shared")
#: A whole `pip install` on a loaded 2-core machine; a hung index is a failed build.
PIP_TIMEOUT_S = 900


@dataclass(frozen=True)
class ReadyPaths:
    """Where a build lives.

    Attributes:
        root: The cache directory of this commit and recipe.
        source: The unpacked tree (`python -m searx.webapp` runs from here).
        python: The venv's interpreter.
        marker: Written last, when everything above is in place.
    """

    root: Path
    source: Path
    python: Path
    marker: Path


def cache_root() -> Path:
    """`$XDG_CACHE_HOME/tigress/searxng`, else `~/.cache/tigress/searxng`."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tigress" / "searxng"


def ready_paths() -> ReadyPaths:
    """The paths of this pin's build (built or not)."""
    root = cache_root() / f"{COMMIT[:12]}-r{RECIPE}"
    return ReadyPaths(
        root=root,
        source=root / "src",
        python=root / "venv" / "bin" / "python",
        marker=root / "ready.json",
    )


def tarball() -> Path:
    """The pinned source tarball beside the repository."""
    return SHARED / "vendor" / "searxng" / f"searxng-{COMMIT}.tar.gz"


def is_ready(paths: ReadyPaths) -> bool:
    """Whether a finished build is there."""
    return paths.marker.is_file() and paths.python.is_file() and (paths.source / "searx").is_dir()


def missing() -> str | None:
    """Why the suite cannot run SearXNG, or None when it can."""
    paths = ready_paths()
    if is_ready(paths):
        return None
    if not tarball().is_file():
        return (
            f"SearXNG's source is not at {tarball()} (expected ../shared beside the "
            "repository, or TIGRESS_SHARED_DIR)"
        )
    failed = paths.root / "failed.txt"
    if failed.is_file():
        return f"the SearXNG build failed: {failed.read_text().strip()[-400:]}"
    return f"no SearXNG build in {paths.root}: run `make searxng` (`make test` runs it first)"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    root.parent.mkdir(parents=True, exist_ok=True)
    with (root.parent / f"{root.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _unpack(source: Path, into: Path) -> None:
    """Unpacks the tarball, refusing members that would land outside ``into``."""
    with tarfile.open(source) as archive:
        archive.extractall(into, filter="data")


def build() -> ReadyPaths:
    """Builds the pinned SearXNG into the cache (or finds it built).

    Raises:
        RuntimeError: The tarball is missing or is not the pinned one, or pip failed.
    """
    paths = ready_paths()
    with _locked(paths.root):
        if is_ready(paths):
            return paths
        source = tarball()
        if not source.is_file():
            raise RuntimeError(f"SearXNG's source is not at {source}")
        digest = _sha256(source)
        if digest != TARBALL_SHA256:
            raise RuntimeError(f"{source} has sha256 {digest}, not the pinned {TARBALL_SHA256}")
        shutil.rmtree(paths.root, ignore_errors=True)
        paths.source.mkdir(parents=True)
        _unpack(source, paths.source)
        venv = paths.python.parents[1]
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(paths.python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        done = subprocess.run(
            [*pip, "-r", str(paths.source / "requirements.txt")],
            capture_output=True,
            text=True,
            timeout=PIP_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"pip install -r requirements.txt failed:\n{done.stderr[-2000:]}")
        paths.marker.write_text(json.dumps({"commit": COMMIT, "recipe": RECIPE}) + "\n")
        return paths


def main() -> int:
    """`make searxng`: build, or say why not (the suite then skips, naming the reason)."""
    paths = ready_paths()
    try:
        ready = build()
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        paths.root.mkdir(parents=True, exist_ok=True)
        (paths.root / "failed.txt").write_text(str(exc) + "\n")
        print(f"SearXNG not built, its tests will be skipped: {exc}", file=sys.stderr)
        return 0
    (ready.root / "failed.txt").unlink(missing_ok=True)
    print(ready.root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
