"""Benchmarks of shoal against mpi4py and other peers (``shoal bench …``).

Every benchmark of the project lives under this package, one subpackage each
(``micro``, ``compare``, ``taskbench``, ``stencil``), and is a subcommand registered in
:mod:`.cli`; ``stats`` and ``plot`` are shared by them. See docs/benchmarks.md.
"""
