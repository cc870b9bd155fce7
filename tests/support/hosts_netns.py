"""Two real hosts on this machine, for tests: ``with two_hosts(tmp_path) as hosts``.

Each host is a set of Linux namespaces made here and held by one ``sleep infinity``
started with ``unshare --net --uts --mount``: its own network stack (``lo`` and one end
of a veth pair), its own host name (UTS), and its own view of ``/etc/hosts``,
``/etc/resolv.conf`` and ``/sys`` (bind mounts in a private mount namespace; the real
files are never touched). MPICH's Hydra is told of the hosts by name: ``mpiexec`` runs
inside host A and starts the proxy of every other host with a bootstrap script
(``-launcher rsh -launcher-exec``) that enters that host's namespaces with ``nsenter``
instead of ssh. The PEs then talk over TCP on the veth link.

Nothing but these namespaces is contacted. The namespaces have no name in
``/var/run/netns`` and no link to the machine's own network: the veth pair is made
inside host A with its peer created directly in host B, so neither end ever exists
outside them. Addresses are in :data:`SUBNET`, used only between them. Killing the
holders (at exit, or when the test process dies: they carry a parent-death signal)
frees the namespaces, and the veth pair, mounts and host names go with them.

The hosts (see :class:`Hosts`):

* ``a`` and ``b``: ``shoalhost-a`` (10.251.77.1) and ``shoalhost-b`` (10.251.77.2),
  linked by the veth pair ``shoal0``; ``mpiexec`` runs in ``a``.
* ``unplugged``: ``shoalhost-c``, a namespace with ``lo`` only. The bootstrap reaches
  it, but the proxy started there cannot reach ``mpiexec``.
* ``dead_name``: ``shoalhost-gone`` (10.251.77.3), an address in the subnet with nothing
  behind it; the bootstrap probes port 22 on it as ssh would and fails ("No route to
  host", after the ~3 s of unanswered ARP).
* any other name: refused by the bootstrap ("unknown host") without a look-up.

The pitfalls found while making it work:

* Hydra's ``-launcher ssh`` passes ``-x`` before the host name; ``-launcher rsh`` passes
  ``HOST COMMAND...`` only. Hydra starts the proxy of the launch host (``a``) itself.
* ``nsenter --mount`` changes the working directory to ``/``: pass ``--wd``.
* ``/sys`` keeps showing the network devices of the namespace that mounted it, so UCX
  (MPICH's default netmod in the ``mpich`` wheel) sees no ``shoal0`` until sysfs is
  mounted again inside each host's mount namespace.
* UCX still judges the hosts one machine (they share the kernel, ``/dev/shm`` and the
  PID space) and, left alone, moves the data through shared memory and
  ``process_vm_readv`` (``sysv``/``cma``), not over the link (a 4 MiB exchange put only
  ~17 KB on it): ``UCX_TLS=self,tcp`` and ``UCX_NET_DEVICES=shoal0`` make it use TCP on
  the link (both ends of the veth pair are named ``shoal0`` so one device name serves
  every host). :meth:`Hosts.link_bytes` counts what crossed the link. The OFI netmod
  (``MPIR_CVAR_CH4_NETMOD=ofi``, ``FI_PROVIDER=tcp``, ``FI_TCP_IFACE=shoal0``) works too.
* When the proxy on the unplugged host fails, ``mpiexec`` quits at once and may drop the
  reason the proxy wrote after its ``[proxy:1@shoalhost-c]`` prefix.
* A veth end reports its carrier a little after ``ip link set up`` (up to a second, the
  kernel's link-watch delay); UCX skips a device that is not up yet ("network device
  'shoal0' is not available"), so setup waits until ``operstate`` says ``up`` at both ends.
* MPICH puts PEs on nodes by host name (``MPI_COMM_TYPE_SHARED``), so with distinct UTS
  names every host is its own node, as on a cluster.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

__all__ = ["SUBNET", "LINK", "HostsUnavailable", "Host", "Hosts", "two_hosts"]

#: The private subnet used only between the namespaces made here.
SUBNET = "10.251.77.0/29"
#: The name of the veth link in every host (the same name at both ends).
LINK = "shoal0"

_PREFIX_LEN = SUBNET.split("/")[1]
_A = ("shoalhost-a", "10.251.77.1")
_B = ("shoalhost-b", "10.251.77.2")
_DEAD = ("shoalhost-gone", "10.251.77.3")
_UNPLUGGED = ("shoalhost-c", "10.251.77.4")  # in /etc/hosts only: no interface has it
#: Seconds any one setup command may take, and the bootstrap's probe of a dead address.
_STEP_TIMEOUT = 15.0
_PROBE_TIMEOUT = 10.0
#: Variables of an enclosing job or launcher that would mislead this one.
_FOREIGN_PREFIXES = ("SHOAL_", "PMI_", "PMIX_", "HYDRA_", "MPIR_CVAR_", "OMPI_", "SLURM_", "UCX_", "FI_")


class HostsUnavailable(RuntimeError):
    """Namespaces (or the tools to make them) are not available here; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Host:
    """One namespace host: its host name, its address (``None`` off the link) and the
    PID of the process that holds its namespaces."""

    name: str
    address: str | None
    pid: int


@dataclass
class Hosts:
    """The hosts made by :func:`two_hosts`, and how to launch MPI jobs across them."""

    a: Host
    b: Host
    unplugged: Host
    dead_name: str
    dead_address: str
    mpiexec: Path
    bootstrap: Path
    workdir: Path
    env: dict[str, str] = field(default_factory=dict)

    @property
    def names(self) -> tuple[str, str]:
        """The host names of the two linked hosts."""
        return (self.a.name, self.b.name)

    def mpiexec_command(self, n: int, argv: Sequence[str], hosts: Sequence[str] | None = None) -> list[str]:
        """The command that runs ``argv`` as ``n`` MPI processes on ``hosts`` (default: the
        two linked hosts, round robin), started from host ``a``; run it with :attr:`env`."""
        return [
            "nsenter", "-t", str(self.a.pid), "--net", "--uts", "--mount", f"--wd={self.workdir}",
            str(self.mpiexec), "-launcher", "rsh", "-launcher-exec", str(self.bootstrap),
            "-hosts", ",".join(hosts or self.names), "-n", str(n), *argv,
        ]

    def link_bytes(self) -> int:
        """Bytes sent plus received so far on host ``a``'s end of the link."""
        stats = Path(f"/proc/{self.a.pid}/root/sys/class/net/{LINK}/statistics")
        return sum(int((stats / f).read_text()) for f in ("tx_bytes", "rx_bytes"))

    def processes(self) -> list[int]:
        """PIDs of the processes inside the hosts' namespaces, their holders left out."""
        return _processes_in(self._holders())

    def _holders(self) -> dict[int, str]:
        return {h.pid: _netns(h.pid) for h in (self.a, self.b, self.unplugged)}


def _netns(pid: int | str) -> str:
    return os.readlink(f"/proc/{pid}/ns/net")


def _processes_in(holders: dict[int, str]) -> list[int]:
    spaces = {ns for ns in holders.values() if ns}
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in holders:
            continue
        with contextlib.suppress(OSError):  # gone, or a zombie (its namespaces unreadable)
            if _netns(entry) in spaces:
                found.append(int(entry))
    return found


def _die_with_parent() -> None:
    """In the holder before exec: get SIGKILL when the test process dies."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _step(argv: Sequence[str]) -> None:
    """Run one setup command; any failure means the namespaces cannot be made here."""
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=_STEP_TIMEOUT,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise HostsUnavailable(f"{' '.join(argv)}: {exc}") from exc
    if proc.returncode != 0:
        raise HostsUnavailable(f"{' '.join(argv)}: exit {proc.returncode}: {proc.stderr.strip()}")


def _hold(holders: list[subprocess.Popen], unshare: str) -> int:
    """Start one namespace holder (appended to ``holders`` at once); return its PID."""
    try:
        proc = subprocess.Popen([unshare, "--net", "--uts", "--mount", "--propagation", "private",
                                 "sleep", "infinity"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, preexec_fn=_die_with_parent)
    except OSError as exc:
        raise HostsUnavailable(f"unshare: {exc}") from exc
    holders.append(proc)
    own, deadline = _netns("self"), time.monotonic() + _STEP_TIMEOUT
    while time.monotonic() < deadline:  # unshare execs sleep once the namespaces are made
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace").strip() if proc.stderr else ""
            raise HostsUnavailable(f"unshare --net --uts --mount: exit {proc.returncode}: {err}")
        with contextlib.suppress(OSError):
            if Path(f"/proc/{proc.pid}/comm").read_text().strip() == "sleep" and _netns(proc.pid) != own:
                return proc.pid
        time.sleep(0.01)
    raise HostsUnavailable("unshare --net --uts --mount: the holder never entered its namespaces")


def _stop(holders: list[subprocess.Popen]) -> None:
    """Kill every process inside the namespaces, then their holders, and reap them."""
    spaces: dict[int, str] = {}
    for proc in holders:
        with contextlib.suppress(OSError):
            spaces[proc.pid] = _netns(proc.pid)
    deadline = time.monotonic() + _STEP_TIMEOUT
    while (inside := _processes_in(spaces)) and time.monotonic() < deadline:
        for pid in inside:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
    for proc in holders:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=_STEP_TIMEOUT)
        if proc.stderr:
            proc.stderr.close()


_BOOTSTRAP = '''\
#!{python}
"""Hydra's launcher for the namespace hosts: ``bootstrap HOST COMMAND...`` runs COMMAND
in HOST's namespaces, as ssh would run it on HOST. Written by tests/support/hosts_netns.py."""
import ipaddress, os, socket, sys

HOSTS = {hosts!r}          # name or address -> PID holding that host's namespaces
DEAD = {dead!r}            # name -> address in the subnet with nothing behind it
SUBNET = ipaddress.ip_network({subnet!r})
host, command = sys.argv[1], " ".join(sys.argv[2:])
if host in HOSTS:
    os.execvp("nsenter", ["nsenter", "-t", str(HOSTS[host]), "--net", "--uts", "--mount",
                          "--wd=" + {workdir!r}, "/bin/sh", "-c", command])
address = DEAD.get(host, host)
try:
    inside = ipaddress.ip_address(address) in SUBNET
except ValueError:
    inside = False
if not inside:  # never look a name up, never go outside the subnet
    print(f"shoal-bootstrap: unknown host {{host}}", file=sys.stderr)
    sys.exit(255)
try:  # what ssh would see; only an address on the namespaces' own link is tried
    socket.create_connection((address, 22), timeout={probe}).close()
    reason = "Connection refused"
except OSError as exc:
    reason = exc.strerror or str(exc)
print(f"shoal-bootstrap: ssh: connect to host {{host}} port 22: {{reason}}", file=sys.stderr)
sys.exit(255)
'''


def _wait_up(pids: Sequence[int]) -> None:
    """Wait until the link is up at every end: the kernel reports a veth's carrier a little
    after ``ip link set up`` (up to a second), and UCX ignores a device that is not up yet."""
    deadline = time.monotonic() + _STEP_TIMEOUT
    states = [Path(f"/proc/{pid}/root/sys/class/net/{LINK}/operstate") for pid in pids]
    while not all(state.read_text().strip() == "up" for state in states):
        if time.monotonic() > deadline:
            raise HostsUnavailable(f"the veth link {LINK} never came up")
        time.sleep(0.02)


def _tool(name: str) -> str:
    path = shutil.which(name) or next((f"{d}/{name}" for d in ("/usr/sbin", "/sbin", "/usr/bin")
                                        if os.access(f"{d}/{name}", os.X_OK)), None)
    if path is None:
        raise HostsUnavailable(f"{name} not found (util-linux / iproute2)")
    return path


def _hydra() -> Path:
    """The MPICH Hydra ``mpiexec`` next to this Python (the ``mpich`` wheel's), else on PATH."""
    here = Path(sys.executable).parent / "mpiexec"
    found = here if here.exists() else Path(shutil.which("mpiexec") or "mpiexec")
    try:
        info = subprocess.run([str(found), "-info"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise HostsUnavailable(f"no MPICH mpiexec: {exc}") from exc
    if "HYDRA" not in info:
        raise HostsUnavailable(f"{found} is not MPICH's Hydra")
    return found


@contextlib.contextmanager
def two_hosts(tmp_path: Path) -> Iterator[Hosts]:
    """Make the namespace hosts, yield a :class:`Hosts`, and tear everything down.

    Raises :class:`HostsUnavailable` (having left nothing behind) when this machine does
    not let the namespaces be made: not root, ``unshare``/``nsenter``/``ip`` missing,
    EPERM, no veth, or no MPICH Hydra ``mpiexec``.
    """
    if os.geteuid() != 0:
        raise HostsUnavailable("network namespaces need root")
    if not sys.platform.startswith("linux"):
        raise HostsUnavailable("network namespaces are Linux's")
    unshare, nsenter, ip = _tool("unshare"), _tool("nsenter"), _tool("ip")
    mpiexec = _hydra()

    workdir = Path(tmp_path)
    etc = workdir / "hosts-etc"
    etc.mkdir(exist_ok=True)
    (etc / "hosts").write_text("127.0.0.1 localhost\n::1 localhost\n"
                               + "".join(f"{addr} {name}\n" for name, addr in (_A, _B, _DEAD, _UNPLUGGED)))
    (etc / "resolv.conf").write_text("# the namespace hosts: names come from /etc/hosts only\n"
                                     "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")
    holders: list[subprocess.Popen] = []
    try:
        pids = {name: _hold(holders, unshare) for name, _ in (_A, _B, _UNPLUGGED)}

        def inside(pid: int, *argv: str, spaces: Sequence[str] = ("--net",)) -> None:
            _step([nsenter, "-t", str(pid), *spaces, *argv])

        for name, pid in pids.items():
            inside(pid, "hostname", name, spaces=("--uts",))
            for f in ("hosts", "resolv.conf"):
                if os.path.exists(f"/etc/{f}"):
                    inside(pid, "mount", "--bind", str(etc / f), f"/etc/{f}", spaces=("--mount",))
            inside(pid, "mount", "-t", "sysfs", "sysfs", "/sys", spaces=("--net", "--mount"))
            inside(pid, ip, "link", "set", "lo", "up")
        a, b = pids[_A[0]], pids[_B[0]]
        inside(a, ip, "link", "add", LINK, "type", "veth", "peer", "name", LINK, "netns", f"/proc/{b}/ns/net")
        for pid, (_, addr) in ((a, _A), (b, _B)):
            inside(pid, ip, "addr", "add", f"{addr}/{_PREFIX_LEN}", "dev", LINK)
            inside(pid, ip, "link", "set", LINK, "up")
        _wait_up([a, b])

        bootstrap = workdir / "hosts-bootstrap.py"
        known = {name: pids[name] for name in pids} | {_A[1]: a, _B[1]: b}
        bootstrap.write_text(_BOOTSTRAP.format(python=sys.executable, hosts=known, dead={_DEAD[0]: _DEAD[1]},
                                               subnet=SUBNET, workdir=str(workdir), probe=_PROBE_TIMEOUT))
        bootstrap.chmod(0o755)

        env = {k: v for k, v in os.environ.items() if not k.startswith(_FOREIGN_PREFIXES)}
        env.update(UCX_TLS="self,tcp", UCX_NET_DEVICES=LINK, FI_PROVIDER="tcp", FI_TCP_IFACE=LINK)
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", os.defpath)])
        yield Hosts(a=Host(_A[0], _A[1], a), b=Host(_B[0], _B[1], b),
                    unplugged=Host(_UNPLUGGED[0], None, pids[_UNPLUGGED[0]]),
                    dead_name=_DEAD[0], dead_address=_DEAD[1], mpiexec=mpiexec, bootstrap=bootstrap,
                    workdir=workdir, env=env)
    finally:
        _stop(holders)
