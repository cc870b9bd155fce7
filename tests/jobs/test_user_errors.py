"""Errors in the user's words (issue 20): each names the user's call and what to do,
tracebacks leave out shoal's internal frames (``SHOAL_DEBUG=1`` keeps them), and the MPI
library's abort line is not the last thing a user reads.

The pool's pickling errors (naming ``shoal.pool.map()``/``Executor.submit()``, not the
internal worker) are tested in tests/pool/test_pool.py.
"""

from __future__ import annotations

import numpy as np
import pytest

import shoal
from shoal._runtime.tracebacks import format_user
from shoal.stencil import GhostDepthError, Stencil, UnsupportedOperationError


def test_not_running_error_points_scripts_and_notebooks_to_attach():
    with pytest.raises(shoal.NotRunningError, match=r"shoal\.my_pe\(\).*script or a notebook, call shoal\.attach\(\) first"):
        shoal.my_pe()


@pytest.fixture
def detached():
    """The stencil tests below start this process's job (as a script does); end it after."""
    yield
    shoal.detach()


class Wide(Stencil):
    fields = {"u": "float64", "v": "float64"}

    def step(self):
        self.v[2:-2] = self.u[:-4] + self.u[4:]
        self.u, self.v = self.v, self.u


class WideOld(Stencil):
    def __init__(self, n):
        self.u, self.v = self.initialize(n, num_fields=2, backend="numpy")

    def step(self):
        self.v[2:-2] = self.u[:-4] + self.u[4:]
        self.u, self.v = self.v, self.u


@pytest.mark.parametrize("make, named", [(lambda: Wide((16,), backend="numpy"), "Wide(shape, ...)"),
                                         (lambda: WideOld((16,)), "self.initialize(...)")])
def test_ghost_depth_error_names_the_constructor_used(make, named, detached):
    st = make()
    with pytest.raises(GhostDepthError, match=rf"pass ghost_depth=2 to {named.replace('(', '[(]').replace(')', '[)]')}"):
        st.solve(steps=2)


class Peak(Stencil):
    fields = {"u": "float64", "v": "float64"}

    def step(self):
        self.v[1:-1] = np.max(self.u[1:-1])
        self.u, self.v = self.v, self.u


def test_an_unsupported_numpy_function_points_to_the_spelling_that_works(detached):
    with pytest.raises(UnsupportedOperationError, match=r"np\.max is not supported.*maximum_of\(x\).*np\.maximum\(a, b\)"):
        Peak((16,), backend="numpy").solve(steps=2)
    with pytest.raises(UnsupportedOperationError, match=r"np\.sum .*total\(x\)"):
        np.sum(Peak((16,), backend="numpy").u)


def _raise_through_shoal():
    from shoal._runtime import context  # a frame of shoal's own, around the user's

    def user_code():
        raise ValueError("the user's mistake")

    def runtime_like():
        user_code()

    runtime_like.__code__ = runtime_like.__code__.replace(co_filename=context.__file__)
    runtime_like()


def test_tracebacks_leave_out_shoal_frames_unless_debugging(monkeypatch):
    try:
        _raise_through_shoal()
    except ValueError as exc:
        error = exc
    monkeypatch.delenv("SHOAL_DEBUG", raising=False)
    text = format_user(error)
    assert "user_code" in text and "the user's mistake" in text
    assert "context.py" not in text and "1 frame(s) of shoal's internals hidden; SHOAL_DEBUG=1" in text
    monkeypatch.setenv("SHOAL_DEBUG", "1")
    assert "context.py" in format_user(error)


BOOM = """
    import shoal

    class W(shoal.Chare):
        def go(self):
            helper()

    def helper():
        raise ValueError("bad value in helper")

    def main(args):
        shoal.Array(W, 2)[1].go()
        shoal.Future().get()

    shoal.start(main)
    """


@pytest.mark.mpi
def test_a_user_error_under_mpiexec_reads_in_the_users_words(mpi_job):
    job = mpi_job(BOOM)
    assert job.returncode == 1, job
    assert ", in helper" in job.stderr and "ValueError: bad value in helper" in job.stderr, job
    assert "_runtime" not in job.stderr and "SHOAL_DEBUG=1 shows them" in job.stderr, job
    assert "MPI_Abort" not in job.stderr and "Abort(" not in job.stderr, job
    assert job.stderr.strip().splitlines()[-1].startswith("shoal run: the job failed (exit code 1)"), job

    debug = mpi_job(BOOM, env={"SHOAL_DEBUG": "1"})
    assert debug.returncode == 1 and "receiving.py" in debug.stderr, debug
