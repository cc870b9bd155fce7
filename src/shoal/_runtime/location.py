"""Where elements live: home PE by placement, what a PE learnt, and forwarding.

Every element has a *home* PE, computed from its index by the collection's
placement, so no PE keeps a table of all elements. An element that migrates leaves a
*pointer* on the PE it left (where it went), so a message that reaches a PE the
element has left follows the pointers to it; the home is the first PE of the chain.
Pointers change only when the element leaves a PE again, which keeps every chain
first-in first-out: messages that take it arrive in the order they entered it.

A PE sends its own messages to the last location it *learnt* (a LOCATION message from
the element's host, with the element's move count, so an old report never replaces a
newer one), else to the home. Decisions here are pure; the runtime sends
(:mod:`shoal._runtime.migration` keeps per-sender order when a sender's route changes).
"""

from __future__ import annotations

import itertools
from enum import Enum

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import

if TYPE_CHECKING:
    from .collections import CollectionInfo
    from .proxy import ElementProxy

__all__ = ["Locations", "Route"]

_EPOCHS = itertools.count(1)  # process-wide, so a proxy's cached PE is never taken for another PE's


class Route(Enum):
    """What to do with a message for an element that is not on this PE."""

    FORWARD = "forward"  # send it on to the PE returned with this route
    HOLD = "hold"  # keep it: the element is about to be created or to arrive here
    FAIL = "fail"  # the element does not exist


class Locations:
    """One PE's knowledge of element locations (only of elements away from home)."""

    __slots__ = ("pe", "npes", "cache", "versions", "pointers", "incoming", "parked", "epoch")

    def __init__(self, pe: int, npes: int):
        self.pe = pe
        self.npes = npes
        self.cache: dict[tuple, int] = {}  # (collection, index) -> where this PE sends its own messages
        self.versions: dict[tuple, int] = {}  # (collection, index) -> move count of what `cache` holds
        self.pointers: dict[tuple, int] = {}  # (collection, index) -> where the element went from here
        self.incoming: set[tuple] = set()  # elements on their way here
        self.parked: set[tuple] = set()  # those of them already here, waiting to land (balancing.py)
        self.epoch = next(_EPOCHS)  # changes whenever a location is learnt: proxies re-resolve

    def forget(self, coll: int) -> None:
        """Drop what this PE learnt about the elements of collection ``coll`` (destroyed)."""
        for table in (self.cache, self.versions, self.pointers):
            for key in [k for k in table if k[0] == coll]:
                del table[key]
        self.incoming = {k for k in self.incoming if k[0] != coll}
        self.parked = {k for k in self.parked if k[0] != coll}
        self.epoch = next(_EPOCHS)

    def route(self, proxy: "ElementProxy") -> int:
        """:meth:`locate` for a proxy, cached on it until a location changes here."""
        if proxy._epoch != self.epoch:
            proxy._dest = self.locate(proxy._info, proxy._index)
            proxy._epoch = self.epoch
        return proxy._dest

    def locate(self, info: "CollectionInfo", index: tuple) -> int:
        """The PE to send a message for element ``index`` to."""
        if self.cache:
            pe = self.cache.get((info.id, index))
            if pe is not None:
                return pe
        return info.home(index, self.npes)

    def learn(self, info: "CollectionInfo", index: tuple, pe: int, moves: int) -> bool:
        """Element ``index`` was on ``pe`` after its ``moves``-th move; False if this PE
        knew of a later location already (the report is old and changes nothing)."""
        key = (info.id, index)
        if moves < self.versions.get(key, 0):
            return False
        self.versions[key] = moves
        self.epoch = next(_EPOCHS)
        if pe == info.home(index, self.npes):
            self.cache.pop(key, None)
        else:
            self.cache[key] = pe
        return True

    def depart(self, info: "CollectionInfo", index: tuple, dest: int, moves: int) -> None:
        """Element ``index`` left this PE for ``dest`` (its ``moves``-th move)."""
        key = (info.id, index)
        self.pointers[key] = dest
        self.cache[key] = dest
        self.versions[key] = moves
        self.epoch = next(_EPOCHS)

    def expect(self, info: "CollectionInfo", index: tuple, parked: bool = False) -> None:
        """Element ``index`` is on its way here: hold its messages until it arrives
        (``parked``: it is here already, waiting to land)."""
        self.incoming.add((info.id, index))
        if parked:
            self.parked.add((info.id, index))

    def arrive(self, info: "CollectionInfo", index: tuple, moves: int) -> None:
        """Element ``index`` arrived here after its ``moves``-th move."""
        key = (info.id, index)
        self.incoming.discard(key)
        self.parked.discard(key)
        self.pointers.pop(key, None)
        self.versions[key] = moves
        self.epoch = next(_EPOCHS)
        if self.pe == info.home(index, self.npes):
            self.cache.pop(key, None)
        else:
            self.cache[key] = self.pe

    def route_missing(self, info: "CollectionInfo", index: tuple, complete: bool) -> tuple[Route, int]:
        """Where a message for an element that is not here goes.

        ``complete`` says the collection has all its elements (false for a sparse
        array before ``done_inserting``).
        """
        key = (info.id, index)
        if self.parked and key in self.parked:
            # the element is here, about to land: a pointer left by its last stay here is
            # stale, and a message sent on along it would come back behind later ones
            return Route.HOLD, -1
        if self.pointers:
            pe = self.pointers.get(key)
            if pe is not None:
                return Route.FORWARD, pe  # still away: it may wait for a FENCE that comes this way
        if self.incoming and key in self.incoming:
            return Route.HOLD, -1
        home = info.home(index, self.npes)
        if home != self.pe:
            return Route.FORWARD, home
        return (Route.FAIL, -1) if complete else (Route.HOLD, -1)
