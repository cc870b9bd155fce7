"""shoal.destroy(): a collection is deleted on every PE.

tests/programs/destroy.py counts each PE's live elements through weak references:
all gone after destroy; a fire-and-forget call to the destroyed collection is dropped,
a call or broadcast waiting for a value fails with ShoalError naming the destroy, and a
collection destroyed at once (before its creation reached every PE) is never built.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from support.commands import clean_env
from support import PROGRAMS

PROGRAM = PROGRAMS / "destroy.py"


def _run(pes: int, *options: str, env: dict | None = None) -> None:
    environ = clean_env()
    environ.update(env or {})
    proc = subprocess.run([sys.executable, "-m", "shoal", "run", "-n", str(pes), *options, str(PROGRAM)],
                          capture_output=True, text=True, timeout=120, env=environ)
    report = f"exit code {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    assert proc.returncode == 0 and proc.stdout.strip().endswith("destroy: OK"), report


@pytest.mark.parametrize("pes", [2, 3])
def test_destroy_inproc(pes):
    _run(pes, "--transport", "inproc")


@pytest.mark.mpi
@pytest.mark.parametrize("pes, native", [(2, "1"), (3, "1"), (2, "0")], ids=["2pe-native", "3pe-native", "2pe-python"])
def test_destroy_under_mpiexec(pes, native):
    _run(pes, env={"SHOAL_NATIVE": native})


def test_destroy_of_something_else_is_a_clear_error():
    import shoal

    with pytest.raises(TypeError, match="takes a Group or an Array"):
        shoal.destroy(object())
