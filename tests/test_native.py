"""The compiled per-message paths (shoal/_native) against their Python reference.

Each program runs under real mpiexec twice: with the compiled core (the default) and
with ``SHOAL_NATIVE=0``; both must give the same answers.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.mpi

BOTH = pytest.mark.parametrize("native", ["1", "0"])


def test_compiled_descriptor_matches_python(mpi_job):
    job = mpi_job(
        """
        import numpy as np
        import shoal
        from shoal.native import load_native, native_status
        from shoal._runtime.message import _describe

        def main(args):
            m = load_native()
            assert m is not None, native_status()
            cases = [np.zeros(3, d) for d in ("?", "i1", "u2", "<i4", "i8", "f2", "f4", "f8", "c8", "c16", ">f8", ">i2")]
            cases += [np.zeros(()), np.zeros((0,)), np.zeros((2, 3, 4), np.float32), np.zeros((1,) * 8)]
            for a in cases:
                assert m.describe(a) == _describe(((a.dtype, a.shape),)), (a.dtype, a.shape)
            pair = (np.zeros(2, "i8"), np.zeros((3, 1), "f4"))
            assert m.describe(*pair) == _describe(tuple((a.dtype, a.shape) for a in pair))
            print("descriptors ok")

        shoal.start(main)
        """,
        n=1,
    )
    assert job.returncode == 0, job
    assert "descriptors ok" in job.stdout


@BOTH
def test_entry_calls_round_trip(mpi_job, native):
    """Every kind of argument, sent to an element on the other PE, arrives equal; replies,
    coroutines, errors and blocking calls behave as on the Python path."""
    job = mpi_job(
        """
        import pickle
        import numpy as np
        import shoal

        class Echo(shoal.Chare):
            def __init__(self):
                self.got = []

            def take(self, *args):
                self.got.append(args)

            def dump(self):
                return self.got

            def take_kw(self, a, b=0, *rest, c=None, **more):
                self.got.append((a, b, rest, c, more))

            async def relay(self, x, back):
                y = await self.collection[0].double(x, ret=True)
                back.send(y)

            def double(self, x):
                return 2 * x

            def block(self, fut):
                try:
                    fut.get()
                except shoal.BlockingCallError:
                    return "refused"
                return "blocked"

        def place(i, n):
            return i % n

        def main(args):
            a = shoal.Array(Echo, 2, placement=place)
            far = a[1]
            sent = [
                (np.arange(5.0),),
                (np.arange(6, dtype=np.int16).reshape(2, 3), np.ones(0), np.array(7, np.uint8)),
                (np.arange(10)[::2],),                      # not contiguous: pickled
                (np.arange(100_000, dtype=np.float64),),   # rendezvous-sized
                (1, "two", {"three": 3.0}, None),
                (),
                (np.ones(3, ">f8"), np.array([True, False])),
                (np.arange(3, dtype=np.complex128), [np.zeros(2)]),
            ]
            for args in sent:
                far.take(*args)
            got = far.dump(ret=True).get()
            assert len(got) == len(sent), (len(got), len(sent))
            for want, have in zip(sent, got):
                assert len(want) == len(have), (want, have)
                for w, h in zip(want, have):
                    if isinstance(w, np.ndarray):
                        assert isinstance(h, np.ndarray) and h.dtype == w.dtype and h.shape == w.shape, (w, h)
                        assert np.array_equal(w, h) and h.flags.writeable
                    elif isinstance(w, list):
                        assert np.array_equal(w[0], h[0])
                    else:
                        assert w == h, (w, h)
            far.take_kw(1, c=np.arange(3), d="s")
            far.take_kw(2, 3, 4, ret=False)
            far.take_kw(5, b=6, c=None, ret=0)
            kw = far.dump(ret=True).get()[len(sent):]
            assert kw[0][:3] == (1, 0, ()) and np.array_equal(kw[0][3], np.arange(3)) and kw[0][4] == {"d": "s"}, kw
            assert kw[1] == (2, 3, (4,), None, {}) and kw[2] == (5, 6, (), None, {}), kw
            assert far.take_kw(7, c=8, ret=True).get() is None
            assert far.double(21, ret=True).get() == 42
            back = shoal.Future()
            far.relay(4, back)
            assert back.get() == 8
            assert far.block(shoal.Future(), ret=True).get() == "refused"
            m = far.take
            assert m == far.take and hash(m) == hash(far.take)
            assert pickle.loads(pickle.dumps(m)) == m
            print("round trip ok")

        shoal.start(main)
        """,
        env={"SHOAL_NATIVE": native},
    )
    assert job.returncode == 0, job
    assert "round trip ok" in job.stdout


@BOTH
def test_calls_to_an_element_of_this_pe_get_copies(mpi_job, native):
    """Plain arrays of every dtype, shape and byte order sent to an element of the
    sender's PE arrive equal, in their own memory: a later change of the sender's
    array does not reach the receiver (the compiled path copies them by hand)."""
    job = mpi_job(
        """
        import numpy as np
        import shoal

        DTYPES = ("?", "i1", "u2", "<i4", "i8", "f2", "f4", "f8", "c8", "c16", ">f8", ">i2")

        class Box(shoal.Chare):
            def __init__(self):
                self.got = []

            def take(self, *arrays):
                self.got.append(arrays)

            def dump(self):
                return self.got

            def send_all(self):
                other = self.collection[1]
                sent = []
                for d in DTYPES:
                    a = (np.arange(6) % 2).astype(d).reshape(2, 3)
                    other.take(a)
                    sent.append((a.copy(),))
                    a[...] = 0  # after the send: the receiver must not see this
                for pair in ((np.zeros(()), np.zeros((0,))), (np.ones((2, 3, 4), np.float32), np.arange(5))):
                    other.take(*pair)
                    sent.append(tuple(p.copy() for p in pair))
                return sent

        def on_pe_0(i, n):
            return 0

        async def main(args):
            boxes = shoal.Array(Box, 2, placement=on_pe_0)  # both elements on PE 0
            sent = await boxes[0].send_all(ret=True)
            await shoal.quiescence()
            got = await boxes[1].dump(ret=True)
            assert len(got) == len(sent), (len(got), len(sent))
            for s, g in zip(sent, got):
                for a, b in zip(s, g):
                    assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b), (a, b)
                    assert b.flags.writeable and b.flags.c_contiguous
            print("local copies ok", len(got))

        shoal.start(main)
        """,
        env={"SHOAL_NATIVE": native},
    )
    assert job.returncode == 0, job
    assert "local copies ok 14" in job.stdout, job


@BOTH
def test_error_in_entry_method_names_it(mpi_job, native):
    job = mpi_job(
        """
        import numpy as np
        import shoal

        class Bad(shoal.Chare):
            def boom(self, x):
                raise ValueError(f"bad value {x[0]}")

        def place(i, n):
            return i % n

        def main(args):
            a = shoal.Array(Bad, 2, placement=place)
            a[1].boom(np.array([3.5]))
            shoal.Future().get()

        shoal.start(main)
        """,
        env={"SHOAL_NATIVE": native},
    )
    assert job.returncode != 0, job
    assert "ValueError: bad value 3.5" in job.stderr
    assert "PE 1" in job.stderr and "Bad.boom" in job.stderr


def test_features_on_the_python_path():
    """The whole feature program on the Python reference path (no compiled core)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    env["SHOAL_NATIVE"] = "0"
    features = Path(__file__).parent / "programs" / "features.py"
    proc = subprocess.run([sys.executable, "-m", "shoal", "run", "-n", "2", str(features)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("ALL OK")


@BOTH
def test_channels_round_trip(mpi_job, native):
    """Channel messages between elements on one PE and on two, with and without posted
    buffers, of arrays and of other values, arrive in order and equal."""
    job = mpi_job(
        """
        import numpy as np
        import shoal

        class End(shoal.Chare):
            def __init__(self):
                self.far = shoal.Channel(self, remote=self.collection[(self.index[0] + 1) % 4])
                self.near = shoal.Channel(self, remote=self.collection[(self.index[0] - 1) % 4])

            async def run(self):
                i = self.index[0]
                buf = np.zeros(4)
                for k in range(50):
                    self.far.send(np.full(4, 10.0 * i + k))
                    got = await self.near.recv(into=buf)
                    assert got is buf and np.array_equal(buf, np.full(4, 10.0 * ((i - 1) % 4) + k)), (k, buf)
                    self.far.send(k, "text", np.arange(k))
                    n, text, arr = await self.near.recv()
                    assert (n, text) == (k, "text") and np.array_equal(arr, np.arange(k))
                    self.far.send(np.arange(k + 1, dtype=np.int32))
                    got = await self.near.recv()
                    assert got.dtype == np.int32 and np.array_equal(got, np.arange(k + 1))
                big = np.arange(50_000, dtype=np.float64) + i
                self.far.send(big)
                into = np.empty_like(big)
                await self.near.recv(into=into)
                assert np.array_equal(into, np.arange(50_000) + (i - 1) % 4)
                self.far.send(np.zeros(3))
                try:
                    await self.near.recv(into=np.zeros(5))
                except shoal.ChannelError as exc:
                    return f"mismatch reported: {'shape (3,)' in str(exc)}"
                return "mismatch not reported"

        def place(i, n):
            return (i // 2) % n  # elements 0,1 on PE 0 and 2,3 on PE 1: near and far channels

        async def main(args):
            ring = shoal.Array(End, 4, placement=place)
            print(await ring.run(ret=True))

        shoal.start(main)
        """,
        env={"SHOAL_NATIVE": native},
    )
    assert job.returncode == 0, job
    assert "['mismatch reported: True'" in job.stdout and "not reported" not in job.stdout, job


@BOTH
def test_channel_recv_takes_every_form_and_refuses_misuse(mpi_job, native):
    """recv() with into= by keyword or position, a buffer posted again (checked once), a
    message already waiting, a second recv while one is pending, a read-only buffer: the
    compiled recv and the Python one agree."""
    job = mpi_job(
        """
        import numpy as np
        import shoal

        class End(shoal.Chare):
            def __init__(self):
                self.ch = shoal.Channel(self, remote=self.collection[1 - self.index[0]])

            async def run(self):
                ch, me = self.ch, self.index[0]
                buf = np.zeros(2)
                for k in range(3):
                    ch.send(np.full(2, float(k)))
                    got = await (ch.recv(into=buf) if k % 2 else ch.recv(buf))  # keyword, then position
                    assert got is buf and buf[0] == k, (k, buf)
                ch.send("early")
                await self.collection[1 - me].ping(ret=True)  # sent after its "early": that waits in the inbox
                assert await ch.recv() == "early"
                fut = ch.recv()
                try:
                    ch.recv()
                except shoal.ChannelError as exc:
                    second = "already has a receive pending" in str(exc)
                ch.send(me)
                assert await fut == 1 - me
                frozen = np.zeros(2)
                frozen.flags.writeable = False
                try:
                    ch.recv(into=frozen)
                except shoal.ChannelError as exc:
                    readonly = "writable" in str(exc)
                return f"recv forms ok, second refused {second}, read-only refused {readonly}, {type(ch.recv).__name__}"

            def ping(self):
                return 1

        async def main(args):
            ends = shoal.Array(End, 2)
            print(await ends.run(ret=True))

        shoal.start(main)
        """,
        env={"SHOAL_NATIVE": native},
    )
    assert job.returncode == 0, job
    assert "recv forms ok, second refused True, read-only refused True" in job.stdout, job
    assert ("Compiled" if native == "1" else "method") in job.stdout, job


@BOTH
def test_await_gives_values_errors_and_remote_futures_alike(mpi_job, native):
    """`await future` (compiled where a core runs, Future.__await__ otherwise): a value
    that is a tuple or None, a future resolved already or later, an error re-raised, and
    a handle to another PE's future, which the Python path asks for."""
    job = mpi_job(
        """
        import shoal
        from shoal._runtime.futures import Future

        class W(shoal.Chare):
            def pair(self):
                return (1, 2)

            def boom(self):
                raise KeyError("boom")

            async def wait_for(self, fut):
                return await fut

        async def main(args):
            w = shoal.Array(W, 2)
            assert await w[1].pair(ret=True) == (1, 2)  # pending, then resumed
            done = shoal.Future()
            done.send((3, 4))
            assert await done == (3, 4)
            empty = shoal.Future()
            empty.send(None)
            assert await empty is None
            try:
                await w[1].boom(ret=True)
            except KeyError as exc:
                print("raised", exc)
            mine = shoal.Future()
            waiter = w[1].wait_for(mine, ret=True)  # PE 1 awaits a handle to this PE's future
            mine.send(7)
            assert await waiter == 7
            print("awaits ok", type(Future.__dict__["__await__"]).__name__)

        shoal.start(main)
        """,
        env={"SHOAL_NATIVE": native},
    )
    assert job.returncode == 0, job
    assert "raised 'boom'" in job.stdout, job
    assert f"awaits ok {'method_descriptor' if native == '1' else 'function'}" in job.stdout, job


@BOTH
def test_broadcasts_run_every_local_element(mpi_job, native):
    """A broadcast without reply runs on every element (keywords too); an error in one
    element ends the job naming it."""
    job = mpi_job(
        """
        import shoal

        class Cell(shoal.Chare):
            def __init__(self):
                self.seen = []

            def hear(self, x, scale=1):
                self.seen.append(x * scale)

            def report(self):
                return self.seen

            def boom(self, bad):
                if self.index == (bad,):
                    raise KeyError(f"element {bad} refuses")

        async def main(args):
            cells = shoal.Array(Cell, 7)
            cells.hear(2)
            cells.hear(3, scale=10)
            assert await cells.report(ret=True) == [[2, 30]] * 7
            print("broadcasts ok", flush=True)
            cells.boom(5)
            await shoal.Future()

        shoal.start(main)
        """,
        env={"SHOAL_NATIVE": native},
    )
    assert "broadcasts ok" in job.stdout, job
    assert job.returncode != 0 and "KeyError: 'element 5 refuses'" in job.stderr and "Cell.boom" in job.stderr, job


@BOTH
def test_collection_calls_take_the_compiled_broadcast_and_agree_with_python(mpi_job, native):
    """A collection's entry method is the compiled bound entry where a core runs: simple
    arguments go straight to the root, anything else (a string, an array, keywords) by
    the Python path, with the same results, message counts and method.outcomes()."""
    job = mpi_job(
        """
        import numpy as np
        import shoal
        from shoal._runtime.context import current

        class Cell(shoal.Chare):
            def __init__(self):
                self.seen = []

            def hear(self, *xs, scale=1):
                self.seen.append(xs if scale == 1 else tuple(x * scale for x in xs))
                return len(self.seen)

            def report(self):
                return self.seen

            def picky(self):
                if self.index == (2,):
                    raise ValueError("element 2 is picky")
                return self.index[0]

        def main(args):
            cells = shoal.Array(Cell, 5)
            print("bound", type(cells.hear).__name__)
            sent = current().counts.sent
            cells.hear(1, 2.5)                        # simple: compiled where a core runs
            cells.hear("a")                           # pickled in Python
            cells.hear(np.arange(2))                  # an array
            cells.hear(3, scale=2)                    # a keyword
            assert cells.hear(None, ret=False) is None
            counts = cells.hear(True, ret=True).get()  # a future, from either path
            assert counts == [6] * 5, counts
            print("sent", current().counts.sent - sent)  # the same on both paths
            seen = cells.report(ret=True).get()
            assert all(repr(s) == repr(seen[0]) for s in seen), seen
            print("seen", seen[0])
            outcomes = cells.picky.outcomes().get()
            assert [type(o).__name__ for o in outcomes] == ["int", "int", "ValueError", "int", "int"], outcomes
            try:
                cells[0].picky.outcomes()
            except TypeError as exc:
                print("element outcomes:", exc)
            shoal.exit()

        shoal.start(main)
        """,
        n=2,
        env={"SHOAL_NATIVE": native},
    )
    assert job.returncode == 0, job
    assert f"bound {'BoundEntry' if native == '1' else '_BoundCollectionEntry'}" in job.stdout, job
    assert "seen [(1, 2.5), ('a',), (array([0, 1]),), (6,), (None,), (True,)]" in job.stdout, job
    assert "sent 13\n" in job.stdout, job  # the same count on both paths
    assert "element outcomes: picky.outcomes() is for a collection" in job.stdout, job


@BOTH
def test_replies_of_ret_true_calls(mpi_job, native):
    """ret=True: plain values and arrays come back, a coroutine's value too, a remote
    error is raised at the caller with its type, and so is a value that cannot travel."""
    job = mpi_job(
        """
        import threading
        import numpy as np
        import shoal

        class Server(shoal.Chare):
            def twice(self, x):
                return 2 * x

            async def later(self, x):
                return await self.collection[0].twice(x, ret=True) + 1

            def bad(self, x):
                raise ValueError(f"no {x}")

            def lock(self):
                return threading.Lock()

        def place(i, n):
            return i % n

        def main(args):
            far = shoal.Array(Server, 2, placement=place)[1]
            assert far.twice(21, ret=True).get() == 42
            got = far.twice(np.arange(4.0), ret=True).get()
            assert got.dtype == np.float64 and np.array_equal(got, 2 * np.arange(4.0))
            assert far.later(5, ret=True).get() == 11
            try:
                far.bad("way", ret=True).get()
            except ValueError as exc:
                assert "no way" in str(exc) and any("PE 1" in n for n in exc.__notes__), exc.__notes__
            else:
                raise AssertionError("no error")
            futs = [far.twice(i, ret=True) for i in range(50)]
            assert shoal.gather(*futs).get() == [2 * i for i in range(50)]
            print("replies ok", flush=True)
            far.lock(ret=True).get()

        shoal.start(main)
        """,
        env={"SHOAL_NATIVE": native},
    )
    assert "replies ok" in job.stdout, job
    assert job.returncode != 0 and "cannot send lock to a future" in job.stderr, job


def test_load_counters_index_set_reset_and_pickle_fresh():
    """Chare._shoal_load on the compiled path: two doubles, 32 bytes, numpy-like indexing."""
    import pickle
    import sys

    from shoal.native import load_native

    module = load_native()
    if module is None:
        pytest.skip("the compiled path is not available here")
    load = module.Load()
    assert (load[0], load[1], len(load)) == (0.0, 0.0, 2)
    load[0] += 1.5
    load[1] = 7
    assert (load[0], load[-1]) == (1.5, 7.0)
    assert sys.getsizeof(load) <= 32
    fresh = pickle.loads(pickle.dumps(load))
    assert type(fresh) is module.Load and (fresh[0], fresh[1]) == (0.0, 0.0)
    load[:] = 0.0
    assert (load[0], load[1]) == (0.0, 0.0)
    with pytest.raises(IndexError, match="two counters"):
        load[2]
    with pytest.raises(TypeError):
        load[0] = "x"


@pytest.mark.mpi
def test_coroutines_resume_on_the_compiled_path(mpi_job):
    """Tasks of a PE with a compiled core step in C (_native/tasks.c): values, errors and
    an await of something that is not a future come out as on the Python path."""
    job = mpi_job(
        """
        import shoal
        from shoal._runtime.context import current


        class Odd:
            def __await__(self):
                yield 42  # not a shoal future


        class W(shoal.Chare):
            async def twice(self, x):
                a = await self.thisProxy_twin(x)
                return a + await self.thisProxy_twin(x)

            def thisProxy_twin(self, x):
                return self.proxy.echo(x, ret=True)

            def echo(self, x):
                return x

            async def fails(self):
                await self.proxy.echo(1, ret=True)
                raise ValueError("from the coroutine")

            async def odd(self):
                await Odd()

            def kind(self):
                from shoal._runtime.futures import Task
                async def nothing():
                    return None
                task = Task(current(), nothing(), lambda v, e: None, "t")
                task.coro.close()
                return type(task.resume).__name__


        def main(args):
            w = shoal.Array(W, 2)
            print("kind", w[1].kind(ret=True).get())
            print("twice", w[1].twice(21, ret=True).get())
            try:
                w[1].fails(ret=True).get()
            except ValueError as exc:
                print("raised", exc)
            try:
                w[1].odd(ret=True).get()
            except TypeError as exc:
                print("refused", "awaited 42" in str(exc))
            shoal.exit()


        shoal.start(main)
        """
    )
    assert job.returncode == 0, job
    assert "kind Compiled" in job.stdout, job
    assert "twice 42" in job.stdout, job
    assert "raised from the coroutine" in job.stdout, job
    assert "refused True" in job.stdout, job


def test_pickle_simple_gives_what_pickle_loads_back_and_declines_the_rest():
    """message.encode_call's compiled pickle: every tuple of None, bools, floats and
    64-bit ints loads back equal, item types included; anything else is declined (None)."""
    import math
    import pickle

    import numpy as np

    from shoal.native import load_native

    module = load_native()
    if module is None:
        pytest.skip("the compiled path is not available here")
    cases = [(), (None,), (True, False), (1.5, -0.0, math.inf), (0, -1, 2**31 - 1, -2**31, 2**31, -2**31 - 1),
             (2**63 - 1, -2**63), tuple(range(7)), (None, 3, 2.5, True, -7, 1e300)]
    for args in cases:
        blob = module.pickle_simple(args)
        back = pickle.loads(blob)
        assert back == args and [type(a) for a in back] == [type(a) for a in args], (args, back)
        assert math.copysign(1, pickle.loads(module.pickle_simple((-0.0,)))[0]) == -1
    assert math.isnan(pickle.loads(module.pickle_simple((math.nan,)))[0])
    for declined in [(2**63,), (-2**63 - 1,), ("x",), (np.float64(1.0),), (1, b"y"), ([1],), tuple(range(100))]:
        assert module.pickle_simple(declined) is None, declined
    with pytest.raises(TypeError):
        module.pickle_simple([1, 2])


def test_unpickle_simple_reads_what_pickle_simple_writes_and_nothing_else():
    """The receiver's compiled reading of pickle_simple's streams gives what pickle.loads
    gives (types, -0.0 and nan included); any other stream, a truncated one or one with
    bytes after STOP, is declined (None) and left to pickle.loads."""
    import math
    import pickle

    from shoal.native import load_native

    module = load_native()
    if module is None:
        pytest.skip("the compiled path is not available here")
    cases = [(), (None,), (True, False), (1.5, -0.0, math.inf, -math.inf), (0, -1, 2**31 - 1, -2**31, 2**31, -2**31 - 1),
             (2**63 - 1, -2**63), tuple(range(7)), tuple(range(16)), (None, 3, 2.5, True, -7, 1e300), (5e-324,)]
    for args in cases:
        blob = module.pickle_simple(args)
        back, ref = module.unpickle_simple(blob), pickle.loads(blob)
        assert back == ref == args and [type(a) for a in back] == [type(a) for a in args], (args, back)
        assert [repr(a) for a in back] == [repr(a) for a in args], (args, back)  # -0.0 stays -0.0
    assert math.isnan(module.unpickle_simple(module.pickle_simple((math.nan,)))[0])
    blob = module.pickle_simple((1, 2.5, None))
    for other in [pickle.dumps((1, 2.5), 5), pickle.dumps(("x",), 5), pickle.dumps((), 2), blob[:-1], blob + b".",
                  blob[:-2] + b"t.", b"", b"\x80\x05.", bytearray(blob[:6])]:
        assert module.unpickle_simple(other) is None, other
    assert module.unpickle_simple(bytearray(blob)) == (1, 2.5, None)
    with pytest.raises(TypeError):
        module.unpickle_simple(7)


@BOTH
def test_simple_arguments_arrive_as_sent(mpi_job, native):
    """None, bools, floats and 64-bit ints are pickled by the compiled send itself
    (send.c: pickle_simple); each arrives as the same value of the same type, and
    anything else (bigger ints, float and int subclasses) still goes through pickle."""
    job = mpi_job(
        """
        import enum, math
        import numpy as np
        import shoal

        class Colour(enum.IntEnum):
            RED = 1

        class Echo(shoal.Chare):
            def back(self, *args):
                return args

        def main(args):
            far = shoal.Array(Echo, 2)[1]
            cases = [
                (), (None,), (True, False), (0, -1, 1), (2**31 - 1, -2**31, 2**31, -2**31 - 1),
                (2**63 - 1, -2**63), (2**63, -2**63 - 1, 10**40),
                (0.0, -0.0, 1.5, -2.25e-300, 5e-324, 1.7976931348623157e308, math.inf, -math.inf),
                tuple(range(16)), (np.float64(2.5), np.int64(7), Colour.RED, 3, 4.0),
            ]
            for sent in cases:
                got = far.back(*sent, ret=True).get()
                assert len(got) == len(sent), (sent, got)
                for w, h in zip(sent, got):
                    assert type(h) is type(w) and h == w and repr(h) == repr(w), (w, h)  # repr: -0.0 is not 0.0
            nan = far.back(math.nan, ret=True).get()[0]
            assert type(nan) is float and math.isnan(nan)
            print("simple ok")

        shoal.start(main)
        """,
        env={"SHOAL_NATIVE": native},
    )
    assert job.returncode == 0, job
    assert "simple ok" in job.stdout


@BOTH
def test_futures_of_ret_true_calls_name_the_line_that_made_them(mpi_job, native):
    """The future of a ret=True call (Core.new_future on the compiled path, Future() on
    the Python one) is registered under a fresh id and names the caller's line."""
    job = mpi_job(
        """
        import shoal

        class G(shoal.Chare):
            def echo(self, x):
                return x

        def main(args):
            g = shoal.Group(G)
            made = [g.echo(1, ret=True), g[1].echo(2, ret=True), g[0].echo(x=3, ret=True)]  # line 10
            origins = {f.origin for f in made}
            print("origins", len(origins), origins.pop())
            print("ids", len({f.fid for f in made}), [f.get() for f in made])
            shoal.exit()

        shoal.start(main)
        """,
        n=2,
        env={"SHOAL_NATIVE": native},
    )
    assert job.returncode == 0, job
    assert "origins 1 " in job.stdout and "prog.py:10 in main\n" in job.stdout, job
    assert "ids 3 [[1, 1], 2, 3]" in job.stdout, job
