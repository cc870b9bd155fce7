"""``shoal serve``: PE 0 of a job serves frontends over TCP (docs/server.md).

Two threads on PE 0. An asyncio thread owns the sockets: it authenticates each
connection, reads frames into buffers of their exact size, writes replies in chunks
as the socket drains, and stops reading from a client whose requests pile up
(back-pressure). The PE's own thread runs the runtime and, between messages, the
requests the asyncio thread hands it (:mod:`.sessions`). Nothing from an
unauthenticated peer is parsed beyond its fixed-size greeting.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import signal
import socket
import ssl
import sys
import threading
import time
from pathlib import Path
from typing import Any

from .options import ServerOptions
from .protocol import (
    DENIED, GREETING, HEADER, MAGIC, OK, Kind, ProtocolError, encode, frame, mismatch, new_token, runtime_dir,
    token_matches, tune, versions, write_connection_file,
)

__all__ = ["Server", "serve"]

#: at most this many connections may be waiting to authenticate
_MAX_UNAUTHENTICATED = 64
#: characters of the token the start-up line shows (the whole token is in the connection file)
_TOKEN_SHOWN = 8
#: replies go to the socket this many bytes at a time, as it drains (asyncio moves its
#: whole unsent buffer after each send on Python 3.11: keep that buffer small)
_CHUNK = 256 << 10


class _Peer(asyncio.Protocol):
    """One client connection, in the asyncio thread: each frame part is read into a
    buffer of its exact size."""

    def __init__(self, server: "Server"):
        self.server = server
        self.transport: Any = None
        self.authed = self.greeted = self.closed = False
        self.buf = bytearray(GREETING)
        self.view = memoryview(self.buf)
        self.pos = 0
        self.in_header = True
        self.kind = self.rid = 0
        self.timer: asyncio.TimerHandle | None = None
        self.out: collections.deque = collections.deque()
        self.write_paused = self.read_paused = False
        self.queued = 0
        self.name = "?"
        self.told = False  # the server logged why this connection ends

    # -- reading ------------------------------------------------------------------
    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.name = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            tune(sock)
        server = self.server
        server.connections.add(self)
        if server.unauthenticated >= _MAX_UNAUTHENTICATED:
            self._closing(f"refused the connection from {self.name}: {_MAX_UNAUTHENTICATED} connections are "
                          "already waiting to authenticate")
            transport.abort()
            return
        server.unauthenticated += 1
        self._arm(server.options.auth_timeout, "sent no valid greeting")
        transport.set_write_buffer_limits(high=2 * _CHUNK)

    def landed(self, nbytes: int) -> None:
        """``nbytes`` more of the current buffer arrived."""
        self.pos += nbytes
        if self.pos < len(self.buf):
            if self.authed and self.timer is None:  # a frame has started: it must go on arriving
                self._arm(self.server.options.stall_timeout, "stalled in the middle of a frame")
            return
        try:
            self._complete()
        except ProtocolError as exc:
            self._refuse(self.rid, str(exc))
        except Exception as exc:  # noqa: BLE001 - a bug here must not take the server down
            self._refuse(self.rid, f"internal error: {type(exc).__name__}: {exc}")

    def data_received(self, data: bytes) -> None:
        """Bytes from a transport that hands them over (TLS): copied into the buffers."""
        view = memoryview(data)
        while view.nbytes and not self.closed:
            n = min(view.nbytes, len(self.buf) - self.pos)
            self.view[self.pos:self.pos + n] = view[:n]
            view = view[n:]
            self.landed(n)

    def _complete(self) -> None:
        if not self.authed:
            self._authenticate()
            return
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.in_header:
            kind, rid, n = HEADER.unpack(self.buf)
            self.kind, self.rid = kind, rid
            if kind not in Kind.CLIENT:
                raise ProtocolError(f"unknown frame kind {kind}")
            if n > self.server.options.max_message:
                raise ProtocolError(f"a frame of {n} bytes exceeds this server's limit of "
                                    f"{self.server.options.max_message} bytes (shoal serve --max-message)")
            if n:
                self._expect(bytearray(n), header=False)
                return
            payload = bytearray()
        else:
            payload = self.buf
        self._expect(bytearray(HEADER.size), header=True)
        self._deliver(self.kind, self.rid, payload)

    def _authenticate(self) -> None:
        server = self.server
        server.unauthenticated -= 1
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        greeting = bytes(self.buf)
        shoal_client = greeting[:len(MAGIC)] == MAGIC
        if not token_matches(greeting[len(MAGIC):], server.token) or not shoal_client:
            server.refused += 1
            self._closing(f"refused the connection from {self.name}: " + (
                "wrong token" if shoal_client else "not a shoal client (its first bytes are not shoal's greeting)"))
            self.transport.write(DENIED)
            self.transport.close()
            self.closed = True
            return
        self.authed = True
        self.transport.write(OK)
        self._expect(bytearray(HEADER.size), header=True)

    def _expect(self, buf: bytearray, header: bool) -> None:
        self.buf, self.view, self.pos, self.in_header = buf, memoryview(buf), 0, header

    def _deliver(self, kind: int, rid: int, payload: bytearray) -> None:
        server = self.server
        if not self.greeted:
            if kind != Kind.HELLO:
                raise ProtocolError("the first frame after the greeting must be HELLO")
            try:
                theirs = json.loads(bytes(payload))
                assert isinstance(theirs, dict)
            except (ValueError, AssertionError):
                raise ProtocolError("HELLO is not a JSON object") from None
            why = mismatch(versions(), theirs, "server", "client")
            if why:
                self._refuse(rid, why)
                return
            self.greeted = True
            hello = {**versions(), "pes": server.pes, "session": id(self)}
            self.send(frame(Kind.HELLO, rid, [json.dumps(hello).encode()]))
            server.post(("open", self))
            return
        if kind == Kind.HELLO:
            raise ProtocolError("HELLO was sent twice")
        if kind == Kind.CANCEL:  # not queued: it must overtake what it cancels
            server.post(("cancel", self, rid))
            return
        if kind == Kind.INFO:  # answered here, at once: PE 0 may be computing for a long time
            self.send(frame(Kind.RESULT, rid, encode(server.status(self))))
            return
        self.queued += 1
        if self.queued >= server.options.max_queued and not self.read_paused:
            self.read_paused = True
            self.transport.pause_reading()
        server.post(("request", self, kind, rid, payload))

    def request_done(self) -> None:
        """PE 0 finished one of this client's requests (in the asyncio thread)."""
        self.queued -= 1
        if self.read_paused and self.queued <= self.server.options.max_queued // 2 and not self.closed:
            self.read_paused = False
            self.transport.resume_reading()

    def _arm(self, seconds: float, why: str) -> None:
        self.timer = self.server.loop.call_later(seconds, self._expire, why)

    def _expire(self, why: str) -> None:
        self.timer = None
        if not self.closed:
            self._closing(f"closing the connection from {self.name}: it {why}")
            self.transport.abort()

    def _refuse(self, rid: int, why: str) -> None:
        """A protocol error: say why (if authenticated) and close."""
        if self.authed:
            self.send(frame(Kind.ERROR, rid, encode((None, "ProtocolError", why, ""))))
        self._closing(f"closing the connection from {self.name}: {why}")
        self.transport.close()
        self.closed = True

    def _closing(self, why: str) -> None:
        """Log why the server ends this connection (one line)."""
        self.told = True
        self.server.log(why)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.authed and not self.closed:
            self.server.unauthenticated -= 1
        if self.authed and not self.told and not self.server.stopping:  # the client left, or died
            unfinished = f" with {self.queued} request{'s' if self.queued != 1 else ''} unfinished" if self.queued else ""
            self.server.log(f"the client at {self.name} disconnected{unfinished}" + (f": {exc}" if exc else ""))
        self.closed = True
        self.server.connections.discard(self)
        if self.timer is not None:
            self.timer.cancel()
        self.out.clear()
        if self.greeted:
            self.server.post(("closed", self))

    # -- writing -------------------------------------------------------------------
    def send(self, parts: list) -> None:
        if self.closed:
            return
        self.out.extend(memoryview(p).cast("B") for p in parts)
        self._pump()

    def _pump(self) -> None:
        out, transport = self.out, self.transport
        while out and not self.write_paused and not self.closed:
            part = out[0]
            if part.nbytes <= _CHUNK:
                out.popleft()
                transport.write(part)
            else:
                transport.write(part[:_CHUNK])
                out[0] = part[_CHUNK:]

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        self._pump()


class _BufferedPeer(_Peer, asyncio.BufferedProtocol):
    """A plain TCP connection: the kernel writes straight into the buffer each frame part
    needs. (TLS connections take :meth:`_Peer.data_received`, one copy: asyncio's buffered
    reads over TLS on Python 3.11 can take a read of 0 bytes for the peer's close.)"""

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.view[self.pos:]

    def buffer_updated(self, nbytes: int) -> None:
        self.landed(nbytes)


class Server:
    """The server on PE 0: sockets in an asyncio thread, requests run here."""

    def __init__(self, options: ServerOptions, pes: int):
        self.options = options
        self.pes = pes
        self.token = new_token()
        self.inbox: collections.deque = collections.deque()
        self.wakeup = threading.Event()  # set when an event arrives: PE 0's idle nap ends at once
        self.stopping = ""
        self.unauthenticated = self.refused = 0
        self.loop = asyncio.new_event_loop()
        self.sessions: dict[_Peer, Any] = {}
        self.connections: set[_Peer] = set()  # every open connection (the asyncio thread's)
        self.router: Any = None  # the OutputRouter while serving
        self.transport: Any = None  # PE 0's, while serving
        self.rt: Any = None  # PE 0's runtime, while serving
        self.last_client = time.monotonic()
        context = None
        if options.tls_cert:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(options.tls_cert, options.tls_key)
        try:
            self.listener = self.loop.run_until_complete(
                self.loop.create_server(lambda: (_Peer if context else _BufferedPeer)(self), options.host,
                                        options.port, ssl=context,
                                        reuse_address=True, family=socket.AF_INET6 if ":" in options.host
                                        else socket.AF_INET))
        except OSError as exc:
            raise SystemExit(f"shoal serve: cannot listen on {options.host}:{options.port}: {exc.strerror or exc}")
        self.port = self.listener.sockets[0].getsockname()[1]
        self.thread = threading.Thread(target=self.loop.run_forever, name="shoal-serve-io", daemon=True)
        self.connection_file = Path(options.connection_file or runtime_dir() / f"server-{os.getpid()}.json")

    def info(self) -> dict:
        """What the connection file holds."""
        return {"host": self.options.host, "port": self.port, "token": self.token, **versions(),
                "pes": self.pes, "pid": os.getpid(), "tls_cert": os.path.abspath(self.options.tls_cert)
                if self.options.tls_cert else None}

    def status(self, peer: _Peer) -> dict:
        """``conn.info()``, read in the asyncio thread while PE 0 may be computing: each
        count is one read of a container's size, which the GIL keeps whole."""
        rt, sessions = self.rt, self.sessions
        return {"pes": self.pes, "sessions": len(sessions) + (peer not in sessions),  # its own: PE 0 may not have opened it yet
                "collections": len(rt.colls) if rt else 0, "requests": peer.queued}

    def start(self) -> None:
        self.thread.start()
        tls = ", TLS" if self.options.tls_cert else ""
        print(f"shoal serve: {self.pes} PE{'s' if self.pes > 1 else ''} serving on {self.options.host}:{self.port}"
              f"{tls} (shoal {versions()['shoal']}, token {self.token[:_TOKEN_SHOWN]}…); connection file "
              f"{self.connection_file}", flush=True)
        if self.options.host not in ("127.0.0.1", "localhost", "::1"):
            print(f"shoal serve: warning: listening on {self.options.host}, not only this machine: anyone who "
                  "can reach it and has the token can run code as you"
                  + ("" if self.options.tls_cert else "; the token and data cross the network unencrypted "
                     "(use --tls-cert/--tls-key)"), file=sys.stderr, flush=True)
        write_connection_file(self.connection_file, self.info())  # last: its existence says "ready"

    def post(self, event: tuple) -> None:
        """Hand an event to PE 0's thread (from the asyncio thread)."""
        self.inbox.append(event)
        self.wakeup.set()

    def _nap(self, seconds: float) -> None:
        """PE 0's idle sleep while serving: ends early when a client's request arrives,
        and is skipped (the GIL only let go) while a large message moves: MPI moves it
        only while this PE polls."""
        if self.transport.in_flight():
            time.sleep(0)
        elif self.wakeup.wait(seconds):
            self.wakeup.clear()

    def reply(self, peer: _Peer, kind: int, rid: int, parts: list) -> None:
        """Send a frame to ``peer`` (from PE 0's thread)."""
        self.loop.call_soon_threadsafe(peer.send, frame(kind, rid, parts))

    def request_done(self, peer: _Peer) -> None:
        self.loop.call_soon_threadsafe(peer.request_done)

    def log(self, text: str) -> None:
        """One line to the operator's stderr, written whole (two threads log)."""
        stream = sys.__stderr__
        if stream is not None:
            stream.write(f"shoal serve: {text}\n")
            stream.flush()

    def entry_failed(self, pe: int, where: str, text: str) -> None:
        """An entry method failed with nobody waiting: tell every client; serve on."""
        message = f"an entry method failed on PE {pe} (the server goes on): {text}"
        self.log(message.rstrip())
        for session in self.sessions.values():
            session.output(2, f"shoal serve: {message}")

    def stop(self, why: str) -> None:
        if not self.stopping:
            self.stopping = why

    def serve_forever(self) -> None:
        """Run requests until stopped (``--stop``, a signal, the idle timeout)."""
        from .._runtime.context import current
        from .sessions import OutputRouter, Session, note_creation

        rt = self.rt = current("shoal serve")
        engine = rt.engine
        self.transport = rt.transport
        router = OutputRouter(self)
        router.install()
        has_work = lambda: bool(self.inbox) or bool(self.stopping)  # noqa: E731
        # PE 0 naps as soon as it is idle, and a request ends the nap: a spinning PE 0
        # would hold the GIL and a core that the socket thread needs (a round trip went
        # from 1.5 ms to 0.3 ms on the 2-core test machine)
        sleep, engine.sleep = engine.sleep, self._nap
        yielding, engine.yield_when_idle = engine.yield_when_idle, True
        rt.creation_observer = note_creation
        try:
            while not self.stopping:
                engine.wait_main_until(has_work, engine.clock() + 0.5, lambda: None)
                inbox = self.inbox
                while inbox:
                    event = inbox.popleft()
                    what, peer = event[0], event[1]
                    if what == "request":
                        session = self.sessions.get(peer)
                        if session is None:
                            self.request_done(peer)
                        else:
                            session.enqueue(event[2], event[3], event[4])
                    elif what == "cancel":
                        session = self.sessions.get(peer)
                        if session is not None:
                            session.cancel(event[2])
                    elif what == "open":
                        self.sessions[peer] = Session(self, peer, rt)
                    elif what == "closed":
                        session = self.sessions.pop(peer, None)
                        if session is not None:
                            session.close()
                        self.last_client = time.monotonic()
                self._check_idle()
        finally:
            engine.sleep, engine.yield_when_idle = sleep, yielding
            router.uninstall()
            self.shutdown()

    def _check_idle(self) -> None:
        o = self.options
        if o.parent_pid and not _alive(o.parent_pid):
            self.stop(f"its frontend (process {o.parent_pid}) ended")
        elif o.idle_timeout and not self.sessions and time.monotonic() - self.last_client > o.idle_timeout:
            self.stop(f"no client for {o.idle_timeout:g} s (--idle-timeout)")

    def shutdown(self) -> None:
        """Close every connection and the listener; remove the connection file."""
        for session in list(self.sessions.values()):
            session.close()
        self.sessions.clear()

        async def close_all() -> None:
            self.listener.close()
            for peer in list(self.connections):
                peer.transport.close()

        if self.thread.is_alive():
            asyncio.run_coroutine_threadsafe(close_all(), self.loop).result(5)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(5)
        try:
            self.connection_file.unlink()
        except OSError:
            pass
        self.log(f"stopped: {self.stopping}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def serve(options: ServerOptions) -> None:
    """The main program of a ``shoal serve`` job on PE 0: serve until stopped."""
    import shoal

    from .sessions import EntryErrors

    sys.setswitchinterval(2e-4)  # the socket thread gets the GIL soon after a request arrives
    server = Server(options, shoal.num_pes())
    EntryErrors.server = server
    shoal.Group(EntryErrors)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda s, f: server.stop(f"signal {signal.Signals(s).name}"))
    server.start()
    server.serve_forever()


