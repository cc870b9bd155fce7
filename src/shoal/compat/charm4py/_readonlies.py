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

import shoal
from ...lowlevel import in_job, job_key, may_block
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
    if not in_job() or shoal.my_pe() != 0 or remote is None or shoal.num_pes() == 1:
        return
    values = _values()
    ids = {k: id(v) for k, v in values.items()}
    job = job_key()
    if ids == _sent.get(job, {}):
        return
    _sent[job] = ids
    if not may_block():
        remote.c4p_readonlies(values)  # a plain entry method cannot wait: sent ahead
    else:
        remote.c4p_readonlies(values, awaitable=True).get()


def receive(values: dict) -> None:
    """Set the readonlies PE 0 sent."""
    for k, v in values.items():
        setattr(readonlies, k, v)
