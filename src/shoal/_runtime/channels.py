"""Channels: ordered point-to-point streams between two chares.

Both ends create ``Channel(self, remote=peer_proxy)``; the k-th channel an element
opens towards a peer pairs with the peer's k-th channel towards it. Messages carry a
32-bit tag both ends derive alike, in the header, so a large array can land straight
in the buffer a pending ``recv(into=array)`` posted, with no copy in shoal.
"""

from __future__ import annotations

import sys
import warnings
import zlib
from collections import deque

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any, Callable

    import numpy as np

from ..numpy_types import ndarray
from ..errors import ChannelError, GPUError
from ..gpu.kinds import kind_of
from .context import current
from .devices import posting
from .failures import Failure
from .futures import _PENDING, Future
from .message import ARRAYS, decode_call, encode_call, portable_segment, unpicklable

if TYPE_CHECKING:
    from .chare import Chare
    from .proxy import ElementProxy

__all__ = ["Channel", "SEQ_MASK", "portable_message"]

#: channel messages are numbered modulo 2**16: the number rides in the header's entry field
SEQ_MASK = 0xFFFF



class ChannelFuture(Future):
    """A channel receive. Only message delivery resolves it, when no entry method or
    coroutine is running, so the coroutine awaiting it resumes there and then."""

    __slots__ = ()
    _resume_now = True


_new_future = ChannelFuture.__new__


def _endpoint(proxy: "ElementProxy") -> tuple:
    return (proxy._info.id, proxy._index)


def _order(chare: "Chare", peer: tuple, remote: "ElementProxy") -> int:
    """How many channels without a port ``chare`` opened towards ``peer`` before this one.

    Such channels pair up by creation order at the two ends. Two of them opened at
    different lines of code have different roles, and ends that open them in different
    orders swap their messages silently, so that case gets a warning to use ``port=``.
    """
    counts = chare._shoal_channel_counts
    if counts is None:
        counts = chare._shoal_channel_counts = {}
    k = counts.get(peer, 0)
    counts[peer] = k + 1
    caller = sys._getframe(2)
    site = (caller.f_code.co_filename, caller.f_lineno)
    sites = chare._shoal_channel_sites
    if sites is None:
        sites = chare._shoal_channel_sites = {}
    first = sites.setdefault(peer, site)
    if k and first != site:
        warnings.warn(
            f"{chare!r} opened a second channel to {remote!r} without port=; channels between one pair "
            "pair up by creation order, so ends that open them in different orders swap their messages. "
            "Give each channel a port (the same at both ends): shoal.Channel(self, remote=..., port=1)",
            stacklevel=3,
        )
    return k


class Channel:
    """An ordered stream from ``chare`` to ``remote`` (and its mirror at the other end).

    ``shoal.Channel(self, remote=peer_proxy, port=None)``, made inside an element (in its
    constructor or an entry method); the peer makes the mirror end towards it.

    * ``chare``: the element that owns this end, ``self``.
    * ``remote``: the other end's element proxy (``self.collection[i + 1]``).
    * ``port`` (default None): an int or a str, the same at both ends, that tells apart
      several channels between one pair of elements. Without one, channels between a
      pair pair up by the order the two ends open them (the k-th towards a peer with
      the peer's k-th towards this one); shoal warns when a second portless channel to
      the same peer is opened from another line of code.

    ``send(*values)`` sends ``values`` to the other end and returns at once, never
    waiting for the receiver; the buffers may be reused when it returns (it sends by
    value). One value arrives as itself, several as a tuple, in send order. ``send`` is
    an attribute, not a method: the runtime's compiled send where there is one.

    ``recv(into=None)`` returns a future of the next message (``await ch.recv()``); one
    receive may be pending per channel at a time. Messages that arrive before the
    receiving end opened its channel are kept for it. A channel travels with its
    element when the element migrates; it cannot be sent in a message.
    """

    __slots__ = (
        "chare", "remote", "tag", "inbox", "ahead", "waiting", "into", "landed", "sent", "arrived", "checked", "send",
        "recv", "_rt", "peer", "peer_epoch",
    )
    send: Callable[..., None]
    recv: Callable[..., Future]

    def __init__(self, chare: "Chare", remote: "ElementProxy", port: int | str | None = None):
        from .chare import Chare
        from .proxy import ElementProxy

        if not isinstance(chare, Chare) or not isinstance(remote, ElementProxy):
            raise TypeError("use shoal.Channel(self, remote=element_proxy) inside a chare")
        rt = current("shoal.Channel()")
        me, peer = _endpoint(chare.proxy), _endpoint(remote)
        ends = sorted([me, peer])
        if port is None:
            self.tag = zlib.crc32(repr((ends, _order(chare, peer, remote))).encode()) or 1
        elif type(port) in (int, str):
            self.tag = zlib.crc32(repr((ends, "port", port)).encode()) or 1
        else:
            raise TypeError(f"Channel port must be an int or a str (the same at both ends), not {port!r}")
        self.chare = chare
        self.remote = remote
        self.inbox: deque = deque()
        self.ahead: dict | None = None  # messages that overtook an earlier one (a move on the way), by number
        self.waiting: Any = None  # the pending receive: a Future, or a ReceiveSet (both take `_resolve`)
        self.into: Any = None  # a NumPy array, or a device array (devices.py)
        self.landed = False  # a rendezvous segment was written into `into`
        self.checked: np.ndarray | None = None  # the last buffer posted, known to be fit
        self.sent = 0  # messages sent, mod 2**16: each carries its number
        self.arrived = 0  # messages arrived, mod 2**16: the next one to arrive has this number
        self._rt = rt
        self.peer: Channel | None = None  # the other end, once the compiled send found it on this PE
        self.peer_epoch = -1  # the location epoch `peer` was found in
        _bind_methods(self, rt)
        table = chare._shoal_channels
        if table is None:
            table = chare._shoal_channels = {}
        if self.tag in table:
            raise ChannelError(f"{chare!r} already has a channel with tag {self.tag:#x} (to {remote!r})")
        table[self.tag] = self
        early = chare._shoal_channel_early
        if early and self.tag in early:
            for seq, message in early.pop(self.tag):
                self.arrive(seq, *message)

    def _send(self, *values: Any) -> None:
        """Send ``values`` to the other end (the Python path of ``send``)."""
        try:
            flag, segments = encode_call(values, None)
        except Exception as exc:
            raise unpicklable(type(self.chare), "Channel.send", values, {}, exc) from None
        self._rt.send_channel(self.remote, self.tag, self.sent, flag, segments)
        self.sent = (self.sent + 1) & SEQ_MASK

    def _recv(self, into: Any = None) -> Future:
        """A future of the next message, in send order (the Python path of ``recv``).

        With ``into=array`` (default None) the next message, which must be one NumPy
        array of the same shape and dtype, is written into ``array`` and the future's
        value is ``array`` itself. ``array`` must be a writable NumPy array (else
        :class:`~shoal.ChannelError`, raised here); it may be a strided view, such as
        the column face ``u[:, 0]`` of a 2-D array, which the message is unpacked into
        (one copy, NumPy's strided copy). A message that does not match it fails the
        future with a :class:`~shoal.ChannelError`. A large message (rendezvous) whose
        receive is already posted lands in a C-contiguous ``array`` directly, with no
        copy in shoal; otherwise it is copied in. A second ``recv`` while one is pending
        raises :class:`~shoal.ChannelError`.

        ``array`` may also be a device array (CuPy, Numba, PyTorch on a GPU): a device
        array sent to it is copied device to device straight into it (docs/gpu.md); a
        device array of another shape or dtype fails the future with a
        :class:`~shoal.errors.GPUError` naming the PE.
        """
        if self.waiting is not None:
            raise ChannelError(f"channel {self!r} already has a receive pending; await it first")
        if into is not None and into is not self.checked:
            if not isinstance(into, ndarray()) or not into.flags.c_contiguous or not into.flags.writeable:
                check_buffer(into, "recv(into=...)", device=True)  # raises unless writable, strided or on a GPU
            self.checked = into  # the usual loop posts one buffer again and again: check it once
        fut = _new_future(ChannelFuture)  # Future.local, inlined: one per message
        fut._rt, fut.owner, fut.fid = self._rt, self._rt.pe, 0
        fut._state, fut._value, fut._callbacks, fut._origin = _PENDING, None, None, self
        if self.inbox:
            self._complete(fut, self.inbox.popleft(), into)
        else:
            self.waiting, self.into, self.landed = fut, into, False
        return fut

    # -- called by the runtime ---------------------------------------------------
    def posted(self, seq: int, nbytes: int, device: bool = False) -> Any:
        """The posted buffer for a large segment of message ``seq``, if that message
        completes the pending receive (it is the next to arrive) and fits exactly: a
        host array's bytes, or with ``device`` (a segment in device memory) the posted
        device array itself."""
        into = self.into
        if into is not None and seq == self.arrived and not self.landed and into.nbytes == nbytes:
            if device:
                if type(into) is ndarray():
                    return None  # a host buffer: copied out of the device memory the message lands in
                self.landed = True
                return into
            if type(into) is not ndarray() or not into.flags.c_contiguous:
                return None  # a device buffer, or a strided view: unpacked from fresh memory
            self.landed = True
            return into.reshape(-1).view("uint8")
        return None

    def arrive(self, seq: int, kind: int, segments: list) -> None:
        """Message ``seq`` of this channel arrived: complete the pending receive, or keep it.

        Messages are taken in send order: one that overtook an earlier one (the sender
        or this end moved, and the earlier one is being forwarded) waits in ``ahead``
        until the gap closes."""
        if seq != self.arrived:
            if self.ahead is None:
                self.ahead = {}
            self.ahead[seq] = (kind, segments)
            return
        self._take(kind, segments)
        ahead = self.ahead
        while ahead is not None and self.arrived in ahead:
            self._take(*ahead.pop(self.arrived))
        if not ahead:
            self.ahead = None  # the compiled core takes the fast path only while nothing waits here

    def _take(self, kind: int, segments: list) -> None:
        """The next message in order: complete the pending receive, or join the inbox."""
        self.arrived = (self.arrived + 1) & SEQ_MASK
        if self.waiting is None:
            self.inbox.append((kind, segments))
            return
        fut, into = self.waiting, self.into
        self.waiting, self.into = None, None
        self._complete(fut, (kind, segments), into, self.landed)

    def _complete(self, fut: Future, message: Any, into: Any, landed: bool = False) -> None:
        if into is None:
            fut._resolve(message_value(message))
            return
        value: Any
        try:
            if type(message) is ndarray():
                value = message
            elif message[0] & ARRAYS:  # plain host arrays: no device array to place
                value = message_value(message)
            else:
                with posting(self._rt, into):  # a device array in it is copied straight into `into`
                    value = message_value(message)
            value = _fill(into, value, self, landed)
        except (ChannelError, GPUError) as exc:
            value = Failure(exc)
        fut._resolve(value)

    def __reduce__(self) -> tuple:
        """A channel travels only with its element (migration.py), which re-binds it."""
        if not _moving:
            raise TypeError(f"{self!r} cannot be sent; each end opens its own shoal.Channel")
        inbox = [portable_message(m) for m in self.inbox]
        ahead = {seq: portable_message(m) for seq, m in self.ahead.items()} if self.ahead else None
        return _restore, (self.remote, self.tag, inbox, self.sent, self.arrived, ahead)

    def __repr__(self) -> str:
        return f"<Channel {self.chare.proxy!r} <-> {self.remote!r}>"


#: true while migration.py packs an element: only then do channels pickle
_moving = False


def _restore(remote: "ElementProxy", tag: int, inbox: list, sent: int, arrived: int, ahead: dict | None = None) -> Channel:
    """A channel of an element that moved here; migration.py sets ``chare``."""
    rt = current("a channel arriving with its element")
    ch = Channel.__new__(Channel)
    ch.remote, ch.tag, ch.inbox, ch.sent, ch.arrived, ch.ahead = remote, tag, deque(inbox), sent, arrived, ahead
    ch.waiting, ch.into, ch.landed, ch.checked = None, None, False, None
    ch._rt, ch.peer, ch.peer_epoch = rt, None, -1
    _bind_methods(ch, rt)
    return ch


def _bind_methods(ch: Channel, rt: Any) -> None:
    """``ch.send`` and ``ch.recv``: the compiled core's where one runs, else the Python methods."""
    ch.send = rt.channel_send(ch, Channel._send) if rt.channel_send is not None else ch._send
    ch.recv = rt.channel_recv(ch, Channel._recv, ChannelFuture) if rt.channel_recv is not None else ch._recv


def portable_message(message: Any) -> Any:
    """An inbox entry as something pickle can carry (received memory is not)."""
    if type(message) is ndarray():
        return message
    kind, segments = message
    return kind, [portable_segment(s) for s in segments]


def message_value(message: Any) -> Any:
    """The value of an inbox entry: ``(kind, segments)`` as it came, or an array that
    a sender on this PE delivered straight to the inbox (already a copy)."""
    if type(message) is ndarray():
        return message
    values = decode_call(*message)[0]
    return values[0] if len(values) == 1 else values


def check_buffer(buf: Any, what: str, device: bool = False) -> None:
    """Raise :class:`ChannelError` unless ``buf`` can take a message: a writable NumPy
    array, contiguous or a strided view (called once the C-contiguous check failed), or
    with ``device`` a device array (CuPy, Numba, PyTorch: devices.py writes into it)."""
    if not isinstance(buf, ndarray()):
        if device and kind_of(buf) is not None:
            return
        arrays = "a NumPy array or a device array" if device else "a NumPy array"
        raise ChannelError(
            f"{what} takes {arrays}, not a {type(buf).__name__}; allocate one to receive into, "
            "e.g. np.empty(shape, dtype)"
        )
    if not buf.flags.writeable:
        raise ChannelError(
            f"{what}: the array (shape {buf.shape}, dtype {buf.dtype}) is read-only; pass a writable one "
            "(a view of your own array such as u[:, 0], or np.empty_like(buf)); views made by "
            "np.broadcast_to or np.frombuffer on bytes are read-only"
        )


def _fill(into: np.ndarray, value: Any, ch: Channel, landed: bool) -> np.ndarray:
    """``into`` holding ``value``; ``landed``: the transport already wrote it there.
    A strided ``into`` (a column face) is filled by NumPy's strided copy."""
    if value is into:  # a device array was written into it as it arrived (devices.py)
        return into
    if not isinstance(value, ndarray()):
        raise ChannelError(
            f"{ch!r}: recv(into=array) got a {type(value).__name__}, not a NumPy array; send one array "
            "per message to a receive with into=, or receive without into="
        )
    if value.shape != into.shape or value.dtype != into.dtype:
        raise ChannelError(
            f"{ch!r}: received an array of shape {value.shape} and dtype {value.dtype} "
            f"into a buffer of shape {into.shape} and dtype {into.dtype}; post a buffer that matches, "
            f"e.g. np.empty({value.shape}, dtype=np.{value.dtype}), or send what the buffer holds"
        )
    if not landed:
        into[...] = value
    return into
