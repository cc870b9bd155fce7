"""Lent arrays (``shoal.lend``): sent without a copy or a wait, received as plain arrays,
returned once no message holds them; a returned loan and a non-array are refused."""

from __future__ import annotations

import numpy as np
import pytest

import shoal
from support import TESTS
from support.jobs import run_inproc

PROGRAM = f"import os\nimport sys\nsys.path.insert(0, {str(TESTS)!r})\n" + """
import numpy as np
import shoal


from support.gates import busy_until, gate_path, wait_for


class Taker(shoal.Chare):
    def __init__(self):
        self.got = []

    def compute(self, gate):
        return busy_until(gate)  # busy: no message is handled until PE 0 opens the gate

    def take(self, k, data):
        assert type(data) is np.ndarray, type(data)
        self.got.append((k, float(data[0]), float(data[-1]), data.nbytes))
        return data.nbytes

    def got_all(self):
        return self.got


class Ends(shoal.Chare):
    def __init__(self):
        self.ch = shoal.Channel(self, remote=self.collection[1 - self.index])

    async def stream(self, n, count):
        if self.index == 0:
            a = np.arange(n, dtype=np.float64)
            loan = shoal.lend(a)
            for _ in range(count):
                self.ch.send(loan)
            await loan.returned
            return "sent"
        into = np.empty(n)
        sums = [float((await self.ch.recv(into=into)).sum()) for _ in range(count)]
        return sums


async def main(args):
    takers = shoal.Group(Taker)
    n = 8 << 20  # 64 MiB of float64
    await takers[1].take(-1, np.zeros(16), ret=True)  # the elements exist
    gate = gate_path("loans")
    busy = takers[1].compute(gate, ret=True)
    wait_for(gate + ".started")
    data = np.full(n, 7.0)
    loan = shoal.lend(data)
    takers[1].take(0, loan)
    # the send returned while the receiver computes (until the gate opens): the loan is out
    print("out while the receiver computes:", not loan.returned.done(), not busy.done())
    open(gate, "w").close()
    await loan.returned
    for path in (gate, gate + ".started"):
        os.unlink(path)
    print("returned after the computation:", busy.done())
    data[:] = -1.0  # ours again
    small = shoal.lend(np.full(10, 3.0))
    await takers[1].take(1, small, ret=True)
    await small.returned
    everyone = shoal.lend(np.full(1 << 18, 5.0))
    sizes = await takers.take(2, everyone, ret=True)
    await everyone.returned
    print("broadcast", sizes)
    print("got", (await takers[1].got_all(ret=True))[1:])
    try:
        takers[1].take(3, everyone)
    except shoal.ShoalError as exc:
        print("refused:", exc)
    ends = shoal.Group(Ends)
    results = await ends.stream(1 << 19, 8, ret=True)
    print("channel", results[0], set(results[1]) == {float(sum(range(1 << 19)))}, len(results[1]))
    shoal.exit()


shoal.start(main)
"""


@pytest.mark.mpi
def test_a_lent_array_goes_without_waiting_and_comes_back(mpi_job):
    job = mpi_job(PROGRAM, n=2, timeout=120)
    assert job.returncode == 0, job
    out = job.stdout
    assert "out while the receiver computes: True True" in out, job
    assert "returned after the computation: True" in out, job
    assert "broadcast [2097152, 2097152]" in out, job
    assert "got [(0, 7.0, 7.0, 67108864), (1, 3.0, 3.0, 80), (2, 5.0, 5.0, 2097152)]" in out, job
    assert "refused: PE 0: this loan of array(262144,) of float64 was returned already" in out, job
    assert "channel sent True 8" in out, job


def test_loans_on_one_pe_and_in_process():
    seen = {}

    class Keeper(shoal.Chare):
        def keep(self, a):
            self.a = a
            return float(a.sum())

        def kept(self):
            return float(self.a.sum())

    async def main(args):
        keepers = shoal.Group(Keeper)
        a = np.ones(1 << 16)
        loan = shoal.lend(a)
        seen["out"] = repr(loan)
        seen["sums"] = await keepers.keep(loan, ret=True)  # PE 0's element: a send on this PE
        await loan.returned
        a[:] = 2.0  # the receivers keep arrays of their own
        seen["kept"] = await keepers.kept(ret=True)
        seen["returned"] = repr(loan)
        shoal.exit()

    assert run_inproc(main, pes=2) == 0
    assert seen["out"] == "<Loan of array(65536,) of float64: 0 message(s) hold it>"
    assert seen["sums"] == seen["kept"] == [65536.0, 65536.0]
    assert seen["returned"] == "<Loan of array(65536,) of float64: returned>"


@pytest.mark.parametrize("bad, words", [
    ([1.0, 2.0], "not a list"),
    (np.array(["a"]), "not an array of <U1"),
    (np.ones((4, 4))[:, 0], "not a strided array"),
])
def test_only_plain_contiguous_arrays_are_lent(bad, words):
    errors = []

    def main(args):
        try:
            shoal.lend(bad)
        except TypeError as exc:
            errors.append(str(exc))
        shoal.exit()

    assert run_inproc(main, pes=1) == 0
    assert len(errors) == 1 and words in errors[0], errors


def test_lend_outside_a_job_says_so():
    with pytest.raises(shoal.NotRunningError, match=r"shoal.lend\(\)"):
        shoal.lend(np.ones(4))


@pytest.mark.mpi
def test_waiting_on_a_loan_never_sent_is_a_deadlock_that_names_it(mpi_job):
    job = mpi_job(
        """
        import numpy as np
        import shoal

        def main(args):
            loan = shoal.lend(np.ones(10))
            loan.returned.get()

        shoal.start(main)
        """,
        n=2,
    )
    assert job.returncode != 0, job
    assert "DeadlockError" in job.stderr and "the return of a loan of array(10,) of float64" in job.stderr, job
