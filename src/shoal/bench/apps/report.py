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

__all__ = ["AppReport", "jacobi_report", "KERNELS"]


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


#: the kernels a Jacobi run may name (its JSON ``kernels``) -> how the report says it
KERNELS = {"numba": "Numba", "numpy": "NumPy (Numba is not installed)",
           "cuda": "CUDA (CuPy RawKernel, --fmad=false: the CPU kernel's bits)"}


def jacobi_report(app: str, cfg: Any, shape: tuple, pes: int, elapsed: float, compute: list[float],
                  checksum: float, decomposition: str, reference: Any, initial_sum: Any, kernels: str,
                  check_limit: int, extra: dict[str, Any] | None = None,
                  lines: list[tuple[str, str]] | None = None) -> AppReport:
    """The report of a Jacobi run (jacobi2d, jacobi3d): ``elapsed`` seconds over the timed
    steps, ``compute`` the seconds each PE spent in the kernel, ``checksum`` the exact-sum
    checksum, checked against ``reference()`` (the sequential run's) while the grid times
    the steps stays within ``check_limit``, else against ``[0, initial_sum()]``;
    ``kernels`` a key of :data:`KERNELS`."""
    import struct

    steps = cfg.steps
    points = math.prod(shape)
    per_step = elapsed / steps
    busiest = max(compute) / steps if compute else None
    comm = None if busiest is None else max(0.0, per_step - busiest)
    mean = sum(compute) / len(compute) if compute else 0.0
    imbalance = max(compute) / mean if compute and mean > 0 else 1.0
    if points * steps <= check_limit:
        ref = reference() if cfg.target != "sequential" else checksum
        verified = checksum == ref
        how = "equals the sequential run's" if verified else f"differs from the sequential run's {ref!r}"
        verdict = f"(checksum {checksum!r} {how})"
        check = "sequential"
    else:
        start = initial_sum()
        verified = math.isfinite(checksum) and 0.0 <= checksum <= start
        verdict = (f"(checksum {checksum!r}: finite and within [0, initial sum {start!r}]"
                   f"{'' if verified else ' -- NOT'}; too large to rerun sequentially)")
        check = "bounds"
    headline = f"{'x'.join(map(str, shape))} grid (zero boundary), {steps} steps"
    rate = points * steps / elapsed / 1e6 if elapsed > 0 else float("inf")
    all_lines = [("decomposition", decomposition), ("rate", f"{rate:.1f} Mpoint-updates/s"),
                 ("compute balance", f"busiest PE / mean = {imbalance:.3f}"),
                 ("kernels", KERNELS[kernels]), *(lines or [])]
    fields: dict[str, Any] = {
        "shape": list(shape), "checksum": checksum, "checksum_hex": checksum.hex(), "check": check,
        "odf": cfg.odf if cfg.target == "shoal" else None, "rate_mupdates_per_s": rate,
        "compute_imbalance": imbalance, "compute_per_pe": [c / steps for c in compute],
        "kernels": kernels, "elapsed": elapsed,
    }
    fields.update(extra or {})
    bits = struct.unpack("<Q", struct.pack("<d", checksum))[0]  # AppReport's int checksum: the float's bits
    return AppReport(app, cfg.target, pes, steps, per_step, busiest, comm, verified, bits,
                     headline, all_lines, verdict, fields)
