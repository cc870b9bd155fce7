"""shoal under a real Slurm (tests/support/slurm_cluster.py: a one-node cluster started here, as root).

``srun --mpi=pmi2`` starts the PEs itself (the mpich wheel's libmpi speaks PMI to srun's
pmi2 plugin); ``shoal run`` inside an ``salloc`` allocation launches through it. The
module skips, with the reason, where the cluster cannot start (no slurm-wlm/munge, not
root, a container that forbids the daemons). Every timeout is a hang guard.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Iterator

import pytest

from support.slurm_cluster import SlurmCluster, SlurmUnavailable, one_node_slurm

from shoal.launcher import find_mpiexec
from shoal.launchers import family

pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(family(find_mpiexec()) == "openmpi",
                       reason="srun --mpi=pmi2 serves MPICH-family libraries; Open MPI needs Slurm's PMIx plugin, "
                              "which Debian's slurm-wlm does not ship"),
]

HANG_GUARD = 60

PES_PROGRAM = """\
import shoal
class W(shoal.Chare):
    def pe(self): return shoal.my_pe()
def main(args):
    print(sorted(shoal.Group(W).pe(ret=True).get()))
shoal.start(main)
"""

RAISES_ON_PE_1 = """\
import shoal
class W(shoal.Chare):
    def pe(self):
        if shoal.my_pe() == 1:
            raise ValueError("deliberate failure on PE 1")
        return shoal.my_pe()
def main(args):
    print(sorted(shoal.Group(W).pe(ret=True).get()))
shoal.start(main)
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """One cluster for the module; every test skips with the reason when it cannot start."""
    try:
        with one_node_slurm(tmp_path_factory.mktemp("slurm"), cpus=4) as running:  # room for -n 3
            yield running
    except SlurmUnavailable as err:
        pytest.skip(f"no one-node Slurm here: {err.reason}")


def _job(cluster: SlurmCluster, tmp_path: Path, source: str, *launch: str) -> subprocess.CompletedProcess[str]:
    """Write ``source`` to prog.py in ``tmp_path`` and run ``launch`` + its arguments there."""
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent(source))
    env = {k: v for k, v in cluster.env.items() if not k.startswith("SHOAL_")}
    return subprocess.run([*launch, str(prog)], capture_output=True, text=True, timeout=HANG_GUARD,
                          env=env, cwd=tmp_path, stdin=subprocess.DEVNULL)


def _explain(proc: subprocess.CompletedProcess[str], cluster: SlurmCluster) -> str:
    return f"rc={proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}\n{cluster.logs(20)}"


def test_srun_pmi2_starts_every_pe(cluster: SlurmCluster, tmp_path: Path) -> None:
    proc = _job(cluster, tmp_path, PES_PROGRAM, "srun", "--mpi=pmi2", "-n", "2", sys.executable, "-m", "shoal")
    assert proc.returncode == 0, _explain(proc, cluster)
    assert proc.stdout.strip().splitlines() == ["[0, 1]"], _explain(proc, cluster)


def test_srun_job_raising_on_one_pe_fails_with_its_error(cluster: SlurmCluster, tmp_path: Path) -> None:
    proc = _job(cluster, tmp_path, RAISES_ON_PE_1, "srun", "--mpi=pmi2", "-n", "2", sys.executable, "-m", "shoal")
    assert proc.returncode != 0, _explain(proc, cluster)
    assert "deliberate failure on PE 1" in proc.stderr, _explain(proc, cluster)


def test_shoal_run_inside_salloc_takes_the_allocations_size(cluster: SlurmCluster, tmp_path: Path) -> None:
    """No -n: the allocation's 3 tasks (shoal run's default outside one is 2), through srun."""
    proc = _job(cluster, tmp_path, PES_PROGRAM, "salloc", "-n", "3", sys.executable, "-m", "shoal", "run")
    assert proc.returncode == 0, _explain(proc, cluster)
    assert proc.stdout.strip().splitlines() == ["[0, 1, 2]"], _explain(proc, cluster)
    env = {k: v for k, v in cluster.env.items() if not k.startswith("SHOAL_")}
    info = subprocess.run(["salloc", "-n", "3", sys.executable, "-m", "shoal", "info"], capture_output=True,
                          text=True, timeout=HANG_GUARD, env=env, cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert "srun --mpi=pmi2 -n 3" in info.stdout, _explain(info, cluster)


def test_shoal_run_in_a_batch_script(cluster: SlurmCluster, tmp_path: Path) -> None:
    out = tmp_path / "job.out"
    prog = tmp_path / "prog.py"
    prog.write_text(PES_PROGRAM)
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/sh\n#SBATCH -n 2\nexec {sys.executable} -m shoal run {prog}\n")
    env = {k: v for k, v in cluster.env.items() if not k.startswith("SHOAL_")}
    proc = subprocess.run(["sbatch", "--wait", "-o", str(out), str(script)], capture_output=True, text=True,
                          timeout=HANG_GUARD, env=env, cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, _explain(proc, cluster) + (out.read_text() if out.exists() else "")
    assert out.read_text().strip().splitlines()[-1] == "[0, 1]", out.read_text()


def test_srun_without_a_pmi_plugin_is_named_not_run_as_lone_jobs(cluster: SlurmCluster, tmp_path: Path) -> None:
    proc = _job(cluster, tmp_path, PES_PROGRAM, "srun", "--mpi=none", "-n", "2", sys.executable, "-m", "shoal")
    assert proc.returncode != 0, _explain(proc, cluster)
    assert "[0]" not in proc.stdout, _explain(proc, cluster)
    assert "srun started 2 tasks" in proc.stderr and "srun --mpi=pmi2" in proc.stderr, _explain(proc, cluster)
