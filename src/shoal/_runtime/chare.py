"""The Chare base class and the per-class entry-method table.

Every public method a subclass defines is an entry method. The table is built once
per class (sorted names, so every PE numbers them alike) and stored on the class;
the per-message path is ``cls._shoal_funcs[entry_id](obj, *args)``.
"""

from __future__ import annotations

from types import FunctionType

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any

from .context import current

#: the compiled core's all-reduce (``Core.allreduce``: a future, or None where it does not
#: apply), while a runtime of this process has a core (core_contract.py sets it)
compiled_allreduce: Any = None

if TYPE_CHECKING:
    from .futures import Future
    from .proxy import CollectionProxy, ElementProxy, SectionProxy

__all__ = ["Chare", "entry_table", "EntryTable"]


class EntryTable:
    """Entry-method names, functions and ids of one chare class."""

    __slots__ = ("cls", "names", "funcs", "ids")

    def __init__(self, cls: type):
        reserved = set(dir(Chare))
        for base in cls.__mro__:  # a framework's Chare subclass (the Charm4py layer) adds its own,
            if base.__dict__.get("_shoal_framework"):  # but for the entry methods it marks
                reserved.update(n for n, v in vars(base).items() if not getattr(v, "_shoal_entry", False))
        names = sorted(
            n
            for n in dir(cls)
            if not n.startswith("_") and n not in reserved and callable(getattr(cls, n, None))
        )
        if len(names) > 0xFFFF:
            raise TypeError(f"{cls.__qualname__} has more than 65535 entry methods")
        self.cls = cls
        self.names = tuple(names)
        self.funcs = tuple(getattr(cls, n) for n in names)
        self.ids = {n: i for i, n in enumerate(names)}

    def id_of(self, name: str) -> int:
        """The id of entry method ``name``; a clear error naming the valid ones."""
        try:
            return self.ids[name]
        except KeyError:
            valid = ", ".join(self.names) or "(none)"
            raise AttributeError(
                f"{self.cls.__qualname__} has no entry method {name!r}; its entry methods are: {valid}"
            ) from None


_TABLES: dict[type, EntryTable] = {}  # kept off the class, as proxy classes are (see proxy.py)


def entry_table(cls: type) -> EntryTable:
    """The entry table of ``cls``, built on first use."""
    table = _TABLES.get(cls)
    if table is None:
        if not (isinstance(cls, type) and issubclass(cls, Chare)):
            raise TypeError(f"{cls!r} is not a subclass of shoal.Chare")
        table = EntryTable(cls)
        _TABLES[cls] = table
        cls._shoal_funcs = table.funcs  # type: ignore[attr-defined]
    return table


def _check_entry_methods(cls: type) -> None:
    """Refuse, where the class is defined, an entry method whose parameter is named ``ret``:
    ``proxy.method(ret=...)`` would ask for a future instead of passing the value."""
    for name, fn in vars(cls).items():
        if name.startswith("_") or type(fn) is not FunctionType:
            continue
        if "ret" in _parameters(fn):
            raise TypeError(
                f"entry method {cls.__qualname__}.{name} has a parameter named 'ret', which shoal reserves "
                "for `proxy.method(..., ret=True)` (a future of the result); rename the parameter"
            )


def _parameters(fn: Any) -> tuple[str, ...]:
    """The parameter names of function ``fn`` (of the function it wraps, as
    ``inspect.signature`` says), read from its code: :mod:`inspect` costs every PE
    milliseconds of start-up."""
    for _ in range(100):  # a decorator's wrapper names the function it wraps (functools.wraps)
        inner = getattr(fn, "__wrapped__", None)
        if inner is None:
            break
        fn = inner
    code = getattr(fn, "__code__", None)
    if code is None:
        return ()
    n = code.co_argcount + code.co_kwonlyargcount
    n += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)  # CO_VARARGS, CO_VARKEYWORDS: *args, **kwargs
    return code.co_varnames[:n]


class Chare:
    """A message-driven object; subclass it and define entry methods.

    Inside an element, ``self.index`` is its index (a tuple for arrays, the PE number
    for groups), ``self.proxy`` its own proxy and ``self.collection`` the proxy of the
    whole collection. They are set before ``__init__`` runs.
    """

    # What every element has lives in slots, not in a __dict__: a million elements of a
    # class that sets no attributes of its own then cost no dict each (issue: cost at scale).
    __slots__ = ("_shoal_load", "_shoal_held", "index", "collection", "_shoal_seq", "__dict__", "__weakref__")
    #: the element's load counters, [seconds timed by the Python paths, clock ticks timed
    #: by the compiled ones] (a slot, so that C reaches it at a fixed offset); reset at
    #: every balancing step
    _shoal_load: Any
    #: sender PE -> messages held back until that sender's fence arrives (after a move;
    #: see migration.py), or None: a slot, since every delivery in C checks it
    _shoal_held: dict | None
    index: Any
    #: the collection's proxy, one object shared by the PE's elements of the collection
    collection: "CollectionProxy"
    _shoal_funcs: tuple
    #: False (on the class or an element): balancing rounds leave the element on its PE
    migratable = True
    #: contributions made to the collection's reductions (reductions.py): a slot, which
    #: the compiled contribute reaches at a fixed offset, and no __dict__ for it
    _shoal_seq: int
    _shoal_seqs: dict | None = None  # section -> contributions made to its reductions
    _shoal_channels: dict | None = None
    # Runtime state kept on an element, read with getattr (class defaults here): reading an
    # instance's __dict__ makes CPython (3.11+) drop its fast attribute layout, which made
    # every attribute access in the element's entry methods slower
    _shoal_channel_counts: dict | None = None  # peer -> channels opened towards it (channels.py)
    _shoal_channel_sites: dict | None = None
    _shoal_channel_early: dict | None = None  # channel messages that came before the channel
    _shoal_comm: dict | None = None  # sampled sends since the last balancing round (balancing.py)
    _shoal_moves = 0  # times this element moved (migration.py)
    _shoal_away = False  # not on its home PE: contributions go there (reductions.py)
    _shoal_syncs = 0  # at_sync() calls
    _shoal_synced = False  # waiting in at_sync() for the round
    _shoal_lb_due = 1  # --lb-period auto: the at_sync() call that balances next (balancing.py)
    _shoal_pending: list | None = None  # calls and waits held until a condition holds (conditions.py)
    #: the element's own proxy, made on first use of .proxy (not a slot: an element that
    #: never asks for it pays nothing, and one more slot would cost every element 16 bytes)
    _shoal_proxy: "ElementProxy | None" = None

    @property
    def proxy(self) -> "ElementProxy":
        """This element's own proxy (made on first use, then kept)."""
        p = self._shoal_proxy
        if p is None:
            index = self.index
            p = self._shoal_proxy = self.collection._element_at(index if type(index) is tuple else (index,))
        return p

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _check_entry_methods(cls)

    def contribute(
        self, value: Any, reducer: Any, target: Any, section: "SectionProxy | None" = None
    ) -> None:
        """Add this element's ``value`` to the collection's (or ``section``'s) next reduction.

        ``reducer`` is a built-in of :data:`shoal.reducers` or a module-level function
        ``f(list_of_values) -> value``. ``target`` receives the combined value: a
        :class:`shoal.Future` or an entry method of a proxy (``proxy.method`` for a
        broadcast, ``proxy[i].method`` for one element, ``proxy.method.bind(x)`` to call
        it as ``method(x, result)``). Every element must make the same sequence of
        contributions, with the same reducer and target.
        """
        current("Chare.contribute()").reductions.contribute(self, value, reducer, target, section)

    def allreduce(self, value: Any, reducer: Any = None, section: "SectionProxy | None" = None) -> "Future":
        """Contribute ``value`` and return a future of the combined result, on every contributor.

        ``reducer`` (default None: ``shoal.reducers.sum``) is a built-in of
        :data:`shoal.reducers` or a function ``f(list_of_values) -> value``; with
        ``section``, the reduction runs over that section's members only. It counts as one
        of the element's contributions, in order with :meth:`contribute`.
        """
        if section is None and compiled_allreduce is not None:
            fut = compiled_allreduce(self, value, reducer)  # the compiled butterfly, where it applies
            if fut is not None:
                return fut
        return current("Chare.allreduce()").reductions.allreduce(self, value, reducer, section)

    def at_sync(self) -> None:
        """Ready to move: once every element of the Array has called this, the runtime
        may balance the load (``shoal run --lb greedy``), moving elements between PEs,
        and then calls each element's :meth:`resume_from_sync`. Return from the entry
        method after calling it; go on in ``resume_from_sync``."""
        current("Chare.at_sync()").balancer.at_sync(self)

    def migrated(self) -> None:
        """Called on an element right after it moved to this PE (before any message
        for it runs here); override it to re-acquire what does not travel."""

    def resume_from_sync(self) -> None:
        """Called after a balancing round on every element that called :meth:`at_sync`
        (on the PE the element is on now); override it to go on with the work."""

    def __repr__(self) -> str:
        index = getattr(self, "index", "?")
        return f"<{type(self).__qualname__} element {index!r}>"


#: Chare.contribute as defined above (the reference): while a runtime's compiled core
#: serves, the core's method stands in its place (core_contract.make_core; Runtime.close
#: puts this one back), so that a contribution costs no Python frame
PYTHON_CONTRIBUTE = Chare.contribute
