"""``charm4py.ray`` on shoal: remote functions (recursive, with ObjectRef arguments),
actors as chares, ``ray.get``/``ray.wait``/``ray.put``, errors in Ray's words; real
mpiexec jobs of 2 and 3 PEs and the in-process transport."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from support.commands import clean_env

PROGRAM = """
from charm4py import charm, ray


@ray.remote
def fib(n):
    if n < 2:
        return n
    a, b = fib.remote(n - 1), fib.remote(n - 2)
    return ray.get(a) + ray.get(b)


@ray.remote
def add(x, y):
    return x + y


@ray.remote(num_cpus=1)
def where():
    return charm.myPe()


@ray.remote
def fail(x):
    raise ValueError(f"bad {x}")


@ray.remote
class Counter:
    def __init__(self, start):
        self.n = start

    def incr(self, by):
        self.n += by
        return self.n

    def total_with(self, other):  # another actor's ObjectRef, waited on here
        return self.n + ray.get(other.incr.remote(0))


def main(args):
    ray.init(num_cpus=4)
    assert ray.is_initialized() and ray.cluster_resources()["CPU"] == charm.numPes()
    assert ray.get(fib.remote(12)) == 144
    refs = [add.remote(i, i) for i in range(10)]
    assert ray.get(refs) == [2 * i for i in range(10)]
    chained = add.remote(add.remote(1, 2), ray.put(10))  # ObjectRefs as arguments are values there
    assert ray.get(chained) == 13
    ready, not_ready = ray.wait(refs, num_returns=3)
    assert len(ready) == 3 and len(not_ready) == 7 and all(r in refs for r in ready)
    assert set(ray.get([where.remote() for _ in range(8)])) <= set(range(charm.numPes()))
    print("ok remote functions")

    counters = [Counter.remote(10 * i) for i in range(charm.numPes())]
    assert ray.get([c.incr.remote(1) for c in counters]) == [10 * i + 1 for i in range(charm.numPes())]
    assert ray.get(counters[0].incr.remote(add.remote(2, 3))) == 6
    assert ray.get(counters[0].total_with.remote(counters[-1])) == 6 + 10 * (charm.numPes() - 1) + 1
    print("ok actors")

    try:
        ray.get(fail.remote(3))
    except ValueError as exc:
        print("task error:", exc)
    try:
        fib(3)
    except TypeError as exc:
        print("direct call:", exc)
    try:
        Counter(1)
    except TypeError as exc:
        print("direct actor:", exc)
    charm.exit()


charm.start(main)
"""


def _run(tmp_path, pes: int, transport: str) -> subprocess.CompletedProcess:
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent(PROGRAM))
    env = clean_env()
    env["SHOAL_DEADLOCK_TIMEOUT"] = "30"
    cmd = [sys.executable, "-m", "shoal", "run", "-n", str(pes), "--transport", transport, "--compat", "charm4py",
           str(prog)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)


def _check(proc: subprocess.CompletedProcess) -> None:
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "ok remote functions" in proc.stdout and "ok actors" in proc.stdout, out
    assert "task error: bad 3" in proc.stdout, out
    assert "direct call: remote function fib cannot be called directly" in proc.stdout, out
    assert "use 'fib.remote()'" in proc.stdout and "use 'Counter.remote()'" in proc.stdout, out


@pytest.mark.mpi
@pytest.mark.parametrize("pes", [2, 3])
def test_ray_programs_run_on_shoal_mpi(tmp_path, pes: int) -> None:
    _check(_run(tmp_path, pes, "mpi"))


def test_ray_programs_run_on_shoal_inproc(tmp_path) -> None:
    _check(_run(tmp_path, 2, "inproc"))
