"""The launcher's family and the command line shoal run builds for it (no job started)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from shoal.launchers import RootRefused, allocation_size, default_pes, family, in_allocation, plan


def _launcher(folder: Path, *beside: str) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "mpiexec"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    for name in beside:
        (folder / name).write_text("")
    return str(exe)


def test_each_family_is_named_by_the_files_beside_its_launcher(tmp_path: Path) -> None:
    assert family(_launcher(tmp_path / "ompi5", "prterun")) == "openmpi"
    assert family(_launcher(tmp_path / "ompi4", "orterun", "ompi_info")) == "openmpi"
    assert family(_launcher(tmp_path / "mpich", "mpiexec.hydra")) == "mpich"
    assert family(_launcher(tmp_path / "bare")) == "unknown"
    assert family("/usr/bin/srun") == "srun"


def test_a_symbolic_link_is_followed_to_its_family(tmp_path: Path) -> None:
    real = _launcher(tmp_path / "opt" / "openmpi" / "bin", "prterun")
    (tmp_path / "bin").mkdir()
    link = tmp_path / "bin" / "mpirun"
    link.symlink_to(real)
    assert family(str(link)) == "openmpi"


def test_open_mpi_is_asked_to_over_subscribe_only_past_the_cores(tmp_path: Path) -> None:
    exe = _launcher(tmp_path, "prterun")
    allowed = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    cores = len(os.sched_getaffinity(0))
    many = plan(exe, cores + 1, ["python", "prog.py"], allowed)
    assert many.command == [exe, "-n", str(cores + 1), "--oversubscribe", "python", "prog.py"]
    assert any("--oversubscribe" in note for note in many.notes)
    assert "--oversubscribe" not in plan(exe, cores, ["prog.py"], allowed).command


def test_mpich_gets_the_plain_command(tmp_path: Path) -> None:
    exe = _launcher(tmp_path, "mpiexec.hydra")
    assert plan(exe, 64, ["prog.py"], {}).command == [exe, "-n", "64", "prog.py"]


@pytest.mark.skipif(os.geteuid() != 0, reason="Open MPI refuses only root; these tests run as another user")
def test_open_mpi_as_root_is_refused_with_the_fix_not_allowed_silently(tmp_path: Path) -> None:
    exe = _launcher(tmp_path, "prterun")
    with pytest.raises(RootRefused, match="OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"):
        plan(exe, 2, ["prog.py"], {"OMPI_ALLOW_RUN_AS_ROOT": "1"})  # both are needed
    allowed = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    assert plan(exe, 2, ["prog.py"], allowed).command[:3] == [exe, "-n", "2"]


def test_inside_a_slurm_allocation_srun_starts_the_pes_on_its_tasks(tmp_path: Path) -> None:
    exe = _launcher(tmp_path, "mpiexec.hydra")
    env = {"SLURM_JOB_ID": "42", "SLURM_NTASKS": "6"}
    assert in_allocation(env) and allocation_size(env) == 6 and default_pes(env) == 6
    launch = plan(exe, default_pes(env), ["python", "prog.py"], env, srun="/usr/bin/srun")
    assert launch.command == ["/usr/bin/srun", "--mpi=pmi2", "-n", "6", "python", "prog.py"]
    assert launch.family == "srun"
    # outside one, srun is not used even where it is installed
    assert plan(exe, 2, ["prog.py"], {}, srun="/usr/bin/srun").command[0] == exe
    assert default_pes({}) == 2 and default_pes({"SLURM_JOB_ID": "7"}) == 2


def test_open_mpi_inside_an_allocation_keeps_its_own_launcher_and_slots(tmp_path: Path) -> None:
    exe = _launcher(tmp_path, "prterun")
    env = {"SLURM_JOB_ID": "42", "SLURM_NTASKS": "64", "OMPI_ALLOW_RUN_AS_ROOT": "1",
           "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    launch = plan(exe, 64, ["prog.py"], env, srun="/usr/bin/srun")
    assert launch.command == [exe, "-n", "64", "prog.py"]  # the allocation's slots, never --oversubscribe


def test_shoal_info_names_the_launcher_and_its_command() -> None:
    import subprocess

    out = subprocess.run([sys.executable, "-m", "shoal", "info"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = {line.split("  ", 1)[0]: line for line in out.stdout.splitlines()}
    assert "launcher" in lines and "(" in lines["launcher"], out.stdout
    assert any(key.startswith("shoal run -n ") for key in lines), out.stdout


@pytest.mark.mpi
def test_shoal_run_over_subscribes_open_mpi_by_itself(tmp_path: Path) -> None:
    """More PEs than cores, with no over-subscription setting in the environment: under
    Open MPI the job runs because shoal run asked for it (mpiexec alone refuses)."""
    import subprocess

    from shoal.launcher import find_mpiexec

    if family(find_mpiexec()) != "openmpi":
        pytest.skip("Open MPI's launcher is not the one in use here (make test-openmpi runs this)")
    prog = tmp_path / "prog.py"
    prog.write_text("import shoal\nshoal.start(lambda args: print('PES', shoal.num_pes()))\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SHOAL_", "PRTE_MCA_", "OMPI_MCA_rmaps"))}
    pes = len(os.sched_getaffinity(0)) + 1
    out = subprocess.run([sys.executable, "-m", "shoal", "run", "-n", str(pes), str(prog)], capture_output=True,
                         text=True, timeout=120, env=env)
    assert out.returncode == 0 and f"PES {pes}" in out.stdout, out.stderr
