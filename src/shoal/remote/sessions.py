"""What a connected client owns on the server, and how its requests run on PE 0.

Each client is a :class:`Session`: its requests run in order, in a thread of their
own (a greenlet, as :func:`shoal.threaded` methods run), so code that waits on a
future suspends only its own session while PE 0 goes on serving messages and other
clients. A session keeps its grids (the stencil DSL's tiles) and the namespace of
its ``%%shoal`` cells; when the client disconnects, what it created is freed.
"""

from __future__ import annotations

import ast
import inspect
import linecache
import sys
import traceback
from collections import deque
from typing import TYPE_CHECKING, Any, Callable

import greenlet

from .._runtime.chare import Chare
from .._runtime.context import current
from .._runtime.futures import Future
from .._runtime.threads import Thread
from .protocol import Kind, encode, decode

if TYPE_CHECKING:
    from .server import Server, _Peer

__all__ = ["Session", "OutputRouter", "EntryErrors"]

_HERE = __file__.rsplit("/", 1)[0]


class Session:
    """One client's state and request queue on PE 0."""

    #: a thread's element: what load accounting and held-call checks read (threads.py)
    _shoal_pending = False

    def __init__(self, server: "Server", peer: "_Peer", rt: Any):
        self.server, self.peer, self.rt = server, peer, rt
        self.id = len(server.sessions) + 1
        self.index = f"client {peer.name}"
        self._shoal_load = [0.0]
        self.queue: deque = deque()
        self.thread: Thread | None = None
        self.rid = 0  # the request running now (its output goes back tagged with it)
        self.closed = False
        self.inflight = 0  # replies still to come from the backend (stencil batches, gathers)
        self.grids: dict[int, Any] = {}
        self.collections: list = []  # what its code created on PE 0 (CollectionInfo), destroyed at the end
        self.namespace: dict[str, Any] = {"__name__": f"__shoal_client_{id(self):x}__", "__builtins__": __builtins__}
        self.cells = 0
        self._local: Any = None

    # -- the queue --------------------------------------------------------------------
    def enqueue(self, kind: int, rid: int, payload: bytearray) -> None:
        self.queue.append((kind, rid, payload))
        if self.thread is None:
            th = self.thread = Thread(self.rt, self, Session._drain, (), {})
            th.shoal_session = self  # type: ignore[attr-defined]  # where its output goes
            th.resume()

    def _drain(self) -> None:
        while self.queue and not self.closed:
            kind, rid, payload = self.queue.popleft()
            self.rid = rid
            try:
                self._handle(kind, rid, payload)
            finally:
                self.server.request_done(self.peer)
        for _ in self.queue:
            self.server.request_done(self.peer)
        self.queue.clear()
        self.thread = None
        if self.closed:
            self._free()

    def _handle(self, kind: int, rid: int, payload: bytearray) -> None:
        try:
            try:
                op, args = decode(payload)
            except ImportError as exc:
                raise type(exc)(f"{exc}: the request names code the server cannot import; install that package "
                                "where the server runs, or define the code in the notebook or a module beside "
                                "it (those travel by value)") from None
            handler = _OPS.get(op)
            if handler is None:
                raise ValueError(f"unknown request {op!r}")
            value = handler(self, *args)
        except greenlet.GreenletExit:
            raise
        except BaseException as exc:  # noqa: BLE001 - the client's code failed: the client hears why
            self.flush_output()
            self.error(rid, exc)
            return
        self.flush_output()
        if isinstance(value, _Later):
            self.inflight += 1
            value.fut.add_done_callback(lambda fut: self._later(kind, rid, value, fut))
        elif kind == Kind.CALL:
            self.result(rid, value)

    def _later(self, kind: int, rid: int, later: "_Later", fut: Future) -> None:
        self.inflight -= 1
        try:
            value = later.finish(fut.result())
        except BaseException as exc:  # noqa: BLE001
            self.error(rid, exc)
        else:
            if kind == Kind.CALL:
                self.result(rid, value)
        if self.closed and self.thread is None and not self.inflight:
            self._free()

    def cancel(self, rid: int) -> None:
        """The client interrupted request ``rid``: drop it if it has not started; if it
        waits on a future, raise KeyboardInterrupt there. Code that computes runs on."""
        for item in self.queue:
            if item[1] == rid:
                self.queue.remove(item)
                self.server.request_done(self.peer)
                self.error(rid, KeyboardInterrupt("cancelled by the client before it started"))
                return
        th = self.thread
        if self.rid == rid and th is not None and th.waiting is not None:
            th.interrupt(KeyboardInterrupt("interrupted by the client"))

    # -- replies ------------------------------------------------------------------------
    def result(self, rid: int, value: Any) -> None:
        if self.closed:
            return
        try:
            parts = encode(value, by_value=True)
        except Exception as exc:  # noqa: BLE001
            self.error(rid, TypeError(f"the value returned ({type(value).__name__}) cannot be sent to the "
                                      f"client: {exc}"))
            return
        self.server.reply(self.peer, Kind.RESULT, rid, parts)

    def error(self, rid: int, exc: BaseException) -> None:
        if self.closed:
            return
        frames = [(f.filename, f.lineno, f.name, f.line) for f in traceback.extract_tb(_trimmed(exc.__traceback__))]
        text = (frames, "".join(traceback.format_exception_only(type(exc), exc)))
        try:
            parts = encode((exc, type(exc).__qualname__, str(exc), text), by_value=True)
            decode(bytearray(b"".join(bytes(memoryview(p)) for p in parts)))  # the client can rebuild it
        except Exception:  # noqa: BLE001 - it does not travel: its type, text and traceback do
            parts = encode((None, type(exc).__qualname__, str(exc), text))
        self.server.reply(self.peer, Kind.ERROR, rid, parts)

    def output(self, stream: int, text: str) -> None:
        if not self.closed:
            self.server.reply(self.peer, Kind.OUTPUT, self.rid, [bytes((stream,)) + text.encode("utf-8", "replace")])

    def flush_output(self) -> None:
        router = self.server.router
        if router is not None:
            router.flush(self)

    # -- the end ------------------------------------------------------------------------
    def close(self) -> None:
        """The client went away: drop its queue; free what it created once nothing runs."""
        self.closed = True
        if self.thread is None:
            for _ in self.queue:
                self.server.request_done(self.peer)
            self.queue.clear()
            if not self.inflight:
                self._free()

    def _free(self) -> None:
        local = self._local
        for grid in self.grids.values():
            try:
                local.destroy(grid)
            except Exception as exc:  # noqa: BLE001 - keep serving the others
                self.server.log(f"freeing a grid of {self.index} failed: {exc}")
        self.grids.clear()
        for info in self.collections:
            self.rt.lifecycle.destroy(info)
        self.collections.clear()
        self.namespace.clear()

    # -- requests -------------------------------------------------------------------------
    def run(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        value = fn(*args, **kwargs)
        return drive(value) if inspect.iscoroutine(value) else value

    def exec_cell(self, source: str) -> Any:
        """Run a cell's code in this session's namespace; the value of its last expression."""
        self.cells += 1
        filename = f"<shoal cell {self.cells}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        tree = ast.parse(source, filename, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body[-1].value)
            del tree.body[-1]
        flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        r = eval(compile(tree, filename, "exec", flags=flags), self.namespace)
        if inspect.iscoroutine(r):
            drive(r)
        if last is None:
            return None
        value = eval(compile(last, filename, "eval", flags=flags), self.namespace)
        return drive(value) if inspect.iscoroutine(value) else value

    def local(self) -> Any:
        if self._local is None:
            from ..stencil.interface import LocalInterface

            self._local = LocalInterface()
        return self._local

    def create(self, gid: int, spec: Any) -> str:
        local = self.local()
        self.grids[gid] = local.create(spec)
        return local.describe(self.grids[gid])

    def submit(self, gid: int, batch: Any) -> "_Later":
        p = self.local().submit(self._grid(gid), batch)
        return _Later(p._fut, p._finish)

    def gather(self, gid: int, field: int, seq: int) -> "_Later":
        p = self.local().gather(self._grid(gid), field, seq)
        return _Later(p._fut, p._finish)

    def scatter(self, gid: int, field: int, array: Any, seq: int) -> None:
        self.local().scatter(self._grid(gid), field, array, seq)

    def reduce(self, gid: int, rid: int, finish: str, seq: int) -> "_Later":
        p = self.local().reduce(self._grid(gid), rid, finish, seq)
        return _Later(p._fut, p._finish)

    def destroy(self, gid: int) -> None:
        grid = self.grids.pop(gid, None)
        if grid is not None:
            self.local().destroy(grid)

    def _grid(self, gid: int) -> Any:
        try:
            return self.grids[gid]
        except KeyError:
            raise KeyError(f"grid {gid} does not exist on the server (its creation failed, or it was closed)") from None

    def stop(self, why: str) -> None:
        """Stop the server: ``why`` is who asked (the client says), with where it connects from."""
        self.server.stop(f"{why} (the client at {self.peer.name})")


class EntryErrors(Chare):
    """A Group of a server job: an entry method's error that no caller waits for goes to
    PE 0, which tells the clients, and the job goes on (elsewhere such an error ends it)."""

    server: "Server | None" = None  # PE 0's server

    def __init__(self) -> None:
        current("shoal serve").entry_error_sink = self._sink

    def _sink(self, exc: BaseException, where: str) -> None:
        text = "".join(traceback.format_exception_only(type(exc), exc))
        self.collection[0].report(self.index, where, text)

    def report(self, pe: int, where: str, text: str) -> None:
        server = EntryErrors.server
        if server is not None:
            server.entry_failed(pe, where, text)


class _Later:
    """A reply that comes when a runtime future resolves."""

    __slots__ = ("fut", "finish")

    def __init__(self, fut: Future, finish: Callable[[Any], Any]):
        self.fut, self.finish = fut, finish


_OPS: dict[str, Callable[..., Any]] = {
    "run": Session.run, "exec": Session.exec_cell, "create": Session.create, "submit": Session.submit,
    "gather": Session.gather, "scatter": Session.scatter, "reduce": Session.reduce, "destroy": Session.destroy,
    "stop": Session.stop,
}


def drive(coro: Any) -> Any:
    """Run a coroutine to its end in the calling session thread: each future it awaits
    suspends the thread, not the PE."""
    value: Any = None
    error: BaseException | None = None
    th = greenlet.getcurrent()
    while True:
        try:
            awaited = coro.send(value) if error is None else coro.throw(error)
        except StopIteration as stop:
            return stop.value
        value = error = None
        if not isinstance(awaited, Future):
            error = TypeError(f"code run on a shoal server may await shoal futures only, not {awaited!r}")
            continue
        try:
            value = th.block(awaited) if not awaited.done() else awaited.result()  # type: ignore[union-attr]
        except BaseException as exc:  # noqa: BLE001 - goes back into the coroutine
            error = exc


def _trimmed(tb: Any) -> Any:
    """The traceback without this package's own frames (the client's code is what matters)."""
    frames = []
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(_HERE):
            frames.append(tb)
        tb = tb.tb_next
    for a, b in zip(frames, frames[1:]):
        a.tb_next = b
    if frames:
        frames[-1].tb_next = None
        return frames[0]
    return None


def note_creation(info: Any) -> None:
    """A collection was created on PE 0: the client whose code made it owns it."""
    session = getattr(greenlet.getcurrent(), "shoal_session", None)
    if session is not None:
        session.collections.append(info)


class OutputRouter:
    """PE 0's ``sys.stdout``/``sys.stderr`` while serving: text printed by a session's code
    goes back to its client, line by line as it is printed; the rest to the terminal."""

    def __init__(self, server: "Server"):
        self.server = server
        self.saved: tuple = ()
        self.pending: dict[Session, list] = {}

    def install(self) -> None:
        self.saved = (sys.stdout, sys.stderr)
        sys.stdout, sys.stderr = _Stream(self, 1, sys.stdout), _Stream(self, 2, sys.stderr)  # type: ignore[assignment]
        self.server.router = self

    def uninstall(self) -> None:
        if self.saved:
            sys.stdout, sys.stderr = self.saved
        self.server.router = None

    def write(self, stream: int, text: str, fallback: Any) -> int:
        session = getattr(greenlet.getcurrent(), "shoal_session", None)
        if session is None:
            return fallback.write(text)
        buf = self.pending.setdefault(session, [])
        buf.append((stream, text))
        if "\n" in text:
            self.flush(session)
        return len(text)

    def flush(self, session: Session) -> None:
        buf = self.pending.pop(session, None)
        if not buf:
            return
        stream = buf[0][0]
        chunk: list[str] = []
        for s, text in buf:
            if s != stream:
                session.output(stream, "".join(chunk))
                stream, chunk = s, []
            chunk.append(text)
        session.output(stream, "".join(chunk))


class _Stream:
    """A text stream that hands writes to the router."""

    def __init__(self, router: OutputRouter, number: int, fallback: Any):
        self.router, self.number, self.fallback = router, number, fallback

    def write(self, text: str) -> int:
        return self.router.write(self.number, text, self.fallback)

    def flush(self) -> None:
        self.fallback.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.fallback, name)
