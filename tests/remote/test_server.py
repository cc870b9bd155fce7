"""Client–server mode: a real ``shoal serve`` job (mpiexec, 2 PEs) and real clients.

Correct results through the link, bit-identical stencils, errors that come back to
their client, and a server that survives bad, slow, oversized and vanishing clients.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from support import ROOT
from support.commands import mpiexec_env

import shoal
from shoal.remote import AuthenticationError, ServerError, VersionMismatchError
from shoal.remote.protocol import DENIED, HEADER, MAGIC, OK, Kind, decode, encode, frame, versions

SHOAL = [sys.executable, "-m", "shoal"]


class Server:
    """A ``shoal serve`` job in a child process, stopped at the end."""

    def __init__(self, tmp: Path, *options: str, pes: int = 2, transport: str = "mpi"):
        self.file = tmp / "server.json"
        self.log = tmp / "server.log"
        self.proc = subprocess.Popen([*SHOAL, "serve", "-n", str(pes), "--transport", transport,
                                      "--connection-file", str(self.file), *options],
                                     stdout=open(self.log, "w"), stderr=subprocess.STDOUT, cwd=tmp)
        deadline = time.monotonic() + 90
        while not self.file.exists():
            assert self.proc.poll() is None, f"the server ended: {self.log.read_text()}"
            assert time.monotonic() < deadline, f"the server did not start: {self.log.read_text()}"
            time.sleep(0.05)
        self.info = json.loads(self.file.read_text())

    def connect(self) -> shoal.remote.Connection:
        return shoal.connect(self.file)

    def raw(self, token: str | None = None, hello: bool = True) -> socket.socket:
        """A socket past the greeting (and HELLO, unless told not to)."""
        s = socket.create_connection((self.info["host"], self.info["port"]), timeout=10)
        s.sendall(MAGIC + (token or self.info["token"]).encode())
        assert s.recv(1) == OK
        if hello:
            s.sendall(b"".join(bytes(p) for p in frame(Kind.HELLO, 0, [json.dumps(versions()).encode()])))
            kind, _, payload = read_frame(s)
            assert kind == Kind.HELLO
        return s

    def healthy(self) -> None:
        with self.connect() as c:
            assert c.run(pow, 3, 4) == 81

    def stop(self) -> int:
        if self.proc.poll() is None:
            subprocess.run([*SHOAL, "serve", "--stop", "--connection-file", str(self.file)], timeout=60)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def read_frame(s: socket.socket) -> tuple[int, int, bytearray]:
    header = _exactly(s, HEADER.size)
    kind, rid, n = HEADER.unpack(header)
    return kind, rid, _exactly(s, n)


def _exactly(s: socket.socket, n: int) -> bytearray:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        assert chunk, f"closed after {len(buf)} of {n} bytes"
        buf += chunk
    return buf


def closed_by_server(s: socket.socket, within: float) -> bool:
    s.settimeout(within)
    try:
        while True:
            if not s.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = Server(tmp_path_factory.mktemp("serve"), "--max-message", "4M", "--auth-timeout", "2")
    yield srv
    assert srv.stop() == 0, srv.log.read_text()
    assert not srv.file.exists(), "the connection file outlived the server"


# -- what a user does ------------------------------------------------------------------------
def test_connection_file_is_private_and_complete(server):
    mode = stat.S_IMODE(server.file.stat().st_mode)
    assert mode == 0o600, oct(mode)
    info = server.info
    assert info["host"] == "127.0.0.1" and info["pes"] == 2 and len(info["token"]) == 64
    assert info["shoal"] == shoal.__version__
    line = server.log.read_text().splitlines()[0]
    assert f"127.0.0.1:{info['port']}" in line and str(server.file) in line
    assert f"token {info['token'][:8]}…)" in line  # a prefix: the log may be read by others
    assert info["token"][8:16] not in server.log.read_text()


def hello(x):
    print("hello from PE", shoal.my_pe(), "of", shoal.num_pes())
    return x * 2


async def later(x):
    fut = shoal.Future()
    shoal.call_later(0.05, fut.send, x + 1)
    return await fut


def test_run_plain_and_async_functions_with_output(server, capsys):
    with server.connect() as c:
        assert c.pes == 2
        assert c.run(hello, 21) == 42
        assert "hello from PE 0 of 2" in capsys.readouterr().out
        assert c.run(later, 9) == 10


class Counter(shoal.Chare):
    def __init__(self, start):
        self.n = start

    def add(self, k):
        self.n += k
        return (shoal.my_pe(), self.n)


def make_counters(n):
    arr = shoal.Array(Counter, n, args=(100,))
    return [arr[i].add(i, ret=True).get() for i in range(n)]


def test_a_chare_class_defined_by_the_client_travels_by_value(server):
    with server.connect() as c:
        got = c.run(make_counters, 4)
    assert [v for _, v in got] == [100, 101, 102, 103]
    assert {pe for pe, _ in got} == {0, 1}, "the elements should span both PEs"


def test_cells_share_a_namespace_per_client_and_clients_are_isolated(server):
    with server.connect() as a, server.connect() as b:
        a.exec("x = 1")
        b.exec("x = 2")
        assert a.exec("x") == 1 and b.exec("x + 0") == 2
        a.exec(textwrap.dedent("""
            import shoal
            class Cell(shoal.Chare):
                def get(self):
                    return shoal.my_pe()
            arr = shoal.Array(Cell, 2)
        """))
        assert sorted(a.exec("await shoal.gather(*[arr[i].get(ret=True) for i in range(2)])")) == [0, 1]
        with pytest.raises(NameError):
            b.exec("arr")


def test_an_error_comes_back_with_its_remote_traceback_and_the_server_carries_on(server):
    def broken(d):
        return d["missing"]

    with server.connect() as c, server.connect() as other:
        with pytest.raises(KeyError) as info:
            c.run(broken, {})
        assert "broken" in str(info.value.__cause__) and 'd["missing"]' in str(info.value.__cause__)
        with pytest.raises(ZeroDivisionError) as cell:
            c.exec("y = 1\n1 / 0")
        assert "<shoal cell" in str(cell.value.__cause__)
        assert c.run(pow, 2, 5) == 32 and other.run(pow, 2, 6) == 64


async def gated():
    """Wait for :func:`open_gate` (the gate is kept where every session on PE 0 sees it)."""
    import builtins

    fut = builtins.shoal_test_gate = shoal.Future()  # type: ignore[attr-defined]
    return await fut


def gate_is_set() -> bool:
    import builtins

    return hasattr(builtins, "shoal_test_gate")


def open_gate() -> None:
    import builtins

    builtins.__dict__.pop("shoal_test_gate").send("slow")


def test_one_client_waiting_does_not_block_another(server):
    with server.connect() as a, server.connect() as b:
        pending = a.call(gated)
        deadline = time.monotonic() + 30
        while not b.run(gate_is_set):  # a's request is waiting on the server
            assert time.monotonic() < deadline, "a's request never started"
        assert b.run(pow, 2, 3) == 8  # answered while a's request waits: it ends only when b opens the gate
        assert not pending.done()
        b.run(open_gate)
        assert pending.get(timeout=30) == "slow"


def test_pipelined_calls_keep_their_order(server):
    with server.connect() as c:
        futures = [c.call(pow, i, 2) for i in range(3000)]  # more than the server queues per client
        assert [f.get(timeout=60) for f in futures] == [i * i for i in range(3000)]


from support.remote_support import Jacobi2D, jacobi_numpy  # noqa: E402


def test_a_stencil_through_the_link_is_bit_identical_to_numpy(server):
    n, steps = 48, 30
    a = np.random.default_rng(3).random((n, n))
    with server.connect() as c:
        g = Jacobi2D(n, c)
        assert "on the server at" in g.describe()
        g.u.from_numpy(a)
        g.solve(steps=steps)
        out = g.u.to_numpy()
        norm = g.norm(g.u).get()
        g.close()
        assert c.info()["grids"] == 0
    want = jacobi_numpy(a, steps)
    assert np.array_equal(out, want)
    assert norm == pytest.approx(np.linalg.norm(want))


# -- the security boundary ---------------------------------------------------------------------
def test_a_wrong_token_is_refused_and_the_server_stays_healthy(server):
    with pytest.raises(AuthenticationError, match="refused the token"):
        shoal.connect(f"127.0.0.1:{server.info['port']}", token="0" * 64)
    with pytest.raises(AuthenticationError, match="64 characters"):
        shoal.connect(f"127.0.0.1:{server.info['port']}", token="short")
    server.healthy()


def test_garbage_bytes_are_refused(server):
    s = socket.create_connection(("127.0.0.1", server.info["port"]), timeout=10)
    s.sendall(os.urandom(200))
    assert s.recv(1) == DENIED
    assert closed_by_server(s, 5)
    s = socket.create_connection(("127.0.0.1", server.info["port"]), timeout=10)
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + b"x" * 80)
    assert s.recv(1) == DENIED
    server.healthy()


def test_a_slow_loris_is_cut_off(server):
    s = socket.create_connection(("127.0.0.1", server.info["port"]), timeout=10)
    s.sendall(MAGIC + b"12")  # and then nothing
    assert closed_by_server(s, 10), "a connection that never authenticates must be closed"
    server.healthy()


def test_truncated_and_malformed_frames_are_refused(server):
    s = server.raw()
    s.sendall(HEADER.pack(Kind.CALL, 1, 1000) + b"x" * 10)
    s.close()  # mid-frame
    s = server.raw()
    s.sendall(HEADER.pack(99, 5, 0))
    kind, rid, payload = read_frame(s)
    assert kind == Kind.ERROR and rid == 5 and "unknown frame kind 99" in decode(payload)[2]
    assert closed_by_server(s, 5)
    s = server.raw()
    s.sendall(b"".join(bytes(p) for p in frame(Kind.CALL, 7, [b"not a payload at all"])))
    kind, rid, payload = read_frame(s)
    assert kind == Kind.ERROR and rid == 7  # a bad request: an error reply, the connection lives
    s.sendall(b"".join(bytes(p) for p in frame(Kind.CALL, 8, encode(("run", (pow, (2, 2), {})), by_value=True))))
    kind, rid, payload = read_frame(s)
    assert (kind, rid, decode(payload)) == (Kind.RESULT, 8, 4)
    s = server.raw(hello=False)
    s.sendall(b"".join(bytes(p) for p in frame(Kind.CALL, 1, encode(("run", (pow, (2, 2), {}))))))
    kind, _, payload = read_frame(s)
    assert kind == Kind.ERROR and "HELLO" in decode(payload)[2]
    server.healthy()


def test_an_oversized_frame_is_refused_naming_the_limit(server):
    s = server.raw()
    s.sendall(HEADER.pack(Kind.CALL, 3, 1 << 40))
    kind, rid, payload = read_frame(s)
    assert kind == Kind.ERROR and "exceeds this server's limit of 4194304 bytes" in decode(payload)[2]
    assert closed_by_server(s, 5)
    with server.connect() as c:  # the same through the client: an error, not a hang
        with pytest.raises(ServerError):
            c.run(len, np.zeros(1 << 20))
    server.healthy()


def test_a_version_mismatch_fails_at_connect_naming_both(server, monkeypatch):
    import shoal.remote.client as client

    monkeypatch.setattr(client, "versions", lambda: {**versions(), "shoal": "9.9.9"})
    with pytest.raises(VersionMismatchError) as info:
        server.connect()
    assert "9.9.9" in str(info.value) and shoal.__version__ in str(info.value)
    monkeypatch.undo()
    server.healthy()


def test_a_client_killed_mid_batch_is_cleaned_up_and_the_next_is_served(server, tmp_path):
    script = tmp_path / "doomed.py"
    script.write_text(textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(ROOT / 'tests')!r})
        import shoal
        from support.remote_support import Jacobi2D
        c = shoal.connect({str(server.file)!r})
        g = Jacobi2D(256, c)
        g.solve(steps=400)   # sent, not waited for
        print("sent", flush=True)
        os.kill(os.getpid(), 9)
    """))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == -9 and "sent" in out.stdout, out.stderr
    deadline = time.monotonic() + 30
    with server.connect() as c:
        while c.info()["sessions"] > 1:
            assert time.monotonic() < deadline, "the dead client's session was never freed"
            time.sleep(0.2)
    test_a_stencil_through_the_link_is_bit_identical_to_numpy(server)


# -- lifecycle ---------------------------------------------------------------------------------
def test_idle_timeout_and_stop(tmp_path):
    srv = Server(tmp_path, "--idle-timeout", "1", transport="inproc")
    assert srv.proc.wait(60) == 0
    assert "no client for 1 s" in srv.log.read_text()
    assert not srv.file.exists()
    (tmp_path / "b").mkdir()
    srv = Server(tmp_path / "b")
    srv.healthy()
    assert srv.stop() == 0
    last = srv.log.read_text().splitlines()[-1]
    assert re.fullmatch(r"shoal serve: stopped: shoal serve --stop, process \d+ \(the client at 127\.0\.0\.1:\d+\)",
                        last), last
    assert f":{srv.info['port']})" not in last  # the client's address, not the server's own


def test_a_signal_stops_the_server_cleanly(tmp_path):
    srv = Server(tmp_path)
    srv.healthy()
    srv.proc.send_signal(signal.SIGTERM)
    assert srv.proc.wait(60) == 128 + signal.SIGTERM, srv.log.read_text()  # as `shoal run` ends on SIGTERM
    assert "stopped: signal SIGTERM" in srv.log.read_text()  # PE 0 heard it and ended the job in order
    assert not srv.file.exists()


def test_a_private_local_backend_ends_with_its_frontend(tmp_path):
    script = tmp_path / "front.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT / 'tests')!r})
        import numpy as np
        import shoal.remote
        from support.remote_support import Jacobi2D, jacobi_numpy
        conn = shoal.remote.local(pes=2)
        print("server pid", conn._process.pid, flush=True)
        a = np.random.default_rng(0).random((32, 32))
        g = Jacobi2D(32, conn)
        g.u.from_numpy(a)
        g.solve(steps=10)
        print("identical", np.array_equal(g.u.to_numpy(), jacobi_numpy(a, 10)))
    """))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    assert "identical True" in out.stdout
    pid = int(out.stdout.split("server pid")[1].split()[0])
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command to make a certificate")
def test_tls(tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                    "/CN=localhost", "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    srv = Server(tmp_path, "--tls-cert", str(cert), "--tls-key", str(key), transport="inproc")
    try:
        srv.healthy()
        with srv.connect() as c:
            data = np.arange(100000.0)
            assert c.run(np.sum, data) == data.sum()
        s = socket.create_connection(("127.0.0.1", srv.info["port"]), timeout=10)
        s.sendall(MAGIC + srv.info["token"].encode())  # plain text to a TLS server: no answer but a close
        assert closed_by_server(s, 15)
    finally:
        assert srv.stop() == 0


def test_binding_beyond_loopback_warns(tmp_path):
    srv = Server(tmp_path, "--host", "0.0.0.0", transport="inproc")
    try:
        assert "warning: listening on 0.0.0.0" in srv.log.read_text()
    finally:
        srv.stop()


class Fragile(shoal.Chare):
    def boom(self):
        raise RuntimeError(f"element {self.index} broke")


def break_an_element():
    arr = shoal.Array(Fragile, 2)
    arr[1].boom()  # nobody waits for it


def test_an_entry_method_error_nobody_waits_for_is_reported_and_the_server_goes_on(server, capfd):
    with server.connect() as c:
        c.run(break_an_element)
        deadline = time.monotonic() + 20
        while "element (1,) broke" not in (err := capfd.readouterr().err):
            assert time.monotonic() < deadline, "the error never reached the client"
            time.sleep(0.1)
        assert "shoal serve: an entry method failed on PE 1 (the server goes on): RuntimeError" in err, err
        assert c.run(pow, 5, 2) == 25
    server.healthy()
    log = server.log.read_text()
    assert "shoal serve: an entry method failed on PE 1 (the server goes on): RuntimeError" in log, log
    assert "shoal serve: shoal serve" not in log, log


# -- what the operator sees (issue 35, item 8) --------------------------------------------------
def _log_line(srv: Server, pattern: str, within: float = 10) -> str:
    """The server log's first line that matches ``pattern`` (a regular expression)."""
    deadline = time.monotonic() + within
    while True:
        found = [ln for ln in srv.log.read_text().splitlines() if re.search(pattern, ln)]
        if found:
            return found[0]
        assert time.monotonic() < deadline, f"no line matches {pattern!r}:\n{srv.log.read_text()}"
        time.sleep(0.05)


def test_refused_connections_are_logged_with_the_address(server):
    s = socket.create_connection(("127.0.0.1", server.info["port"]), timeout=10)
    s.sendall(MAGIC + b"0" * 64)
    assert s.recv(1) == DENIED
    port = s.getsockname()[1]
    s.close()
    assert _log_line(server, f"127\\.0\\.0\\.1:{port}\\b") == \
        f"shoal serve: refused the connection from 127.0.0.1:{port}: wrong token"
    s = socket.create_connection(("127.0.0.1", server.info["port"]), timeout=10)
    s.sendall(b"GET / HTTP/1.1\r\n" + b"x" * 80)
    assert s.recv(1) == DENIED
    port = s.getsockname()[1]
    s.close()
    assert _log_line(server, f"127\\.0\\.0\\.1:{port}\\b") == (
        f"shoal serve: refused the connection from 127.0.0.1:{port}: not a shoal client (its first bytes are not "
        "shoal's greeting)")
    server.healthy()


def test_a_client_that_dies_is_logged_with_what_it_left_unfinished(server, tmp_path):
    script = tmp_path / "doomed.py"
    script.write_text(textwrap.dedent(f"""
        import os, time
        import shoal
        c = shoal.connect({str(server.file)!r})
        print("port", c._sock.getsockname()[1], flush=True)
        c.call(time.sleep, 3)
        c.call(time.sleep, 3)   # queued behind the first
        c.info()                # both have reached the server
        os.kill(os.getpid(), 9)
    """))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == -9, out.stderr
    port = int(out.stdout.split()[1])
    assert _log_line(server, f"127\\.0\\.0\\.1:{port}\\b").startswith(
        f"shoal serve: the client at 127.0.0.1:{port} disconnected with 2 requests unfinished"), server.log.read_text()
    server.healthy()


def block_until(path: str) -> bool:
    """Compute on PE 0 (never yielding to the runtime) until the file ``path`` appears."""
    open(path + ".started", "w").close()
    end = time.monotonic() + 60  # a bound against a hang, not a measure
    while not os.path.exists(path) and time.monotonic() < end:
        time.sleep(0.01)
    return os.path.exists(path)


def test_info_is_answered_while_pe0_computes(server, tmp_path):
    gate = tmp_path / "gate"
    with server.connect() as busy, server.connect() as other:
        running = busy.call(block_until, str(gate))
        deadline = time.monotonic() + 30
        while not os.path.exists(f"{gate}.started"):  # PE 0 is in the computation
            assert time.monotonic() < deadline, "the computation never started"
            time.sleep(0.01)
        for c, requests in ((other, 0), (busy, 1)):
            info = c.info()  # answered while PE 0 computes: the computation ends only when the gate opens
            assert not running.done(), "info() waited for PE 0's computation"
            assert info["requests"] == requests and info["pes"] == 2 and info["sessions"] >= 2, info
        gate.touch()
        assert running.get() is True
        assert busy.info()["requests"] == 0


async def two_lines():
    print("first line", flush=True)
    fut = shoal.Future()
    shoal.call_later(3.0, fut.send, None)
    await fut
    print("second line")
    return "done"


def test_printed_output_streams_back_as_it_is_printed(server, capsys):
    with server.connect() as c:
        fut = c.call(two_lines)
        with pytest.raises(TimeoutError):
            fut.get(timeout=1.5)
        out = capsys.readouterr().out
        assert "first line" in out and "second line" not in out
        assert fut.get(timeout=30) == "done"
        assert "second line" in capsys.readouterr().out


def test_the_example_notebook_runs_headless_against_a_local_server():
    nbformat = pytest.importorskip("nbformat", reason="needs the notebook extra: pip install -e '.[notebook]'")
    nbclient = pytest.importorskip("nbclient", reason="needs the notebook extra: pip install -e '.[notebook]'")
    nb = nbformat.read(ROOT / "examples" / "server.ipynb", as_version=4)
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT / "examples")}}).execute()
    text = "\n".join(o.get("text", "") or str(o.get("data", {}).get("text/plain", ""))
                     for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "identical to NumPy: True" in text
    assert "8 walkers on 2 PEs" in text and "round 2 PEs used: [0, 1]" in text
    assert "'run: PE 0 of 2'" in text
    assert not [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                if o.get("output_type") == "error"]


def test_code_the_server_cannot_import_gets_a_clear_error(server, tmp_path):
    import cloudpickle

    pkg = tmp_path / "only_here_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("def f():\n    return 1\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import only_here_pkg

        cloudpickle.unregister_pickle_by_value(only_here_pkg) if only_here_pkg.__name__ in \
            cloudpickle.cloudpickle._PICKLE_BY_VALUE_MODULES else None
        with server.connect() as c:
            import shoal.remote.client as client

            client._seen_modules = len(sys.modules)  # as if it were installed: sent by name
            with pytest.raises(ModuleNotFoundError, match="install that package where the server runs"):
                c.run(only_here_pkg.f)
            assert c.run(pow, 2, 2) == 4
    finally:
        sys.path.remove(str(tmp_path))


def test_a_server_started_by_mpiexec_itself(tmp_path):
    from shoal.lowlevel import find_mpiexec

    conn_file = tmp_path / "s.json"
    proc = subprocess.Popen([find_mpiexec(), "-n", "2", sys.executable, "-m", "shoal", "serve",
                             "--connection-file", str(conn_file)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=mpiexec_env())
    try:
        deadline = time.monotonic() + 60
        while not conn_file.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read()
            time.sleep(0.05)
        with shoal.connect(conn_file) as c:
            assert c.pes == 2 and c.run(make_counters, 2)[1][1] == 101
            c.stop_server()
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_client_hears_at_once_when_the_server_dies(tmp_path):
    srv = Server(tmp_path, transport="inproc")
    c = srv.connect()
    pending = c.call(two_lines)  # waits 3 s on the server
    srv.proc.kill()
    srv.proc.wait()
    with pytest.raises(ServerError, match="lost before the reply"):
        pending.get(timeout=30)
    with pytest.raises(ServerError, match="closed"):
        c.run(pow, 2, 2)
    c.close()


def test_what_a_client_created_is_destroyed_when_it_leaves(server):
    with server.connect() as watcher:
        before = watcher.info()["collections"]
        with server.connect() as c:
            c.run(make_counters, 4)
            g = Jacobi2D(32, c)
            g.solve(steps=2)
            g.u.to_numpy()
            g.close()
            until(lambda: watcher.info()["collections"] == before + 1, "the grid's tiles outlived close()")
        until(lambda: watcher.info()["collections"] == before, "the client's collections outlived it")


def until(condition, why, seconds=20.0):
    """Wait for ``condition()`` (destroying is a broadcast: it takes effect soon, not at once)."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, why
        time.sleep(0.05)


async def wait_long():
    fut = shoal.Future()
    shoal.call_later(60.0, fut.send, "too late")
    return await fut


def test_ctrl_c_interrupts_the_request_on_the_server_too(server):
    with server.connect() as c:
        threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()
        with pytest.raises(KeyboardInterrupt):
            c.run(wait_long)
        queued = [c.call(wait_long) for _ in range(2)]
        queued[1]._cancel()  # not started yet: dropped from the queue
        threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
        with pytest.raises(KeyboardInterrupt):
            queued[0].get()
        deadline = time.monotonic() + 30  # a bound against a hang; wait_long would hold the session 60 s
        while c.info()["requests"]:  # the interrupted requests ended on the server too
            assert time.monotonic() < deadline, f"the server still runs the interrupted requests: {c.info()}"
            time.sleep(0.05)
        assert c.run(pow, 3, 3) == 27
