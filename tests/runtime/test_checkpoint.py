"""Checkpoint and restart (tests/programs/checkpoint.py): results bit-identical to an
uninterrupted run when restarting on 2 then 3 PEs and on 3 then 2, and every bad
checkpoint a clear error with a non-zero exit, never silently loaded. Surviving a dead PE
(tests/programs/recovery.py): under shoal run, relaunched on as many PEs as mpiexec can
start; under another launcher, a resume command and exit code 75, or --restart auto."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.commands import clean_env, mpiexec_env
from support import PROGRAMS
from support.jobs import Job

from shoal.launcher import find_mpiexec
from shoal.launchers import family

PROGRAM = PROGRAMS / "checkpoint.py"
MPI = pytest.mark.mpi


def run(tmp: Path, pes: int, *args: str, transport: str = "mpi", restart: bool = False,
        options: tuple[str, ...] = ()) -> Job:
    env = clean_env()
    shutil.copy(PROGRAM, tmp / PROGRAM.name)
    cmd = [sys.executable, "-m", "shoal", "run", "-n", str(pes), "--transport", transport,
           *(["--restart", "ckpt"] if restart else []), *options, PROGRAM.name, *args]
    return Job(subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env, cwd=tmp))


def final(job: Job) -> str:
    lines = [line for line in job.stdout.splitlines() if line.startswith("RESULT final")]
    assert job.returncode == 0 and lines, job.stdout + job.stderr
    return lines[-1]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> str:
    return final(run(tmp_path_factory.mktemp("ref"), 2, "10", transport="inproc"))


@pytest.mark.parametrize("wrote, resumed, transport", [
    pytest.param(2, 3, "mpi", marks=MPI), pytest.param(3, 2, "mpi", marks=MPI), (2, 3, "inproc"), (3, 2, "inproc"),
])
def test_restart_on_another_pe_count_is_bit_identical(tmp_path, reference, wrote, resumed, transport):
    first = run(tmp_path, wrote, "10", "--at", "4", "--stop-after-checkpoint", transport=transport)
    assert first.returncode == 0 and "RESULT checkpointed 4 7" in first.stdout, first.stderr
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]  # the temporary folder became ckpt
    second = run(tmp_path, resumed, "10", transport=transport, restart=True)
    assert f"RESULT restarted 4 hi {resumed}" in second.stdout, second.stderr
    assert "RESULT inboxes [10, 10, 10, 10, 10, 10, 10]" in second.stdout  # channel messages were saved too
    assert final(second) == reference


def test_inspect_lists_and_verifies(tmp_path):
    assert run(tmp_path, 2, "6", "--at", "2", transport="inproc").returncode == 0
    out = subprocess.run([sys.executable, "-m", "shoal", "checkpoint", "inspect", "ckpt"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "7 elements" in out.stdout and "every checksum verified" in out.stdout and "Cell: dense array" in out.stdout
    resume = shlex.join(["mpiexec", "-n", "2", sys.executable, "-m", "shoal", "--restart", str(tmp_path / "ckpt"),
                         str(tmp_path / "checkpoint.py"), "6", "--at", "2"])
    assert f"resume with: {resume}" in out.stdout, out.stdout


def test_restart_auto_starts_fresh_or_from_the_newest_complete_checkpoint(tmp_path, reference):
    """``--restart auto`` in a batch loop: a fresh start while the checkpoint directory has
    none, then the checkpoint; after a crash between the two renames that replace it, the
    finished temporary folder; a directory that is no checkpoint is refused."""
    def auto() -> Job:
        return run(tmp_path, 2, "10", "--at", "4", transport="inproc", options=("--checkpoint-dir", "ckpt",
                                                                              "--restart", "auto"))

    first = auto()
    assert f"checkpoint directory {tmp_path / 'ckpt'}: no checkpoint there yet, starting fresh" in first.stderr
    assert "RESULT restarted" not in first.stdout and final(first) == reference
    second = auto()
    assert f"restarting from {tmp_path / 'ckpt'}\n" in second.stderr, second.stderr
    assert "RESULT restarted 4 hi 2" in second.stdout and final(second) == reference
    (tmp_path / "ckpt").rename(tmp_path / "ckpt.tmp-123-456")  # the old one renamed away, the new one not yet in place
    third = auto()
    assert f"restarting from {tmp_path / 'ckpt.tmp-123-456'}" in third.stderr, third.stderr
    assert "RESULT restarted 4 hi 2" in third.stdout and final(third) == reference
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "notes.txt").write_text("not a checkpoint")
    refused = auto()
    assert refused.returncode != 0 and "RESULT final" not in refused.stdout
    assert f"{tmp_path / 'ckpt'}: holds files but no manifest.json" in refused.stderr, refused.stderr


def _damaged(tmp_path: Path, how: str) -> str:
    """Make a checkpoint, damage it as ``how`` says; the text the error must contain."""
    assert run(tmp_path, 2, "6", "--at", "2", transport="inproc").returncode == 0
    ckpt = tmp_path / "ckpt"
    data = ckpt / "pe-00001.dat"
    if how == "truncated":
        data.write_bytes(data.read_bytes()[:-100])
        return "pe-00001.dat: truncated"
    if how == "flipped":
        raw = bytearray(data.read_bytes())
        raw[len(raw) // 2] ^= 0x40
        data.write_bytes(bytes(raw))
        return "pe-00001.dat: checksum mismatch"
    if how == "missing":
        data.unlink()
        return "pe-00001.dat: missing"
    manifest = json.loads((ckpt / "manifest.json").read_text())
    if how == "version":
        manifest["shoal"] = "0.0.1"
        (ckpt / "manifest.json").write_text(json.dumps(manifest))
        return "written by shoal 0.0.1, this is shoal"
    if how == "program":
        manifest["program"] = "/somewhere/else.py"
        (ckpt / "manifest.json").write_text(json.dumps(manifest))
        return "written by program else.py, this is checkpoint.py"
    if how == "unfinished":
        (ckpt / "manifest.json").unlink()  # what a crash before the last step leaves
        return "manifest.json: missing (a checkpoint that was never finished?)"
    raise AssertionError(how)


@pytest.mark.parametrize("how", ["truncated", "flipped", "missing", "version", "program", "unfinished"])
def test_a_damaged_checkpoint_is_refused(tmp_path, how):
    want = _damaged(tmp_path, how)
    job = run(tmp_path, 2, "6", transport="inproc", restart=True)
    assert job.returncode != 0 and "RESULT final" not in job.stdout
    assert want in job.stderr, job.stderr
    inspect = subprocess.run([sys.executable, "-m", "shoal", "checkpoint", "inspect", "ckpt"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=60)
    if how in ("truncated", "flipped", "missing", "version", "unfinished"):
        assert inspect.returncode == 2 and want in inspect.stderr, inspect.stderr


@pytest.mark.parametrize("transport", [pytest.param("mpi", marks=MPI), "inproc"])
def test_a_full_disk_names_the_path_and_keeps_the_last_checkpoint(tmp_path, transport):
    assert run(tmp_path, 2, "6", "--at", "2", transport="inproc").returncode == 0  # a good checkpoint
    before = (tmp_path / "ckpt" / "manifest.json").read_text()
    job = run(tmp_path, 2, "6", "--at", "3", "--full-disk", transport=transport)  # files may not pass 100 kB
    assert job.returncode != 0, job.stdout
    assert "cannot write" in job.stderr and ".tmp-" in job.stderr and "previous checkpoint" in job.stderr, job.stderr
    assert (tmp_path / "ckpt" / "manifest.json").read_text() == before
    resumed = run(tmp_path, 2, "6", transport="inproc", restart=True)
    assert "RESULT restarted 2 hi 2" in resumed.stdout, resumed.stderr


def test_a_class_that_changed_is_named(tmp_path):
    assert run(tmp_path, 2, "6", "--at", "2", transport="inproc").returncode == 0
    job = run(tmp_path, 2, "6", "--changed-class", transport="inproc", restart=True)
    assert job.returncode != 0
    assert "element (0,) of Cell cannot be restored with the class as it is now" in job.stderr, job.stderr
    assert "keeps its numbers in 'values'" in job.stderr


def test_restarted_is_none_in_a_fresh_run(tmp_path):
    job = run(tmp_path, 2, "3", transport="inproc")
    assert "RESULT restarted" not in job.stdout and job.returncode == 0


@MPI
def test_a_dead_pe_is_survived_from_the_last_checkpoint(tmp_path):
    """PE 1 kills itself (SIGKILL) at step 20 of 30; with --max-restarts 1 the launcher runs
    the job again from the last checkpoint_point() and it ends as an undisturbed run does."""
    shutil.copy(PROGRAM.with_name("recovery.py"), tmp_path / "recovery.py")
    env = clean_env()

    def shoal_run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "shoal", "run", "-n", "2", *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=240)

    plain = shoal_run("recovery.py", "30")
    assert plain.returncode == 0, plain.stderr
    job = shoal_run("--checkpoint-every", "0.3", "--checkpoint-dir", "ck", "--max-restarts", "1",
                    "recovery.py", "30", "--die-at", "20")
    assert job.returncode == 0, job.stderr
    assert "shoal run: PE 1 died; restarting from the checkpoint in" in job.stderr, job.stderr
    # how it died, then that it restarts: not "the job failed" first (issue 35)
    assert "the job failed" not in job.stderr and "ended before the job finished" in job.stderr, job.stderr
    restarted = [line for line in job.stdout.splitlines() if line.startswith("RESULT restarted after step")]
    assert len(restarted) == 1 and 10 <= int(restarted[0].split()[-1]) < 20  # at most one period of work redone
    assert job.stdout.splitlines()[-1] == plain.stdout.splitlines()[-1]


@MPI
def test_without_restarts_left_a_dead_pe_ends_the_job(tmp_path):
    shutil.copy(PROGRAM.with_name("recovery.py"), tmp_path / "recovery.py")
    env = clean_env()
    job = subprocess.run([sys.executable, "-m", "shoal", "run", "-n", "2", "--checkpoint-every", "0.3",
                          "--max-restarts", "1", "recovery.py", "30", "--die-at", "2"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=240)
    assert job.returncode != 0
    assert "PE 1 died and there is no checkpoint to restart from" in job.stderr, job.stderr


# -- losing a PE: fewer PEs, another launcher, batch scripts -------------------------------------------
RECOVERY = PROGRAM.with_name("recovery.py")
#: checkpoint every 0.3 s; PE 1 kills itself (SIGKILL) at step 20 of 30, about 1 s in
DYING = ("--checkpoint-every", "0.3", "--checkpoint-dir", "ck", "recovery.py", "30", "--die-at", "20")


@pytest.fixture(scope="module")
def undisturbed(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The last line of recovery.py run without a death (it does not depend on the PE count)."""
    tmp = tmp_path_factory.mktemp("undisturbed")
    shutil.copy(RECOVERY, tmp / RECOVERY.name)
    job = subprocess.run([sys.executable, "-m", "shoal", "run", "-n", "2", "--transport", "inproc", "recovery.py",
                          "30"], cwd=tmp, capture_output=True, text=True, timeout=120, env=clean_env())
    assert job.returncode == 0, job.stderr
    return job.stdout.splitlines()[-1]


def _in(tmp: Path, *cmd: str | Path) -> subprocess.CompletedProcess:
    shutil.copy(RECOVERY, tmp / RECOVERY.name)
    return subprocess.run([str(c) for c in cmd], cwd=tmp, capture_output=True, text=True, timeout=120,
                          env=mpiexec_env())


@MPI
def test_a_relaunch_falls_back_to_fewer_pes(tmp_path, undisturbed):
    """A launcher that lost a node: after the first job it refuses more than 1 process, so the
    relaunch after PE 1's death tries 3 PEs, then 2 (3 less the dead one), then 1."""
    fake = tmp_path / "mpiexec-after-a-node-is-lost"
    fake.write_text(f"""#!/bin/sh
if [ -e "$0.used" ] && [ "$2" -gt 1 ]; then
    echo "There are not enough slots available in the system to satisfy the $2 slots requested" >&2
    exit 1
fi
touch "$0.used"
exec {shlex.quote(find_mpiexec())} "$@"
""")
    fake.chmod(0o755)
    job = _in(tmp_path, sys.executable, "-m", "shoal", "run", "-n", "3", "--mpiexec", fake, "--max-restarts", "1",
              *DYING)
    assert job.returncode == 0, job.stderr
    assert "shoal run: PE 1 died; restarting from the checkpoint in" in job.stderr, job.stderr
    assert "shoal run: mpiexec could not start 3 PEs (exit code 1, none started); relaunching on 2 PEs instead\n" \
           in job.stderr, job.stderr
    assert "shoal run: mpiexec could not start 2 PEs (exit code 1, none started); relaunching on 1 PE instead\n" \
           in job.stderr, job.stderr
    pes = [line for line in job.stdout.splitlines() if line.startswith("RESULT pes")]
    assert pes == ["RESULT pes 3", "RESULT pes 1"], job.stdout
    assert job.stdout.splitlines()[-1] == undisturbed


#: srun's way with a dead PE, played by MPICH's mpiexec: with -disable-auto-cleanup hydra
#: leaves the other PEs running when a PE exits with an error, but still kills them all when
#: one dies of a signal (its proxy reaps it); so the PE runs under a shell, which turns the
#: signal into exit code 137, and ignores the SIGUSR1 hydra sends the survivors.
SRUN_LIKE = """#!/bin/sh
trap '' USR1
"$@"
"""


#: the tests that play srun with Hydra's option
HYDRA = pytest.mark.skipif(family(find_mpiexec()) != "mpich",
                           reason="plays srun with Hydra's -disable-auto-cleanup, an option of MPICH's mpiexec only")


def _srun_like(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    shell = tmp / "pe.sh"
    shell.write_text(SRUN_LIKE)
    shell.chmod(0o755)
    return _in(tmp, find_mpiexec(), "-disable-auto-cleanup", "-n", "2", shell, sys.executable, "-m", "shoal", *args)


@MPI
@HYDRA
def test_under_another_launcher_a_survivor_says_how_to_resume(tmp_path, undisturbed):
    """The PE that watched the dead one ends the job with exit code 75 and one line naming it,
    the last good checkpoint and the command that resumes; that command finishes the job."""
    job = _srun_like(tmp_path, *DYING)
    assert job.returncode == 75, job.stderr
    [line] = [ln for ln in job.stderr.splitlines() if ln.startswith("shoal: PE 0: PE 1 died")]
    assert f"last good checkpoint {tmp_path / 'ck'} (written " in line and "exit code 75; resume with: " in line
    command = shlex.split(line.split("resume with: ")[1])
    assert command[:6] == ["mpiexec", "-n", "2", sys.executable, "-m", "shoal"], command
    assert command[6:] == ["--checkpoint-every", "0.3", "--checkpoint-dir", str(tmp_path / "ck"),
                           "--restart", str(tmp_path / "ck"), str(tmp_path / "recovery.py"), "30", "--die-at", "20"]
    resumed = _in(tmp_path, find_mpiexec(), *command[1:])
    assert resumed.returncode == 0, resumed.stderr
    assert "RESULT restarted after step" in resumed.stdout and resumed.stdout.splitlines()[-1] == undisturbed


@MPI
@HYDRA
def test_under_another_launcher_without_checkpoints_a_death_ends_the_job(tmp_path):
    job = _srun_like(tmp_path, "recovery.py", "30", "--die-at", "5")
    assert job.returncode == 1, job.stderr
    assert ("shoal: PE 0: PE 1 died (its process ended); no checkpoints are configured (--checkpoint-every, "
            "--checkpoint-dir), so there is nothing to resume") in job.stderr, job.stderr


@MPI
def test_a_batch_loop_resumes_with_restart_auto(tmp_path, undisturbed):
    """Under plain mpiexec a dead PE takes every PE with it at once (nobody can say a word):
    a loop that runs the same command with --restart auto resumes from the last checkpoint."""
    script = tmp_path / "job.sh"
    script.write_text(f"""#!/bin/bash
for try in 1 2 3; do
    {shlex.quote(find_mpiexec())} -n 2 {shlex.quote(sys.executable)} -m shoal --restart auto {shlex.join(DYING)} && exit 0
    echo "try $try ended with exit code $?"
done
exit 1
""")
    job = _in(tmp_path, "bash", script)
    assert job.returncode == 0, job.stdout + job.stderr
    assert "try 1 ended with exit code" in job.stdout and "try 2" not in job.stdout, job.stdout
    assert f"checkpoint directory {tmp_path / 'ck'}: no checkpoint there yet, starting fresh" in job.stderr
    assert f"checkpoint directory {tmp_path / 'ck'}: restarting from {tmp_path / 'ck'}" in job.stderr, job.stderr
    assert job.stdout.splitlines()[-1] == undisturbed
