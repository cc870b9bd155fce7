"""Starting a Charm4py program with Charm4py's own launcher, for the peer benchmarks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Sequence

__all__ = ["run_charm4py"]


def run_charm4py(module: str, pes: int, files: Sequence[Path], timeout: float) -> subprocess.CompletedProcess | None:
    """Run ``python -m charmrun.start +p<pes> -m <module> <files…>``; None if it timed out.

    Charm++ prints banners on stdout, so the programs exchange data through ``files``.
    """
    cmd = [sys.executable, "-m", "charmrun.start", f"+p{pes}", "-m", module, *map(str, files)]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
