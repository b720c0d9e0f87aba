"""Model names (SPEC 2): file-name aliases of path-named models, and the 404 that lists the
names served."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

import httpx
import pytest

from gateway.engine.client import EngineClient
from gateway.engine.models import LISTED_NAMES, ModelDirectory, file_aliases, unknown_model
from gateway.errors import UnknownModelError
from gateway.settings import EngineSettings
from testkit.engine import FakeEngine, text_reply, tool_reply
from tests.gateway.conftest import AUTH, FakeSearch, GatewayFactory, make_settings

PATH = "/x/y/Model.Q4.gguf"
QUESTION = [{"role": "user", "content": "What is new in Rust?"}]


@pytest.mark.parametrize(
    ("names", "aliases"),
    [
        ([PATH], {"Model.Q4.gguf": PATH, "Model.Q4": PATH}),
        (["models/M.GGUF"], {"M.GGUF": "models/M.GGUF", "M": "models/M.GGUF"}),
        (["Model.Q4.gguf"], {"Model.Q4": "Model.Q4.gguf"}),  # a bare file name
        (["C:\\models\\M.gguf"], {"M.gguf": "C:\\models\\M.gguf", "M": "C:\\models\\M.gguf"}),
        (["/srv/qwen3"], {"qwen3": "/srv/qwen3"}),  # a path without .gguf
        (["qwen3", "gpt-oss:20b", "org.model"], {}),  # names, not files
        (["/srv/models/"], {}),  # no file part
        (["/a/M.gguf", "/b/M.gguf"], {}),  # ambiguous: neither
        (["/a/M.gguf", "/b/M"], {"M.gguf": "/a/M.gguf"}),  # "M" is ambiguous
        (
            ["/a/M.gguf", "/b/m.gguf"],
            {"M.gguf": "/a/M.gguf", "M": "/a/M.gguf", "m.gguf": "/b/m.gguf", "m": "/b/m.gguf"},
        ),
        (["/a/M.gguf", "/b/M.GGUF"], {"M.gguf": "/a/M.gguf", "M.GGUF": "/b/M.GGUF"}),
        (["/a/M.gguf", "M"], {"M.gguf": "/a/M.gguf"}),  # a served name is never an alias
        ([PATH, PATH], {"Model.Q4.gguf": PATH, "Model.Q4": PATH}),  # one name, twice
    ],
    ids=[
        "absolute-path",
        "relative-path-upper-case-suffix",
        "bare-file-name",
        "windows-path",
        "path-without-gguf",
        "plain-names",
        "directory",
        "ambiguous",
        "ambiguous-only-in-part",
        "case-tells-apart",
        "suffix-case-tells-the-long-ones-apart",
        "served-name-wins",
        "same-name-twice",
    ],
)
def test_file_aliases(names: list[str], aliases: dict[str, str]) -> None:
    assert file_aliases(names) == aliases


def test_the_404_lists_the_names_served_with_their_short_names() -> None:
    error = unknown_model("qwen3", [PATH, "other", PATH])
    assert error.status == 404
    assert str(error) == (
        "The model 'qwen3' does not exist. Models served: /x/y/Model.Q4.gguf (or Model.Q4), other."
    )
    assert (
        str(unknown_model("qwen3", [])) == "The model 'qwen3' does not exist: no model is served."
    )


def test_the_404_lists_at_most_twenty_names() -> None:
    names = [f"m{i}" for i in range(LISTED_NAMES + 5)]
    message = str(unknown_model("x", names))
    assert f"m{LISTED_NAMES - 1}, and 5 more (GET /v1/models lists them all)." in message
    assert f"m{LISTED_NAMES}," not in message
    exactly = str(unknown_model("x", names[:LISTED_NAMES]))
    assert exactly.endswith(f"m{LISTED_NAMES - 1}.")


@pytest.fixture
async def client() -> AsyncIterator[EngineClient]:
    async with httpx.AsyncClient(timeout=httpx.Timeout(5.0), trust_env=False) as http:
        engines = EngineClient(http)
        yield engines
        engines.close()


async def test_an_alias_resolves_to_the_listed_name_across_engines(client: EngineClient) -> None:
    async with FakeEngine(models=[PATH]) as llama, FakeEngine(models=["qwen3"]) as other:
        directory = ModelDirectory((EngineSettings(other.url), EngineSettings(llama.url)), client)
        for asked in (PATH, "Model.Q4.gguf", "Model.Q4"):
            entry = await directory.resolve(asked)
            assert (entry.model, entry.engine.url) == (PATH, llama.url)
        assert (await directory.resolve("qwen3")).engine.url == other.url
        with pytest.raises(UnknownModelError) as caught:
            await directory.resolve("model.q4")  # names are exact: case counts
        assert "Models served: qwen3, /x/y/Model.Q4.gguf (or Model.Q4)." in str(caught.value)


async def test_an_alias_two_engines_would_give_is_refused_with_both_names(
    client: EngineClient,
) -> None:
    async with FakeEngine(models=["/a/M.gguf"]) as one, FakeEngine(models=["/b/M.gguf"]) as two:
        directory = ModelDirectory((EngineSettings(one.url), EngineSettings(two.url)), client)
        with pytest.raises(UnknownModelError) as caught:
            await directory.resolve("M")
    assert str(caught.value) == "The model 'M' does not exist. Models served: /a/M.gguf, /b/M.gguf."


async def test_a_chat_by_alias_reaches_the_engine_by_its_listed_name(
    gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    async with FakeEngine(models=[PATH]) as llama:
        llama.script(
            text_reply("Hello."), tool_reply(("web_search", '{"query": "rust"}')), text_reply("ok")
        )
        settings = replace(make_settings(llama), engines=(EngineSettings(llama.url),))
        async with gateway_at(tools=[FakeSearch()], settings=settings) as url:
            plain = await http.post(
                f"{url}/v1/chat/completions",
                json={"model": "Model.Q4", "messages": QUESTION},
                headers=AUTH,
            )
            web = await http.post(
                f"{url}/v1/chat/completions",
                json={"model": "Model.Q4.gguf", "messages": QUESTION, "thor_web_search": True},
                headers=AUTH,
            )
            unknown = await http.post(
                f"{url}/v1/chat/completions",
                json={"model": "qwen3", "messages": QUESTION},
                headers=AUTH,
            )
    assert plain.status_code == 200
    assert web.status_code == 200
    assert web.json()["model"] == "Model.Q4.gguf"  # the client's own name comes back
    assert [c["model"] for c in llama.chats] == [PATH, PATH, PATH]
    assert unknown.status_code == 404
    assert unknown.json()["error"] == {
        "message": "The model 'qwen3' does not exist. Models served: "
        "/x/y/Model.Q4.gguf (or Model.Q4).",
        "type": "invalid_request_error",
        "code": "model_not_found",
    }
