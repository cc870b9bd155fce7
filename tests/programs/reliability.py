"""Cases a hostile user found (shared/reliability), one per run: ``prog.py CASE``.

Each case prints ``RESULT ...`` lines that tests/jobs/test_reliability.py checks, on every
transport and PE count; the failing ones end the job and the tests check the exit
code and the message.
"""

import sys
import threading

import numpy as np

import shoal


class W(shoal.Chare):
    def fail(self):
        raise ValueError(f"element {self.index} failed")

    def is_done(self, fut):
        return fut.done()

    async def wait(self, fut):
        return await fut

    def boom(self, x):
        return 1 / x

    def take(self, arrays):
        return len(arrays), float(sum(a.sum() for a in arrays))

    def v(self):
        return self.index

    def lock(self):
        return threading.Lock()

    def twice(self, sink):
        self.contribute(1, shoal.reducers.sum, sink)
        if self.index[0] == 1:
            self.contribute(100, shoal.reducers.sum, sink)

    def twice_fresh(self, sinks):
        """F08 as the probe wrote it: the target made anew for each contribution."""
        self.contribute(1, shoal.reducers.sum, sinks[0].collect)
        if self.index[0] == 1:
            self.contribute(100, shoal.reducers.sum, sinks[0].collect)

    def sum_and_max(self, futs):
        self.contribute(self.index[0], shoal.reducers.sum, futs[0])  # two reductions in one call:
        self.contribute(self.index[0], shoal.reducers.max, futs[1])  # different reducers and targets

    def reduce_with(self, fn, fut):
        self.contribute(self.index[0] + 1, fn, fut)

    async def iterate(self, sink, rounds):  # one contribution per round, awaits between: legitimate
        ch = shoal.Channel(self, remote=self.collection[1 - self.index[0]])
        for r in range(rounds):
            self.contribute(r, shoal.reducers.sum, sink)
            ch.send(r)
            assert await ch.recv() == r
            await self.allreduce(r)

    def end(self, code):
        shoal.exit(code)

    def apply(self, fn, x):
        return fn(x)

    def make_future(self):
        self.fut = shoal.Future()
        return self.fut

    def resolve(self, value):
        self.fut.send(value)

    async def relay(self, fut, other):
        return await other.wait(fut, ret=True)


class Sink(shoal.Chare):
    def __init__(self, fut, n=1):
        self.fut, self.n, self.seen = fut, n, []

    def collect(self, total):
        self.seen.append(total)
        if len(self.seen) == self.n:
            self.fut.send(self.seen)


def run(case, arg):
    a = shoal.Array(W, 2)
    if case == "bcast_two_failures":  # F01: the first error reaches the waiter, the job goes on
        try:
            a.fail(ret=True).get()
        except ValueError as exc:
            print("RESULT caught", "failed" in str(exc))
        shoal.quiescence().get()
        print("RESULT end")
    elif case == "resolved_future":  # F02: a resolved future sent to its own PE and another
        f = shoal.Future()
        f.send(7)
        print("RESULT", a[0].is_done(f, ret=True).get(), a[0].wait(f, ret=True).get(),
              a[1].is_done(f, ret=True).get(), a[1].wait(f, ret=True).get())
    elif case == "pending_future":  # a pending future awaited on another PE, resolved later
        f = shoal.Future()
        waits = [a[i].wait(f, ret=True) for i in (0, 1)]
        relayed = a[0].relay(f, a[1], ret=True)
        f.send("late")
        print("RESULT", [w.get() for w in waits], relayed.get())
    elif case == "element_future":  # a future an element made, awaited by main and by a third party
        f = a[1].make_future(ret=True).get()
        w = a[0].wait(f, ret=True)
        a[1].resolve(11)
        print("RESULT", f.get(), w.get())
    elif case == "failed_future_elsewhere":  # a failed future's error travels to every waiter
        f = a[1].boom(0, ret=True)
        try:
            a[0].wait(f, ret=True).get()
        except ZeroDivisionError:
            print("RESULT relayed error")
        try:
            f.get()
        except ZeroDivisionError:
            print("RESULT own error")
    elif case == "unawaited_failure":  # F03: reported, as asyncio does
        f = a[1].boom(0, ret=True)
        shoal.quiescence().get()
        del f
        print("RESULT end")
    elif case == "many_buffers":  # F05
        n = int(arg)
        arrays = [np.full(2, float(i)) for i in range(n)]
        want = (n, float(sum(2.0 * i for i in range(n))))
        print("RESULT", tuple(a[1].take(arrays, ret=True).get()) == want, tuple(a[0].take(arrays, ret=True).get()) == want)
    elif case == "contribute_twice":  # F08
        f = shoal.Future()
        a.twice(shoal.Array(Sink, 1, args=(f,))[0].collect)
        print("RESULT", f.get())
    elif case == "contribute_twice_fresh_target":  # F08, each target a new bound method of a new proxy
        f = shoal.Future()
        sinks = shoal.Array(Sink, 1, args=(f,))
        a.twice_fresh(sinks)
        shoal.quiescence().get()
        a.twice_fresh(sinks)
        print("RESULT", f.get())
    elif case == "two_reductions_one_call":  # not F08: legitimate
        futs = [shoal.Future(), shoal.Future()]
        a.sum_and_max(futs)
        print("RESULT", futs[0].get(), futs[1].get())
    elif case == "contribute_each_round":
        f = shoal.Future()
        a.iterate(shoal.Array(Sink, 1, args=(f, 3))[0].collect, 3)
        print("RESULT", f.get())
    elif case == "exit_from_element":  # F09: shoal.exit(8) from an element is not lost
        a[1].end(8)
        shoal.quiescence().get()
        import time

        time.sleep(0.2)
    elif case == "insert_after_done":  # F10
        s = shoal.Array(W, ndims=1)
        s.insert(0)
        s.done_inserting()
        if arg == "wait":
            shoal.quiescence().get()
        s.insert(1)
        print("RESULT inserted")
    elif case == "empty_sparse_broadcast":  # F11
        s = shoal.Array(W, ndims=1)
        s.done_inserting()
        print("RESULT", s.v(ret=True).get())
    elif case == "nested_start":  # F12
        shoal.start(lambda args: None)
        print("RESULT after")
    elif case == "sys_exit_message":  # F13
        sys.exit("fatal: config file missing")
    elif case == "unpicklable_return":  # F14
        try:
            a[1].lock(ret=True).get()
        except TypeError as exc:
            print("RESULT", "W.lock of element (1,)" in str(exc), "picklable" in str(exc))
    elif case == "lambdas":  # cloudpickle where pickle cannot name a function
        offset = 10
        print("RESULT", a[1].apply(lambda x: x + offset, 1, ret=True).get())
        b = shoal.Array(W, 4, placement=lambda i, n: (i + 1) % n)
        print("RESULT", sorted(b.v(ret=True).get()))
        f = shoal.Future()
        b.reduce_with(lambda values: sum(values), f)
        print("RESULT", f.get())

        class Local(shoal.Chare):  # a chare class made inside a function
            def where(self):
                return shoal.my_pe() >= 0

        print("RESULT", shoal.Array(Local, 3).where(ret=True).get())


def main(args):
    run(args[1], args[2] if len(args) > 2 else None)


shoal.start(main)
