"""Rows of docs/charm4py.md's API table that Charm4py's own tests do not reach:
``charm.createFuture(senders=)``, ``charm.split(slicing=)``, ``charm4py.threads.NotThreadedError``,
a ready future's ``get()`` in a plain entry method, waits refused there in Charm4py's
words (``@coro``), ``ckLocal``/``ckLocalBranch``/``elemIdx``, the ``charm.thisProxy``
services ``LBTurnInstrumentOn/Off`` and ``exit``, ``charm.start(classes=, modules=)``,
readonlies set in ``main`` seen by constructors on every PE;
2 PEs under mpiexec and in one process."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

TRANSPORTS = [pytest.param("mpi", marks=pytest.mark.mpi), "inproc"]

PROGRAM = """
from charm4py import charm, Chare, Array, Group, Future, Channel
from charm4py.threads import NotThreadedError, Future as ThreadsFuture
from charm4py import readonlies as ro


class R(Chare):
    def __init__(self):
        self.x = getattr(ro, "X", None)  # PE 0's readonlies are here before the constructor runs

    def got(self):
        return self.x, charm.myPe()


class G(Chare):
    def mine(self):
        return self.thisProxy.ckLocalBranch() is self


class C(Chare):
    def where(self):
        return self.thisIndex

    def local(self):
        me = self.thisProxy[self.thisIndex]
        return me.ckLocal() is self, me.elemIdx == self.thisIndex

    def ready_get(self):
        f = Future()
        f.send(7)
        return f.get()  # a value already there: no wait, so no @coro needed

    def waits(self, kind):
        self.never = False
        f = Future()
        try:
            if kind == "get":
                f.get()
            elif kind == "wait":
                charm.wait([f])
            elif kind == "cond":
                self.wait("self.never")
            elif kind == "recv":
                Channel(self, remote=self.thisProxy[0]).recv()
            else:
                charm.sleep(0.01)
        except NotThreadedError as exc:
            return str(exc)
        return "not refused"


def main(args):
    f = charm.createFuture(senders=2)
    f.send(1)
    f.send(2)
    print("senders", sorted(f.get()), isinstance(f, ThreadsFuture), charm.options.interactive.verbose)
    a = Array(C, 8)
    evens, odds = charm.split(a, 2, slicing=[slice(0, 8, 2), slice(1, 8, 2)])
    print("slicing", sorted(evens.where(ret=True).get()), sorted(odds.where(ret=True).get()))
    print("ready get", a[0].ready_get(ret=True).get())
    for kind in ("get", "wait", "sleep", "recv", "cond"):
        print("refused", kind, a[1].waits(kind, ret=True).get())
    print("local", a[3].local(ret=True).get(), Group(G).mine(ret=True).get())
    ro.X = 47
    got = Array(R, 4).got(ret=True).get()
    print("readonly", sorted(set(x for x, _ in got)), sorted(set(pe for _, pe in got)))
    charm.thisProxy.LBTurnInstrumentOn()
    charm.thisProxy.LBTurnInstrumentOff()
    charm.thisProxy.exit()  # every PE's service: the job ends


charm.start(main, classes=[C, G], modules=[])
"""


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_api_rows_beyond_charm4pys_tests(tmp_path, transport: str) -> None:
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent(PROGRAM))
    cmd = [sys.executable, "-m", "shoal", "run", "-n", "2", "--transport", transport, "--compat", "charm4py", str(prog)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert "local (True, True) [True, True]" in lines, lines
    assert "readonly [47] [0, 1]" in lines, lines
    assert "senders [1, 2] True 1" in lines and "slicing [(0,), (2,), (4,), (6,)] [(1,), (3,), (5,), (7,)]" in lines and "ready get 7" in lines, lines
    refusals = [line for line in lines if line.startswith("refused")]
    assert len(refusals) == 5, lines
    calls = ("Future.get()", "charm.iwait()/charm.wait()", "charm.sleep()", "Channel.recv()", "self.wait('self.never')")
    for line, call in zip(refusals, calls):
        assert f"{call} waits" in line and "@coro" in line and "shoal" not in line, line
