"""The SearXNG build's rules, without building: the pin, the cache, the reasons it gives."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from tests.searxng import build


def test_the_build_lives_in_the_cache_named_by_commit_and_recipe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    paths = build.ready_paths()
    assert paths.root == tmp_path / "tigress" / "searxng" / f"{build.COMMIT[:12]}-r{build.RECIPE}"
    assert paths.python == paths.root / "venv" / "bin" / "python"
    assert not build.is_ready(paths)


def test_without_the_tarball_the_reason_names_where_it_was_looked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(build, "SHARED", tmp_path / "no-shared")
    why = build.missing()
    assert why is not None
    assert str(tmp_path / "no-shared" / "vendor" / "searxng") in why
    with pytest.raises(RuntimeError, match="is not at"):
        build.build()


def test_a_tarball_that_is_not_the_pinned_one_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    shared = tmp_path / "shared"
    monkeypatch.setattr(build, "SHARED", shared)
    build.tarball().parent.mkdir(parents=True)
    build.tarball().write_bytes(b"not the pinned tree")
    with pytest.raises(RuntimeError, match="not the pinned"):
        build.build()
    assert build.main() == 0  # says why and lets the suite skip, naming it
    why = build.missing()
    assert why is not None
    assert why.startswith("the SearXNG build failed:")
    assert "not the pinned" in why


def test_members_that_would_land_outside_the_tree_are_refused(tmp_path: Path) -> None:
    archive = tmp_path / "evil.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        member = tarfile.TarInfo("../escaped.txt")
        member.size = 3
        tar.addfile(member, io.BytesIO(b"bad"))
    with pytest.raises(tarfile.TarError):
        build._unpack(archive, tmp_path / "tree")
    assert not (tmp_path / "escaped.txt").exists()
