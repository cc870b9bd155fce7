"""The frontend's side of the link: :func:`connect` to a ``shoal serve`` backend.

A :class:`Connection` is a stencil :class:`~shoal.stencil.Interface` (pass it as
``interface=``) and runs whole programs: :meth:`Connection.run` sends a function (by
value, with cloudpickle) to run on the job's PE 0 and returns its value. Requests go
out at once and replies come back on a reader thread, so a frontend only waits when
it asks for a value (:class:`RemoteFuture`).
"""

from __future__ import annotations

import atexit
import itertools
import json
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..errors import RemoteError
from ..stencil.interface import GridSpec, Interface, Pending
from .protocol import (
    DENIED, HEADER, MAGIC, OK, TOKEN_CHARS, AuthenticationError, Kind, ProtocolError, ServerError,
    VersionMismatchError, decode, encode, frame, mismatch, newest_connection_file, read_connection_file, tune,
    versions,
)

__all__ = ["Connection", "RemoteFuture", "connect", "local"]


class RemoteTraceback(Exception):
    """The traceback of an error on the server, shown as the cause of the error re-raised here."""

    def __init__(self, text: str):
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return f"\n\"\"\"\n(on the server's PE 0)\n{self.text}\"\"\""


class RemoteFuture:
    """A reply the server will send: :meth:`get` waits for it (printing, meanwhile, what
    the request's code prints on the server)."""

    def __init__(self, what: str, cancel: Callable[[], None] | None = None):
        self.what = what
        self._cancel = cancel
        self._cond = threading.Condition()
        self._state = 0  # 0 pending, 1 value, 2 error
        self._value: Any = None
        self._outputs: deque = deque()

    def _set(self, state: int, value: Any) -> None:
        with self._cond:
            self._state, self._value = state, value
            self._cond.notify_all()

    def _output(self, stream: int, text: str) -> None:
        with self._cond:
            self._outputs.append((stream, text))
            self._cond.notify_all()

    def done(self) -> bool:
        """Whether the reply has arrived."""
        return self._state != 0

    def get(self, timeout: float | None = None) -> Any:
        """Wait for the reply (at most ``timeout`` seconds) and return its value, or raise
        the server's error, its remote traceback as the cause."""
        try:
            return self._get(timeout)
        except KeyboardInterrupt:  # Ctrl-C (a notebook's interrupt): the server stops waiting too
            if self._cancel is not None and not self._state:
                self._cancel()
            raise

    def _get(self, timeout: float | None) -> Any:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._cond:
                while not self._outputs and not self._state:
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        raise TimeoutError(f"{self.what}: no reply from the server within {timeout} s")
                    self._cond.wait(left)
                outputs, self._outputs = list(self._outputs), deque()
                state, value = self._state, self._value
            for stream, text in outputs:
                (sys.stdout if stream == 1 else sys.stderr).write(text)
            if state == 1 and not self._outputs:
                return value
            if state == 2 and not self._outputs:
                raise value

    result = get


class _Grid:
    """A grid on the server: its number there and where its tiles are."""

    __slots__ = ("gid", "description")

    def __init__(self, gid: int, description: str):
        self.gid, self.description = gid, description


class Connection(Interface):
    """A link to a ``shoal serve`` job: run programs there, or pass it as a stencil's
    ``interface=``. Close it (or leave a ``with`` block) to free what it created."""

    def __init__(self, sock: Any, address: str, hello: dict):
        self._sock = sock
        self.address = address
        #: the server's PE count and versions
        self.pes: int = hello["pes"]
        self.server_versions = {k: hello[k] for k in ("shoal", "python", "protocol")}
        self._ids = itertools.count(1)
        self._waiting: dict[int, RemoteFuture] = {}
        self._lock = threading.Lock()
        self._closed: str = ""
        self._deferred: BaseException | None = None  # an error of a request nobody waits on
        self._cancelled: set[int] = set()  # requests interrupted here: their replies are dropped
        self._grids = itertools.count(1)
        self._live: set[int] = set()  # the grids this client made there and has not destroyed
        self._process: subprocess.Popen | None = None
        self._reader = threading.Thread(target=self._read, name=f"shoal-client-{address}", daemon=True)
        self._reader.start()

    def __repr__(self) -> str:
        state = f"closed: {self._closed}" if self._closed else f"{self.pes} PEs"
        return f"<shoal.Connection to {self.address} ({state})>"

    # -- programs ------------------------------------------------------------------------
    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> RemoteFuture:
        """Start ``fn(*args, **kwargs)`` on the server's PE 0 (plain or ``async def``);
        a :class:`RemoteFuture` of its value."""
        _remember_code(getattr(fn, "__code__", None))
        return self._request("run", (fn, args, kwargs), what=f"run({getattr(fn, '__qualname__', fn)})")

    def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` on the server's PE 0 as a main program and return
        its value; what it prints appears here as it is printed."""
        return self.call(fn, *args, **kwargs).get()

    def exec(self, source: str) -> Any:
        """Run Python source on the server's PE 0 in this connection's own namespace (as
        ``%%shoal`` cells do); the value of its last line if that is an expression."""
        return self._request("exec", (source,), what="a cell").get()

    def info(self) -> dict:
        """The server's PEs (``pes``), clients (``sessions``) and collections on PE 0,
        this client's ``requests`` not finished there, and its ``grids``.

        The server's socket thread answers at once, even while PE 0 computes (another
        client's code, or this one's): the counts are the server's now, not after this
        client's earlier requests (``requests`` says how many are still to finish);
        ``grids`` counts what this client created and has not closed, in its own order."""
        status = self._request("", (), what="info", kind=Kind.INFO).get()
        return {**status, "grids": len(self._live)}

    def stop_server(self, why: str = "") -> None:
        """Stop the server (every client's connection ends); ``why`` goes into its log,
        with this client's address (default: this call, and this process)."""
        why = why or f"conn.stop_server() in process {os.getpid()} on {socket.gethostname()}"
        self._request("stop", (why,), what="stop").get()

    # -- the stencil DSL's interface ------------------------------------------------------
    def create(self, spec: GridSpec) -> _Grid:
        gid = next(self._grids)
        grid = _Grid(gid, self._request("create", (gid, spec), what="creating a grid").get())
        self._live.add(gid)
        return grid

    def submit(self, handle: _Grid, batch: Any) -> Pending:
        return Pending(self._request("submit", (handle.gid, batch), what="a batch of steps"))

    def gather(self, handle: _Grid, field: int, seq: int) -> Pending:
        return Pending(self._request("gather", (handle.gid, field, seq), what="to_numpy()"))

    def scatter(self, handle: _Grid, field: int, array: np.ndarray, seq: int) -> None:
        self._request("scatter", (handle.gid, field, array, seq), reply=False)

    def reduce(self, handle: _Grid, rid: int, finish: str, seq: int) -> Pending:
        return Pending(self._request("reduce", (handle.gid, rid, finish, seq), what="a reduction"))

    def destroy(self, handle: _Grid) -> None:
        self._live.discard(handle.gid)
        if not self._closed:
            self._request("destroy", (handle.gid,), reply=False)

    def describe(self, handle: _Grid) -> str:
        return f"{handle.description}, on the server at {self.address}"

    # -- the link -------------------------------------------------------------------------
    def _request(self, op: str, args: tuple, what: str = "", reply: bool = True, kind: int = 0) -> Any:
        """Send request ``op(*args)`` (a ``kind`` other than CALL/CAST: a frame of that kind
        with no payload); a :class:`RemoteFuture` of its reply."""
        if self._deferred is not None:
            error, self._deferred = self._deferred, None
            raise error
        if self._closed:
            raise ServerError(f"the connection to {self.address} is closed ({self._closed})")
        if kind:
            parts: list = []
        else:
            _by_value_user_modules()
            parts = encode((op, args), by_value=True)
            kind = Kind.CALL if reply else Kind.CAST
        rid = next(self._ids)
        fut = RemoteFuture(what or op, lambda: self._cancel(rid))
        if reply:
            self._waiting[rid] = fut
        try:
            with self._lock:
                for part in frame(kind, rid, parts):
                    self._sock.sendall(part)
        except OSError as exc:
            self._waiting.pop(rid, None)
            self._lost(f"sending failed: {exc}")
            raise ServerError(f"the connection to {self.address} is closed ({self._closed})") from None
        return fut

    def _cancel(self, rid: int) -> None:
        """Interrupt request ``rid`` on the server (its reply will be dropped here)."""
        self._cancelled.add(rid)
        self._waiting.pop(rid, None)
        try:
            with self._lock:
                self._sock.sendall(HEADER.pack(Kind.CANCEL, rid, 0))
        except OSError:
            pass

    def _read(self) -> None:
        sock = self._sock
        header = bytearray(HEADER.size)
        try:
            while True:
                _read_exactly(sock, header)
                kind, rid, n = HEADER.unpack(header)
                payload = bytearray(n)
                _read_exactly(sock, payload)
                if kind == Kind.OUTPUT:
                    stream, text = payload[0], payload[1:].decode("utf-8", "replace")
                    fut = self._waiting.get(rid)
                    if fut is not None:
                        fut._output(stream, text)
                    else:
                        (sys.stdout if stream == 1 else sys.stderr).write(text)
                    continue
                fut = self._waiting.pop(rid, None)
                if rid in self._cancelled:
                    self._cancelled.discard(rid)
                    continue
                if kind == Kind.RESULT:
                    try:
                        value = decode(payload)
                    except Exception as exc:  # noqa: BLE001
                        if fut is not None:
                            fut._set(2, ServerError(f"the server's reply cannot be read here: {exc}"))
                        continue
                    if fut is not None:
                        fut._set(1, value)
                elif kind == Kind.ERROR:
                    error = _rebuild(payload)
                    if fut is not None:
                        fut._set(2, error)
                    else:
                        self._deferred = error
                else:
                    raise ProtocolError(f"the server sent a frame of unknown kind {kind}")
        except (OSError, EOFError, ProtocolError) as exc:
            self._lost("the server closed it" if isinstance(exc, EOFError) else str(exc))

    def _lost(self, why: str) -> None:
        if not self._closed:
            self._closed = why
        waiting, self._waiting = self._waiting, {}
        for fut in waiting.values():
            fut._set(2, ServerError(f"the connection to {self.address} was lost before the reply ({why})"))

    def close(self) -> None:
        """End the connection: the server frees this client's grids and namespace. A
        server started by :func:`local` is stopped too."""
        if not self._closed:
            if self._process is not None:
                try:
                    self.stop_server(f"its frontend, process {os.getpid()}, closed the connection")
                except ServerError:
                    pass
            self._closed = "closed by this client"
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            # the reader sees the end before the socket closes: a thread blocked on a closed
            # socket's number would read the next connection that reuses it
            if self._reader is not threading.current_thread():
                self._reader.join(10)
            self._sock.close()
        if self._process is not None:
            try:
                self._process.wait(30)
            except subprocess.TimeoutExpired:
                self._process.kill()
            self._process = None

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


_seen_modules = 0


def _by_value_user_modules() -> None:
    """Send the functions and classes of the user's own modules by value, as those of
    ``__main__`` are: the server cannot import a module that lives beside a script or a
    notebook. Installed packages (and shoal) still travel by name."""
    global _seen_modules
    if len(sys.modules) == _seen_modules:
        return
    _seen_modules = len(sys.modules)
    import site

    import cloudpickle

    installed = tuple({os.path.realpath(p) + os.sep for p in (
        sys.prefix, sys.base_prefix, sys.exec_prefix, *site.getsitepackages(), site.getusersitepackages())})
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if (not path or name == "__main__" or "." in name or name.split(".")[0] == "shoal"
                or os.path.realpath(path).startswith(installed)):
            continue
        try:
            cloudpickle.register_pickle_by_value(module)
        except ValueError:
            pass


class _TLSLink:
    """A TLS connection that one thread may read while others write: the TLS state (an
    ``ssl.SSLObject`` over memory buffers) is touched under a lock, never while a thread
    waits on the socket (an ``SSLSocket`` read and written by two threads at once is not
    safe)."""

    def __init__(self, raw: socket.socket, context: ssl.SSLContext, host: str):
        self.raw = raw
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = context.wrap_bio(self.incoming, self.outgoing, server_hostname=host)
        self.lock = threading.Lock()  # the TLS state
        self.send_lock = threading.Lock()  # records leave in the order they were made
        while True:
            try:
                with self.lock:
                    self.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._flush()
                if not self._fill():
                    raise EOFError
        self._flush()

    def _flush(self) -> None:
        with self.send_lock:
            with self.lock:
                data = self.outgoing.read()
            if data:
                self.raw.sendall(data)

    def _fill(self) -> bool:
        data = self.raw.recv(1 << 16)
        if data:
            with self.lock:
                self.incoming.write(data)
        return bool(data)

    def sendall(self, data: Any) -> None:
        view = memoryview(data).cast("B")
        with self.send_lock:
            for i in range(0, max(view.nbytes, 1), 1 << 20):
                with self.lock:
                    self.tls.write(view[i:i + (1 << 20)])
                    out = self.outgoing.read()
                self.raw.sendall(out)

    def recv_into(self, view: memoryview) -> int:
        while True:
            try:
                with self.lock:
                    return int(self.tls.read(len(view), view))  # with a buffer: the count
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLZeroReturnError:
                return 0
            self._flush()  # a key update may want an answer
            if not self._fill():
                return 0

    def recv(self, n: int) -> bytes:
        buf = bytearray(n)
        got = self.recv_into(memoryview(buf))
        return bytes(buf[:got])

    def settimeout(self, seconds: float | None) -> None:
        self.raw.settimeout(seconds)

    def shutdown(self, how: int) -> None:
        self.raw.shutdown(how)

    def close(self) -> None:
        self.raw.close()


def _read_exactly(sock: Any, buf: bytearray) -> None:
    view, got = memoryview(buf), 0
    while got < len(buf):
        n = sock.recv_into(view[got:])
        if not n:
            raise EOFError
        got += n


def _rebuild(payload: bytearray) -> BaseException:
    """The server's error as an exception here, its traceback attached as the cause."""
    try:
        exc, name, message, text = decode(payload)
    except Exception as error:  # noqa: BLE001
        return ServerError(f"the server reported an error that cannot be read here: {error}")
    if name == "ProtocolError" and exc is None:
        return VersionMismatchError(message) if message.startswith("version mismatch") else ProtocolError(message)
    if not isinstance(exc, BaseException):
        exc = RemoteError(f"{name}: {message}")
    if text:
        exc.__cause__ = RemoteTraceback(_format_remote(*text) if isinstance(text, tuple) else text)
    return exc


def _format_remote(frames: list, tail: str) -> str:
    """The server's traceback, with the file and source line of code that travelled by
    value (cloudpickle names its file ``<dynamic-code>``) found again here."""
    import linecache
    import traceback

    lines = ["Traceback (most recent call last):\n"]
    for filename, lineno, name, line in frames:
        if filename == "<dynamic-code>":
            found = _source_file(name, lineno)
            if found:
                filename, line = found, linecache.getline(found, lineno).strip()
        lines.extend(traceback.format_list([traceback.FrameSummary(filename, lineno, name, line=line)]))
    return "".join(lines) + tail


#: code objects sent with run(), by name: where their tracebacks' lines are (bounded)
_sent_code: dict[str, list] = {}


def _remember_code(code: Any) -> None:
    if code is None or len(_sent_code) > 4096:
        return
    known = _sent_code.setdefault(code.co_name, [])
    if code not in known:
        known.append(code)
        for const in code.co_consts:
            if hasattr(const, "co_lines"):
                _remember_code(const)


def _spans(code: Any, name: str, lineno: int) -> bool:
    return code.co_name == name and code.co_firstlineno <= lineno <= max(
        (ln for _, _, ln in code.co_lines() if ln), default=0)


def _source_file(name: str, lineno: int) -> str | None:
    """The file of a function of this process named ``name`` whose code spans ``lineno``."""
    import inspect

    for code in _sent_code.get(name, ()):
        if _spans(code, name, lineno):
            return code.co_filename
    for mod_name, module in list(sys.modules.items()):
        if mod_name != "__main__" and not _is_by_value(module):
            continue
        for value in list(vars(module).values()):
            for fn in ([value] if inspect.isfunction(value) else
                       [v for v in vars(value).values() if inspect.isfunction(v)] if inspect.isclass(value) else []):
                if _spans(fn.__code__, name, lineno):
                    return fn.__code__.co_filename
    return None


def _is_by_value(module: Any) -> bool:
    import cloudpickle

    return cloudpickle.cloudpickle._is_registered_pickle_by_value(module)


def connect(target: str | os.PathLike | None = None, token: str | None = None, *, timeout: float = 10.0,
            tls_cert: str | None = None) -> Connection:
    """Connect to a ``shoal serve`` job: ``target`` is its connection file (the token and
    TLS certificate are read from it), ``"host:port"`` (pass ``token``), or None for the
    server this user started last."""
    if target is None:
        target = newest_connection_file()
    text = os.fspath(target)
    if os.path.exists(text) or text.endswith(".json"):
        info = read_connection_file(text)
        host, port = info["host"], int(info["port"])
        token = token or info["token"]
        tls_cert = tls_cert or info.get("tls_cert")
    else:
        host, _, port_text = text.rpartition(":")
        if not host or not port_text.isdigit():
            raise ValueError(f"connect({text!r}): give a connection file, \"host:port\", or None")
        port = int(port_text)
        if token is None:
            raise ValueError(f"connect({text!r}): a server address needs its token (token=...); "
                             "the server printed it, and wrote it to its connection file")
    if len(token) != TOKEN_CHARS:
        raise AuthenticationError(f"a shoal token has {TOKEN_CHARS} characters; this one has {len(token)}")
    address = f"{host}:{port}"
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError as exc:
        raise ServerError(f"cannot reach a shoal server at {address}: {exc.strerror or exc}") from None
    tune(sock)
    try:
        if tls_cert:
            context = ssl.create_default_context(cafile=tls_cert)
            context.check_hostname = False  # the certificate itself is pinned: only it verifies
            sock = _TLSLink(sock, context, host)  # type: ignore[assignment]
        hello = json.dumps(versions()).encode()
        sock.sendall(MAGIC + token.encode("ascii"))
        sock.sendall(b"".join(bytes(p) for p in frame(Kind.HELLO, 0, [hello])))
        answer = sock.recv(1)
        if answer == DENIED:
            raise AuthenticationError(f"the shoal server at {address} refused the token")
        if answer != OK:
            raise ServerError(f"{address} closed the connection during the greeting: is it a shoal server?")
        header = bytearray(HEADER.size)
        _read_exactly(sock, header)
        kind, _, n = HEADER.unpack(header)
        payload = bytearray(n)
        _read_exactly(sock, payload)
        if kind == Kind.ERROR:
            raise _rebuild(payload)
        theirs = json.loads(bytes(payload))
        why = mismatch(versions(), theirs, "client", "server")
        if why:
            raise VersionMismatchError(why)
    except (OSError, EOFError) as exc:
        sock.close()
        raise ServerError(f"the greeting with {address} failed: {exc or type(exc).__name__}") from None
    except BaseException:
        sock.close()
        raise
    sock.settimeout(None)
    return Connection(sock, address, theirs)


def local(pes: int = 2, transport: str = "mpi", *, timeout: float = 120.0, **options: Any) -> Connection:
    """Start a private backend of ``pes`` PEs as a child job and connect to it; it stops
    when the connection closes or this process ends. ``options`` are ``shoal serve``
    options (``idle_timeout=600``, ``mpiexec="..."``)."""
    folder = Path(tempfile.mkdtemp(prefix="shoal-local-"))
    path = folder / "server.json"
    cmd = [sys.executable, "-m", "shoal", "serve", "-n", str(pes), "--transport", transport,
           "--connection-file", str(path), "--parent-pid", str(os.getpid())]
    for key, value in options.items():
        cmd += [f"--{key.replace('_', '-')}", str(value)]
    log = open(folder / "server.log", "w+")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            if proc.poll() is None:
                proc.kill()
            log.seek(0)
            raise ServerError(f"the local shoal server did not start ({' '.join(cmd)}):\n{log.read()}")
        time.sleep(0.05)
    conn = connect(path)
    conn._process = proc
    atexit.register(conn.close)
    return conn
