"""``make run``: both processes start with nothing else running, say what is missing, and
stop on Ctrl-C (SIGINT to the terminal's process group)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def run_dir() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="tgrun", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


class Output:
    """Collects a process's output lines; waits for one without sleeping."""

    def __init__(self, stream: object) -> None:
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()

    def join(self) -> None:
        """Wait until the stream ended (the process closed it)."""
        self._thread.join(timeout=60)

    def wait_for(self, text: str, within: float = 60.0) -> None:
        with self._changed:
            found = self._changed.wait_for(
                lambda: any(text in line for line in self.lines), timeout=within
            )
        assert found, f"never printed {text!r}:\n" + "\n".join(self.lines)


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_run_starts_both_reports_what_is_missing_and_stops_on_ctrl_c(run_dir: Path) -> None:
    port = free_port()
    nowhere = free_port()  # bound by nothing: connections are refused
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("TIGRESS_", "MAKE", "MFLAGS"))
    }
    env |= {
        "TIGRESS_LISTEN": f"127.0.0.1:{port}",
        "TIGRESS_ENGINE_URL": f"http://127.0.0.1:{nowhere}/v1",
        "TIGRESS_SEARXNG_URL": f"http://127.0.0.1:{nowhere}",
    }
    process = subprocess.Popen(
        ["make", "--no-print-directory", "run", f"RUN_DIR={run_dir}"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, as a terminal gives it
    )
    output = Output(process.stdout)
    try:
        output.wait_for(f"ready: the chat page at http://127.0.0.1:{port}/ (API at")
        # Where each listens, and which parts answer.
        output.wait_for(f"fetcher: serving on unix:{run_dir}/fetcher.sock")
        # What differs from the defaults, in one line (nothing does here).
        output.wait_for("INFO fetcher: settings: the defaults")
        assert not [line for line in output.lines if "fetcher: setting " in line]
        # One format for all three: time, level, logger, message.
        assert all(
            re.match(r"\d\d:\d\d:\d\d\.\d{3} (INFO|WARNING|ERROR) \S+: ", line)
            for line in output.lines
        ), output.lines
        # A part that does not answer: one warning, with what to do.
        output.wait_for(f"WARNING gateway: engine http://127.0.0.1:{nowhere}/v1: The model engine")
        output.wait_for("WARNING gateway: SearXNG: ")
        output.wait_for(f"fetcher at unix:{run_dir}/fetcher.sock answers")

        health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).json()
        assert health["status"] == "degraded"
        assert [(e["engine"], e["ok"]) for e in health["engines"]] == [
            (f"http://127.0.0.1:{nowhere}/v1", False)
        ]
        assert "TIGRESS_ENGINE_URL" in health["engines"][0]["says"]
        assert health["fetcher"]["says"] == "The fetcher answers."
        assert health["searxng"]["says"] == health["searxng"]["problem"]
        assert health["searxng"]["ok"] is False
        assert health["fetcher"]["ok"] is True
        chat = httpx.post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            json={
                "model": "any",
                "messages": [{"role": "user", "content": "hi"}],
                "thor_web_search": True,
            },
            timeout=10,
        )
        assert chat.status_code == 502
        assert f"http://127.0.0.1:{nowhere}/v1" in chat.json()["error"]["message"]

        os.killpg(process.pid, signal.SIGINT)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        output.join()
        assert process.stdout is not None
        process.stdout.close()
    output.wait_for("fetcher: stopped")
    output.wait_for("Finished server process")
    # Nothing of the two is left running.
    with pytest.raises(ProcessLookupError):
        os.killpg(process.pid, 0)


def make_env() -> dict[str, str]:
    return {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("TIGRESS_", "MAKE", "MFLAGS"))
    }


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize(
    ("target", "dev"),
    [("run", False), ("wheelhouse", False), ("test", True), ("lint", True), ("bench", True)],
)
def test_only_the_targets_that_need_them_install_the_developer_extras(
    target: str, dev: bool
) -> None:
    # -n: print what would run, as if pyproject.toml had just changed (-W), run nothing.
    done = subprocess.run(
        ["make", "-n", "-W", "pyproject.toml", "--no-print-directory", target],
        cwd=ROOT,
        env=make_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    installs = [line for line in done.stdout.splitlines() if "pip install" in line]
    assert any(line.rstrip().endswith("install -q -e .") for line in installs), installs
    assert any("'.[dev]'" in line for line in installs) is dev, installs
    # setuptools' editable-install warning box is silenced.
    editable = [line for line in installs if " -e " in line]
    assert all("PYTHONWARNINGS='ignore:Editable installation'" in line for line in editable)


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_a_second_make_run_leaves_the_first_ones_fetcher_socket_alone(run_dir: Path) -> None:
    path = run_dir / "fetcher.sock"
    with socket.socket(socket.AF_UNIX) as first:
        first.bind(str(path))
        first.listen()
        done = subprocess.run(
            ["make", "--no-print-directory", "run", f"RUN_DIR={run_dir}"],
            cwd=ROOT,
            env=make_env() | {"TIGRESS_LISTEN": f"127.0.0.1:{free_port()}"},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode != 0
        assert f"a fetcher already serves on {path}" in done.stderr
        assert "RUN_DIR=" in done.stderr
        assert path.is_socket()
