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
            i = self.index[0]
            v = VALUES[i]
            r = shoal.reducers
            mixed = v if i % 2 else int(v)
            for reducer, value in [
                (r.sum, v), (r.product, v / 1e3), (r.max, float("nan") if i == 3 else v), (r.min, mixed),
                (r.sum, mixed), (r.sum, complex(v, -v)), (r.logical_and, i != 7), (r.logical_or, i == 7),
                (r.nop, i), (r.sum, np.array([v, -v, 1.0])), (r.max, np.full(2, i, dtype=np.int32)),
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
            futures = [shoal.Future() for _ in range(11)]
            for i in order:
                workers[i].go(futures)
            print("round", [show(f.get()) for f in futures])
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
    """Every built-in reducer of the core (sum, product, max, min, logical, nop) over
    floats whose total depends on their order, ints and floats mixed, NaN, complex
    numbers and arrays, with a future and an entry method as targets, elements called
    in a shuffled order on 3 PEs: the compiled contributions print exactly what the
    Python path prints, and no element's contribution enters the Python manager."""
    runs = {native: mpi_job(_REDUCERS, n=3, env={"SHOAL_NATIVE": native}) for native in ("1", "0")}
    out = {}
    for native, job in runs.items():
        assert job.returncode == 0, job
        lines = job.stdout.splitlines()
        out[native] = [line for line in lines if line.startswith(("round", "lone"))]
        assert lines.count("entry 66") == 3, job.stdout  # (as the entry method runs: among the others)
    assert len(out["1"]) == 4, runs["1"].stdout
    assert out["1"] == out["0"], "the compiled contributions differ from the Python path"
    assert "lone nop 41" in out["1"], out["1"]  # a lone contribution to nop stands, as on the Python path
    assert "python took 0" in runs["1"].stdout, runs["1"].stdout
    assert "python took 0" not in runs["0"].stdout, runs["0"].stdout


@pytest.mark.parametrize("native", ["1", "0"])
def test_an_element_that_moves_mid_reduction_hands_it_over(mpi_job, native):
    """An element contributes, then moves while its PE still waits for the others: the
    contributions gathered in the core go to the Python manager with their elements'
    places, and the float sum keeps its bits."""
    program = """
        import shoal

        VALUES = [1e16, 1.0, -1e16, 0.1, 3.0, -7e15, 2.5e-3, 1e-9]

        class W(shoal.Chare):
            def go(self, f):
                self.contribute(VALUES[self.index[0]], shoal.reducers.sum, f)

            def where(self):
                return shoal.my_pe()

        def main(args):
            arr = shoal.Array(W, len(VALUES))
            for round in range(2):
                f = shoal.Future()
                for i in (0, 2, 5, 7):
                    arr[i].go(f)
                if round == 0:  # each PE holds two contributions of round 0 as two elements move
                    shoal.quiescence().get()
                    arr.migrate(0, 1)
                    arr.migrate(5, 0)
                    shoal.quiescence().get()
                for i in (1, 3, 4, 6):
                    arr[i].go(f)
                print("sum", f.get().hex())
            print("places", arr.where(ret=True).get())

        shoal.start(main)
        """
    job = mpi_job(program, n=2, env={"SHOAL_NATIVE": native})
    assert job.returncode == 0, job
    v = [1e16, 1.0, -1e16, 0.1, 3.0, -7e15, 2.5e-3, 1e-9]
    home_order = (((v[0] + v[1]) + v[2]) + v[3]) + (((v[4] + v[5]) + v[6]) + v[7])  # each PE's, then the child's
    sums = [line for line in job.stdout.splitlines() if line.startswith("sum")]
    assert sums == [f"sum {home_order.hex()}"] * 2, job.stdout
    assert "places [1, 0, 0, 0, 1, 0, 1, 1]" in job.stdout, job.stdout


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
