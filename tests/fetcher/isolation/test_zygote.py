"""The isolation module's rules as tables: the seccomp filter's calls, the answers it takes,
how a worker's end is named, and the limits the settings give each pool (issue 23)."""

from __future__ import annotations

import os
import re
import signal
import socket
import tempfile

import pytest

from fetcher.errors import ConfigError
from fetcher.isolation.zygote import (
    EXIT_MEMORY,
    MIB,
    WORKER_CHANNEL,
    BadAnswer,
    Stopped,
    WorkLimits,
    answer,
    decode_answer,
    serve_task,
    stopped_by,
    worker_filter,
    zygote_filter,
)
from fetcher.settings import load_settings
from testkit import tasks


def filter_blocks(pid: int) -> dict[str, str]:
    """The filter's pseudo code (libseccomp's own rendering), one block per system call."""
    with tempfile.TemporaryFile() as out:
        worker_filter(pid).export_pfc(out)
        out.seek(0)
        text = out.read().decode()
    blocks = re.split(r'  # filter for syscall "', text)
    return {block.split('"', 1)[0]: block for block in blocks[1:]}


# Calls no reader makes: absent from the filter, so its default action, a kill.
REFUSED = [
    "socket", "socketpair", "connect", "bind", "listen", "accept4", "sendto", "sendmsg",
    "fork", "vfork", "clone", "clone3", "execve", "execveat", "ptrace", "process_vm_writev",
    "unlink", "unlinkat", "rename", "renameat2", "link", "symlink", "mkdir", "chmod",
    "fchmod", "chown", "truncate", "ftruncate", "setrlimit", "setsid", "setpgid", "prctl",
    "seccomp", "dup", "dup2", "dup3", "mount", "unshare", "setns", "pidfd_open",
    "pidfd_send_signal", "io_uring_setup", "memfd_create", "openat2", "name_to_handle_at",
]  # fmt: skip
ALLOWED = ["read", "mmap", "munmap", "brk", "futex", "clock_gettime", "exit_group", "getpid"]


def test_the_filter_kills_by_default_and_on_any_other_architecture() -> None:
    with tempfile.TemporaryFile() as out:
        worker_filter(os.getpid()).export_pfc(out)
        out.seek(0)
        text = out.read().decode()
    assert "  # default action\n  action KILL_PROCESS;\n" in text
    assert "# invalid architecture action\naction KILL_PROCESS;\n" in text


@pytest.mark.parametrize("name", REFUSED)
def test_a_refused_call_has_no_rule(name: str) -> None:
    assert name not in filter_blocks(os.getpid())


@pytest.mark.parametrize("name", ALLOWED)
def test_what_reading_needs_is_allowed_for_any_argument(name: str) -> None:
    block = filter_blocks(os.getpid())[name]
    assert "action ALLOW;" in block
    assert "$a" not in block  # no condition on an argument


def test_writes_are_allowed_on_the_channel_alone() -> None:
    block = filter_blocks(os.getpid())["write"]
    assert f"if ($a0.lo32 == {WORKER_CHANNEL})" in block
    assert "action ERRNO(9);" in block  # EBADF elsewhere: refused, not fatal


def test_opening_is_allowed_without_a_writing_flag_only() -> None:
    block = filter_blocks(os.getpid())["openat"]
    mask = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_EXCL
    (masked,) = re.findall(r"if \(\$a2\.lo32 & (0x[0-9a-f]+) == 0\)", block)
    assert int(masked, 16) & mask == mask
    assert int(masked, 16) & os.O_NONBLOCK == 0  # a read-only open may still be non-blocking


def test_limits_may_be_read_never_set() -> None:
    block = filter_blocks(os.getpid())["prlimit64"]
    assert "if ($a2.hi32 == 0)" in block
    assert "if ($a2.lo32 == 0)" in block


def test_signals_go_to_the_worker_itself_only() -> None:
    blocks = filter_blocks(4321)
    for name in ("kill", "tgkill"):
        assert "if ($a0.lo32 == 4321)" in blocks[name]
    assert "tkill" not in blocks


@pytest.mark.parametrize(
    ("code", "why"),
    [
        pytest.param(-signal.SIGXCPU, "cpu", id="cpu"),
        pytest.param(-signal.SIGSYS, "confined", id="filter"),
        pytest.param(-signal.SIGKILL, "memory", id="kernel-kill"),
        pytest.param(-signal.SIGABRT, "memory", id="pdfium-abort"),
        pytest.param(EXIT_MEMORY, "memory", id="memory-error"),
        pytest.param(-signal.SIGSEGV, "crashed", id="segfault"),
        pytest.param(0, "crashed", id="exit-without-answer"),
    ],
)
def test_a_workers_end_is_named(code: int, why: str) -> None:
    assert stopped_by(code, WorkLimits()).why == why


@pytest.mark.parametrize(
    ("body", "taken"),
    [
        pytest.param(b'{"value": [1, "x"]}', True, id="value"),
        pytest.param(b'{"error": "E: x", "traceback": "t"}', True, id="error"),
        pytest.param(b'{"memory": true}', True, id="memory"),
        pytest.param(b'{"traceback": "t"}', False, id="traceback-alone"),
        pytest.param(b'{"value": 1, "memory": true}', False, id="two-answers"),
        pytest.param(b'{"error": ["x"]}', False, id="error-not-text"),
        pytest.param(b"[1]", False, id="not-an-object"),
        pytest.param(b"\xff", False, id="not-json"),
    ],
)
def test_answers_are_taken_only_in_the_protocols_shapes(body: bytes, taken: bool) -> None:
    if taken:
        assert isinstance(decode_answer(body), dict)
    else:
        with pytest.raises(BadAnswer):
            decode_answer(body)


def test_a_task_answers_its_value_its_error_or_its_memory() -> None:
    import pickle

    assert decode_answer(answer(pickle.dumps((tasks.pid, (), {})))) == {"value": os.getpid()}
    error = decode_answer(answer(pickle.dumps((tasks.fail, (), {}))))
    assert error["error"] == "ValueError: a bug in a task"
    memory = decode_answer(answer(pickle.dumps((tasks.allocate, (1 << 62,), {}))))
    assert memory == {"memory": True}


def test_a_task_frame_gets_one_answer_frame_and_an_unused_worker_none() -> None:
    import pickle

    ours, theirs = socket.socketpair()
    with ours, theirs:
        task = pickle.dumps((tasks.pid, (), {}))
        ours.sendall(len(task).to_bytes(4, "big") + task)
        serve_task(theirs.fileno())
        size = int.from_bytes(ours.recv(4), "big")
        assert decode_answer(ours.recv(size)) == {"value": os.getpid()}
        ours.shutdown(socket.SHUT_WR)  # a spare the fetcher let go: no frame, no answer
        serve_task(theirs.fileno())
        ours.setblocking(False)
        with pytest.raises(BlockingIOError):
            ours.recv(1)


def test_the_settings_give_each_pool_its_limits() -> None:
    settings = load_settings(
        environ={
            "TIGRESS_FETCHER_WORKER_MEMORY_MIB": "384",
            "TIGRESS_FETCHER_PAGE_CPU_SECONDS": "2",
            "TIGRESS_FETCHER_PDF_WALL_SECONDS": "6.5",
        }
    )
    assert settings.page_limits == WorkLimits(
        cpu_seconds=2, memory_bytes=384 * MIB, wall_seconds=10.0
    )
    pdf = settings.pdf_limits
    assert (pdf.memory_bytes, pdf.cpu_seconds, pdf.wall_seconds) == (384 * MIB, 5, 6.5)
    defaults = load_settings(environ={})
    assert defaults.page_limits == WorkLimits()


@pytest.mark.parametrize(
    ("value", "allowed"),
    [
        pytest.param("128", True, id="least"),
        pytest.param("127", False, id="under"),
        pytest.param("512", True, id="most"),
        pytest.param("513", False, id="over-the-units-room"),
    ],
)
def test_worker_memory_is_bounded_both_ways(value: str, allowed: bool) -> None:
    environ = {"TIGRESS_FETCHER_WORKER_MEMORY_MIB": value}
    if allowed:
        assert load_settings(environ=environ).worker_memory_mib == int(value)
    else:
        with pytest.raises(ConfigError, match="worker_memory_mib"):
            load_settings(environ=environ)


def test_a_stop_is_a_value() -> None:
    assert Stopped("confined", "x") == Stopped("confined", "x")


def zygote_blocks() -> tuple[str, dict[str, str]]:
    with tempfile.TemporaryFile() as out:
        zygote_filter().export_pfc(out)
        out.seek(0)
        text = out.read().decode()
    blocks = re.split(r'  # filter for syscall "', text)
    return text, {block.split('"', 1)[0]: block for block in blocks[1:]}


@pytest.mark.parametrize("name", ["socket", "connect", "bind", "execve", "unlink", "rename"])
def test_the_zygote_may_not_make_sockets_run_programs_or_remove_files(name: str) -> None:
    text, blocks = zygote_blocks()
    assert "  # default action\n  action ALLOW;\n" in text
    assert "action KILL_PROCESS;" in blocks[name]


def test_the_zygote_forks_and_opens_for_reading_only() -> None:
    _, blocks = zygote_blocks()
    assert "clone" not in blocks  # the default: allowed
    assert "action ERRNO(13);" in blocks["openat"]  # EACCES for each writing flag


def test_the_tasks_give_json_a_page_and_a_pdf_or_its_problem() -> None:
    # In this process (a worker's own lines are not measured): the same functions.
    from fetcher.pdf.task import read_pdf
    from fetcher.worktasks import Page, read_page
    from tests.fetcher.pdf.maker import Text, make_pdf

    page = read_page(
        Page(
            b"<title>T</title><main><p>Body</p></main>",
            "text/html",
            None,
            "https://a.test/",
            "a.test",
        )
    )
    assert isinstance(page, dict)
    assert page["title"] == "T"
    pdf = make_pdf([[Text(72, 600, b"A line of a PDF.")]], title="Paper P")
    assert read_pdf(pdf, None) == {
        "title": "Paper P",
        "text": "A line of a PDF.",
        "pages": 1,
        "pages_read": 1,
    }
    damaged = read_pdf(b"%PDF-1.7 nothing else", 100)
    assert isinstance(damaged, dict)
    assert damaged["problem"] in ("damaged", "truncated")


def test_the_render_zygote_warms_the_reader_and_freezes_its_heap() -> None:
    import gc
    import importlib
    import sys

    sys.modules.pop("fetcher.prewarm", None)
    try:
        importlib.import_module("fetcher.prewarm")
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
