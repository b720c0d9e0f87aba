"""A throw-away Debian systemd booted in systemd-nspawn, for tests/deploy/test_systemd.py.

The container's root is an overlay of the host's root file system with its writable
layer in a fresh directory under /dev/shm, mounted inside a private mount namespace
(``unshare --mount``) that only nspawn lives in: when nspawn exits, the kernel drops
every mount of the run, whatever happened to the test. Its network is private (only
``lo``), its cgroup tree is a fresh cgroup v2 group of its own (two runs at once cannot
meet), and it boots to ``basic.target`` without the host's ``/etc/fstab``, so none of the
host's own services or mounts start in it.

Commands run inside through ``nsenter`` with a clean environment.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

PREFIX = "tigress-nspawn."
#: A run's leftovers are swept only this long after it began (a younger one may be busy).
STALE_SECONDS = 600.0
SHM = Path("/dev/shm")
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
BOOT_SECONDS = 60.0
STOP_SECONDS = 30.0


class ContainerError(Exception):
    """Raised when the container cannot be booted or a command inside it fails."""


def missing_requirements() -> str | None:
    """Why this machine cannot boot the container, or ``None`` when it can."""
    if os.geteuid() != 0:
        return "needs root (systemd-nspawn, mounts, cgroups); CI runs the suite as root"
    for tool in ("systemd-nspawn", "nsenter", "unshare", "setpriv", "mount"):
        if shutil.which(tool) is None:
            return f"{tool} is missing (`make test-deps` installs Debian's systemd-container)"
    if not Path("/lib/systemd/systemd").exists():
        return "the host root has no /lib/systemd/systemd to boot"
    if cgroup2_mount() is None:
        return "no cgroup v2 hierarchy is mounted (the BPF firewall needs one)"
    return None


def cgroup2_mount() -> Path | None:
    """Where the cgroup v2 hierarchy is mounted (``/sys/fs/cgroup`` or its ``unified``)."""
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        separator = fields.index("-")
        if fields[separator + 1] == "cgroup2":
            return Path(fields[4])
    return None


def _own_cgroup2() -> str:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        if line.startswith("0::"):
            return line[3:]
    return "/"


class Container:
    """A booted container; :meth:`stop` ends it and removes what the run made."""

    def __init__(self, *, binds: Sequence[tuple[Path, str]] = ()) -> None:
        """Boots the container.

        Args:
            binds: Host directories and where they appear inside (read-only).

        Raises:
            ContainerError: It did not boot; the message holds nspawn's output.
        """
        self.workdir = Path(tempfile.mkdtemp(prefix=PREFIX, dir=SHM))
        # A host name: the directory's random suffix may hold "_" or capitals.
        self.name = f"tigress-{secrets.token_hex(4)}"
        mount = cgroup2_mount()
        assert mount is not None
        self.cgroup = mount / _own_cgroup2().lstrip("/") / self.workdir.name
        self.cgroup.mkdir()
        for part in ("lower", "upper", "work", "root"):
            (self.workdir / part).mkdir()
        self.log = self.workdir / "nspawn.log"
        self.init_pid = 0
        w = self.workdir
        nspawn = [
            "systemd-nspawn",
            f"--directory={w}/root",
            f"--machine={self.name}",
            "--boot",
            "--private-network",
            "--register=no",
            "--keep-unit",
            "--console=pipe",
            # The BPF firewall needs bpf() and a unified cgroup tree inside.
            "--capability=all",
            "--system-call-filter=bpf",
            *(f"--bind-ro={host}:{inside}" for host, inside in binds),
            "--",
            # Read by systemd and its generators as the kernel command line: no host
            # services, and none of the host's /etc/fstab (its devices are not here).
            "systemd.unit=basic.target",
            "fstab=no",
        ]
        script = " && ".join(
            [
                f"echo $$ > {self.cgroup}/cgroup.procs",
                f"mount --bind / {w}/lower",
                f"mount -t overlay overlay -o lowerdir={w}/lower,upperdir={w}/upper,"
                f"workdir={w}/work {w}/root",
                "exec " + shlex.join(nspawn),
            ]
        )
        # setpriv: if the test process dies without stopping it (killed), nspawn gets a
        # SIGTERM and halts the container.
        unshare = ["setpriv", "--pdeathsig=TERM", "unshare", "--mount", "--propagation=private"]
        with self.log.open("wb") as log:
            self.nspawn = subprocess.Popen(
                [*unshare, "--", "sh", "-c", script],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={"PATH": PATH, "SYSTEMD_NSPAWN_UNIFIED_HIERARCHY": "1"},
                start_new_session=True,
            )
        try:
            self._wait_booted()
        except BaseException:
            self.stop()
            raise

    def _wait_booted(self) -> None:
        deadline = time.monotonic() + BOOT_SECONDS
        while not self.init_pid:
            if self.nspawn.poll() is not None or time.monotonic() > deadline:
                raise ContainerError(f"nspawn did not start systemd:\n{self.log.read_text()}")
            self.init_pid = _child_named(self.nspawn.pid, "systemd")
            time.sleep(0.1)
        while True:
            state = self.run("systemctl", "is-system-running", "--wait", check=False).stdout
            if state.strip() in ("running", "degraded"):
                return
            if self.nspawn.poll() is not None or time.monotonic() > deadline:
                raise ContainerError(f"the container did not boot ({state!r}):\n{self.logs()}")
            time.sleep(0.2)

    def logs(self) -> str:
        """nspawn's own output (the container's console)."""
        return self.log.read_text(errors="replace")

    def run(
        self,
        *argv: str,
        check: bool = True,
        timeout: float = 120,
        input_text: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Runs a command inside the container as root, with a clean environment.

        Raises:
            ContainerError: ``check`` and the command failed; the message holds its output.
        """
        command = [
            "nsenter",
            f"--target={self.init_pid}",
            "--all",
            "env",
            "-i",
            f"PATH={PATH}",
            "LANG=C.UTF-8",
            *argv,
        ]
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input_text,
            check=False,
        )
        if check and done.returncode != 0:
            raise ContainerError(
                f"{shlex.join(argv)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
            )
        return done

    def sh(self, script: str, *, check: bool = True) -> str:
        """Runs a shell script inside; returns its standard output."""
        return self.run("sh", "-ec", script, check=check).stdout

    def stop(self) -> list[str]:
        """Halts the container and removes the run's directory and cgroups.

        Returns:
            What is left behind (running processes, mounts, directories); empty when
            the run left nothing.
        """
        if self.nspawn.poll() is None:
            # nspawn asks the container's systemd to halt on the first SIGTERM.
            self.nspawn.send_signal(signal.SIGTERM)
            try:
                self.nspawn.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                self.nspawn.kill()
                self.nspawn.wait(STOP_SECONDS)
        if self.init_pid and _alive(self.init_pid):
            os.kill(self.init_pid, signal.SIGKILL)  # kills the container's whole PID namespace
        left: list[str] = []
        deadline = time.monotonic() + STOP_SECONDS
        while self.cgroup.exists() and _cgroup_pids(self.cgroup):
            if time.monotonic() > deadline:
                left.append(f"processes in {self.cgroup}: {_cgroup_pids(self.cgroup)}")
                break
            time.sleep(0.1)
        for directory in sorted(_cgroup_tree(self.cgroup), key=lambda p: -len(p.parts)):
            try:
                directory.rmdir()
            except OSError as exc:
                left.append(f"cgroup {directory}: {exc.strerror}")
        mounts = Path("/proc/self/mountinfo").read_text()
        left += [line for line in mounts.splitlines() if str(self.workdir) in line]
        if not left:
            shutil.rmtree(self.workdir, ignore_errors=True)
        if self.workdir.exists():
            left.append(f"directory {self.workdir}")
        return left


def sweep_stale() -> list[Path]:
    """Removes what runs killed outright (SIGKILL) left: their /dev/shm folders (the
    overlay's writable layer, held in memory) and empty cgroups.

    nspawn itself halts with its test process (parent-death signal), and the mounts went
    with its namespace; only a run older than ``STALE_SECONDS`` with no process left in
    its cgroup is touched, so runs in progress are safe.

    Returns:
        The folders removed.
    """
    mount = cgroup2_mount()
    removed = []
    mounts = Path("/proc/self/mountinfo").read_text()
    for folder in SHM.glob(f"{PREFIX}*"):
        cgroup = (mount / _own_cgroup2().lstrip("/") / folder.name) if mount else None
        try:
            age = time.time() - folder.stat().st_mtime
        except OSError:
            continue
        if age < STALE_SECONDS or str(folder) in mounts:
            continue
        if cgroup is not None and _cgroup_pids(cgroup):
            continue
        for directory in (
            sorted(_cgroup_tree(cgroup), key=lambda p: -len(p.parts)) if cgroup else []
        ):
            with contextlib.suppress(OSError):
                directory.rmdir()
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


def _child_named(parent: int, name: str) -> int:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        if ppid == parent and comm == name:
            return int(entry.name)
    return 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _cgroup_tree(root: Path) -> list[Path]:
    if not root.exists():
        return []
    return [root, *(p for p in root.rglob("*") if p.is_dir())]


def _cgroup_pids(root: Path) -> list[int]:
    pids = []
    for directory in _cgroup_tree(root):
        try:
            pids += [int(p) for p in (directory / "cgroup.procs").read_text().split()]
        except OSError:
            continue
    return pids
