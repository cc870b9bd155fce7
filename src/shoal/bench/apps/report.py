"""The result of one proxy-application run, as every app and target prints it.

A run ends in one :class:`AppReport`: a few human lines, and with ``--json`` one JSON
object as the last line (the keys of :meth:`AppReport.as_json`; an app adds its own).
The job's exit code is 0 when the run verified and 1 when it did not.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field
from typing import Any, TextIO

__all__ = ["AppReport"]


def _ms(seconds: float | None) -> str:
    return "n/a" if seconds is None or not math.isfinite(seconds) else f"{seconds * 1e3:.4f} ms"


@dataclass(slots=True)
class AppReport:
    """What one run measured and whether its answer was right."""

    app: str
    target: str
    pes: int
    steps: int
    time_per_step: float
    compute_per_step: float | None  # the busiest PE's compute per step
    comm_per_step: float | None  # the rest of a step: communication and waiting
    verified: bool
    checksum: int
    headline: str = ""  # the problem, in one line
    lines: list[tuple[str, str]] = field(default_factory=list)  # (label, text) of the app's own
    verdict: str = ""  # why it verified or not
    fields: dict[str, Any] = field(default_factory=dict)  # the app's own JSON keys

    @property
    def exit_code(self) -> int:
        return 0 if self.verified else 1

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "app": self.app, "target": self.target, "pes": self.pes, "steps": self.steps,
            "time_per_step": self.time_per_step, "compute_per_step": self.compute_per_step,
            "comm_per_step": self.comm_per_step, "verified": self.verified, "checksum": self.checksum,
        }
        out.update(self.fields)
        return out

    def emit(self, as_json: bool, out: TextIO | None = None) -> None:
        """Print the report (and the JSON line last, with ``as_json``)."""
        w = (out or sys.stdout).write
        w(f"shoal bench app {self.app} --target {self.target}: {self.pes} PE{'s' if self.pes != 1 else ''}, "
          f"{self.headline}\n")
        split = ""
        if self.compute_per_step is not None and self.comm_per_step is not None:
            split = f"   (compute {_ms(self.compute_per_step)}, communication and waiting {_ms(self.comm_per_step)})"
        w(f"  {'time per step':<18}{_ms(self.time_per_step)}{split}\n")
        for label, text in self.lines:
            w(f"  {label:<18}{text}\n")
        w(f"  {'verification':<18}{'PASS' if self.verified else 'FAIL'}  {self.verdict}\n")
        if as_json:
            w(json.dumps(self.as_json()) + "\n")
        (out or sys.stdout).flush()
