"""What a runtime does with a message that arrives: find the element (or forward,
hold or fail), run the entry method, answer futures, and the handler of each kind.

:class:`Receiving` is a part of :class:`shoal._runtime.runtime.Runtime` (a mixin: the
runtime holds the state). With the MPI transport the common cases are handled by the
compiled core first (``_native/receive.c``); this is its reference and its fallback.
Handlers are indexed by message kind; an entry method is
``cls._shoal_funcs[entry](element, *args)``.
"""

from __future__ import annotations

import struct
from time import perf_counter as _clock
from types import CoroutineType

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any, Callable

from ..errors import ShoalError, exit_code
from .chare import Chare
from .devices import allocate_device
from .collections import CollectionInfo, CollectionState
from .future_table import DROP, TWICE, FutureTable
from .failures import Failure, annotate
from .futures import Future, Task, future_handle
from .location import Locations, Route
from .message import FWD, HEADER, INDEX_STRUCTS, KIND_MASK, Kind, decode, decode_call, encode_call, pack_header, unpack_header
from .partials import PENDING, Block
from .reductions import RET_BLOCK
from .system import NO_COLL as _NO_COLL, SYSTEM_ID

if TYPE_CHECKING:
    from .balancing import Balancer
    from .migration import Migration
    from .reductions import ReductionManager

__all__ = ["Receiving"]

_WHOLE = [struct.Struct(HEADER.format + "q" * n) for n in range(9)]  # header with an n-d index
_unpack = HEADER.unpack_from
_HSIZE = HEADER.size
_KIND_FWD = KIND_MASK | FWD
_CHANNEL = int(Kind.CHANNEL)


class Receiving:
    """The receive paths and message handlers of a runtime."""

    pe: int
    npes: int
    counts: Any
    colls: dict[int, CollectionState]
    infos: dict[int, CollectionInfo]
    unknown: dict[int, list]
    locations: Locations
    future_table: FutureTable
    ready: Any
    suspended: set
    exit_requested: bool
    engine: Any
    reductions: "ReductionManager"
    migration: "Migration"
    balancer: "Balancer"
    tracer: Any
    #: a full timeline's numbered frames (``Frames``, trace_messages.py), or None
    trace_frames: Any = None
    current_element: Chare | None
    busy_time: float
    _handlers: list[Callable[..., None]]
    _run_each: Callable[..., Any] | None
    request_exit: Callable[[int], None]
    send_raw: Callable[..., None]
    send_future: Callable[..., None]
    describe_future: Callable[[int], str]
    #: who hears of an entry method's error that no caller waits for (default None: the
    #: job ends); ``shoal serve`` sets it so that a client's broken chare ends no job
    entry_error_sink: Callable[[BaseException, str], None] | None = None
    destroyed: dict[int, int]
    post: Callable[..., None]
    tree_from: Callable[[int], Any]

    # -- receiving ---------------------------------------------------------------
    def allocate(self, header: bytes, index: int, nbytes: int) -> Any:
        """Where a large incoming segment lands: a channel's posted array, else fresh memory."""
        buf = self._posted(header, index, nbytes, False)
        if buf is not None:
            return buf
        import numpy as np

        return np.empty(nbytes, np.uint8)

    @staticmethod
    def receive_early(header: bytes) -> bool:
        """Whether a message may be received before those ahead of it are delivered: any
        but a channel's, whose buffer the next ``recv(into=...)`` may post."""
        return header[0] & KIND_MASK != _CHANNEL

    def allocate_device(self, header: bytes, index: int, nbytes: int) -> Any:
        """Where a segment in device memory lands (the ``mpi`` GPU path): a channel's
        posted device array, else fresh device memory (devices.py)."""
        return allocate_device(self, self._posted(header, index, nbytes, True), nbytes)  # type: ignore[arg-type]

    def _posted(self, header: bytes, index: int, nbytes: int, device: bool) -> Any:
        """The buffer the receiving channel posted for segment ``index`` of message
        ``header``, if it is a channel message's one array and a buffer is posted."""
        if index != 1 or header[0] & KIND_MASK != _CHANNEL:
            return None
        _, _, seq, _, aux, coll = _unpack(header)
        cs = self.colls.get(coll)
        if cs is None:
            return None
        el = cs.elements.get(unpack_header(header)[5])
        table = el._shoal_channels if el is not None else None
        ch = table.get(aux) if table else None
        return ch.posted(seq, nbytes, device) if ch is not None else None

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
        k = kind & _KIND_FWD  # forwarded messages take the handlers (migration.py keeps order)
        if k == 0 and not aux:
            cs = self.colls.get(coll)
            el = cs.elements.get(index) if cs is not None else None
            if el is not None and el._shoal_held is None:
                args, kwargs = decode_call(kind, segments)
                self.run_entry(el, entry, args, kwargs, None)
                return
        elif k == 8:  # Kind.CHANNEL
            cs = self.colls.get(coll)
            el = cs.elements.get(index) if cs is not None else None
            table = el._shoal_channels if el is not None and el._shoal_held is None else None
            ch = table.get(aux) if table else None
            if ch is not None:
                ch.arrive(entry, kind, segments)
                return
        self._handlers[kind & KIND_MASK](kind, entry, src, aux, coll, index, segments, header)

    def _deliver_direct(self, coll: int, index: tuple, entry: int, args: tuple) -> None:
        """A same-PE call whose arguments are array copies (see :meth:`invoke`)."""
        if coll != SYSTEM_ID:
            self.counts.received += 1
        cs = self.colls.get(coll)
        el = cs.elements.get(index) if cs is not None else None
        if el is not None and el._shoal_held is None:
            self.run_entry(el, entry, args, None, None)
            return
        flag, segments = encode_call(args, None)  # not here (yet): take the general path
        self.dispatch(pack_header(Kind.INVOKE | flag, entry, self.pe, 0, coll, index), segments)

    def dispatch(self, header: bytes, segments: list) -> None:
        """Handle a message held back earlier (already counted)."""
        kind, n, entry, src, aux, coll = _unpack(header)
        index = INDEX_STRUCTS[n].unpack_from(header, _HSIZE) if n else ()
        self.uncaused(self._handlers[kind & KIND_MASK], kind, entry, src, aux, coll, index, segments, header)

    def uncaused(self, fn: Callable[..., Any], *args: Any) -> None:
        """``fn(*args)`` for a message held back earlier, with message arrows (a full
        timeline): its runs are not caused by the frame being delivered now, so they keep
        no cause (and draw no arrow) rather than a wrong one."""
        frames = self.trace_frames
        if frames is None:
            fn(*args)
            return
        before = frames.trace_deliver(0, 0)
        try:
            fn(*args)
        finally:
            frames.trace_restore(before)

    def collection_or_defer(self, coll: int, header: bytes, segments: list) -> CollectionState | None:
        cs = self.colls.get(coll)
        if cs is None:
            if coll in self.destroyed:
                self.to_destroyed(header)
            else:
                self.unknown.setdefault(coll, []).append((header, segments))
        return cs

    def element_or_defer(self, coll: int, index: tuple, header: bytes, segments: list) -> Chare | None:
        cs = self.colls.get(coll)
        if cs is None:
            if coll in self.destroyed:
                self.to_destroyed(header)
            else:
                self.unknown.setdefault(coll, []).append((header, segments))
            return None
        el = cs.elements.get(index)
        if el is None:
            self._missing(cs, index, header, segments)
        return el

    def to_destroyed(self, header: bytes) -> None:
        """A message to a collection shoal.destroy() removed: dropped, but a call that
        waits for a value (one element's, or a broadcast's at its root) gets an error."""
        kind, _, _, src, aux, coll = _unpack(header)[:6]
        kind &= KIND_MASK
        if aux and (kind == Kind.INVOKE or (kind == Kind.BROADCAST and self.destroyed.get(coll) == self.pe)):
            self.send_future(src, aux, Failure(ShoalError(
                f"the collection (id {coll}) was destroyed (shoal.destroy) before this call reached it")))

    def _missing(self, cs: CollectionState, index: tuple, header: bytes, segments: list) -> None:
        """A message for an element that is not here: forward (flagged ``FWD``), hold, or fail."""
        if not header[0] & FWD:  # flagged: its receiver tells the sender where the element is
            header = bytes((header[0] | FWD,)) + header[1:]
        self.route_element(cs, index, header, segments)

    def route_element(self, cs: CollectionState, index: tuple, header: bytes, segments: list) -> None:
        """Send a message for element ``index`` (not here) on, or hold it, or fail."""
        info = cs.info
        route, pe = self.locations.route_missing(info, index, cs.done)
        if route is Route.FORWARD:
            self.send_raw(pe, header, segments, info.id)
        elif route is Route.HOLD:
            cs.early.setdefault(index, []).append((header, segments))
        else:
            src = _unpack(header)[3]
            self.fail(
                ShoalError(
                    f"a message from PE {src} is for element {index} of the sparse array of "
                    f"{info.cls.__qualname__}, which does not exist"
                ),
                f"{info.cls.__qualname__}{list(index)}",
            )

    def _on_invoke(self, kind: int, entry: int, src: int, aux: int, coll: int, index: tuple, segments: list, header: bytes) -> None:
        el = self.element_or_defer(coll, index, header, segments)
        if el is None or not self.migration.admit(el, kind, src, coll, index, header, segments):
            return
        args, kwargs = decode_call(kind, segments)
        self.run_entry(el, entry, args, kwargs, self._replier(src, aux) if aux else None)

    def _replier(self, owner: int, fid: int) -> Callable[[Any], None]:
        return lambda value: self.send_future(owner, fid, value)

    def run_entry(self, el: Chare, entry: int, args: tuple, kwargs: dict | None, reply: Callable[[Any], None] | None) -> None:
        self.run_method(el, el._shoal_funcs[entry], args, kwargs, reply)

    def run_method(self, el: Chare, fn: Any, args: tuple, kwargs: dict | None, reply: Callable[[Any], None] | None) -> None:
        """Run ``fn(el, *args, **kwargs)`` as an entry method: timed into the element's
        load, an error reported, a coroutine driven, the value sent to ``reply``."""
        counts = self.counts
        counts.depth += 1
        counts.calls += 1
        caller, self.current_element = self.current_element, el
        t0 = _clock()
        try:
            r = fn(el, *args, **kwargs) if kwargs else fn(el, *args)
        except BaseException as exc:  # noqa: BLE001
            if el._shoal_load is not None:
                el._shoal_load[0] += _clock() - t0
            self.current_element = caller
            self.counts.depth -= 1
            self._entry_failed(el, fn, exc, reply)
            return
        t1 = _clock()
        if el._shoal_load is not None:
            el._shoal_load[0] += t1 - t0
        self.current_element = caller
        counts.depth -= 1
        if not counts.depth:
            self.busy_time += t1 - t0
        if self.tracer is not None:
            self.tracer.run(el, fn, t0, t1)
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

        Task(self, coro, done, _where(el, fn), el).resume()  # type: ignore[arg-type]  # self is a Runtime

    def _entry_failed(self, el: Chare, fn: Any, exc: BaseException, reply: Callable[[Any], None] | None) -> None:
        if isinstance(exc, SystemExit):
            if not self.exit_requested:  # sys.exit() in an entry method ends the job too
                self.request_exit(exit_code(exc))
            return
        where = _where(el, fn)
        if reply is None:
            if self.entry_error_sink is not None:
                annotate(exc, self.pe, where)
                self.entry_error_sink(exc, where)
                return
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
        if cs.info.root == self.pe and self.balancer.holding and self.balancer.hold(coll, header, segments):
            return  # a balancing round of this Array is under way (balancing.py)
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
        if cs.first >= 0 and self._run_each is not None:  # compiled: the values as one Block
            values: list = []
            pending = self._run_each(list(cs.elements.values()), entry, args, kwargs, values,
                                     lambda el: self.contributor(domain, el, target, None, entry), PENDING)
            shape = cs.info.shape
            assert shape is not None  # first >= 0: a dense array
            self.reductions.contribute_block(domain, Block(cs.first, values, shape), pending, target)
            return
        for el in list(cs.elements.values()):
            self.run_entry(el, entry, args, kwargs, self.contributor(domain, el, target, None, entry))

    def contributor(self, domain: tuple, el: Chare, target: Future, section: Any, entry: int) -> Callable[[Any], None]:
        """The reply of one element of a ``ret=True`` broadcast or multicast."""

        def reply(value: Any) -> None:
            if isinstance(value, Failure):
                target.send(value)  # the waiter hears of an error at once, not when all elements finish
            self.reductions.contribute_result(domain, el, value, target, section, entry)

        return reply

    def _on_future(self, kind: int, entry: int, src: int, aux: int, coll: int, index: tuple, segments: list, header: bytes) -> None:
        self._resolve_future(aux, decode_call(kind, segments)[0][0], src)

    def _resolve_future(self, fid: int, value: Any, src: int | None) -> None:
        fut = self.future_table.arrival(fid, isinstance(value, Failure))
        if fut is DROP:
            return  # a second error for a future that failed already: the first one wins
        if fut is TWICE:
            sender = "another PE" if src is None else f"PE {src}"
            self.fail(
                ShoalError(f"{sender} sent a value to the {self.describe_future(fid)}, which was already "
                           "resolved; a future resolves once"),
                f"Future.send from {sender}",
            )
            return
        fut._resolve(value)

    def _on_reduce(self, kind: int, entry: int, src: int, aux: int, coll: int, index: tuple, segments: list, header: bytes) -> None:
        if entry == RET_BLOCK:  # one PE's values of a ret=True broadcast (broadcasts.c)
            self.reductions.receive_block(coll, aux, index[0], index[1], decode_call(kind, segments)[0])
            return
        if entry:  # compact (see ReductionManager._maybe_done)
            self.reductions.receive_compact(src, coll, aux, entry, decode_call(kind, segments)[0][0])
            return
        if coll not in self.colls:  # its target may name an element of the collection: once it is here
            self.collection_or_defer(coll, header, segments)
            return
        payload = decode(segments)
        self.reductions.receive(src, payload[0], aux, payload[1:])

    def _on_result(self, kind: int, entry: int, src: int, aux: int, coll: int, index: tuple, segments: list, header: bytes) -> None:
        if entry == 2:  # for contributors of this PE away from their home
            domain, value = decode(segments)
            self.reductions.on_remote_result(domain, aux, value)
            return
        if entry:  # compact
            self.reductions.on_result((coll,), aux, decode_call(kind, segments)[0][0], None)
            return
        domain, value, section = decode(segments)
        self.reductions.on_result(domain, aux, value, section)

    def _on_channel(self, kind: int, entry: int, src: int, aux: int, coll: int, index: tuple, segments: list, header: bytes) -> None:
        el = self.element_or_defer(coll, index, header, segments)
        if el is None or not self.migration.admit(el, kind, src, coll, index, header, segments):
            return
        table = el._shoal_channels
        ch = table.get(aux) if table else None
        if ch is not None:
            ch.arrive(entry, kind, segments)
        else:
            early = el._shoal_channel_early
            if early is None:
                early = el._shoal_channel_early = {}
            early.setdefault(aux, []).append((entry, (kind, segments)))

    def _on_value(self, kind: int, entry: int, src: int, aux: int, coll: int, value: Any) -> None:
        """A message of one value, decoded by the compiled core (a future's value, a
        compact REDUCE or RESULT, an EXCHANGE): what their handlers do after decoding."""
        if kind == Kind.FUTURE:  # its entry field: the sender PE + 1, or 0 (see Sending.send_future)
            self._resolve_future(aux, value, entry - 1 if entry else None)
        elif kind == Kind.EXCHANGE:
            self.reductions.on_exchange(coll, aux, entry, value)
        elif kind == Kind.REDUCE:
            self.reductions.receive_compact(src, coll, aux, entry, value)
        else:
            self.reductions.on_result((coll,), aux, value, None)

    def await_remote(self, handle: Future) -> None:
        """Ask the owner of ``handle`` (another PE's future) to send its value here, once."""
        owner, fid, table = handle.owner, handle.fid, self.future_table
        if not table.ask(owner, fid):
            return
        reply = Future(_depth=2)

        def arrived(f: Future) -> None:
            table.answered(owner, fid)
            value = f._outcome()
            if not handle.done():
                handle._resolve(value)

        reply.add_done_callback(arrived)
        self.post(handle.owner, Kind.AWAIT, 0, handle.fid, _NO_COLL, (), reply.fid)

    def _on_await(self, kind: int, entry: int, src: int, aux: int, coll: int, index: tuple, segments: list, header: bytes) -> None:
        reply_fid = decode(segments)
        fut = self.future_table.owned(aux)
        if fut is None:
            error = ShoalError(
                f"PE {src} awaits future #{aux} of PE {self.pe}, which resolved and was dropped here before "
                "the request came; keep a reference to a future on its owner while others may await it"
            )
            self.send_future(src, reply_fid, Failure(error))
            return
        fut.add_done_callback(
            lambda f: self.send_future(src, reply_fid, f._outcome())
        )

    def _on_exchange(self, kind: int, entry: int, src: int, aux: int, coll: int, index: tuple, segments: list, header: bytes) -> None:
        self.reductions.on_exchange(coll, aux, entry, decode_call(kind, segments)[0][0])



def _where(el: Chare, fn: Any) -> str:
    return f"{type(el).__qualname__}.{getattr(fn, '__name__', '?')} of element {el.index!r}"
