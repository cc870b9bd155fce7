"""The ``charm`` object of Charm4py on shoal: start and exit, PE queries, waits,
quiescence, timers, sections, the ``charm.thisProxy`` services, the pool and the
machine's topology."""

from __future__ import annotations

import sys
import types
from typing import Any, Callable, Iterable, Iterator

import shoal
from ... import Future
from ...lowlevel import elements_of, fail_job, has_value, new_future, outcome, resolve, union
from ...pool._spawn import start_spawn, start_submit
from ...pool._tasks import start_map
from ._chare import Chare, _single
from ._futures import CompatFuture, as_handle, refuse_wait
from ._options import take_launcher_options
from . import _readonlies
from ._proxies import as_index, completion
from ._topology import Topology

__all__ = ["charm", "CharmRemote"]


class _Options(types.SimpleNamespace):
    """``charm.options``: accepted, and mostly without effect on shoal (say which in the docs)."""

    def __init__(self) -> None:
        super().__init__(profiling=False, pickle_protocol=-1, local_msg_optim=True, local_msg_buf_size=50,
                         auto_flush_wait_queues=True, quiet=False, remote_exec=False,
                         interactive=types.SimpleNamespace(verbose=1, broadcast_imports=True))


class CharmRemote(Chare):
    """``charm.thisProxy``: a Group of services on every PE."""

    def __init__(self) -> None:
        charm.thisProxy = self.thisProxy

    def exit(self, exit_code: int = 0) -> None:
        shoal.exit(exit_code)

    def myPe(self) -> int:
        return shoal.my_pe()

    def LBTurnInstrumentOn(self) -> None:
        """shoal measures load always."""

    def LBTurnInstrumentOff(self) -> None:
        """shoal measures load always."""

    def updateGlobals(self, global_dict: dict, module_name: str = "__main__") -> None:
        sys.modules[module_name].__dict__.update(global_dict)

    def createArray(self, cls: type, dims: Any = None, ndims: int = -1, args: Any = (), map: Any = None,
                    useAtSync: bool = False) -> Any:
        from ._chare import Array

        return Array(cls, dims, ndims, args, map, useAtSync)

    def rexec(self, code: str, module_name: str = "__main__") -> None:
        self._allowed("rexec")
        exec(code, sys.modules[module_name].__dict__)  # noqa: S102 - the program asked, remote_exec on

    def eval(self, expression: str, module_name: str = "__main__") -> Any:
        self._allowed("eval")
        return eval(expression, sys.modules[module_name].__dict__)  # noqa: S307

    def exec(self, code: str, module_name: str = "__main__") -> None:
        self.rexec(code, module_name)

    def c4p_readonlies(self, values: dict) -> None:
        """PE 0's readonlies (``_readonlies.py``)."""
        if self.thisIndex != 0:
            _readonlies.receive(values)

    c4p_readonlies._shoal_entry = True  # type: ignore[attr-defined]

    def addReducer(self, func: Callable) -> None:
        from ._reduction import Reducer

        Reducer.addReducer(func)

    def _allowed(self, what: str) -> None:
        if not charm.options.remote_exec:
            raise RuntimeError(f"charm.thisProxy.{what}: remote code execution is off; set "
                               "charm.options.remote_exec = True before charm.start() to allow it")


class _Charm:
    """The runtime services of a Charm4py program."""

    def __init__(self) -> None:
        self.options = _Options()
        self.thisProxy: Any = None
        self.pool = _Pool()
        self._started = False
        self._topology: Topology | None = None

    # -- the job -----------------------------------------------------------------
    def start(self, entry: Any = None, classes: Iterable = (), modules: Iterable = (),
              interactive: bool = False) -> None:
        """Run ``entry`` (a function ``main(args)`` or a main Chare class) on PE 0 until some
        PE calls ``exit()``."""
        if interactive:
            raise NotImplementedError("charm.start(interactive=True): the Charm4py console is not part of "
                                      "shoal; drive a running job from Jupyter with shoal's client-server mode")
        if self._started:
            raise RuntimeError("charm.start() can only be called once")
        self._started = True
        if entry is None or not callable(entry):
            raise TypeError(f"charm.start(entry): {entry!r} is not a function or a Chare class")

        # Charm4py hands sys.argv to Charm++ here: Charm++ options the program added itself
        # (`sys.argv += ['+balancer', 'RandCentLB']`) count too
        sys.argv[1:] = take_launcher_options(sys.argv[1:])
        if Topology.collective():  # under MPI every PE is here now; else it is made on first use
            self._topology = Topology.of_job()

        def main(args: list) -> None:
            self.thisProxy = shoal.Group(CharmRemote)
            if isinstance(entry, type) and issubclass(entry, Chare):
                _single(entry, args=[args], onPE=-2)
            else:
                entry(args)

        shoal.start(main, until="exit")

    def exit(self, exit_code: int = 0) -> None:
        shoal.exit(exit_code)

    def abort(self, message: str) -> None:
        """End the job with an error, ``message`` its text."""
        fail_job(RuntimeError(message), "charm.abort()")
        raise SystemExit(1)

    def numPes(self) -> int:
        return shoal.num_pes()

    def myPe(self) -> int:
        return shoal.my_pe()

    # -- futures and waits -------------------------------------------------------
    def Future(self, num_vals: int = 1, senders: int | None = None) -> CompatFuture:
        """A future of ``num_vals`` values (``senders=``: the older name of it)."""
        return CompatFuture(num_vals if senders is None else senders)

    def createFuture(self, num_vals: int = 1, senders: int | None = None) -> CompatFuture:
        return CompatFuture(num_vals if senders is None else senders)

    def iwait(self, objs: Iterable[Any]) -> Iterator[Any]:
        """Yield futures (and channels) as they become ready."""
        pending = list(objs)
        while pending:
            ready = [o for o in pending if _ready(o)]
            if not ready:
                refuse_wait("charm.iwait()/charm.wait()")
                any_ready = new_future()
                for o in pending:
                    _on_ready(o, any_ready)
                any_ready.get()
                continue
            for o in ready:
                pending.remove(o)
                yield o

    def wait(self, objs: Iterable[Any]) -> None:
        for _ in self.iwait(list(objs)):
            pass

    def awaitCreation(self, *proxies: Any) -> None:
        """Wait until the collections exist (their constructors have run)."""
        refuse_wait("charm.awaitCreation()")
        for proxy in proxies:
            proxy.c4p_ping(ret=True).get()

    def sleep(self, secs: float) -> None:
        """Pause the calling (threaded) method or main for ``secs`` seconds; the PE serves meanwhile."""
        refuse_wait("charm.sleep()")
        fut = new_future()
        self.scheduleCallableAfter(fut, secs)
        fut.get()

    def scheduleCallableAfter(self, callable_obj: Any, secs: float, args: Iterable = ()) -> None:
        """Call ``callable_obj(*args)`` on this PE after ``secs`` seconds (quiescence waits for it)."""
        args = tuple(args)
        if isinstance(callable_obj, Future):
            shoal.call_later(secs, lambda: callable_obj.send(args[0] if args else None))
        else:
            shoal.call_later(secs, lambda: callable_obj(*args))

    # -- quiescence --------------------------------------------------------------
    def startQD(self, callback: Any) -> None:
        """Call ``callback`` (a Future or an entry method of a proxy) at quiescence."""
        fut = shoal.quiescence()
        if isinstance(callback, Future):
            fut.add_done_callback(lambda _: callback.send(None))
        else:
            fut.add_done_callback(lambda _: callback())

    def waitQD(self) -> None:
        refuse_wait("charm.waitQD()")
        shoal.quiescence().get()

    # -- sections ----------------------------------------------------------------
    def split(self, proxy: Any, numsections: int, section_func: Callable | None = None,
              elems: Any = None, slicing: Any = None, cons: Any = None) -> list:
        """``numsections`` sections of ``proxy``: by ``elems`` (one list of indices each),
        by ``slicing`` (one slice, or tuple of slices, of an Array each), or by
        ``section_func(element) -> section number or -1``."""
        if slicing is not None and elems is None and section_func is None:
            if len(slicing) != numsections:
                raise ValueError(f"charm.split(): {numsections} sections, but {len(slicing)} slicings")
            return [proxy[s] for s in slicing]
        if elems is None:
            if section_func is None:
                raise TypeError("charm.split() needs elems=, slicing= or section_func=")
            return _split_by(proxy, numsections, section_func)
        if numsections == 1 and not isinstance(elems[0], (list, set)):
            elems = [elems]
        if len(elems) != numsections:
            raise ValueError(f"charm.split(): {numsections} sections, but {len(elems)} lists of elements")
        return [proxy.section([as_index(i) for i in e]) for e in elems]

    def combine(self, *proxies: Any) -> Any:
        """One section over the elements of several sections or collections (shoal's ``union``)."""
        return union(*proxies)

    # -- statistics and topology --------------------------------------------------
    def printStats(self) -> None:
        if not self.options.profiling:
            print("NOTE: called charm.printStats() but profiling is disabled")
            return
        print(f"PE {self.myPe()}: shoal keeps no Charm4py statistics tables; run with SHOAL_TRACE=1 and "
              "`shoal trace summary` for per-entry-method timings")

    def _topo(self) -> Topology:
        if self._topology is None:
            self._topology = Topology.of_job()
        return self._topology

    def numHosts(self) -> int:
        return self._topo().num_hosts

    def myHost(self) -> int:
        return self._topo().host_of[self.myPe()]

    def getHostPes(self, host: int) -> list:
        return self._topo().pes_of(host)

    def getHostFirstPe(self, host: int) -> int:
        return self._topo().pes_of(host)[0]

    def getHostNumPes(self, host: int) -> int:
        return len(self._topo().pes_of(host))

    def getPeHost(self, pe: int) -> int:
        return self._topo().host_of[pe]

    def getPeHostRank(self, pe: int) -> int:
        return self._topo().pes_of(self.getPeHost(pe)).index(pe)

    def getTopoTreeEdges(self, pe: int, root_pe: int, pes: Any = None, bfactor: int = 4) -> tuple:
        return self._topo().tree_edges(pe, root_pe, pes, bfactor)

    def getTopoSubtrees(self, root_pe: int, pes: list, bfactor: int = 4) -> list:
        return self._topo().subtrees(root_pe, pes, bfactor)


def _ready(o: Any) -> bool:
    ready = getattr(o, "ready", None)
    return ready() if ready is not None else o.done()


def _on_ready(o: Any, fut: Future) -> None:
    def wake(_: Any) -> None:
        if not fut.done():
            resolve(fut, None)

    on = getattr(o, "waitReady", None)
    if on is not None:
        on(wake)
    else:
        o.add_done_callback(wake)


def _split_by(proxy: Any, numsections: int, section_func: Callable) -> list:
    """Ask every element which section(s) it is in (-1 or []: none); the sections."""
    answers = proxy.c4p_section_of(section_func, ret=True).get()  # in the order of the members
    out: list = [[] for _ in range(numsections)]
    for element, answer in zip(elements_of(proxy, "charm.split()"), answers):
        if isinstance(answer, BaseException):
            raise answer
        for s in (answer if isinstance(answer, (list, tuple, set)) else [answer]):
            if s is not None and 0 <= s < numsections:
                out[s].append(element)
    return [union(*elements) for elements in out]


class _Pool:
    """``charm.pool``: shoal's task pool under Charm4py's names. Every task runs threaded,
    so a task may call ``charm.pool.map`` or start and wait on other tasks (with or
    without ``@coro``, which Charm4py requires of tasks that suspend)."""

    def map(self, func: Callable, iterable: Iterable, chunksize: int = 1, ncores: int = -1,
            allow_nested: bool = False) -> list:
        """``func`` over ``iterable`` on the pool, waiting for the results (in main(), a
        ``@coro``/``@threaded`` method or a pool task); ``ncores`` and ``allow_nested``
        are accepted and ignored (every PE takes tasks; tasks may always nest)."""
        refuse_wait("charm.pool.map()")
        return start_map("charm.pool.map()", func, iterable, chunksize).get()

    def map_async(self, func: Callable, iterable: Iterable, chunksize: int = 1, ncores: int = -1,
                  multi_future: bool = False, allow_nested: bool = False) -> Any:
        if not multi_future:
            return as_handle(start_map("charm.pool.map_async()", func, iterable, chunksize))
        return [_first(start_map("charm.pool.map_async()", func, [x], 1)) for x in iterable]

    def submit(self, tasks: Iterable, chunksize: int = 1, ncores: int = -1) -> list:
        """Run tasks ``(func, *args)`` on the pool; their results, in order."""
        refuse_wait("charm.pool.submit()")
        return start_map("charm.pool.submit()", _apply, list(tasks), chunksize).get()

    def submit_async(self, tasks: Iterable, chunksize: int = 1, ncores: int = -1, multi_future: bool = False) -> Any:
        return self.map_async(_apply, list(tasks), chunksize, ncores, multi_future)

    def Task(self, func: Callable, args: Iterable = (), ret: bool = False, awaitable: bool = False) -> Any:
        """Start ``func(*args)`` as a task on some PE (from anywhere, tasks included); with
        ``ret`` a future of its value, with ``awaitable`` one that resolves (to None) when
        it ends, else None (an error in such a task ends the job)."""
        if not (ret or awaitable):
            start_spawn("charm.pool.Task()", func, tuple(args), {})
            return None
        fut = start_submit("charm.pool.Task()", func, tuple(args), {}, depth=4)
        return as_handle(fut) if ret else completion(fut)


def _apply(task: tuple) -> Any:
    return task[0](*task[1:])


def _first(fut: Future) -> Future:
    out = new_future(1)
    fut.add_done_callback(lambda f: resolve(out, f.result()[0] if has_value(f) else outcome(f)))
    return as_handle(out)


charm = _Charm()
