"""Proxy applications on shoal, mpi4py and a sequential reference (``shoal bench app``).

One subpackage per app (``pic``, ``jacobi2d``, ``jacobi3d``), each registered in
:mod:`.cli`, each with the same targets and the same report (:mod:`.report`); the
block-decomposed ones cut their grids with :mod:`.blocks`.
"""

from .cli import APPS, main

__all__ = ["APPS", "main"]
