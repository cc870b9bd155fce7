"""Charm4py's own test programs (../shared/charm4py-suite), run unchanged through
``shoal run --compat charm4py`` under mpiexec and on the in-process transport, at the PE
counts their entries give (Charm4py's CI: ``force_min_processes``, else 2). A program
passes when it exits 0 within 120 s, as Charm4py's own runner judges it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from support import SHARED

SUITE = SHARED / "charm4py-suite"

#: programs that test Charm4py itself rather than its API, with the reason (docs/charm4py.md)
NOT_APPLICABLE = {
    "tests/when/test_when_syntax.py": "parses conditions with Charm4py's private charm4py.wait classes",
}
#: programs whose checks need PEs that run at the same time, which the in-process
#: transport's PEs (one process, taking turns) do not
NOT_IN_ONE_PROCESS = {
    "tests/futures/iwait.py": "asserts results arrive in the order of time.sleep() calls on parallel PEs",
    "tests/channels/iwait.py": "asserts messages arrive in the order of time.sleep() calls on parallel PEs",
}

#: programs the layer does not run yet, with what is missing (issue 15 is open on them)
NOT_YET: dict[str, str] = {}


def _entries() -> list:
    if not SUITE.is_dir():
        return [pytest.param(None, id="suite-missing")]
    config = json.loads((SUITE / "test_config.json").read_text())
    return [pytest.param(e, id=e["path"].removeprefix("tests/")) for e in config if not e.get("interactive")]


@pytest.mark.parametrize("transport", [pytest.param("mpi", marks=pytest.mark.mpi), "inproc"])
@pytest.mark.parametrize("entry", _entries())
def test_charm4py_program(entry: dict | None, transport: str) -> None:
    if entry is None:
        message = f"the Charm4py suite is not at {SUITE}"
        if os.environ.get("CI"):
            pytest.fail(message + " (CI has it there)")
        pytest.skip(message)
    path = entry["path"]
    if path in NOT_APPLICABLE:
        pytest.skip(f"not applicable: {NOT_APPLICABLE[path]}")
    if transport == "inproc" and path in NOT_IN_ONE_PROCESS:
        pytest.skip(f"not applicable in one process: {NOT_IN_ONE_PROCESS[path]}")
    if path in NOT_YET:
        pytest.xfail(f"not supported yet: {NOT_YET[path]}")
    pes = max(entry.get("force_min_processes", 2), 2)
    cmd = [sys.executable, "-m", "shoal", "run", "-n", str(pes), "--transport", transport, "--compat", "charm4py", path,
           *entry.get("args", "").split()]
    proc = subprocess.run(cmd, cwd=SUITE, capture_output=True, text=True, timeout=150)
    assert proc.returncode == 0, f"{path} on {pes} PEs ({transport}): exit code {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
