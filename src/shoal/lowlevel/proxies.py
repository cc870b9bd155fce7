"""Proxies as a layer extends them: entry-method types with call options of its own, the
elements a proxy covers, and the element objects that live on this PE.

A chare class names its proxy classes' bases and entry-method types in
``_shoal_proxy_kinds``: ``((element proxy base, its entry type), (collection ..., ...),
(section ..., ...))``, the bases subclasses of :class:`shoal.ElementProxy`,
:class:`shoal.CollectionProxy` and :class:`shoal.SectionProxy`, the entry types of
:class:`~shoal.lowlevel.ElementEntry` and :class:`~shoal.lowlevel.Entry`. An element proxy
class that takes call options (:func:`~shoal.lowlevel.add_call_option`) defines ``_call_slow(proxy, entry, name, args, kwargs)``: the
compiled core hands it the calls it leaves to Python.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import

from .._runtime import proxy as _proxy
from .._runtime.context import current
from .._runtime.proxy import EntryRef, _BoundElementEntry, _BoundEntry, _element, _parts_of, add_call_option, union

if TYPE_CHECKING:
    from typing import Any

__all__ = ["Entry", "ElementEntry", "EntryRef", "add_call_option", "call_element", "union", "elements_of",
           "local_element", "local_branch"]


class Entry(_BoundEntry):
    """What ``proxy.method`` is for a layer's collection or section proxy: ``proxy``,
    ``entry`` (the method's id) and ``name``. A subclass takes its own call options out of
    the keywords and sends with ``Entry.__call__(self, *args, ret=..., **kwargs)``, a
    broadcast or multicast whose future (with ``ret``) it may return or wrap."""

    __slots__ = ()


class ElementEntry(_BoundElementEntry):
    """What ``proxy[i].method`` is for a layer's element proxy: ``proxy``, ``entry`` and
    ``name``. A subclass sends with ``ElementEntry.__call__(self, *args, ret=...,
    **kwargs)`` (the Python path), or :func:`call_element` for a call without options;
    with ``compiled_stands_in = True`` the compiled core's entry replaces it in proxy
    classes where a compiled core runs."""

    __slots__ = ()


def call_element(bound: ElementEntry, args: tuple) -> Any:
    """Call the element's entry method ``bound`` with ``args`` and no call options by
    shoal's own path: the compiled send where a compiled core runs on this PE, else the
    Python one."""
    native = _proxy._native_descriptor
    if native is not None:
        return native(bound.entry, bound.name).__get__(bound.proxy, None)(*args)
    return _BoundElementEntry.__call__(bound, *args)


def elements_of(proxy: Any, what: str = "this call") -> list:
    """The element proxies that ``proxy`` (a collection of fixed elements, a section or an
    element) covers: collection by collection, each in index order."""
    npes = current(what).npes
    return [_element(info, index) for info, indices in _parts_of(proxy, npes) for index in indices]


def local_element(proxy: Any, what: str = "this call") -> Any:
    """The element object that the element proxy ``proxy`` names if it lives on this PE
    now, else None: a layer may call its methods directly (Charm4py's ``ckLocal``)."""
    cs = current(what).colls.get(proxy._info.id)
    return None if cs is None else cs.elements.get(proxy._index)


def local_branch(proxy: Any, what: str = "this call") -> Any:
    """This PE's element of the Group that ``proxy`` (the Group's or one of its elements')
    names; None where it has none, or has not made it yet."""
    rt = current(what)
    cs = rt.colls.get(proxy._info.id)
    return None if cs is None else cs.elements.get((rt.pe,))
