"""Charm4py's Chare, Group, Array and ArrayMap on shoal's chares and collections."""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable

import shoal
from ...lowlevel import EntryRef, in_thread, threads_waiting_in
from . import _readonlies
from ._futures import as_handle, refuse_wait
from ._proxies import KINDS
from ._reduction import as_reducer

__all__ = ["Chare", "Group", "Array", "ArrayMap", "register", "coro", "threaded", "when", "OnPE", "MainPlacement", "CharmBlockMap",
           "RoundRobinMap", "charm_block"]


def coro(fn: Callable) -> Callable:
    """Charm4py's ``@coro``/``@threaded``: shoal's :func:`shoal.threaded` (outside
    ``@when``, so that a held call runs threaded too)."""
    condition = getattr(fn, "_shoal_when", None)
    if condition is not None:
        return shoal.when(condition)(shoal.threaded(fn.__wrapped__))  # type: ignore[attr-defined]
    return shoal.threaded(fn)


threaded = coro


def when(cond: str) -> Callable:
    """Charm4py's ``@when("condition")``: the condition is Python source over ``self``,
    the method's parameters and its module's globals (shoal's :func:`shoal.when`)."""

    def decorate(fn: Callable) -> Callable:
        code = fn.__code__
        params = code.co_varnames[1:code.co_argcount]
        env = fn.__globals__
        source = f"lambda self, {', '.join(params)}: ({cond})" if params else f"lambda self: ({cond})"
        test = eval(source, env)  # noqa: S307 - the program's own condition, as Charm4py evaluates it
        return shoal.when(test)(fn)

    return decorate


class OnPE:
    """Placement of a single chare (``Chare(C, onPE=p)``): its one element on PE ``pe``."""

    def __init__(self, pe: int):
        self.pe = pe

    def __call__(self, index: Any, npes: int) -> int:
        return self.pe % npes

    def __repr__(self) -> str:
        return f"onPE={self.pe}"


class MainPlacement(OnPE):
    """The main chare's placement: PE 0, and its constructor runs threaded."""

    def __init__(self) -> None:
        super().__init__(0)


class _Remote(EntryRef):
    """A reduction target that Charm4py calls without arguments (an empty contribution)."""

    __slots__ = ()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.proxy, self.name)(*self.args)

    def __reduce__(self) -> tuple:
        return (_Remote, (self.proxy, self.name, self.args))


def _target(callback: Any, empty: bool) -> Any:
    if callback is None:
        raise ValueError("contribute() needs a callback: a Future or an entry method of a proxy")
    if empty and not isinstance(callback, shoal.Future):
        return _Remote(callback.proxy, callback.name, getattr(callback, "args", ()))
    return callback


class Chare(shoal.Chare):
    """Charm4py's Chare: ``thisIndex``, ``thisProxy``, ``contribute``, ``reduce``,
    ``allreduce``, ``wait``, ``AtSync``, ``migrate``; ``Chare(C, onPE=p)`` makes a single chare."""

    _shoal_framework = True
    _shoal_proxy_kinds = KINDS

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        if args and isinstance(args[0], type) and issubclass(args[0], shoal.Chare):
            return _single(args[0], *args[1:], **kwargs)
        return super().__new__(cls)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is not None and not getattr(init, "_shoal_threaded", False):
            cls.__init__ = _main_threaded(init)  # type: ignore[misc,method-assign]

    @property
    def _numthreads(self) -> int:
        """How many threaded entry methods of this element are suspended now."""
        return threads_waiting_in(self, "_numthreads")

    @property
    def thisIndex(self) -> Any:
        return self.index

    @property
    def thisProxy(self) -> Any:
        if isinstance(self.collection._info.placement, OnPE):
            return self.proxy
        return self.collection

    def contribute(self, data: Any, reducer: Any, callback: Any, section: Any = None) -> None:  # type: ignore[override]
        empty = reducer is None or reducer is shoal.reducers.nop
        r = shoal.reducers.nop if empty else as_reducer(reducer)
        pre = getattr(r, "pre", None)
        if pre is not None:
            data = pre(data, self)
        shoal.Chare.contribute(self, data, r, _target(callback, empty), section)

    def reduce(self, callback: Any, data: Any = None, reducer: Any = None, section: Any = None) -> None:
        self.contribute(data, reducer, callback, section)

    def allreduce(self, data: Any = None, reducer: Any = None, section: Any = None) -> Any:  # type: ignore[override]
        if reducer is None:
            return as_handle(shoal.Chare.allreduce(self, data, shoal.reducers.nop, section))
        return as_handle(shoal.Chare.allreduce(self, data, as_reducer(reducer), section))

    def wait(self, cond: str) -> None:
        """Block this (threaded) method until ``cond`` — Python source over ``self`` and
        the module's globals — is true."""
        tests = type(self).__dict__.get("_c4p_waits")
        if tests is None:
            tests = {}
            type.__setattr__(type(self), "_c4p_waits", tests)
        test = tests.get(cond)
        if test is None:
            env = sys.modules[type(self).__module__].__dict__
            test = tests[cond] = eval(f"lambda self: ({cond})", env)  # noqa: S307
        if not test(self):
            refuse_wait(f"self.wait({cond!r})")
            shoal.wait_until(self, test)

    def c4p_ping(self) -> None:
        """Answers awaitCreation: the element exists."""

    c4p_ping._shoal_entry = True  # type: ignore[attr-defined]

    def c4p_section_of(self, section_func: Callable) -> Any:
        """Answers charm.split(section_func=...): the section this element is in."""
        return section_func(self)

    c4p_section_of._shoal_entry = True  # type: ignore[attr-defined]

    def AtSync(self) -> None:
        self.at_sync()

    def resume_from_sync(self) -> None:
        resume = getattr(self, "resumeFromSync", None)
        if resume is not None:
            resume()

    def migrate(self, toPe: int) -> None:
        shoal.CollectionProxy.migrate(self.collection, self.index, toPe)  # the proxy's own, not an entry method

    migrate._shoal_entry = True  # type: ignore[attr-defined]

    def setMigratable(self, migratable: bool) -> None:
        self.migratable = migratable


def register(cls: type) -> type:
    """Charm4py's ``@register`` class decorator (older programs): ``cls`` itself. Charm4py
    registers a Chare class with Charm++ there; shoal needs no registration, so only the
    check stays that ``cls`` is a Chare class."""
    if not (isinstance(cls, type) and issubclass(cls, Chare)):
        raise TypeError(f"register({getattr(cls, '__qualname__', cls)}): not a Chare class, so it cannot be "
                        f"registered; derive it from charm4py.Chare")
    return cls


def _main_threaded(init: Callable) -> Callable:
    """``__init__`` that runs threaded for the main chare (as Charm4py runs it)."""
    threaded_init = shoal.threaded(init)

    @functools.wraps(init)
    def run(self: Any, *args: Any, **kwargs: Any) -> None:
        if type(self.collection._info.placement) is MainPlacement and not in_thread():
            threaded_init(self, *args, **kwargs)
        else:
            init(self, *args, **kwargs)

    return run


def _sync_readonlies() -> None:
    """PE 0's readonlies to every PE before a collection is made (``_readonlies.py``)."""
    from ._charm import charm

    _readonlies.sync(charm.thisProxy)


def _single(cls: type, args: Any = (), onPE: int = -1) -> Any:
    """``Chare(C, args, onPE)``: one chare of ``C`` on PE ``onPE`` (this PE when -1); its proxy."""
    _sync_readonlies()
    pe = shoal.my_pe() if onPE < 0 else onPE
    placement = MainPlacement() if onPE == -2 else OnPE(pe)
    return shoal.Array(cls, 1, args=tuple(args), placement=placement)[0]


def Group(cls: type, args: Any = (), onPEs: Any = None) -> Any:
    """A Group: one element of ``cls`` per PE (per PE of ``onPEs``: shoal's ``Group(pes=...)``)."""
    _sync_readonlies()
    return shoal.Group(cls, args=tuple(args), pes=onPEs)


def Array(cls: type, dims: Any = None, ndims: int = -1, args: Any = (), map: Any = None,
          useAtSync: bool = False) -> Any:
    """An Array: dense over ``dims`` (an int or a tuple), or sparse with ``ndims`` dimensions.
    Without a ``map``, its elements start where Charm++'s default map puts them
    (:class:`CharmBlockMap`, :class:`RoundRobinMap`)."""
    _sync_readonlies()
    placement: Any
    if dims is None:
        placement = _MapPlacement(map) if map is not None else RoundRobinMap() if max(ndims, 1) == 1 else None
        return shoal.Array(cls, ndims=max(ndims, 1), args=tuple(args), placement=placement)
    placement = _MapPlacement(map) if map is not None else CharmBlockMap.unless_same(dims, shoal.num_pes())
    return shoal.Array(cls, dims, args=tuple(args), placement=placement)


class CharmBlockMap:
    """Charm++'s default placement of a dense array (its ``DefaultArrayMap``): the elements
    in row-major order, in blocks, the first ``n % P`` PEs holding one element more than
    the others (6 elements on 4 PEs: PEs 0 0 1 1 2 3). shoal's own default spreads the
    larger blocks evenly instead (0 0 1 2 2 3); the two agree where ``P`` divides ``n``."""

    __slots__ = ("shape", "size")

    def __init__(self, shape: tuple):
        self.shape = shape
        size = 1
        for n in shape:
            size *= n
        self.size = size

    @classmethod
    def unless_same(cls, dims: Any, npes: int) -> "CharmBlockMap | None":
        """The map for an array of ``dims`` on ``npes`` PEs; None (shoal's default, and its
        faster paths) where that places every element as this one would."""
        try:
            shape = tuple(int(n) for n in dims) if isinstance(dims, (tuple, list)) else (int(dims),)
        except (TypeError, ValueError):
            return None  # shoal.Array says what is wrong with it
        placement = cls(shape)
        return None if placement.size % npes == 0 or min(shape) < 0 else placement

    def __call__(self, index: Any, npes: int) -> int:
        if type(index) is tuple:
            flat = 0
            for i, n in zip(index, self.shape):
                flat = flat * n + i
        else:
            flat = index
        return charm_block(flat, self.size, npes)

    def __getstate__(self) -> tuple:
        return self.shape

    def __setstate__(self, shape: tuple) -> None:
        self.__init__(shape)  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"Charm++'s default map of shape {self.shape}"


def charm_block(flat: int, n: int, npes: int) -> int:
    """The PE of element ``flat`` (row-major) of ``n`` in Charm++'s default block map."""
    small, extra = divmod(n, npes)
    first = extra * (small + 1)  # the elements of the PEs that hold one more
    if flat < first:
        return flat // (small + 1)
    return extra + (flat - first) // small


class RoundRobinMap:
    """Charm++'s placement of the elements inserted into a 1-D sparse array: index ``i``
    on PE ``i % P`` (shoal's own default hashes the index)."""

    __slots__ = ()

    def __call__(self, index: Any, npes: int) -> int:
        return index % npes

    def __reduce__(self) -> tuple:
        return (RoundRobinMap, ())

    def __repr__(self) -> str:
        return "Charm++'s round-robin map"


class ArrayMap(Chare):
    """Charm4py's ArrayMap: a Group whose ``procNum(index)`` places array elements."""

    def procNum(self, index: tuple) -> int:
        return 0


class _MapPlacement:
    """Placement by an ArrayMap group: its element on the deciding PE answers."""

    def __init__(self, group: Any):
        self.group = group

    def __call__(self, index: Any, npes: int) -> int:
        local = self.group.ckLocalBranch()
        if local is None:  # not built here yet (main sends before this PE served the creation)
            local = self._spare
            if local is None:
                cls = self.group._info.cls
                local = self._spare = cls.__new__(cls)
                local.__init__()
        return local.procNum(index if isinstance(index, tuple) else (index,))

    _spare: Any = None  # a stand-in for the local element, made by its class without arguments

    def __getstate__(self) -> dict:
        return {"group": self.group}
