"""``--target charm4py``: jacobi3d as a Charm4py program, launched with charmrun.

The same launcher as jacobi2d's Charm4py target (:func:`..jacobi2d.charm4py_target.launch`:
``python -m charmrun.start +pN`` running :mod:`.charm4py_program`, configuration and
measurements through JSON files, the report built here with :func:`.app.make_report`).
This module never imports charm4py itself, so it loads without it; a missing Charm4py is
a one-line error and exit code 2.
"""

from __future__ import annotations

import math
from typing import Any

from ..jacobi2d.charm4py_target import launch
from ..report import AppReport
from .app import Config, make_report, shape_text

__all__ = ["run"]


def _report(cfg: Config, m: dict[str, Any]) -> AppReport:
    """The report of what :mod:`.charm4py_program` measured (its result file's keys)."""
    blocks, per_pe = m["blocks"], m["per_pe"]
    q = [b // a for b, a in zip(blocks, per_pe)]
    c = cfg.with_pes(m["pes"])
    return make_report(
        c, c.pes, m["elapsed"], m["compute"], m["checksum"],
        f"{shape_text(blocks)} block chares, {shape_text(per_pe)} per PE on a {shape_text(q)} PE grid "
        f"(odf {c.odf}; {m['describe']})",
        extra={"blocks": math.prod(blocks), "blocks_per_pe": m["blocks_per_pe"], "odf": c.odf},
        lines=[("messaging", "Charm4py channels (coroutine entry methods), launched with charmrun")],
    )


def run(cfg: Config) -> int:
    """Run jacobi3d under Charm4py on ``cfg.pes`` PEs; print the report. Returns the exit code."""
    return launch("jacobi3d", __name__.rpartition(".")[0] + ".charm4py_program", cfg,
                  lambda m: _report(cfg, m))
