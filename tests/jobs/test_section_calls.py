"""A multicast to a section with few members on a PE sends each of them a compiled call
instead of one pickled multicast (``Sections._calls``); many members on a PE, or
``ret=True``, still take the multicast. Counted on the receiving PE, once the Array exists everywhere (before, a member the
compiled path cannot place yet takes the multicast)."""

from __future__ import annotations

import pytest

MPI = pytest.mark.mpi

#: the start of each program: every multicast a PE receives is counted
COUNTING = """
import numpy as np
import shoal
from shoal._runtime import sections

multicasts = []
original = sections.Sections.on_multicast
def counted(self, *args):
    multicasts.append(args[1])
    return original(self, *args)
sections.Sections.on_multicast = counted
"""

PROGRAM = COUNTING + """
class W(shoal.Chare):
    def __init__(self):
        self.got = []
    def put(self, x):
        self.got.append(float(np.sum(x)))
    def seen(self):
        return self.got, len(multicasts)

async def main(args):
    a = shoal.Array(W, 16)                   # blocks of 8 per PE
    await a.seen(ret=True)                   # created everywhere: until then a call may take the multicast
    one = a.section([0, 8])                  # one member on each PE
    many = a.section(list(range(16)))        # eight on each PE
    for k in range(3):
        one.put(np.full(2, float(k)))
    many.put(np.ones(1))
    big = np.ones(20000)                     # 160 kB: one multicast, not a copy per member
    a.section([8, 9]).put(big)
    print("ONE", await a[8].seen(ret=True), flush=True)
    print("MANY", await a[9].seen(ret=True), flush=True)
    print("REPLIES", sorted(await one.seen(ret=True)), flush=True)

shoal.start(main)
"""


@MPI
def test_a_section_with_one_member_per_pe_is_sent_compiled_calls_in_order(mpi_job):
    job = mpi_job(PROGRAM, n=2, timeout=120)
    assert job.returncode == 0, job
    lines = {line.split(" ", 1)[0]: line for line in job.stdout.splitlines()}
    # element 8 (PE 1): the three calls in order, the multicast to all, then the big array
    assert lines["ONE"] == "ONE ([0.0, 2.0, 4.0, 1.0, 20000.0], 2)", job
    # element 9 (PE 1): the multicast to all, then the big array; PE 1 received exactly two
    # multicasts (the 8 members of `many`, and the big array to 2 members): the three calls
    # to `one` came as compiled calls
    assert lines["MANY"] == "MANY ([1.0, 20000.0], 2)", job


FAR = COUNTING + """
class W(shoal.Chare):
    def __init__(self):
        self.got = []
    def put(self, x):
        self.got.append(x)
    def seen(self):
        return self.got, len(multicasts), shoal.my_pe()

entered = []                                 # the sender's Python multicasts
python_multicast = sections.Sections.multicast
def counted_multicast(self, *args):
    entered.append(args[2])
    return python_multicast(self, *args)
sections.Sections.multicast = counted_multicast

async def main(args):
    a = shoal.Array(W, 4)                    # blocks of 2 per PE
    await a.seen(ret=True)
    far = a.section([2, 3])                  # both on PE 1: compiled calls, no plan loop
    far.put(1.5)
    far.put("two")
    far.put([3])                             # a list: pickled, still a compiled call
    print("ENTERED", type(far.put).__name__, entered, flush=True)  # the compiled section entry took all three
    far.put(x=5)                             # keywords: one multicast
    a.migrate(3, 0)                          # now one member here: the plan again
    await a.seen(ret=True)
    far.put(4)
    for i in (2, 3):
        print("GOT", i, await a[i].seen(ret=True), flush=True)

shoal.start(main)
"""


@MPI
def test_a_section_whose_members_are_all_elsewhere_is_sent_compiled_calls(mpi_job):
    """A one-collection section with its members on other PEs, few on each, is sent a
    compiled call per member straight from its kept proxies; keywords take one multicast,
    and when a member moves the section is planned again (a member here: the multicast)."""
    job = mpi_job(FAR, n=2, timeout=120)
    assert job.returncode == 0, job
    # the section's compiled entry method sent those calls without entering the Python multicast
    assert "ENTERED BoundEntry []" in job.stdout, job
    lines = [line for line in job.stdout.splitlines() if line.startswith("GOT")]
    assert lines[0] == "GOT 2 ([1.5, 'two', [3], 5, 4], 1, 1)", job  # PE 1 took one multicast: the keywords
    assert lines[1] == "GOT 3 ([1.5, 'two', [3], 5, 4], 1, 0)", job  # moved to PE 0, which sent itself one
