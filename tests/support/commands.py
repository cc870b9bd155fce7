"""The ``shoal`` command as a user runs it: in a child process, with the user's
environment less any ``SHOAL_*`` setting the test run itself has."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["clean_env", "mpiexec_env", "run_shoal", "last_line", "soak", "soak_ok"]


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without ``SHOAL_*`` settings, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    env.update(extra)
    return env


def mpiexec_env(**extra: str) -> dict[str, str]:
    """:func:`clean_env` for a test that runs ``mpiexec`` itself, not through ``shoal run``:
    Open MPI's session directory (its PMIx sockets) in a new folder, as ``shoal run`` gives
    each job. One that a killed ``mpiexec`` left in /tmp, named by its pid, makes a later
    one given the same pid fail to start ("The PMIx server's listener thread failed to
    start"), and the tests kill launchers on purpose."""
    env = clean_env(**extra)
    env.setdefault("PRTE_MCA_prte_tmpdir_base", tempfile.mkdtemp(prefix="ompi-"))
    return env


def run_shoal(*argv: str, env: dict | None = None, cwd: Path | None = None, **kw) -> subprocess.CompletedProcess:
    """``python -m shoal *argv``, its output captured as text."""
    return subprocess.run([sys.executable, "-m", "shoal", *argv], capture_output=True, text=True, timeout=120,
                          env=env or clean_env(), cwd=cwd, **kw)


def last_line(text: str) -> str:
    """The last line of ``text`` that is not blank."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def soak(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """``shoal bench soak *args`` from the checkout."""
    from . import ROOT

    cmd = [sys.executable, "-m", "shoal", "bench", "soak", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=clean_env(), cwd=ROOT)


def soak_ok(job: subprocess.CompletedProcess, seed: int) -> None:
    """Assert that a one-job soak of ``seed`` ran clean and checked its invariants."""
    import re

    assert job.returncode == 0, f"seed {seed}\n{job.stdout}\n{job.stderr}"
    assert re.search(rf"soak: OK, seed {seed}, .*: 1 jobs, [\d,]+ rounds .* invariants checked", job.stdout), job.stdout
