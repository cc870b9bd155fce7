"""One PE's bookkeeping of futures by number: the decisions, without I/O.

A future another PE may resolve has a number (``fid``) in its owner's table while it is
pending. A value that arrives for a number resolves that future, or finds it resolved
already: a second error is dropped (the first one wins), a second value is an error. A
future that travelled in a message stays findable while it lives, so that its owner can
answer another PE that awaits it. Another PE's future that arrives here becomes one
handle per future; this PE asks its owner for the value once, however many wait on it.

The runtime (``receiving``, ``sending``, ``futures``) does the sends; the compiled core
reads ``futures`` and ``next_fid`` (core_contract.NAMES) and numbers the futures of its
own ``ret=True`` calls from the same counter. Unit-tested without processes in
``tests/runtime/test_future_table.py``.
"""

from __future__ import annotations

import weakref

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any

    from .futures import Future

__all__ = ["FutureTable", "DROP", "TWICE", "LAST_FID"]

#: :meth:`FutureTable.arrival`: a second error for a resolved future, dropped
DROP = "drop"
#: :meth:`FutureTable.arrival`: a second value for a resolved future, an error
TWICE = "twice"
#: the largest number; numbering goes on from 1 after it (a header's field holds 32 bits)
LAST_FID = 0xFFFFFFFF


class FutureTable:
    """This PE's numbered futures, the ones that travelled, and its handles of others'."""

    __slots__ = ("futures", "escaped", "handles", "asked", "next_fid")

    def __init__(self) -> None:
        #: pending futures of this PE by number (resolving one removes it)
        self.futures: dict[int, Future] = {}
        #: futures of this PE that went out in messages, resolved or not, while they live
        self.escaped: weakref.WeakValueDictionary[int, Future] = weakref.WeakValueDictionary()
        #: this PE's handles of other PEs' futures that arrived in messages, by (owner, fid)
        self.handles: weakref.WeakValueDictionary[tuple, Future] = weakref.WeakValueDictionary()
        #: the handles whose value this PE asked their owner for, by (owner, fid)
        self.asked: set[tuple] = set()
        #: the number the next future takes
        self.next_fid = 1

    # -- this PE's futures -----------------------------------------------------------
    def register(self, fut: Future) -> int:
        """A new future that another PE may resolve: its number."""
        fid = self.next_fid
        self.next_fid = fid + 1 if fid < LAST_FID else 1
        self.futures[fid] = fut
        return fid

    def forget(self, fid: int) -> None:
        """Future ``fid`` resolved (or its call was never sent): no message resolves it now."""
        self.futures.pop(fid, None)

    def travelled(self, fut: Future) -> None:
        """``fut`` goes out in a message: keep it findable while it lives."""
        escaped = self.escaped
        if escaped.get(fut.fid) is not fut:
            escaped[fut.fid] = fut

    def owned(self, fid: int) -> Future | None:
        """This PE's future ``fid``, pending or travelled and still alive; None if neither."""
        return self.futures.get(fid) or self.escaped.get(fid)

    def arrival(self, fid: int, failed: bool) -> Any:
        """What a value (``failed``: an error) that arrived for future ``fid`` does: the
        future it resolves, else :data:`DROP` or :data:`TWICE`."""
        fut = self.futures.get(fid)
        if fut is not None:
            return fut
        return DROP if failed else TWICE

    # -- other PEs' futures ----------------------------------------------------------
    def handle(self, owner: int, fid: int) -> Future | None:
        """This PE's handle of future ``fid`` of PE ``owner``, if one lives."""
        return self.handles.get((owner, fid))

    def keep_handle(self, handle: Future) -> None:
        """``handle`` stands for its future on this PE from now on (one per future)."""
        self.handles[(handle.owner, handle.fid)] = handle

    def ask(self, owner: int, fid: int) -> bool:
        """A waiter on future ``fid`` of PE ``owner``: True if this PE must ask its owner
        for the value now (it has not asked yet)."""
        key = (owner, fid)
        if key in self.asked:
            return False
        self.asked.add(key)
        return True

    def answered(self, owner: int, fid: int) -> None:
        """The owner answered: a later waiter asks again (the handle may have been dropped)."""
        self.asked.discard((owner, fid))
