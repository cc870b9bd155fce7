"""``shoal run`` with the MPI transport: start mpiexec, watch the job, end it on a signal, report.

mpiexec's own report of a failed job names process ids, not PEs, and a job whose PE
vanished with exit code 0 ends "successfully". The launcher gives each job a folder
where the PEs record their start, failure and end (:mod:`shoal.jobwatch`), watches the
PEs' processes while mpiexec runs, and after it returns prints one line saying which
PE failed and how. On SIGINT, SIGTERM or SIGHUP it ends the job (mpiexec, then the PEs
themselves) and exits with 128 + the signal; killed outright, it takes mpiexec with it
(Linux: parent-death signal) and the PEs notice it is gone (:func:`jobwatch.join_job`).
"""

from __future__ import annotations

import os
import select
import sys
import time

try:  # signal's C core: the module `signal` adds enum and its ~70 members, milliseconds of every job's start
    import _signal as signal
except ImportError:  # not CPython
    import signal  # type: ignore[no-redef]

TYPE_CHECKING = False  # typing is for type checkers: the launcher and a PE's start-up skip its import
if TYPE_CHECKING:
    from typing import Any, Callable, Sequence

from .jobreport import files_needed, pe_list
from .jobwatch import JOB_DIR_VAR, LAUNCHER_VAR, PERecord, process_alive, process_start, read_records
from .process import Process, TimeoutExpired
from .launchers import Launch, in_allocation, plan
from .settings import mpiexec_choice

__all__ = ["find_mpiexec", "job_launch", "launch_mpi", "run_job", "JobOutcome", "GRACE", "STOP_WAIT"]

#: seconds mpiexec may run on after a PE reported a failure or vanished, before the
#: launcher ends the job itself (a hang guard: MPI_Abort normally ends it at once)
GRACE = 10.0
#: seconds mpiexec gets to end the job after the launcher asked, before SIGKILL
STOP_WAIT = 3.0
_POLL = 0.2
_FOLLOW_MAX = 1024  # PEs whose end the launcher follows as it happens (one descriptor each)


def find_mpiexec(explicit: str | None = None) -> str:
    """The MPI launcher: ``--mpiexec``, ``$SHOAL_MPIEXEC``, PATH, then beside this Python."""
    for candidate in (explicit, mpiexec_choice()):
        if candidate:
            found = _which(candidate)
            if found is None:
                raise SystemExit(f"shoal: mpiexec {candidate!r} was not found or is not executable")
            return found
    for name in ("mpiexec", "mpirun"):
        found = _which(name) or _which(name, os.path.dirname(sys.executable))
        if found:
            return found
    raise SystemExit(
        "shoal: no mpiexec found; install one (`pip install mpich`), pass --mpiexec PATH, "
        "or use --transport inproc"
    )


def job_launch(pes: int, args: Sequence[str], mpiexec: str | None = None) -> Launch:
    """How ``python -m shoal *args`` starts on ``pes`` PEs: the launcher found (or srun,
    inside a Slurm allocation with no launcher named) and the options its family needs."""
    srun = None if mpiexec or mpiexec_choice() else _which("srun")
    if srun is not None and in_allocation():
        try:
            exe = find_mpiexec()
        except SystemExit:  # no mpiexec at all: srun starts the PEs
            exe = srun
    else:
        exe = find_mpiexec(mpiexec)
    return plan(exe, pes, [sys.executable, "-m", "shoal", *args], srun=srun)


def _which(name: str, path: str | None = None) -> str | None:
    """``shutil.which(name, path=path)`` for executables, without importing :mod:`shutil`
    before the job starts (every millisecond there is the job's)."""
    if os.path.dirname(name):
        return name if os.path.isfile(name) and os.access(name, os.X_OK) else None
    for folder in (os.environ.get("PATH", os.defpath) if path is None else path).split(os.pathsep):
        candidate = os.path.join(folder or os.curdir, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def launch_mpi(args: Sequence[str], pes: int, mpiexec: str | None = None) -> int:
    """Run ``python -m shoal *args`` as an MPI job of ``pes`` processes; its exit code."""
    return run_job(args, pes, mpiexec).code


class JobOutcome:
    """How a job ended: its exit code, the PEs whose process died (a signal, a crash; a
    program's own error is not a death), whether mpiexec failed before any PE started, and
    (``run_job(hold_report=True)``) the report lines it did not print."""

    __slots__ = ("code", "died", "never_started", "report")

    def __init__(self, code: int, died: list[int], never_started: bool, report: list[str] | None = None):
        self.code, self.died, self.never_started, self.report = code, died, never_started, report or []

    def __repr__(self) -> str:
        return f"JobOutcome(code={self.code}, died={self.died}, never_started={self.never_started})"


def run_job(args: Sequence[str], pes: int, mpiexec: str | None = None, hold_report: bool = False) -> JobOutcome:
    """:func:`launch_mpi`, also saying which PEs died and whether any PE started; with
    ``hold_report`` a job in which PEs died keeps its report for the caller (who may
    restart it, and says so instead of "the job failed")."""
    launch = job_launch(pes, args, mpiexec)
    _raise_file_limit(pes)
    if sys.dont_write_bytecode:  # else Python keeps shoal's bytecode current itself
        from .bytecode import refresh

        if refresh():
            _say("compiled shoal's changed modules once: PYTHONDONTWRITEBYTECODE keeps Python from caching them, "
                 "and every PE would compile them at every start")
    folder = _job_folder()
    env = {k: v for k, v in os.environ.items() if k != "SHOAL_PES"}
    env["SHOAL_TRANSPORT"] = "mpi"
    env[JOB_DIR_VAR] = folder
    env.update(blas_threads(pes, env))
    env[LAUNCHER_VAR] = f"{os.getpid()}:{process_start(os.getpid())}"
    if "PRTE_MCA_prte_tmpdir_base" not in env and len(folder) <= 60:
        # Open MPI's session directory (its PMIx sockets) in the job's own folder: one that a
        # killed mpiexec left in /tmp, named by its pid, made a later mpiexec given the same
        # pid fail to start ("unable to setup a rendezvous point"); the folder goes with the job
        env["PRTE_MCA_prte_tmpdir_base"] = folder
    job = _Job(launch.command, env, folder, pes)
    job.hold_report = hold_report
    try:
        code = job.run()
        return JobOutcome(code, job.died, job.never_started, job.held)
    finally:
        _remove_folder(folder)


def _temp_root() -> str:
    """Where job folders go, and stale ones are looked for."""
    return os.environ.get("TMPDIR") or "/tmp"


def _job_folder() -> str:
    """A new folder for the job's records, ``shoal-run-<pid>-<random>`` in ``$TMPDIR`` or
    ``/tmp`` (:mod:`tempfile` is imported only where neither takes it)."""
    name = f"shoal-run-{os.getpid()}-{os.urandom(4).hex()}"
    try:
        path = os.path.join(_temp_root(), name)
        os.mkdir(path, 0o700)
        return path
    except OSError:
        import tempfile

        return tempfile.mkdtemp(prefix=f"shoal-run-{os.getpid()}-")


def _remove_folder(folder: str) -> None:
    """Remove a job folder: records and FIFOs, no subfolders (else :func:`shutil.rmtree`)."""
    try:
        for name in os.listdir(folder):
            os.unlink(os.path.join(folder, name))
        os.rmdir(folder)
    except OSError:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


def _say(text: str) -> None:
    try:
        sys.stdout.flush()
        print(f"shoal run: {text}", file=sys.stderr, flush=True)
    except OSError:
        pass  # the terminal is gone (SIGHUP): nobody to tell


class _Job:
    """One mpiexec run: its process, the PEs' records and processes, signals caught."""

    def __init__(self, cmd: list[str], env: dict[str, str], folder: str, pes: int):
        self.cmd, self.env, self.folder, self.pes = cmd, env, folder, pes
        self.records: dict[int, PERecord] = {}
        self.alive: dict[int, int] = {}  # fd -> PE: the read end of the PE's FIFO (EOF: it is ending)
        self.ended: list[list[int]] = []  # PEs whose process ended, in the order seen
        self.signum = 0
        self.trouble_since: float | None = None
        self.verdict = ""  # why the launcher itself ended the job, if it did
        self.guarded = False  # whether it did (mpiexec's exit code is then the signal's)
        self.names: frozenset[str] = frozenset()
        self.poller = select.poll()
        self.died: list[int] = []  # PEs whose process ended without finishing or reporting an error
        #: the read ends of mpiexec's stdout and stderr while they are open, and the filter
        #: each goes through (shoal.banners.Filter); empty with SHOAL_DEBUG=1
        self.outputs: dict[int, Any] = {}
        self.next_look = 0.0  # when the PEs' records are looked at next, if only output comes
        self.hold_report = False  # PEs died: keep the report for the caller (run_job), do not print it
        self.held: list[str] = []
        self.never_started = False  # mpiexec failed before any PE started

    def run(self) -> int:
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        self.poller.register(wake_r, select.POLLIN)
        try:
            previous = _catch(self._caught, wake_w)
        except ValueError:  # not the main thread: no signals to catch
            previous = None
        try:
            self._follow()
            writes = self._filter_outputs()
            try:
                proc = Process(self.cmd, self.env, death_signal=signal.SIGTERM, outputs=writes)
            except OSError as exc:
                _say(f"cannot start {self.cmd[0]}: {_start_failure(exc, self.cmd[0])}")
                return 127
            finally:
                for fd in writes:
                    if fd >= 0:
                        os.close(fd)
            _remove_stale_folders()  # while the PEs start: nothing waits for it
            exited = _exit_fd(proc.pid)  # readable when mpiexec ends: the wait below wakes at once
            if exited is not None:
                self.poller.register(exited, select.POLLIN)
            try:
                while proc.poll() is None:
                    if self.signum:
                        return self._stop(proc, self.signum)
                    self._watch(wake_r, proc)
            finally:
                if exited is not None:
                    self.poller.unregister(exited)
                    os.close(exited)
            self._drain_outputs()
            if self.signum:
                return self._stop(proc, self.signum)
            rc = proc.wait()  # it ended: its exit code
            return self._report(128 - rc if rc < 0 else rc)  # mpiexec killed by a signal: as a shell says
        finally:
            self._drain_outputs(0.0)
            if previous is not None:
                _restore(previous)
            for fd in (wake_r, wake_w, *self.alive):
                os.close(fd)

    def _filter_outputs(self) -> tuple[int, int]:
        """Pipes for mpiexec's stdout and stderr (both carry its banners: Hydra's on stdout),
        read through :class:`~shoal.banners.Filter` into this process's: their write ends,
        closed here once mpiexec has them; (-1, -1) with ``SHOAL_DEBUG=1`` (as they are)."""
        if self.env.get("SHOAL_DEBUG", "") not in ("", "0"):
            return -1, -1
        from .banners import Filter

        ends = []
        for target in (1, 2):
            read, write = os.pipe()
            os.set_blocking(read, False)
            self.outputs[read] = Filter(target)
            self.poller.register(read, select.POLLIN)
            ends.append(write)
        return ends[0], ends[1]

    def _output_ready(self, fd: int) -> None:
        """Pass on what mpiexec wrote (through the filter); at the end of the pipe, stop."""
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            self.outputs[fd].feed(data)
            return
        self._close_output(fd)

    def _close_output(self, fd: int) -> None:
        self.poller.unregister(fd)
        os.close(fd)
        self.outputs.pop(fd).close()

    def _drain_outputs(self, patience: float = 0.5) -> None:
        """mpiexec ended: what is left of its output, for up to ``patience`` seconds if PEs
        it left behind still hold the pipes, before shoal's own report."""
        end = time.monotonic() + patience
        while self.outputs:
            ready = select.select(list(self.outputs), [], [], max(0.0, end - time.monotonic()))[0]
            if not ready:
                for fd in list(self.outputs):
                    self._close_output(fd)
                return
            for fd in ready:
                self._output_ready(fd)

    def _caught(self, signum: int, frame: Any) -> None:
        self.signum = self.signum or signum  # the first signal names the stop; the main loop acts

    # -- while mpiexec runs --------------------------------------------------------------
    def _follow(self) -> None:
        """Make a FIFO per PE: the PE holds its write end, so its end shows here as EOF the
        moment its files close, before mpiexec can react by killing the other PEs."""
        import resource

        if self.pes > _FOLLOW_MAX or resource.getrlimit(resource.RLIMIT_NOFILE)[0] < self.pes + 64:
            return  # too many descriptors: the records alone tell who did not finish
        for pe in range(self.pes):
            path = os.path.join(self.folder, f"pe{pe}.alive")
            try:
                os.mkfifo(path)
                fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError:
                return
            self.alive[fd] = pe
            self.poller.register(fd, select.POLLIN)

    def _watch(self, wake_r: int, proc: Process) -> None:
        """Wait a moment for a PE's process to end or a signal; note what the PEs wrote."""
        batch = []
        output_only = True  # the job's output alone woke the wait: the records need no look yet
        for fd, _ in self.poller.poll(_POLL * 1000):
            if fd in self.outputs:
                self._output_ready(fd)
                continue
            output_only = False
            if fd == wake_r:
                os.read(wake_r, 512)
            elif fd in self.alive and not os.read(fd, 512):  # EOF: the PE's process is ending
                self.poller.unregister(fd)
                batch.append(self.alive[fd])
        if batch:
            self.ended.append(sorted(batch))
        now = time.monotonic()
        if output_only and now < self.next_look:
            return
        self.next_look = now + _POLL
        self._read()  # after the wait: a PE writes its exit record before its process ends
        self._guard(proc)

    def _guard(self, proc: Process) -> None:
        """A hang guard: end the job if mpiexec has not, well after a PE failed, vanished, or
        left without starting MPI while another PE waits for it in MPI's start-up."""
        now = time.monotonic()
        if self.trouble_since is None:
            if self._trouble() or self._left_early():
                self.trouble_since = now
            return
        if now - self.trouble_since <= GRACE or self.signum:
            return
        if self._trouble():
            _say(f"mpiexec did not end the job {GRACE:.0f} s after a PE failed or vanished; ending it")
            self.guarded = True
            self._end(proc, signal.SIGTERM)
            return
        early = self._left_early()
        waiting = [pe for pe, rec in sorted(self.records.items())
                   if rec.pid and rec.exit_code is None and process_alive(rec.pid, rec.start) and _uses_mpi(rec.pid)]
        if early and waiting:
            self.verdict = (f"{pe_list(early)} left (exit code 0) before the job started, without starting MPI, "
                            f"while {pe_list(waiting)} waited for {'it' if len(early) == 1 else 'them'} in MPI's start-up")
            _say(f"{self.verdict}; ending the job")
            self.guarded = True
            self._end(proc, signal.SIGTERM)
        else:
            self.trouble_since = now  # look again after another while

    def _left_early(self) -> list[int]:
        return sorted(pe for pe, rec in self.records.items() if rec.exit_code is not None and not rec.mpi)

    def _read(self) -> None:
        """Read the PEs' records again when a file appeared."""
        try:
            names = frozenset(os.listdir(self.folder))
        except OSError:
            return
        if names != self.names:
            self.names = names
            self.records = read_records(self.folder)

    def _trouble(self) -> bool:
        """A PE reported a failure, or its process ended without its program ending."""
        if any(rec.fatal for rec in self.records.values()):
            return True
        return any(self.records.get(pe, PERecord(pe)).exit_code is None for b in self.ended for pe in b)

    # -- ending ------------------------------------------------------------------------
    def _end(self, proc: Process, sig: int) -> str:
        """End mpiexec and every PE: ``sig`` first, SIGKILL if they linger; what it took."""
        how = f"sent {_signal_name(sig)} to mpiexec"
        try:
            proc.send_signal(sig)
            proc.wait(STOP_WAIT)
        except TimeoutExpired:
            proc.kill()
            proc.wait()
            how += ", then SIGKILL"
        except ProcessLookupError:
            pass
        self.records = read_records(self.folder)
        left = [pe for pe, rec in self.records.items() if rec.pid and process_alive(rec.pid, rec.start)]
        for pe in left:
            try:
                os.kill(self.records[pe].pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if left:
            how += f", then SIGKILL to {pe_list(sorted(left))}"
        return how

    def _stop(self, proc: Process, signum: int) -> int:
        name = _signal_name(signum)
        if signum == signal.SIGINT and proc.poll() is None:
            try:  # from a terminal, mpiexec got the Ctrl-C too: give it a moment to end the job
                proc.wait(1.0)
            except TimeoutExpired:
                pass
        if proc.poll() is None:
            how = self._end(proc, signal.SIGTERM)
        else:
            how = f"mpiexec ended it (exit code {proc.returncode})"
            self._end(proc, signal.SIGTERM)  # PEs mpiexec left behind, if any
        _say(f"stopped by {name}; the job was ended ({how})")
        return 128 + signum

    # -- after mpiexec -----------------------------------------------------------------
    def _report(self, rc: int) -> int:
        """Say which PE failed and how (one line, last); the job's exit code."""
        import resource

        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        records = read_records(self.folder)
        vanished = {pe for pe, rec in records.items() if rec.pid and rec.exit_code is None and not rec.fatal}
        # the first seen to end: the others ended with the job
        self.died = next((sorted(set(b) & vanished) for b in self.ended if set(b) & vanished), sorted(vanished))
        self.never_started = rc != 0 and not any(rec.pid for rec in records.values())
        from .jobreport import summarize

        code, lines = summarize(
            records, self.ended, self.pes, rc, verdict=self.verdict, guarded=self.guarded,
            command=" ".join(self.cmd[:3]), cores=cores, file_limit=resource.getrlimit(resource.RLIMIT_NOFILE)[0],
        )
        if self.hold_report and self.died:
            self.held = lines
            return code
        for line in lines:
            _say(line)
        return code


def _uses_mpi(pid: int) -> bool:
    """Whether process ``pid`` has the MPI library loaded (so it is in, or entering, the job)."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            return any("libmpi" in line for line in f)
    except OSError:
        return False


def _exit_fd(pid: int) -> int | None:
    """A descriptor that becomes readable when process ``pid`` ends (Linux pidfd), or None."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


#: the variables that size the thread pools of the BLAS libraries NumPy may use
BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def blas_threads(pes: int, env: dict[str, str]) -> dict[str, str]:
    """Thread counts for the BLAS pools of ``pes`` PEs on this node, where the user set
    none: the node's cores shared among them, at least one each. Each PE is a process
    of its own: left alone, every one starts a pool of a thread per core, which starts
    slower (NumPy's import) and oversubscribes the cores."""
    if any(name in env for name in BLAS_THREADS):
        return {}
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return {name: str(max(1, cores // max(pes, 1))) for name in BLAS_THREADS}


def _raise_file_limit(pes: int) -> None:
    """Lift the open-file limit towards what mpiexec needs for ``pes`` PEs, as far as allowed."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = files_needed(pes) + (pes if pes <= _FOLLOW_MAX else 0)
    if soft != resource.RLIM_INFINITY and soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want if hard == resource.RLIM_INFINITY else min(want, hard), hard))
        except (ValueError, OSError):
            pass


def _remove_stale_folders() -> None:
    """Remove the job folders of launchers that were killed before they could (SIGKILL)."""
    root = _temp_root()
    try:
        names = [name for name in os.listdir(root) if name.startswith("shoal-run-") and name.count("-") >= 3]
    except OSError:
        return
    for name in names:
        path, pid = os.path.join(root, name), name.split("-")[2]
        try:
            mine = os.stat(path).st_uid == os.getuid() and os.path.isdir(path)
        except OSError:
            continue
        if mine and pid.isdigit() and not process_alive(int(pid)):
            _remove_folder(path)


def _start_failure(exc: OSError, path: str) -> str:
    """Why ``path`` did not start: the OS's words, and for a script whose ``#!``
    interpreter is missing (ENOENT for a file that exists), which one."""
    import errno

    if exc.errno == errno.ENOENT and os.path.isfile(path):
        try:
            with open(path, "rb") as f:
                first = f.readline(256)
        except OSError:
            first = b""
        if first.startswith(b"#!"):
            interpreter = first[2:].decode(errors="replace").strip()
            return f"its interpreter ({interpreter}, its #! line) was not found; fix that line or pass --mpiexec"
    return str(exc)


def _signal_name(sig: int) -> str:
    """``SIGTERM`` for 15 (by :mod:`signal`, imported as the job ends)."""
    import signal as named

    return named.Signals(sig).name


def _catch(handler: Callable[[int, Any], None], wake_fd: int) -> tuple:
    """Route SIGINT, SIGTERM and SIGHUP to ``handler`` (and wake ``select`` on ``wake_fd``)."""
    old_wake = signal.set_wakeup_fd(wake_fd)
    handlers = {}
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) != signal.SIG_IGN:  # nohup: SIGHUP stays ignored
            handlers[sig] = signal.signal(sig, handler)
    return old_wake, handlers


def _restore(previous: tuple) -> None:
    old_wake, handlers = previous
    for sig, h in handlers.items():
        signal.signal(sig, h)
    signal.set_wakeup_fd(old_wake)

