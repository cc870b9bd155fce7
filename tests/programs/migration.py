"""Migration and balancing under traffic, and their bad input (tests/runtime/test_migration.py).

Run as ``shoal run -n P --transport T migration.py CASE``; prints ``RESULT ...`` lines.
"""

import time

import numpy as np

import shoal


class Target(shoal.Chare):
    """Receives numbered calls and channel messages while it is moved about."""

    def __init__(self):
        self.calls = {}
        self.data = np.arange(1000.0)
        self.small = np.zeros(4)
        self.pes = set()
        self.channels = {}

    def open(self, peer, key):
        self.channels[key] = shoal.Channel(self, remote=peer, port=key)

    def take(self, sender, k, block):
        self.calls.setdefault(sender, []).append((k, int(block[0]) == k and block.shape == (64,)))
        self.data += 1  # small state arrays stay writable after a move
        self.small += 1
        self.pes.add(shoal.my_pe())

    async def drain(self, key, count):
        ch = self.channels[key]
        got = []
        for _ in range(count):
            got.append(int((await ch.recv())[0]))
        return got

    def report(self):
        return self.calls, float(self.data[0]), sorted(self.pes), self.__dict__.get("_shoal_moves", 0)


class Sender(shoal.Chare):
    """Streams numbered messages to a target, a few per call, so moves happen in between."""

    def open(self, target, key):
        self.target, self.key = target, key
        self.ch = shoal.Channel(self, remote=target, port=key)

    def stream(self, k, total, done):
        for j in range(k, min(k + 5, total)):
            block = np.full(64, j, np.int64)
            self.target.take(self.key, j, block)
            self.ch.send(np.full(8, j, np.int64))
        if k + 5 < total:
            self.proxy.stream(k + 5, total, done)
        else:
            done.send(self.key)


class Mover(shoal.Chare):
    def hop(self, arr, index, n, total, done):
        arr.migrate(index, n % shoal.num_pes())
        if n < total:
            self.proxy.hop(arr, index, n + 1, total, done)
        else:
            done.send("hops")


class Work(shoal.Chare):
    """Elements of uneven cost that call at_sync every few steps."""

    def __init__(self, heavy):
        self.heavy = heavy
        self.state = np.full(100_000, float(self.index[0]))
        self.pings = 0
        self.resumed = 0
        self.sums = []

    def step(self, k, fut):
        cost = 0.004 if self.index[0] in self.heavy else 0.0005
        end = time.perf_counter() + cost
        while time.perf_counter() < end:
            pass
        self.state += 1
        self.contribute(float(self.state[0]), shoal.reducers.sum, fut)

    def section_step(self, k, fut, section):
        self.state += 1
        self.contribute(float(self.state[0]), shoal.reducers.sum, fut, section=section)

    def sync(self, fut):
        self.fut = fut
        self.at_sync()

    def resume_from_sync(self):
        self.resumed += 1
        self.contribute((self.index[0], shoal.my_pe()), shoal.reducers.gather, self.fut)

    def ping(self):
        self.pings += 1

    async def total(self):
        return await self.allreduce(self.pings)

    def check(self, steps):
        ok = bool(np.all(self.state == self.index[0] + steps))
        return ok, self.pings, self.resumed


class Ring(shoal.Chare):
    """Each element sends to its right neighbour every step: a ring the comm graph sees."""

    def __init__(self):
        self.got = 0

    def step(self, k, fut):
        right = self.collection[(self.index[0] + 1) % self.collection.shape[0]]
        for _ in range(20):
            right.take(np.zeros(16))
        self.contribute(None, shoal.reducers.nop, fut)

    def take(self, block):
        self.got += 1

    def sync(self, fut):
        self.fut = fut
        self.at_sync()

    def resume_from_sync(self):
        self.contribute(self.got, shoal.reducers.sum, self.fut)


def seen_comm(loads, comm, placement, num_pes, pe_speeds, *, seed=0):
    """A strategy that reports the graph it was given, then keeps the placement."""
    pairs = {(int(s), int(d)) for s, d in zip(comm.src, comm.dst)}  # positions, not indices
    n = len(loads)
    ring = (sorted(s for s, _ in pairs) == list(range(n)) and sorted(d for _, d in pairs) == list(range(n))
            and all(s != d for s, d in pairs))  # each element sends to one other, each gets from one
    print("RESULT graph", len(pairs) > 0, ring, int(comm.messages.sum()) > 0, flush=True)
    return placement.copy()


shoal.register_strategy("seen_comm", seen_comm)


def broken(loads, comm, placement, num_pes, pe_speeds, *, seed=0):
    """A user's strategy with a bug: one PE for the whole collection, not one per element."""
    return placement[:1]


shoal.register_strategy("broken", broken)


class Gather(shoal.Chare):
    """Receives one array from each of two senders per round through a ReceiveSet, and
    moves between rounds."""

    def __init__(self, senders):
        self.bufs = [np.zeros(1000), np.zeros(1000)]
        chans = [shoal.Channel(self, remote=senders[i], port="g") for i in range(2)]
        self.set = shoal.ReceiveSet(chans, self.bufs, then=self.landed)
        self.rounds = []

    def post(self, r, fut):
        self.r, self.fut = r, fut
        self.set.post()

    def landed(self):
        self.rounds.append((self.r, shoal.my_pe(), [float(b[0]) for b in self.bufs], bool(np.all(self.bufs[1] == self.bufs[1][0]))))
        self.fut.send(None)

    def report(self):
        return self.rounds


class Feeder(shoal.Chare):
    def open(self, target):
        self.ch = shoal.Channel(self, remote=target, port="g")

    def send(self, r):
        self.ch.send(np.full(1000, 10.0 * r + self.index[0]))


class Stuck(shoal.Chare):
    def __init__(self):
        self.lock = __import__("threading").Lock()


class Pinnable(shoal.Chare):
    """Even elements are not migratable (one as a class would be, by attribute)."""

    def __init__(self):
        if self.index[0] % 2 == 0:
            self.migratable = False

    def sync(self):
        self.at_sync()

    def resume_from_sync(self):
        pass

    def where(self):
        return shoal.my_pe()


class Idle(shoal.Chare):
    def sync(self):
        self.at_sync()


def order(arg):
    n = shoal.num_pes()
    targets = shoal.Array(Target, 2)
    senders = shoal.Group(Sender)
    total = 200
    for pe in range(n):
        key = f"pe{pe}"
        targets[0].open(senders[pe], key)
        senders[pe].open(targets[0], key)
    shoal.quiescence().get()
    done = [shoal.Future() for _ in range(n + 1)]
    mover = shoal.Array(Mover, 1)
    mover[0].hop(targets, 0, 1, 12, done[n])
    for pe in range(n):
        senders[pe].stream(0, total, done[pe])
    shoal.gather(*done).get()
    shoal.quiescence().get()
    calls, first, pes, moves = targets[0].report(ret=True).get()
    in_order = all([k for k, _ in calls[f"pe{pe}"]] == list(range(total)) for pe in range(n))
    intact = all(ok for pe in range(n) for _, ok in calls[f"pe{pe}"])
    print("RESULT calls", in_order, intact, first == n * total, moves >= 1 and len(pes) >= 2)
    channels = [targets[0].drain(f"pe{pe}", total, ret=True).get() == list(range(total)) for pe in range(n)]
    print("RESULT channels", all(channels))


def atsync(arg):
    n = shoal.num_pes()
    count = 4 * n
    heavy = set(range(count // n))  # the first PE's elements: a block placement puts them together
    a = shoal.Array(Work, count, args=(heavy,))
    steps, where = 6, []
    for k in range(steps):
        f = shoal.Future()
        a.step(k, f)
        f.get()
        if k % 3 == 2:
            g = shoal.Future()
            a.sync(g)
            a.ping()  # a broadcast sent while the round may be under way: it arrives once
            where.append(dict(g.get()))
    checks = a.check(steps, ret=True).get()
    expected = sum(i + steps for i in range(count))
    f = shoal.Future()
    a.step(steps, f)
    print("RESULT state", all(ok for ok, _, _ in checks), f.get() == expected + count)
    print("RESULT pings", [p for _, p, _ in checks] == [2] * count, a.total(ret=True).get() == [2 * count] * count)
    print("RESULT resumed", [r for _, _, r in checks] == [2] * count)
    first = where[0]
    print("RESULT spread", len({first[i] for i in heavy}) > 1, where)
    section = a.section([i for i in range(count) if i % 2 == 0])
    f = shoal.Future()
    section.section_step(steps + 1, f, section)
    print("RESULT section", f.get() == sum(i + steps + 2 for i in range(0, count, 2)))


def pinned(arg):
    """With SHOAL_LB=rotate every element moves to the next PE, except those not migratable."""
    a = shoal.Array(Pinnable, 4 * shoal.num_pes())
    before = a.where(ret=True).get()
    a.sync()
    shoal.quiescence().get()
    after = a.where(ret=True).get()
    even = all(after[i] == before[i] for i in range(0, len(before), 2))
    odd = all(after[i] == (before[i] + 1) % shoal.num_pes() for i in range(1, len(before), 2))
    print("RESULT pinned", even, odd)


def comm(arg):
    n = 8
    a = shoal.Array(Ring, n)
    for k in range(40):
        f = shoal.Future()
        a.step(k, f)
        f.get()
    f = shoal.Future()
    a.sync(f)
    print("RESULT delivered", f.get() == n * 40 * 20)


def receive_set(arg):
    feeders = shoal.Array(Feeder, 2)
    gather = shoal.Array(Gather, 1, args=(feeders,))
    for i in range(2):
        feeders[i].open(gather[0])
    shoal.quiescence().get()
    n = shoal.num_pes()
    for r in range(6):
        f = shoal.Future()
        gather[0].post(r, f)
        feeders.send(r)
        f.get()
        gather.migrate(0, (r + 1) % n)
        shoal.quiescence().get()
    rounds = gather[0].report(ret=True).get()
    ok = [got == [10.0 * r, 10.0 * r + 1] and whole for r, (rr, _, got, whole) in enumerate(rounds)]
    print("RESULT receive_set", len(rounds) == 6 and all(ok), len({pe for _, pe, _, _ in rounds}) == min(n, 6))


def bad(case):
    if case == "bad_group":
        g = shoal.Group(Idle)
        g[0].sync()
    elif case == "bad_pe":
        a = shoal.Array(Target, 2)
        a.migrate(1, shoal.num_pes() + 5)
    elif case == "unpicklable":
        a = shoal.Array(Stuck, 2)
        a.migrate(0, 1)
    elif case == "unknown_lb":
        a = shoal.Array(Idle, 4)
        a.sync()
    shoal.quiescence().get()
    print("RESULT no error")


def main(args):
    case = args[1]
    arg = args[2] if len(args) > 2 else None
    if case in ("order", "atsync", "comm", "receive_set", "pinned"):
        globals()[case](arg)
    else:
        bad(case)


shoal.start(main)
