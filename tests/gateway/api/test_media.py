"""Media addresses: refused before the engine unless inline, or the operator lets engines
fetch them.

Regressions of what testing the gateway as a service found (issue 8).
"""

from __future__ import annotations

import httpx
import pytest

from testkit.engine import (
    FakeEngine,
)
from tests.gateway.conftest import (
    GatewayFactory,
    make_settings,
    post_chat,
)
from tests.gateway.http.test_app import chat

# --- Media addresses -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "status"),
    [
        ("https://169.254.169.254/latest/meta-data", 400),
        ("http://127.0.0.1:8080/x.png", 400),
        ("file:///etc/passwd", 400),
        ("data:image/png;base64,iVBORw0KGgo=", 200),
    ],
    ids=["https", "http", "file", "data"],
)
async def test_remote_media_is_refused_before_the_engine(
    engine: FakeEngine,
    gateway_at: GatewayFactory,
    http: httpx.AsyncClient,
    address: str,
    status: int,
) -> None:
    part = {"type": "image_url", "image_url": {"url": address}}
    messages = [{"role": "user", "content": [{"type": "text", "text": "what is this"}, part]}]
    async with gateway_at() as url:
        response = await post_chat(http, url, chat(messages=messages))
    assert response.status_code == status
    assert len(engine.chats) == (1 if status == 200 else 0)
    if status == 400:
        assert "data: URLs" in response.json()["error"]["message"]


async def test_an_operator_may_let_engines_fetch_media(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    part = {"type": "image_url", "image_url": {"url": "https://example.org/cat.png"}}
    messages = [{"role": "user", "content": [part]}]
    settings = make_settings(engine, allow_media_urls=True)
    async with gateway_at(settings=settings) as url:
        response = await post_chat(http, url, chat(messages=messages))
    assert response.status_code == 200
    assert engine.chats[0]["messages"] == messages
