"""Moving elements between PEs, with every message delivered once and in per-sender order.

An element moves as one MIGRATE message: its state pickled (``__getstate__`` and
``__setstate__`` honoured) with its NumPy arrays out of band, so large state takes the
transport's zero-copy rendezvous path. The PE it left keeps a pointer to where it went
(:mod:`.location`); messages that reach it are forwarded there, flagged ``FWD``.

Per-sender order across a move. Messages from a sender S to element e travel one
route (S's idea of where e is, then the pointers) and every hop is first-in
first-out, so they arrive in order. Order is at risk only when S switches route.
S switches only when told, by e's host H, which does so on the first forwarded
message from S (a LOCATION message); H then holds back S's messages that come by the
new route until S's FENCE arrives: S sends it by the old route right after switching,
so it arrives after everything S sent that way. The PE the element left switches its
own route when the element leaves (it sends what it had queued for it first), and the
PE it arrives on fences its own old route in the same way.

A route that does not switch can still lengthen: S keeps sending to PE H while the
element is away from H, H forwards those messages after it, and the element comes back
to H (or arrives at H for the first time, H having forwarded messages for it towards its
home) while they are still on their way. S's next message then reaches it at once, ahead
of them. So the PE an element arrives on *sweeps* the routes it may have forwarded
messages on (its pointer, else the element's home) and its own old route: a FENCE of its
own down each, which trails what it forwarded there. Until every one of them is back,
messages that come straight to the element are held (:data:`ANY`), whoever sent them; a
sender's FENCE that comes meanwhile releases its messages only with the sweep.
"""

from __future__ import annotations

from time import perf_counter

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any

from ..errors import MigrationError
from . import channels, receive_sets
from .channels import portable_message
from .chare import Chare
from .._transport.base import DeviceSegment
from .message import FWD, INDEX_STRUCTS, Kind, decode, encode, pack_header, segment_nbytes

if TYPE_CHECKING:
    from .collections import CollectionState
    from .runtime import Runtime

__all__ = ["Migration", "RUNTIME_ATTRS", "SENT_ON"]

#: what the runtime keeps in an element's ``__dict__`` (and its ``_shoal_seq`` slot) and
#: moves with it, whatever the class's ``__getstate__`` returns
RUNTIME_ATTRS = (
    "_shoal_seq", "_shoal_seqs", "_shoal_channels", "_shoal_channel_early", "_shoal_channel_counts",
    "_shoal_channel_sites", "_shoal_moves", "_shoal_syncs", "_shoal_synced", "_shoal_lb_due",
)
_SKIP = frozenset((*RUNTIME_ATTRS, "index", "proxy", "_shoal_proxy", "collection", "_shoal_away", "_shoal_comm"))

#: the key, in an element's held messages (``Chare._shoal_held``: sender PE -> messages),
#: of the messages from senders without a hold of their own while its arrival's sweep is
#: out: ``(src, header, segments)``, in arrival order
ANY = -1

#: what takes the place, in the PE's local queue, of a message sent on after its element
#: left (Migration._send_queued); the step's local loop passes over it
SENT_ON = (None, None)


class Migration:
    """One PE's part in moving elements: departures, arrivals, and the order protocol."""

    def __init__(self, rt: "Runtime"):
        self.rt = rt
        self.on_arrival: Any = None  # balancing.py's hook: (cs, el) after each arrival
        #: balancing.py's hooks: (cs, el) once an element is in ``cs.elements`` here, before
        #: its migrated() and its messages run; (cs, el) once one left (its at_sync state
        #: and a resume_from_sync() still queued for it go with it)
        self.on_landing: Any = None
        self.on_departure: Any = None
        #: departures put off until the element's fences are in: (coll, index) -> (PE, plan)
        self.waiting_departures: dict[tuple, tuple] = {}
        #: balancing.py's hook: (cs, index, plan, header, segments) -> True if it keeps an
        #: arriving element until this PE has seen the plan that moved it
        self.before_plan: Any = None
        #: elements whose arrival's sweep is out: (coll, index) -> [fences still to come
        #: back, senders whose own FENCE came meanwhile (released with the sweep)]
        self.sweeps: dict[tuple, list] = {}

    # -- leaving -------------------------------------------------------------------
    def depart(self, cs: "CollectionState", index: tuple, dest: int, plan: int = 0) -> None:
        """Send element ``index`` (here) to PE ``dest``; once its fences are in, if it
        waits for some (then it moves one route switch at a time, which keeps order).
        ``plan``: the number (1 .. 0xFFFF) of the balancing round's plan that moves it,
        which the MIGRATE message carries in its entry field (0: none)."""
        rt = self.rt
        info = cs.info
        el = cs.elements.get(index)
        if el is None:
            raise MigrationError(f"element {_show(index)} of {info.cls.__qualname__} is not on PE {rt.pe}")
        self.check_idle(el, f"move from PE {rt.pe} to PE {dest}")
        if el._shoal_held:
            self.waiting_departures[(info.id, index)] = (dest, plan)
            return
        moves = el._shoal_moves + 1
        t0 = perf_counter()
        channels._moving = True
        try:
            segments = encode((pack(el), moves))
        except Exception as exc:
            raise MigrationError(
                f"element {_show(index)} of {info.cls.__qualname__} cannot move from PE {rt.pe} to PE {dest}: "
                f"its state cannot be pickled ({type(exc).__name__}: {exc}); define __getstate__/__setstate__ "
                "to leave out what cannot travel"
            ) from None
        finally:
            channels._moving = False
        del cs.elements[index]
        cs.first = -1  # no longer the PE's block in order
        rt.reductions.release_own(info.id)
        rt.send_raw(dest, pack_header(Kind.MIGRATE, plan, rt.pe, moves, info.id, index), segments, info.id)
        rt.locations.depart(info, index, dest, moves)
        self._send_queued(info.id, index, dest)
        if self.on_departure is not None:
            self.on_departure(cs, el)
        if rt.tracer is not None:
            size = sum(segment_nbytes(s) for s in segments)
            rt.tracer.migration(t0, perf_counter(), f"{info.cls.__qualname__}{list(index)}", rt.pe, dest, size)

    def check_idle(self, el: Chare, what: str) -> None:
        """Refuse to pack an element that a coroutine or a pending receive holds on to."""
        where = f"{type(el).__qualname__} element {_show(el.proxy._index)} on PE {self.rt.pe}"
        for task in self.rt.suspended:
            if task.element is el:
                raise MigrationError(
                    f"{where} cannot {what}: its async entry method {task.where} is suspended (awaiting "
                    f"{task.waiting!r}); a coroutine cannot travel. Call at_sync() at a point where its "
                    "methods have returned, and go on in resume_from_sync()"
                )
        for ch in (el._shoal_channels or {}).values():
            if ch.waiting is not None:
                raise MigrationError(
                    f"{where} cannot {what}: {ch!r} has a receive pending ({ch.waiting!r}); "
                    "wait for it, or do this between rounds of receives"
                )

    def _send_queued(self, coll: int, index: tuple, dest: int) -> None:
        """Messages this PE queued for the element before it left go after it, first.

        Each leaves a :data:`SENT_ON` in its place: the queue keeps its length, because a
        departure can happen inside ``Runtime.step``'s local loop (the PLAN of a balancing
        round runs from the root PE's own queue), and that loop runs the count of messages
        it found when it began (runtime.py, receive.c: run_local)."""
        local = self.rt.local
        kept: list = []
        move: list = []
        for item in local:
            header, body = item
            if header is None:
                mine = body is not None and body[0] == coll and body[1] == index
            else:
                mine = header[1] == len(index) and _coll_of(header) == coll and _index_of(header) == index
            if mine:
                move.append(item)
                kept.append(SENT_ON)
            else:
                kept.append(item)
        if not move:
            return
        local.clear()
        local.extend(kept)
        for header, body in move:
            if header is None:  # a direct call (arrays copied): as the general path encodes it
                from .message import encode_call

                flag, segments = encode_call(body[3], None)
                header, body = pack_header(Kind.INVOKE | flag, body[2], self.rt.pe, 0, coll, index), segments
            self.rt.transport.send(dest, header, list(body))  # counted already when queued

    # -- arriving ------------------------------------------------------------------
    def on_migrate(self, kind: int, entry: int, src: int, aux: int, coll: int, index: tuple, segments: list, header: bytes) -> None:
        rt = self.rt
        cs = rt.collection_or_defer(coll, header, segments)
        if cs is None:
            return
        if entry and self.before_plan is not None and self.before_plan(cs, index, entry, header, segments):
            return  # it came before the plan that moved it: it lands after it (balancing.py)
        info = cs.info
        t0 = perf_counter()
        # the element's arrays are its own and writable: buffers that came in a read-only
        # frame are copied (small ones; large ones came by rendezvous into fresh memory)
        segments = [segments[0], *[bytearray(b) if _read_only(b) else b for b in segments[1:]]]
        el = rebuild(rt, cs, index, segments)
        moves = el._shoal_moves
        home = info.home(index, rt.npes)
        el._shoal_away = home != rt.pe
        # the routes messages for it may still be on, coming here: this PE's own (``old``)
        # and the one it forwarded others' messages on (its pointer, else the home)
        old = rt.locations.locate(info, index)
        forwarded = rt.locations.pointers.get((coll, index), home)
        routes = sorted({old, forwarded} - {rt.pe})
        cs.elements[index] = el
        cs.first = -1
        rt.reductions.release_own(coll)
        rt.locations.arrive(info, index, moves)
        if routes:  # sweep them: hold what comes straight here until each fence is back
            el._shoal_held = {rt.pe: [], ANY: []}
            self.sweeps[(coll, index)] = [len(routes), []]
            for pe in routes:
                rt.send_raw(pe, pack_header(Kind.FENCE, 0, rt.pe, moves, coll, index), [b""], coll)
        if self.on_landing is not None:
            self.on_landing(cs, el)
        rt.counts.depth += 1
        try:
            el.migrated()
        except BaseException as exc:  # noqa: BLE001 - as an entry method's error
            rt.counts.depth -= 1
            rt._entry_failed(el, type(el).migrated, exc, None)
        else:
            rt.counts.depth -= 1
        early = cs.early.pop(index, None)
        if early:
            for h, s in early:
                rt.dispatch(h, s)
        if rt.tracer is not None:
            size = sum(segment_nbytes(s) for s in segments)
            rt.tracer.migration(t0, perf_counter(), f"{info.cls.__qualname__}{list(index)}", src, rt.pe, size)
        if self.on_arrival is not None:
            self.on_arrival(cs, el)

    # -- the order protocol ----------------------------------------------------------
    def admit(self, el: Chare, kind: int, src: int, coll: int, index: tuple, header: bytes, segments: list) -> bool:
        """Whether a message for ``el`` (here) runs now; False: held back for order."""
        held = el._shoal_held
        if kind & FWD:
            if held is None or src not in held:
                moves = el._shoal_moves
                if held is None:
                    held = el._shoal_held = {}
                mine: list = []
                if ANY in held:  # what came straight from ``src`` before: held now with its own
                    rest: list = []
                    for item in held[ANY]:
                        if item[0] == src:
                            mine.append(item[1:])
                        else:
                            rest.append(item)
                    held[ANY] = rest
                held[src] = mine
                self.rt.send_raw(src, pack_header(Kind.LOCATION, 0, self.rt.pe, moves, coll, index), [b""], coll)
            return True
        if held is not None:
            if src in held:
                held[src].append((header, segments))
                return False
            if ANY in held:
                held[ANY].append((src, header, segments))
                return False
        return True

    def on_location(self, kind: int, entry: int, src: int, aux: int, coll: int, index: tuple, segments: list, header: bytes) -> None:
        """Element ``index`` is on PE ``src`` (after move ``aux``): send there from now on,
        and fence the old route."""
        rt = self.rt
        info = rt.infos.get(coll)
        if info is None:
            return
        old = rt.locations.locate(info, index)
        rt.locations.learn(info, index, src, aux)
        rt.send_raw(old, pack_header(Kind.FENCE, 0, rt.pe, aux, coll, index), [b""], coll)

    def on_fence(self, kind: int, entry: int, src: int, aux: int, coll: int, index: tuple, segments: list, header: bytes) -> None:
        """Everything ``src`` sent by its old route is in: run what it sent by the new one."""
        rt = self.rt
        el = rt.element_or_defer(coll, index, header, segments)
        if el is None:
            return
        held = el._shoal_held
        sweep = self.sweeps.get((coll, index))
        waiting: list = []
        if sweep is not None and src == rt.pe:  # one of its arrival's sweep came back
            sweep[0] -= 1
            if sweep[0] > 0:
                return
            del self.sweeps[(coll, index)]
            if held is not None:
                waiting.extend(held.pop(rt.pe, ()))
                waiting.extend((h, s) for _, h, s in held.pop(ANY, ()))
                for sender in sweep[1]:
                    waiting.extend(held.pop(sender, ()))
        elif sweep is not None:  # a sender's fence during the sweep: its messages wait for the sweep
            sweep[1].append(src)
            return
        elif held is not None:
            waiting.extend(held.pop(src, ()))
        if held is not None and not held:
            el._shoal_held = None
        for h, s in waiting:
            rt.dispatch(h, s)
        later = self.waiting_departures.pop((coll, index), None) if el._shoal_held is None else None
        if later is not None:
            self.depart(rt.colls[coll], index, *later)


def rebuild(rt: "Runtime", cs: "CollectionState", index: tuple, segments: list) -> Chare:
    """The element that :func:`pack` and its move count were encoded into ``segments``
    (a migration's payload, or a checkpoint's record), made on this PE with its channels
    and receive sets bound to it."""
    receive_sets.RESTORED.clear()
    try:
        state, moves = decode(segments)
        el = unpack(rt, cs, index, state)
        for s in receive_sets.RESTORED:
            s.bind(el)
    finally:
        receive_sets.RESTORED.clear()
    el._shoal_moves = moves
    return el


def pack(el: Chare) -> tuple:
    """What an element moves with: its class, the runtime's attributes, and its state."""
    d = el.__dict__
    runtime = {k: d[k] for k in RUNTIME_ATTRS if k in d}
    runtime["_shoal_seq"] = el._shoal_seq  # (a slot)
    early = runtime.get("_shoal_channel_early")
    if early:
        runtime["_shoal_channel_early"] = {tag: [(seq, portable_message(m)) for seq, m in msgs]
                                           for tag, msgs in early.items()}
    getstate = type(el).__getstate__
    if getstate is object.__getstate__:
        state: Any = {k: v for k, v in d.items() if k not in _SKIP}
    else:
        state = getstate(el)
    return type(el), runtime, state


def unpack(rt: "Runtime", cs: "CollectionState", index: tuple, packed: tuple) -> Chare:
    """The element ``pack`` described, made on this PE."""
    cls, runtime, state = packed
    el = cls.__new__(cls)
    el._shoal_load = rt.new_load() if rt.new_load is not None else None
    el._shoal_held = None
    el._shoal_seq = 0
    el.index = index
    el.collection = cs.proxy
    # attribute by attribute, not __dict__.update: a touched __dict__ makes CPython drop
    # the fast attribute layout, and every entry method of the element would pay for it
    seqs = runtime.get("_shoal_seqs")
    if seqs and (cs.info.id,) in seqs:  # a checkpoint written before _shoal_seq existed
        runtime = {**runtime, "_shoal_seq": seqs[(cs.info.id,)]}
    early = runtime.get("_shoal_channel_early")
    if early and any(type(m[1]) is list for msgs in early.values() for m in msgs):  # written before their numbers
        runtime = {**runtime, "_shoal_channel_early": {tag: list(enumerate(msgs)) for tag, msgs in early.items()}}
    for k, v in runtime.items():
        object.__setattr__(el, k, v)
    setstate = getattr(el, "__setstate__", None)
    if setstate is not None:
        setstate(state)
    else:
        fields, slots = state if isinstance(state, tuple) else (state, None)  # (dict, slots) with slots
        for k, v in {**(fields or {}), **(slots or {})}.items():
            if k not in _SKIP:
                object.__setattr__(el, k, v)
    for ch in (el._shoal_channels or {}).values():
        ch.chare = el
    return el


def _read_only(segment: Any) -> bool:
    return type(segment) is not DeviceSegment and memoryview(segment).readonly


def _coll_of(header: bytes) -> int:
    return int.from_bytes(header[12:20], "little")


def _index_of(header: bytes) -> tuple:
    return INDEX_STRUCTS[header[1]].unpack_from(header, 20)


def _show(index: tuple) -> Any:
    return index[0] if len(index) == 1 else index
