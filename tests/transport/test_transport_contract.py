"""The transport contract (``tests/support/transport_contract.py``) run against every transport.

In process, every rank of an :class:`~shoal._transport.inproc.InprocHub` is driven
from one loop; under MPI, ``mpiexec`` runs the same checks as a script, one process
per rank.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.commands import mpiexec_env
from support import transport_contract as contract

from shoal._transport import TRANSPORTS

SCRIPT = Path(contract.__file__)

#: How each registered transport runs the contract; a new transport needs an entry.
RUNNERS = {"inproc": "test_inproc_contract", "mpi": "test_mpi_contract"}


def test_every_registered_transport_runs_the_contract():
    assert set(TRANSPORTS) == set(RUNNERS), (
        f"registered transports {sorted(TRANSPORTS)} but the contract runs on {sorted(RUNNERS)}"
    )
    for test in RUNNERS.values():
        assert callable(globals()[test])


# -- in process ------------------------------------------------------------------
@pytest.mark.parametrize("size,threshold", [(2, 1024), (2, 64 * 1024), (3, 4096)], ids=["2pe-1k", "2pe-64k", "3pe-4k"])
@pytest.mark.parametrize("check", list(contract.CHECKS))
def test_inproc_contract(check, size, threshold):
    endpoints = contract.inproc_endpoints(size, threshold)
    contract.run_lockstep(endpoints, contract.CHECKS[check])


def test_inproc_checks_can_fail():
    """The harness itself: a transport that reorders, corrupts or ignores the allocator is caught."""
    from shoal._transport.inproc import InprocTransport

    class Reordering(InprocTransport):
        def poll(self, deliver):
            box = self.hub.mailboxes[self.rank]
            box.reverse()
            return super().poll(deliver)

    class Corrupting(InprocTransport):
        def send(self, dest, header, segments):
            segments = [bytes(memoryview(s).cast("B"))[:-1] + b"?" if memoryview(s).nbytes > 100 else s for s in segments]
            super().send(dest, header, segments)

    class NoAllocator(InprocTransport):
        def send(self, dest, header, segments):
            self.hub.mailboxes[dest].append((header, [bytearray(memoryview(s).cast("B")) for s in segments]))

    class Aliasing(InprocTransport):  # keeps references to small segments: later writes leak
        def send(self, dest, header, segments):
            super().send(dest, header, segments)
            header, copies = self.hub.mailboxes[dest][-1]
            small = [s if memoryview(s).nbytes < self.rendezvous_threshold else c for s, c in zip(segments, copies)]
            self.hub.mailboxes[dest][-1] = (header, small)

    cases = [
        (Reordering, "fifo", "out of order"),
        (Corrupting, "sizes", "differs"),
        (NoAllocator, "big_array", "allocator was asked 0 times"),
        (NoAllocator, "multi_segment", "did not land in a buffer"),
        (Aliasing, "buffer_reuse", "leaked"),
    ]
    for cls, check, message in cases:
        endpoints = contract.inproc_endpoints(2, 1024)
        for ep in endpoints:
            ep.t.__class__ = cls
        with pytest.raises(AssertionError, match=message):
            contract.run_lockstep(endpoints, contract.CHECKS[check])


def test_inproc_stall_is_reported_not_hung():
    def never(ep):
        yield from ep.expect(1)

    with pytest.raises(AssertionError, match="stalled"):
        contract.run_lockstep(contract.inproc_endpoints(2, 1024), never, timeout=5)


def test_inproc_invalid_rank_names_the_pe():
    t = contract.inproc_endpoints(2, 1024)[0].t
    with pytest.raises(ValueError, match="PE 2"):
        t.send(2, b"h", [b"x"])


# -- under MPI -------------------------------------------------------------------
def _mpiexec() -> str:
    beside = Path(sys.executable).parent / "mpiexec"
    found = str(beside) if beside.exists() else shutil.which("mpiexec")
    if not found:
        pytest.skip("no mpiexec beside the interpreter or on PATH")
    return found


def _run_script(n: int, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = mpiexec_env()
    cmd = [_mpiexec(), "-n", str(n), sys.executable, str(SCRIPT), *args]
    return subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.mpi
@pytest.mark.parametrize("path", ["compiled", "python"])
@pytest.mark.parametrize("n", [2, 3])
def test_mpi_contract(n, path):
    proc = _run_script(n, *(["--python"] if path == "python" else []))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "FAIL" not in out, out
    ok = [line for line in proc.stdout.splitlines() if line.startswith("OK ")]
    assert ok == [f"OK {len(contract.MPI_DEFAULT)} checks on {n} PEs (mpi, rendezvous_threshold=65536)"], out
    for name in contract.MPI_DEFAULT:
        assert f"ok {name} " in proc.stdout, out


@pytest.mark.mpi
def test_mpi_contract_small_threshold():
    """A threshold of 1 KiB puts most segments on the rendezvous path and shrinks eager frames."""
    proc = _run_script(2, "--threshold", "1024", "--checks", "fifo,sizes,multi_segment,crossfire")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK 4 checks on 2 PEs (mpi, rendezvous_threshold=1024)" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.mpi
@pytest.mark.parametrize("path", ["compiled", "python"])
@pytest.mark.parametrize("shared", ["1", "0"])
def test_mpi_contract_with_and_without_shared_copies(shared, path):
    """Every on-node rendezvous message copied by both PEs (shared_copy.py), or none."""
    proc = _run_script(3, "--shared-copy", shared, *(["--python"] if path == "python" else []))
    out = proc.stdout + proc.stderr
    if shared != "0" and "shared_copy=0" in proc.stdout:
        pytest.skip("this machine does not let processes read each other's memory (cross-memory attach)")
    assert proc.returncode == 0 and "FAIL" not in out, out
    assert f"shared_copy={shared}" in proc.stdout, out
    assert f"OK {len(contract.MPI_DEFAULT)} checks on 3 PEs" in proc.stdout, out


@pytest.mark.mpi
def test_mpi_harness_reports_failure():
    """A failing check ends the whole job with a non-zero code (no hang, no false OK)."""
    proc = _run_script(2, "--checks", "no_such_check", timeout=30)
    assert proc.returncode != 0
    assert "FAIL no_such_check" in proc.stdout
    assert "\nOK " not in "\n" + proc.stdout


@pytest.mark.mpi
def test_mpi_invalid_rank():
    proc = _run_script(2, "--checks", "invalid_rank", timeout=30)
    out = proc.stdout + proc.stderr
    if proc.returncode != 0 and "did not raise" not in out:
        pytest.fail(f"invalid_rank failed for another reason:\n{out}")
    assert proc.returncode == 0, out


def test_inproc_abort_ends_the_process_with_the_code():
    t = contract.inproc_endpoints(2, 1024)[1].t
    with pytest.raises(SystemExit) as info:
        t.abort(7)
    assert info.value.code == 7
