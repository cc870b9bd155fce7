"""Receive sets: several channel receives into posted buffers, one entry method when all land.

In-process tests cover the Python reference path; the ``mpi`` tests run the same kind
of program under real mpiexec with the compiled core and with ``SHOAL_NATIVE=0``.
"""

from __future__ import annotations

import numpy as np
import pytest
from support.jobs import run_inproc

import shoal

ROUNDS = 20


class Burst(shoal.Chare):
    """Element 0 sends every round at once to element 1, on two channels, so most
    messages arrive before element 1 has posted the round that takes them."""

    def __init__(self):
        other = self.collection[1 - self.index[0]]
        self.a = shoal.Channel(self, remote=other, port="a")
        self.b = shoal.Channel(self, remote=other, port="b")
        self.bufs = [np.zeros(3), np.zeros(2, dtype=np.int32)]
        self.set = shoal.ReceiveSet([self.a, self.b], self.bufs, then=self.landed)
        self.seen: list = []
        self.done = None

    def produce(self):
        for r in range(ROUNDS):
            self.a.send(np.full(3, r + 0.5))
            self.b.send(np.array([r, -r], dtype=np.int32))

    def consume(self, done):
        self.done = done
        self._post()

    def landed(self):
        a, b = self.bufs
        self.seen.append((a.tolist(), b.tolist()))
        if len(self.seen) == ROUNDS:
            self.done.send(self.seen)
        else:
            self._post()

    def _post(self):
        before = len(self.seen)
        self.set.post()
        assert len(self.seen) == before, "then() ran inside post()"


def test_early_messages_land_in_order_one_then_per_round():
    def main(args):
        pair = shoal.Array(Burst, 2)
        done = shoal.Future()
        pair[1].consume(done)
        pair[0].produce()
        out.append(done.get())

    out: list = []
    assert run_inproc(main, pes=2) == 0
    assert out[0] == [([r + 0.5] * 3, [r, -r]) for r in range(ROUNDS)]


class Ring(shoal.Chare):
    """Each round, every element sends to both neighbours and receives from both by a set."""

    def __init__(self, n: int):
        i = self.index[0]
        self.left = shoal.Channel(self, remote=self.collection[(i - 1) % n])
        self.right = shoal.Channel(self, remote=self.collection[(i + 1) % n])
        self.n, self.round, self.sums = n, 0, []
        self.from_left, self.from_right = np.zeros(4), np.zeros(4)
        self.set = shoal.ReceiveSet([self.left, self.right], [self.from_left, self.from_right], then=self.step)
        self.fut = None

    def start(self, fut):
        self.fut = fut
        self._send()
        self.set.post()

    def step(self):
        i, r, n = self.index[0], self.round, self.n
        assert np.array_equal(self.from_left, np.full(4, 100.0 * r + (i - 1) % n)), (i, r, self.from_left)
        assert np.array_equal(self.from_right, np.full(4, 100.0 * r + (i + 1) % n)), (i, r, self.from_right)
        self.sums.append(float(self.from_left[0] + self.from_right[0]))
        self.round += 1
        if self.round == ROUNDS:
            self.contribute(len(self.sums), shoal.reducers.sum, self.fut)
            return
        self._send()
        self.set.post()

    def _send(self):
        value = np.full(4, 100.0 * self.round + self.index[0])
        self.left.send(value)
        self.right.send(value)


def test_ring_of_sets_across_pes():
    def main(args):
        ring = shoal.Array(Ring, 6, args=(6,))
        fut = shoal.Future()
        ring.start(fut)
        out.append(fut.get())

    out: list = []
    assert run_inproc(main, pes=3) == 0
    assert out == [6 * ROUNDS]


class Misuse(shoal.Chare):
    def __init__(self):
        self.ch = shoal.Channel(self, remote=self.collection[1 - self.index[0]])

    def run_(self):  # an entry method, for the sets below
        pass

    def errors(self):
        out = []
        buf = np.zeros(2)
        for make in (
            lambda: shoal.ReceiveSet([self.ch], [buf], then=self._private),
            lambda: shoal.ReceiveSet([self.ch], [buf], then=print),
            lambda: shoal.ReceiveSet([self.ch], [], then=self.run_),
            lambda: shoal.ReceiveSet([self.ch, self.ch], [buf, buf], then=self.run_),
            lambda: shoal.ReceiveSet([self.ch], [np.broadcast_to(np.zeros(1), (2,))], then=self.run_),
            lambda: shoal.ReceiveSet([self.ch], [[0.0, 0.0]], then=self.run_),
        ):
            try:
                make()
                out.append("no error")
            except (ValueError, TypeError, shoal.ChannelError) as exc:
                out.append(str(exc))
        rset = shoal.ReceiveSet([self.ch], [buf], then=self.run_)
        rset.post()
        try:
            rset.post()
            out.append("no error")
        except shoal.ChannelError as exc:
            out.append(str(exc))
        try:
            self.ch.recv()
            out.append("no error")
        except shoal.ChannelError as exc:
            out.append(str(exc))
        return out

    def _private(self):
        pass


def test_bad_sets_are_refused_with_the_reason():
    def main(args):
        out.append(shoal.Array(Misuse, 2)[0].errors(ret=True).get())

    out: list = []
    assert run_inproc(main, pes=2) == 0
    private, foreign, count, twice, readonly, listed, posted_twice, recv_too = out[0]
    assert "not an entry method of Misuse" in private
    assert "entry method of the chare that owns every channel" in foreign
    assert "1 channels but 0 buffers" in count
    assert "a channel appears twice" in twice
    assert "buffer 0 (into[0])" in readonly and "read-only" in readonly
    assert "buffer 0 (into[0]) takes a NumPy array or a device array, not a list" in listed
    assert "post() while 1 receive(s) of the last round are pending" in posted_twice
    assert "already has a receive pending" in recv_too


class Mismatch(shoal.Chare):
    def __init__(self):
        self.ch = shoal.Channel(self, remote=self.collection[1 - self.index[0]])
        self.set = shoal.ReceiveSet([self.ch], [np.zeros(5)], then=self.never)
        if self.index[0] == 0:
            self.set.post()  # before anything is sent: the message fails as it lands

    def go(self):
        if self.index[0] == 1:
            self.ch.send(np.zeros(3))

    def never(self):
        raise AssertionError("then() ran after a receive that failed")


def test_a_message_that_does_not_fit_ends_the_job_naming_the_set():
    def main(args):
        shoal.Array(Mismatch, 2).go()
        shoal.Future().get()

    with pytest.raises(shoal.ChannelError, match=r"shape \(3,\).*shape \(5,\)") as info:
        run_inproc(main, pes=2)
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "raised on PE 0 in a receive of <ReceiveSet of <Mismatch element (0,)>: 1 channels, then never()>" in notes


class EarlyMismatch(shoal.Chare):
    def __init__(self):
        self.ch = shoal.Channel(self, remote=self.collection[1 - self.index[0]])
        self.set = shoal.ReceiveSet([self.ch], [np.zeros(5)], then=self.never)

    def send(self):
        self.ch.send(np.zeros(3))

    def post(self):
        self.set.post()

    def never(self):
        raise AssertionError("then() ran after a receive that failed")


def test_an_early_message_that_does_not_fit_fails_the_post():
    def main(args):
        pair = shoal.Array(EarlyMismatch, 2)
        pair[1].send(ret=True).get()
        shoal.quiescence().get()  # the message is in element 0's channel before it posts
        pair[0].post(ret=True).get()

    with pytest.raises(shoal.ChannelError, match=r"a receive of <ReceiveSet of <EarlyMismatch element \(0,\)>.*shape \(3,\)"):
        run_inproc(main, pes=2)


class Lonely(shoal.Chare):
    def __init__(self):
        self.ch = shoal.Channel(self, remote=self.collection[1 - self.index[0]])
        self.set = shoal.ReceiveSet([self.ch], [np.zeros(2)], then=self.never)

    def wait(self):
        self.set.post()  # nobody sends

    def never(self):
        pass


def test_a_set_nobody_completes_is_named_in_the_deadlock_report():
    def main(args):
        shoal.Array(Lonely, 2)[1].wait()
        shoal.Future().get()

    with pytest.raises(shoal.DeadlockError, match=r"ReceiveSet of <Lonely element \(1,\)>: 1 channels, then never\(\)> "
                                                   r"waits for 1 message\(s\), on <Channel <proxy Lonely\[1\]>"):
        run_inproc(main, pes=2)


BOTH = pytest.mark.parametrize("native", ["1", "0"])


@pytest.mark.mpi
@BOTH
def test_sets_under_mpiexec(mpi_job, native):
    """Near (same PE) and far (other PE) channels, early messages, arrays too large for
    an eager frame, quiescence after them, then a message that does not fit: a clear
    error and exit code."""
    job = mpi_job(
        """
        import numpy as np
        import shoal

        ROUNDS, BIG = 200, 40_000

        class Node(shoal.Chare):
            def __init__(self):
                i = self.index[0]
                self.far = shoal.Channel(self, remote=self.collection[(i + 1) % 4])
                self.near = shoal.Channel(self, remote=self.collection[(i - 1) % 4])
                self.small, self.big = np.zeros(3, dtype=np.int64), np.zeros(BIG)
                self.set = shoal.ReceiveSet([self.near], [self.small], then=self.got_small)
                self.big_set = shoal.ReceiveSet([self.near], [self.big], then=self.got_big)
                self.bad = shoal.ReceiveSet([self.near], [np.zeros(7)], then=self.got_small)
                self.r = 0

            def start(self, fut):
                self.fut = fut
                for r in range(ROUNDS):  # all at once: most arrive before their round is posted
                    self.far.send(np.array([r, self.index[0], 7], dtype=np.int64))
                self.set.post()

            def got_small(self):
                src = (self.index[0] - 1) % 4
                assert self.small.tolist() == [self.r, src, 7], (self.r, self.small)
                self.r += 1
                if self.r < ROUNDS:
                    self.set.post()
                    return
                self.far.send(np.arange(BIG, dtype=np.float64) + self.index[0])
                self.big_set.post()

            def got_big(self):
                assert np.array_equal(self.big, np.arange(BIG) + (self.index[0] - 1) % 4)
                self.contribute(self.r, shoal.reducers.sum, self.fut)

            def misfit(self):
                self.far.send(np.zeros(2))
                if self.index[0] == 2:
                    self.bad.post()

        def place(i, n):
            return (i // 2) % n  # 0,1 on PE 0 and 2,3 on PE 1: near and far channels

        def main(args):
            nodes = shoal.Array(Node, 4, placement=place)
            fut = shoal.Future()
            nodes.start(fut)
            print("rounds", fut.get(), flush=True)
            shoal.quiescence().get()  # every message counted as sent was counted as received
            print("quiet", flush=True)
            nodes.misfit()
            shoal.Future().get()

        shoal.start(main)
        """,
        env={"SHOAL_NATIVE": native},
    )
    assert "rounds 800" in job.stdout and "quiet" in job.stdout, job
    assert job.returncode != 0, job
    assert "ChannelError" in job.stderr and "shape (2,)" in job.stderr and "shape (7,)" in job.stderr, job
    assert "ReceiveSet of <Node element (2,)>" in job.stderr and "PE 1" in job.stderr, job
