"""How a runtime sends: entry-method calls, broadcasts, futures' values, channel
messages and its own messages, to another PE or to this PE's queue.

:class:`Sending` is a part of :class:`shoal._runtime.runtime.Runtime` (a mixin: the
runtime holds the state below). With the MPI transport most calls leave through the
compiled core (``_native/send.c``); this is its reference and its fallback.
"""

from __future__ import annotations

import os
from collections import deque
from time import perf_counter as _clock

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any, Callable

from ..errors import ShoalError
from ..numpy_types import ndarray
from .balancing import COMM_SAMPLE, record_comm
from .collections import CollectionInfo
from .future_table import DROP, TWICE, FutureTable
from .failures import Failure
from .futures import Future
from .location import Locations
from . import message as _message
from .message import (
    HEADER, Kind, bad_ret, encode, encode_call, encode_call_shared, pack_header, pack_index, segment_nbytes,
    unpicklable,
)
from .system import NO_COLL as _NO_COLL, SYSTEM_ID
from .._transport.base import DeviceSegment

if TYPE_CHECKING:
    from .._transport.base import Transport
    from .proxy import ElementProxy

__all__ = ["Sending"]

_pack = HEADER.pack
_BROADCAST = int(Kind.BROADCAST)


def _own(segments: list) -> list:
    """Private copies of out-of-band buffers, so a local send has value semantics (device
    memory is the sender's own copy already)."""
    if len(segments) == 1:
        return segments
    import numpy as np

    return [segments[0], *[s if type(s) is DeviceSegment else np.frombuffer(s, np.uint8).copy() for s in segments[1:]]]



def _copy_plain_arrays(args: tuple) -> tuple | None:
    """Copies of ``args`` if they are all numeric NumPy arrays (whose copy is a full copy)."""
    array = ndarray()
    for a in args:
        if type(a) is not array or a.dtype.kind not in "biufc":
            return None
    return tuple([a.copy() for a in args])


class Sending:
    """The send paths of a runtime."""

    pe: int
    transport: "Transport"
    counts: Any
    tracer: Any
    current_element: Any
    _comm_countdown: int
    local: deque
    locations: Locations
    future_table: FutureTable
    _send_eager: Callable[..., bool] | None
    _send_value: Callable[..., bool] | None
    _core_send: Callable[..., bool] | None
    _new_future: Callable[[int], Future]

    def send_raw(self, dest: int, header: bytes, segments: list, coll: int) -> None:
        if coll != SYSTEM_ID:
            self.counts.sent += 1
        if dest == self.pe:
            self.local.append((header, _own(segments)))
            return
        if self.tracer is not None:
            self.tracer.send(_clock(), dest, len(header) + sum(segment_nbytes(s) for s in segments))
        if self._send_eager is None:
            self.transport.send(dest, header, segments)
        elif not self._send_eager(dest, header, segments):
            self.transport.send_after_eager(dest, header, segments)

    def post(self, dest: int, kind: int, entry: int, aux: int, coll: int, index: tuple, payload: Any) -> None:
        """Encode and send one runtime message."""
        self.send_raw(dest, pack_header(kind, entry, self.pe, aux, coll, index), encode(payload), coll)

    def post_value(self, dest: int, kind: int, entry: int, aux: int, coll: int, value: Any) -> None:
        """Send one value the way entry-method arguments go (a plain array without pickle)."""
        send = self._send_value
        if send is not None and send(dest, kind, entry, aux, coll, value):
            return
        flag, segments = encode_call((value,), None)
        self.send_raw(dest, pack_header(kind | flag, entry, self.pe, aux, coll), segments, coll)

    def _encode_call(self, info: CollectionInfo, name: str, args: tuple, kwargs: dict) -> tuple[int, list]:
        try:
            return encode_call_shared(args, kwargs)  # every PE decodes a broadcast
        except Exception as exc:
            raise unpicklable(info.cls, name, args, kwargs, exc) from None

    def invoke(self, proxy: "ElementProxy", entry: int, name: str, args: tuple, kwargs: dict, ret: bool) -> Future | None:
        """Send entry method ``entry`` to one element."""
        if ret is not False and ret is not True:
            raise bad_ret(proxy._info.cls, name, ret)
        self._comm_countdown -= 1
        if self._comm_countdown <= 0:
            self._sample_comm(proxy, args)
        if not ret and not kwargs and args and type(args[0]) is ndarray():
            loc = self.locations
            if (proxy._dest if proxy._epoch == loc.epoch else loc.route(proxy)) == self.pe:
                copies = _copy_plain_arrays(args)
                if copies is not None:  # same PE, only arrays: no encoding, just copies
                    if proxy._info.id != SYSTEM_ID:
                        self.counts.sent += 1
                    self.local.append((None, (proxy._info.id, proxy._index, entry, copies)))
                    return None
        fut = self._new_future(2) if ret else None  # the frame of the proxy call's caller
        if fut is not None and not kwargs and self._core_send is not None:
            if self._core_send(proxy, entry, fut.fid, *args):  # compiled, the reply to `fut`
                return fut
        try:
            flag, segments = encode_call(args, kwargs)
        except Exception as exc:
            if fut is not None:
                self.future_table.forget(fut.fid)
            raise unpicklable(proxy._info.cls, name, args, kwargs, exc) from None
        self._to_element(proxy, flag, entry, fut.fid if fut is not None else 0, segments)  # Kind.INVOKE == 0
        return fut

    def _to_element(self, proxy: "ElementProxy", kind: int, entry: int, aux: int, segments: list) -> None:
        """Send a message to one element (the per-message path: cached route and index)."""
        coll = proxy._info.id
        packed = proxy._packed
        if packed is None:
            packed = proxy._packed = pack_index(proxy._index)
        header = _pack(kind, len(proxy._index), entry, self.pe, aux, coll) + packed
        loc = self.locations
        dest = proxy._dest if proxy._epoch == loc.epoch else loc.route(proxy)
        self.send_raw(dest, header, segments, coll)

    def broadcast(self, info: CollectionInfo, entry: int, name: str, args: tuple, kwargs: dict, ret: bool,
                  depth: int = 5) -> Future | None:
        """Send entry method ``entry`` to every element, through the collection's root
        (``depth``: the caller's frame, for the future's origin, as ``Future(_depth=)``)."""
        if ret is not False and ret is not True:
            raise bad_ret(info.cls, name, ret)
        simple = _message.pickle_simple
        if simple is not None and not kwargs and (payload := simple(args)) is not None:
            flag, segments = 0, [payload]  # encode_call's first case, without its calls
        else:
            flag, segments = self._encode_call(info, name, args, kwargs)
        fut = self._new_future(depth - 2) if ret else None
        header = _pack(_BROADCAST | flag, 0, entry, self.pe, fut.fid if fut else 0, info.id)
        self.send_raw(info.root, header, segments, info.id)
        return fut

    def send_future(self, owner: int, fid: int, value: Any) -> None:
        """Resolve future ``fid`` of PE ``owner`` with ``value``."""
        if owner == self.pe:
            fut = self.future_table.arrival(fid, isinstance(value, Failure))
            if fut is DROP:
                return  # a second error for a future that failed already: the first one wins
            if fut is TWICE:
                raise ShoalError(f"{self.describe_future(fid)} was already resolved; a future resolves once")
            fut._resolve(value)
            return
        try:
            flag, segments = encode_call((value,), None)  # a plain array goes without pickle
        except Exception as exc:
            raise TypeError(f"cannot send {type(value).__name__} to a future: {exc}") from None
        # the entry field of a FUTURE message names its sender (PE + 1) to the compiled
        # core's receiving path, which hands the receiver the entry field but not the source
        sender = self.pe + 1 if self.pe < 0xFFFF else 0
        self.send_raw(owner, pack_header(Kind.FUTURE | flag, sender, self.pe, fid, _NO_COLL), segments, _NO_COLL)

    def describe_future(self, fid: int) -> str:
        """Future ``fid`` of this PE, named for an error: where it was made if it is still
        held here (it travelled, so it is among the escaped ones while it lives)."""
        fut = self.future_table.owned(fid)
        if fut is not None:
            return f"future created at {fut.origin} on PE {self.pe}"
        return f"future #{fid} of PE {self.pe} (dropped here since, so where it was made is not known)"

    def send_channel(self, remote: "ElementProxy", tag: int, seq: int, flag: int, segments: list) -> None:
        self._comm_countdown -= 1
        if self._comm_countdown <= 0:
            self._sample_comm(remote, segments[1:])
        self._to_element(remote, Kind.CHANNEL | flag, seq, tag, segments)

    def _sample_comm(self, proxy: "ElementProxy", data: Any) -> None:
        """One send in COMM_SAMPLE from an element, for the communication graph (balancing.py)."""
        # varied (1 .. 2*COMM_SAMPLE-1): no send pattern aliases with it
        self._comm_countdown = 1 + int.from_bytes(os.urandom(2), "little") % (2 * COMM_SAMPLE - 1)
        array = ndarray()
        nbytes = sum(a.nbytes if isinstance(a, array) else 64 for a in data)
        record_comm(self.current_element, proxy, nbytes)
