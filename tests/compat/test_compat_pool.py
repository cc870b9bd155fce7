"""Charm4py's ``charm.pool`` through the layer: nested ``charm.pool.map`` in tasks (with
and without ``@coro``), in a main chare's constructor and a ``@threaded`` method,
``charm.pool.Task`` with ``ret=``/``awaitable=``/no future, and the refusal of a wait
in a plain entry method in Charm4py's words (real mpiexec jobs of 2 and 3 PEs)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from support.commands import clean_env

PROGRAM = """
from charm4py import charm, Chare, Array, Future, coro, threaded


def fib_serial(n):
    return n if n < 2 else fib_serial(n - 1) + fib_serial(n - 2)


@coro
def fib(n):  # Charm4py 1.1's way: a task that suspends is a @coro
    if n < 2:
        return n
    return sum(charm.pool.map(fib, [n - 1, n - 2]))


def fib_nested(n):  # older programs: allow_nested=True, no decorator
    if n < 2:
        return n
    return sum(charm.pool.map(fib_nested, [n - 1, n - 2], allow_nested=True))


def fib_task(n):  # tasks that start tasks and wait on their futures
    if n < 2:
        return n
    a = charm.pool.Task(fib_task, args=[n - 1], ret=True)
    b = charm.pool.Task(fib_task, args=[n - 2], ret=True)
    return a.get() + b.get()


def safe(cols, c):
    return all(c != q and abs(c - q) != len(cols) - i for i, q in enumerate(cols))


def queens_serial(n, cols=()):
    if len(cols) == n:
        return 1
    return sum(queens_serial(n, cols + (c,)) for c in range(n) if safe(cols, c))


def queens(n, cols, tally):  # a search tree that grows as it runs: Task without a future
    if len(cols) == 2:
        tally.add(queens_serial(n, cols))
        return
    for c in range(n):
        if safe(cols, c):
            charm.pool.Task(queens, args=[n, cols + (c,), tally])


def note(x, box):
    box.add(x)


class Tally(Chare):
    def __init__(self):
        self.total = 0

    def add(self, k):
        self.total += k

    def value(self):
        return self.total


class Worker(Chare):
    @threaded
    def fibs(self, n):
        return charm.pool.map(fib, range(n))

    def plain(self):
        return charm.pool.map(fib, [3])


class Main(Chare):
    def __init__(self, args):  # the main chare's constructor may wait (Charm4py runs it threaded)
        assert charm.pool.map(fib, range(10)) == [fib_serial(i) for i in range(10)]
        assert fib(11) == 89
        assert charm.pool.map(fib_nested, [12]) == [144]
        assert charm.pool.Task(fib_task, args=[11], ret=True).get() == 89
        print("ok nested maps and tasks")

        w = Array(Worker, 1)
        assert w[0].fibs(8, ret=True).get() == [fib_serial(i) for i in range(8)]
        print("ok threaded method")

        tally = Array(Tally, 1)
        queens(8, (), tally[0])
        charm.waitQD()
        assert tally[0].value(ret=True).get() == 92
        box = Array(Tally, 1)
        done = charm.pool.Task(note, args=[5, box[0]], awaitable=True)
        assert done.get() is None
        assert box[0].value(ret=True).get() == 5
        print("ok tasks without a future")

        try:
            w[0].plain(ret=True).get()
        except Exception as exc:
            print("refused:", type(exc).__name__, exc)
        charm.exit()


charm.start(Main)
"""


def _run(tmp_path, source: str, pes: int) -> subprocess.CompletedProcess:
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent(source))
    env = clean_env()
    env["SHOAL_DEADLOCK_TIMEOUT"] = "30"
    return subprocess.run([sys.executable, "-m", "shoal", "run", "-n", str(pes), "--compat", "charm4py", str(prog)],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)


@pytest.mark.mpi
@pytest.mark.parametrize("pes", [2, 3])
def test_nested_pool_maps_and_tasks_through_the_layer(tmp_path, pes: int) -> None:
    proc = _run(tmp_path, PROGRAM, pes)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for line in ("ok nested maps and tasks", "ok threaded method", "ok tasks without a future"):
        assert line in proc.stdout, proc.stdout + proc.stderr
    refusal = next(line for line in proc.stdout.splitlines() if line.startswith("refused:"))
    assert "BlockingCallError charm.pool.map() waits" in refusal and "@coro" in refusal, refusal
    assert "shoal" not in refusal, refusal  # Charm4py's words, not shoal's API


@pytest.mark.mpi
def test_a_failing_task_without_a_future_ends_the_job_naming_it(tmp_path) -> None:
    proc = _run(tmp_path, """
        from charm4py import charm

        def bad(x):
            raise ValueError(f"bad task {x}")

        def main(args):
            charm.pool.Task(bad, args=[7])
            charm.waitQD()
            print("not reached")
            charm.exit()

        charm.start(main)
    """, 2)
    assert proc.returncode != 0
    assert "not reached" not in proc.stdout
    assert "ValueError: bad task 7" in proc.stderr and "charm.pool.Task()" in proc.stderr, proc.stderr
