"""A 3-D Jacobi stencil proxy app: ``shoal bench app jacobi3d``.

:mod:`.kernels` holds the compiled 7-point update, for the CPU and for CUDA (the exact
checksum is jacobi2d's), :mod:`.arrays` where the blocks live (NumPy, or CuPy on a GPU
with ``--device cuda``), :mod:`..blocks` the block decomposition shared with jacobi2d,
and :mod:`.sequential`, :mod:`.mpi4py_target`, :mod:`.shoal_target` and
:mod:`.charm4py_target` the targets.
"""

from .app import DEFAULT_STEPS, HELP, TARGETS, Config, add_options, configure

__all__ = ["DEFAULT_STEPS", "HELP", "TARGETS", "Config", "add_options", "configure"]
