"""Where elements live: home PE by placement, a cache of last-known PEs, forwarding.

Every element has a *home* PE, computed from its index by the collection's
placement, so no PE keeps a table of all elements. A PE sends to the last location
it learnt of an element, else to its home. The home records where its elements went
when they move; a message that reaches a PE the element has left is forwarded (to
the home, which knows), and the home tells the original sender the element's PE so
its next message goes straight there. Decisions here are pure; the runtime sends.
"""

from __future__ import annotations

import itertools
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .collections import CollectionInfo
    from .proxy import ElementProxy

__all__ = ["Locations", "Route"]

_EPOCHS = itertools.count(1)  # process-wide, so a proxy's cached PE is never taken for another PE's


class Route(Enum):
    """What to do with a message for an element that is not on this PE."""

    FORWARD = "forward"  # send it on to the PE returned with this route
    HOLD = "hold"  # keep it: the element is about to be created here
    FAIL = "fail"  # the element does not exist


class Locations:
    """One PE's knowledge of element locations (only of elements away from home)."""

    __slots__ = ("pe", "npes", "cache", "records", "epoch")

    def __init__(self, pe: int, npes: int):
        self.pe = pe
        self.npes = npes
        self.cache: dict[tuple, int] = {}  # (collection, index) -> last PE learnt
        self.records: dict[tuple, int] = {}  # at the home: (collection, index) -> current PE
        self.epoch = next(_EPOCHS)  # changes whenever a location is learnt: proxies re-resolve

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

    def learn(self, info: "CollectionInfo", index: tuple, pe: int) -> None:
        """Element ``index`` is on ``pe`` (a location update, or it moved here)."""
        key = (info.id, index)
        self.epoch = next(_EPOCHS)
        if info.home(index, self.npes) == self.pe:
            self._set(self.records, key, pe, info, index)
        self._set(self.cache, key, pe, info, index)

    def _set(self, table: dict, key: tuple, pe: int, info: "CollectionInfo", index: tuple) -> None:
        if pe == info.home(index, self.npes):
            table.pop(key, None)
        else:
            table[key] = pe

    def route_missing(self, info: "CollectionInfo", index: tuple, complete: bool) -> tuple[Route, int]:
        """Where a message for an element that is not here goes.

        ``complete`` says the collection has all its elements (false for a sparse
        array before ``done_inserting``).
        """
        key = (info.id, index)
        home = info.home(index, self.npes)
        if home != self.pe:
            if self.cache.pop(key, None) is not None:  # stale: ask the home, which knows
                self.epoch = next(_EPOCHS)
            return Route.FORWARD, home
        pe = self.records.get(key)
        if pe is not None and pe != self.pe:
            return Route.FORWARD, pe
        return (Route.FAIL, -1) if complete else (Route.HOLD, -1)
