"""Checkpoint and restart (tests/programs/checkpoint.py): results bit-identical to an
uninterrupted run when restarting on 2 then 3 PEs and on 3 then 2, and every bad
checkpoint a clear error with a non-zero exit, never silently loaded."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Job

PROGRAM = Path(__file__).parent / "programs" / "checkpoint.py"
MPI = pytest.mark.mpi


def run(tmp: Path, pes: int, *args: str, transport: str = "mpi", restart: bool = False) -> Job:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    shutil.copy(PROGRAM, tmp / PROGRAM.name)
    cmd = [sys.executable, "-m", "shoal", "run", "-n", str(pes), "--transport", transport,
           *(["--restart", "ckpt"] if restart else []), PROGRAM.name, *args]
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
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}

    def shoal_run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "shoal", "run", "-n", "2", *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=240)

    plain = shoal_run("recovery.py", "30")
    assert plain.returncode == 0, plain.stderr
    job = shoal_run("--checkpoint-every", "0.3", "--checkpoint-dir", "ck", "--max-restarts", "1",
                    "recovery.py", "30", "--die-at", "20")
    assert job.returncode == 0, job.stderr
    assert "shoal run: PE 1 died; restarting from the checkpoint in" in job.stderr, job.stderr
    restarted = [line for line in job.stdout.splitlines() if line.startswith("RESULT restarted after step")]
    assert len(restarted) == 1 and 10 <= int(restarted[0].split()[-1]) < 20  # at most one period of work redone
    assert job.stdout.splitlines()[-1] == plain.stdout.splitlines()[-1]


@MPI
def test_without_restarts_left_a_dead_pe_ends_the_job(tmp_path):
    shutil.copy(PROGRAM.with_name("recovery.py"), tmp_path / "recovery.py")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    job = subprocess.run([sys.executable, "-m", "shoal", "run", "-n", "2", "--checkpoint-every", "0.3",
                          "--max-restarts", "1", "recovery.py", "30", "--die-at", "2"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=240)
    assert job.returncode != 0
    assert "PE 1 died and there is no checkpoint to restart from" in job.stderr, job.stderr
