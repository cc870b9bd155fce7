"""The task pool and shoal.Executor: concurrent.futures semantics, broken pools,
balance over the PEs and errors in the user's words.

Each scenario is a ``case_*`` main program below, checked with asserts inside it; it
runs in-process (``run_inproc``) and under real mpiexec (``mpi_job`` starts a program
that imports this module and runs the case named on its command line).
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import sys
import threading
import time
from pathlib import Path

import pytest
from support import TESTS
from support.jobs import run_inproc

import shoal
from shoal.pool import BrokenPool
from shoal.pool._tasks import Slots

# -- tasks ------------------------------------------------------------------------


def _square(x):
    return x * x


def _fail(x):
    raise ValueError(f"bad {x}")


def _busy(seconds):
    """CPU work (not sleep: a sleeping PE would free its core for the others)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
    return shoal.my_pe()


def _exit_with(code):
    sys.exit(code)


def _end_job(code):
    shoal.exit(code)


async def _never(*_):
    await shoal.Future()  # nothing ever resolves it: a task that never finishes


async def _async_square(x):
    return x * x


# -- cases (main programs) ----------------------------------------------------------


def case_cf(args):
    with shoal.Executor() as ex:
        futs = [ex.submit(_square, i) for i in range(8)]
        assert sorted(f.result() for f in cf.as_completed(futs)) == [i * i for i in range(8)]
        done, not_done = cf.wait([ex.submit(_square, i) for i in range(8)])
        assert len(done) == 8 and not not_done
        done, _ = cf.wait([ex.submit(_square, i) for i in range(4)], return_when=cf.FIRST_COMPLETED)
        assert done
        futs = [ex.submit(_fail, 1)] + [ex.submit(_square, i) for i in range(3)]
        done, _ = cf.wait(futs, return_when=cf.FIRST_EXCEPTION)
        assert futs[0] in done and str(futs[0].exception()) == "bad 1"
        assert "in pool task _fail" in futs[0].exception().__notes__[0]  # the user's function, not the worker
        seen = []
        f = ex.submit(_square, 5)
        f.add_done_callback(seen.append)
        assert f.result() == 25 and seen == [f]
        f.add_done_callback(seen.append)  # already done: called at once
        assert seen == [f, f]
        assert list(ex.map(_square, range(5), timeout=60)) == [0, 1, 4, 9, 16]
        with cf.ThreadPoolExecutor(1) as threads:  # one wait over both kinds of future
            mixed = [threads.submit(time.sleep, 0.01), ex.submit(_square, 3)]
            assert len(cf.wait(mixed).done) == 2
        assert ex.submit(_async_square, 6).result() == 36  # async tasks run as coroutines
        f = ex.submit(_square, 7)
        while not f.done():  # a polling loop makes progress: a zero timeout still serves
            cf.wait([f], timeout=0)
        assert f.result(timeout=0) == 49
    assert shoal.pool.map(_async_square, range(4), chunksize=3) == [0, 1, 4, 9]
    with pytest.raises(ValueError, match="chunksize"):
        shoal.pool.map(_square, [1], chunksize=0)
    with pytest.raises(RuntimeError, match="after shutdown"):
        ex.submit(_square, 1)
    print("ok cf")


def case_timeouts(args):
    ex = shoal.Executor()
    stuck = ex.submit(_never)
    with pytest.raises(TimeoutError):
        stuck.result(timeout=0.05)
    with pytest.raises(TimeoutError):
        stuck.exception(timeout=0)
    quick = ex.submit(_square, 4)
    assert quick.result() == 16
    done, not_done = cf.wait([stuck, quick], timeout=0.05)
    assert done == {quick} and not_done == {stuck}
    done, not_done = cf.wait([stuck, quick], timeout=0.05, return_when=cf.FIRST_COMPLETED)
    assert done == {quick}
    finished = []
    with pytest.raises(TimeoutError):
        for f in cf.as_completed([stuck, quick], timeout=0.05):
            finished.append(f)
    assert finished == [quick]
    with pytest.raises(TimeoutError):
        list(ex.map(_never, [1], timeout=0.05))
    # more tasks than the PEs have room for wait in the executor: those can be cancelled
    running = [ex.submit(_never) for _ in range(8)]
    late = ex.submit(_square, 2)
    assert late.cancel() and late.cancelled() and not running[0].cancel()
    with pytest.raises(cf.CancelledError):
        late.result()
    if "mpi" in args:  # the reproducer: a long task on another PE, a short timeout
        slow = shoal.Executor().submit(_busy, 1.0)  # a fresh executor sends to PE 1 first
        with pytest.raises(TimeoutError):
            slow.result(timeout=0.05)
        assert slow.result() == 1
    ex.shutdown(wait=False, cancel_futures=True)
    print("ok timeouts")


def case_sys_exit(args):
    ex = shoal.Executor()
    bad = ex.submit(_exit_with, 3)
    later = [ex.submit(_busy, 0.05) for _ in range(20)]
    with pytest.raises(BrokenPool, match=r"task _exit_with called sys.exit\(3\) on PE \d"):
        bad.result()
    assert isinstance(bad.exception(), cf.BrokenExecutor)
    assert all(f.exception() is None or isinstance(f.exception(), BrokenPool) for f in later)
    assert "_busy had not started" in str(later[-1].exception())
    with pytest.raises(BrokenPool, match="cannot submit _square to a broken shoal.Executor"):
        ex.submit(_square, 1)
    ex.shutdown()
    with pytest.raises(BrokenPool, match=r"_exit_with called sys.exit\(5\)"):
        shoal.pool.map(_exit_with, [5, 5, 5])
    assert shoal.pool.map(_square, range(4)) == [0, 1, 4, 9]  # each map is a pool of its own
    print("ok sys.exit")


def case_uncaught_sys_exit(args):
    shoal.Executor().submit(_exit_with, 2).result()


def case_shoal_exit(args):
    ex = shoal.Executor()
    futs = [ex.submit(_end_job, 7)] + [ex.submit(_busy, 0.05) for _ in range(20)]
    try:
        for f in futs:
            f.result()
    finally:
        errors = {type(f.exception()).__name__ for f in futs if f.done()}
        print(f"all done: {all(f.done() for f in futs)}; errors: {sorted(errors)}", flush=True)
    print("not reached")


def case_map_shoal_exit(args):
    shoal.pool.map(_end_job, [4, 4, 4])
    print("not reached")


def case_balance(args):
    with shoal.Executor() as ex:
        for name, run in (
            ("map", lambda: shoal.pool.map(_busy, [0.004] * 64)),
            ("Executor", lambda: [f.result() for f in cf.as_completed([ex.submit(_busy, 0.004) for _ in range(64)])]),
        ):
            counts = collections.Counter(run())
            print(f"{name}: tasks per PE {dict(sorted(counts.items()))}")
            assert sum(counts.values()) == 64 and max(counts.values()) <= 0.7 * 64, counts
    print("ok balance")


def case_pickling(args):
    lock = threading.Lock()
    with pytest.raises(TypeError, match=r"shoal\.pool\.map\(\): cannot send item 2 \(lock\) to the PEs") as info:
        shoal.pool.map(_square, [1, 2, lock])
    assert "_Worker" not in str(info.value) and "pass values that pickle" in str(info.value)
    with shoal.Executor() as ex:
        err = ex.submit(_square, lock).exception()
        assert isinstance(err, TypeError) and "shoal.Executor.submit(): cannot send argument 0 (lock)" in str(err)
        err = ex.submit(lambda: lock).exception()  # a closure over a lock: no pickler can send it
        assert "cannot send the function" in str(err) and "module level" in str(err), err
        assert ex.submit(_square, 3).result() == 9
    print("ok pickling")


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}

PROGRAM = f"""
import sys
sys.path[:0] = [{str(Path(__file__).parent)!r}, {str(TESTS)!r}]  # the test and support
import shoal, test_pool
shoal.start(test_pool.CASES[sys.argv[1]])
"""


def _mpi(mpi_job, case, *args, **env):
    return mpi_job(PROGRAM, n=2, args=(case, *args), env={k.upper(): v for k, v in env.items()})


# -- in-process ---------------------------------------------------------------------


@pytest.mark.parametrize("case", ["cf", "sys_exit", "balance", "pickling"])
def test_cases_inproc(case, capsys):
    assert run_inproc(CASES[case], pes=2) == 0
    assert f"ok {case.replace('_', '.')}" in capsys.readouterr().out


def test_timeouts_and_cancel_inproc(capsys):
    assert run_inproc(case_timeouts, pes=2, deadlock_timeout=60) == 0
    assert "ok timeouts" in capsys.readouterr().out


def test_uncaught_sys_exit_in_task_fails_the_main_program_inproc():
    with pytest.raises(BrokenPool, match=r"task _exit_with called sys.exit\(2\) on PE \d"):
        run_inproc(case_uncaught_sys_exit, pes=2)


@pytest.mark.parametrize("case, code", [("shoal_exit", 7), ("map_shoal_exit", 4)])
def test_shoal_exit_in_task_ends_the_job_with_its_code_inproc(case, code, capsys):
    assert run_inproc(CASES[case], pes=2) == code
    out = capsys.readouterr().out
    assert "not reached" not in out
    if case == "shoal_exit":
        assert "all done: True; errors: ['BrokenPool'" in out


def test_a_task_that_never_finishes_is_a_deadlock_not_a_hang():
    def main(args):
        f = shoal.Executor().submit(_never)
        with pytest.raises(shoal.DeadlockError):
            f.result()
        with pytest.raises(shoal.DeadlockError):
            next(cf.as_completed([f]))

    assert run_inproc(main, pes=2) == 0


def test_blocking_waits_are_refused_in_async_code():
    async def main(args):
        ex = shoal.Executor()
        f = ex.submit(_square, 2)
        with pytest.raises(shoal.BlockingCallError, match="async"):
            cf.wait([f])
        with pytest.raises(shoal.BlockingCallError, match="async"):
            next(cf.as_completed([f]))
        with pytest.raises(shoal.BlockingCallError, match="async"):
            f.result(timeout=1)
        with pytest.raises(TypeError, match=r"map_async\(\): cannot send item 0 \(lock\)"):
            await shoal.pool.map_async(_square, [threading.Lock()])
        assert await shoal.pool.map_async(_square, [3]) == [9]
        ex.shutdown(wait=False)

    assert run_inproc(main, pes=2) == 0


def test_slots_pick_the_least_busy_pe_other_pes_first():
    slots = Slots(3, 0, shared_thread=False)  # PE 0 runs main: one task at a time here
    assert [slots.take(backlog=2) for _ in range(6)] == [1, 2, 0, 1, 2, None]
    slots.give(0)
    slots.give(2)
    assert [slots.take(backlog=2) for _ in range(3)] == [0, 2, None]  # PE 0 (none in flight) before PE 2 (one)
    assert [slots.take(backlog=9) for _ in range(3)] == [1, 2, None]  # many waiting: a third each
    solo = Slots(1, 0, shared_thread=False)
    assert [solo.take(5), solo.take(5)] == [0, None]
    inproc = Slots(2, 1, shared_thread=True)  # every PE steps in turn: two each, no third
    assert [inproc.take(backlog=9) for _ in range(5)] == [0, 1, 0, 1, None]


# -- under mpiexec ------------------------------------------------------------------


@pytest.mark.mpi
@pytest.mark.parametrize("case", ["cf", "sys_exit", "balance", "pickling"])
def test_cases_mpi(mpi_job, case):
    job = _mpi(mpi_job, case)
    assert job.returncode == 0, job
    assert f"ok {case.replace('_', '.')}" in job.stdout, job


@pytest.mark.mpi
def test_timeouts_and_cancel_mpi(mpi_job):
    job = _mpi(mpi_job, "timeouts", "mpi", shoal_deadlock_timeout="60")
    assert job.returncode == 0, job
    assert "ok timeouts" in job.stdout


@pytest.mark.mpi
def test_uncaught_sys_exit_in_task_ends_the_job_non_zero_mpi(mpi_job):
    job = _mpi(mpi_job, "uncaught_sys_exit")
    assert job.returncode != 0, job
    assert "BrokenPool: task _exit_with called sys.exit(2) on PE 1" in job.stderr, job


@pytest.mark.mpi
@pytest.mark.parametrize("case, code", [("shoal_exit", 7), ("map_shoal_exit", 4)])
def test_shoal_exit_in_task_ends_the_job_with_its_code_mpi(mpi_job, case, code):
    job = _mpi(mpi_job, case)
    assert job.returncode == code, job
    assert "not reached" not in job.stdout
    if case == "shoal_exit":
        assert "all done: True; errors: ['BrokenPool'" in job.stdout, job

