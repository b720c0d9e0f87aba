"""What an operator sees (SPEC 2 and 9): one access line per chat with its request id,
the id in ``X-Request-Id`` and on every read to the fetcher, engine addresses that are
wrong said as such, every unknown setting named, and a port in use naming TIGRESS_LISTEN."""

from __future__ import annotations

import logging
import re
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Collection
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from fetcher.client import FetcherClient
from fetcher.report import Report
from gateway.engine.client import EngineClient
from gateway.engine.models import ModelDirectory
from gateway.errors import EngineError, EngineUnreachableError
from gateway.metrics import GatewayMetrics, Outcome
from gateway.settings import (
    EngineSettings,
    SettingsError,
    load_settings,
    unknown_keys,
    unknown_variables,
)
from gateway.stream.access_line import ChatRecord, key_name, safe_word
from gateway.stream.writer import Tally
from testkit.engine import FakeEngine, text_reply, tool_reply
from testkit.fetcher import running_fetcher, unix_settings
from tests.gateway.conftest import AUTH, FakeSearch, GatewayFactory
from tests.gateway.servers import serve

QUESTION = [{"role": "user", "content": "hi"}]
LINE = re.compile(
    r"chat (?P<id>[0-9a-f]{16}) key=(?P<key>\S+) model=(?P<model>\S+) engine=(?P<engine>\S+) "
    r"web=(?P<web>\S+) rounds=(?P<rounds>\d+) searches=(?P<searches>\d+) pages=(?P<pages>\d+) "
    r"tokens=(?P<tokens>\d+) outcome=(?P<outcome>\S+) ms=(?P<ms>\d+)"
)


def access_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, str]]:
    found = []
    for record in caplog.records:
        if record.name == "gateway.http.access":
            match = LINE.fullmatch(record.getMessage())
            assert match, record.getMessage()
            found.append(match.groupdict())
    return found


async def test_one_access_line_per_chat_with_the_id_the_header_gives(
    engine: FakeEngine,
    gateway_at: GatewayFactory,
    http: httpx.AsyncClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="gateway.http.access")
    engine.script(tool_reply(("web_search", '{"query": "a"}')), text_reply("ok"))
    async with gateway_at(tools=[FakeSearch()]) as url:
        web = await http.post(
            f"{url}/v1/chat/completions",
            json={"model": "test-model", "messages": QUESTION, "thor_web_search": True},
            headers=AUTH,
        )
        refused = await http.post(
            f"{url}/v1/chat/completions", json={"model": "m", "messages": QUESTION}
        )
    lines = access_lines(caplog)
    assert len(lines) == 2
    ok, rejected = lines
    assert web.headers["x-request-id"] == ok["id"]
    assert refused.headers["x-request-id"] == rejected["id"]
    assert ok["id"] != rejected["id"]
    assert (ok["key"], ok["model"], ok["engine"], ok["web"]) == (
        "#1",
        "test-model",
        engine.url,
        "on",
    )
    assert (ok["rounds"], ok["searches"], ok["outcome"]) == ("2", "1", "ok")
    assert int(ok["tokens"]) >= 1
    assert (rejected["key"], rejected["web"], rejected["outcome"]) == ("none", "-", "rejected")


@pytest.mark.parametrize(
    ("key", "name"), [(None, "none"), (-1, "none"), (0, "#1"), (4, "#5")], ids=str
)
def test_keys_are_named_by_number_never_by_value(key: int | None, name: str) -> None:
    assert key_name(key) == name


def test_the_clients_model_name_cannot_forge_a_line() -> None:
    assert safe_word("qwen3\nchat forged key=#9") == "qwen3?chat?forged?key=#9"
    assert safe_word("") == "-"
    assert len(safe_word("m" * 500)) == 64
    record = ChatRecord("ab", None, "x y", "", "none", 0, 0, 0, 0, "rejected", 3)
    assert record.line() == (
        "chat ab key=none model=x?y engine=- web=- rounds=0 searches=0 pages=0 tokens=0 "
        "outcome=rejected ms=3"
    )
    assert record.fields()["CHAT_OUTCOME"] == "rejected"


class Recorder:
    """A reader that keeps the request id each read came with."""

    def __init__(self) -> None:
        self.ids: list[str] = []

    async def __call__(
        self, url: str, *, allowed_hosts: Collection[str], page_limit: int, **more: Any
    ) -> Report:
        self.ids.append(str(more.get("request_id")))
        return Report(url=url, pages=(), failures=(), elapsed_ms=1)


async def test_the_request_id_travels_to_the_fetcher_in_metadata(sock_dir: Path) -> None:
    reader = Recorder()
    settings = unix_settings(sock_dir)
    async with (
        running_fetcher(settings, reader),
        FetcherClient(settings.listen[0].target) as client,
    ):
        await client.read(
            "https://a.test/",
            allowed_hosts=["a.test"],
            page_limit=1,
            request_id="3f2a9c01d4e5b6a7",
        )
        items = client.read_stream(
            "https://a.test/", allowed_hosts=["a.test"], page_limit=1, request_id="r-2"
        )
        _ = [item async for item in items]
        await client.read("https://a.test/", allowed_hosts=["a.test"], page_limit=1)
    assert reader.ids[:2] == ["3f2a9c01d4e5b6a7", "r-2"]
    assert re.fullmatch(r"[0-9a-f]{16}", reader.ids[2])  # none sent: the fetcher makes one


def engine_app(status: int, body: Response) -> Starlette:
    async def models(request: Request) -> Response:
        body.status_code = status
        return body

    return Starlette(routes=[Route("/models", models), Route("/v1/models", models)])


@pytest.fixture
async def engines() -> AsyncIterator[EngineClient]:
    async with httpx.AsyncClient(timeout=5, trust_env=False) as http:
        client = EngineClient(http, connect_timeout=2.0, read_timeout=5.0)
        yield client
        client.close()


async def problem_of(engines: EngineClient, app: Starlette, path: str) -> str:
    async with serve(app) as url:
        with pytest.raises(EngineError) as caught:
            await engines.list_models(EngineSettings(url + path))
    assert caught.value.engine == url + path
    return caught.value.message


async def test_a_404_at_models_asks_whether_v1_is_missing(engines: EngineClient) -> None:
    app = engine_app(404, JSONResponse({"detail": "Not Found"}))
    message = await problem_of(engines, app, "")
    assert "answered 404 to http://127.0.0.1:" in message
    assert "is /v1 missing from the address?" in message
    assert "/v1 as TIGRESS_ENGINE_URL" in message


async def test_a_web_server_given_as_the_engine_is_named_as_such(engines: EngineClient) -> None:
    # SearXNG's port given as the engine: a 404 web page at /models.
    app = engine_app(404, HTMLResponse("<html><body>Not Found</body></html>"))
    message = await problem_of(engines, app, "")
    assert "answers, but not as an OpenAI-compatible engine" in message
    assert "SearXNG" in message
    page = engine_app(200, HTMLResponse("<html>a page</html>"))
    assert "its /models is not a model list" in await problem_of(engines, page, "/v1")


async def test_an_engine_that_lists_no_model_is_not_healthy(engines: EngineClient) -> None:
    # A server answering {"data": []}, or Ollama before its first pull: no chat can reach it.
    app = engine_app(200, JSONResponse({"object": "list", "data": []}))
    async with serve(app) as url:
        empty = EngineSettings(url + "/v1")
        named = EngineSettings(url + "/v1", ("configured",))
        directory = ModelDirectory((empty, named), engines)
        (_, failure), (_, configured) = await directory.probe(2.0)
    assert failure is not None
    assert f"{url}/v1/models lists no model" in failure.message
    assert failure.engine == empty.label
    assert configured is None  # configured names route without the list


def test_every_unknown_key_of_the_file_is_named_with_a_suggestion(tmp_path: Path) -> None:
    config = tmp_path / "tigress.toml"
    config.write_text(
        'enigne_url = "http://127.0.0.1:8080/v1"\nlisten = "127.0.0.1:8000"\n'
        "[budgets]\nserches = 3\n[timeouts]\ntool = 5\nengin_read = 9\n"
        '[[engines]]\nurl = "http://127.0.0.1:8001/v1"\nmodel = ["x"]\n'
        "[fetcher]\nanything = 1\n"
    )
    with pytest.raises(SettingsError) as caught:
        load_settings({"TIGRESS_CONFIG": str(config)})
    message = str(caught.value)
    for part in (
        "'enigne_url' (did you mean 'engine_url'?)",
        "'budgets.serches' (did you mean 'budgets.searches'?)",
        "'timeouts.engin_read' (did you mean 'timeouts.engine_read'?)",
        "'engines[0].model' (did you mean 'engines[0].models'?)",
    ):
        assert part in message
    assert "anything" not in message  # [fetcher] is the fetcher's to check
    assert unknown_keys({"listen": "x", "budgets": 3}) == []


def test_unknown_variables_are_named_and_the_fetchers_left_to_it() -> None:
    environ = {
        "TIGRESS_ENGIN_URL": "x",
        "TIGRESS_LISTEN": "127.0.0.1:8000",
        "TIGRESS_FETCHER": "unix:/x",
        "TIGRESS_FETCHER_RENDER_WORKERS": "2",
        "TIGRESS_SOMETHING": "1",
        "HOME": "/root",
    }
    assert unknown_variables(environ) == [
        "'TIGRESS_ENGIN_URL' (did you mean 'TIGRESS_ENGINE_URL'?)",
        "'TIGRESS_SOMETHING'",
    ]


def test_a_port_in_use_names_the_setting_and_exits_2() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "gateway"],
            env={"TIGRESS_LISTEN": f"127.0.0.1:{port}", "TIGRESS_ENGIN_URL": "x"},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 2
    assert f"127.0.0.1:{port} is already in use" in done.stderr
    assert "set TIGRESS_LISTEN (or listen in the TIGRESS_CONFIG file)" in done.stderr
    assert "Application startup" not in done.stderr
    # The misspelt variable is named, with what it likely meant, in the common format.
    assert re.search(
        r"\d\d:\d\d:\d\d\.\d{3} WARNING gateway: unknown variables, not read: "
        r"'TIGRESS_ENGIN_URL' \(did you mean 'TIGRESS_ENGINE_URL'\?\)",
        done.stderr,
    )


def test_an_engine_failure_is_logged_with_the_engines_name(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    tally = Tally(GatewayMetrics(CollectorRegistry()), request_id="ab12")
    tally.engine = "http://127.0.0.1:8080/v1"
    error = EngineUnreachableError("The model engine cannot be reached.", engine="")  # no name
    tally.close(Outcome.ENGINE_ERROR, error)
    messages = [r.getMessage() for r in caplog.records]
    assert "engine http://127.0.0.1:8080/v1 failed (connect): " in messages[0]
    assert not [m for m in messages if "engine  failed" in m]
    assert messages[1].startswith("chat ab12 key=none model=- engine=http://127.0.0.1:8080/v1 ")


async def test_an_engine_that_comes_up_later_is_said_to_answer_now(
    engines: EngineClient, caplog: pytest.LogCaptureFixture
) -> None:
    # A newcomer starts the engine after `make run`: the log says when it answers.
    up = False

    async def models(request: Request) -> Response:
        if not up:
            return JSONResponse({"error": {"message": "loading model"}}, status_code=503)
        return JSONResponse({"object": "list", "data": [{"id": "m"}]})

    app = Starlette(routes=[Route("/v1/models", models)])
    async with serve(app) as url:
        directory = ModelDirectory((EngineSettings(url + "/v1"),), engines)
        with caplog.at_level(logging.INFO, logger="gateway"):
            [(_, failure)] = await directory.probe(2.0)  # start-up's check
            assert failure is not None
            up = True
            [(_, failure)] = await directory.probe(2.0)
            assert failure is None
            [(_, failure)] = await directory.probe(2.0)
    said = [r.getMessage() for r in caplog.records if "answers now" in r.getMessage()]
    assert said == [f"engine {url}/v1 answers now"]
