"""Charm4py's proxies on shoal's: ``awaitable=`` calls, ``ckLocal``/``ckLocalBranch``,
slices of array proxies as sections, indices given as lists."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import shoal
from ... import CollectionProxy, ElementProxy, Future, SectionProxy
from ...lowlevel import (
    ElementEntry, Entry, add_call_option, call_element, has_value, local_branch, local_element, new_future, outcome,
    resolve,
)
from ._futures import as_handle

__all__ = ["KINDS", "as_index", "completion"]

add_call_option("awaitable")  # Charm4py's: a call with awaitable=True takes the Python path, which makes its future


def as_index(index: Any) -> Any:
    """``index`` as shoal takes it: Charm4py takes any sequence of ints as an element's
    index (``proxy[[0, 0, 1]]``, a 1-d NumPy array), shoal an int or a tuple; anything
    else is left for shoal to judge (and to refuse, naming the index)."""
    if isinstance(index, (tuple, str, bytes)):
        return index
    if isinstance(index, Sequence) or (isinstance(index, np.ndarray) and index.ndim == 1):
        return tuple(index)
    return index


def completion(fut: Future) -> Future:
    """A future that resolves to None when ``fut`` does (``awaitable=True``): errors pass."""
    out = new_future(1)

    def done(f: Future) -> None:
        resolve(out, None if has_value(f) else outcome(f))

    fut.add_done_callback(done)
    return as_handle(out)


class _ElementEntry(ElementEntry):
    """A Charm4py element proxy's entry method: ``ret=`` and ``awaitable=``. Where this
    process runs a compiled core, shoal's compiled element entry stands in for it (no
    Python frame between a call and MPI_Isend) and hands calls with ``ret``/``awaitable``
    to :meth:`Element._call_slow`; this class is the Python path's."""

    __slots__ = ()
    #: the compiled entry may replace it in proxy classes (see proxy.proxy_classes)
    compiled_stands_in = True

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not kwargs:  # the common call: shoal's own (compiled, where a core runs) element entry
            return call_element(self, args)
        return self._call(args, **kwargs)

    def _call(self, args: tuple, /, ret: bool = False, awaitable: bool = False, **kwargs: Any) -> Any:
        fut = ElementEntry.__call__(self, *args, ret=ret or awaitable, **kwargs)
        return completion(fut) if awaitable and not ret and fut is not None else as_handle(fut)


class _Entry(Entry):
    __slots__ = ()

    def __call__(self, *args: Any, ret: bool = False, awaitable: bool = False, **kwargs: Any) -> Any:
        if ret:  # Charm4py's list of results holds the exception of each element that raised
            return as_handle(self.outcomes(*args, **kwargs))
        fut = Entry.__call__(self, *args, ret=awaitable, **kwargs)
        return completion(fut) if awaitable else fut


class Element(ElementProxy):
    """A Charm4py element proxy."""

    __slots__ = ()
    issec = None

    @staticmethod
    def _call_slow(proxy: Any, entry: int, name: str, args: tuple, kwargs: dict) -> Any:
        """A call the compiled entry passed on (``ret=``/``awaitable=``, keywords)."""
        return _ElementEntry(proxy, entry, name)._call(args, **kwargs)

    def __getitem__(self, index: Any) -> Any:
        """Another element of the same collection (Charm4py lets a single chare's
        ``thisProxy[thisIndex]`` name itself)."""
        info = self._info
        return type(self)(info, info.normalize(as_index(index)))

    def ckLocal(self) -> Any:
        """The element object itself if it is on this PE, else None."""
        return local_element(self, "ckLocal()")

    def ckLocalBranch(self) -> Any:
        return _local_branch(self)

    @property
    def elemIdx(self) -> Any:
        return self.index


class Collection(CollectionProxy):
    """A Charm4py Group or Array proxy: index it, slice it (a section), broadcast to it."""

    __slots__ = ()
    issec = None

    def __getitem__(self, index: Any) -> Any:
        if type(index) is not int:
            index = as_index(index)
            if isinstance(index, slice) or (isinstance(index, tuple) and any(isinstance(i, slice) for i in index)):
                return self.section(_sliced(self._info, index))
        return super().__getitem__(index)

    def ckLocalBranch(self) -> Any:
        """This PE's element of a Group."""
        return _local_branch(self)

    def ckInsert(self, index: Any, args: Any = (), onPE: int = -1, useAtSync: bool = False) -> None:
        if onPE != -1:
            raise NotImplementedError("ckInsert(onPE=...): shoal places inserted elements by the array's "
                                      "placement; give Array(..., map=...) instead")
        self.insert(as_index(index), tuple(args))

    def ckDoneInserting(self) -> None:
        self.done_inserting()


class Section(SectionProxy):
    """A Charm4py section proxy (``proxy[::2]``, ``charm.split``, ``charm.combine``)."""

    __slots__ = ()
    issec = True

    @property
    def section(self) -> Any:
        """Charm4py's section id: ``(root PE, sid)``."""
        return (self._info.root, self.sid)


KINDS = ((Element, _ElementEntry), (Collection, _Entry), (Section, _Entry))


def _local_branch(proxy: Any) -> Any:
    if proxy._info.kind != "group":
        raise TypeError("ckLocalBranch() is for Group proxies; use proxy[i].ckLocal() for array elements")
    return local_branch(proxy, "ckLocalBranch()")


def _sliced(info: Any, index: Any) -> list:
    """The indices of a dense array (or group) that a slice selects."""
    import itertools

    if info.kind == "group":
        shape: tuple = (shoal.num_pes(),)
    elif info.shape is None:
        raise TypeError("a sparse array proxy cannot be sliced: its elements are not known ahead")
    else:
        shape = info.shape
    parts = index if isinstance(index, tuple) else (index,)
    if len(parts) != len(shape):
        raise IndexError(f"slice {index!r} has {len(parts)} dimensions; the collection has {len(shape)}")
    ranges = [range(*p.indices(n)) if isinstance(p, slice) else [p] for p, n in zip(parts, shape)]
    if info.kind == "group" and info.pes is not None:  # a Group over some PEs: the ones it has
        ranges = [[pe for pe in ranges[0] if pe in info.pes]]
    return [c if len(c) > 1 else c[0] for c in itertools.product(*ranges)]
