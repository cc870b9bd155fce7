"""``--system charm4py``: Task Bench as a Charm4py Array, for comparison with shoal.

Charm4py (``pip install charm4py``) starts its own job with ``python -m charmrun.start
+pN``, so :func:`main` runs :mod:`.charm4py_program` under that launcher and prints
what it wrote (Charm++ prints banners on stdout, so the reports travel through a
file). This module never imports charm4py itself.
"""

from __future__ import annotations

import pickle
import sys
import tempfile
from pathlib import Path
from typing import TextIO

from ...charmrun import run_charm4py
from ..app import App

__all__ = ["main"]

_TIMEOUT = 3600.0


def main(app: App, out: TextIO = sys.stdout) -> int:
    """Run ``app`` as a Charm4py job of ``app.pes`` PEs; print its reports."""
    with tempfile.TemporaryDirectory(prefix="shoal-taskbench-charm4py-") as tmp:
        files = [Path(tmp) / n for n in ("app.pickle", "out.txt", "code.txt")]
        files[0].write_bytes(pickle.dumps(app))
        program = __name__.rpartition(".")[0] + ".charm4py_program"
        proc = run_charm4py(program, app.pes, files, _TIMEOUT)
        if proc is None:
            print(f"shoal bench taskbench: the charm4py job did not finish in {_TIMEOUT:.0f} s", file=sys.stderr)
            return 1
        if files[1].exists():
            out.write(files[1].read_text())
            out.flush()
        if proc.returncode != 0 or not files[2].exists() or files[2].read_text() != "0":
            print(f"shoal bench taskbench: the charm4py job failed (exit {proc.returncode}); its output:\n"
                  f"{proc.stdout[-3000:]}{proc.stderr[-3000:]}", file=sys.stderr)
            return 1
        return 0
