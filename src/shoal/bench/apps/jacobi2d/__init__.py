"""A 2-D Jacobi stencil proxy app: ``shoal bench app jacobi2d``.

:mod:`.kernels` holds the compiled 5-point update and the exact checksum every target
shares, :mod:`.layout` the block decomposition, and :mod:`.sequential`,
:mod:`.mpi4py_target` and :mod:`.shoal_target` the three targets.
"""

from .app import DEFAULT_STEPS, HELP, TARGETS, Config, add_options, configure

__all__ = ["DEFAULT_STEPS", "HELP", "TARGETS", "Config", "add_options", "configure"]
