"""The task pool: run plain functions on every PE of the job.

    shoal run -n 2 examples/pool.py            # synchronous main: pool.map and Executor
    shoal run -n 2 examples/pool.py --async    # async main: await pool.map_async
    shoal run -n 2 --transport inproc examples/pool.py

No chares to write: ``shoal.pool.map(fn, items)`` is ``[fn(x) for x in items]`` with
the calls spread over the PEs (whichever PE finishes a task gets the next one, so
uneven tasks balance themselves). ``shoal.Executor`` is a
``concurrent.futures.Executor`` over the same workers: its futures work with
``concurrent.futures.wait``/``as_completed`` and timeouts. Functions and items are
pickled, so define functions at module level. ``pool.map`` and ``Future.result()``
block, so use them from a plain ``def main``; in ``async`` code, ``await
shoal.pool.map_async(...)`` instead.
"""

import concurrent.futures as cf
import math
import sys

import shoal


def collatz_steps(n):
    """Steps for n to reach 1 under the Collatz map (uneven work per item)."""
    steps = 0
    while n != 1:
        n = 3 * n + 1 if n % 2 else n // 2
        steps += 1
    return steps


def where(x):
    return x, shoal.my_pe()  # any shoal accessor works inside pool tasks


def hypot(a, b):
    return math.hypot(a, b)


N = 2000
EXPECTED = [collatz_steps(n) for n in range(1, N + 1)]  # computed serially, to check


def main(args):
    # pool.map: chunks of 100 items at a time, in parallel, results in input order.
    steps = shoal.pool.map(collatz_steps, range(1, N + 1), chunksize=100)
    assert steps == EXPECTED
    print(f"pool.map: longest Collatz chain below {N + 1} starts at {steps.index(max(steps)) + 1}")
    pes = sorted({pe for _, pe in shoal.pool.map(where, range(4 * shoal.num_pes()))})
    print(f"pool.map: tasks ran on PEs {pes}")

    # Executor: submit/map/shutdown, as with concurrent.futures.ProcessPoolExecutor.
    with shoal.Executor() as ex:  # leaving the block calls ex.shutdown(wait=True)
        fut = ex.submit(hypot, 3.0, 4.0)  # calls go to whichever PE has room
        lengths = list(ex.map(hypot, [5.0, 8.0], [12.0, 15.0]))
        print(f"Executor: hypot(3, 4) = {fut.result(timeout=60)}, map -> {lengths}")
        assert fut.result() == 5.0 and lengths == [13.0, 17.0]
        futs = {ex.submit(collatz_steps, n): n for n in (27, 97, 871)}
        for f in cf.as_completed(futs):  # in the order they finish
            assert f.result() == EXPECTED[futs[f] - 1]
        print(f"Executor: as_completed -> {sorted(f.result() for f in futs)}")
        bad = ex.submit(hypot, "three", 4.0)  # an error in a task comes back to the caller
        print(f"Executor: a failing task -> {type(bad.exception()).__name__}: {bad.exception()}")
    print("pool: OK")


async def async_main(args):
    # map_async returns a shoal.Future: await it, or start several and gather them.
    steps = await shoal.pool.map_async(collatz_steps, range(1, N + 1), chunksize=100)
    assert steps == EXPECTED
    evens, odds = await shoal.gather(
        shoal.pool.map_async(collatz_steps, range(2, N + 1, 2), chunksize=100),
        shoal.pool.map_async(collatz_steps, range(1, N + 1, 2), chunksize=100),
    )
    assert evens == EXPECTED[1::2] and odds == EXPECTED[0::2]
    print(f"pool.map_async: {len(steps)} results, {len(evens)} + {len(odds)} from two maps at once")
    print("pool: OK")


if __name__ == "__main__":
    shoal.start(async_main if "--async" in sys.argv[1:] else main)
