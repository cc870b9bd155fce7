"""``--target charm4py``: latency and bandwidth of Charm4py entry methods.

Charm4py (``pip install charm4py``; ``pip install 'shoal[charm4py]'``) starts its own
job with ``python -m charmrun.start +pN``, so :func:`launch` runs this module as the
program (``charm4py_program``) under that launcher and collects what it wrote: Charm++ prints banners on
stdout, so the results travel through files and only they reach our stdout.

This module never imports charm4py itself, so it loads without it.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import tempfile
from pathlib import Path

from ..charmrun import run_charm4py
from .options import Config

__all__ = ["launch"]

_TIMEOUT = 3600.0


def launch(cfg: Config, inside: bool) -> int:
    """Run the tests of ``cfg`` as a Charm4py job of ``cfg.pes`` PEs; print its results."""
    if inside:
        print(
            "shoal bench micro: --target charm4py starts its own job with charmrun; "
            "run it without mpiexec/srun", file=sys.stderr,
        )
        return 2
    with tempfile.TemporaryDirectory(prefix="shoal-charm4py-") as tmp:
        files = [Path(tmp) / n for n in ("config.json", "out.txt", "err.txt", "code.txt")]
        files[0].write_text(json.dumps(dataclasses.asdict(cfg)))
        program = __name__.rpartition(".")[0] + ".charm4py_program"
        proc = run_charm4py(program, cfg.pes, files, _TIMEOUT)
        if proc is None:
            print(f"shoal bench micro: the charm4py job did not finish in {_TIMEOUT:.0f} s", file=sys.stderr)
            return 1
        out = files[1].read_text() if files[1].exists() else ""
        err = files[2].read_text() if files[2].exists() else ""
        sys.stdout.write(out)
        sys.stdout.flush()
        sys.stderr.write(err)
        if proc.returncode != 0 or not files[3].exists():
            print(
                f"shoal bench micro: the charm4py job failed (exit {proc.returncode}); its output:\n"
                f"{proc.stdout}{proc.stderr}", file=sys.stderr,
            )
            return 1
        return int(files[3].read_text())
