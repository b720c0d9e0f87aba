"""TCP listeners for scale-out use mutual TLS: only a client with a trusted certificate reads."""

from __future__ import annotations

import socket
from collections.abc import Collection
from pathlib import Path

import grpc
import pytest
import trustme

from fetcher.client import FetcherClient, FetcherUnavailable
from fetcher.report import PageRead, Report
from fetcher.service import OnPage
from fetcher.settings import load_settings
from testkit.fetcher import running_fetcher

PAGE = PageRead("https://a.test/", "https://a.test/", "A", "text", 200, 4, 1, 0)


async def one_page(
    url: str,
    *,
    allowed_hosts: Collection[str],
    page_limit: int,
    deadline: float,
    request_id: str,
    on_page: OnPage | None = None,
) -> Report:
    return Report(url=url, pages=(PAGE,), failures=(), elapsed_ms=1)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def pki(tmp_path: Path) -> dict[str, Path | bytes]:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, as PEM files."""
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    client = ca.issue_cert("gateway.internal")
    paths = {
        "ca": tmp_path / "ca.pem",
        "cert": tmp_path / "server.pem",
        "key": tmp_path / "server-key.pem",
    }
    ca.cert_pem.write_to_path(str(paths["ca"]))
    server.cert_chain_pems[0].write_to_path(str(paths["cert"]))
    server.private_key_pem.write_to_path(str(paths["key"]))
    return {
        **paths,
        "ca_pem": ca.cert_pem.bytes(),
        "client_cert": b"".join(pem.bytes() for pem in client.cert_chain_pems),
        "client_key": client.private_key_pem.bytes(),
    }


async def test_tcp_listener_serves_only_clients_with_a_trusted_certificate(
    pki: dict[str, Path | bytes],
) -> None:
    target = f"127.0.0.1:{free_port()}"
    settings = load_settings(
        environ={
            "TIGRESS_FETCHER_LISTEN": target,
            "TIGRESS_FETCHER_TLS_CERT_FILE": str(pki["cert"]),
            "TIGRESS_FETCHER_TLS_KEY_FILE": str(pki["key"]),
            "TIGRESS_FETCHER_TLS_CLIENT_CA_FILE": str(pki["ca"]),
        }
    )
    ca_pem, key, chain = pki["ca_pem"], pki["client_key"], pki["client_cert"]
    assert isinstance(ca_pem, bytes)
    assert isinstance(key, bytes)
    assert isinstance(chain, bytes)
    async with running_fetcher(settings, one_page):
        trusted = grpc.ssl_channel_credentials(ca_pem, private_key=key, certificate_chain=chain)
        async with FetcherClient(target, credentials=trusted, timeout=5) as client:
            report = await client.read("https://a.test/", allowed_hosts={"a.test"}, page_limit=1)
        assert report.pages == (PAGE,)
        anonymous = grpc.ssl_channel_credentials(ca_pem)
        async with FetcherClient(target, credentials=anonymous, timeout=2) as client:
            with pytest.raises(FetcherUnavailable):
                await client.read("https://a.test/", allowed_hosts={"a.test"}, page_limit=1)
        async with FetcherClient(target, timeout=2) as client:
            with pytest.raises(FetcherUnavailable):
                await client.read("https://a.test/", allowed_hosts={"a.test"}, page_limit=1)
