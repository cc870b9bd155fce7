"""The compiled serve loop (Transport.serve): an idle PE with its core to itself takes
message after message in compiled code, and must still give the Python loop its turn when
a timer is due, a coroutine is ready or the job is done."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.mpi

RALLY = """
    import shoal

    class Player(shoal.Chare):
        def arm(self, done):
            # on PE 1: a timer that is due while the rally keeps this PE receiving
            self.done, self.rung, self.count = done, False, 0
            shoal.call_later(0.05, self.ring)

        def ring(self):
            self.rung = True

        def ping(self):
            self.count += 1
            if self.rung:
                self.done.send(self.count)
            else:
                self.collection[0].pong()

        def pong(self):
            self.collection[1].ping()

    def main(args):
        players = shoal.Group(Player)
        done = shoal.Future()
        players[1].arm(done, ret=True).get()
        players[0].pong()
        count = done.get()  # the rally ends only once PE 1's timer has run
        assert count > 10, count
        print(f"rally: the timer ran after {count} round trips")

    shoal.start(main)
"""


def test_a_timer_runs_on_a_pe_that_keeps_receiving(mpi_job):
    job = mpi_job(RALLY, n=2, timeout=60)
    assert job.returncode == 0, job
    assert "rally: the timer ran after" in job.stdout


AWAITS = """
    import shoal

    class Echo(shoal.Chare):
        def back(self, x):
            return x + 1

    class Caller(shoal.Chare):
        async def rounds(self, other, n):
            total = 0
            for i in range(n):  # each await resumes this coroutine from the ready queue
                total += await other.back(i, ret=True)
            return total

    def main(args):
        echo = shoal.Group(Echo)
        caller = shoal.Group(Caller)
        n = 2000
        assert caller[0].rounds(echo[1], n, ret=True).get() == n * (n + 1) // 2
        print("awaits: OK")

    shoal.start(main)
"""


def test_coroutines_resume_between_messages(mpi_job):
    job = mpi_job(AWAITS, n=2, timeout=60)
    assert job.returncode == 0, job
    assert "awaits: OK" in job.stdout
