"""Every program in examples/ runs to completion and prints its final check line.

Each example is started the way a user starts it, ``python -m shoal run -n N
examples/X.py``: with real MPI processes (marked ``mpi``) and on the in-process
transport.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from support.commands import clean_env
from support import EXAMPLES


# (program, extra arguments, what the last line of its output starts with)
CASES = [
    ("hello.py", (), "hello: OK"),
    ("pingpong.py", ("50",), "pingpong: OK"),
    ("reduction.py", (), "reduction: OK"),
    ("channels.py", (), "channels: OK"),
    ("receive_sets.py", (), "receive_sets: OK"),
    ("pool.py", (), "pool: OK"),
    ("pool.py", ("--async",), "pool: OK"),
    ("demo.py", (), "demo: OK"),
    ("balance.py", (), "balance: OK"),
    ("checkpoint.py", (), "checkpoint: OK"),
    ("stencil_jacobi2d.py", (), "stencil_jacobi2d: OK"),
    ("stencil_heat.py", (), "stencil_heat: OK"),
    ("stencil_laplace3d.py", (), "stencil_laplace3d: OK"),
    ("stencil_burgers.py", (), "stencil_burgers: OK"),
    # the how-to guides' programs (docs/howto/)
    ("blocks.py", (), "blocks: OK"),
    ("blocks.py", ("--3d",), "blocks: OK"),
    ("residual.py", (), "residual: OK"),
    ("pool_reduce.py", (), "pool_reduce: OK"),
    ("from_mpi4py.py", (), "from_mpi4py: OK"),
]
IDS = [f"{name[:-3]}{'-' + '-'.join(a.lstrip('-') for a in args) if args else ''}" for name, args, _ in CASES]


def run_example(name: str, args: tuple, pes: int, transport: str = "mpi") -> subprocess.CompletedProcess:
    env = clean_env()
    cmd = [sys.executable, "-m", "shoal", "run", "-n", str(pes), "--transport", transport, str(EXAMPLES / name), *args]
    return subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=60, env=env, cwd=EXAMPLES.parent)


def check(proc: subprocess.CompletedProcess, expected: str) -> None:
    report = f"exit code {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    assert proc.returncode == 0, report
    lines = proc.stdout.strip().splitlines()
    assert lines and lines[-1].startswith(expected), report


def test_every_example_is_tested():
    assert {name for name, _, _ in CASES} == {p.name for p in EXAMPLES.glob("*.py")}


@pytest.mark.mpi
@pytest.mark.parametrize("name, args, expected", CASES, ids=IDS)
def test_example_under_mpiexec(name, args, expected):
    check(run_example(name, args, pes=2), expected)


@pytest.mark.mpi
def test_demo_on_three_pes():
    check(run_example("demo.py", (), pes=3), "demo: OK")


@pytest.mark.parametrize("name, args, expected", CASES, ids=IDS)
def test_example_inproc(name, args, expected):
    check(run_example(name, args, pes=2, transport="inproc"), expected)
