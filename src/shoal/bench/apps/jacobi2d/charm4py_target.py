"""``--target charm4py``: jacobi2d as a Charm4py program, the peer seed 000 measured.

Charm4py (``pip install charm4py``; ``pip install 'shoal[charm4py]'``) starts its own
job with ``python -m charmrun.start +pN``, so this target runs in the process of ``shoal
bench app`` and launches :mod:`.charm4py_program` under that launcher with
:func:`..charmrun.run_charm4py`, as the micro-benchmarks' Charm4py target does. Charm++
prints banners on stdout, so the configuration goes to the program in a JSON file and
its measurements come back in another; this process then builds the report with the
same :func:`.app.make_report` as every other target (so the checksum is checked against
the sequential run here, outside the timed job).

:func:`launch` is written for any block app whose Charm4py program follows the same
file protocol (jacobi3d's uses it too). This module never imports charm4py itself, so it
loads without it; a missing Charm4py is a one-line error and exit code 2.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

from ...charmrun import run_charm4py
from ..report import AppReport
from .app import Config, make_report

__all__ = ["run", "launch", "missing", "TIMEOUT"]

#: seconds a Charm4py job may take before it is killed and the run fails
TIMEOUT = 3600.0


def missing() -> str | None:
    """Why ``--target charm4py`` cannot run here (Charm4py is not installed), or None."""
    if importlib.util.find_spec("charm4py") is None:
        return ("--target charm4py needs Charm4py, which is not installed "
                "(pip install charm4py, or pip install 'shoal[charm4py]')")
    return None


def launch(app: str, program: str, cfg: Any, report: Callable[[dict[str, Any]], AppReport]) -> int:
    """Run Charm4py ``program`` (a module) on ``cfg.pes`` PEs with ``cfg`` (a dataclass)
    as its configuration, turn the measurements it wrote into a report with ``report``,
    print it; returns the exit code (2: Charm4py missing, 1: the job failed or the run
    did not verify)."""
    why = missing()
    if why is not None:
        print(f"shoal bench app {app}: {why}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="shoal-charm4py-") as tmp:
        config, result = Path(tmp) / "config.json", Path(tmp) / "result.json"
        config.write_text(json.dumps(dataclasses.asdict(cfg)))
        proc = run_charm4py(program, cfg.pes, [config, result], TIMEOUT)
        if proc is None:
            print(f"shoal bench app {app}: the charm4py job did not finish in {TIMEOUT:.0f} s", file=sys.stderr)
            return 1
        if proc.returncode != 0 or not result.exists():
            print(f"shoal bench app {app}: the charm4py job failed (exit {proc.returncode}); its output:\n"
                  f"{proc.stdout}{proc.stderr}", file=sys.stderr)
            return 1
        measured = json.loads(result.read_text())
    rep = report(measured)
    rep.emit(cfg.json)
    return rep.exit_code


def _report(cfg: Config, m: dict[str, Any]) -> AppReport:
    """The report of what :mod:`.charm4py_program` measured (its result file's keys)."""
    p1, p2 = m["blocks"]
    a1, a2 = m["per_pe"]
    q1, q2 = p1 // a1, p2 // a2
    c = cfg.with_pes(m["pes"])
    return make_report(
        c, c.pes, m["elapsed"], m["compute"], m["checksum"],
        f"{p1} x {p2} block chares, {a1} x {a2} per PE on a {q1} x {q2} PE grid (odf {c.odf}; {m['describe']})",
        extra={"blocks": p1 * p2, "blocks_per_pe": m["blocks_per_pe"], "odf": c.odf},
        lines=[("messaging", "Charm4py channels (coroutine entry methods), launched with charmrun")],
    )


def run(cfg: Config) -> int:
    """Run jacobi2d under Charm4py on ``cfg.pes`` PEs; print the report. Returns the exit code."""
    return launch("jacobi2d", __name__.rpartition(".")[0] + ".charm4py_program", cfg,
                  lambda m: _report(cfg, m))
