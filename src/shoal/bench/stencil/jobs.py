"""Running a benchmark worker and reading its result.

A worker is a Python file run as a program, in its own process (one PE, or a system
that is not shoal) or as a ``shoal run -n P`` job; it prints its timings as one line
``RESULT <JSON list of seconds>`` (:func:`emit`), or ``RESULT <JSON object>`` with the
list as ``times`` beside other facts (a GPU system's bit-identity check), and
:func:`run_worker` (:func:`run_worker_record` for the object) finds that line. The worker runs without the caller's ``SHOAL_*`` settings, so each system starts
from shoal's defaults.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

__all__ = ["worker_command", "run_worker", "run_worker_record", "emit"]

_PREFIX = "RESULT "


def worker_command(script: Path, args: Sequence[str], pes: int | None = None) -> list[str]:
    """The command running ``script args…``: as a plain process, or a ``shoal run -n pes`` job."""
    if pes is None or pes == 1:
        return [sys.executable, str(script), *args]
    return [sys.executable, "-m", "shoal", "run", "-n", str(pes), str(script), *args]


def run_worker_record(cmd: Sequence[str], timeout: float) -> dict[str, Any] | str:
    """What the worker printed (``times``, the timings, and what else it said), or a
    one-line reason it gave none."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    try:
        proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return f"timed out after {timeout:.0f} s"
    for line in proc.stdout.splitlines():
        if line.startswith(_PREFIX):
            said = json.loads(line[len(_PREFIX):])
            record = said if isinstance(said, dict) else {"times": said}
            record["times"] = [float(t) for t in record["times"]]
            return record
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
    return "failed: " + " | ".join(tail)


def run_worker(cmd: Sequence[str], timeout: float) -> list[float] | str:
    """The timings the worker printed, or a one-line reason it gave none."""
    record = run_worker_record(cmd, timeout)
    return record if isinstance(record, str) else record["times"]


def emit(times: Sequence[float], **facts: Any) -> None:
    """Print the worker's result line (what :func:`run_worker` reads); ``facts`` (JSON
    values) go beside the timings."""
    said: Any = dict(facts, times=list(times)) if facts else list(times)
    print(_PREFIX + json.dumps(said), flush=True)
