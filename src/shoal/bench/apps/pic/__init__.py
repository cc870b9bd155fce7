"""The Parallel Research Kernels' particle-in-cell (PIC) proxy app: ``shoal bench app pic``.

:mod:`.physics` states the kernel (mesh, distributions, verification), :mod:`.kernels`
the compiled step every target shares, :mod:`.layout` the block decomposition, and
:mod:`.sequential`, :mod:`.mpi4py_target` and :mod:`.shoal_target` the three targets.
"""

from .app import DEFAULT_STEPS, HELP, TARGETS, Config, add_options, configure

__all__ = ["DEFAULT_STEPS", "HELP", "TARGETS", "Config", "add_options", "configure"]
