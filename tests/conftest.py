"""Test helpers: in-process jobs for unit tests, real ``mpiexec`` jobs for integration.

``run_inproc(main, pes)`` runs a program in this process on the in-process transport.
``mpi_job(source, n)`` writes ``source`` to a file and runs it with ``shoal run -n n``
(real MPI processes); tests using it are marked ``mpi``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Callable

import pytest

import shoal

ROOT = Path(__file__).resolve().parent.parent


def run_inproc(main: Callable[[list], Any], pes: int = 2, **settings: Any) -> int:
    """Run ``main`` on ``pes`` in-process PEs; return the exit code."""
    settings.setdefault("deadlock_timeout", 0.3)
    return shoal.run(main, [], transport="inproc", pes=pes, **settings)


def tree_levels(n: int, k: int) -> int:
    """Hops from the root to the deepest node of the shallowest tree of ``n`` nodes with fan-out ``k``."""
    depth, capacity, width = 0, 1, 1
    while capacity < n:
        width *= k
        capacity += width
        depth += 1
    return depth


class Job:
    def __init__(self, proc: subprocess.CompletedProcess):
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        # Open MPI 5's launcher ends its abort notice with a NUL byte and no newline
        self.stderr = proc.stderr.replace("\x00", "")

    def __repr__(self) -> str:
        return f"<Job rc={self.returncode}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}>"


@pytest.fixture
def mpi_job(tmp_path: Path, request: pytest.FixtureRequest) -> Callable[..., Job]:
    """Run a program text under real mpiexec: ``mpi_job(source, n=2, args=(), timeout=60)``.
    A test marked ``one_node`` (what it checks exists within a node only: CUDA IPC, the
    compiled butterfly) runs on one node even where the run simulates two (make test-nodes)."""
    one_node = request.node.get_closest_marker("one_node") is not None

    def launch(source: str, n: int = 2, args: tuple = (), timeout: float = 90, env: dict | None = None) -> Job:
        prog = tmp_path / "prog.py"
        prog.write_text(textwrap.dedent(source))
        environ = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
        if one_node:
            environ["MPIR_CVAR_NUM_CLIQUES"] = "1"
        environ.setdefault("SHOAL_DEADLOCK_TIMEOUT", "0.5")
        environ.update(env or {})
        cmd = [sys.executable, "-m", "shoal", "run", "-n", str(n), str(prog), *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=environ, cwd=tmp_path)
        return Job(proc)

    return launch


@pytest.fixture
def silent_compiler(tmp_path: Path) -> Path:
    """A compiler that says nothing, writes nothing and exits 0."""
    fake = tmp_path / "fakecc"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    return fake


@pytest.fixture(autouse=True)
def _simulated_device_back_on_device_0():
    """In-process jobs share one simulated device (tests/gpu_sim.py) among their PEs, and
    the last PE to choose its device leaves it current: start every test on device 0."""
    yield
    sim = sys.modules.get("gpu_sim")
    if sim is not None:
        sim.OPS.current = 0
