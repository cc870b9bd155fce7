"""PEs on really separate hosts: network, UTS and mount namespaces made here (see
tests/support/hosts_netns.py), one PE per host, MPICH's Hydra launching across them and the PEs
talking over TCP on a veth link. Nothing outside the namespaces is contacted.

Skipped, with the reason, where the namespaces cannot be made (not root, no
``unshare``/``nsenter``/``ip``, EPERM, no MPICH Hydra).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Iterator

import pytest
from support import ROOT

from support.hosts_netns import Hosts, HostsUnavailable, two_hosts

pytestmark = pytest.mark.mpi

FEATURES = ROOT / "tests" / "programs" / "features.py"
#: The most a job that cannot reach a host may take to fail (the dead address costs ~3 s of ARP).
FAIL_WITHIN = 30.0

WHERE = """\
    import socket, shoal

    class W(shoal.Chare):
        def where(self):
            return shoal.my_pe(), socket.gethostname(), shoal.topology().my_node

    def main(args):
        print(sorted(shoal.Group(W).where(ret=True).get()))
        print("NODES", shoal.topology().num_nodes)

    shoal.start(main)
"""

HELLO = """\
    import os
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    rank = world.Get_rank()
    node = world.Split_type(MPI.COMM_TYPE_SHARED).Get_size()
    os.write(1, f"HELLO {MPI.Get_processor_name()} {rank} {node}\\n".encode())  # one write: lines from two hosts interleave
    if rank == 0:
        world.Send(bytearray(4 << 20), dest=1)
        got = bytearray(8)
        world.Recv(got, source=1)
        print("ECHO", int.from_bytes(got, "little"), flush=True)
    else:
        buf = bytearray(4 << 20)
        world.Recv(buf, source=0)
        world.Send(len(buf).to_bytes(8, "little"), dest=0)
"""


@pytest.fixture
def hosts(tmp_path: Path) -> Iterator[Hosts]:
    """Two linked hosts (and the failing ones); torn down even when the test fails."""
    try:
        with two_hosts(tmp_path) as made:
            yield made
    except HostsUnavailable as exc:
        pytest.skip(f"no namespace hosts here: {exc.reason}")


def run_on(hosts: Hosts, argv: list[str], n: int = 2, on: list[str] | None = None,
           timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``argv`` as ``n`` MPI processes on the hosts ``on`` (default: the linked two)."""
    return subprocess.run(hosts.mpiexec_command(n, argv, on), env=hosts.env, capture_output=True, text=True,
                          timeout=timeout, cwd=hosts.workdir, stdin=subprocess.DEVNULL)


def program(hosts: Hosts, source: str, name: str) -> str:
    path = hosts.workdir / name
    path.write_text(textwrap.dedent(source))
    return str(path)


def test_mpi_sees_two_nodes(hosts: Hosts) -> None:
    before = hosts.link_bytes()
    job = run_on(hosts, [sys.executable, program(hosts, HELLO, "hello.py")], timeout=60)
    assert job.returncode == 0, job
    lines = sorted(line for line in job.stdout.splitlines() if line.startswith("HELLO"))
    assert lines == ["HELLO shoalhost-a 0 1", "HELLO shoalhost-b 1 1"], job.stdout  # one PE per node
    assert "ECHO 4194304" in job.stdout
    assert hosts.link_bytes() - before >= 4 << 20  # the 4 MiB went over the link, not shared memory


def test_shoal_pes_on_two_hosts(hosts: Hosts) -> None:
    job = run_on(hosts, [sys.executable, "-m", "shoal", program(hosts, WHERE, "where.py")], timeout=60)
    assert job.returncode == 0, job
    assert "[(0, 'shoalhost-a', 0), (1, 'shoalhost-b', 1)]" in job.stdout, job
    assert "NODES 2" in job.stdout, job


def test_features_across_two_hosts(hosts: Hosts) -> None:
    before = hosts.link_bytes()
    job = run_on(hosts, [sys.executable, "-m", "shoal", str(FEATURES)], timeout=120)
    assert job.returncode == 0, job
    assert job.stdout.rstrip().endswith("ALL OK"), job
    assert hosts.link_bytes() - before >= 4 << 20  # its 4 MiB channel messages crossed the link


@pytest.mark.parametrize("which", ["dead address", "unplugged host", "unknown name"])
def test_unreachable_host_fails_fast(hosts: Hosts, which: str) -> None:
    """A job with a host it cannot reach exits non-zero, well before any timeout."""
    # What says why (any one of them): the bootstrap writes its reason in one line before it
    # exits, but the proxy writes its "[proxy:1@host] " prefix and the reason separately and
    # mpiexec, quitting at once, sometimes drops the reason (seen under load).
    other, says = {
        "dead address": (hosts.dead_name, ("port 22: No route to host",)),  # nothing behind it in the subnet
        "unplugged host": (hosts.unplugged.name, ("Network is unreachable", f"[proxy:1@{hosts.unplugged.name}]")),
        "unknown name": ("shoalhost-nowhere", ("unknown host shoalhost-nowhere",)),  # the bootstrap refuses it
    }[which]
    prog = program(hosts, WHERE, "where.py")
    start = time.monotonic()
    try:
        job = run_on(hosts, [sys.executable, "-m", "shoal", prog], on=[hosts.a.name, other], timeout=FAIL_WITHIN)
    except subprocess.TimeoutExpired:
        pytest.fail(f"mpiexec with {which} {other!r} still running after {FAIL_WITHIN} s")
    took = time.monotonic() - start
    assert job.returncode != 0, job  # and within FAIL_WITHIN: run_on's timeout fails the test otherwise
    assert any(reason in job.stderr for reason in says), job
    assert "Launch proxy failed" in job.stderr, job
    print(f"{which}: exit {job.returncode} after {took:.1f} s\n{job.stderr}")
    deadline = time.monotonic() + 10  # what mpiexec started in host a (its proxy, the PE) goes too
    while (left := hosts.processes()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, [Path(f"/proc/{pid}/cmdline").read_bytes() for pid in left if os.path.exists(f"/proc/{pid}")]
