"""Charm4py's API on shoal: run Charm4py programs unchanged.

``shoal run -n 4 --compat charm4py prog.py`` makes ``import charm4py`` give this
package. Every name maps onto shoal's public API (see docs/charm4py.md for the table,
the semantic differences and what is not supported).
"""

from __future__ import annotations

from ._chare import Array, ArrayMap, Chare, Group, coro, register, threaded, when
from ._channel import Channel
from ._charm import charm
from ._futures import CompatFuture as Future
from ._options import take_launcher_options
from ._reduction import Reducer
from . import readonlies, threads

__version__ = "1.1+shoal"

__all__ = ["charm", "Chare", "Group", "Array", "ArrayMap", "Reducer", "Future", "Channel", "coro",
           "threaded", "when", "register", "readonlies", "threads", "take_launcher_options"]
