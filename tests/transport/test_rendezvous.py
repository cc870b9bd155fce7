"""Large messages by rendezvous: a receiver that is busy computing never stalls the
sender (it copies and goes on), the copy keeps value semantics, order holds, and two PEs
sending large messages to each other at once do not deadlock."""

from __future__ import annotations

import pytest

from shoal._transport.rendezvous import COPY_RATE, MIN_WAIT, stall_budget
from support import TESTS

PROGRAM = f"import os\nimport sys\nsys.path.insert(0, {str(TESTS)!r})\n" + """
import numpy as np
import shoal

from support.gates import busy_until, gate_path, wait_for


class Busy(shoal.Chare):
    def __init__(self):
        self.got = []

    def compute(self, gate):
        return busy_until(gate)  # busy: no message is handled until PE 0 opens the gate

    def take(self, k, data):
        self.got.append((k, float(data[0]), float(data[-1]), data.nbytes))

    def got_all(self):
        return self.got

    def ping(self):
        return 1

    def swap(self, peer, n):
        peer.take(shoal.my_pe(), np.full(n, float(shoal.my_pe())))
        return True


def main(args):
    busy = shoal.Group(Busy)
    n = 8 << 20  # 64 MiB of float64
    busy[1].take(-1, np.zeros(n))  # warm: the elements exist, the first large message is behind us
    busy[1].got_all(ret=True).get()
    gate = gate_path("rendezvous")
    done = busy[1].compute(gate, ret=True)
    wait_for(gate + ".started")
    data = np.full(n, 7.0)
    busy[1].take(0, data)
    data[:] = -1.0  # overwritten at once: the copy the sender made must be what arrives
    busy[1].take(1, data)
    # the sends returned while PE 1 computes (it ends only when the gate opens, below), and PE 0 serves
    pings = sum(busy[0].ping(ret=True).get() for _ in range(20))
    computing = not done.done()
    open(gate, "w").close()
    print("sent while the receiver computes:", computing and done.get(), "pings", pings)
    for path in (gate, gate + ".started"):
        os.unlink(path)
    print("got", busy[1].got_all(ret=True).get()[1:])
    a, b = busy[0].swap(busy[1], n, ret=True), busy[1].swap(busy[0], n, ret=True)
    a.get(); b.get()
    print("swapped", busy[0].got_all(ret=True).get(), busy[1].got_all(ret=True).get()[3:])
    shoal.exit()


shoal.start(main)
"""


def test_the_budget_is_the_time_a_copy_takes():
    assert stall_budget(0) == MIN_WAIT
    assert stall_budget(64 << 20) == pytest.approx((64 << 20) / COPY_RATE)


@pytest.mark.mpi
def test_a_busy_receiver_does_not_stall_the_sender(mpi_job):
    job = mpi_job(PROGRAM, n=2, timeout=120)
    assert job.returncode == 0, job
    assert "sent while the receiver computes: True pings 20" in job.stdout, job
    assert "got [(0, 7.0, 7.0, 67108864), (1, -1.0, -1.0, 67108864)]" in job.stdout, job
    assert "swapped [(1, 1.0, 1.0, 67108864)] [(0, 0.0, 0.0, 67108864)]" in job.stdout, job


@pytest.mark.mpi
@pytest.mark.parametrize("lend, how", [(False, "sent by value"), (True, "lent")])
def test_bench_stall_reports_its_three_figures(capsys, lend, how):
    from shoal.bench.stall.cli import main

    assert main(["--mb", "8", "--compute", "0.05", "--trials", "1", *(["--lend"] if lend else [])]) == 0
    out = capsys.readouterr().out
    assert f"8 MiB {how} to a PE computing for 50 ms, median of 1 trials:" in out
    for line in ("the send call took", "pings PE 0 served meanwhile", "data arrived after the computation"):
        assert line in out


def test_bench_stall_refuses_bad_options(capsys):
    from shoal.bench.stall.cli import main

    with pytest.raises(SystemExit) as info:
        main(["--mb", "0"])
    assert info.value.code == 2 and "--mb >= 1" in capsys.readouterr().err


ORDER_PROGRAM = """
import numpy as np
import shoal
from shoal._runtime import channels

landed = []
_posted = channels.Channel.posted


def posted(self, seq, nbytes, device=False):  # counts the messages MPI wrote into a posted buffer
    buf = _posted(self, seq, nbytes, device)
    if buf is not None:
        landed.append(seq)
    return buf


channels.Channel.posted = posted


class End(shoal.Chare):
    def __init__(self):
        self.ch = shoal.Channel(self, remote=self.collection[1 - self.index[0]])
        self.got = []

    def burst(self, n, rounds):  # entry calls and channel messages interleaved, all frames at once (lent)
        self.keep = [np.full(n, -float(k)) for k in range(2 * rounds)]
        for k in range(rounds):
            self.collection[1].take(k, shoal.lend(np.full(n, float(k))))
            self.ch.send(shoal.lend(self.keep[2 * k]))
            self.ch.send(shoal.lend(self.keep[2 * k + 1]))

    def take(self, k, data):
        self.got.append(("entry", k, float(data[0]), float(data[-1])))

    async def drain(self, n, rounds):
        into = np.zeros(n)
        for k in range(2 * rounds):
            got = await self.ch.recv(into=into)
            self.got.append(("channel", k, float(got[0]), got is into))
        return self.got, len(landed)


def main(args):
    n, rounds = 1 << 17, 12  # 1 MiB: by rendezvous
    ends = shoal.Array(End, 2)
    done = ends[1].drain(n, rounds, ret=True)
    ends[0].burst(n, rounds)
    got, landed_count = done.get()
    entries = [g[1:] for g in got if g[0] == "entry"]
    channel = [g[1:] for g in got if g[0] == "channel"]
    print("entries in order", entries == [(k, float(k), float(k)) for k in range(rounds)])
    print("channel in order", channel == [(k, -float(k), True) for k in range(2 * rounds)])
    print("landed", landed_count)
    shoal.exit()


shoal.start(main)
"""


@pytest.mark.mpi
@pytest.mark.parametrize("native", ["1", "0"])
def test_large_entry_calls_and_channel_messages_keep_order_and_land_in_posted_buffers(mpi_job, native):
    """The next large message is received while the last is being delivered, except a
    channel's, which waits for the receive that posts its buffer: each of those lands in
    the posted array, with no copy (Channel.posted gave it)."""
    job = mpi_job(ORDER_PROGRAM, n=2, env={"SHOAL_NATIVE": native})
    assert job.returncode == 0, job
    assert "entries in order True" in job.stdout and "channel in order True" in job.stdout, job
    landed = int(job.stdout.split("landed ")[1].split()[0])
    assert landed >= 23, job  # the first may arrive before the first recv is posted


def test_shared_copy_parts():
    """The pieces of shared_copy.py in one process: addresses, the messages, the split,
    and a copy through the kernel (a process may read and write its own memory)."""
    import errno
    import os

    import numpy as np

    from shoal._transport import shared_copy as sc

    a = np.arange(100_000, dtype=np.uint8)
    assert sc.address(a) == a.ctypes.data == sc.address(memoryview(a).cast("B"))
    frozen = a.copy()
    frozen.flags.writeable = False
    assert sc.address(frozen) == frozen.ctypes.data  # read-only buffers too
    data = sc.pack(1234, [10, 20, 30])
    assert len(data) == 32 and sc.unpack(bytearray(data) + bytearray(40), len(data)) == (1234, (10, 20, 30))
    assert sc.split(4 << 20) == 2 << 20 and sc.split(10_000) == 4096 and sc.split(8191) == 0
    b = np.zeros_like(a)
    part = sc.split(a.nbytes)
    try:
        sc.write(os.getpid(), sc.address(a), sc.address(b), part)
    except OSError as exc:
        if exc.errno in (errno.EPERM, errno.ENOSYS):  # a sandbox without cross-memory attach
            pytest.skip(f"process_vm_writev is not permitted here: {exc}")
        raise
    sc.read(os.getpid(), sc.address(b) + part, sc.address(a) + part, a.nbytes - part)
    assert np.array_equal(a, b)
    with pytest.raises(OSError, match="process_vm_readv of 8 bytes with process"):
        sc.read(2**22 + 12345, sc.address(b), sc.address(a), 8)  # no such process
