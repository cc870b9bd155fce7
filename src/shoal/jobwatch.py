"""How each PE of a ``shoal run`` job started, failed or ended; and its watch on the launcher.

``shoal run`` makes a folder for the job (``SHOAL_JOB_DIR``) and names itself
(``SHOAL_LAUNCHER=pid:start``). Each PE writes into the folder at most four small files:
``pe<N>.start`` (its pid), ``pe<N>.fatal`` (what failed, where), ``pe<N>.exit`` (its exit
code, written when its program ends) and ``pe<N>.fault`` (its Python stack on a fatal
signal, from :mod:`faulthandler`); and it holds the FIFO ``pe<N>.alive`` open, so the
launcher sees the moment its process ends. After mpiexec returns, the launcher reads them to say
which PE did not finish, and how (:func:`read_records`). A thread on each PE checks once a
second that the launcher still lives, and ends the job if it is gone (SIGKILL leaves no
time for the launcher to end the job itself).

Under ``mpiexec``/``srun`` without ``shoal run``, a PE whose peer died would wait for it
forever (shared-memory MPI reports no error, and a launcher may leave the survivors
running), so each PE watches the next one through a TCP connection (:func:`watch_peers`).
Nothing here is on the per-message path.
"""

from __future__ import annotations

import atexit
import faulthandler
import fcntl
import os
import sys
import time

TYPE_CHECKING = False  # typing is for type checkers: the launcher and a PE's start-up skip its import
if TYPE_CHECKING:
    from typing import IO, Any, Callable, NoReturn
    import socket

__all__ = [
    "JOB_DIR_VAR", "LAUNCHER_VAR", "PERecord", "read_records", "launcher_rank", "process_start",
    "process_alive", "join_job", "note_fatal", "note_exit", "end_job", "describe", "format_exception", "watch_peers",
]

JOB_DIR_VAR = "SHOAL_JOB_DIR"
LAUNCHER_VAR = "SHOAL_LAUNCHER"
_RANK_VARS = ("PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID")
#: seconds between two checks that the launcher lives
CHECK_INTERVAL = 1.0
#: seconds a PE waits at start-up to connect to the next PE, and for the previous one to connect
LIFELINE_WAIT = 10.0
#: seconds a PE waits after its lifeline broke before it reports a death: a job that
#: MPI_Abort is ending anyway ends it first, with no second report
SETTLE = 0.5


class PERecord:
    """What one PE wrote about itself: pid, failure, exit code, fatal-signal stack."""

    __slots__ = ("pe", "pid", "start", "fatal", "exit_code", "mpi", "fault")

    def __init__(self, pe: int, pid: int = 0, start: str = "", fatal: tuple[float, str] | None = None,
                 exit_code: int | None = None, mpi: bool = True, fault: str = ""):
        self.pe, self.pid, self.start, self.fatal = pe, pid, start, fatal
        self.exit_code = exit_code
        self.mpi = mpi  # whether MPI had started in it when its program ended
        self.fault = fault

    def __repr__(self) -> str:
        return "PERecord(" + ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__) + ")"

    def __eq__(self, other: object) -> bool:
        return type(other) is PERecord and all(getattr(self, n) == getattr(other, n) for n in self.__slots__)


# -- processes ---------------------------------------------------------------------------------
def process_start(pid: int) -> str:
    """The start time of process ``pid`` (clock ticks since boot, Linux), or "" if unknown."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def process_alive(pid: int, start: str = "") -> bool:
    """Whether process ``pid`` runs (and, if ``start`` is given, is the one that started then)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        if os.path.isdir("/proc/self"):
            return False
        fields = []
    except OSError:
        fields = []
    if not fields:  # no /proc (macOS): ask the kernel, without the start time
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True
    return fields[0] not in ("Z", "X", "x") and (not start or fields[19] == start)


def launcher_rank() -> int | None:
    """This process's rank in its MPI job, from the launcher's environment (None if unknown)."""
    for var in _RANK_VARS:
        value = os.environ.get(var, "")
        if value.isdigit():
            return int(value)
    return None


# -- records (PE side) -----------------------------------------------------------------------
_folder: str | None = None
_rank = -1
_fault_file: IO[str] | None = None
_alive_fd = -1
_fatal_noted = False  # this PE has recorded why it fails: later reports are its consequences


def _write(name: str, text: str) -> None:
    """Write one record file whole (renamed into place: the launcher never reads half of it)."""
    if _folder is None:
        return
    tmp = os.path.join(_folder, f".{name}.{os.getpid()}")
    try:
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, os.path.join(_folder, name))
    except OSError:
        pass  # the launcher is gone with its folder: nothing left to tell


def join_job() -> bool:
    """Under ``shoal run``: record this PE's start, keep its fatal-signal stack, watch the launcher.

    The job's variables are removed from the environment, so processes this program starts
    (another ``shoal run``, say) do not write into this job's records. False outside
    ``shoal run``; then, under another MPI launcher, only :mod:`faulthandler` is enabled
    (the Python stack to stderr on a crash).
    """
    global _folder, _rank, _fault_file, _alive_fd
    folder = os.environ.pop(JOB_DIR_VAR, "")
    launcher = os.environ.pop(LAUNCHER_VAR, "")
    rank = launcher_rank()
    if rank is None:
        return False
    if not folder or not os.path.isdir(folder):
        if not faulthandler.is_enabled():
            faulthandler.enable()
        return False
    _folder, _rank = folder, rank
    pid = os.getpid()
    _write(f"pe{rank}.start", f"{pid} {process_start(pid)}\n")
    try:  # held until this process ends, however it ends: the launcher sees EOF then
        _alive_fd = _high(os.open(os.path.join(_folder, f"pe{rank}.alive"), os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC))
    except OSError:
        pass  # no FIFO (many PEs) or no reader: the records alone tell
    try:
        _fault_file = open(os.path.join(_folder, f"pe{rank}.fault"), "w")
        faulthandler.enable(file=_fault_file, all_threads=False)
    except OSError:
        faulthandler.enable()
    lpid, _, lstart = launcher.partition(":")
    if lpid.isdigit():
        import threading  # here: the launcher, which imports this module too, starts no thread

        threading.Thread(target=_watch_launcher, args=(int(lpid), lstart), name="shoal-launcher-watch",
                         daemon=True).start()
    return True


def _high(fd: int) -> int:
    """Move ``fd`` to a descriptor number above any other this process will use.

    An ending process releases its files last-closed first (Linux runs the deferred
    releases in reverse), and mpiexec kills the other PEs the moment this one's MPI socket
    closes: the launcher must see this FIFO close before that, or it would blame a PE
    that mpiexec killed."""
    import resource

    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    top = 4095 if soft == resource.RLIM_INFINITY else min(soft - 1, 4095)
    if top <= fd:
        return fd
    try:
        high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, top)
    except OSError:
        return fd
    os.close(fd)
    return high


def note_fatal(text: str) -> None:
    """Record that this PE fails, and why (one line), for ``shoal run``'s summary.

    The first report stands: what follows it (the job being ended, a thread that sees
    MPI go away) is a consequence, never the cause."""
    global _fatal_noted
    _farewell()  # it reports its own failure: the previous PE must not report a death
    if _fatal_noted:
        return
    _fatal_noted = True
    line = " ".join(text.split())[:400]
    _write(f"pe{_rank}.fatal", f"{time.time():.6f} {line}\n")


def note_exit(code: int) -> None:
    """Record that this PE's program ended with ``code`` (a PE without it vanished), and whether
    it had started MPI (one that had not may leave the others waiting in MPI's start-up)."""
    _write(f"pe{_rank}.exit", f"{code} {'mpi' if 'mpi4py.MPI' in sys.modules else 'nompi'}\n")


def describe(exc: BaseException) -> str:
    """``Type: first line of the message``, for one-line reports (with the lines after it
    where the first ends in a colon: a deadlock's list of waits)."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    return f"{type(exc).__name__}: {' '.join(lines) if lines[0].endswith(':') else lines[0]}"


def end_job(pe: int | None, what: str, detail: str = "", code: int = 1, init: bool = True) -> NoReturn:
    """Report ``what`` failed on PE ``pe`` and end every process of the job with ``code``.

    With MPI started (or ``init``: start it, since other PEs may wait in its start-up for
    this one) this is ``MPI_Abort``; otherwise the process exits.
    """
    who = f"PE {pe}" if pe is not None else f"process {os.getpid()}"
    note_fatal(f"{what}{': ' + detail.strip().splitlines()[-1] if detail.strip() else ''}")
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    os.write(2, f"shoal: {who}: {what}; ending the job\n{detail}".encode(errors="replace"))
    time.sleep(0.25)  # let the launcher forward the report before the abort ends every process
    mpi = sys.modules.get("mpi4py.MPI")
    running = mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized()
    if running or init:
        try:
            from ._transport.mpi_library import abort_world

            abort_world(code)
        except Exception:  # noqa: BLE001 - without MPI, ending this process is all there is
            pass
    os._exit(code)


def _watch_launcher(pid: int, start: str) -> None:
    while True:
        time.sleep(CHECK_INTERVAL)
        if not process_alive(pid, start):
            end_job(_rank, f"its launcher (shoal run, pid {pid}) is gone", init=False)


# -- a dead peer under another launcher (PE side) --------------------------------------------------
_FAREWELL = b"."
_behind: socket.socket | None = None  # from the previous PE, which watches this one through it
_ending = False  # this PE ends the job, or leaves it: it reports no death


def watch_peers(rank: int, size: int, exchange: Callable[[Any], Any], advice: Callable[[], tuple[int, str]]) -> None:
    """Under ``mpiexec``/``srun`` without ``shoal run`` (whose launcher watches every PE): end
    the job when the next PE's process dies, instead of waiting for it forever.

    Each PE connects to the next one (its lifeline: TCP, two connections per PE). The kernel
    closes a process's connections however it ends, and TCP keepalive notices a lost
    node; a PE that ends on purpose says goodbye first. A thread waits in ``recv`` (no
    polling, nothing on the message path); if the connection closes without a goodbye,
    it prints ``PE k died (how); <advice text>`` and ends the job with advice's exit code.
    ``exchange(x)`` sends ``x`` to the previous PE and returns the next one's; every PE
    calls this at start-up."""
    global _behind, _rank
    if _folder is not None or size < 2:
        return
    import socket
    _rank, host, before, after = rank, socket.gethostname(), (rank - 1) % size, (rank + 1) % size
    server: socket.socket | None = None
    try:
        server = socket.create_server(("", 0))
    except OSError as exc:
        _cannot(f"listen for PE {before}", exc)
    theirs = exchange((host, server.getsockname()[1]) if server else None)
    ahead = None
    if theirs is not None:
        where = ("127.0.0.1" if theirs[0] == host else theirs[0], theirs[1])
        try:
            ahead = _keepalive(socket.create_connection(where, LIFELINE_WAIT))
        except OSError as exc:
            _cannot(f"connect to PE {after} at {where[0]}:{where[1]}", exc)
    if server is not None:
        with server:
            server.settimeout(LIFELINE_WAIT)
            try:
                _behind = _keepalive(server.accept()[0])
            except OSError as exc:
                _cannot(f"hear from PE {before}", exc)
    atexit.register(_farewell)
    if ahead is not None:
        ahead.settimeout(None)
        import threading

        threading.Thread(target=_watch_next, args=(ahead, after, advice), name="shoal-peer-watch", daemon=True).start()


def _cannot(what: str, exc: OSError) -> None:
    """Say that this PE cannot watch, or be watched, and why (the job goes on)."""
    os.write(2, f"shoal: PE {_rank}: cannot {what} ({exc}); a dead PE may then leave this job waiting\n".encode())


def _keepalive(sock: socket.socket) -> socket.socket:
    """``sock``, probed by the kernel after 10 s of silence: a lost node breaks it in about 25 s."""
    import socket
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (("TCP_KEEPIDLE", 10), ("TCP_KEEPINTVL", 5), ("TCP_KEEPCNT", 3)):
        if hasattr(socket, name):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)
    return sock


def _watch_next(sock: socket.socket, pe: int, advice: Callable[[], tuple[int, str]]) -> None:
    """Wait for PE ``pe`` to say goodbye or vanish; if it vanished, end the job as ``advice`` says."""
    try:
        said, how = sock.recv(1), "its process ended"
    except OSError as exc:
        said, how = b"", f"its connection broke: {exc.strerror or exc}"
    if said == _FAREWELL:
        return
    time.sleep(SETTLE)
    if _ending:
        return
    code, text = advice()
    _farewell()
    os.write(2, f"shoal: PE {_rank}: PE {pe} died ({how}); {text}\n".encode(errors="replace"))
    time.sleep(0.25)  # let the launcher forward the line before the abort ends every process
    from ._transport.mpi_library import abort_world

    abort_world(code)
    os._exit(code)


def _farewell() -> None:
    """This PE ends on purpose (or reports its own failure): tell the previous PE."""
    global _behind, _ending
    _ending = True
    if _behind is not None:
        try:
            _behind.send(_FAREWELL)
        except OSError:
            pass
        _behind = None


def read_records(folder: str | os.PathLike) -> dict[int, PERecord]:
    """Every PE's records in ``folder`` (launcher side)."""
    out: dict[int, PERecord] = {}
    try:
        names = os.listdir(folder)
    except OSError:
        return out
    for name in names:
        stem, _, kind = name.partition(".")
        if not stem.startswith("pe") or not stem[2:].isdigit() or kind not in ("start", "fatal", "exit", "fault"):
            continue  # a FIFO (never read: that would wait for its writer) or a file half written
        rec = out.setdefault(int(stem[2:]), PERecord(int(stem[2:])))
        try:
            with open(os.path.join(folder, name), errors="replace") as f:
                text = f.read()
        except OSError:
            continue
        parts = text.split()
        if kind == "start" and parts and parts[0].isdigit():
            rec.pid, rec.start = int(parts[0]), (parts[1] if len(parts) > 1 else "")
        elif kind == "fatal" and text.strip():
            when, _, what = text.strip().partition(" ")
            rec.fatal = (float(when) if when.replace(".", "", 1).isdigit() else 0.0, what)
        elif kind == "exit" and parts and parts[0].lstrip("-").isdigit():
            rec.exit_code, rec.mpi = int(parts[0]), parts[1:] != ["nompi"]
        elif kind == "fault":
            rec.fault = text.strip()
    return out


def format_exception(exc: BaseException, path: str | None = None) -> str:
    """``exc``'s traceback, from the first frame in ``path`` on (the launcher's frames are noise)."""
    import traceback

    tb = exc.__traceback__
    if path is not None:
        first = tb
        while first is not None and first.tb_frame.f_code.co_filename != path:
            first = first.tb_next
        tb = first
    return "".join(traceback.format_exception(type(exc), exc, tb))
