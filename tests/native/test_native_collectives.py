"""The compiled collectives (shoal/_native/exchange.c and broadcasts.c) against their
Python reference: every program runs under real mpiexec with the compiled core and with
``SHOAL_NATIVE=0``, and both must print the same."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.mpi


@pytest.mark.one_node  # the compiled butterfly runs within a node; across nodes an all-reduce takes the tree
def test_allreduces_give_the_python_results(mpi_job):
    """All-reduces of every built-in reducer, of numbers, arrays and mixed values, on 3
    PEs (a PE outside the power of two folds in and gets the result last), back to back
    (values that arrive before the PE gets there), with several elements per PE, with a
    rendezvous-sized array and with a reducer of the program's own: the compiled
    exchange (_native/exchange.c) gives exactly what the Python reference gives, and
    takes the one-element-per-PE case without entering the Python manager."""
    program = """
        import math
        import numpy as np
        import shoal
        from shoal._runtime import reductions

        starts = []
        python_exchange = reductions.ReductionManager._exchange
        def counted(self, *args):
            starts.append(args[0])
            return python_exchange(self, *args)
        reductions.ReductionManager._exchange = counted

        def longest(values):
            return max(values, key=len)

        class W(shoal.Chare):
            async def run(self):
                me = self.index if isinstance(self.index, int) else self.index[0]
                r = shoal.reducers
                out = []
                for red in ("sum", "product", "max", "min", "logical_and", "logical_or", "nop", "exact_sum"):
                    for value in (me + 1, (me + 1) * 0.1, me == 1, np.arange(3.0) * (me + 1),
                                  np.array([me, -me], np.int32)):
                        if red == "exact_sum" and not isinstance(value, (float, np.ndarray)):
                            continue
                        got = await self.allreduce(value, getattr(r, red))
                        out.append((red, type(value).__name__, got.tolist() if isinstance(got, np.ndarray) else got,
                                    got.dtype.str if isinstance(got, np.ndarray) else type(got).__name__))
                out.append(("mixed", await self.allreduce(1 if me % 2 else 1.5)))
                out.append(("nan", repr(await self.allreduce(math.nan if me == 0 else 1.0, r.max))))
                out.append(("default", await self.allreduce(me)))
                futs = [self.allreduce(float(me * k)) for k in range(50)]
                out.append(("back to back", [await f for f in futs]))
                big = await self.allreduce(np.full(300_000, me, np.float64))
                out.append(("big", float(big[0]), float(big[-1]), big.shape))
                out.append(("own", await self.allreduce(["x"] * (me + 1), longest)))
                return out

            async def bad(self):
                return await self.allreduce(np.zeros(2 + self.index), shoal.reducers.sum)

        def main(args):
            group = shoal.Group(W).run(ret=True).get()
            assert all(g == group[0] for g in group), group
            for line in group[0]:
                print("group", line)
            print("python starts", len(starts))
            per_pe = shoal.Array(W, 2 * shoal.num_pes()).run(ret=True).get()
            assert all(p == per_pe[0] for p in per_pe)
            for line in per_pe[0]:
                print("array", line)
            shoal.Group(W).bad(ret=True).get()

        shoal.start(main)
        """
    runs = {native: mpi_job(program, n=3, env={"SHOAL_NATIVE": native}) for native in ("1", "0")}
    results = {}
    for native, job in runs.items():
        assert job.returncode != 0, job
        assert "cannot be combined element-wise" in job.stderr, job
        results[native] = [line for line in job.stdout.splitlines() if line.startswith(("group", "array"))]
    lines = results["1"]
    assert len(lines) == 2 * 44, runs["1"].stdout
    assert lines == results["0"], "the compiled exchange differs from the Python reference"
    for want in ("group ('sum', 'int', 6, 'int')", "group ('max', 'bool', True, 'bool')",
                 "group ('product', 'bool', 0, 'int')", "group ('nop', 'float', None, 'NoneType')",
                 "group ('sum', 'ndarray', [0.0, 6.0, 12.0], '<f8')", "group ('nan', 'nan')", "group ('default', 3)",
                 "group ('big', 3.0, 3.0, (300000,))", "group ('own', ['x', 'x', 'x'])",
                 f"group ('back to back', {[3.0 * k for k in range(50)]})"):
        assert want in lines, (want, lines)
    starts = {native: int(job.stdout.split("python starts ")[1].split()[0]) for native, job in runs.items()}
    assert starts["1"] == 0 and starts["0"] > 0, starts


@pytest.mark.parametrize("n", [2, 3])
def test_small_arrays_combine_in_c_bit_for_bit_as_numpy(mpi_job, n):
    """Sums and products of plain arrays of the dtypes the core combines itself
    (exchange.c: combine_plain: float64/32, int64/32, uint64/32), with overflows, NaN,
    infinities, -0.0 and subnormals, and of arrays it leaves to NumPy (int16, complex,
    2-D, strided, 0-d): the compiled path's results equal the Python path's (NumPy's
    add and multiply), byte for byte."""
    program = """
        import numpy as np
        import shoal

        def cases(me):
            for dtype in ("f8", "f4", "i8", "i4", "u8", "u4", "i2", "c16"):
                if dtype[0] in "fc":
                    info = np.finfo(dtype)
                    base = np.array([info.max, -0.0, np.nan, np.inf, -np.inf, info.tiny / 3, 0.1, 3.0], dtype)
                else:
                    info = np.iinfo(dtype)
                    base = np.array([info.max, info.min, -1 if info.min else 1, 3, 12345, 0], dtype)
                yield dtype, base if me % 2 else base[::-1].copy()
            yield "2-D", np.arange(6.0).reshape(2, 3) * (me + 1)
            yield "strided", (np.arange(8.0) * (me + 1))[::2]
            yield "0-d", np.array(2.5 * (me + 1))

        class W(shoal.Chare):
            async def run(self):
                out = []
                for name, value in cases(self.index):
                    for red in (shoal.reducers.sum, shoal.reducers.product):
                        got = await self.allreduce(value, red)
                        got = np.asarray(got)
                        out.append((name, red.__name__ if hasattr(red, "__name__") else str(red), got.dtype.str,
                                    got.shape, got.tobytes().hex()))
                return out

        def main(args):
            results = shoal.Group(W).run(ret=True).get()
            assert all(r == results[0] for r in results), results
            for line in results[0]:
                print("combined", line)

        shoal.start(main)
        """
    runs = {native: mpi_job(program, n=n, env={"SHOAL_NATIVE": native}) for native in ("1", "0")}
    lines = {}
    for native, job in runs.items():
        assert job.returncode == 0, job
        lines[native] = [line for line in job.stdout.splitlines() if line.startswith("combined")]
    assert len(lines["1"]) == 2 * 11, runs["1"].stdout
    assert lines["1"] == lines["0"], "the compiled combine differs from NumPy's"


@pytest.mark.parametrize("native", ["1", "0"])
def test_a_float_sum_does_not_depend_on_the_order_contributions_arrive_in(mpi_job, native):
    """Elements called in a different order each round, each after a different delay, so
    their values reach their PE and the children's partials reach their parent in a
    different order each time: the sum (of floats whose total depends on the order they
    are added in) and the complex product give the same bits every round. Values combine
    in element and PE order (reductions.py: _Partial), not as they arrive."""
    program = """
        import random
        import time
        import numpy as np
        import shoal

        VALUES = [1e16, 1.0, -1e16, 0.1, 3.0, -7e15, 2.5e-3, 1e-9, 4e15, -0.3, 1.5, 7.0]

        class W(shoal.Chare):
            def go(self, delay, total, product):
                time.sleep(delay)
                v = VALUES[self.index[0]]
                self.contribute(v, shoal.reducers.sum, total)
                self.contribute(np.array([complex(v, -v), np.nan * 1j, -0.0]), shoal.reducers.product, product)

        def main(args):
            workers = shoal.Array(W, len(VALUES))
            sums, products = set(), set()
            for round in range(6):
                rng = random.Random(round)
                order = list(range(len(VALUES)))
                rng.shuffle(order)
                total, product = shoal.Future(), shoal.Future()
                for i in order:
                    workers[i].go(rng.random() * 0.003, total, product)
                sums.add(total.get().hex())
                products.add(product.get().tobytes().hex())
            print("distinct", len(sums), len(products))

        shoal.start(main)
        """
    job = mpi_job(program, n=3, env={"SHOAL_NATIVE": native})
    assert job.returncode == 0, job
    assert "distinct 1 1" in job.stdout, job.stdout


def test_the_core_runs_every_exchangeable_reducer():
    """The core's reducers are the butterfly's, and gather, which only contributions take."""
    from shoal._runtime.core_contract import EXCHANGE_REDUCERS
    from shoal._runtime.reductions import _EXCHANGEABLE

    assert set(EXCHANGE_REDUCERS) == _EXCHANGEABLE | {"gather"}
    assert EXCHANGE_REDUCERS[-1] == "gather" and "gather" not in _EXCHANGEABLE


_BROADCASTS = """
    import numpy as np
    import shoal
    from shoal._runtime import receiving

    python_calls = []
    on_broadcast = receiving.Receiving._on_broadcast
    def counted(self, *args):
        python_calls.append(args[0])
        return on_broadcast(self, *args)
    receiving.Receiving._on_broadcast = counted

    class W(shoal.Chare):
        def __init__(self):
            self.seen = []

        def value(self, x, y=0):
            me = self.index if isinstance(self.index, int) else self.index
            self.seen.append(x)
            return (me, shoal.my_pe(), x if np.ndim(x) == 0 else len(x), y, np.full(2, float(np.sum(x))))

        def fails(self, bad):
            if self.index in (bad, (bad,)):
                raise ValueError(f"element {self.index} fails")
            return self.index

        async def later(self, x):
            await self.proxy.value(x, ret=True)
            return (self.index, "later", x)

        def mixed(self, slow):
            return self.later(0) if self.index in (slow, (slow,)) else (self.index, "now")

        def seen_so_far(self):
            return self.seen

        async def from_here(self, x):
            return await self.collection.value(x, ret=True)

        def calls(self):
            return len(python_calls)

    def show(name, values):
        print(name, [(v[0], v[2], v[3], v[4].tolist()) if isinstance(v, tuple) and len(v) == 5 else v for v in values])

    def main(args):
        n = shoal.num_pes()
        group = shoal.Group(W)
        dense = shoal.Array(W, (2, n + 1))
        flat = shoal.Array(W, 3 * n)
        for name, coll in (("group", group), ("dense", dense), ("flat", flat)):
            show(name, coll.value(7, ret=True).get())
            show(name + " array", [v[4].sum() for v in coll.value(np.arange(3.0), ret=True).get()])
            coll.value(1)  # no ret: every element runs it
            show(name + " seen", coll.seen_so_far(ret=True).get())
            try:
                coll.fails(1, ret=True).get()
            except ValueError as exc:
                print(name, "failed:", exc)
            outcomes = coll.fails.outcomes(1).get()
            print(name, "outcomes", [type(o).__name__ if isinstance(o, Exception) else o for o in outcomes])
            print(name, "later", coll.later(3, ret=True).get())
            print(name, "mixed", coll.mixed(1, ret=True).get())
            show(name + " kw", coll.value(2, y=5, ret=True).get())
            show(name + " from PE 1", coll[1 if name == "group" else (0, 1) if name == "dense" else n].from_here(4, ret=True).get())
            big = coll.value(np.ones(100_000), ret=True).get()
            print(name, "big", len(big), float(sum(v[4].sum() for v in big)))
        print("python broadcasts", sum(group.calls(ret=True).get()))
        shoal.exit()

    shoal.start(main)
    """


@pytest.mark.parametrize("n, fanout", [(3, "4"), (4, "2")])
def test_broadcasts_give_the_python_results(mpi_job, n, fanout):
    """Broadcasts, with and without ret=True, to a Group and to dense arrays, of plain
    values, arrays and keyword arguments, with elements that raise, coroutines, a
    broadcast from another PE, a rendezvous-sized argument, on a flat tree and on one
    where a PE passes its children's values on: the compiled path (_native/broadcasts.c)
    gives exactly what the Python reference gives, and takes the plain cases without the
    Python handlers."""
    env = {"SHOAL_TREE_FANOUT": fanout}
    runs = {native: mpi_job(_BROADCASTS, n=n, env={**env, "SHOAL_NATIVE": native}, timeout=120) for native in ("1", "0")}
    out = {}
    for native, job in runs.items():
        assert job.returncode == 0, job
        out[native] = [line for line in job.stdout.splitlines() if not line.startswith("python broadcasts")]
    assert out["1"] == out["0"], "the compiled broadcasts differ from the Python reference"
    lines = out["1"]
    assert "group [(0, 7, 0, [7.0, 7.0]), (1, 7, 0, [7.0, 7.0]), (2, 7, 0, [7.0, 7.0])" in lines[0], lines[0]
    assert "group failed: element 1 fails" in lines and "flat failed: element (1,) fails" in lines, lines
    assert "flat outcomes [(0,), 'ValueError', (2,), " in "\n".join(lines), lines
    assert "group mixed [(0, 'now'), (1, 'later', 0), (2, 'now')" in "\n".join(lines), lines
    calls = {native: int(job.stdout.split("python broadcasts ")[1].split()[0]) for native, job in runs.items()}
    assert calls["1"] < calls["0"] / 3, calls
