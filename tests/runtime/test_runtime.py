"""The programming model on the in-process transport (fast, deterministic)."""

from __future__ import annotations

import numpy as np
import pytest
from support.jobs import run_inproc

import shoal


class Cell(shoal.Chare):
    def __init__(self, base: int = 0):
        self.base = base
        self.log: list = []

    def where(self):
        return (self.index, shoal.my_pe())

    def add(self, x, y=0):
        return self.base + x + y

    def record(self, x):
        self.log.append(x)

    def history(self):
        return list(self.log)

    def total(self, fut):
        self.contribute(self.index[0], shoal.reducers.sum, fut)

    def array_sum(self, fut):
        self.contribute(np.full(4, float(self.index[0])), shoal.reducers.sum, fut)

    def gathered(self, fut):
        self.contribute(self.index[0] * 10, shoal.reducers.gather, fut)

    def custom(self, fut):
        self.contribute(self.index[0], _sorted_desc, fut)

    def to_entry(self, target):
        self.contribute(1, shoal.reducers.sum, target)

    async def all_sum(self, x):
        a = await self.allreduce(x, shoal.reducers.sum)
        b = await self.allreduce(x, shoal.reducers.max)
        return a, b

    def section_sum(self, section, fut):
        self.contribute(self.index[0], shoal.reducers.sum, fut, section=section)


def _sorted_desc(values):
    out = []
    for v in values:
        out.extend(v if isinstance(v, list) else [v])
    return sorted(out, reverse=True)


class Sink(shoal.Chare):
    def __init__(self):
        self.got = []

    def take(self, v):
        self.got.append(v)

    def result(self):
        return self.got


def job(pes=3):
    """Run ``fn`` as the main program and return what it returned."""

    def wrap(fn):
        out = []
        code = run_inproc(lambda args: out.append(fn()), pes=pes)
        assert code == 0
        return out[0]

    return wrap


def test_accessors_outside_a_program_raise():
    with pytest.raises(shoal.NotRunningError, match="outside a running shoal program"):
        shoal.my_pe()
    with pytest.raises(shoal.NotRunningError):
        shoal.num_pes()
    with pytest.raises(shoal.NotRunningError):
        shoal.Future()


def test_dense_array_block_placement_and_ret():
    def main():
        a = shoal.Array(Cell, (2, 3), args=(5,))
        return a[1, 2].where(ret=True).get(), a.where(ret=True).get(), a[0, 1].add(1, y=2, ret=True).get()

    one, everyone, added = job(3)(main)
    assert one == ((1, 2), 2)
    assert [idx for idx, _ in everyone] == [(i, j) for i in range(2) for j in range(3)]
    assert [pe for _, pe in everyone] == [0, 0, 1, 1, 2, 2]
    assert added == 8


def _reversed(i, n):
    return (3 - i) % n


def test_custom_placement_and_group_order():
    def main():
        a = shoal.Array(Cell, 4, placement=_reversed)
        g = shoal.Group(Cell)
        return a.where(ret=True).get(), g.where(ret=True).get(), g[2].where(ret=True).get()

    arr, grp, one = job(3)(main)
    assert arr == [((0,), 0), ((1,), 2), ((2,), 1), ((3,), 0)]
    assert grp == [(0, 0), (1, 1), (2, 2)]
    assert one == (2, 2)


def test_messages_before_construction_arrive_in_order():
    def main():
        a = shoal.Array(Cell, 6)
        for i in range(20):
            a[5].record(i)
            a.record(-i - 1)
        shoal.quiescence().get()  # broadcasts travel a tree: no order against direct sends
        return a[5].history(ret=True).get()

    log = job(3)(main)
    assert [x for x in log if x >= 0] == list(range(20))
    assert [x for x in log if x < 0] == [-i - 1 for i in range(20)]


def test_sparse_array_insert_and_broadcast():
    def main():
        a = shoal.Array(Cell, ndims=2)
        for i, j in [(5, 1), (0, 0), (9, 9)]:
            a.insert((i, j), args=(i * 100,))
        early = a[9, 9].add(1, ret=True)
        a.done_inserting()
        f = shoal.Future()
        a.total(f)
        return a.where(ret=True).get(), early.get(), f.get()

    everywhere, early, total = job(3)(main)
    assert [idx for idx, _ in everywhere] == [(0, 0), (5, 1), (9, 9)]
    assert early == 901
    assert total == 14


def test_reducers_and_targets():
    def main():
        a = shoal.Array(Cell, 7)
        futs = [shoal.Future() for _ in range(4)]
        a.total(futs[0])
        a.array_sum(futs[1])
        a.gathered(futs[2])
        a.custom(futs[3])
        s = shoal.Group(Sink)
        a.to_entry(s[1].take)
        a.to_entry(s.take)
        results = [f.get() for f in futs]
        shoal.quiescence().get()
        return results, s.result(ret=True).get(), a.all_sum(3, ret=True).get()

    (total, arr, gathered, custom), sinks, allred = job(3)(main)
    assert total == 21
    assert np.array_equal(arr, np.full(4, 21.0))
    assert gathered == [0, 10, 20, 30, 40, 50, 60]
    assert custom == [6, 5, 4, 3, 2, 1, 0]
    assert sinks == [[7], [7, 7], [7]]
    assert allred == [(21, 3)] * 7


def test_sections_multicast_and_reduce():
    def main():
        a = shoal.Array(Cell, 9)
        sec = a.section([1, 4, 8, 7])
        f = shoal.Future()
        sec.section_sum(sec, f)
        return sec.where(ret=True).get(), f.get(), len(sec)

    where, total, n = job(3)(main)
    assert [i for i, _ in where] == [(1,), (4,), (7,), (8,)]
    assert total == 20 and n == 4


class Pair(shoal.Chare):
    def __init__(self):
        other = self.collection[1 - self.index[0]]
        self.ch = shoal.Channel(self, remote=other, port=0)
        self.ch2 = shoal.Channel(self, remote=other, port=1)

    async def exchange(self, n):
        got = []
        for i in range(n):
            self.ch.send(self.index[0], i)
            self.ch2.send(np.arange(5) + i)
            got.append(await self.ch.recv())
            got.append((await self.ch2.recv()).tolist())
        return got

    async def into(self, size):
        buf = np.zeros(size)
        self.ch.send(np.full(size, self.index[0] + 1.0))
        out = await self.ch.recv(into=buf)
        return out is buf, float(buf.sum())

    async def wrong_size(self):
        self.ch.send(np.ones(4))
        try:
            await self.ch.recv(into=np.zeros(5))
        except shoal.ChannelError as exc:
            return str(exc)
        return "no error"


@pytest.mark.parametrize("size", [10, 100_000])
def test_channels_order_and_posted_buffers(size):
    def main():
        p = shoal.Array(Pair, 2)
        ex = p.exchange(3, ret=True).get()
        into = p.into(size, ret=True).get()
        wrong = p[0].wrong_size(ret=True)
        p[1].wrong_size()
        return ex, into, wrong.get()

    ex, into, wrong = job(2)(main)
    assert ex[0] == [(1, 0), [0, 1, 2, 3, 4], (1, 1), [1, 2, 3, 4, 5], (1, 2), [2, 3, 4, 5, 6]]
    assert into == [(True, 2.0 * size), (True, 1.0 * size)]
    assert "shape (4,)" in wrong and "shape (5,)" in wrong


def _square(x):
    return x * x


def _fail_on_3(x):
    if x == 3:
        raise ValueError("three")
    return x


def test_pool_and_executor():
    def main():
        a = shoal.pool.map(_square, range(20), chunksize=3)
        with shoal.Executor() as ex:
            futs = [ex.submit(_square, i) for i in range(5)]
            b = [f.result() for f in futs]
            c = list(ex.map(_square, range(4)))
            bad = ex.submit(_fail_on_3, 3)
            err = bad.exception()
        try:
            shoal.pool.map(_fail_on_3, range(6))
        except ValueError as exc:
            d = str(exc)
        return a, b, c, type(err).__name__, d

    a, b, c, err, d = job(3)(main)
    assert a == [i * i for i in range(20)]
    assert b == [0, 1, 4, 9, 16] and c == [0, 1, 4, 9]
    assert err == "ValueError" and d == "three"


async def _async_main_body():
    a = shoal.Array(Cell, 4)
    vals = await shoal.gather(a[0].add(1, ret=True), a[3].add(2, ret=True))
    sq = await shoal.pool.map_async(_square, [1, 2, 3])
    await shoal.quiescence()
    return vals, sq


def test_async_main_and_gather():
    out = []

    async def main(args):
        out.append(await _async_main_body())

    assert run_inproc(main, pes=2) == 0
    assert out == [([1, 2], [1, 4, 9])]


class Blocker(shoal.Chare):
    def block(self):
        shoal.Future().get()


def test_get_inside_entry_method_says_make_it_async():
    def main():
        shoal.Array(Blocker, 1)[0].block(ret=True).get()

    with pytest.raises(shoal.BlockingCallError, match="async def"):
        run_inproc(lambda args: main(), pes=2)


def test_exit_code_and_exit_from_entry_method():
    class_exit = []

    def main(args):
        class_exit.append(1)
        shoal.exit(3)

    assert run_inproc(main, pes=2) == 3
    assert run_inproc(lambda args: shoal.Array(Exiter, 2)[1].go(ret=True).get(), pes=2) == 7


class Exiter(shoal.Chare):
    def go(self):
        shoal.exit(7)


class Relay(shoal.Chare):
    def __init__(self):
        self.got = []

    def relay(self, target, x):
        target.take(x)

    def take(self, x):
        self.got.append((x, shoal.my_pe()))

    def result(self):
        return self.got


def test_migrated_element_is_reached_and_the_sender_learns_where():
    """An element moved by arr.migrate() is reached through the PE it left, whose host
    then tells the sender, whose next message goes straight there."""
    from shoal._runtime.context import current

    def main():
        rts = current().engine.runtimes
        a = shoal.Array(Relay, 3)
        a[2].take("before")
        a.migrate(2, 0)
        shoal.quiescence().get()
        key = (a._info.id, (2,))
        here = [(2,) in rt.colls[key[0]].elements for rt in rts]
        a[1].relay(a[2], "via the old host")
        shoal.quiescence().get()
        cached = rts[1].locations.cache.get(key)
        a[1].relay(a[2], "direct")
        shoal.quiescence().get()
        return a[2].result(ret=True).get(), here, cached

    got, here, cached = job(3)(main)
    assert here == [True, False, False]
    assert got == [("before", 2), ("via the old host", 0), ("direct", 0)]
    assert cached == 0


class EarlyContributor(shoal.Chare):
    def __init__(self, fut):
        self.contribute(1, shoal.reducers.sum, fut)


def test_contribute_from_constructor_waits_for_every_local_element():
    def main():
        f = shoal.Future()
        shoal.Array(EarlyContributor, 11, args=(f,))
        return f.get()

    assert job(2)(main) == 11


def test_blocking_pool_calls_in_async_code_raise_at_once():
    out = []

    async def main(args):
        with pytest.raises(shoal.BlockingCallError, match="map_async"):
            shoal.pool.map(_square, [1])
        fut = shoal.Executor().submit(_square, 3)
        with pytest.raises(shoal.BlockingCallError, match="async"):
            fut.result()
        out.append(await shoal.pool.map_async(_square, [2]))

    assert run_inproc(main) == 0
    assert out == [[4]]


class Keeper(shoal.Chare):
    def __init__(self):
        self.got = []

    def keep(self, a, b):
        self.got.append((a.copy(), b.copy(), a.flags.writeable))

    def result(self):
        return self.got


def test_same_pe_array_calls_have_value_semantics():
    """Same-PE calls with array arguments skip encoding but still copy the arrays."""

    def main():
        k = shoal.Array(Keeper, 2)  # on 1 PE: every call is local, some before construction
        a, b = np.arange(3.0), np.ones((2, 2), np.float32)
        k[1].keep(a, b)
        a[:] = -1  # the receiver must not see this
        b[:] = 7
        k[1].keep(a, b)
        return k[1].result(ret=True).get()

    got = job(1)(main)
    assert np.array_equal(got[0][0], np.arange(3.0)) and np.array_equal(got[0][1], np.ones((2, 2)))
    assert np.array_equal(got[1][0], -np.ones(3)) and got[1][1].dtype == np.float32
    assert got[0][2] is True


_BUTTERFLY: dict = {}


class _Member(shoal.Chare):
    async def run(self):
        x = 0.1 * (self.index + 1) ** 3 + 1e-17 * self.index
        futs = [self.allreduce(x), self.allreduce(np.full(3, x), shoal.reducers.max),
                self.allreduce(self.index + 1, shoal.reducers.product), self.allreduce(None, shoal.reducers.nop),
                self.allreduce(self.index % 2 == 0, shoal.reducers.logical_and)]
        _BUTTERFLY[self.index] = [await f for f in futs]


async def _butterfly_main(args):
    await shoal.Group(_Member).run(ret=True)


@pytest.mark.parametrize("pes", [1, 2, 3, 4, 5, 6, 7, 8])
def test_butterfly_allreduce_gives_every_pe_the_same_bits(pes):
    """All-reduces of whole collections on every PE take the pairwise exchange: several in
    flight at once, floats whose sum depends on the order, arrays, every reducer kind."""
    import math

    _BUTTERFLY.clear()
    assert run_inproc(_butterfly_main, pes) == 0
    first = _BUTTERFLY[0]
    for pe in range(pes):
        got = _BUTTERFLY[pe]
        assert got[0] == first[0] and np.array_equal(got[1], first[1]) and got[2:] == first[2:]
    assert abs(first[0] - sum(0.1 * (i + 1) ** 3 for i in range(pes))) < 1e-9
    assert np.array_equal(first[1], np.full(3, max(0.1 * (i + 1) ** 3 + 1e-17 * i for i in range(pes))))
    assert first[2] == math.factorial(pes) and first[3] is None and first[4] == (pes == 1)


class Noisy(shoal.Chare):
    """Contributes floats of wildly different magnitudes: a plain sum depends on the order."""

    def value(self):
        i = self.index[0]
        return (1e16 if i % 3 == 0 else 1.0) * (-1) ** i / (i + 1)

    def give(self, fut):
        self.contribute(self.value(), shoal.reducers.exact_sum, fut)

    async def everywhere(self):
        return await self.allreduce(np.full(3, self.value()), shoal.reducers.exact_sum)


def test_exact_sum_is_the_same_on_any_pe_count_and_equals_fsum():
    import math

    def main():
        a = shoal.Array(Noisy, 23)
        f = shoal.Future()
        a.give(f)
        return f.get(), a.everywhere(ret=True).get()

    want = math.fsum((1e16 if i % 3 == 0 else 1.0) * (-1) ** i / (i + 1) for i in range(23))
    for pes in (1, 2, 3):
        total, everywhere = job(pes)(main)
        assert total == want, pes
        assert all(np.array_equal(v, np.full(3, want)) for v in everywhere), pes
