"""Proxies: how a program names chares and invokes their entry methods.

One mechanism serves every kind of proxy: per chare class, three proxy subclasses
are generated once (element, collection, section), each with one real method per
entry method, so ``p[i].work(x)`` is an attribute lookup and a call. The kinds differ
only in where a call goes: one element (straight to the runtime), a broadcast, or a
multicast (through ``_invoke``).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any, Iterable

from .chare import entry_table
from .collections import CollectionInfo, row_major
from . import context
from .context import current

__all__ = [
    "Proxy", "ElementProxy", "CollectionProxy", "SectionProxy", "EntryRef", "proxy_classes", "use_native_entries",
    "union", "CALL_OPTIONS", "add_call_option",
]

_native_descriptor: Any = None  # the compiled entry descriptor, once a compiled core runs here
BROADCAST, MULTICAST = 1, 2  # its kinds besides an element's call (0): a collection's and a section's


class Proxy:
    """Base of all proxies."""

    __slots__ = ("_info",)
    _info: CollectionInfo

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        entry_table(self._info.cls).id_of(name)  # raises the helpful error
        raise AttributeError(name)  # pragma: no cover - id_of always raises here


class ElementProxy(Proxy):
    """One element of a collection."""

    __slots__ = ("_index", "_dest", "_epoch", "_packed")

    def __init__(self, info: CollectionInfo, index: tuple):
        self._info = info
        self._index = index
        self._epoch = -1  # the location epoch `_dest` was resolved in (see location.py)
        self._dest = -1
        self._packed: bytes | None = None  # the index as the wire header carries it

    @property
    def index(self) -> Any:
        """The element's index (the PE number for a group element)."""
        return self._index[0] if self._info.kind == "group" else self._index

    def __reduce__(self) -> tuple:
        return (_element, (self._info, self._index))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ElementProxy) and (self._info.id, self._index) == (other._info.id, other._index)

    def __hash__(self) -> int:
        return hash((self._info.id, self._index))

    def __repr__(self) -> str:
        return f"<proxy {self._info.cls.__qualname__}{list(self._index)}>"


class CollectionProxy(Proxy):
    """A whole Group or Array: index it for one element, call it to broadcast."""

    __slots__ = ()

    def __init__(self, info: CollectionInfo):
        self._info = info

    def __getitem__(self, index: Any) -> ElementProxy:
        info = self._info
        return proxy_classes(info.cls)[0](info, info.normalize(index))

    def _element_at(self, index: tuple) -> ElementProxy:
        """The proxy of element ``index``, given in its normal form (an element's own ``proxy``)."""
        info = self._info
        return proxy_classes(info.cls)[0](info, index)

    def _invoke(self, entry: int, name: str, args: tuple, kwargs: dict, ret: bool) -> Any:
        return current("broadcasting an entry method").broadcast(self._info, entry, name, args, kwargs, ret)

    def section(self, indices: Iterable[Any]) -> "SectionProxy":
        """A proxy over the elements ``indices`` for multicast and section reductions."""
        info = self._info
        members = tuple(sorted({info.normalize(i) for i in indices}))
        if not members:
            raise ValueError(f"a section of {info.cls.__qualname__} needs at least one element")
        rt = current("CollectionProxy.section()")
        return proxy_classes(info.cls)[2](info, members, rt.new_id())

    def union(self, *others: "CollectionProxy | SectionProxy | ElementProxy") -> "SectionProxy":
        """A section over every element of this collection and of ``others`` (collections,
        sections and element proxies, of this collection or others), each element once.
        Multicast to it, or reduce over it with ``contribute(..., section=...)``; a
        multicast calls the method of the same name on the elements of each collection."""
        return union(self, *others)

    def insert(self, index: Any, args: tuple = ()) -> None:
        """Create element ``index`` of a sparse array (then call :meth:`done_inserting`)."""
        current("Array.insert()").lifecycle.insert(self._info, self._info.normalize(index), tuple(args))

    def migrate(self, index: Any, pe: int) -> None:
        """Move element ``index`` to PE ``pe``: messages to it keep arriving, in order."""
        info = self._info
        current("Array.migrate()").balancer.request(info, info.normalize(index), pe)

    def done_inserting(self) -> None:
        """Declare that every element of a sparse array has been inserted."""
        current("Array.done_inserting()").lifecycle.done_inserting(self._info)

    @property
    def shape(self) -> tuple | None:
        """The dims of a dense array (None for groups and sparse arrays)."""
        return self._info.shape

    def __reduce__(self) -> tuple:
        return (_collection, (self._info,))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CollectionProxy) and self._info.id == other._info.id

    def __hash__(self) -> int:
        return hash(self._info.id)

    def __repr__(self) -> str:
        return f"<proxy {self._info.kind} of {self._info.cls.__qualname__} id={self._info.id:#x}>"


class SectionProxy(Proxy):
    """A subset of a collection (or of several, made by ``union``): call it to
    multicast, pass it to ``contribute(section=)``.

    ``members`` are its sorted indices in the collection ``_info``; ``others`` holds
    ``(info, members)`` for each further collection of a union (empty otherwise). Entry
    methods are named by the first collection's class and called by name in the others.
    ``_direct`` keeps the members' element proxies while a multicast may go as one call
    each, for the location epoch ``_direct_epoch`` (``Sections.direct``).
    """

    __slots__ = ("members", "sid", "others", "_direct", "_direct_epoch")

    def __init__(self, info: CollectionInfo, members: tuple, sid: int, others: tuple = ()):
        self._info = info
        self.members = members
        self.sid = sid
        self.others = others
        self._direct: tuple | None = None
        self._direct_epoch = -1

    @property
    def parts(self) -> tuple:
        """``(info, members)`` for each collection the section spans, the first one first."""
        return ((self._info, self.members), *self.others)

    def union(self, *others: "CollectionProxy | SectionProxy | ElementProxy") -> "SectionProxy":
        """A section over every element of this section and of ``others`` (see
        :meth:`CollectionProxy.union`)."""
        return union(self, *others)

    def _invoke(self, entry: int, name: str, args: tuple, kwargs: dict, ret: bool) -> Any:
        return current("multicasting an entry method").sections.multicast(self, entry, name, args, kwargs, ret)

    def __len__(self) -> int:
        return len(self.members) + sum(len(m) for _, m in self.others)

    def __reduce__(self) -> tuple:
        if self.others:
            return (_section, (self._info, self.members, self.sid, self.others))
        return (_section, (self._info, self.members, self.sid))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SectionProxy) and self.sid == other.sid

    def __hash__(self) -> int:
        return hash(self.sid)

    def __repr__(self) -> str:
        return f"<section of {self._info.cls.__qualname__}, {len(self.members)} elements>"


class EntryRef:
    """``proxy.method`` (with optional leading arguments) as a value: a reduction target."""

    __slots__ = ("proxy", "name", "args")

    def __init__(self, proxy: Proxy, name: str, args: tuple = ()):
        self.proxy = proxy
        self.name = name
        self.args = args

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.proxy, self.name)(*self.args, *args, **kwargs)

    def bind(self, *args: Any) -> "EntryRef":
        """The same target with ``args`` put before the value it is called with."""
        return EntryRef(self.proxy, self.name, self.args + args)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, BOUND_ENTRIES):
            other = EntryRef(other.proxy, other.name)  # type: ignore[attr-defined]
        return isinstance(other, EntryRef) and (self.proxy, self.name, self.args) == (other.proxy, other.name, other.args)

    def __hash__(self) -> int:
        return hash((self.proxy, self.name))

    def __reduce__(self) -> tuple:
        return (EntryRef, (self.proxy, self.name, self.args))

    def __repr__(self) -> str:
        return f"{self.proxy!r}.{self.name}"


class _BoundEntry:
    """What ``proxy.method`` evaluates to: call it to send; use it as a reduction target."""

    __slots__ = ("proxy", "entry", "name")

    def __init__(self, proxy: Proxy, entry: int, name: str):
        self.proxy = proxy
        self.entry = entry
        self.name = name

    def __call__(self, *args: Any, ret: bool = False, **kwargs: Any) -> Any:
        return self.proxy._invoke(self.entry, self.name, args, kwargs, ret)  # type: ignore[attr-defined]

    def bind(self, *args: Any) -> EntryRef:
        """A reduction target that calls this method with ``args`` before the result."""
        return EntryRef(self.proxy, self.name, args)

    def outcomes(self, *args: Any, **kwargs: Any) -> Any:
        """Broadcast (or multicast) this method and return a future of every element's
        outcome, in index order: the value it returned, or the exception it raised. (A
        ``ret=True`` call's future fails with the first error instead.)"""
        if isinstance(self.proxy, ElementProxy):
            raise TypeError(f"{self.name}.outcomes() is for a collection or a section; one element's call "
                            f"has one outcome: use {self.name}(..., ret=True) and catch its error")
        from .futures import each_outcome

        return each_outcome(self.proxy._invoke(self.entry, self.name, args, kwargs, True))  # type: ignore[attr-defined]

    def __reduce__(self) -> tuple:
        return (EntryRef, (self.proxy, self.name))

    def __eq__(self, other: object) -> bool:
        return EntryRef(self.proxy, self.name) == other

    def __hash__(self) -> int:
        return hash((self.proxy, self.name))


class _BoundElementEntry(_BoundEntry):
    """An entry method of one element: the per-message path, straight to the runtime."""

    __slots__ = ()

    def __call__(self, *args: Any, ret: bool = False, **kwargs: Any) -> Any:
        rt = context._current
        if rt is None:
            rt = current("calling an entry method")
        return rt.invoke(self.proxy, self.entry, self.name, args, kwargs, ret)  # type: ignore[arg-type]

class _BoundCollectionEntry(_BoundEntry):
    """An entry method of a whole collection: a broadcast, straight to the runtime."""

    __slots__ = ()

    def __call__(self, *args: Any, ret: bool = False, **kwargs: Any) -> Any:
        rt = context._current
        if rt is None:
            rt = current("broadcasting an entry method")
        return rt.broadcast(self.proxy._info, self.entry, self.name, args, kwargs, ret, 4)  # type: ignore[attr-defined]


#: the types of ``proxy.method`` values (the compiled one too, once it is in use)
BOUND_ENTRIES: tuple[type, ...] = (_BoundEntry,)


class _EntryDescriptor:
    """Class attribute of a generated proxy class: binds an entry method to a proxy."""

    __slots__ = ("entry", "name", "bound")

    def __init__(self, entry: int, name: str, bound: type):
        self.entry = entry
        self.name = name
        self.bound = bound

    def __get__(self, proxy: Any, owner: type) -> Any:
        if proxy is None:
            return self
        return self.bound(proxy, self.entry, self.name)


#: the keywords that are a call's options rather than the method's arguments: shoal's
#: ``ret``, and those proxy classes of a layer add (:func:`add_call_option`); the compiled
#: proxies leave a call with one of them true to the Python path
CALL_OPTIONS: list[str] = ["ret"]


def add_call_option(name: str) -> None:
    """Make keyword ``name`` a call option of the proxies a layer defines (the Charm4py
    layer's ``awaitable``); before the job starts, so that the compiled core knows it."""
    if name not in CALL_OPTIONS:
        CALL_OPTIONS.append(name)


def use_native_entries(descriptor: type, bound: type) -> None:
    """Element, collection and section proxy classes built from now on take their entry
    methods from ``descriptor`` (``EntryDescriptor(entry, name, kind=0)`` of shoal's
    compiled module, which makes ``bound``; kind BROADCAST or MULTICAST)."""
    global _native_descriptor, BOUND_ENTRIES
    _native_descriptor = descriptor
    if bound not in BOUND_ENTRIES:
        BOUND_ENTRIES = (*BOUND_ENTRIES, bound)


#: chare class -> its generated proxy classes (kept off the class, so a class that
#: travels by value with cloudpickle does not drag compiled descriptors along)
_PROXY_CLASSES: dict[type, tuple] = {}


def proxy_classes(cls: type) -> tuple[type, type, type]:
    """The (element, collection, section) proxy classes of chare class ``cls``, built once.
    A class may name other bases and bound-method types for them in ``_shoal_proxy_kinds``
    (the Charm4py layer's proxies take ``awaitable=``)."""
    made = _PROXY_CLASSES.get(cls)
    if made is None:
        names = entry_table(cls).names
        native = _native_descriptor
        kinds = getattr(cls, "_shoal_proxy_kinds", None) or (
            (ElementProxy, _BoundElementEntry), (CollectionProxy, _BoundCollectionEntry), (SectionProxy, _BoundEntry))

        def methods(bound: type) -> dict:
            if native is not None and (bound is _BoundElementEntry or getattr(bound, "compiled_stands_in", False)):
                return {n: native(i, n) for i, n in enumerate(names)}
            if native is not None and bound is _BoundCollectionEntry:
                return {n: native(i, n, BROADCAST) for i, n in enumerate(names)}
            if native is not None and bound is _BoundEntry:
                return {n: native(i, n, MULTICAST) for i, n in enumerate(names)}
            return {n: _EntryDescriptor(i, n, bound) for i, n in enumerate(names)}

        made = tuple(
            type(f"{base.__name__}[{cls.__qualname__}]", (base,), {"__slots__": (), **methods(bound)})
            for base, bound in kinds
        )
        _PROXY_CLASSES[cls] = made
    return made  # type: ignore[return-value]


def _element(info: CollectionInfo, index: tuple) -> ElementProxy:
    return proxy_classes(info.cls)[0](info, index)


def _collection(info: CollectionInfo) -> CollectionProxy:
    return proxy_classes(info.cls)[1](info)


def _section(info: CollectionInfo, members: tuple, sid: int, others: tuple = ()) -> SectionProxy:
    return proxy_classes(info.cls)[2](info, members, sid, others)


def union(*proxies: Proxy) -> SectionProxy:
    """One section over every element of ``proxies`` — collections (dense arrays and
    groups), sections (unions too) and single elements, of one collection or several —
    each element once. Multicast to it, or reduce over it (``contribute(section=...)``):
    a reduction combines the contributions of every member, whichever collection it is
    in. Its entry methods are those of the first proxy's class; a multicast calls the
    method of the same name on the members of the other collections."""
    if not proxies:
        raise ValueError("union() needs at least one collection, section or element proxy")
    rt = current("union()")
    parts: dict[int, tuple[CollectionInfo, set]] = {}
    for p in proxies:
        for info, members in _parts_of(p, rt.npes):
            parts.setdefault(info.id, (info, set()))[1].update(members)
    (first, members), *rest = parts.values()
    others = tuple((info, tuple(sorted(m))) for info, m in rest)
    return proxy_classes(first.cls)[2](first, tuple(sorted(members)), rt.new_id(), others)


def _parts_of(p: Proxy, npes: int) -> tuple:
    """``(info, member indices)`` for each collection that proxy ``p`` covers."""
    if isinstance(p, SectionProxy):
        return p.parts
    info = getattr(p, "_info", None)
    if isinstance(p, ElementProxy) and info is not None:
        return ((info, (p._index,)),)
    if isinstance(p, CollectionProxy) and info is not None:
        if info.kind == "group":
            return ((info, tuple((pe,) for pe in info.hosts(npes))),)
        if info.shape is not None:
            return ((info, tuple(row_major(info.shape))),)
        raise TypeError(f"union(): the sparse array of {info.cls.__qualname__} has no fixed elements; "
                        "take a section of the indices you inserted (proxy.section(indices))")
    raise TypeError(f"union() takes collection, section and element proxies, not {p!r}")
