"""The Charm4py layer's own promises: Charm++ options leave sys.argv, an unsupported
feature fails at the call naming it, and a program that never calls exit() ends with
a deadlock report, not a hang (real mpiexec jobs of 2 PEs)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from shoal.compat.charm4py import take_launcher_options


def test_charm_options_leave_argv_and_balancer_maps_to_a_strategy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHOAL_LB", "")  # recorded, so the test's own setting is undone after it
    monkeypatch.delenv("SHOAL_LB")
    argv = ["+p4", "++local", "data.txt", "+balancer", "GreedyRefineLB", "+LBDebug", "1", "-v", "+p", "2"]
    assert take_launcher_options(argv) == ["data.txt", "-v"]
    assert os.environ["SHOAL_LB"] == "greedy"


def test_an_unknown_balancer_is_refused_naming_the_ones_there_are() -> None:
    with pytest.raises(SystemExit, match="GreedyLB"):
        take_launcher_options(["+balancer", "NoSuchLB"])


def _run(tmp_path, source: str) -> subprocess.CompletedProcess:
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent(source))
    env = {**os.environ, "SHOAL_DEADLOCK_TIMEOUT": "0.5"}
    return subprocess.run([sys.executable, "-m", "shoal", "run", "-n", "2", "--compat", "charm4py", str(prog)],
                          capture_output=True, text=True, timeout=60, env=env)


@pytest.mark.mpi
def test_an_unsupported_feature_fails_at_the_call_naming_it(tmp_path) -> None:
    proc = _run(tmp_path, """
        from charm4py import charm, Chare, Array
        class C(Chare):
            pass
        def main(args):
            Array(C, ndims=1).ckInsert(0, onPE=1)
        charm.start(main)
    """)
    assert proc.returncode != 0
    assert "ckInsert(onPE=...)" in proc.stderr and "map=" in proc.stderr


@pytest.mark.mpi
def test_a_program_that_never_calls_exit_ends_with_a_deadlock_report(tmp_path) -> None:
    proc = _run(tmp_path, """
        from charm4py import charm, Chare, Group
        class C(Chare):
            def hello(self):
                print("hello from", charm.myPe())
        def main(args):
            Group(C).hello()
        charm.start(main)
    """)
    assert proc.returncode != 0
    assert proc.stdout.count("hello from") == 2
    assert "ends only when a PE calls exit()" in proc.stderr
