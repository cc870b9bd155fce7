"""Receive sets: one receive on each of several channels, into buffers posted in
advance, and one entry method run once all of them have landed.

A chare that waits for inputs from several peers (a task's dependencies, a tile's
ghost faces) would otherwise pay a future, a callback or a coroutine resumption per
input. A set costs one entry-method call per round: the runtime copies each message
into its buffer as it arrives (on this PE, at send time), counts, and queues
``then()`` when the last one lands.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any, Callable, Sequence

    import numpy as np

from ..numpy_types import ndarray
from ..errors import ChannelError, GPUError
from .channels import Channel, _fill, check_buffer, message_value
from .chare import entry_table
from .context import current
from .devices import posting
from .failures import Failure
from .system import SYSTEM_ID

if TYPE_CHECKING:
    from .runtime import Runtime

__all__ = ["ReceiveSet"]

class ReceiveSet:
    """Receives on ``channels``, the k-th into ``into[k]``; ``then()`` runs when all have landed.

    ``shoal.ReceiveSet(channels, into, then)``, made inside the element that owns the
    channels (usually in its constructor, once):

    * ``channels``: a sequence of :class:`~shoal.Channel` objects of this element, each
      at most once.
    * ``into``: one buffer per channel, in the same order: writable NumPy arrays or
      device arrays (CuPy, Numba, PyTorch: docs/gpu.md), else :class:`~shoal.ChannelError`. Views of the array a chare computes on are the
      usual buffers: a row ``u[0, :]`` (contiguous: a message is copied in with one
      ``memcpy``) or a column ``u[:, 0]`` (strided: NumPy's strided copy unpacks it).
      They stay the set's buffers for every round.
    * ``then``: an entry method of the same element, given bound (``then=self.step``),
      called with no arguments once per round, when the last receive has landed. It
      may be a plain method or an ``async def`` one (which may ``await``, e.g. an
      ``allreduce`` of a residual, before it posts the next round).

    ``post()`` posts the receives of one round: each takes the next message of its
    channel, which must be one NumPy array of its buffer's shape and dtype; a message
    that came early waits in its channel and is taken at ``post()``. ``then`` never runs
    inside ``post()`` or inside a sender's call: it is queued like a message to the
    chare, also when every input was already there. Post the next round from ``then``
    (while a round is pending, a ``post()`` raises :class:`~shoal.ChannelError`, as does
    a ``recv()`` on one of the set's channels). A message that does not fit its buffer
    ends the job with a :class:`~shoal.ChannelError` naming the set. ``post`` is an
    attribute, not a method: the runtime's compiled post when it has one.
    """

    __slots__ = ("chare", "channels", "buffers", "remaining", "item", "post", "_rt")
    post: Callable[[], None]

    def __init__(self, channels: Sequence[Channel], into: Sequence[np.ndarray], then: Callable[[], Any]):
        rt = current("shoal.ReceiveSet()")
        channels, into = tuple(channels), tuple(into)
        if not all(isinstance(ch, Channel) for ch in channels):
            raise TypeError("shoal.ReceiveSet(channels, into, then): channels must be shoal.Channel objects")
        if len(into) != len(channels):
            raise ValueError(f"shoal.ReceiveSet: {len(channels)} channels but {len(into)} buffers; give one buffer per channel")
        if len({id(ch) for ch in channels}) != len(channels):
            raise ValueError("shoal.ReceiveSet: a channel appears twice; one receive per channel and round")
        chare = getattr(then, "__self__", None)
        if chare is None or any(ch.chare is not chare for ch in channels):
            raise ValueError("shoal.ReceiveSet: then must be an entry method of the chare that owns every channel, "
                             "given bound (then=self.method)")
        for k, buf in enumerate(into):
            if not isinstance(buf, ndarray()) or not buf.flags.c_contiguous or not buf.flags.writeable:
                check_buffer(buf, f"shoal.ReceiveSet: buffer {k} (into[{k}])", device=True)
        table = entry_table(type(chare))
        name = getattr(then, "__name__", "")
        if table.ids.get(name) is None or table.funcs[table.ids[name]] is not then.__func__:  # type: ignore[attr-defined]
            raise ValueError(f"shoal.ReceiveSet: then={name or then!r} is not an entry method of "
                             f"{type(chare).__qualname__} (entry methods are its public methods)")
        self.chare, self.channels, self.buffers, self._rt = chare, channels, into, rt
        self.remaining = 0  # receives of the current round still to land
        coll = chare.proxy._info.id
        #: the queued call of ``then``, as Runtime._deliver_direct runs it
        self.item = (None, (coll, chare.index, table.ids[name], ()))
        self.post = rt.set_post(self, ReceiveSet._post) if rt.set_post is not None else self._post

    def _post(self) -> None:
        """Post one round of receives (the Python path of ``post``)."""
        if self.remaining:
            raise ChannelError(f"{self!r}: post() while {self.remaining} receive(s) of the last round are pending; "
                               f"post the next round from then(), once this one has landed")
        for ch in self.channels:
            if ch.waiting is not None:
                raise ChannelError(f"{ch!r} already has a receive pending; a channel of a ReceiveSet takes no other")
        remaining = 0
        for ch, buf in zip(self.channels, self.buffers):
            if ch.inbox:  # it came early: take it now
                try:
                    message = ch.inbox.popleft()
                    if type(message) is ndarray():
                        _fill(buf, message, ch, False)
                    else:
                        with posting(self._rt, buf):  # a device array in it goes straight into buf
                            _fill(buf, message_value(message), ch, False)
                except (ChannelError, GPUError) as exc:
                    raise ChannelError(f"a receive of {self!r}: {exc}") from None
            else:
                ch.waiting, ch.into, ch.landed = self, buf, False
                remaining += 1
        self.remaining = remaining
        if not remaining:
            self._fire()

    # -- called by the runtime ---------------------------------------------------
    def _resolve(self, value: Any) -> None:
        """One receive landed (Channel.arrive); a receive that failed ends the job."""
        if isinstance(value, Failure):
            self.remaining = 0
            self._rt.fail(value.exc, f"a receive of {self!r}")
            return
        self.remaining -= 1
        if not self.remaining:
            self._fire()

    def _fire(self) -> None:
        rt: "Runtime" = self._rt
        rt.local.append(self.item)
        if self.item[1][0] != SYSTEM_ID:  # the runtime's own messages are not counted
            rt.counts.sent += 1

    def __reduce__(self) -> tuple:
        """A receive set travels only with its element (migration.py), which re-binds it."""
        from . import channels

        if not channels._moving:
            raise TypeError(f"{self!r} cannot be sent; each chare makes its own shoal.ReceiveSet")
        return _restore, (self.channels, self.buffers, self.item[1][2])

    def bind(self, chare: Any) -> None:
        """Belong to ``chare`` (an element that just moved here with this set)."""
        self.chare = chare
        self.item = (None, (chare.proxy._info.id, chare.index, self.item[1][2], ()))

    def __repr__(self) -> str:
        then = entry_table(type(self.chare)).names[self.item[1][2]]
        return f"<ReceiveSet of {self.chare!r}: {len(self.channels)} channels, then {then}()>"


#: receive sets rebuilt while a moving element is unpickled; migration.py binds them to it
RESTORED: list[ReceiveSet] = []


def _restore(channels: tuple, buffers: tuple, entry: int) -> ReceiveSet:
    rt = current("a receive set arriving with its element")
    s = ReceiveSet.__new__(ReceiveSet)
    s.chare, s.channels, s.buffers, s._rt, s.remaining = None, channels, buffers, rt, 0
    s.item = (None, (0, (), entry, ()))
    s.post = rt.set_post(s, ReceiveSet._post) if rt.set_post is not None else s._post
    RESTORED.append(s)
    return s

