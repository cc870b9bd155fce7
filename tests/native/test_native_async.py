"""Channels, `await` and coroutine steps on the compiled path (shoal/_native) against the
Python reference.

Each program runs under real mpiexec twice where it says ``native``: with the compiled
core and with ``SHOAL_NATIVE=0``; both must give the same answers (test_native.py has
the calls and broadcasts).
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.mpi

BOTH = pytest.mark.parametrize("native", ["1", "0"])


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
                second = readonly = False
                try:
                    ch.recv()
                except shoal.ChannelError as exc:
                    second = "already has a receive pending" in str(exc)
                await self.allreduce(0, shoal.reducers.sum)  # both ends tried before either sends
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


@BOTH
def test_a_future_resolved_in_an_entry_method_resumes_its_waiter_after_it(mpi_job, native):
    """Futures that an entry method resolves wake their coroutines after the method
    returns, never inside it, in the order they were resolved, each through the engine's
    ready queue (Task._wake); on the compiled path the core runs that queue as the
    delivered call returns, before it takes the next frame."""
    job = mpi_job(
        """
        import shoal
        from shoal._runtime import futures

        queued = []  # the wake-ups that took the Python path (the engine's ready queue)
        python_wake = futures.Task._wake
        def counted(self, fut):
            queued.append(1)
            return python_wake(self, fut)
        futures.Task._wake = counted

        class W(shoal.Chare):
            def __init__(self):
                self.log = []
                self.fs = []
            def prepare(self, n):
                self.fs = [shoal.Future() for _ in range(n)]
                del queued[:]
            async def wait(self, k):
                v = await self.fs[k]
                self.log.append(f"resumed {v}")
            def poke(self):
                for k, f in enumerate(self.fs):
                    f.send(k)
                    self.log.append(f"sent {k}")
                self.log.append("poke done")
            def report(self):
                log, self.log = self.log, []
                return log, len(queued)

        def main(args):
            w = shoal.Array(W, 2)
            for n in (3, 10):
                for i in (0, 1):
                    w[i].prepare(n, ret=True).get()
                    for k in range(n):
                        w[i].wait(k)
                    shoal.quiescence().get()
                    w[i].poke()
                    shoal.quiescence().get()
                    log, queued = w[i].report(ret=True).get()
                    want = [f"sent {k}" for k in range(n)] + ["poke done"] + [f"resumed {k}" for k in range(n)]
                    assert log == want, (i, n, log)
                    print("queued", i, n, queued)

        shoal.start(main)
        """,
        env={"SHOAL_NATIVE": native},
    )
    assert job.returncode == 0, job
    lines = [line for line in job.stdout.splitlines() if line.startswith("queued")]
    assert lines == ["queued 0 3 3", "queued 1 3 3", "queued 0 10 10", "queued 1 10 10"], job.stdout
