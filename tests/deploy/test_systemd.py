"""The install guide, followed literally inside a real systemd (Debian 12's, in nspawn).

One container for the module: Debian's systemd boots on a throw-away overlay of the host
root with a private network, ``make install`` runs in it offline from the wheelhouse, and
each test proves one claim of deploy/systemd/README.md against the running services.

The container's network has only ``lo``; the test puts on it, before installing:

- ``203.0.114.10``: the stand-in public host (outside every special-purpose range; it
  exists only in this network namespace), serving HTTPS with a certificate from a test CA
  that the fetcher trusts only through ``extra_ca_file``, an HTML page and two PDFs (a
  paper, and a decompression bomb for the PDF worker's memory limit); ``/etc/hosts`` names
  it ``standin.example``;
- ``10.53.0.53``: the machine's resolver, in a denied range like a cloud VPC resolver
  (``/etc/resolv.conf``), answering ``viadns.example`` with the stand-in's address;
- ``10.0.0.1`` and ``169.254.169.254``: private and link-local targets that must stay out
  of the fetcher's reach; ``/etc/hosts`` names the first ``intranet.example``;
- a stand-in engine on ``127.0.0.1:8080`` (only its ``/v1/models``, for ``/healthz``) and a
  stand-in SearXNG on ``127.0.0.1:8888`` (only its ``/healthz``).

Runs as root only (it boots a container); skips with the reason otherwise.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from tests.deploy.nspawn import Container, missing_requirements, sweep_stale
from tests.fetcher.pdf.maker import Text, bomb_pdf, make_pdf

ROOT = Path(__file__).resolve().parents[2]
STANDINS = "/tigress-test/standins.py"
PY = "/usr/bin/python3"
VENV_PY = "/opt/tigress/venv/bin/python"
PUBLIC = "203.0.114.10"
RESOLVER = "10.53.0.53"
DENIED = ("127.0.0.1", "::1", "10.0.0.1", "169.254.169.254")
SERVICES = ("fetcher-metrics.socket", "fetcher.service", "gateway.service")
EXTRA_CA = "/etc/tigress/test-ca.pem"
SOCKET = "/run/fetcher/fetcher.sock"
#: ``systemd-analyze security --threshold`` is on the 0-100 scale: 15 is an exposure of 1.5.
EXPOSURE_THRESHOLD = 15
PAPER = make_pdf(
    [[Text(72, 700, b"This paper was read inside the sandbox of the fetcher.")]],
    title="Stand-in paper",
)

_why_not = missing_requirements()
pytestmark = [
    pytest.mark.skipif(_why_not is not None, reason=f"systemd tests: {_why_not}"),
    pytest.mark.timeout(300),
]


def _assets(folder: Path) -> None:
    """What the container sees at /tigress-test: the stand-ins, their certificate, the CA."""
    ca = trustme.CA()
    cert = ca.issue_cert("standin.example", "viadns.example")
    shutil.copy(Path(__file__).with_name("standins.py"), folder / "standins.py")
    # The subverted-worker suite's attempts, run inside the fetcher unit.
    shutil.copy(Path(__file__).with_name("subverted_in_unit.py"), folder / "subverted_in_unit.py")
    shutil.copy(ROOT / "testkit" / "subverted.py", folder / "subverted.py")
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    cert.cert_chain_pems[0].write_to_path(str(folder / "cert.pem"))
    for extra in cert.cert_chain_pems[1:]:
        extra.write_to_path(str(folder / "cert.pem"), append=True)
    cert.private_key_pem.write_to_path(str(folder / "key.pem"))
    (folder / "engine" / "v1").mkdir(parents=True)
    (folder / "engine" / "v1" / "models").write_text('{"data": [{"id": "stand-in"}]}')
    (folder / "searxng").mkdir()
    (folder / "searxng" / "healthz").write_text("OK")
    (folder / "pdfs").mkdir()
    (folder / "pdfs" / "paper.pdf").write_bytes(PAPER)
    # 190 KB inflating to 192 MiB: past the worker's 256 MiB once PDFium holds it.
    (folder / "pdfs" / "bomb.pdf").write_bytes(bomb_pdf(192 << 20))
    for path in (folder, *folder.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)


def _set_the_scene(box: Container) -> None:
    """The machine as an operator would have it before following the guide."""
    for address in (PUBLIC, RESOLVER, "10.0.0.1", "169.254.169.254"):
        box.run("ip", "address", "add", f"{address}/32", "dev", "lo")
    box.sh(
        f"printf '{PUBLIC} standin.example\\n10.0.0.1 intranet.example\\n' >> /etc/hosts\n"
        f"rm -f /etc/resolv.conf && echo 'nameserver {RESOLVER}' > /etc/resolv.conf"
    )
    notify = ("--property=Type=notify", "--property=NotifyAccess=main")
    box.run(
        "systemd-run", "--unit=standin-https", *notify, PY, STANDINS, "https",
        "--cert=/tigress-test/cert.pem", "--key=/tigress-test/key.pem",
        "--pdfs=/tigress-test/pdfs",
    )  # fmt: skip
    box.run(
        "systemd-run", "--unit=standin-dns", *notify, PY, STANDINS, "dns",
        f"--listen={RESOLVER}", f"viadns.example={PUBLIC}",
    )  # fmt: skip
    box.run(
        "systemd-run", "--unit=standin-engine", "--property=Type=exec", PY, "-m",
        "http.server", "--bind=127.0.0.1", "--directory=/tigress-test/engine", "8080",
    )  # fmt: skip
    box.run(
        "systemd-run", "--unit=standin-searxng", "--property=Type=exec", PY, "-m",
        "http.server", "--bind=127.0.0.1", "--directory=/tigress-test/searxng", "8888",
    )  # fmt: skip


def _trust_the_test_ca(box: Container) -> None:
    """The guide's step for a private CA: the file, then ``extra_ca_file`` uncommented."""
    box.sh(
        f"install -m 0644 /tigress-test/ca.pem {EXTRA_CA}\n"
        f"sed -i 's|^#extra_ca_file = .*|extra_ca_file = \"{EXTRA_CA}\"|' "
        "/etc/tigress/tigress.toml\n"
        f"grep -qx 'extra_ca_file = \"{EXTRA_CA}\"' /etc/tigress/tigress.toml\n"
        "systemctl restart fetcher.service"
    )


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Container]:
    """A booted container with Tigress installed by ``make install``, offline."""
    sweep_stale()
    subprocess.run(["make", "-s", "wheelhouse"], cwd=ROOT, check=True, timeout=600)
    assets = tmp_path_factory.mktemp("assets")
    _assets(assets)
    container = Container(
        binds=[
            (ROOT, "/tigress-src"),
            (ROOT / "wheelhouse", "/tigress-wheels"),
            (assets, "/tigress-test"),
        ]
    )
    try:
        _set_the_scene(container)
        install(container)
        _trust_the_test_ca(container)
        yield container
    finally:
        left = container.stop()
        assert not left, left


def show(box: Container, unit: str, *properties: str) -> dict[str, str]:
    out = box.run("systemctl", "show", unit, *(f"--property={p}" for p in properties)).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def as_client(box: Container, *argv: str, group: bool = True) -> str:
    """Runs a command as a fresh dynamic user, with the fetcher's clients' group or not."""
    properties = ["--property=DynamicUser=yes"]
    if group:
        properties.append("--property=SupplementaryGroups=fetcher-clients")
    return box.run(
        "systemd-run", "--wait", "--pipe", "--quiet", *properties, *argv, timeout=60
    ).stdout


def read(box: Container, url: str, allow: str) -> tuple[dict[str, list[dict[str, str]]], str]:
    """One read through the fetcher's socket, as the gateway would; also its request id."""
    request_id = uuid.uuid4().hex
    out = as_client(
        box, VENV_PY, STANDINS, "read", f"--allow={allow}", f"--request-id={request_id}", url
    )
    return json.loads(out), request_id


def journal(box: Container, *matches: str, count: int = 1) -> list[dict[str, str]]:
    """The fetcher's journal entries matching every ``FIELD=value``; waits for ``count``."""
    for _ in range(100):
        out = box.run(
            "journalctl", "--unit=fetcher.service", "--output=json", "--no-pager", *matches
        ).stdout
        entries = [json.loads(line) for line in out.splitlines() if line.strip()]
        # The page cache's own record of each page (stage=cache: hit, shared or miss) is
        # tested where the cache is; these tests read the hop and text records.
        entries = [e for e in entries if e.get("FETCH_STAGE") != "cache"]
        if len(entries) >= count:
            return entries
        time.sleep(0.1)  # journald files the native datagram a moment later
    raise AssertionError(f"no journal entry for {matches}")


def http_get(box: Container, url: str) -> tuple[str, str]:
    """Status and body of a GET inside the container, once something listens there."""
    status, body = box.run(PY, STANDINS, "get", "--wait=30", url).stdout.split("\n", 1)
    return status, body


def probe(box: Container, *addresses: str) -> dict[str, bool]:
    """TCP to port 443 of each address from inside the fetcher's own cgroup."""
    out = box.run(
        PY, STANDINS, "probe", "--cgroup=/sys/fs/cgroup/system.slice/fetcher.service", *addresses
    ).stdout
    reached: dict[str, bool] = json.loads(out)
    return reached


def test_install_brings_both_services_up(box: Container) -> None:
    for unit in SERVICES:
        assert show(box, unit, "ActiveState", "UnitFileState") == {
            "ActiveState": "active",
            "UnitFileState": "enabled",
        }, unit
    listing = box.sh(
        "ls /etc/sysusers.d/tigress.conf /opt/tigress/README.md /etc/tigress/tigress.toml "
        "/etc/tigress/gateway.env && stat -c %a /etc/tigress/gateway.env && "
        "getent group fetcher-clients"
    )
    assert "\n600\nfetcher-clients:" in listing
    # Documentation= points at the guide that install put there.
    docs = show(box, "fetcher.service", "Documentation")["Documentation"]
    assert docs == "file:///opt/tigress/README.md"
    # The resolver of /etc/resolv.conf, and nothing else, is allowed through the deny list.
    allowed = show(box, "fetcher.service", "IPAddressAllow")["IPAddressAllow"]
    assert allowed == f"{RESOLVER}/32"


def test_no_bpf_firewall_warning_was_logged(box: Container) -> None:
    log = box.run("journalctl", "--boot", "--no-pager", "--output=cat").stdout
    assert "BPF/cgroup firewalling" not in log


def healthz(box: Container) -> dict[str, Any]:
    """The gateway's /healthz once it says the fetcher is up (or after 30 s, as it is).

    Polled because the gateway checks with a 1 s deadline and may have just started.
    """
    deadline = time.monotonic() + 30
    while True:
        status, body = http_get(box, "http://127.0.0.1:8000/healthz")
        assert status == "200", body
        health: dict[str, Any] = json.loads(body)
        if health["status"] == "ok" or time.monotonic() > deadline:
            return health
        time.sleep(0.2)


def test_gateway_healthz_sees_the_fetcher(box: Container) -> None:
    health = healthz(box)
    assert health["fetcher"]["ok"] is True
    assert health["fetcher"]["targets"] == [
        {
            "target": "unix:/run/fetcher/fetcher.sock",
            "ok": True,
            "says": "The fetcher at unix:/run/fetcher/fetcher.sock answers.",
        }
    ]
    assert health["status"] == "ok"


@pytest.mark.parametrize(
    ("group", "expected"),
    [(True, "connected"), (False, "refused: PermissionError")],
    ids=["member-of-fetcher-clients", "other-dynamic-user"],
)
def test_only_the_fetchers_clients_can_open_its_socket(
    box: Container, group: bool, expected: str
) -> None:
    out = as_client(box, PY, STANDINS, "connect", "/run/fetcher/fetcher.sock", group=group)
    assert out.strip() == expected


def test_fetcher_cgroup_reaches_public_addresses_and_the_resolver_only(box: Container) -> None:
    reached = probe(box, *DENIED, PUBLIC, RESOLVER)
    # The resolver's address is open on every port: IPAddressAllow= names no port.
    assert reached == {**dict.fromkeys(DENIED, False), PUBLIC: True, RESOLVER: True}


def test_without_the_deny_list_the_same_probe_reaches_them(box: Container) -> None:
    """The negative control: the probe above can fail, and it is the deny list that holds."""
    control = "/run/systemd/system.control/fetcher.service.d"
    try:
        box.run("systemctl", "set-property", "--runtime", "fetcher.service", "IPAddressDeny=")
        reached = probe(box, *DENIED, PUBLIC)
        assert reached == dict.fromkeys((*DENIED, PUBLIC), True)
    finally:
        box.sh(f"rm -rf {control} && systemctl daemon-reload && systemctl restart fetcher")
    assert probe(box, *DENIED) == dict.fromkeys(DENIED, False)


def test_public_https_host_is_read_through_the_socket_with_the_extra_ca(box: Container) -> None:
    report, request_id = read(box, "https://standin.example/", "standin.example")
    assert report["failures"] == []
    assert [page["title"] for page in report["pages"]] == ["Stand-in public host"]
    assert "outside every special-purpose range" in report["pages"][0]["text"]
    (entry,) = journal(box, f"FETCH_REQUEST_ID={request_id}")
    assert entry["FETCH_OUTCOME"] == "ok"
    assert entry["FETCH_URL"] == "https://standin.example/"
    assert entry["FETCH_IP"] == PUBLIC
    assert entry["FETCH_STATUS"] == "200"


def test_fetcher_resolves_through_a_resolver_in_a_denied_range(box: Container) -> None:
    report, _ = read(box, "https://viadns.example/", "viadns.example")
    assert report["failures"] == []
    assert [page["url"] for page in report["pages"]] == ["https://viadns.example/"]


def test_name_resolving_to_a_private_address_is_refused_not_public(box: Container) -> None:
    report, request_id = read(box, "https://intranet.example/", "intranet.example")
    assert report["pages"] == []
    assert report["failures"] == [{"url": "https://intranet.example/", "reason": "not_public"}]
    (entry,) = journal(box, f"FETCH_REQUEST_ID={request_id}", "FETCH_REASON=not_public")
    assert entry["FETCH_OUTCOME"] == "refused"
    assert entry["FETCH_URL"] == "https://intranet.example/"
    assert entry["PRIORITY"] == "5"
    assert entry["SYSLOG_IDENTIFIER"] == "fetcher"


def test_a_pdf_is_read_by_its_worker_inside_the_sandbox(box: Container) -> None:
    # The worker is a fresh Python under the unit's MemoryDenyWriteExecute, system call
    # filter and limits: PDFium loads and reads, and the page comes back like any other.
    report, request_id = read(box, "https://standin.example/paper.pdf", "standin.example")
    assert report["failures"] == []
    assert report["pages"] == [
        {
            "url": "https://standin.example/paper.pdf",
            "title": "Stand-in paper",
            "text": "This paper was read inside the sandbox of the fetcher.",
        }
    ]
    (entry,) = journal(box, f"FETCH_REQUEST_ID={request_id}")  # no text record: it was read
    assert (entry["FETCH_OUTCOME"], entry["FETCH_URL"]) == (
        "ok",
        "https://standin.example/paper.pdf",
    )


def test_a_pdf_bomb_stops_at_the_workers_memory_limit_inside_the_sandbox(box: Container) -> None:
    # too_large, not unreadable: the worker's prlimit() passed the unit's system call filter
    # and its address-space limit held (without it the bomb inflates and is read).
    before = show(box, "fetcher.service", "MainPID")
    report, request_id = read(box, "https://standin.example/bomb.pdf", "standin.example")
    assert report == {
        "pages": [],
        "failures": [{"url": "https://standin.example/bomb.pdf", "reason": "too_large"}],
    }
    hop, text = journal(box, f"FETCH_REQUEST_ID={request_id}", count=2)
    assert (hop["FETCH_OUTCOME"], hop.get("FETCH_STAGE")) == ("ok", None)
    assert (text["FETCH_STAGE"], text["FETCH_READER"], text["FETCH_REASON"]) == (
        "text",
        "pdf",
        "too_large",
    )
    assert show(box, "fetcher.service", "MainPID") == before  # the fetcher itself carried on


def test_the_units_filter_denies_setrlimit_so_the_workers_use_prlimit(box: Container) -> None:
    # The same filter as the fetcher's, on a throw-away unit: the raw setrlimit system call
    # is refused (EPERM), prlimit64, which both kinds of worker use, is allowed.
    unit = show(box, "fetcher.service", "SystemCallFilter", "SystemCallErrorNumber")
    code = (
        "import ctypes, errno, platform, resource\n"
        "number = {'x86_64': 160, 'aarch64': 164}[platform.machine()]\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "limit = (ctypes.c_ulong * 2)(0, 0)\n"
        "failed = libc.syscall(number, resource.RLIMIT_CORE, limit) == -1\n"
        "print('setrlimit', errno.errorcode[ctypes.get_errno()] if failed else 'allowed')\n"
        "resource.prlimit(0, resource.RLIMIT_CORE, (0, 0))\n"
        "print('prlimit64 allowed')\n"
    )
    out = box.run(
        "systemd-run", "--wait", "--pipe", "--quiet",
        f"--property=SystemCallFilter={unit['SystemCallFilter']}",
        f"--property=SystemCallErrorNumber={unit['SystemCallErrorNumber']}",
        PY, "-c", code, timeout=60,
    ).stdout  # fmt: skip
    assert out.splitlines() == ["setrlimit EPERM", "prlimit64 allowed"]


def unit_processes(box: Container) -> set[int]:
    """Every process in the fetcher unit's cgroup."""
    procs = box.run("cat", "/sys/fs/cgroup/system.slice/fetcher.service/cgroup.procs").stdout
    return {int(pid) for pid in procs.split()}


def descendants(box: Container, ancestor: int) -> set[int]:
    """Every live process below ``ancestor`` in the container, children of children too."""
    code = (
        "import json, os\n"
        "parents = {}\n"
        "for name in filter(str.isdigit, os.listdir('/proc')):\n"
        "    try:\n"
        "        fields = open(f'/proc/{name}/stat').read().rpartition(')')[2].split()\n"
        "    except OSError:\n"
        "        continue\n"
        "    parents[int(name)] = int(fields[1])\n"
        "print(json.dumps(parents))\n"
    )
    parents = {int(pid): ppid for pid, ppid in json.loads(box.run(PY, "-c", code).stdout).items()}
    below: set[int] = set()
    for pid in parents:
        chain, seen = pid, set()
        while chain in parents and chain not in seen and chain != ancestor:
            seen.add(chain)
            chain = parents[chain]
        if chain == ancestor and pid != ancestor:
            below.add(pid)
    return below


def test_the_subverted_worker_suite_runs_inside_the_unit(box: Container) -> None:
    """tests/fetcher/isolation/test_subverted_worker.py's attempts, each the task of a real
    render and PDF worker started inside the fetcher unit (an ``ExecStartPost=`` of a
    runtime drop-in: its user, namespaces, system call filter and cgroup): every one fails
    as it does outside, and the fetcher serves on."""
    run_id = uuid.uuid4().hex
    dropin = "/run/systemd/system/fetcher.service.d/subverted.conf"
    command = f"{VENV_PY} /tigress-test/subverted_in_unit.py ${{MAINPID}} {run_id}"
    box.sh(
        f"mkdir -p {Path(dropin).parent}\n"
        f"printf '[Service]\\nExecStartPost={command}\\n' > {dropin}\n"
        "systemctl daemon-reload && systemctl restart fetcher.service"
    )
    try:
        marker = f"subverted-suite {run_id}: "
        for _ in range(100):
            log = box.run(
                "journalctl", "--unit=fetcher.service", "--output=cat", "--no-pager"
            ).stdout
            lines = [line for line in log.splitlines() if line.startswith(marker)]
            if lines:
                break
            time.sleep(0.1)
        assert lines, log[-3000:]
        report = json.loads(lines[-1][len(marker) :])
        assert "error" not in report, report
        assert report["fetcher_pid"] == int(show(box, "fetcher.service", "MainPID")["MainPID"])
        for pool in ("html", "pdf"):
            verdicts = report["pools"][pool]
            failed = {name: v for name, v in verdicts.items() if not v["ok"]}
            assert failed == {}, (pool, failed)
            # Every attempt of the suite ran: the sockets found, and each refused call.
            assert f"connect_unix {SOCKET}" in verdicts, sorted(verdicts)
            assert len(verdicts) >= 30, sorted(verdicts)
        # Nothing a worker started is left: every process of the unit descends from the
        # fetcher (one that escaped a worker would have been given to systemd).
        main_pid = report["fetcher_pid"]
        assert unit_processes(box) - {main_pid} <= descendants(box, main_pid)
        # The fetcher that served while its workers were attacked still reads.
        page, _ = read(box, "https://standin.example/", "standin.example")
        assert [p["title"] for p in page["pages"]] == ["Stand-in public host"]
    finally:
        box.sh(f"rm -f {dropin} && systemctl daemon-reload && systemctl restart fetcher.service")


def test_start_line_names_the_extra_ca_file(box: Container) -> None:
    log = box.run("journalctl", "--unit=fetcher.service", "--output=cat", "--no-pager").stdout
    start = [line for line in log.splitlines() if "serving on" in line][-1]
    assert "serving on unix:/run/fetcher/fetcher.sock" in start
    assert f"TLS trust: system store + extra_ca_file {EXTRA_CA} (1 certificate)" in start


def test_metrics_answer_through_the_socket_unit(box: Container) -> None:
    read(box, "https://standin.example/", "standin.example")
    status, body = http_get(box, "http://127.0.0.1:9464/metrics")
    assert status == "200"
    assert 'tigress_fetcher_fetches_total{outcome="ok",reason="none"}' in body
    # No process collector, so ProcSubset=pid hides nothing the page needs.
    assert "\nprocess_" not in body


def test_exposure_scores_stay_under_the_threshold(box: Container) -> None:
    for unit in ("fetcher.service", "gateway.service"):
        done = box.run(
            "systemd-analyze", "security", f"--threshold={EXPOSURE_THRESHOLD}", "--no-pager",
            unit, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout[-3000:]
        assert "Overall exposure level" in done.stdout


def test_fetcher_stops_cleanly_and_restarts(box: Container) -> None:
    box.run("systemctl", "stop", "fetcher.service")
    assert show(
        box, "fetcher.service", "ActiveState", "Result", "ExecMainCode", "ExecMainStatus"
    ) == {
        "ActiveState": "inactive",
        "Result": "success",  # not "timeout": it stopped well within TimeoutStopSec
        "ExecMainCode": "1",  # CLD_EXITED: it exited by itself after draining
        "ExecMainStatus": "0",
    }
    box.run("test", "!", "-e", "/run/fetcher/fetcher.sock")
    box.run("systemctl", "start", "fetcher.service")
    report, _ = read(box, "https://standin.example/", "standin.example")
    assert len(report["pages"]) == 1


def test_gateway_stops_cleanly_and_restarts(box: Container) -> None:
    box.run("systemctl", "stop", "gateway.service")
    assert show(box, "gateway.service", "ActiveState", "Result") == {
        "ActiveState": "inactive",
        "Result": "success",
    }
    box.run("systemctl", "restart", "gateway.service")
    assert show(box, "gateway.service", "ActiveState")["ActiveState"] == "active"
    assert healthz(box)["fetcher"]["ok"] is True


def test_gateway_exits_0_after_a_graceful_drain(box: Container) -> None:
    box.run("systemctl", "stop", "gateway.service")
    try:
        assert show(box, "gateway.service", "ExecMainCode", "ExecMainStatus") == {
            "ExecMainCode": "1",  # CLD_EXITED, not CLD_KILLED
            "ExecMainStatus": "0",
        }
    finally:
        box.run("systemctl", "start", "gateway.service")


def invocations(box: Container) -> dict[str, str]:
    """Each service's InvocationID: a new one at every start."""
    return {
        unit: show(box, unit, "InvocationID")["InvocationID"]
        for unit in ("fetcher.service", "gateway.service")
    }


def install(box: Container, source: str = "/tigress-src") -> str:
    done = box.run("make", "-C", source, "install", "WHEELHOUSE=/tigress-wheels", timeout=300)
    return done.stdout


def test_install_again_changes_nothing_and_keeps_the_configuration(box: Container) -> None:
    settings = "cat /etc/tigress/tigress.toml /etc/tigress/gateway.env"
    before, running = box.sh(settings), invocations(box)
    out = install(box)
    assert "program unchanged" in out
    assert "nothing changed: running services left as they were" in out
    assert invocations(box) == running
    assert box.sh(settings) == before  # extra_ca_file, set after the first install, stays


def test_install_of_a_changed_unit_replaces_it_and_restarts(box: Container) -> None:
    marker = f"# changed {uuid.uuid4().hex}"
    box.sh(
        "rm -rf /tmp/next && mkdir /tmp/next && cd /tigress-src\n"
        "cp -r Makefile pyproject.toml README.md fetcher gateway deploy /tmp/next/\n"
        f"echo '{marker}' >> /tmp/next/deploy/systemd/gateway.service"
    )
    running = invocations(box)
    out = install(box, "/tmp/next")
    assert "program unchanged" in out  # the same program: no reinstall
    assert marker in box.sh("cat /etc/systemd/system/gateway.service")
    restarted = invocations(box)
    assert all(restarted[unit] != running[unit] for unit in running)
    assert healthz(box)["fetcher"]["ok"] is True


def test_uninstall_removes_all_of_it(box: Container) -> None:
    out = box.run("make", "-C", "/tigress-src", "uninstall").stdout
    # The settings and keys are kept unless told to purge them.
    assert "kept /etc/tigress" in out
    assert box.sh("ls /etc/tigress") != ""
    box.run("make", "-C", "/tigress-src", "uninstall", "PURGE=1")  # again: nothing to trip on
    left = box.sh(
        "ls -d /opt/tigress /etc/tigress /etc/sysusers.d/tigress.conf "
        "/etc/systemd/system/fetcher.service /etc/systemd/system/fetcher-metrics.socket "
        "/etc/systemd/system/gateway.service /etc/systemd/system/fetcher.service.d "
        "/run/fetcher 2>/dev/null || true"
    )
    assert left == ""
    assert box.run("getent", "group", "fetcher-clients", check=False).returncode == 2
    for unit in SERVICES:
        assert show(box, unit, "LoadState")["LoadState"] == "not-found", unit
    assert box.run("pgrep", "-f", "/opt/tigress/venv", check=False).stdout == ""


def test_stopping_the_container_leaves_nothing_mounted_or_running(box: Container) -> None:
    assert box.stop() == []
    assert box.nspawn.returncode is not None
    assert not Path(f"/proc/{box.init_pid}").exists()
