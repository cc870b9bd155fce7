"""A PE's local queue (messages to its own elements) while elements leave it.

``Runtime.step`` runs the messages its local queue held when the step began: a count
taken first (``receive.c: run_local``, or the Python loop in ``runtime.py``). A
balancing round's PLAN runs from the root PE's own queue, and an element that departs
takes its queued messages along (``Migration._send_queued``), so those messages leave
``migration.SENT_ON`` in their place and the count stays true. Before, they were taken
out and the loop popped an empty deque (issue 41: ``IndexError: pop from an empty
deque`` in ``step``, about one run in five of a balanced particle code on 2 PEs).
A queue that is shorter than its count anyway is a broken invariant, reported as such.
"""

from __future__ import annotations


import pytest
from support import PROGRAMS
from support.jobs import run_inproc

import shoal

BOTH = pytest.mark.parametrize("native", ["1", "0"])

#: the element's side of the deterministic case: on PE 0 (the Array's root), kick()
#: queues a migrate() REQUEST, then later(), then filler; the REQUEST queues the PLAN,
#: later() queues three calls to element 1 behind it; the next step's count holds the
#: PLAN and the three calls, and the PLAN sends element 1 (and the calls) to PE 1
CASE = (PROGRAMS / "local_queue_cells.py").read_text()

DEPART = CASE + """

def main(args):
    cells = shoal.Array(Cell, 2, placement=on_pe_0)
    cells[0].kick()
    shoal.quiescence().get()
    print("RESULT", cells[1].report(ret=True).get())


shoal.start(main)
"""

THIEF = CASE + """

def main(args):
    cells = shoal.Array(Cell, 2, placement=on_pe_0)
    shoal.quiescence().get()
    cells[0].thief()  # these three are one step's count; thief() takes the other two away
    cells[0].noop()
    cells[0].noop()
    shoal.Future().get()  # nothing else is queued meanwhile
    print("not reached")


shoal.start(main)
"""

#: many over-decomposed cells that message each other and themselves (the local queue),
#: arrays and plain values, while they move under a balancer and by migrate() at random
STRESS = """
import random
import sys
import time

import numpy as np
import shoal

N = 24


class Cell(shoal.Chare):
    def __init__(self, seed):
        self.rng = random.Random(seed * 1000 + self.index[0])
        self.busy = 1e-4 * (1 + self.index[0] % 7)  # uneven: the balancer moves cells

    def ping(self, ttl, payload):
        if ttl > 0:
            dst = self.index[0] if self.rng.random() < 0.4 else self.rng.randrange(N)
            self.collection[dst].ping(ttl - 1, payload)

    def step(self, k, done):
        end = time.perf_counter() + self.busy * (1 + (k + self.index[0]) % 3)
        while time.perf_counter() < end:
            pass
        for _ in range(6):
            dst = self.index[0] if self.rng.random() < 0.5 else self.rng.randrange(N)
            self.collection[dst].ping(self.rng.randrange(1, 12), k)
            self.collection[dst].ping(self.rng.randrange(1, 6), np.arange(4.0))
        for _ in range(4):
            self.proxy.ping(0, k)
        self.done = done
        self.at_sync()

    def resume_from_sync(self):
        self.contribute(None, shoal.reducers.nop, self.done)


def main(args):
    seed = int(args[1])
    rng = random.Random(seed)
    cells = shoal.Array(Cell, N, args=(seed,))
    for k in range(12):
        f = shoal.Future()
        cells.step(k, f)
        for _ in range(rng.randrange(4)):
            cells.migrate(rng.randrange(N), rng.randrange(shoal.num_pes()))
        f.get()
    shoal.quiescence().get()
    print("stress ok")


shoal.start(main)
"""

#: the issue's route: the Charm4py layer, +balancer GreedyRefineLB, cells exchanging
#: particles and moved by migrate() between rounds
CHARM4PY = """
import random

import numpy as np
from charm4py import charm, Chare, Array, Future

N = 24


class Cell(Chare):
    def __init__(self, seed):
        self.rng = random.Random(seed * 1000 + self.thisIndex[0])

    def particles(self, ttl, p):
        if ttl > 0:
            dst = self.thisIndex[0] if self.rng.random() < 0.5 else self.rng.randrange(N)
            self.thisProxy[dst].particles(ttl - 1, p)

    def step(self, k, done):
        for _ in range(6):
            dst = self.thisIndex[0] if self.rng.random() < 0.5 else self.rng.randrange(N)
            self.thisProxy[dst].particles(self.rng.randrange(1, 10), np.arange(3.0))
            self.thisProxy[dst].particles(self.rng.randrange(1, 10), k)
        for _ in range(4):
            self.thisProxy[self.thisIndex].particles(0, k)
        self.done = done
        self.AtSync()

    def resumeFromSync(self):
        self.contribute(None, None, self.done)


class Main(Chare):
    def __init__(self, args):
        rng = random.Random(int(args[1]))
        cells = Array(Cell, N, args=[int(args[1])], useAtSync=True)
        for k in range(12):
            f = Future()
            cells.step(k, f)
            f.get()
            for _ in range(rng.randrange(4)):
                cells[rng.randrange(N)].migrate(rng.randrange(charm.numPes()))
        charm.waitQD()
        print("stress ok")
        charm.exit()


charm.start(Main)
"""


# -- in this process (the Python path) ----------------------------------------------------

from programs.local_queue_cells import Cell, on_pe_0 as _on_pe_0  # noqa: E402


def test_a_departure_inside_the_step_sends_on_what_was_queued_in_process():
    got = []

    def main(args):
        cells = shoal.Array(Cell, 2, placement=_on_pe_0)
        cells[0].kick()
        shoal.quiescence().get()
        got.append(cells[1].report(ret=True).get())

    assert run_inproc(main, pes=2) == 0
    assert got == [(1, [(0, 1), (1, 1), (2, 1)])]  # moved; each call once, in order, there


def test_a_queue_shorter_than_its_count_is_named_in_process():
    def main(args):
        cells = shoal.Array(Cell, 2, placement=_on_pe_0)
        shoal.quiescence().get()
        cells[0].thief()
        cells[0].noop()
        cells[0].noop()
        shoal.Future().get()

    with pytest.raises(RuntimeError, match=r"PE 0: the local queue is empty where its count says 2 message\(s\) "
                                           r"wait \(in Runtime\.step's local loop, Python path, after 1 of the 3"):
        run_inproc(main, pes=2)


# -- under mpiexec: the compiled path and the Python one -----------------------------------

@pytest.mark.mpi
@BOTH
def test_a_departure_inside_the_step_sends_on_what_was_queued(mpi_job, native):
    job = mpi_job(DEPART, n=2, timeout=60, env={"SHOAL_NATIVE": native})
    assert job.returncode == 0, job
    assert "RESULT (1, [(0, 1), (1, 1), (2, 1)])" in job.stdout, job
    assert "IndexError" not in job.stderr, job


@pytest.mark.mpi
@BOTH
def test_a_queue_shorter_than_its_count_ends_the_job_named(mpi_job, native):
    job = mpi_job(THIEF, n=2, timeout=60, env={"SHOAL_NATIVE": native})
    assert job.returncode != 0, job
    path = "compiled path: run_local" if native == "1" else "Python path"
    assert (f"PE 0: the local queue is empty where its count says 2 message(s) wait "
            f"(in Runtime.step's local loop, {path}, after 1 of the 3 queued when it began)") in job.stderr, job
    assert "not reached" not in job.stdout


@pytest.mark.mpi
@pytest.mark.parametrize("native, seed", [("1", 1), ("1", 2), ("0", 3)])
def test_cells_that_message_each_other_while_they_balance_and_move(mpi_job, native, seed):
    job = mpi_job(STRESS, n=2, args=(str(seed),), timeout=60, env={"SHOAL_NATIVE": native, "SHOAL_LB": "greedy"})
    assert job.returncode == 0, job
    assert "stress ok" in job.stdout, job


@pytest.mark.mpi
def test_the_charm4py_route_with_greedy_refine(mpi_job):
    job = mpi_job(CHARM4PY, n=2, args=("4", "+balancer", "GreedyRefineLB"), timeout=60, env={"SHOAL_COMPAT": "charm4py"})
    assert job.returncode == 0, job
    assert "stress ok" in job.stdout, job
