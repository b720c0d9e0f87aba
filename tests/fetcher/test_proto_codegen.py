"""The generated contract in ``fetcher/v1/`` is exactly what ``make proto`` writes today."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GENERATED = ROOT / "fetcher" / "v1"
HAND_WRITTEN = {"__init__.py"}


def _generated_files(folder: Path) -> dict[str, bytes]:
    return {
        path.name: path.read_bytes()
        for path in sorted(folder.iterdir())
        if path.is_file() and path.name not in HAND_WRITTEN
    }


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_generated_code_matches_a_fresh_make_proto(tmp_path: Path) -> None:
    # -o: treat the venv stamp as up to date, so the test never reinstalls packages.
    subprocess.run(
        ["make", "-s", "-o", ".venv/.installed", "proto", f"PROTO_ROOT={tmp_path}"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    fresh = _generated_files(tmp_path / "fetcher" / "v1")
    committed = _generated_files(GENERATED)

    assert set(fresh) == {
        "fetcher_pb2.py",
        "fetcher_pb2.pyi",
        "fetcher_pb2_grpc.py",
        "fetcher_pb2_grpc.pyi",
    }
    assert sorted(committed) == sorted(fresh), "fetcher/v1 holds files make proto does not write"
    stale = [name for name in fresh if fresh[name] != committed[name]]
    assert not stale, f"fetcher/v1 is stale, run `make proto`: {stale}"
