"""A shoal job for scripts that never call ``shoal.start``.

A CharmStencil-style script is plain top-level code: ``grid = Jacobi2D(n, None);
grid.solve(1000)``. When its first stencil is created outside a running shoal
program, :func:`ensure_runtime` attaches the job there with :func:`shoal.attach`:
under ``shoal run -n N`` PE 0 goes on running the script as the frontend while every
other PE serves as backend until the script ends; under plain ``python prog.py`` the
PEs (``SHOAL_PES``, 1 by default) live in this process. Code before the first stencil
runs on every PE, code after it on PE 0 only.
"""

from __future__ import annotations

from .. import attach

__all__ = ["ensure_runtime"]


def ensure_runtime() -> None:
    """Make sure a shoal runtime is running on this PE (attach the job if not)."""
    attach()
