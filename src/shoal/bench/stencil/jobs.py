"""Running a benchmark worker and reading its result.

A worker is a Python file run as a program, in its own process (one PE, or a system
that is not shoal) or as a ``shoal run -n P`` job; it prints its timings as one line
``RESULT <JSON list of seconds>`` (:func:`emit`), and :func:`run_worker` finds that
line. The worker runs without the caller's ``SHOAL_*`` settings, so each system starts
from shoal's defaults.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Sequence

__all__ = ["worker_command", "run_worker", "emit"]

_PREFIX = "RESULT "


def worker_command(script: Path, args: Sequence[str], pes: int | None = None) -> list[str]:
    """The command running ``script args…``: as a plain process, or a ``shoal run -n pes`` job."""
    if pes is None or pes == 1:
        return [sys.executable, str(script), *args]
    return [sys.executable, "-m", "shoal", "run", "-n", str(pes), str(script), *args]


def run_worker(cmd: Sequence[str], timeout: float) -> list[float] | str:
    """The timings the worker printed, or a one-line reason it gave none."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    try:
        proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return f"timed out after {timeout:.0f} s"
    for line in proc.stdout.splitlines():
        if line.startswith(_PREFIX):
            return [float(t) for t in json.loads(line[len(_PREFIX):])]
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
    return "failed: " + " | ".join(tail)


def emit(times: Sequence[float]) -> None:
    """Print the worker's result line (what :func:`run_worker` reads)."""
    print(_PREFIX + json.dumps(list(times)), flush=True)
