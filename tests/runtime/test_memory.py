"""Collections that cannot fit are refused, a creation that uses up the node stops (issue
35, item 4: ``Array(W, 10**12)`` grew every PE by 170 MB/s until it was killed), and the
memory of a burst is given back when idle (item 7)."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest
from support.commands import last_line, run_shoal

from shoal._runtime import memory
from shoal._runtime.memory import ELEMENT_BYTES, CreationWatch, check_fits

GiB = 2**30


def test_an_array_that_cannot_fit_is_refused(monkeypatch):
    monkeypatch.setattr(memory, "available", lambda: (20 * GiB, 24 * GiB))
    with pytest.raises(MemoryError) as err:
        check_fits("W", (10**6, 10**6), 4, 2)
    said = str(err.value)
    assert said.startswith("shoal.Array(W, (1000000, 1000000)): 1,000,000,000,000 elements cannot fit: this node's 2 PE(s)")
    assert "500,000,000,000 of them" in said and "20.0 GiB available" in said


def test_an_array_that_fits_is_let_through(monkeypatch):
    monkeypatch.setattr(memory, "available", lambda: (20 * GiB, 24 * GiB))
    check_fits("W", (20 * GiB // ELEMENT_BYTES,), 1, 1)  # exactly the available memory
    monkeypatch.setattr(memory, "available", lambda: None)  # unknown here: nothing to refuse on
    check_fits("W", (10**15,), 1, 1)


def test_the_watch_stops_a_creation_that_uses_up_the_node(monkeypatch):
    free = [20 * GiB]
    monkeypatch.setattr(memory, "available", lambda: (free[0], 24 * GiB))
    monkeypatch.setattr("time.perf_counter", lambda: 20.0 - free[0] / GiB)  # 1 s per element
    watch = CreationWatch()
    said = None
    while said is None:  # each element allocates 1 GiB and takes long: looked at one by one
        watch.made += 1
        free[0] -= GiB
        if watch.made == watch.next:
            said = watch.short("W")
    # stopped once less than the reserve (3% of 24 GiB) and twice the last step was free
    assert watch.made == 18 and said.startswith("making the elements of W used up this node's memory (2.0 GiB")


def test_cheap_elements_are_looked_at_every_few_thousand(monkeypatch):
    reads = []
    monkeypatch.setattr(memory, "available", lambda: reads.append(1) or (20 * GiB, 24 * GiB))
    watch = CreationWatch()
    for _ in range(1_000_000):
        watch.made += 1
        if watch.made == watch.next:
            assert watch.short("W") is None
    assert len(reads) < 1_000_000 // memory.EVERY + 20


@pytest.mark.mpi
@pytest.mark.parametrize("transport", ["mpi", "inproc"])
def test_an_array_of_a_trillion_elements_fails_at_once(tmp_path, transport):
    prog = tmp_path / "p.py"
    prog.write_text("import shoal\nclass W(shoal.Chare):\n    pass\n"
                    "def main(args):\n    shoal.Array(W, 10**12)\n    print('created')\nshoal.start(main)\n")
    proc = run_shoal("run", "-n", "2", "--transport", transport, str(prog))
    assert proc.returncode == 1 and "created" not in proc.stdout, proc
    assert "MemoryError: shoal.Array(W, 1000000000000): 1,000,000,000,000 elements cannot fit" in last_line(proc.stderr)


BURST = """
import sys, time
import shoal

def rss():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) // 1024

class W(shoal.Chare):
    def f(self, x):
        return x
    def nap(self):
        time.sleep(1)

def main(args):
    a = shoal.Array(W, 2)
    a[1].f(0, ret=True).get()
    before = rss()
    calls = [a[1].f(i, ret=True) for i in range(100_000)]
    for c in calls:
        c.get()
    del calls
    peak = rss()
    a[1].nap(ret=True).get()  # PE 0 idle for a second
    print("RSS", before, peak, rss(), flush=True)

shoal.start(main)
"""

#: the same 100k messages from plain mpi4py: what the MPI library keeps of them
REFERENCE = """
from mpi4py import MPI

def rss():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) // 1024

comm = MPI.COMM_WORLD
comm.barrier()
before = rss()
if comm.rank == 0:
    MPI.Request.waitall([comm.isend(i, dest=1) for i in range(100_000)])
    for i in range(100_000):
        comm.recv(source=1)
else:
    for i in range(100_000):
        comm.send(comm.recv(source=0), dest=0)
comm.barrier()
if comm.rank == 0:
    print("RSS", before, rss(), flush=True)
"""


@pytest.mark.mpi
def test_memory_of_a_burst_is_given_back_when_idle(mpi_job):
    """100k ret=True calls grew PE 0 by 300 MiB for good (glibc keeps what was freed);
    once idle, shoal keeps at most 40 MiB more than plain mpi4py's MPI library keeps of as
    many messages (54 MiB under MPICH, 88 under Open MPI)."""
    job = mpi_job(BURST, n=2, timeout=120)
    assert job.returncode == 0, job
    before, peak, idle = map(int, job.stdout.split("RSS")[1].split())
    ref = mpi_job(REFERENCE, n=2, timeout=120)
    assert ref.returncode == 0, ref
    mpi_before, mpi_after = map(int, ref.stdout.split("RSS")[1].split())
    assert idle - before <= (mpi_after - mpi_before) + 40, (before, peak, idle, mpi_before, mpi_after)


def test_give_back_shrinks_an_emptied_table_in_place():
    table = {i: i for i in range(100_000)}
    for i in range(100_000 - 3):
        del table[i]
    runtime = SimpleNamespace(future_table=SimpleNamespace(futures=table))
    memory.give_back([runtime])
    assert runtime.future_table.futures is table and table == {99_997: 99_997, 99_998: 99_998, 99_999: 99_999}
    assert sys.getsizeof(table) < 1000
