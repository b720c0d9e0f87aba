"""Session fixtures: real llama-server instances (and a real gateway in front of one).

The binary and model come from `make llama-server` (a prerequisite of `make test`). When they
are missing the tests that need them FAIL with the reason rather than skip: a suite that
quietly skipped its only real engine would pass while proving nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.llama.build import ReadyPaths, is_ready, ready_paths
from tests.llama.processes import Served, clean_environ, gateway_argv, serving

#: The names each instance serves the model under (`--alias`): tests do not depend on the
#: file name, and one gateway can route to all three by model name.
MODEL = "smollm2"
MODEL_NO_JINJA = "smollm2-no-jinja"
MODEL_TOOLS = "smollm2-tools"
#: The context size every instance runs with; the overflow tests send more than this.
CONTEXT = 2048
#: The gateway's access key in these tests.
GATEWAY_KEY = "llama-suite-access-key"


@pytest.fixture(scope="session")
def llama_build() -> ReadyPaths:
    paths = ready_paths()
    if not is_ready(paths):
        pytest.fail(
            f"no llama-server build in {paths.root}: run `make llama-server` "
            "(`make test` runs it first; the first build takes 12 to 40 minutes)",
            pytrace=False,
        )
    return paths


@contextmanager
def _llama(build: ReadyPaths, log: Path, alias: str, *flags: str) -> Iterator[Served]:
    argv = [
        str(build.server),
        "--model", str(build.model),
        "--alias", alias,
        "--host", "127.0.0.1",
        "--port", "{port}",
        "--no-webui",
        "--offline",
        "--ctx-size", str(CONTEXT),
        "--parallel", "1",
        # One thread: on a shared 2-core machine two threads wait on each other at every
        # step (1.5 s a token measured with 2, 0.1 s with 1, under the same load).
        "--threads", "1",
        # Prometheus counters: the suite reads how many tokens the engine wrote.
        "--metrics",
        *flags,
    ]  # fmt: skip
    with serving(argv, health="/health", env=clean_environ(), log=log) as served:
        yield served


@pytest.fixture(scope="session")
def llama_stock(llama_build: ReadyPaths, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama-server with the model's own (tool-less) template and `--jinja`; yields `.../v1`."""
    log = tmp_path_factory.mktemp("llama") / "stock.log"
    with _llama(llama_build, log, MODEL, "--jinja") as served:
        yield served.url + "/v1"


@pytest.fixture(scope="session")
def llama_no_jinja(
    llama_build: ReadyPaths, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """llama-server with its legacy (non-Jinja) template path; yields `.../v1`."""
    log = tmp_path_factory.mktemp("llama") / "no-jinja.log"
    with _llama(llama_build, log, MODEL_NO_JINJA, "--no-jinja") as served:
        yield served.url + "/v1"


@pytest.fixture(scope="session")
def llama_tools(llama_build: ReadyPaths, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama-server with the sdist's Qwen2.5 template, which describes tools; yields `.../v1`."""
    log = tmp_path_factory.mktemp("llama") / "tools.log"
    flags = ("--jinja", "--chat-template-file", str(llama_build.tool_template))
    with _llama(llama_build, log, MODEL_TOOLS, *flags) as served:
        yield served.url + "/v1"


@pytest.fixture(scope="session")
def gateway_on_llama(
    llama_stock: str,
    llama_no_jinja: str,
    llama_tools: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[str]:
    """`python -m gateway` in front of all three instances; yields the gateway's `.../v1`.

    The stock instance is the default engine (`TIGRESS_ENGINE_URL`); the other two are
    `[[engines]]` in a settings file. Each serves one model name, discovered from its
    `/v1/models`, so the request's `model` picks the instance.
    """
    folder = tmp_path_factory.mktemp("gateway")
    config = folder / "tigress.toml"
    config.write_text(
        f'[[engines]]\nurl = "{llama_no_jinja}"\n\n[[engines]]\nurl = "{llama_tools}"\n'
    )
    env = clean_environ(
        TIGRESS_CONFIG=str(config),
        TIGRESS_LISTEN="127.0.0.1:{port}",
        TIGRESS_ENGINE_URL=llama_stock,
        TIGRESS_API_KEYS=GATEWAY_KEY,
        # Pass-through never asks the fetcher; nothing listens here.
        TIGRESS_FETCHER=f"unix:{folder / 'no-fetcher.sock'}",
    )
    with serving(gateway_argv(), health="/healthz", env=env, log=folder / "gateway.log") as gw:
        yield gw.url + "/v1"
