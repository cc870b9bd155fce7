"""Failure behaviour (docs/architecture.md, "Failures"): every error names what and where, ends the job, never hangs."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest
from support.jobs import run_inproc

import shoal


class Worker(shoal.Chare):
    def ok(self, x=None):
        return x

    def explode(self):
        raise ValueError("boom from an entry method")

    def sum_or_max(self, fut):
        reducer = shoal.reducers.sum if self.index[0] % 2 else shoal.reducers.max
        self.contribute(1, reducer, fut)

    def shapes(self, fut):
        self.contribute(np.ones(2 + self.index[0]), shoal.reducers.sum, fut)


# -- at the call site (in-process: the error is raised in the caller) -------------


def test_unknown_entry_method_names_class_and_methods():
    def main(args):
        a = shoal.Array(Worker, 2)
        with pytest.raises(AttributeError, match=r"Worker has no entry method 'nope'; its entry methods are: .*explode.*ok"):
            a[0].nope()
        with pytest.raises(AttributeError, match="no entry method 'nope'"):
            a.nope

    assert run_inproc(main) == 0


def test_unpicklable_argument_names_method_and_argument():
    def main(args):
        a = shoal.Array(Worker, 2)
        with pytest.raises(TypeError, match=r"cannot send argument 0 \(generator\) of Worker.ok"):
            a[1].ok((i for i in range(3)))
        with pytest.raises(TypeError, match=r"argument 'x' \(lock\) of Worker.ok"):
            import threading

            a.ok(x=threading.Lock())

    assert run_inproc(main) == 0


def test_index_outside_dense_array_fails_at_call_site():
    def main(args):
        a = shoal.Array(Worker, (2, 3))
        with pytest.raises(IndexError, match=r"outside the dense array of Worker with shape \(2, 3\)"):
            a[2, 0]
        with pytest.raises(IndexError, match="2-d array"):
            a[1]
        with pytest.raises(IndexError, match="PE 5 is outside the Group"):
            shoal.Group(Worker)[5]

    assert run_inproc(main) == 0


def test_remote_exception_reraises_at_waiter_inproc():
    def main(args):
        fut = shoal.Array(Worker, 2)[1].explode(ret=True)
        with pytest.raises(ValueError, match="boom") as info:
            fut.get()
        notes = "\n".join(info.value.__notes__)
        assert "raised on PE 1 in Worker.explode of element (1,)" in notes
        assert "Traceback" in notes and 'raise ValueError("boom' in notes

    assert run_inproc(main) == 0


def test_uncaught_exception_propagates_inproc():
    def main(args):
        shoal.Array(Worker, 2)[1].explode()
        shoal.quiescence().get()

    with pytest.raises(ValueError, match="boom") as info:
        run_inproc(main)
    assert "raised on PE 1 in Worker.explode" in "\n".join(info.value.__notes__)


def test_mismatched_reduction_contributions_fail():
    def main(args):
        f = shoal.Future()
        shoal.Array(Worker, 4).sum_or_max(f)
        f.get()

    with pytest.raises(shoal.ReductionError, match="disagree: reducer"):
        run_inproc(main)


def test_mismatched_array_shapes_in_reduction_fail():
    def main(args):
        f = shoal.Future()
        shoal.Array(Worker, 3).shapes(f)
        f.get()

    with pytest.raises(shoal.ReductionError, match="shapes"):
        run_inproc(main, pes=1)


def test_message_to_missing_sparse_element_fails():
    def main(args):
        a = shoal.Array(Worker, ndims=1)
        a.insert(0)
        a[7].ok(1)
        a.done_inserting()
        shoal.quiescence().get()

    with pytest.raises(shoal.ShoalError, match=r"element \(7,\) of the sparse array of Worker, which was never inserted"):
        run_inproc(main)


def test_deadlock_inproc_reports_what_waits():
    """The report comes once the main program has idled ``deadlock_timeout`` on the
    engine's clock: a fake clock that advances a second per reading gets there at once,
    whatever the machine's load (30 s of real idling otherwise)."""
    from shoal._runtime.engine import Engine
    from shoal.settings import load_settings
    from shoal._transport import open_transports

    def main(args):
        shoal.Future().get()

    readings = []

    def clock():
        readings.append(None)
        return float(len(readings))

    settings = load_settings(transport="inproc", pes=3, deadlock_timeout=30.0)
    engine = Engine(open_transports("inproc", settings), settings, clock=clock, sleep=lambda s: None)
    with pytest.raises(shoal.DeadlockError, match=r"main program waits on <shoal.Future pending .*test_failures.py"):
        engine.run_main(main, [])
    assert len(readings) > 30  # the watch waited its 30 (fake) seconds of idling


# -- real processes -----------------------------------------------------------------


@pytest.mark.mpi
def test_remote_exception_reraises_at_waiter_mpi(mpi_job):
    job = mpi_job(
        """
        import shoal

        class W(shoal.Chare):
            def explode(self):
                raise KeyError("missing thing")

        def main(args):
            try:
                shoal.Array(W, 2)[1].explode(ret=True).get()
            except KeyError as exc:
                print("caught", type(exc).__name__, exc)
                print("\\n".join(exc.__notes__))

        shoal.start(main)
        """
    )
    assert job.returncode == 0, job
    assert "caught KeyError 'missing thing'" in job.stdout
    assert "raised on PE 1 in W.explode of element (1,)" in job.stdout
    assert "Traceback" in job.stdout


@pytest.mark.mpi
def test_uncaught_exception_ends_job_mpi(mpi_job):
    job = mpi_job(
        """
        import shoal

        class W(shoal.Chare):
            def explode(self):
                raise RuntimeError("unhandled on purpose")

        def main(args):
            shoal.Array(W, 2)[1].explode()
            shoal.Future().get()

        shoal.start(main)
        """
    )
    assert job.returncode != 0, job
    assert "PE 1: unhandled exception in W.explode of element (1,)" in job.stderr
    assert "RuntimeError: unhandled on purpose" in job.stderr


@pytest.mark.mpi
def test_exception_in_main_ends_job_mpi(mpi_job):
    job = mpi_job(
        """
        import shoal

        def main(args):
            {}["no such key"]

        shoal.start(main)
        """
    )
    assert job.returncode != 0, job
    assert "PE 0: unhandled exception in the main program" in job.stderr
    assert "KeyError: 'no such key'" in job.stderr


@pytest.mark.mpi
def test_deadlock_is_reported_mpi(mpi_job):
    job = mpi_job(
        """
        import shoal

        class W(shoal.Chare):
            async def wait_forever(self):
                await shoal.Future()

        def main(args):
            shoal.Array(W, 2)[1].wait_forever()
            never = shoal.Future()
            never.get()

        shoal.start(main)
        """,
        n=3,
    )
    assert job.returncode != 0, job
    assert "deadlock" in job.stderr
    assert "prog.py:10 in main" in job.stderr  # where the awaited future was created
    # element 1's PE: 1 on one node; where placement goes node by node (make test-nodes), another
    assert re.search(r"PE \d: W\.wait_forever of element \(1,\) awaits", job.stderr), job.stderr


@pytest.mark.mpi
def test_a_reduction_short_of_a_contribution_is_named_with_the_element(mpi_job):
    """Issue 35: the report named main's future only, not the reduction it waits on."""
    job = mpi_job(
        """
        import shoal

        class W(shoal.Chare):
            def go(self, f):
                if self.index[0] != 2:
                    self.contribute(1, shoal.reducers.sum, f)

        def main(args):
            f = shoal.Future()
            shoal.Array(W, 4).go(f)
            f.get()

        shoal.start(main)
        """,
        n=2,
    )
    assert job.returncode == 1, job
    assert re.search(r"PE \d: reduction #0 of W \(sum, to <shoal\.Future pending owner=PE 0 created at .*prog\.py:\d+ "
                     r"in main>\) has 1 of the 2 contribution\(s\) it waits for here \(2 from its elements, 0 from PEs "
                     r"below it in the tree\); element\(s\) 2 of this PE have not called contribute\(\) for it", job.stderr), job


@pytest.mark.mpi
@pytest.mark.parametrize("native", ["1", "0"])
def test_a_ret_broadcast_short_of_a_reply_is_named_with_its_count(mpi_job, native):
    """The report names the gather of a ret=True broadcast that waits for a reply, as the
    compiled core or the Python path holds it (it named main's future only)."""
    job = mpi_job(
        """
        import shoal

        class W(shoal.Chare):
            async def answer(self):
                if self.index == 0:
                    await shoal.Future()  # never resolved
                return self.index

        def main(args):
            shoal.Group(W).answer(ret=True).get()

        shoal.start(main)
        """,
        n=2, env={"SHOAL_NATIVE": native},
    )
    assert job.returncode == 1, job
    assert re.search(r"PE 0: the replies of a ret=True broadcast to W \(future #\d+ of PE 0\) have 1 of the 2 it "
                     r"waits for here", job.stderr), job
    assert re.search(r"PE 0: W\.answer of element 0 awaits", job.stderr), job


def test_bad_cli_option_lists_valid_ones():
    proc = subprocess.run([sys.executable, "-m", "shoal", "run", "--frobnicate", "x.py"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "unrecognized arguments: --frobnicate" in proc.stderr
    assert "valid options:" in proc.stderr and "--transport" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "shoal", "run", "--transport", "tcp", "x.py"], capture_output=True, text=True)
    assert proc.returncode == 2 and "invalid choice: 'tcp'" in proc.stderr


def test_unknown_setting_is_rejected():
    proc = subprocess.run(
        [sys.executable, "-c", "import shoal; shoal.run(lambda a: None)"],
        capture_output=True,
        text=True,
        env={"SHOAL_EAGER": "1", "PATH": ""},
    )
    assert proc.returncode != 0
    assert "unknown setting SHOAL_EAGER" in proc.stderr and "SHOAL_RENDEZVOUS_THRESHOLD" in proc.stderr


def test_deadlock_in_async_main_is_thrown_at_its_await():
    async def main(args):
        ch_owner = shoal.Array(Worker, 2)
        await ch_owner[0].ok(1, ret=True)
        await shoal.Future()

    with pytest.raises(shoal.DeadlockError, match=r"PE 0: the main program \(.*main\) awaits"):
        run_inproc(main, pes=2)


class HalfFails(shoal.Chare):
    async def run(self):
        if self.index[0] == 1:
            raise ValueError("element 1 failed")
        await shoal.Future()  # the others wait for something that never comes


def test_failing_element_of_ret_broadcast_reaches_the_waiter_at_once():
    def main(args):
        fut = shoal.Array(HalfFails, 3).run(ret=True)
        with pytest.raises(ValueError, match="element 1 failed"):
            fut.get()

    assert run_inproc(main, pes=2) == 0
