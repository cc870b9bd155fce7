"""Compiled contributions (shoal/_native/contribute.c) against their Python reference:
each program runs under real mpiexec with the compiled core and with ``SHOAL_NATIVE=0``,
and both must print the same."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.mpi

_REDUCERS = """
    import math
    import random
    import numpy as np
    import shoal
    from shoal._runtime import reductions

    taken_by_python = []
    add_from = reductions.ReductionManager.add_from
    def counted(self, el, *args):
        taken_by_python.append(el.index)
        return add_from(self, el, *args)
    reductions.ReductionManager.add_from = counted

    VALUES = [1e16, 1.0, -1e16, 0.1, 3.0, -7e15, 2.5e-3, 1e-9, 4e15, -0.3, 1.5, 7.0]

    class W(shoal.Chare):
        def go(self, futures):
            i = self.index if isinstance(self.index, int) else self.index[0]
            v = VALUES[i]
            r = shoal.reducers
            mixed = v if i % 2 else int(v)
            for reducer, value in [
                (r.sum, v), (r.product, v / 1e3), (r.max, float("nan") if i == 3 else v), (r.min, mixed),
                (r.sum, mixed), (r.sum, complex(v, -v)), (r.logical_and, i != 7), (r.logical_or, i == 7),
                (r.nop, i), (r.sum, np.array([v, -v, 1.0])), (r.max, np.full(2, i, dtype=np.int32)),
                (r.gather, (i, v, str(i))), (r.gather, np.full(2, i)),
            ]:
                self.contribute(value, reducer, futures[len(self.seen)])
                self.seen.append(reducer)
            self.seen.clear()
            self.contribute(i, r.sum, self.collection.done)

        def __init__(self):
            self.seen = []

        def done(self, total):
            if self.index == (0,):
                print("entry", total)
            elif self.index == 0:
                print("group entry", total)

    class One(shoal.Chare):
        def go(self, f):
            self.contribute(41, shoal.reducers.nop, f)

    def show(x):
        if isinstance(x, float):
            return x.hex()
        if isinstance(x, np.ndarray):
            return f"{x.dtype}:{x.tobytes().hex()}"
        return repr(x)

    def main(args):
        workers = shoal.Array(W, len(VALUES))
        for round in range(3):
            order = list(range(len(VALUES)))
            random.Random(round).shuffle(order)
            futures = [shoal.Future() for _ in range(13)]
            for i in order:
                workers[i].go(futures)
            print("round", [show(f.get()) for f in futures])
        group = shoal.Group(W)
        for round in range(2):
            futures = [shoal.Future() for _ in range(13)]
            group.go(futures)
            print("group round", [show(f.get()) for f in futures])
        one = shoal.Future()
        shoal.Array(One, 1).go(one)
        print("lone nop", one.get())
        taken = shoal.Group(Probe).taken(ret=True).get()
        print("python took", sum(taken))
        shoal.quiescence().get()

    class Probe(shoal.Chare):
        def taken(self):
            return len(taken_by_python)

    shoal.start(main)
"""


def test_contributions_give_the_python_results(mpi_job):
    """Every built-in reducer of the core (sum, product, max, min, logical, nop, gather) over
    floats whose total depends on their order, ints and floats mixed, NaN, complex
    numbers and arrays, with a future and an entry method as targets, elements of an
    Array called in a shuffled order and of a Group, on 3 PEs (a root with two children
    in the tree): the compiled contributions print exactly what the Python path prints,
    and no element's contribution enters the Python manager."""
    runs = {native: mpi_job(_REDUCERS, n=3, env={"SHOAL_NATIVE": native}) for native in ("1", "0")}
    out = {}
    for native, job in runs.items():
        assert job.returncode == 0, job
        lines = job.stdout.splitlines()
        out[native] = [line for line in lines if line.startswith(("round", "group round", "lone"))]
        assert lines.count("entry 66") == 3, job.stdout  # (as the entry method runs: among the others)
        assert lines.count("group entry 3") == 2, job.stdout
    assert len(out["1"]) == 6, runs["1"].stdout
    assert out["1"] == out["0"], "the compiled contributions differ from the Python path"
    assert "lone nop 41" in out["1"], out["1"]  # a lone contribution to nop stands, as on the Python path
    assert "python took 0" in runs["1"].stdout, runs["1"].stdout
    assert "python took 0" not in runs["0"].stdout, runs["0"].stdout


def test_elements_that_move_mid_reduction_hand_it_over(mpi_job):
    """On 3 PEs, elements contribute, then two move between PEs 1 and 2 while those PEs
    still wait for the others: their contributions gathered in the core go to the Python
    manager with their elements' places, PE 0 goes on gathering in the core and takes
    its children's partials from the Python path, and the float sums and array sums keep
    their bits and a gather its order: the same as without the moves, and as on the
    Python path."""
    program = """
        import os
        import numpy as np
        import shoal

        VALUES = [1e16, 1.0, -1e16, 0.1, 3.0, -7e15, 2.5e-3, 1e-9, 4e15]

        class W(shoal.Chare):
            def go(self, f, g, h):
                v = VALUES[self.index[0]]
                self.contribute(v, shoal.reducers.sum, f)
                self.contribute(np.array([v, v / 3]), shoal.reducers.sum, g)
                self.contribute((self.index[0], v), shoal.reducers.gather, h)

            def where(self):
                return shoal.my_pe()

        def main(args):
            arr = shoal.Array(W, len(VALUES))
            places = arr.where(ret=True).get()  # (blocks, node by node across simulated nodes)
            on = {pe: [i for i, p in enumerate(places) if p == pe] for pe in (1, 2)}
            first = [0, *on[1][:2], *on[2][:2]]
            for round in range(2):
                f, g, h = shoal.Future(), shoal.Future(), shoal.Future()
                for i in first:
                    arr[i].go(f, g, h)
                if round == 0 and os.environ.get("MOVE") == "1":
                    shoal.quiescence().get()  # PEs 1 and 2 hold two contributions each
                    arr.migrate(on[1][0], 2)
                    arr.migrate(on[2][0], 1)
                    shoal.quiescence().get()
                for i in range(len(VALUES)):
                    if i not in first:
                        arr[i].go(f, g, h)
                print("sum", f.get().hex(), g.get().tobytes().hex(), h.get())
            after = arr.where(ret=True).get()
            print("moved", after[on[1][0]] == 2 and after[on[2][0]] == 1)

        shoal.start(main)
        """
    runs = {(native, move): mpi_job(program, n=3, env={"SHOAL_NATIVE": native, "MOVE": move})
            for native in ("1", "0") for move in ("1", "0")}
    sums = {}
    for key, job in runs.items():
        assert job.returncode == 0, (key, job)
        sums[key] = [line for line in job.stdout.splitlines() if line.startswith("sum")]
        assert len(sums[key]) == 2, (key, job.stdout)
        assert f"moved {key[1] == '1'}" in job.stdout, (key, job.stdout)
    assert len({tuple(s) for s in sums.values()}) == 1, sums
    assert f"{[(i, v) for i, v in enumerate([1e16, 1.0, -1e16, 0.1, 3.0, -7e15, 2.5e-3, 1e-9, 4e15])]}" in sums["1", "1"][0]


@pytest.mark.parametrize("case", ["reducer", "target"])
def test_contributions_that_disagree_fail_on_the_compiled_path(mpi_job, case):
    """Elements of one PE that contribute with different reducers, or to different targets,
    end the job with the Python path's error, raised in the core."""
    bad = "shoal.reducers.max, f" if case == "reducer" else "shoal.reducers.sum, g"
    program = f"""
        import shoal

        class W(shoal.Chare):
            def go(self, f, g):
                if self.index[0] == 1:
                    self.contribute(1, {bad})
                else:
                    self.contribute(1, shoal.reducers.sum, f)

        def main(args):
            f, g = shoal.Future(), shoal.Future()
            shoal.Array(W, 4).go(f, g)
            f.get()

        shoal.start(main)
        """
    job = mpi_job(program, n=2)
    assert job.returncode != 0, job
    assert "disagree: reducer sum with target" in job.stderr, job.stderr


def test_broadcasts_and_calls_that_carry_a_future_take_the_compiled_path(mpi_job):
    """A future among simple arguments travels in the compiled pickle (as Future.__reduce__
    says: the same future on its owner, one handle elsewhere): a broadcast carrying one
    leaves the Python broadcast alone, and the reduction it starts resolves the future;
    a future whose origin is too long for it goes the Python way, and works alike."""
    program = """
        import shoal
        from shoal._runtime import sending

        python_broadcasts = []
        broadcast = sending.Sending.broadcast
        def counted(self, *args, **kwargs):
            python_broadcasts.append(args[2])
            return broadcast(self, *args, **kwargs)
        sending.Sending.broadcast = counted

        class W(shoal.Chare):
            def go(self, f, x):
                self.contribute(x, shoal.reducers.sum, f)

            def same(self, f, g):
                return f is g and f == g

        def main(args):
            arr = shoal.Array(W, 6)
            totals = []
            for x in (1, 2.5):
                f = shoal.Future()
                arr.go(f, x)
                totals.append(f.get())
            print("totals", totals, "python broadcasts", len(python_broadcasts))
            f = shoal.Future()
            print("one handle", all(arr[5].same(f, f, ret=True).get() for _ in range(2)))
            f._origin = "x" * 300  # too long for the compiled pickle
            arr.go(f, 1)
            print("long origin", f.get(), "python broadcasts", len(python_broadcasts))

        shoal.start(main)
        """
    job = mpi_job(program, n=2)
    assert job.returncode == 0, job
    assert "totals [6, 15.0] python broadcasts 0" in job.stdout, job.stdout
    assert "one handle True" in job.stdout, job.stdout
    assert "long origin 6 python broadcasts 1" in job.stdout, job.stdout


def test_reductions_to_an_element_of_the_collection_run_in_the_core(mpi_job):
    """A reduction to an entry method of an element of the contributing collection (the
    common ``self.collection[0].done``) gathers in the core on every PE: children's
    partials travel as compact REDUCE messages (TO_ENTRY: the element's index, the method
    and the value) and the root calls the method. On 3 PEs, with order-sensitive float
    sums and array sums, the bits are the Python path's, and the Python manager never
    sees a contribution or a partial."""
    program = """
        import random
        import numpy as np
        import shoal
        from shoal._runtime import reductions

        seen = []  # (method, collection id) of each call into the Python manager
        for name, coll_at in (("add", 0), ("add_own", 0), ("receive", 1), ("receive_compact", 1)):
            def counted(self, *args, _f=getattr(reductions.ReductionManager, name), _n=name, _at=coll_at, **kwargs):
                coll = args[_at]
                seen.append((_n, coll[0] if isinstance(coll, tuple) else coll))
                return _f(self, *args, **kwargs)
            setattr(reductions.ReductionManager, name, counted)

        VALUES = [1e16, 1.0, -1e16, 0.1, 3.0, -7e15, 2.5e-3, 1e-9, 4e15, -0.3, 1.5, 7.0]

        class W(shoal.Chare):
            def __init__(self):
                self.got = []
            def go(self, k):
                v = VALUES[self.index[0]] * (k + 1)
                self.contribute(v, shoal.reducers.sum, self.collection[0].total)
                self.contribute(np.array([v, -v / 3]), shoal.reducers.sum, self.collection[2].total)
                self.contribute(self.index[0] * k, shoal.reducers.max, self.collection[11].total)
                self.contribute((v, k), shoal.reducers.gather, self.collection[5].total)
            def total(self, x):
                self.got.append(x.hex() if isinstance(x, float) else x.tobytes().hex() if isinstance(x, np.ndarray) else x)
            def report(self):
                return self.got

        class Probe(shoal.Chare):
            def python(self, coll):
                return [name for name, c in seen if c == coll]

        def main(args):
            w = shoal.Array(W, len(VALUES))
            for k in range(3):
                order = list(range(len(VALUES)))
                random.Random(k).shuffle(order)
                for i in order:
                    w[i].go(k)
                shoal.quiescence().get()
            for i in (0, 2, 5, 11):
                print("got", i, w[i].report(ret=True).get())
            print("python", sum(shoal.Group(Probe).python(w._info.id, ret=True).get(), []))

        shoal.start(main)
        """
    runs = {native: mpi_job(program, n=3, env={"SHOAL_NATIVE": native}) for native in ("1", "0")}
    got = {}
    for native, job in runs.items():
        assert job.returncode == 0, job
        got[native] = [line for line in job.stdout.splitlines() if line.startswith("got")]
        assert len(got[native]) == 4, job.stdout
    assert got["1"] == got["0"], "the compiled reductions to an element differ from the Python path"
    assert "python []" in runs["1"].stdout, runs["1"].stdout
    assert "python []" not in runs["0"].stdout, runs["0"].stdout


def test_the_root_runs_the_entry_method_at_once_with_a_value_no_element_holds(mpi_job):
    """When a child's partial completes a reduction to an element's entry method at the
    root, the core runs the method there and then, as it runs a received call, instead of
    sending the value to the element as a local call; a value an element still holds (its
    own list, which ``max`` picks) goes as a local call, so the method gets a copy, as on
    the Python path, and a gather's arrays are copied for it."""
    program = """
        import numpy as np
        import shoal
        from shoal._runtime import proxy

        calls = []  # the targets called through the proxy (a local call) on this PE
        call = proxy.EntryRef.__call__
        def counted(self, *args, **kwargs):
            if self.name in ("take", "total", "took"):
                calls.append(self.name)
            return call(self, *args, **kwargs)
        proxy.EntryRef.__call__ = counted

        class W(shoal.Chare):
            def __init__(self):
                self.mine = [100 - self.index[0]]
                self.arr = np.full(2, self.index[0])
                self.got = []
            def go(self, k):
                self.contribute(self.mine, shoal.reducers.max, self.collection[0].take)
                self.contribute(float(self.index[0] + k), shoal.reducers.sum, self.collection[0].total)
                self.contribute(self.arr, shoal.reducers.gather, self.collection[0].took)
            def take(self, x):
                x.append("touched")
            def took(self, arrays):
                assert [a.tolist() for a in arrays] == [[0, 0], [1, 1]], arrays
                for a in arrays:
                    a += 10  # a copy: the elements' own arrays stay as they are
            def total(self, x):
                self.got.append(x)
            def report(self):
                return self.mine, self.arr.tolist(), self.got, calls

        def main(args):
            w = shoal.Array(W, 2)
            for k in range(3):
                w[0].go(k)  # PE 0's part waits for PE 1's, whose message completes it
                shoal.quiescence().get()
                w[1].go(k)
                shoal.quiescence().get()
            print("root", w[0].report(ret=True).get())

        shoal.start(main)
        """
    for native in ("1", "0"):
        job = mpi_job(program, n=2, env={"SHOAL_NATIVE": native})
        assert job.returncode == 0, job
        calls = ["take"] * 3 if native == "1" else ["take", "total", "took"] * 3
        assert f"root ([100], [0, 0], [1.0, 3.0, 5.0], {calls})" in job.stdout, (native, job.stdout)


def test_partials_too_big_for_one_frame_still_reach_the_core(mpi_job):
    """A child's partial of 512 KiB is sent the Python way (rendezvous): the root's own
    part waits in the core, so the Python side hands the partial to the core
    (``receive_compact`` offers it) instead of keeping it, which would hang the reduction;
    sums and gathers, to a future and to an element's entry method."""
    program = """
        import numpy as np
        import shoal

        class W(shoal.Chare):
            def go(self, f, g):
                big = np.full(65536, float(self.index[0] + 1))
                self.contribute(big, shoal.reducers.sum, f)
                self.contribute((self.index[0], big), shoal.reducers.gather, g)
                self.contribute(big, shoal.reducers.gather, self.collection[0].took)
            def took(self, arrays):
                print("took", [float(a.sum()) for a in arrays], flush=True)

        def main(args):
            w = shoal.Array(W, 2)
            for _ in range(2):
                f, g = shoal.Future(), shoal.Future()
                w.go(f, g)
                print("sum", float(f.get().sum()), [(i, float(a[0])) for i, a in g.get()], flush=True)
            shoal.quiescence().get()

        shoal.start(main)
        """
    job = mpi_job(program, n=2, timeout=60)
    assert job.returncode == 0, job
    assert job.stdout.count("sum 196608.0 [(0, 1.0), (1, 2.0)]") == 2, job.stdout
    assert job.stdout.count("took [65536.0, 131072.0]") == 2, job.stdout
