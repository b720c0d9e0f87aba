"""The shape rules of ARCHITECTURE.md, kept by scanning the code.

- Data flows one way: ``fetcher`` never imports ``gateway``; ``gateway`` imports from the
  fetcher side only the client and the generated contract.
- Tests and benchmarks never import each other; what both use lives in ``testkit``, which
  imports neither.
- No shipped module builds a loosened policy: ``Policy(...)`` (and, in the fetcher, the
  download ``Limits(...)`` and the render ``WorkLimits(...)``) is only ever called with no
  arguments outside the tests, so no setting, flag or variable can switch a rule off.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# fetcher.names, fetcher.config and fetcher.logformat: the small helpers both processes
# share (settings names with a did-you-mean, the one settings mechanism, the one log
# format); they hold nothing of the fetcher and import only each other and
# fetcher.journal's encoder.
GATEWAY_MAY_IMPORT = (
    "fetcher.client",
    "fetcher.v1",
    "fetcher.names",
    "fetcher.config",
    "fetcher.logformat",
)


def modules(package: str) -> list[Path]:
    return sorted(p for p in (ROOT / package).rglob("*.py") if "v1" not in p.parts)


def imports(path: Path) -> Iterator[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


@pytest.mark.parametrize("path", modules("fetcher"), ids=lambda p: p.name)
def test_fetcher_never_imports_gateway(path: Path) -> None:
    assert not [name for name in imports(path) if name.split(".")[0] == "gateway"]


@pytest.mark.parametrize("path", modules("gateway"), ids=lambda p: p.name)
def test_gateway_imports_only_the_client_and_the_contract_from_the_fetcher(path: Path) -> None:
    foreign = [
        name
        for name in imports(path)
        if name.split(".")[0] == "fetcher"
        and name != "fetcher"
        and not name.startswith(GATEWAY_MAY_IMPORT)
    ]
    assert foreign == []


@pytest.mark.parametrize(
    "path", modules("bench") + modules("testkit"), ids=lambda p: f"{p.parent.name}/{p.name}"
)
def test_benchmarks_and_testkit_never_import_the_tests(path: Path) -> None:
    assert not [name for name in imports(path) if name.split(".")[0] == "tests"]


@pytest.mark.parametrize("path", modules("tests") + modules("testkit"), ids=lambda p: p.name)
def test_tests_and_testkit_never_import_the_benchmarks(path: Path) -> None:
    assert not [name for name in imports(path) if name.split(".")[0] == "bench"]


def calls_with_arguments(
    path: Path, callee: str, *, allowed: frozenset[str] = frozenset()
) -> list[int]:
    """Lines calling ``callee`` with any argument other than the ``allowed`` keywords."""
    tree = ast.parse(path.read_text(), filename=str(path))
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = (
                node.func.attr
                if isinstance(node.func, ast.Attribute)
                else getattr(node.func, "id", "")
            )
            others = [k for k in node.keywords if k.arg is None or k.arg not in allowed]
            if name == callee and (node.args or others):
                lines.append(node.lineno)
    return lines


#: The only download limits settings may change: a PDF's size (lowered, or raised up to
#: its 64 MiB ceiling, which ``Limits`` itself enforces) and how many PDF bodies are held.
CONFIGURABLE_LIMITS = frozenset({"pdf_max_bytes", "pdfs_held"})
#: The worker limits that are bounded settings (worker_memory_mib, page_/pdf_cpu_seconds,
#: page_/pdf_wall_seconds).
WORKER_SETTINGS = frozenset({"cpu_seconds", "memory_bytes", "wall_seconds"})
ZYGOTE = ROOT / "fetcher" / "isolation" / "zygote.py"


@pytest.mark.parametrize("path", modules("fetcher") + modules("gateway"), ids=lambda p: p.name)
def test_shipped_code_only_builds_the_production_policy(path: Path) -> None:
    assert calls_with_arguments(path, "Policy") == []


@pytest.mark.parametrize("path", modules("fetcher"), ids=lambda p: p.name)
def test_the_fetcher_only_builds_the_production_limits(path: Path) -> None:
    # Rule 5's limits (10 s, 2 MiB, text types, 3 redirects) are not settings either,
    # nor are a page render's (CPU time, memory, wall-clock time) or a PDF reading's.
    assert calls_with_arguments(path, "Limits", allowed=CONFIGURABLE_LIMITS) == []
    # A worker's CPU time, memory and wall clock are settings within fixed bounds
    # (fetcher/settings.py refuses values outside them); its other limits are not.
    work = calls_with_arguments(path, "WorkLimits", allowed=WORKER_SETTINGS)
    if path == ZYGOTE:
        # The zygote rebuilds the limits the fetcher sent it over its control channel.
        work = [line for line in work if "**" not in path.read_text().splitlines()[line - 1]]
    assert work == []
    allowed = WORKER_SETTINGS | {"char_limit"}
    assert calls_with_arguments(path, "PdfLimits", allowed=allowed) == []


def test_the_scan_would_see_a_loosened_policy(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from fetcher.net.policy import Policy\np = Policy(exempt=())\nq = Policy()\n"
    )
    assert calls_with_arguments(sample, "Policy") == [2]


def test_the_scan_would_see_a_loosened_download_limit(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "a = Limits(pdf_max_bytes=1, pdfs_held=2)\nb = Limits(max_bytes=1)\n"
        "c = Limits(**x)\nd = Limits(5)\n"
    )
    assert calls_with_arguments(sample, "Limits", allowed=CONFIGURABLE_LIMITS) == [2, 3, 4]


def module_map(title: str) -> list[str]:
    """The names at line starts of the module map under ``## {title}`` in ARCHITECTURE.md."""
    text = (ROOT / "ARCHITECTURE.md").read_text()
    section = text.split(f"\n## {title}", 1)[1].split("\n## ", 1)[0]
    names, inside = [], False
    for line in section.splitlines():
        if line.startswith("```"):
            inside = not inside
        elif inside and line[:1].isalnum():
            names.append(line.split()[0])
    return names


def package_modules(package: str) -> list[str]:
    """Every module of a package as a path inside it (``loop/turn.py``), generated code aside."""
    return sorted(
        str(p.relative_to(ROOT / package))
        for p in (ROOT / package).rglob("*.py")
        if p.name != "__init__.py" and "v1" not in p.relative_to(ROOT / package).parts
    )


@pytest.mark.parametrize("package", ["fetcher", "gateway", "testkit", "bench"])
def test_the_module_map_names_every_module_once_and_nothing_else(package: str) -> None:
    names = module_map(f"{package}/")
    files = package_modules(package)
    # A line may name a module and the entry point that only calls it (cli.py, __main__.py).
    listed = sorted(name for name in names if name.endswith(".py"))
    assert sorted(set(files) - {"__main__.py"} - set(listed)) == []
    assert sorted(set(listed) - set(files)) == []
    assert len(listed) == len(set(listed))


def test_the_module_map_names_every_test_module() -> None:
    """Each test module by its path inside its area (``tests/gateway/loop/test_turn.py`` is
    listed as ``loop/test_turn.py`` under tests/gateway/)."""
    text = (ROOT / "ARCHITECTURE.md").read_text()
    tests = ROOT / "tests"
    missing = []
    for p in tests.rglob("*.py"):
        parts = p.relative_to(tests).parts
        if p.name == "__init__.py":
            continue
        inside = "/".join(parts[1:]) if len(parts) > 1 else parts[0]
        whole = "/".join(parts)
        if not any(re.search(rf"(?m)^{re.escape(name)}\b", text) for name in (inside, whole)):
            missing.append(str(p.relative_to(ROOT)))
    assert missing == []


#: The packages of each process, lowest first: a package imports only those before it (and
#: the process's common modules at the top, which import no package of their own).
LAYERS = {
    "gateway": ("api", "tools", "stream", "engine", "loop", "http", "mcp"),
    "fetcher": ("net", "isolation", "html", "pdf"),
}
#: Top-level modules every package may use: vocabularies and values that import no package.
COMMON = {
    "gateway": ("errors", "metrics", "settings", "prompts"),
    "fetcher": ("errors", "reasons", "outcome", "report"),
}


def _layer_of(process: str, module: str) -> str:
    """The package of a dotted module name (``gateway.loop.turn`` → ``loop``), or its top name."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


@pytest.mark.parametrize("process", sorted(LAYERS))
def test_packages_import_only_packages_below_them(process: str) -> None:
    order = LAYERS[process]
    wrong = []
    for path in modules(process):
        inside = path.relative_to(ROOT / process).parts
        if len(inside) < 2:
            continue  # the top: the composition root and the common modules
        own = order.index(inside[0])
        for name in imports(path):
            parts = name.split(".")
            if parts[0] != process or len(parts) < 2 or parts[1] == inside[0]:
                continue
            target = parts[1]
            if target in order:
                if order.index(target) > own:
                    wrong.append(f"{path.relative_to(ROOT)} imports {name}")
            elif target not in COMMON[process] and target != "v1":
                wrong.append(f"{path.relative_to(ROOT)} imports {name}")
    assert wrong == []


@pytest.mark.parametrize("process", sorted(COMMON))
def test_common_modules_import_no_package(process: str) -> None:
    wrong = [
        f"{module}: {name}"
        for module in COMMON[process]
        for name in imports(ROOT / process / f"{module}.py")
        if name.split(".")[0] == process
        and len(name.split(".")) > 1
        and name.split(".")[1] in LAYERS[process]
    ]
    assert wrong == []


def test_the_layer_scan_would_see_an_import_upwards(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("from gateway.loop.turn import ChatTurn\nimport gateway.api.sse\n")
    assert "gateway.loop.turn" in set(imports(sample))
