"""A ``ret=True`` broadcast whose reply cannot be pickled (issue 35, item 2): the waiter
hears which element's value of which entry method cannot travel, on the compiled path
(``_native/broadcasts.c`` gathers the values) as on the Python one, and the job goes on."""

from __future__ import annotations

import pytest

MPI = pytest.mark.mpi

PROGRAM = """
import threading
import shoal

class Holder:
    def __init__(self):
        self.lock = threading.Lock()

class W(shoal.Chare):
    def f(self, bad):
        return Holder() if self.index == bad else self.index

class Caller(shoal.Chare):
    async def ask(self, workers, bad):
        try:
            return await workers.f(bad, ret=True)
        except TypeError as exc:
            return f"CAUGHT {exc}"

async def main(args):
    group, array = shoal.Group(W), shoal.Array(W, 4)
    asks = [("group", group, 1), ("array", array, (3,)), ("array", array, (0,)), ("array", array, (2,))]
    for name, workers, bad in asks:
        try:
            print("RESULT", name, bad, await workers.f(bad, ret=True), flush=True)
        except TypeError as exc:
            print("CAUGHT", name, bad, exc, flush=True)
    # the caller on PE 1: the root (PE 0) cannot send its own elements' values there
    caller = shoal.Array(Caller, 2)[1]
    for bad in ((1,), (0,)):
        print("FROM PE 1", bad, await caller.ask(array, bad, ret=True), flush=True)
    print("RESULT after", await array.f(None, ret=True), flush=True)

shoal.start(main)
"""


def _says(element: str) -> str:
    return (f"cannot send the return value (Holder) of W.f of element {element} back to the caller: cannot pickle "
            "'_thread.lock' object; an entry method called with ret=True must return a picklable value")


@MPI
@pytest.mark.parametrize("native", ["1", "0"])
def test_an_unpicklable_reply_is_reported_at_the_waiter_naming_the_element(mpi_job, native):
    """Whichever element of its PE replies last, and when the root's own element's value
    cannot go to a caller on another PE (the reductions find the value at fault)."""
    job = mpi_job(PROGRAM, n=2, env={"SHOAL_NATIVE": native}, timeout=120)
    assert job.returncode == 0, job
    _reported(job.stdout, job.stderr, job)


def test_an_unpicklable_reply_is_reported_alike_in_one_process(tmp_path):
    import subprocess
    import sys

    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    proc = subprocess.run([sys.executable, "-m", "shoal", "run", "-n", "2", "--transport", "inproc", str(prog)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc
    _reported(proc.stdout, proc.stderr, proc)


def _reported(stdout: str, stderr: str, job: object) -> None:
    assert "unavailable" not in stderr and "unhandled exception" not in stderr, job
    out = stdout.splitlines()
    assert f"CAUGHT group 1 {_says('1')}" in out, job
    assert f"CAUGHT array (3,) {_says('(3,)')}" in out, job
    # PE 0's own caller resolves its future without pickling: the object arrives as it is
    assert any(line.startswith("RESULT array (0,) [<__main__.Holder object") for line in out), job
    assert "RESULT after [(0,), (1,), (2,), (3,)]" in out, job
    assert f"CAUGHT array (2,) {_says('(2,)')}" in out, job
    assert "FROM PE 1 (1,) CAUGHT " + _says("(1,)") in out, job
    assert "FROM PE 1 (0,) CAUGHT " + _says("(0,)") in out, job
