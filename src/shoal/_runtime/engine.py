"""The engine: starts PEs, runs the main program, loops, waits, and ends the job.

An engine drives one runtime (under MPI: this process's PE) or several (in-process:
all PEs of the job, stepped in turn in one thread, deterministically). It owns the
idle policy (poll while busy, back off when idle), the deadlock watchdog of the
main program and the reaction to fatal errors.
"""

from __future__ import annotations

import functools
import os
import sys
import time

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any, Callable, NoReturn, Sequence

from ..errors import DeadlockError, ShoalError, exit_code
from . import context
from ..settings import Settings, load_settings
from .context import current, set_current
from .._transport import open_transports
from .futures import _PENDING, Future, Task
from .memory import RELEASE_AFTER, RELEASE_IDLE, give_back
from .runtime import Runtime

__all__ = ["Engine", "run", "start", "exit", "call_later", "quiescence", "mpi_comm", "under_mpi_launcher", "launcher_size",
           "fatal_report"]

_LAUNCHER_VARS = ("PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS", "HYDRA_CONTROL_FD")


def under_mpi_launcher() -> bool:
    """Whether this process was started by mpiexec/srun (so MPI is the transport)."""
    if any(v in os.environ for v in _LAUNCHER_VARS):
        return True
    return int(os.environ.get("SLURM_NTASKS", "1")) > 1 and "SLURM_PROCID" in os.environ


def launcher_size() -> int | None:
    """The number of processes of the MPI job this process belongs to, from its launcher."""
    for var in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"):
        value = os.environ.get(var)
        if value and value.isdigit():
            return int(value)
    return None


_RETURNED = 'main returned, and this job (until="exit") ends only when a PE calls exit()'


class _Watch:
    """Deadlock watchdog: after a long idle wait, ask for quiescence; report if found."""

    def __init__(self, engine: "Engine", rt: Runtime, waiting: Callable[[], Future | None], what: str = ""):
        self.engine = engine
        self.what = what  # the report's first line (default: what main waits on)
        self.rt = rt
        self.waiting = waiting
        self.checking = False
        self.report: list[str] | None = None

    def __call__(self, idle: float) -> None:
        if self.checking or self.report is not None or idle < self.engine.settings.deadlock_timeout:
            return
        fut = self.waiting()
        if fut is None:
            return
        self.checking = True
        previous = set_current(self.rt)
        try:
            quiet = self.rt.quiescence()
        finally:
            set_current(previous)
        quiet.add_done_callback(lambda _: self._quiet(fut))

    def _quiet(self, fut: Future) -> None:
        if fut.done() or self.waiting() is not fut:
            self.checking = False
            self.engine.idle_since = None
            return
        report = Future()
        self.rt.system.report_waiting(report)
        report.add_done_callback(lambda r: self._set_report(fut, r.result()))

    def _set_report(self, fut: Future, lines: list[str]) -> None:
        self.report = [self.what or f"the main program waits on {fut!r}", *lines]
        self.checking = False

    def error(self) -> DeadlockError:
        assert self.report is not None
        text = "\n  ".join(self.report)
        return DeadlockError(
            "deadlock: no message is in flight on any PE and nothing can run, so these waits "
            f"can never end:\n  {text}"
        )


def _precise_sleeps() -> None:
    """Ask Linux for 1 us timer slack, so a PE's short naps end when asked (default: 50 us)."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(29, 1000, 0, 0, 0)  # PR_SET_TIMERSLACK, nanoseconds
    except (OSError, AttributeError):
        pass


def _trace_idle(rt: Runtime, seconds: float, since: float) -> None:
    """The idle period of ``seconds`` that ended ``since`` seconds ago, on the timeline
    (whose clock is perf_counter)."""
    end = time.perf_counter() - since
    assert rt.tracer is not None
    rt.tracer.idle(end - seconds, end)


class Engine:
    """Drives the runtimes of this process."""

    def __init__(
        self, transports: Sequence[Any], settings: Settings,
        clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
    ):
        self.settings = settings
        self.transports = list(transports)
        #: the idle policy's and the deadlock watch's time (tests inject their own)
        self.clock, self.sleep = clock, sleep
        self.runtimes = [Runtime(self, t, settings) for t in transports]
        self.idle_since: float | None = None
        self.released_at = 0  # messages sent and received when memory was last given back (_after_burst)
        self.until_exit = False  # run_main(until="exit"): main returning does not end the job
        cores = transports[0].node_cpus or (
            len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))
        local = transports[0].local_size
        self.yield_when_idle = settings.idle_yield == 1 or (settings.idle_yield == -1 and local > cores)
        if self.yield_when_idle:
            _precise_sleeps()

    # -- the loop ----------------------------------------------------------------
    def run_until(
        self, done: Callable[[], bool], watch: Callable[[float], None] | None = None, woken: bool = False,
    ) -> None:
        """Step every runtime until ``done()``, backing off while nothing happens. ``woken``:
        ``done()`` turns true only with a wakeup of a runtime (:attr:`Runtime.wakeups`) or
        in this loop's own Python (``watch``), so the compiled serve loop need not ask it
        after every message."""
        rts = self.runtimes
        spin, max_sleep = self.settings.idle_spin, self.settings.idle_sleep_max
        previous = set_current(rts[0])
        nap = last = 0.0  # last: when this loop last found nothing to do
        tracing = rts[0].tracer is not None if len(rts) == 1 else any(rt.tracer is not None for rt in rts)
        transports = self.transports
        moving = transports[0].in_flight if len(transports) == 1 else lambda: any(t.in_flight() for t in transports)
        self.idle_since = None
        wakeups = [rt.wakeups for rt in rts]
        serve_done = None if woken else done
        # the compiled serve loop reads the real clock, and keeps a timeline only where the
        # core records its waits (_native/trace.c)
        serves = self.clock is time.monotonic and (not tracing or all(rt.tracer is not None and rt.tracer.idle_in_core for rt in rts))
        try:
            while True:
                for woke in wakeups:  # emptied before done() is asked: a later wakeup is seen
                    woke.clear()
                if done():
                    break
                worked = False
                if len(rts) == 1:
                    worked = rts[0].step()
                else:
                    for rt in rts:
                        set_current(rt)
                        if rt.step():
                            worked = True
                if worked:
                    if self.idle_since is not None:  # idle until the last look, on every PE here
                        self._idle_ended(self.idle_since, last)
                    self.idle_since = None
                    nap = 0.0
                    continue
                now = last = self.clock()
                if self.idle_since is None:
                    self.idle_since = now
                    if self.yield_when_idle:
                        continue  # one more look before the first nap
                idle = now - self.idle_since  # else on to the wait below, which polls first
                if watch is not None:
                    watch(idle)
                if self.yield_when_idle:
                    # more PEs than cores here: never spin, nap from 20 us so a PE with work
                    # runs (the shortest nap while a large message moves: it needs our polls)
                    if idle > RELEASE_IDLE:
                        self._after_burst()
                    nap = 2e-5 if moving() else min(max(nap * 2, 2e-5), max_sleep)
                    self.sleep(nap)
                    last = self.clock()  # the nap was idle too: a message that came in it ends the idle here
                elif idle > spin and not moving():
                    if idle > RELEASE_IDLE:
                        self._after_burst()
                    nap = min(max(nap * 2, 2e-5), max_sleep)
                    self.sleep(nap)
                    last = self.clock()
                elif len(rts) == 1:
                    # spin inside the transport (on MPI_Test, if compiled), not round this loop
                    rt = rts[0]
                    budget = min(spin - idle, 1e-4)
                    if rt.timers:
                        budget = min(budget, rt.timers[0][0] - now)
                    if budget <= 0:
                        continue
                    served = rt.serve(budget, serve_done) if serves else None
                    if served is not None:
                        # messages handled in compiled code, one after the other, until this
                        # loop has work again: idle before the serve and between its messages
                        if served[0]:
                            rt.idle_time += now - self.idle_since + served[1]
                            if tracing:  # (the waits inside the serve: the core's record)
                                _trace_idle(rt, now - self.idle_since, self.clock() - now)
                            self.idle_since = served[2] or None  # a last wait that ended with none
                            if self.idle_since is not None:
                                last = self.clock()  # that wait found nothing until now (not the look before the serve)
                    elif rt.wait(budget):
                        # what arrives in the wait runs inside it: idle until the wait began
                        rt.idle_time += now - self.idle_since
                        if tracing:
                            _trace_idle(rt, now - self.idle_since, self.clock() - now)
                        self.idle_since = None
        finally:
            set_current(previous)
            wakeups[0].append("returned")  # a loop this one ran inside asks its done() again

    def _after_burst(self) -> None:
        """The PEs of this process have been idle a while: give memory back if a burst came since the last time."""
        messages = sum(rt.counts.received + rt.counts.sent for rt in self.runtimes)
        if messages - self.released_at > RELEASE_AFTER:
            self.released_at = messages
            give_back(self.runtimes)

    def _idle_ended(self, since: float, end: float) -> None:
        """This process's PEs were idle from ``since`` to ``end`` (engine clock)."""
        if end <= since:
            return
        for rt in self.runtimes:
            rt.idle_time += end - since
            if rt.tracer is not None:
                _trace_idle(rt, end - since, self.clock() - end)

    def wait_main(self, fut: Future) -> None:
        """Block the (synchronous) main program until ``fut`` resolves, or report a deadlock."""
        rt0 = self.runtimes[0]
        if len(self.runtimes) == 1 and not rt0.stopped:
            # while the PE has work, step it without the loop's set-up: a future the
            # work resolves (a local call, a broadcast's reply) returns sooner
            step = rt0.step
            while step() and not rt0.stopped:
                if fut._state != _PENDING:  # fut.done(), without the call
                    return
        watch = _Watch(self, rt0, lambda: fut)
        rt0.wake_on(fut)
        self.run_until(lambda: fut.done() or watch.report is not None or rt0.stopped, watch, woken=True)
        if fut.done():
            return
        if rt0.stopped:
            raise SystemExit(rt0.exit_code)  # shoal.exit() elsewhere ends the main program too
        raise watch.error()

    def wait_main_until(
        self, done: Callable[[], bool], deadline: float | None, waiting: Callable[[], Future | None]
    ) -> bool:
        """:meth:`wait_main` for any condition: serve until ``done()`` (True) or, with a
        ``deadline`` (on :attr:`clock`), until it passes (False; every PE steps at
        least once, so a zero timeout still serves what arrived); a deadlock is
        reported about the future ``waiting()`` returns (None: nothing to report)."""
        rt0 = self.runtimes[0]
        watch = _Watch(self, rt0, waiting)
        clock, stepped = self.clock, [False]

        def until() -> bool:
            if done() or watch.report is not None or rt0.stopped:
                return True
            if deadline is None or not stepped[0]:
                stepped[0] = True
                return False
            return clock() >= deadline

        self.run_until(until, watch)
        if done():
            return True
        if rt0.stopped:
            raise SystemExit(rt0.exit_code)
        if watch.report is not None:
            raise watch.error()
        return False

    def close(self) -> None:
        """End this process's part of the job: the runtimes stop serving, the transports close."""
        for rt in self.runtimes:
            rt.close()
        for t in self.transports:
            t.close()

    # -- the job -----------------------------------------------------------------
    def run_main(self, main: Callable[..., Any], args: list, until: str = "return") -> int:
        """Run ``main(args)`` on PE 0, serve messages everywhere, return the exit code.
        The job ends when main returns, or with ``until="exit"`` when a PE calls
        :func:`exit` (a job with nothing left to do then ends with a deadlock report)."""
        if until not in ("return", "exit"):
            raise ValueError(f"until={until!r}: the job ends when main returns (\"return\") or at shoal.exit() (\"exit\")")
        self.until_exit = until == "exit"
        rt0 = self.runtimes[0]
        if self.settings.restart:
            self._restart(self.settings.restart)
        rt0.last_checkpoint = time.monotonic()  # checkpoint_point() counts from main's start
        if len(self.runtimes) == 1:
            stopped = lambda: rt0.stopped  # noqa: E731
        else:
            stopped = lambda: all(rt.stopped for rt in self.runtimes)  # noqa: E731
        if rt0.pe != 0:
            self._serve(stopped)
            return self.runtimes[0].exit_code
        previous = set_current(rt0)
        try:
            if _is_async(main):
                self._run_async_main(rt0, main, args, stopped)
            else:
                self._run_sync_main(rt0, main, args, stopped)
        finally:
            set_current(previous)
        return rt0.exit_code

    def _restart(self, path: str) -> None:
        """Rebuild the collections of checkpoint ``path`` on every PE here before main runs."""
        from .checkpoint import read_main_state, restore

        for rt in self.runtimes:
            previous = set_current(rt)
            started = time.perf_counter()
            try:
                restore(rt, path)
                rt.restore_seconds = time.perf_counter() - started
                if rt.pe == 0:
                    rt.restart_state = read_main_state(path)
            except ShoalError as exc:
                self.fatal(rt, exc, f"restarting from {path}")
            finally:
                set_current(previous)

    def _serve(self, stopped: Callable[[], bool]) -> None:
        try:
            self.run_until(stopped, woken=True)
        except BaseException as exc:  # noqa: BLE001
            self.fatal(self.runtimes[0], exc, "the shoal runtime")

    def _run_sync_main(self, rt0: Runtime, main: Callable[..., Any], args: list, stopped: Callable[[], bool]) -> None:
        try:
            main(args)
        except SystemExit as exc:
            rt0.request_exit(exit_code(exc))
        except BaseException as exc:  # noqa: BLE001
            self.fatal(rt0, exc, f"the main program ({getattr(main, '__qualname__', main)})")
        else:
            self._returned(rt0, stopped)
        self._serve(stopped)

    def _returned(self, rt0: Runtime, stopped: Callable[[], bool]) -> None:
        """Main returned: end the job, or serve until some PE calls :func:`exit`."""
        if not self.until_exit:
            rt0.request_exit(0)
            return
        never = Future.local(rt0, "shoal.exit()")
        watch = _Watch(self, rt0, lambda: never, _RETURNED)
        try:
            self.run_until(lambda: stopped() or watch.report is not None, watch, woken=True)
        except BaseException as exc:  # noqa: BLE001
            self.fatal(rt0, exc, "the shoal runtime")
        if watch.report is not None:
            self.fatal(rt0, watch.error(), "the job")

    def _run_async_main(self, rt0: Runtime, main: Callable[..., Any], args: list, stopped: Callable[[], bool]) -> None:
        where = f"the main program ({main.__qualname__})"

        returned = Future.local(rt0, "shoal.exit()")  # what is awaited once main has returned

        def finished(value: Any, exc: BaseException | None) -> None:
            if exc is None:
                if not self.until_exit:
                    rt0.request_exit(0)
                watch.what = _RETURNED
            elif isinstance(exc, SystemExit):
                rt0.request_exit(exit_code(exc))
            else:
                self.fatal(rt0, exc, where)

        task = Task(rt0, main(args), finished, where)
        rt0.main_coro = task.coro  # its steps run at depth 1, as an entry method's do (checkpoint.py tells them apart)
        rt0.ready.append(task.step)
        watch = _Watch(self, rt0, lambda: task.waiting or (returned if watch.what else None))
        while not stopped():
            try:
                self.run_until(lambda: stopped() or watch.report is not None, watch, woken=True)
            except BaseException as exc:  # noqa: BLE001
                self.fatal(rt0, exc, "the shoal runtime")
            if watch.report is not None:
                error, watch.report = watch.error(), None
                if watch.what:  # main returned; nothing will ever call exit()
                    self.fatal(rt0, error, "the job")
                previous = set_current(rt0)
                try:
                    task.throw(error)
                finally:
                    set_current(previous)

    def fatal(self, rt: Runtime, exc: BaseException, where: str) -> NoReturn:
        """End the whole job because of ``exc``; the default re-raises (in-process), marked
        with the PE and the place (:func:`fatal_origin`), which ``shoal run`` reports as
        the MPI engine does."""
        if getattr(exc, "_shoal_fatal", None) is None:  # the first place it ended the job: its origin
            try:
                exc._shoal_fatal = (rt.pe, where)  # type: ignore[attr-defined]
            except (AttributeError, TypeError):
                pass  # an exception that takes no attributes: reported without them
        raise exc


class MPIEngine(Engine):
    """One PE per process; a fatal error aborts every process of the job."""

    def fatal(self, rt: Runtime, exc: BaseException, where: str) -> NoReturn:
        from ..jobwatch import describe, note_fatal
        from .tracebacks import format_user

        text = format_user(exc)  # without shoal's own frames (SHOAL_DEBUG=1 keeps them)
        interrupted = isinstance(exc, KeyboardInterrupt)
        what = f"interrupted by SIGINT in {where}" if interrupted else f"unhandled exception in {where}"
        origin = _raised_elsewhere(exc, rt.pe, where)
        note_fatal(f"{what}{origin}: {describe(exc)}")  # for shoal run's summary
        sys.stdout.flush()
        os.write(2, f"shoal: PE {rt.pe}: {what}; ending the job\n{text}".encode())
        time.sleep(0.25)  # let the launcher forward the report before abort kills the job
        code = 130 if interrupted else 1
        rt.transport.abort(code)
        # MPICH's MPI_Abort may return before its launcher kills this process: unwinding
        # would run the program's handlers and report shoal's own exit as the program's
        os._exit(code)


def fatal_report(exc: BaseException) -> tuple[str, str, int] | None:
    """What ended an in-process job with ``exc`` (:meth:`Engine.fatal`), as the MPI engine
    says it: the report (``shoal: PE n: unhandled exception in …; ending the job`` and the
    traceback without shoal's frames), the summary ``shoal run`` ends with, and the exit
    code; None if ``exc`` did not end a job."""
    origin = getattr(exc, "_shoal_fatal", None)
    if origin is None:
        return None
    from ..jobwatch import describe
    from .tracebacks import format_user

    pe, where = origin
    interrupted = isinstance(exc, KeyboardInterrupt)
    what = f"interrupted by SIGINT in {where}" if interrupted else f"unhandled exception in {where}"
    code = 130 if interrupted else 1
    summary = f"the job failed (exit code {code}): PE {pe}: {what}{_raised_elsewhere(exc, pe, where)}: {describe(exc)}"
    return f"shoal: PE {pe}: {what}; ending the job\n{format_user(exc)}", summary, code


def _raised_elsewhere(exc: BaseException, pe: int, where: str) -> str:
    """``, raised on PE 1 in W.f of element (3,)`` where ``exc`` came from another PE or
    place than the one it ends the job from (a future's waiter), else ``""``."""
    for note in getattr(exc, "__notes__", ()):
        if isinstance(note, str) and note.startswith("[shoal] raised on PE "):
            origin = note.split(":\n", 1)[0].removeprefix("[shoal] ")
            return "" if origin == f"raised on PE {pe} in {where}" else f", {origin}"
    return ""


def run(
    main: Callable[..., Any], args: list | None = None, settings: Settings | None = None,
    until: str = "return", **options: Any,
) -> int:
    """Run a shoal program in this process and return its exit code.

    ``options`` override settings (``transport="inproc", pes=3``); this is what
    :func:`start` and the tests use. ``until`` as for :func:`start`.
    """
    if context._current is not None:
        raise ShoalError(
            f"shoal.start()/shoal.run() called inside a running shoal program (on PE {context._current.pe}); "
            "a process runs one job: call shoal.start(main) once, at the top level of the program"
        )
    engine = open_engine(settings or load_settings(**options))
    code = engine.run_main(main, list(sys.argv if args is None else args), until)
    engine.close()
    return code


def open_engine(settings: Settings) -> Engine:
    """The engine of a new job in this process: its transport chosen (``settings.transport``,
    else MPI under an MPI launcher, else in-process), opened, and every PE up."""
    name = settings.transport or ("mpi" if under_mpi_launcher() else "inproc")
    transports = open_transports(name, settings)
    engine = (MPIEngine if name == "mpi" else Engine)(transports, settings)
    for t in transports:
        t.barrier()
    if name == "mpi":
        _watch_peers(transports[0], settings)
    return engine


def _watch_peers(transport: Any, settings: Settings) -> None:
    """Under mpiexec/srun without ``shoal run``: end the job when another PE's process dies,
    rather than wait for it forever (:func:`shoal.jobwatch.watch_peers`), saying how to
    resume from the last checkpoint (:func:`.checkpoint.after_death`)."""
    from .._transport.mpi_library import exchange_ring
    from ..jobwatch import watch_peers

    def advice() -> tuple[int, str]:
        from .checkpoint import after_death  # only once a PE died

        return after_death(settings, transport.size)

    watch_peers(transport.rank, transport.size, exchange_ring, advice)


def _is_async(fn: Any) -> bool:
    """``inspect.iscoroutinefunction(fn)``, without importing :mod:`inspect` (a few
    milliseconds of every PE's start-up): functions, methods and partials of them."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    return code is not None and bool(code.co_flags & 0x80)  # CO_COROUTINE


def start(main: Callable[..., Any], until: str = "return") -> NoReturn:
    """Run ``main(args)`` on PE 0 once every PE is up; end the process with the job's exit code.

    The job ends when main returns (``until="return"``), or, with ``until="exit"``, when
    some PE calls :func:`shoal.exit` (main may return early, leaving chares at work);
    such a job that runs out of work without calling it ends with a deadlock report.
    An error that ends an in-process job is reported as under MPI (``fatal_report``).
    """
    try:
        code = run(main, until=until)
    except BaseException as exc:
        report = fatal_report(exc)
        if report is None or isinstance(exc, KeyboardInterrupt):  # Ctrl-C: Python's own, or shoal run's line
            raise
        text, last, code = report
        sys.stdout.flush()
        sys.stderr.write(text + (f"shoal run: {last}\n" if in_process_summary else ""))
    sys.exit(code)


#: set by ``shoal run --transport inproc``: an in-process job that an error ended ends
#: its report with ``shoal run``'s summary line, as a job under mpiexec does
in_process_summary = False


def exit(code: Any = 0) -> NoReturn:
    """End the job on every PE with exit code ``code`` (from any PE, main or entry method):
    an int from 0 to 255; None as 0; anything else, as ``sys.exit`` does, printed (once,
    by this PE) and 1."""
    rt = current("shoal.exit()")
    if isinstance(code, int) and not 0 <= code <= 255:  # the process would end with code % 256
        raise ValueError(f"shoal.exit({code!r}): an exit code is 0 to 255")
    status = exit_code(SystemExit(code))  # a message is printed here, and only here
    rt.request_exit(status)
    raise SystemExit(status)


def call_later(delay: float, fn: Callable[..., Any], *args: Any) -> None:
    """Call ``fn(*args)`` on this PE after ``delay`` seconds; until it has run, the job
    is not quiescent. An error in it ends the job, as one in an entry method does."""
    rt = current("shoal.call_later()")
    rt.program_timers += 1

    def fire() -> None:
        rt.program_timers -= 1
        try:
            fn(*args)
        except SystemExit as exc:
            rt.request_exit(exit_code(exc))
        except BaseException as exc:  # noqa: BLE001
            rt.fail(exc, f"the timer {getattr(fn, '__qualname__', fn)!s}")

    rt.call_later(delay, fire)


def quiescence() -> Future:
    """A future that resolves when no message is in flight anywhere and nothing can run."""
    return current("shoal.quiescence()").quiescence()


def mpi_comm() -> Any:
    """A private duplicate of ``MPI.COMM_WORLD`` for the program's own mpi4py calls.

    Enter an MPI phase from a broadcast: every PE runs the collective inside the
    entry method, after forwarding the broadcast, so no PE waits on one that has not
    heard of the phase yet.
    """
    rt = current("shoal.mpi_comm()")
    user_comm = getattr(rt.transport, "user_comm", None)
    if user_comm is None:
        raise ShoalError(f"shoal.mpi_comm() needs the MPI transport; this job runs on {rt.transport.name!r}")
    return user_comm(patience=max(5 * rt.settings.deadlock_timeout, 1.0))


