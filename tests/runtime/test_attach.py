"""shoal.attach(): a job started from the middle of a script, in-process and under mpiexec."""

from __future__ import annotations

import subprocess
import sys

import pytest
from support.commands import clean_env

import shoal


class Where(shoal.Chare):
    def pe(self) -> int:
        return shoal.my_pe()


def test_attach_in_process_then_detach():
    with pytest.raises(shoal.NotRunningError):
        shoal.my_pe()
    assert shoal.attach(transport="inproc", pes=3) == 0
    try:
        assert shoal.num_pes() == 3 and shoal.my_pe() == 0
        assert shoal.attach() == 0  # inside a running job: only says which PE this is
        g = shoal.Group(Where)
        assert sorted(g.pe(ret=True).get()) == [0, 1, 2]
    finally:
        shoal.detach()
    with pytest.raises(shoal.NotRunningError):
        shoal.my_pe()
    shoal.detach()  # nothing attached: does nothing


SCRIPT = """\
import sys
import shoal

print("before attach on every PE", flush=True)


class Where(shoal.Chare):
    def pe(self):
        return shoal.my_pe()


pe = shoal.attach()
print(f"after attach: PE {pe} of {shoal.num_pes()}", flush=True)
g = shoal.Group(Where)
print("group on", sorted(g.pe(ret=True).get()), flush=True)
if len(sys.argv) > 1:
    raise RuntimeError("the script failed after attach")
"""


@pytest.mark.mpi
def test_attach_under_mpiexec(mpi_job):
    job = mpi_job(SCRIPT, n=3)
    assert job.returncode == 0, job
    assert job.stdout.count("before attach on every PE") == 3, job
    assert job.stdout.count("after attach") == 1 and "after attach: PE 0 of 3" in job.stdout, job
    assert "group on [0, 1, 2]" in job.stdout, job


@pytest.mark.mpi
def test_an_error_after_attach_ends_the_mpi_job(mpi_job):
    job = mpi_job(SCRIPT, n=2, args=("fail",))
    assert job.returncode != 0, job
    assert "the script failed after attach" in job.stderr, job


def test_attach_in_a_plain_python_script(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(SCRIPT)
    env = clean_env()
    env["SHOAL_PES"] = "2"
    proc = subprocess.run([sys.executable, str(prog)], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "after attach: PE 0 of 2" in proc.stdout and "group on [0, 1]" in proc.stdout
