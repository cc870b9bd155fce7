"""A ret=True broadcast whose child's reply reaches a PE before the broadcast itself.

Found by Charm4py's ``sections/constrained_groups.py`` under Open MPI on 4 PEs: the
compiled core held no gather for the broadcast when a child's reply came, so the reply
went to the Python manager; the broadcast, arriving next, was gathered by the core,
which then waited for the reply the manager held, and the caller waited for ever.

The program below makes that order certain. With a fan-out of 2 and the collections
created on PE 1, the tree of all PEs is 1 -> (2, 3), 2 -> 0: PE 0 gets every broadcast
through PE 2, which naps first, while the tree of the Group's PEs (0, 3) and of the
Array's (0, 1, 2) is rooted at PE 0, so PE 3's (and PE 1's) replies come to PE 0 first.
"""

from __future__ import annotations

import pytest

PROGRAM = """
import time
import shoal


class Member(shoal.Chare):
    def test(self):
        return self.index


class Busy(shoal.Chare):
    def nap(self, seconds):
        time.sleep(seconds)


class Maker(shoal.Chare):
    def make(self):
        return shoal.Group(Member, pes=[0, 3]), shoal.Array(Member, 3)


def main(args):
    busy = shoal.Group(Busy)
    group, array = shoal.Group(Maker)[1].make(ret=True).get()
    busy[2].nap(0.5)
    print("group", group.test(ret=True).get())
    busy[2].nap(0.5)
    print("array", array.test(ret=True).get())


shoal.start(main)
"""


@pytest.mark.mpi
@pytest.mark.one_node  # the tree the comment above draws is one node's
@pytest.mark.parametrize("native", ["1", "0"])
def test_a_reply_that_overtakes_its_broadcast_is_gathered(mpi_job, native):
    job = mpi_job(PROGRAM, n=4, env={"SHOAL_TREE_FANOUT": "2", "SHOAL_NATIVE": native, "SHOAL_DEADLOCK_TIMEOUT": "2"})
    assert job.returncode == 0, job
    assert "group [0, 3]" in job.stdout, job
    assert "array [(0,), (1,), (2,)]" in job.stdout, job
