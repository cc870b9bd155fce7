"""One PE's runtime: the message handlers and the step of its scheduler loop (its
sends are in :mod:`shoal.runtime.sending`).

``step()`` polls the transport, runs every delivered message's handler, then the
ready coroutines and due timers. Handlers are indexed by message kind; an entry
method is ``cls._shoal_funcs[entry](element, *args)``. Nothing here blocks: waiting
is the engine's business.
"""

from __future__ import annotations

import heapq
import struct
import time
import weakref
from collections import deque
from types import CoroutineType
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from ..errors import ShoalError, exit_code
from ..settings import Settings
from . import tree
from .chare import Chare
from .collections import CollectionInfo, CollectionState
from .futures import Failure, Future, Task, annotate, future_handle
from .lifecycle import Lifecycle
from .location import Locations, Route
from .message import (
    HEADER,
    INDEX_STRUCTS,
    KIND_MASK,
    Kind,
    decode,
    decode_call,
    encode_call,
    pack_header,
    unpack_header,
)
from .proxy import proxy_classes
from .quiescence import Detector
from .receive_sets import ReceiveSet
from .reductions import ReductionManager
from .sections import Sections
from .sending import Sending
from .system import NO_COLL as _NO_COLL, SYSTEM_ID, System

if TYPE_CHECKING:
    from ..transport.base import Transport
    from .engine import Engine
    from .proxy import CollectionProxy

__all__ = ["Runtime"]

_WHOLE = [struct.Struct(HEADER.format + "q" * n) for n in range(9)]  # header with an n-d index
_unpack = HEADER.unpack_from
_HSIZE = HEADER.size


class Counts:
    """A PE's message counters (for quiescence detection) and entry-call depth.

    The compiled core (``transport.make_core``) has the same three fields and takes
    this object's place, so its paths and the Python ones count together.
    """

    __slots__ = ("sent", "received", "depth", "calls")

    def __init__(self) -> None:
        self.sent = 0  # program messages sent
        self.received = 0  # program messages received
        self.depth = 0  # entry methods running now (nested): blocking calls are refused in them
        self.calls = 0  # entry-method runs begun: with `received`, tells one call from the next


class Runtime(Sending):
    """Everything one PE knows, and the handlers that change it."""

    def __init__(self, engine: "Engine", transport: "Transport", settings: Settings):
        self.engine = engine
        self.transport = transport
        self.settings = settings
        self.pe = transport.rank
        self.npes = transport.size
        self.fanout = settings.tree_fanout
        self.ready: deque[Callable[[], Any]] = deque()
        self.local: deque = deque()
        self.timers: list = []
        self._timer_seq = 0
        self.infos: dict[int, CollectionInfo] = {}
        self.colls: dict[int, CollectionState] = {}
        self.unknown: dict[int, list] = {}  # messages for collections not created here yet
        self.locations = Locations(self.pe, self.npes)
        self.locate = self.locations.locate
        self.futures: dict[int, Future] = {}
        #: resolved or pending futures of this PE that went out in messages, while they live
        self.escaped: weakref.WeakValueDictionary[int, Future] = weakref.WeakValueDictionary()
        #: this PE's handles of other PEs' futures that arrived in messages
        self.handles: weakref.WeakValueDictionary[tuple, Future] = weakref.WeakValueDictionary()
        self._asked: set[tuple] = set()  # handles whose value this PE asked for
        self._next_fid = 1
        self._next_id = 16
        self._trees: dict[int, tree.Tree] = {}
        self.pool_workers: Any = None  # the task pool's Group, made on first use
        self.suspended: set[Task] = set()
        self.stopped = False
        self.exit_requested = False
        self.exit_code = 0
        self.detector = Detector()
        self.reductions = ReductionManager(self)
        self.lifecycle = Lifecycle(self)
        self.sections = Sections(self)
        self._handlers: list[Callable[..., None]] = [
            self._on_invoke,
            self._on_broadcast,
            self.sections.on_multicast,
            self._on_future,
            self._on_reduce,
            self._on_result,
            self.lifecycle.on_create,
            self.lifecycle.on_insert,
            self._on_channel,
            self._on_location,
            self._on_exchange,
            self._on_await,
        ]
        transport.allocator = self.allocate  # type: ignore[method-assign]
        self._poll = transport.poll  # bound once: step() runs millions of times
        self._send_eager = transport.send_eager
        self._deliver_cb = self._deliver
        core = transport.make_core(self)
        self.counts: Counts = core or Counts()
        #: ``channel_send(channel, fallback)``: a channel's compiled ``send`` (None without a core)
        self.channel_send = core.channel_send if core is not None else None
        #: ``set_post(set, fallback)``: a receive set's compiled ``post`` (None without a core)
        self.set_post = core.set_post if core is not None else None
        self._run_local = core.run_local if core is not None else None
        self._send_value = core.send_value if core is not None else None
        self._run_each = core.run_each if core is not None else None
        self._core_send = core.send if core is not None else None
        info = CollectionInfo(SYSTEM_ID, System, "group", None, 1, None, 0)
        self.infos[SYSTEM_ID] = info
        self.system: "CollectionProxy" = proxy_classes(System)[1](info)
        cs = self.colls[SYSTEM_ID] = CollectionState(info)
        cs.hosts = range(self.npes)
        cs.span = tree.over(cs.hosts, self.pe, self.fanout)
        cs.count = 1
        self.lifecycle.construct(cs, (self.pe,), ())

    # -- identifiers -------------------------------------------------------------
    def new_id(self) -> int:
        """A job-wide unique id (collections, sections)."""
        self._next_id += 1
        return (self.pe << 32) | self._next_id

    def register_future(self, fut: Future) -> int:
        fid = self._next_fid
        self._next_fid = fid + 1 if fid < 0xFFFFFFFF else 1
        self.futures[fid] = fut
        return fid

    def forget_future(self, fid: int) -> None:
        self.futures.pop(fid, None)

    def call_later(self, delay: float, fn: Callable[[], Any]) -> None:
        """Run ``fn`` on this PE after ``delay`` seconds (at the next step after it)."""
        self._timer_seq += 1
        heapq.heappush(self.timers, (time.monotonic() + delay, self._timer_seq, fn))

    # -- collections -------------------------------------------------------------
    def reduction_span(self, domain: tuple, section: Any) -> tuple[tree.Tree | None, int]:
        """This PE's links in the reduction tree of ``domain`` and its local contributor count."""
        if section is not None:
            st = self.sections.state(section)
            return st.span, st.local
        cs = self.colls.get(domain[0])
        if cs is None or not cs.done:
            return None, 0
        return cs.span, cs.count

    def tree_from(self, root: int) -> tree.Tree:
        t = self._trees.get(root)
        if t is None:
            t = self._trees[root] = tree.all_pes(self.npes, root, self.pe, self.fanout)
        return t

    # -- receiving ---------------------------------------------------------------
    def allocate(self, header: bytes, index: int, nbytes: int) -> Any:
        """Where a large incoming segment lands: a channel's posted array, else fresh memory."""
        if index == 1 and header[0] & KIND_MASK == Kind.CHANNEL:
            _, _, seq, _, aux, coll = _unpack(header)
            cs = self.colls.get(coll)
            if cs is not None:
                el = cs.elements.get(unpack_header(header)[5])
                table = el._shoal_channels if el is not None else None
                ch = table.get(aux) if table else None
                if ch is not None:
                    buf = ch.posted(seq, nbytes)
                    if buf is not None:
                        return buf
        return np.empty(nbytes, np.uint8)

    def _deliver(self, header: bytes, segments: list) -> None:
        """Transport callback: count the message, then handle it.

        The common case (an entry method of an element that is here, no reply) is
        handled here; everything else goes to the handler of its kind. With the MPI
        transport the compiled core (``_native/receive.c``) does this before Python.
        """
        fields = _WHOLE[header[1]].unpack(header)  # fixed part and index in one call
        kind, _, entry, src, aux, coll = fields[:6]
        index = fields[6:]
        if coll != SYSTEM_ID:
            self.counts.received += 1
        k = kind & KIND_MASK
        if k == 0 and not aux:
            cs = self.colls.get(coll)
            el = cs.elements.get(index) if cs is not None else None
            if el is not None:
                args, kwargs = decode_call(kind, segments)
                self.run_entry(el, entry, args, kwargs, None)
                return
        elif k == 8:  # Kind.CHANNEL
            cs = self.colls.get(coll)
            el = cs.elements.get(index) if cs is not None else None
            table = el._shoal_channels if el is not None else None
            ch = table.get(aux) if table else None
            if ch is not None:
                ch.arrive(kind, segments)
                return
        self._handlers[kind & KIND_MASK](kind, entry, src, aux, coll, index, segments, header)

    def _deliver_direct(self, coll: int, index: tuple, entry: int, args: tuple) -> None:
        """A same-PE call whose arguments are array copies (see :meth:`invoke`)."""
        if coll != SYSTEM_ID:
            self.counts.received += 1
        cs = self.colls.get(coll)
        el = cs.elements.get(index) if cs is not None else None
        if el is not None:
            self.run_entry(el, entry, args, None, None)
            return
        flag, segments = encode_call(args, None)  # not here (yet): take the general path
        self.dispatch(pack_header(Kind.INVOKE | flag, entry, self.pe, 0, coll, index), segments)

    def dispatch(self, header: bytes, segments: list) -> None:
        """Handle a message held back earlier (already counted)."""
        kind, n, entry, src, aux, coll = _unpack(header)
        index = INDEX_STRUCTS[n].unpack_from(header, _HSIZE) if n else ()
        self._handlers[kind & KIND_MASK](kind, entry, src, aux, coll, index, segments, header)

    def collection_or_defer(self, coll: int, header: bytes, segments: list) -> CollectionState | None:
        cs = self.colls.get(coll)
        if cs is None:
            self.unknown.setdefault(coll, []).append((header, segments))
        return cs

    def element_or_defer(self, coll: int, index: tuple, header: bytes, segments: list) -> Chare | None:
        cs = self.colls.get(coll)
        if cs is None:
            self.unknown.setdefault(coll, []).append((header, segments))
            return None
        el = cs.elements.get(index)
        if el is None:
            self._missing(cs, index, header, segments)
        return el

    def _missing(self, cs: CollectionState, index: tuple, header: bytes, segments: list) -> None:
        """A message for an element that is not here: forward, hold, or fail."""
        info = cs.info
        route, pe = self.locations.route_missing(info, index, cs.done)
        src = _unpack(header)[3]
        if route is Route.FORWARD:
            self.send_raw(pe, header, segments, info.id)
            if src != self.pe and info.home(index, self.npes) == self.pe:
                self.post(src, Kind.LOCATION, 0, pe, info.id, index, None)  # update the sender's cache
        elif route is Route.HOLD:
            cs.early.setdefault(index, []).append((header, segments))
        else:
            self.fail(
                ShoalError(
                    f"a message from PE {src} is for element {index} of the sparse array of "
                    f"{info.cls.__qualname__}, which does not exist"
                ),
                f"{info.cls.__qualname__}{list(index)}",
            )

    def _on_invoke(self, kind: int, entry: int, src: int, aux: int, coll: int, index: tuple, segments: list, header: bytes) -> None:
        el = self.element_or_defer(coll, index, header, segments)
        if el is None:
            return
        args, kwargs = decode_call(kind, segments)
        self.run_entry(el, entry, args, kwargs, self._replier(src, aux) if aux else None)

    def _replier(self, owner: int, fid: int) -> Callable[[Any], None]:
        return lambda value: self.send_future(owner, fid, value)

    def run_entry(self, el: Chare, entry: int, args: tuple, kwargs: dict | None, reply: Callable[[Any], None] | None) -> None:
        fn = el._shoal_funcs[entry]
        counts = self.counts
        counts.depth += 1
        counts.calls += 1
        try:
            r = fn(el, *args, **kwargs) if kwargs else fn(el, *args)
        except BaseException as exc:  # noqa: BLE001
            self.counts.depth -= 1
            self._entry_failed(el, fn, exc, reply)
            return
        self.counts.depth -= 1
        if type(r) is CoroutineType:
            self._start_task(el, fn, r, reply)
        elif reply is not None:
            try:
                reply(r)
            except Exception as exc:  # noqa: BLE001 - the value cannot travel: the waiter hears why
                self._reply_failed(el, fn, r, exc, reply)

    def _start_task(self, el: Chare, fn: Any, coro: Any, reply: Callable[[Any], None] | None) -> None:
        """Drive the coroutine of an async entry method; its result goes to ``reply``."""

        def done(value: Any, exc: BaseException | None) -> None:
            if exc is not None:
                self._entry_failed(el, fn, exc, reply)
            elif reply is not None:
                try:
                    reply(value)
                except Exception as error:  # noqa: BLE001
                    self._reply_failed(el, fn, value, error, reply)

        Task(self, coro, done, _where(el, fn)).step()

    def _entry_failed(self, el: Chare, fn: Any, exc: BaseException, reply: Callable[[Any], None] | None) -> None:
        if isinstance(exc, SystemExit):
            if not self.exit_requested:  # sys.exit() in an entry method ends the job too
                self.request_exit(exit_code(exc))
            return
        where = _where(el, fn)
        if reply is None:
            self.fail(exc, where)
        else:
            annotate(exc, self.pe, where)
            reply(Failure(exc))

    def _reply_failed(self, el: Chare, fn: Any, value: Any, exc: BaseException, reply: Callable[[Any], None]) -> None:
        """The return value of a ``ret=True`` call could not be sent: the caller gets a
        TypeError naming the method, the element and the reason instead."""
        error = TypeError(
            f"cannot send the return value ({type(value).__name__}) of {_where(el, fn)} back to the caller: "
            f"{exc}; an entry method called with ret=True must return a picklable value"
        )
        self._entry_failed(el, fn, error, reply)

    def fail(self, exc: BaseException, where: str) -> None:
        """An error nothing can catch: end the job, naming the PE and the place."""
        annotate(exc, self.pe, where, with_traceback=False)
        self.engine.fatal(self, exc, where)

    def _on_broadcast(self, kind: int, entry: int, src: int, aux: int, coll: int, index: tuple, segments: list, header: bytes) -> None:
        cs = self.collection_or_defer(coll, header, segments)
        if cs is None:
            return
        for child in self.tree_from(cs.info.root).children:
            self.send_raw(child, header, segments, coll)
        if cs.done:
            self._broadcast_here(cs, kind, entry, src, aux, segments)
        else:
            cs.deferred.append(lambda: self._broadcast_here(cs, kind, entry, src, aux, segments))

    def _broadcast_here(self, cs: CollectionState, kind: int, entry: int, src: int, aux: int, segments: list) -> None:
        if not cs.elements:
            if aux and not cs.hosts and self.pe == cs.info.root:  # a sparse array with no element
                self.send_future(src, aux, [])
            return
        args, kwargs = decode_call(kind, segments)
        if not aux:
            if self._run_each is not None:  # compiled
                self._run_each(list(cs.elements.values()), entry, args, kwargs)
                return
            for el in list(cs.elements.values()):
                self.run_entry(el, entry, args, kwargs, None)
            return
        target = future_handle(src, aux)
        domain = (cs.info.id, "ret", src, aux)
        for el in list(cs.elements.values()):
            self.run_entry(el, entry, args, kwargs, self.contributor(domain, el, target, None))

    def contributor(self, domain: tuple, el: Chare, target: Future, section: Any) -> Callable[[Any], None]:
        """The reply of one element of a ``ret=True`` broadcast or multicast."""

        def reply(value: Any) -> None:
            if isinstance(value, Failure):
                target.send(value)  # the waiter hears of an error at once, not when all elements finish
            self.reductions.contribute_result(domain, el, value, target, section)

        return reply

    def _on_future(self, kind: int, entry: int, src: int, aux: int, coll: int, index: tuple, segments: list, header: bytes) -> None:
        self._resolve_future(aux, decode_call(kind, segments)[0][0])

    def _resolve_future(self, fid: int, value: Any) -> None:
        fut = self.futures.get(fid)
        if fut is None:
            if isinstance(value, Failure):
                return  # a second error for a future that failed already: the first one wins
            self.fail(
                ShoalError(f"a value came for future #{fid} of PE {self.pe}, which was already resolved"),
                "Future.send",
            )
            return
        fut._resolve(value)

    def _on_reduce(self, kind: int, entry: int, src: int, aux: int, coll: int, index: tuple, segments: list, header: bytes) -> None:
        if entry:  # compact (see ReductionManager._maybe_done)
            self.reductions.receive_compact(coll, aux, entry, decode_call(kind, segments)[0][0])
            return
        payload = decode(segments)
        self.reductions.receive(payload[0], aux, payload[1:])

    def _on_result(self, kind: int, entry: int, src: int, aux: int, coll: int, index: tuple, segments: list, header: bytes) -> None:
        if entry:  # compact
            self.reductions.on_result((coll,), aux, decode_call(kind, segments)[0][0], None)
            return
        domain, value, section = decode(segments)
        self.reductions.on_result(domain, aux, value, section)

    def _on_channel(self, kind: int, entry: int, src: int, aux: int, coll: int, index: tuple, segments: list, header: bytes) -> None:
        el = self.element_or_defer(coll, index, header, segments)
        if el is None:
            return
        table = el._shoal_channels
        ch = table.get(aux) if table else None
        if ch is not None:
            ch.arrive(kind, segments)
        else:
            el.__dict__.setdefault("_shoal_channel_early", {}).setdefault(aux, []).append((kind, segments))

    def _on_value(self, kind: int, entry: int, aux: int, coll: int, value: Any) -> None:
        """A message of one value, decoded by the compiled core (a future's value, a
        compact REDUCE or RESULT, an EXCHANGE): what their handlers do after decoding."""
        if kind == Kind.FUTURE:
            self._resolve_future(aux, value)
        elif kind == Kind.EXCHANGE:
            self.reductions.on_exchange(coll, aux, entry, value)
        elif kind == Kind.REDUCE:
            self.reductions.receive_compact(coll, aux, entry, value)
        else:
            self.reductions.on_result((coll,), aux, value, None)

    def await_remote(self, handle: Future) -> None:
        """Ask the owner of ``handle`` (another PE's future) to send its value here, once."""
        key = (handle.owner, handle.fid)
        if key in self._asked:
            return
        self._asked.add(key)
        reply = Future(_depth=2)

        def arrived(f: Future) -> None:
            self._asked.discard(key)
            value = f._value if f._state == 1 else Failure(f._error())
            if not handle.done():
                handle._resolve(value)

        reply.add_done_callback(arrived)
        self.post(handle.owner, Kind.AWAIT, 0, handle.fid, _NO_COLL, (), reply.fid)

    def _on_await(self, kind: int, entry: int, src: int, aux: int, coll: int, index: tuple, segments: list, header: bytes) -> None:
        reply_fid = decode(segments)
        fut = self.futures.get(aux) or self.escaped.get(aux)
        if fut is None:
            error = ShoalError(
                f"PE {src} awaits future #{aux} of PE {self.pe}, which resolved and was dropped here before "
                "the request came; keep a reference to a future on its owner while others may await it"
            )
            self.send_future(src, reply_fid, Failure(error))
            return
        fut.add_done_callback(
            lambda f: self.send_future(src, reply_fid, f._value if f._state == 1 else Failure(f._error()))
        )

    def _on_exchange(self, kind: int, entry: int, src: int, aux: int, coll: int, index: tuple, segments: list, header: bytes) -> None:
        self.reductions.on_exchange(coll, aux, entry, decode_call(kind, segments)[0][0])

    def _on_location(self, kind: int, entry: int, src: int, aux: int, coll: int, index: tuple, segments: list, header: bytes) -> None:
        info = self.infos.get(coll)
        if info is not None:
            self.locations.learn(info, index, aux)

    # -- job control -------------------------------------------------------------
    def stop(self, code: int) -> None:
        self.stopped = True
        self.exit_code = code

    def request_exit(self, code: int) -> None:
        """Start ending the job on every PE; ``code`` is this PE's wish for its exit code.

        PE 0 then asks every PE for its wish and ends the job with the first non-zero
        one by PE number (else 0), so ``shoal.exit(8)`` on one PE is not lost when main
        returns at the same time (:mod:`shoal.runtime.system`)."""
        if not self.exit_requested:
            self.exit_requested = True
            self.exit_code = code
            self.system[0].end_job()

    def quiescence(self) -> Future:
        fut = Future(_depth=3)
        self.system[0].qd_request(fut)
        return fut

    def waiting_report(self) -> list[str]:
        """What is blocked on this PE, for a deadlock report."""
        lines = [f"PE {self.pe}: {t.where} awaits {t.waiting!r}" for t in self.suspended]
        for cs in self.colls.values():
            for el in cs.elements.values():
                lines.extend(_pending_sets(el, self.pe))
            for index, msgs in cs.early.items():
                lines.append(
                    f"PE {self.pe}: {len(msgs)} message(s) wait for element {index} of "
                    f"{cs.info.cls.__qualname__}, which was never inserted"
                )
        return lines

    # -- the scheduler step ------------------------------------------------------
    def wait(self, seconds: float) -> bool:
        """Nothing is ready here: receive, letting the transport wait up to ``seconds``
        for the first message, then resume the coroutines it woke; True if any arrived."""
        if not self.transport.wait(self._deliver_cb, seconds):
            return False
        ready = self.ready
        for _ in range(len(ready)):
            ready.popleft()()
        return True

    def step(self) -> bool:
        """Deliver what arrived, run what is ready; True if anything happened."""
        n = self._poll(self._deliver_cb)
        local = self.local
        if local:
            if self._run_local is not None:  # compiled
                n += self._run_local(self._deliver_cb, self._deliver_direct)
            else:
                for _ in range(len(local)):
                    header, segments = local.popleft()
                    if header is None:
                        self._deliver_direct(*segments)
                    else:
                        self._deliver(header, segments)
                    n += 1
        ready = self.ready
        for _ in range(len(ready)):
            ready.popleft()()
            n += 1
        timers = self.timers
        if timers and timers[0][0] <= time.monotonic():
            _, _, fn = heapq.heappop(timers)
            fn()
            n += 1
        return n > 0


def _pending_sets(el: Chare, pe: int) -> list[str]:
    """A line per receive set of ``el`` still waiting for messages, naming the channels."""
    sets: dict[int, tuple[Any, list]] = {}
    for ch in (el._shoal_channels or {}).values():
        w = ch.waiting
        if isinstance(w, ReceiveSet):
            sets.setdefault(id(w), (w, []))[1].append(ch)
    return [f"PE {pe}: {w!r} waits for {len(chs)} message(s), on " + ", ".join(map(repr, chs))
            for w, chs in sets.values()]


def _where(el: Chare, fn: Any) -> str:
    return f"{type(el).__qualname__}.{getattr(fn, '__name__', '?')} of element {el.index!r}"
