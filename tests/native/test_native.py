"""The compiled per-message paths (shoal/_native) against their Python reference.

Each program runs under real mpiexec twice: with the compiled core (the default) and
with ``SHOAL_NATIVE=0``; both must give the same answers.
"""

from __future__ import annotations

import pytest
from support.commands import clean_env
from support import PROGRAMS

pytestmark = pytest.mark.mpi

BOTH = pytest.mark.parametrize("native", ["1", "0"])


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
            far.take_kw(5, b=6, c=None, ret=False)
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
    import subprocess
    import sys

    env = clean_env()
    env["SHOAL_NATIVE"] = "0"
    features = PROGRAMS / "features.py"
    proc = subprocess.run([sys.executable, "-m", "shoal", "run", "-n", "2", str(features)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("ALL OK")


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


@BOTH
def test_an_elements_ret_true_call_is_sent_without_python_on_the_compiled_path(mpi_job, native):
    """``proxy[i].method(x, ret=True)`` to an element on another PE makes its future and
    sends the call in C (no Runtime.invoke); to a local element, or with other keywords,
    it takes the Python path; the replies are the same either way."""
    job = mpi_job(
        """
        import shoal
        from shoal._runtime import runtime

        invoked = []
        python_invoke = runtime.Runtime.invoke
        def counted(self, proxy, entry, name, *rest):
            invoked.append(name)
            return python_invoke(self, proxy, entry, name, *rest)
        runtime.Runtime.invoke = counted

        class Server(shoal.Chare):
            def twice(self, x, plus=0):
                return 2 * x + plus

        def main(args):
            servers = shoal.Array(Server, 2, placement=lambda i, n: i % n)
            far, near = servers[1], servers[0]
            assert [far.twice(i, ret=True).get() for i in range(20)] == [2 * i for i in range(20)]
            assert near.twice(5, ret=True).get() == 10
            assert far.twice(5, plus=1, ret=True).get() == 11
            print("invoked", len(invoked))
            shoal.exit()

        shoal.start(main)
        """,
        env={"SHOAL_NATIVE": native},
    )
    assert job.returncode == 0, job
    assert f"invoked {2 if native == '1' else 22}\n" in job.stdout, job
