"""The failures a hostile user found (shared/reliability), each as its README row expects:
under mpiexec on 2 and 3 PEs and on the in-process transport (tests/programs/reliability.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest
from support.commands import clean_env
from support import PROGRAMS
from support.jobs import Job, run_inproc

import shoal

PROGRAM = PROGRAMS / "reliability.py"
SETUPS = [
    pytest.param(("mpi", 2), marks=pytest.mark.mpi, id="mpi2"),
    pytest.param(("mpi", 3), marks=pytest.mark.mpi, id="mpi3"),
    pytest.param(("inproc", 2), id="inproc2"),
]


def run_case(setup: tuple[str, int], *args: str, timeout: float = 120) -> Job:
    transport, n = setup
    env = clean_env()
    env["SHOAL_DEADLOCK_TIMEOUT"] = "0.5"
    cmd = [sys.executable, "-m", "shoal", "run", "-n", str(n), "--transport", transport, str(PROGRAM), *args]
    return Job(subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=PROGRAM.parent))


def results(job: Job) -> list[str]:
    return [line[len("RESULT ") :] for line in job.stdout.splitlines() if line.startswith("RESULT ")]


@pytest.fixture(params=SETUPS)
def setup(request: pytest.FixtureRequest) -> tuple[str, int]:
    return request.param


# -- legitimate programs get the right answer ------------------------------------------


@pytest.mark.parametrize(
    "case, expected",
    [
        ("bcast_two_failures", ["caught True", "end"]),  # F01
        ("resolved_future", ["True 7 True 7"]),  # F02
        ("pending_future", ["['late', 'late'] late"]),
        ("element_future", ["11 11"]),
        ("failed_future_elsewhere", ["relayed error", "own error"]),
        ("two_reductions_one_call", ["1 1"]),
        ("contribute_each_round", ["[0, 2, 4]"]),
        ("empty_sparse_broadcast", ["[]"]),  # F11
        ("unpicklable_return", ["True True"]),  # F14: the waiter hears which method and element
        ("lambdas", ["11", "[(0,), (1,), (2,), (3,)]", "10", "[True, True, True]"]),
    ],
)
def test_legal_program_gets_the_right_answer(setup, case, expected):
    job = run_case(setup, case)
    assert job.returncode == 0, job
    assert results(job) == expected, job


def test_many_buffers_in_one_argument(setup):  # F05
    job = run_case(setup, "many_buffers", "70000")
    assert job.returncode == 0, job
    assert results(job) == ["True True"], job


def test_unawaited_failure_is_reported(setup):  # F03
    job = run_case(setup, "unawaited_failure")
    assert job.returncode == 0, job
    assert results(job) == ["end"], job
    assert "the error of a future nobody retrieved" in job.stderr, job
    assert "ZeroDivisionError" in job.stderr and "W.boom of element (1,)" in job.stderr, job


def test_exit_code_from_an_element_is_kept(setup):  # F09
    job = run_case(setup, "exit_from_element")
    assert job.returncode == 8, job


def test_sys_exit_message_is_printed(setup):  # F13
    job = run_case(setup, "sys_exit_message")
    assert job.returncode == 1, job
    assert "fatal: config file missing" in job.stderr, job


# -- misuse ends the job with a clear error ----------------------------------------------


@pytest.mark.parametrize("when", ["nowait", "wait"])
def test_insert_after_done_inserting_is_always_refused(setup, when):  # F10
    job = run_case(setup, "insert_after_done", when)
    assert job.returncode != 0, job
    assert "insert(1) into the sparse array of W after done_inserting()" in job.stderr, job
    assert results(job) == [], job


@pytest.mark.parametrize("case", ["contribute_twice", "contribute_twice_fresh_target"])
def test_contributing_twice_in_one_call_is_refused(setup, case):  # F08
    """Also where each contribution names its target anew (``sinks[0].collect``: a new
    proxy and bound method each time), as the probe did: the compiled path compares them
    as Python's == does."""
    job = run_case(setup, case)
    assert job.returncode != 0, job
    assert "contributed twice in one call" in job.stderr and "W element (1,)" in job.stderr, job
    assert "PE" in job.stderr


def test_nested_start_is_refused(setup):  # F12
    job = run_case(setup, "nested_start")
    assert job.returncode != 0, job
    assert "called inside a running shoal program" in job.stderr, job
    assert results(job) == []


# -- checks where classes and channels are made (in-process) -----------------------------


def test_entry_method_with_a_ret_parameter_is_refused_at_definition():  # F18
    with pytest.raises(TypeError, match=r"entry method .*Bad.f has a parameter named 'ret'"):

        class Bad(shoal.Chare):
            def f(self, ret):
                return ret

    class Fine(shoal.Chare):
        def _helper(self, ret):  # not an entry method
            return ret


class Pair(shoal.Chare):
    def __init__(self, swapped, port):
        other = self.collection[1 - self.index[0]]
        first = self.index[0] == 0 or not swapped
        kw = {"port": "a"} if port else {}
        kw_b = {"port": "b"} if port else {}
        if first:
            self.a = shoal.Channel(self, remote=other, **kw)
            self.b = shoal.Channel(self, remote=other, **kw_b)
        else:
            self.b = shoal.Channel(self, remote=other, **kw_b)
            self.a = shoal.Channel(self, remote=other, **kw)

    async def go(self):
        if self.index[0] == 0:
            self.a.send("to a")
            self.b.send("to b")
            return None
        return await self.a.recv(), await self.b.recv()


@pytest.mark.parametrize("swapped", [False, True])
def test_channels_pair_by_port(swapped):  # F15
    def main(args):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # ports: no warning
            assert shoal.Array(Pair, 2, args=(swapped, True)).go(ret=True).get() == [None, ("to a", "to b")]

    assert run_inproc(main) == 0


def test_channels_opened_in_different_orders_warn():  # F15
    def main(args):
        with pytest.warns(UserWarning, match="without port=.*swap their messages"):
            shoal.Array(Pair, 2, args=(True, False)).go(ret=True).get()

    assert run_inproc(main) == 0


def test_channel_port_must_be_int_or_str():
    class Bad(shoal.Chare):
        def __init__(self):
            shoal.Channel(self, remote=self.collection[0], port=1.5)

    def main(args):
        shoal.Array(Bad, 1)
        shoal.quiescence().get()

    with pytest.raises(TypeError, match="port must be an int or a str"):
        run_inproc(main)


MPI_PHASE = """
import numpy as np
import shoal
from mpi4py import MPI


class Phase(shoal.Chare):
    def total(self):
        comm = shoal.mpi_comm()
        out = np.empty(1)
        comm.Allreduce(np.ones(1), out, op=MPI.SUM)
        return float(out[0]), comm.allreduce(2), comm.bcast("x" if shoal.my_pe() == 0 else None)


def main(args):
    g = shoal.Group(Phase)
    print("RESULT", g.total(ret=True).get(), flush=True)  # every PE enters: fine
    print("RESULT", g[0].total(ret=True).get(), flush=True)  # only PE 0 enters: it says so


shoal.start(main)
"""


@pytest.mark.mpi
def test_collective_entered_by_one_pe_is_reported(tmp_path):  # F16
    prog = tmp_path / "phase.py"
    prog.write_text(MPI_PHASE)
    env = clean_env()
    env["SHOAL_DEADLOCK_TIMEOUT"] = "0.1"
    proc = subprocess.Popen(
        [sys.executable, "-m", "shoal", "run", "-n", "2", str(prog)], env=env, cwd=tmp_path,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )
    try:
        line = ""
        for line in proc.stderr:  # type: ignore[union-attr]
            if "inside MPI" in line:
                break
        assert "shoal: PE 0 has waited" in line and "inside MPI Allreduce on shoal.mpi_comm()" in line, line
        assert "phase.py:11 in total" in line and "from a broadcast" in line, line
    finally:
        os.killpg(proc.pid, 9)
        out, _ = proc.communicate(timeout=30)
    assert out == "RESULT [(2.0, 4, 'x'), (2.0, 4, 'x')]\n"
