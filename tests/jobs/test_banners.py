"""mpiexec's banners are dropped from a failed job's output, and nothing else is (issue 35:
MPICH's "BAD TERMINATION" box, Open MPI's MPI_ABORT and prterun boxes around shoal's own
report, which names the PE and the real error)."""

from __future__ import annotations

import os

import pytest
from support.commands import last_line

from shoal.banners import Filter

HYDRA = b"""
===================================================================================
=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES
=   PID 18063 RUNNING AT vm
=   EXIT CODE: 9
=   CLEANING UP REMAINING PROCESSES
=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES
===================================================================================
YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Killed (signal 9)
This typically refers to a problem with your application.
Please see the FAQ page for debugging suggestions
"""

OPEN_MPI = b"""--------------------------------------------------------------------------
MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD
  Proc: [[4629,1],1]
  Errorcode: 1

NOTE: invoking MPI_ABORT causes Open MPI to kill all MPI processes.
--------------------------------------------------------------------------
--------------------------------------------------------------------------
prterun has exited due to process rank 1 with PID 0 on node vm calling
"abort".
--------------------------------------------------------------------------
"""

#: an Open MPI box that is the launcher's own error: kept
SLOTS = b"""--------------------------------------------------------------------------
There are not enough slots available in the system to satisfy the 9
slots that were requested by the application:
--------------------------------------------------------------------------
"""


def _filtered(data: bytes, step: int) -> bytes:
    read, write = os.pipe()
    f = Filter(write)
    for i in range(0, len(data), step):
        f.feed(data[i:i + step])
    f.close()
    os.close(write)
    with os.fdopen(read, "rb") as r:
        return r.read()


@pytest.mark.parametrize("step", [1, 7, 4096])
def test_banners_are_dropped_and_the_rest_kept_whole(step):
    data = b"before\n\n  kept, with a blank line before\n" + HYDRA + b"between\n" + OPEN_MPI + SLOTS + b"progress 50%"
    assert _filtered(data, step) == (b"before\n\n  kept, with a blank line before\nbetween\n" + SLOTS + b"progress 50%")


def test_the_nul_byte_open_mpis_launcher_ends_with_is_dropped():
    assert _filtered(b"out\n\0", 1) == b"out\n" and _filtered(b"\0a\0\n", 1) == b"\0a\0\n"


def test_a_line_not_yet_ended_goes_through_at_once():
    read, write = os.pipe()
    f = Filter(write)
    f.feed(b"Progress: 10%")  # a progress bar, no line end yet
    os.set_blocking(read, False)
    assert os.read(read, 100) == b"Progress: 10%"
    f.feed(b"\r" + b"=" * 10)  # a bar drawn with "=": held only while it may be a banner's rule
    f.close()
    os.close(write)
    assert os.read(read, 100) == b"\r" + b"=" * 10


@pytest.mark.mpi
@pytest.mark.parametrize("pes", [2, 3])
@pytest.mark.parametrize("how", ["os._exit(0)", "raise KeyError('missing')"])
def test_a_failed_job_shows_no_launcher_banner(mpi_job, pes, how):
    job = mpi_job(
        f"""
        import os, shoal
        class W(shoal.Chare):
            def go(self):
                if shoal.my_pe() == 1:
                    {how}
        def main(args):
            shoal.Group(W).go()
            shoal.quiescence().get()
        shoal.start(main)
        """,
        n=pes,
        env={"SHOAL_DEADLOCK_TIMEOUT": "600"},
    )
    assert job.returncode == 1, job
    out = job.stdout + job.stderr
    for banner in ("BAD TERMINATION", "FAQ page", "MPI_ABORT was invoked", "has exited due to process rank"):
        assert banner not in out, job
    last = last_line(job.stderr)
    # PE 1 is named; a PE that mpiexec killed as PE 1 vanished may be named beside it when the
    # launcher saw both processes gone in one look (a busy machine), which it says truly
    assert last.startswith("shoal run: the job failed (exit code 1): PE ") and "PE 1" in last.split(":")[2], job
