"""Output of several PEs comes out in whole lines, even with PYTHONUNBUFFERED=1 (where
print() writes each of its pieces at once and the launcher would mix them mid-line)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from support.commands import clean_env
from support import PROGRAMS

PROGRAM = PROGRAMS / "many_prints.py"


@pytest.mark.mpi
def test_pes_print_whole_lines_under_pythonunbuffered():
    env = clean_env()
    env["PYTHONUNBUFFERED"] = "1"
    proc = subprocess.run([sys.executable, "-m", "shoal", "run", "-n", "2", str(PROGRAM)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    bad = [line for line in lines if not re.fullmatch(r"line \d+ from PE [01] a b c d e end", line)]
    assert not bad, f"{len(bad)} lines mixed from two PEs, e.g. {bad[:3]}"
    assert len(lines) == 6000
