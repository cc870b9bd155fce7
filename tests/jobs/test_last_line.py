"""The last line of ``shoal run`` names the real error (issue 35, item 1).

shoal ends a job after an error by ``MPI_Abort``, which under MPICH may return before
its launcher kills the process; the process used to unwind from there as ``SystemExit(1)``
and report that as the program's ``sys.exit(1)`` (or as "SystemExit: 1" in the
runtime), overwriting the real error. Each case runs twice: the race was hit nearly
every time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from support.commands import clean_env

from shoal import jobwatch

MPI = pytest.mark.mpi

HEAD = """
import sys, threading
import numpy as np
import shoal

class W(shoal.Chare):
    def f(self, *args):
        return 1

    def bad(self):
        raise ValueError(f"bad value in element {self.index}")

    def half(self, fut):
        if self.index[0] != 2:
            self.contribute(1, shoal.reducers.sum, fut)

class B(shoal.Chare):
    def __init__(self):
        self.ch = shoal.Channel(self, remote=self.collection[1 - self.index[0]])

    async def go(self):
        if self.index[0] == 0:
            self.ch.send(np.zeros(10))
        else:
            await self.ch.recv(into=np.zeros(5))
"""

#: (name, main's body, what the last line must say after "the job failed (exit code 1): ")
CASES = [
    ("unknown entry method", "shoal.Array(W, 4)[3].nosuch()",
     "PE 0: unhandled exception in the main program (main): AttributeError: W has no entry method 'nosuch'"),
    ("unpicklable argument", "shoal.Array(W, 4)[3].f(threading.Lock())",
     "PE 0: unhandled exception in the main program (main): TypeError: cannot send argument 0 (lock) of W.f: "
     "cannot pickle '_thread.lock' object"),
    ("index out of range", "shoal.Array(W, 4)[7].f()",
     "PE 0: unhandled exception in the main program (main): IndexError: index 7 is outside the dense array"),
    ("second start", "shoal.start(main)",
     "PE 0: unhandled exception in the main program (main): ShoalError: shoal.start()/shoal.run() called inside "
     "a running shoal program"),
    ("entry method on PE 1", "shoal.Array(W, 4)[3].bad()",
     "PE 1: unhandled exception in W.bad of element (3,): ValueError: bad value in element (3,)"),
    ("reduction missing a contribution", "fut = shoal.Future(); shoal.Array(W, 4).half(fut); fut.get()",
     "PE 0: unhandled exception in the main program (main): DeadlockError: deadlock: no message is in flight on "
     "any PE and nothing can run, so these waits can never end: the main program waits on <shoal.Future pending"),
    ("channel receive into a wrong buffer", "shoal.Array(B, 2).go(ret=True).get()",
     "PE 0: unhandled exception in the main program (main), raised on PE 1 in B.go of element (1,): ChannelError: "
     "<Channel <proxy B[1]> <-> <proxy B[0]>>: received an array of shape (10,) and dtype float64 into a buffer "
     "of shape (5,)"),
]


def _program(body: str, asynchronous: bool = False) -> str:
    if asynchronous:
        return HEAD + f"\nasync def main(args):\n    await shoal.Array(W, 2).f(ret=True)\n    {body}\n\nshoal.start(main)\n"
    return HEAD + f"\ndef main(args):\n    {body}\n    shoal.quiescence().get()\n\nshoal.start(main)\n"


def _last_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


@MPI
@pytest.mark.parametrize("name,body,said", CASES, ids=[c[0] for c in CASES])
def test_the_last_line_names_the_real_error(mpi_job, name, body, said):
    for _ in range(2):
        job = mpi_job(_program(body), timeout=90)
        assert job.returncode == 1, job
        assert _last_line(job.stderr).startswith(f"shoal run: the job failed (exit code 1): {said}"), job
        assert "called sys.exit" not in job.stderr and "SystemExit" not in job.stderr, job


@MPI
def test_an_async_main_s_error_is_the_last_line_too(mpi_job):
    for _ in range(2):
        job = mpi_job(_program("shoal.Array(W, 4)[3].nosuch()", asynchronous=True), timeout=90)
        assert job.returncode == 1, job
        assert _last_line(job.stderr).startswith(
            "shoal run: the job failed (exit code 1): PE 0: unhandled exception in the main program (main): "
            "AttributeError: W has no entry method 'nosuch'"), job


SLEEPER = """
import os, sys, time
import shoal

class W(shoal.Chare):
    def pid(self):
        return os.getpid()

def main(args):
    print("pids", *sorted(set(shoal.Array(W, 2).pid(ret=True).get())), flush=True)
    time.sleep(60)

shoal.start(main)
"""


@MPI
def test_sigint_to_the_pes_is_named_as_such(tmp_path):
    """Ctrl-C reaching the PEs (not the launcher): an interruption, exit code 130, not
    ``sys.exit(1)`` or ``SystemExit``."""
    prog = tmp_path / "prog.py"
    prog.write_text(SLEEPER)
    env = clean_env()
    job = subprocess.Popen([sys.executable, "-m", "shoal", "run", "-n", "2", str(prog)], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    try:
        line = job.stdout.readline()
        assert line.startswith("pids "), line
        time.sleep(0.3)  # main is asleep, PE 1 is waiting for work
        for pid in line.split()[1:]:
            os.kill(int(pid), signal.SIGINT)
        out, err = job.communicate(timeout=60)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    last = _last_line(err)
    assert job.returncode == 130, err
    assert last.startswith("shoal run: the job failed (exit code 130): PE "), err
    assert ": interrupted by SIGINT in the " in last and last.endswith(("KeyboardInterrupt", "(PE 0 failed too)",
                                                                        "(PE 1 failed too)")), err
    assert "called sys.exit" not in err and "SystemExit" not in err, err


@pytest.mark.parametrize("body,error", [(CASES[0][1], "AttributeError: W has no entry method 'nosuch'"),
                                        (CASES[4][1], "ValueError: bad value in element (3,)")],
                         ids=[CASES[0][0], CASES[4][0]])
def test_in_one_process_the_real_error_is_reported(tmp_path, body, error):
    """``shoal run --transport inproc``: the job ends by re-raising the error, never by a
    ``SystemExit`` of shoal's own."""
    prog = tmp_path / "prog.py"
    prog.write_text(_program(body))
    env = clean_env()
    proc = subprocess.run([sys.executable, "-m", "shoal", "run", "--transport", "inproc", "-n", "2", str(prog)],
                          capture_output=True, text=True, timeout=90, env=env, cwd=tmp_path)
    assert proc.returncode == 1, proc
    assert error in proc.stderr, proc.stderr
    assert "called sys.exit" not in proc.stderr and "SystemExit" not in proc.stderr, proc.stderr


def test_a_pe_s_first_fatal_record_stands(tmp_path, monkeypatch):
    """What a PE records after its first fatal report (the job being ended) never replaces it."""
    monkeypatch.setattr(jobwatch, "_folder", str(tmp_path))
    monkeypatch.setattr(jobwatch, "_rank", 3)
    monkeypatch.setattr(jobwatch, "_fatal_noted", False)
    jobwatch.note_fatal("unhandled exception in W.f of element (3,): ValueError: bad")
    jobwatch.note_fatal("prog.py called sys.exit(1) before its job ended")
    assert jobwatch.read_records(tmp_path)[3].fatal[1] == "unhandled exception in W.f of element (3,): ValueError: bad"


def test_a_message_that_introduces_a_list_is_described_whole():
    plain = ValueError("first line\nsecond line")
    listed = RuntimeError("these waits can never end:\n  main waits on f\n  W[2] waits on g")
    assert jobwatch.describe(plain) == "ValueError: first line"
    assert jobwatch.describe(listed) == "RuntimeError: these waits can never end: main waits on f W[2] waits on g"
    assert jobwatch.describe(KeyboardInterrupt()) == "KeyboardInterrupt"
