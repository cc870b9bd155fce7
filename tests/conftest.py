"""Fixtures: real ``mpiexec`` jobs for integration tests (the helpers are in ``support``).

``mpi_job(source, n)`` writes ``source`` to a file and runs it with ``shoal run -n n``
(real MPI processes); tests using it are marked ``mpi``.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Callable

import pytest
from support.commands import clean_env

from support.jobs import Job


@pytest.fixture
def mpi_job(tmp_path: Path, request: pytest.FixtureRequest) -> Callable[..., Job]:
    """Run a program text under real mpiexec: ``mpi_job(source, n=2, args=(), timeout=60)``.
    A test marked ``one_node`` (what it checks exists within a node only: CUDA IPC, the
    compiled butterfly) runs on one node even where the run simulates two (make test-nodes)."""
    one_node = request.node.get_closest_marker("one_node") is not None

    def launch(source: str, n: int = 2, args: tuple = (), timeout: float = 90, env: dict | None = None) -> Job:
        prog = tmp_path / "prog.py"
        prog.write_text(textwrap.dedent(source))
        environ = clean_env()
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
    """In-process jobs share one simulated device (tests/support/gpu_sim.py) among their PEs, and
    the last PE to choose its device leaves it current: start every test on device 0."""
    yield
    sim = sys.modules.get("support.gpu_sim")
    if sim is not None:
        sim.OPS.current = 0
