"""The command line: info, run, and running a program file under any launcher."""

from __future__ import annotations

import subprocess
import sys


def _shoal(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "shoal", *argv], capture_output=True, text=True, timeout=120)


def test_info_reports_versions_library_settings_and_compiled_path():
    proc = _shoal("info")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for field in ("shoal", "numpy", "mpi4py", "mpi library", "mpi abi", "setting rendezvous_threshold", "setting tree_fanout"):
        assert field in out, out
    assert "compiled path" in out and "compiled (" in out, out


def test_info_inproc_needs_no_mpi():
    proc = _shoal("info", "--transport", "inproc")
    assert proc.returncode == 0 and "mpi library" not in proc.stdout


def test_missing_program_is_reported(tmp_path):
    proc = _shoal("run", "-n", "1", "--transport", "inproc", str(tmp_path / "nope.py"))
    assert proc.returncode == 2 and "not found" in proc.stderr


def test_run_inproc_passes_arguments(tmp_path):
    prog = tmp_path / "p.py"
    prog.write_text("import shoal\n\ndef main(args):\n    print('args', args[1:], shoal.num_pes())\n\nshoal.start(main)\n")
    proc = _shoal("run", "-n", "3", "--transport", "inproc", str(prog), "a", "--b")
    assert proc.returncode == 0, proc.stderr
    assert "args ['a', '--b'] 3" in proc.stdout


def test_bench_lists_benchmarks():
    proc = _shoal("bench", "--help")
    assert proc.returncode == 0 and "micro" in proc.stdout and "compare" in proc.stdout
    proc = _shoal("bench", "nope")
    assert proc.returncode == 2 and "unknown benchmark 'nope'" in proc.stderr
