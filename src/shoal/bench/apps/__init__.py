"""Proxy applications on shoal, mpi4py and a sequential reference (``shoal bench app``).

One subpackage per app (``pic``), each registered in :mod:`.cli`, each with the same
targets and the same report (:mod:`.report`).
"""

from .cli import APPS, main

__all__ = ["APPS", "main"]
