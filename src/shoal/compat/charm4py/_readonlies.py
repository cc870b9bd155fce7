"""Charm4py's readonlies on shoal: what PE 0 sets in ``charm4py.readonlies`` reaches
every PE before the collections it creates next.

Charm4py broadcasts the readonlies once, when the main function or main chare first
lets the scheduler run. The layer sends them from PE 0 when a collection is about to
be made and they changed since they were last sent (by value: names, and each
value's identity), and waits for every PE to have them where the caller may wait
(``main()``, a ``@coro`` method); so an element's constructor sees them, as in Charm4py.
"""

from __future__ import annotations

import types
import weakref
from typing import Any

from ..._runtime import context, threads
from . import readonlies

__all__ = ["sync", "receive"]

#: per job (PE 0's runtime): name -> id of the value last sent
_sent: "weakref.WeakKeyDictionary[Any, dict[str, int]]" = weakref.WeakKeyDictionary()


def _values() -> dict[str, Any]:
    return {k: v for k, v in vars(readonlies).items()
            if not k.startswith("_") and not isinstance(v, types.ModuleType)}


def sync(remote: Any) -> None:
    """Send the readonlies to every PE if this is PE 0 and they changed (``remote``: the
    ``charm.thisProxy`` Group, None before the job started)."""
    rt = context._current
    if rt is None or rt.pe != 0 or remote is None or rt.npes == 1:
        return
    values = _values()
    ids = {k: id(v) for k, v in values.items()}
    if ids == _sent.get(rt, {}):
        return
    _sent[rt] = ids
    if rt.counts.depth and threads.in_thread() is None:
        remote.c4p_readonlies(values)  # a plain entry method cannot wait: sent ahead
    else:
        remote.c4p_readonlies(values, awaitable=True).get()


def receive(values: dict) -> None:
    """Set the readonlies PE 0 sent."""
    for k, v in values.items():
        setattr(readonlies, k, v)
