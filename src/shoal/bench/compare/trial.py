"""One trial: a ``shoal bench micro … --json`` process, and the record it prints.

:class:`MicroRunner` runs the subprocess (in its own process group, so a timeout also
ends the ``mpiexec`` it started) and validates its JSON into a :class:`TrialResult`;
anything else becomes a :class:`TrialFailed` carrying the command and its output.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .plan import CompareError, Target

__all__ = ["UNITS", "TrialRequest", "Row", "TrialResult", "TrialFailed", "TrialRunner", "MicroRunner"]

#: unit of the micro-benchmark JSON -> whether lower values are better
UNITS: dict[str, bool] = {"us": True, "MB/s": False}


@dataclass(frozen=True, slots=True)
class TrialRequest:
    """One trial to run: ``test`` on ``target`` with the micro flags every trial shares."""

    test: str
    target: Target
    options: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Row:
    size: int
    value: float
    iterations: int


@dataclass(frozen=True, slots=True)
class TrialResult:
    """The JSON object ``shoal bench micro … --json`` prints, validated."""

    test: str
    target: str
    api: str | None
    buffer: str
    pes: int
    unit: str
    rows: tuple[Row, ...]

    @classmethod
    def from_json(cls, obj: Any, where: str) -> "TrialResult":
        """Validate a decoded micro-benchmark record; ``where`` names its source in errors."""
        try:
            if not isinstance(obj, dict):
                raise TypeError(f"expected a JSON object, got {type(obj).__name__}")
            unit = obj["unit"]
            if unit not in UNITS:
                raise ValueError(f"unit {unit!r} is not one of {sorted(UNITS)}")
            rows = tuple(
                Row(int(r["size"]), float(r["value"]), int(r["iterations"])) for r in obj["rows"]
            )
            if not rows:
                raise ValueError("no rows")
            api = obj.get("api")
            return cls(
                str(obj["test"]), str(obj["target"]), None if api is None else str(api),
                str(obj.get("buffer", "")), int(obj["pes"]), unit, rows,
            )
        except (KeyError, TypeError, ValueError) as exc:
            missing = f"missing key {exc}" if isinstance(exc, KeyError) else str(exc)
            raise CompareError(f"{where}: malformed micro-benchmark JSON: {missing}") from None


class TrialFailed(CompareError):
    """A trial exited non-zero, timed out or printed no usable JSON."""

    def __init__(self, target: Target, command: Sequence[str], reason: str, stderr: str = "", stdout: str = ""):
        self.target = target
        self.command = list(command)
        self.reason = reason
        self.stderr = stderr
        self.stdout = stdout
        super().__init__(f"target {target.label} failed: {reason}")


#: runs one trial and returns its result, or raises :class:`TrialFailed`
TrialRunner = Callable[[TrialRequest], TrialResult]


class MicroRunner:
    """Runs a trial as a ``shoal bench micro`` subprocess and parses its JSON.

    ``command`` is the program to run with the micro flags appended (default:
    ``python -m shoal bench micro``); tests point it at a fake script. Each trial runs in
    its own process group so a timeout also ends the ``mpiexec`` it started.
    """

    def __init__(self, command: Sequence[str] | None = None, *, timeout: float | None = 600.0):
        self.command = list(command) if command else [sys.executable, "-m", "shoal", "bench", "micro"]
        self.timeout = timeout

    def argv(self, request: TrialRequest) -> list[str]:
        api = [] if request.target.api is None else ["--api", request.target.api]
        return [*self.command, request.test, "--target", request.target.name, *api, *request.options, "--json"]

    def __call__(self, request: TrialRequest) -> TrialResult:
        cmd = self.argv(request)
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        try:
            out, err = proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, err = proc.communicate()
            raise TrialFailed(request.target, cmd, f"timed out after {self.timeout:g} s", err, out) from None
        except BaseException:  # Ctrl-C: do not leave an MPI job behind
            _kill_group(proc)
            raise
        if proc.returncode != 0:
            raise TrialFailed(request.target, cmd, f"exit status {proc.returncode}", err, out)
        lines = [line for line in out.splitlines() if line.strip()]
        try:
            obj = json.loads(lines[-1] if lines else "")
        except json.JSONDecodeError:
            raise TrialFailed(request.target, cmd, "printed no JSON object on its last line", err, out) from None
        return TrialResult.from_json(obj, " ".join(cmd))


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
