"""A 3-D Jacobi stencil proxy app: ``shoal bench app jacobi3d``.

:mod:`.kernels` holds the compiled 7-point update (the exact checksum is jacobi2d's),
:mod:`..blocks` the block decomposition shared with jacobi2d, and :mod:`.sequential`,
:mod:`.mpi4py_target` and :mod:`.shoal_target` the three targets.
"""

from .app import DEFAULT_STEPS, HELP, TARGETS, Config, add_options, configure

__all__ = ["DEFAULT_STEPS", "HELP", "TARGETS", "Config", "add_options", "configure"]
