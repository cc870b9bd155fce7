"""Charm4py's ways of naming things that programs beyond Charm4py's own tests use
(issue 38): an element index given as a list or a NumPy array (``proxy[[0, 0, 1]]``),
and the ``register`` decorator of older programs. Each program runs under mpiexec and on
the in-process transport, 2 PEs."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from shoal.compat.charm4py._proxies import as_index

TRANSPORTS = [pytest.param("mpi", marks=pytest.mark.mpi), "inproc"]


def _run(tmp_path, source: str, transport: str) -> subprocess.CompletedProcess:
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent(source))
    cmd = [sys.executable, "-m", "shoal", "run", "-n", "2", "--transport", transport, "--compat", "charm4py", str(prog)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


# -- indices as lists ------------------------------------------------------------------------------


def test_a_sequence_of_ints_is_an_index_and_other_things_are_left_alone():
    assert as_index([0, 0, 1]) == (0, 0, 1)
    assert as_index(np.array([1, 2])) == (1, 2)
    assert as_index(range(2)) == (0, 1)
    for index in (3, np.int64(3), (1, 2), slice(0, 2), "ab", np.array(5), None):
        assert as_index(index) is index


LIST_INDICES = """
    import numpy as np
    from charm4py import charm, Chare, Array, Group, coro

    class C(Chare):
        def where(self):
            return self.thisIndex

        @coro
        def neighbour(self):
            return self.thisProxy[[0, 0, 1]].where(ret=True).get()

    class S(Chare):
        def where(self):
            return self.thisIndex

    class G(Chare):
        def pe(self):
            return charm.myPe()

    def main(args):
        a = Array(C, (2, 2, 2))
        print("list", a[[0, 0, 1]].where(ret=True).get())
        print("numpy", a[np.array([1, 1, 0])].where(ret=True).get())
        print("numpy ints", a[[np.int64(1), 0, np.int32(1)]].where(ret=True).get())
        print("tuple", a[(1, 0, 1)].where(ret=True).get(), a[1, 0, 0].where(ret=True).get())
        print("from an element", a[[1, 1, 1]].neighbour(ret=True).get())
        print("split", sorted(charm.split(a, 1, elems=[[[0, 1, 0], [1, 1, 1]]])[0].where(ret=True).get()))
        s = Array(S, ndims=2)
        s.ckInsert([3, 4])
        s.ckDoneInserting()
        print("inserted", s[[3, 4]].where(ret=True).get())
        print("group", Group(G)[[1]].pe(ret=True).get())
        try:
            a[[0, 1]]
        except IndexError as e:
            print("refused", e)
        charm.exit()

    charm.start(main)
"""


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_lists_and_numpy_arrays_index_elements(tmp_path, transport):
    proc = _run(tmp_path, LIST_INDICES, transport)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    for expected in ("list (0, 0, 1)", "numpy (1, 1, 0)", "numpy ints (1, 0, 1)", "tuple (1, 0, 1) (1, 0, 0)",
                     "from an element (0, 0, 1)", "split [(0, 1, 0), (1, 1, 1)]", "inserted (3, 4)", "group 1",
                     "refused (0, 1) is not an index of the 3-d array of C; use 3 integer(s)"):
        assert expected in lines, proc.stdout


# -- older names -----------------------------------------------------------------------------------


def test_register_gives_the_chare_class_back_and_refuses_anything_else():
    from shoal.compat.charm4py import ArrayMap, Chare, register

    class C(Chare):
        pass

    class M(ArrayMap):
        pass

    assert register(C) is C and register(M) is M
    for thing in (object, int, len, 3):
        with pytest.raises(TypeError, match=r"^register\(.+\): not a Chare class, .* derive it from charm4py\.Chare$"):
            register(thing)


REGISTERED = """
    from charm4py import charm, register, Chare, Group, Array, ArrayMap, Reducer

    @register
    class Last(ArrayMap):
        def procNum(self, index):
            return charm.numPes() - 1

    @register
    class Worker(Chare):
        def work(self, done):
            self.reduce(done, charm.myPe(), Reducer.sum)

    def main(args):
        done = charm.Future()
        Group(Worker).work(done)
        print("group", done.get())
        done = charm.Future()
        Array(Worker, 4, map=Group(Last)).work(done)
        print("array", done.get())  # every element on the last PE, as the map says
        charm.exit()

    charm.start(main)
"""


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_program_that_registers_its_chares_runs(tmp_path, transport):
    proc = _run(tmp_path, REGISTERED, transport)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-2:] == ["group 1", "array 4"], proc.stdout
