"""Nested parallelism in the task pool: tasks that call ``pool.map`` and wait on other
tasks however deep the recursion, tasks that start tasks (``submit``, ``spawn``), and
``map`` in threaded entry methods and constructors; checked against serial results.

Each scenario is a ``case_*`` main program, checked with asserts inside it; it runs
in-process and under real mpiexec on 2 and 3 PEs.
"""

from __future__ import annotations

import concurrent.futures as cf
import sys
import time
from pathlib import Path

import pytest
from support import TESTS
from support.jobs import run_inproc

import shoal
from shoal.pool._spawn import Spread

# -- tasks ------------------------------------------------------------------------


def fib_serial(n: int) -> int:
    return n if n < 2 else fib_serial(n - 1) + fib_serial(n - 2)


def fib_map(n: int) -> int:
    """Every call but the leaves is a pool.map of two tasks, down to depth n."""
    if n < 2:
        return n
    return sum(shoal.pool.map(fib_map, [n - 1, n - 2]))


def fib_submit(n: int) -> int:
    """Each call starts its two children with futures and waits on them."""
    if n < 2:
        return n
    a, b = shoal.pool.submit(fib_submit, n - 1), shoal.pool.submit(fib_submit, n - 2)
    return a.get() + b.get()


def chain(n: int) -> int:
    """A chain of nested tasks n deep, each waiting on the next (map, then submit)."""
    if n == 0:
        return 0
    if n % 2:
        return 1 + shoal.pool.map(chain, [n - 1])[0]
    return 1 + shoal.pool.submit(chain, n - 1).get()


def _safe(cols: tuple, c: int) -> bool:
    r = len(cols)
    return all(c != q and abs(c - q) != r - i for i, q in enumerate(cols))


def queens_serial(n: int, cols: tuple = ()) -> int:
    if len(cols) == n:
        return 1
    return sum(queens_serial(n, cols + (c,)) for c in range(n) if _safe(cols, c))


def queens_map(job: tuple) -> int:
    """A board's solutions: the next rows as nested pool.map tasks down to ``split`` rows."""
    n, split, cols = job
    if len(cols) >= split:
        return queens_serial(n, cols)
    return sum(shoal.pool.map(queens_map, [(n, split, cols + (c,)) for c in range(n) if _safe(cols, c)]))


def queens_spawn(n: int, split: int, cols: tuple, tally) -> None:
    """A search tree that grows as it runs: each node spawns its children (no future);
    the leaves add their counts to a tally chare."""
    if len(cols) >= split:
        tally.add(queens_serial(n, cols))
        return
    for c in range(n):
        if _safe(cols, c):
            shoal.pool.spawn(queens_spawn, n, split, cols + (c,), tally)


def _boom(x):
    raise ValueError(f"bad leaf {x}")


def _nested_failure(x):
    return shoal.pool.map(_boom, [x])


def _slow(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
    return seconds


def executor_in_task(n: int) -> list:
    """A task that waits on an Executor's futures: result(), as_completed, a timeout."""
    with shoal.Executor() as ex:
        futs = [ex.submit(fib_serial, k) for k in range(n)]
        assert sorted(f.result() for f in cf.as_completed(futs)) == sorted(fib_serial(k) for k in range(n))
        slow = ex.submit(_slow, 0.01)
        try:  # no reply can come before this thread lets its PE poll: a timeout of 0 expires
            slow.result(timeout=0)
        except cf.TimeoutError:
            timed_out = True
        else:
            timed_out = False
        assert slow.result() == 0.01
        return [f.result() for f in futs] + [timed_out]


class Tally(shoal.Chare):
    def __init__(self):
        self.total = 0

    def add(self, k):
        self.total += k

    def value(self):
        return self.total


class Driver(shoal.Chare):
    @shoal.threaded
    def __init__(self, n, done):
        done.send(shoal.pool.map(fib_map, range(n)))  # a threaded constructor, as a main chare's

    @shoal.threaded
    def queens(self, n):
        return queens_map((n, 2, ()))

    def plain(self):
        shoal.pool.map(fib_map, [3])


# -- cases (main programs) ----------------------------------------------------------


def case_fib(args):
    assert fib_map(11) == fib_serial(11) == 89  # called by the main program: its maps nest below
    assert shoal.pool.map(fib_map, range(12)) == [fib_serial(i) for i in range(12)]
    assert shoal.pool.submit(fib_submit, 12).get() == fib_serial(12)
    assert chain(300) == 300  # 300 tasks waiting at once, one inside the other
    print("ok fib")


def case_queens(args):
    for n in (6, 8):
        assert shoal.pool.map(queens_map, [(n, 3, ())]) == [queens_serial(n)]
    tally = shoal.Array(Tally, 1)
    queens_spawn(8, 2, (), tally[0])
    shoal.quiescence().get()
    assert tally[0].value(ret=True).get() == queens_serial(8) == 92
    print("ok queens")


def case_threaded(args):
    done = shoal.Future()
    d = shoal.Array(Driver, 1, args=(10, done), placement=lambda index, npes: npes - 1)
    assert done.get() == [fib_serial(i) for i in range(10)]
    assert d[0].queens(7, ret=True).get() == queens_serial(7) == 40
    with pytest.raises(shoal.BlockingCallError, match=r"shoal\.pool\.map\(\) blocks.*@shoal\.threaded"):
        d[0].plain(ret=True).get()
    with pytest.raises(ValueError, match="bad leaf 3"):  # an error deep down reaches the top
        shoal.pool.map(_nested_failure, [3])
    out = shoal.pool.map(executor_in_task, [8, 6])
    assert out == [[fib_serial(k) for k in range(8)] + [True], [fib_serial(k) for k in range(6)] + [True]], out
    print("ok threaded")


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}

PROGRAM = f"""
import sys
sys.path[:0] = [{str(Path(__file__).parent)!r}, {str(TESTS)!r}]  # the test and support
import shoal, test_pool_nested
shoal.start(test_pool_nested.CASES[sys.argv[1]])
"""


# -- in-process ---------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("pes", [2, 3])
def test_nested_pool_inproc(case, pes, capsys):
    assert run_inproc(CASES[case], pes=pes, deadlock_timeout=30) == 0
    assert f"ok {case}" in capsys.readouterr().out


def test_spread_sends_to_the_pe_with_fewest_tasks_in_flight_in_turn():
    spread = Spread(3, 1)
    assert [spread.take() for _ in range(4)] == [2, 0, 1, 2]
    spread.give(0)
    assert spread.take() == 0
    solo = Spread(1, 0)
    assert [solo.take(), solo.take()] == [0, 0]


# -- under mpiexec ------------------------------------------------------------------


@pytest.mark.mpi
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("pes", [2, 3])
def test_nested_pool_mpi(mpi_job, case, pes):
    job = mpi_job(PROGRAM, n=pes, args=(case,), env={"SHOAL_DEADLOCK_TIMEOUT": "30"}, timeout=120)
    assert job.returncode == 0, job
    assert f"ok {case}" in job.stdout, job


if __name__ == "__main__":  # pragma: no cover - a quick manual run
    shoal.start(CASES[sys.argv[1]])
