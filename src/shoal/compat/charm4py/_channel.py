"""Charm4py's Channel on shoal's: ``send(*values)``, blocking ``recv()``, ``ready()``."""

from __future__ import annotations

from typing import Any, Callable

import shoal
from ... import Future
from ._futures import refuse_wait

__all__ = ["Channel"]


class Channel:
    """A channel between two chares; ``recv()`` blocks a threaded method (or main)."""

    def __init__(self, chare: Any, remote: Any, local: Any = None):
        self._ch = shoal.Channel(chare, remote)
        self.remote = remote
        self._next: Future | None = None  # a receive started by waitReady()

    def send(self, *msg: Any) -> None:
        self._ch.send(*msg)

    def recv(self, *post_buffers: Any) -> Any:
        fut, self._next = self._next, None
        if fut is None:
            fut = self._ch.recv(into=post_buffers[0] if len(post_buffers) == 1 else None)
        elif post_buffers and fut.done():
            value = fut.result()
            post_buffers[0][...] = value
            return post_buffers[0]
        if fut.done():  # the message is here: no wait
            return fut.result()
        refuse_wait("Channel.recv()")
        return fut.get()

    def ready(self) -> bool:
        if self._next is not None:
            return self._next.done()
        return bool(self._ch.inbox)

    def waitReady(self, callback: Callable[[Any], None]) -> None:
        if self._next is None:
            self._next = self._ch.recv()
        self._next.add_done_callback(lambda _: callback(self))
