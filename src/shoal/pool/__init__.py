"""Task pool: run plain functions on the PEs — ``map``, ``map_async`` and an Executor.

``shoal.pool.map(fn, items)`` is ``[fn(x) for x in items]`` with the calls spread
over the PEs; :class:`Executor` is a ``concurrent.futures.Executor`` over the same
workers. Each task goes to the least busy PE, so uneven tasks balance.
"""

from ._executor import Executor
from ._tasks import BrokenPool, map, map_async

__all__ = ["map", "map_async", "Executor", "BrokenPool"]
