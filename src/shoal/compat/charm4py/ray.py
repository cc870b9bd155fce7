"""``charm4py.ray``: Charm4py's Ray-style API on shoal.

``@ray.remote`` on a function makes a remote function: ``f.remote(*args)`` runs it as a
pool task (threaded, so it may itself call ``.remote`` and ``ray.get``) and returns an
:class:`ObjectRef`, a future. On a class it makes an actor class: ``C.remote(*args)``
creates a single chare, placed round-robin over the PEs, and ``actor.m.remote(*args)``
calls its method. An ObjectRef given as an argument (at the top level) is replaced by its
value before the call, as Ray does. ``ray.get``, ``ray.wait`` and ``ray.put`` work on
ObjectRefs; ``ray.init`` takes Ray's arguments and ignores them (the job is running).
"""

from __future__ import annotations

import functools
import inspect
import weakref
from typing import Any, Callable, Iterable

import shoal
from ... import Future
from ...lowlevel import ask_owner, has_value, job_key, local_future, new_future, owner_key, resolve
from ...pool._spawn import start_submit
from ._chare import Chare, _single
from ._futures import _Handle, refuse_wait

__all__ = ["ObjectRef", "init", "is_initialized", "shutdown", "remote", "get", "wait", "put",
           "cluster_resources", "available_resources"]


class ObjectRef(_Handle):
    """A reference to a value that a remote call computes (or :func:`put` stored): a future.

    Sent to another PE, a ready reference carries its value; a pending one is a handle
    whose owner keeps the future (and then its value) until the job ends, since any PE
    may ask for it later (Ray counts references across the cluster; this layer does not).
    """

    __slots__ = ()

    def __reduce__(self) -> tuple:
        if has_value(self):
            return (_ready_ref, (self.result(),))
        owner = owner_key(self)
        if owner is not None:  # the owner: keep it, others may ask for its value at any time
            _kept.setdefault(owner, []).append(self)
        fn, args = Future.__reduce__(self)  # type: ignore[misc]
        return (_rebuild_ref, (fn, args))


_kept: "weakref.WeakKeyDictionary[Any, list]" = weakref.WeakKeyDictionary()


def _ready_ref(value: Any) -> "ObjectRef":
    ref = local_future("an ObjectRef that arrived with its value", "an ObjectRef")
    resolve(ref, value)
    return _as_ref(ref)


def _rebuild_ref(fn: Callable, args: tuple) -> Future:
    ref = fn(*args)
    ref.__class__ = ObjectRef
    return ref


def _as_ref(fut: Future) -> ObjectRef:
    fut.__class__ = ObjectRef
    return fut  # type: ignore[return-value]


def _resolved(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """The arguments with each top-level ObjectRef replaced by its value (waiting for it)."""
    if any(type(a) is ObjectRef for a in args):
        args = tuple(a.get() if type(a) is ObjectRef else a for a in args)
    if kwargs and any(type(v) is ObjectRef for v in kwargs.values()):
        kwargs = {k: v.get() if type(v) is ObjectRef else v for k, v in kwargs.items()}
    return args, kwargs


# -- the session -----------------------------------------------------------------------

_initialized: "weakref.WeakSet[Any]" = weakref.WeakSet()  # the runtimes where init() was called


def init(*args: Any, **kwargs: Any) -> None:
    """Ray's ``init``: accepted with any arguments (address, num_cpus, …) and ignored:
    the job and its PEs already run."""
    _initialized.add(job_key("ray.init()"))


def is_initialized() -> bool:
    return job_key("ray.is_initialized()") in _initialized


def shutdown() -> None:
    """Accepted; the job ends with ``charm.exit()``."""
    _initialized.discard(job_key("ray.shutdown()"))


def cluster_resources() -> dict:
    """The job's resources as Ray names them: one CPU per PE."""
    return {"CPU": float(shoal.num_pes())}


available_resources = cluster_resources


# -- remote functions and actors ------------------------------------------------------

_RAY_OPTIONS = {"num_cpus", "num_gpus", "resources", "memory", "max_calls", "max_retries", "retry_exceptions",
                "max_restarts", "max_task_retries", "max_concurrency", "name", "namespace", "lifetime",
                "scheduling_strategy", "runtime_env", "num_returns"}


def remote(*args: Any, **options: Any) -> Any:
    """``@ray.remote`` or ``@ray.remote(num_cpus=..., ...)`` on a function or a class.
    Resource options are accepted and ignored (every task takes one PE while it runs);
    ``num_returns`` other than 1 is refused."""
    if len(args) == 1 and not options and (inspect.isfunction(args[0]) or inspect.isclass(args[0])):
        return _make_remote(args[0])
    if args:
        raise TypeError("@ray.remote takes a function or a class, or only keyword options: @ray.remote(num_cpus=1)")
    _check_options(options)
    return _make_remote


def _check_options(options: dict) -> None:
    unknown = sorted(set(options) - _RAY_OPTIONS)
    if unknown:
        raise TypeError(f"ray.remote(): unknown option(s) {', '.join(unknown)}; the options are {', '.join(sorted(_RAY_OPTIONS))}")
    if options.get("num_returns", 1) != 1:
        raise NotImplementedError("ray.remote(num_returns=...): charm4py.ray on shoal returns one ObjectRef per "
                                  "call; return a tuple and unpack it after ray.get()")


def _make_remote(target: Any) -> Any:
    if inspect.isclass(target):
        return ActorClass(target)
    if inspect.isfunction(target):
        return RemoteFunction(target)
    raise TypeError(f"@ray.remote on {target!r}: a function or a class is needed")


class RemoteFunction:
    """A ``@ray.remote`` function: ``f.remote(*args, **kwargs)`` runs it as a pool task."""

    def __init__(self, func: Callable):
        functools.update_wrapper(self, func)
        self.func = func

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"remote function {self.func.__name__} cannot be called directly; instead of "
                        f"'{self.func.__name__}()', use '{self.func.__name__}.remote()'")

    def remote(self, *args: Any, **kwargs: Any) -> ObjectRef:
        """Run the function on some PE; an ObjectRef of its value."""
        return _as_ref(start_submit(f"{self.func.__name__}.remote()", _run, (self, args, kwargs), {}, depth=4))

    def options(self, **options: Any) -> "RemoteFunction":
        _check_options(options)
        return self

    def __reduce__(self) -> str:
        return self.func.__qualname__  # by name: the module's attribute is this object on every PE


def _run(rf: RemoteFunction, args: tuple, kwargs: dict) -> Any:
    args, kwargs = _resolved(args, kwargs)
    return rf.func(*args, **kwargs)


class ActorClass:
    """A ``@ray.remote`` class: ``C.remote(*args)`` creates an actor (a single chare)."""

    def __init__(self, cls: type):
        self.cls = cls
        self.__module__ = cls.__module__
        self.__name__ = cls.__name__
        self.__qualname__ = cls.__qualname__
        methods = {name: _actor_method(fn) for name, fn in vars(cls).items()
                   if inspect.isfunction(fn) and not name.startswith("_")}
        chare = type(cls.__name__, (cls, Chare), methods)
        chare.__module__ = cls.__module__
        chare.__qualname__ = f"{cls.__qualname__}.chare_class"  # pickles by name, through this object
        self.chare_class = chare
        self._placed: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"actor class {self.__name__} cannot be instantiated directly; instead of "
                        f"'{self.__name__}()', use '{self.__name__}.remote()'")

    def remote(self, *args: Any, **kwargs: Any) -> "ActorHandle":
        """Create the actor on the next PE in turn (each PE counts its own); its handle."""
        if kwargs:
            raise TypeError(f"{self.__name__}.remote(): charm4py.ray passes constructor arguments by position only")
        job = job_key(f"{self.__name__}.remote()")
        k = self._placed.get(job, 0)
        self._placed[job] = k + 1
        return ActorHandle(_single(self.chare_class, args=args, onPE=k % shoal.num_pes()))

    def options(self, **options: Any) -> "ActorClass":
        _check_options(options)
        return self

    def __reduce__(self) -> str:
        return self.__qualname__


def _actor_method(fn: Callable) -> Callable:
    """An actor's method as an entry method: ObjectRef arguments replaced by their values,
    threaded so that it may wait (for them, or with ``ray.get``)."""

    @functools.wraps(fn)
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        args, kwargs = _resolved(args, kwargs)
        return fn(self, *args, **kwargs)

    return shoal.threaded(method)


class ActorHandle:
    """An actor: ``handle.method.remote(*args)`` calls it, an ObjectRef of the value."""

    __slots__ = ("_proxy",)

    def __init__(self, proxy: Any):
        self._proxy = proxy

    def __getattr__(self, name: str) -> "_ActorMethod":
        if name.startswith("_"):
            raise AttributeError(name)
        return _ActorMethod(self._proxy, name)

    def __reduce__(self) -> tuple:
        return (ActorHandle, (self._proxy,))

    def __repr__(self) -> str:
        return f"<actor {self._proxy!r}>"


class _ActorMethod:
    __slots__ = ("_proxy", "_name")

    def __init__(self, proxy: Any, name: str):
        self._proxy, self._name = proxy, name

    def remote(self, *args: Any, **kwargs: Any) -> ObjectRef:
        try:
            entry = getattr(self._proxy, self._name)
        except AttributeError:
            raise AttributeError(f"the actor has no method {self._name!r} (a public method of its class)") from None
        return _as_ref(entry(*args, ret=True, **kwargs))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"actor method {self._name} cannot be called directly; instead of "
                        f"'actor.{self._name}()', use 'actor.{self._name}.remote()'")


# -- object references ----------------------------------------------------------------


def put(value: Any) -> ObjectRef:
    """An ObjectRef holding ``value`` (resolved at once)."""
    ref = _as_ref(new_future(1))
    resolve(ref, value)
    return ref


def get(refs: Any, timeout: float | None = None) -> Any:
    """The value of an ObjectRef, or the values of a list of them, waiting for them (in
    main(), a remote function, an actor method or a ``@coro``/``@threaded`` method)."""
    if isinstance(refs, Future):
        if not refs.done():
            refuse_wait("ray.get()")
            _wait_for([refs], 1, timeout)
        return refs.get()
    if isinstance(refs, (list, tuple)):
        bad = [r for r in refs if not isinstance(r, Future)]
        if bad:
            raise TypeError(f"ray.get(): {bad[0]!r} is not an ObjectRef")
        if not all(r.done() for r in refs):
            refuse_wait("ray.get()")
            _wait_for(list(refs), len(refs), timeout)
        return [r.get() for r in refs]
    raise TypeError(f"ray.get(): an ObjectRef or a list of them, not {type(refs).__name__}")


def wait(refs: Iterable[Any], num_returns: int = 1, timeout: float | None = None,
         fetch_local: bool = True) -> tuple[list, list]:
    """``(ready, not_ready)``: once ``num_returns`` of ``refs`` are ready, or ``timeout``
    seconds have passed; each list in the order of ``refs``."""
    refs = list(refs)
    if not 0 <= num_returns <= len(refs):
        raise ValueError(f"ray.wait(): num_returns={num_returns} of {len(refs)} ObjectRefs")
    if sum(r.done() for r in refs) < num_returns:
        refuse_wait("ray.wait()")
        _wait_for(refs, num_returns, timeout, timeout_error=False)
    ready = [r for r in refs if r.done()][:num_returns]
    chosen = {id(r) for r in ready}
    return ready, [r for r in refs if id(r) not in chosen]


def _wait_for(refs: list, count: int, timeout: float | None, timeout_error: bool = True) -> None:
    """Wait until ``count`` of ``refs`` are done (or ``timeout`` seconds pass)."""
    wake = new_future(1)

    def check(_: Any = None) -> None:
        if not wake.done() and sum(r.done() for r in refs) >= count:
            resolve(wake, True)

    for r in refs:
        if not r.done():
            ask_owner(r, "ray.get()/ray.wait()")  # a reference made on another PE: its owner sends the value
            r.add_done_callback(check)
    check()
    if timeout is not None:
        shoal.call_later(max(timeout, 0.0), lambda: None if wake.done() else resolve(wake, False))
    if not wake.get() and timeout_error:
        raise TimeoutError(f"ray.get(): the ObjectRefs were not ready within {timeout} s")
