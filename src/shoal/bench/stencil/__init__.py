"""Stencil DSL benchmarks: ``shoal bench stencil`` and ``shoal bench stencil-pipeline``.

Each benchmark is a driver (the command line: rounds, table, JSON, figure) and a worker
(the program one system or configuration runs, in its own process or ``shoal run`` job,
printing one ``RESULT`` line). The modules: ``problems`` (Jacobi, Burgers and 3-D
Laplace, written once for NumPy arrays and stencil fields, and the hand-written C loops),
``jobs`` (running a worker and reading its result), ``cli``/``worker`` (``shoal bench
stencil``) and ``pipeline_cli``/``pipeline_worker`` (``shoal bench stencil-pipeline``).
"""
