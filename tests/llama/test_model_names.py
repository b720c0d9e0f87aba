"""Model names against a real llama-server started the way the README says, without
`--alias` (SPEC 2): it names the model after its `-m` path, and the gateway serves it by
that path and by the file's own name, with and without `.gguf`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from tests.gateway.conftest import FakeSearch
from tests.llama.build import ReadyPaths
from tests.llama.conftest import CONTEXT, GATEWAY_KEY
from tests.llama.processes import clean_environ, serving
from tests.llama.web import web_gateway
from tests.llama.wire import TIMEOUT

AUTH = {"Authorization": f"Bearer {GATEWAY_KEY}"}
QUESTION = [{"role": "user", "content": "Say hello."}]


@pytest.fixture(scope="module")
def llama_by_path(
    llama_build: ReadyPaths, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """llama-server with `-m <path>` and no `--alias`; yields `.../v1`."""
    argv = [
        str(llama_build.server),
        "--model", str(llama_build.model),
        "--host", "127.0.0.1",
        "--port", "{port}",
        "--no-webui",
        "--offline",
        "--ctx-size", str(CONTEXT),
        "--parallel", "1",
        "--threads", "1",
    ]  # fmt: skip
    log = tmp_path_factory.mktemp("llama") / "by-path.log"
    with serving(argv, health="/health", env=clean_environ(), log=log) as served:
        yield served.url + "/v1"


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=TIMEOUT, trust_env=False, headers=AUTH) as client:
        yield client


async def test_a_path_named_model_is_served_by_its_file_name(
    http: httpx.AsyncClient, llama_by_path: str, llama_build: ReadyPaths
) -> None:
    path = str(llama_build.model)
    stem = llama_build.model.name.removesuffix(".gguf")
    async with web_gateway(llama_by_path, tools=[FakeSearch()]) as gateway:
        listed = await http.get(f"{gateway.api}/models")
        answers = {
            name: await http.post(
                f"{gateway.api}/chat/completions",
                json={"model": name, "messages": QUESTION, "max_tokens": 4},
            )
            for name in (path, llama_build.model.name, stem)
        }
        unknown = await http.post(
            f"{gateway.api}/chat/completions",
            json={"model": "qwen3", "messages": QUESTION, "max_tokens": 4},
        )
        await gateway.recorder.settled()

    # llama-server names the model after its -m path; /v1/models says so.
    assert [m["id"] for m in listed.json()["data"]] == [path]
    for name, response in answers.items():
        assert response.status_code == 200, (name, response.text)
        assert response.json()["choices"][0]["message"]["content"]
    # The engine is sent the name it lists, whichever the client used.
    assert [c.body["model"] for c in gateway.recorder.chats] == [path] * 3
    # The README's old example name: a 404 that says which names are served.
    assert unknown.status_code == 404
    assert unknown.json()["error"] == {
        "message": f"The model 'qwen3' does not exist. Models served: {path} (or {stem}).",
        "type": "invalid_request_error",
        "code": "model_not_found",
    }
