"""Task pool: run plain functions on the PEs — ``map``, ``map_async`` and an Executor.

``shoal.pool.map(fn, items)`` is ``[fn(x) for x in items]`` with the calls spread
over the PEs; :class:`Executor` is a ``concurrent.futures.Executor`` over the same
workers. Each task goes to the least busy PE, so uneven tasks balance.
:func:`submit` and :func:`spawn` start one task (with a future, or none). Tasks run
threaded: a task may itself call ``map`` or wait on ``submit``'s futures, however deep
the recursion, while its PE runs other tasks.
"""

from ._executor import Executor
from ._spawn import spawn, submit
from ._tasks import BrokenPool, map, map_async

__all__ = ["map", "map_async", "submit", "spawn", "Executor", "BrokenPool"]
