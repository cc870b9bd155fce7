"""Launching and ending jobs (docs/architecture.md, "Failures"): a PE that fails, vanishes or crashes outside an
entry method, and a launcher that is signalled or killed, end the whole job non-zero with a
report naming the PE; absurd PE counts and settings are refused. Exit codes and messages
only: every timeout here is a hang guard, never a measurement.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.commands import clean_env, mpiexec_env


HANG_GUARD = 60


def _shoal(*argv: str, env: dict | None = None, cwd: Path | None = None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "shoal", *argv], capture_output=True, text=True,
                          timeout=HANG_GUARD, env=env or clean_env(), cwd=cwd, **kw)


def _last_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _as_at_a_terminal() -> None:
    """Child set-up: SIGINT handled as at a terminal. A shell starts background jobs with
    SIGINT ignored, and Python then installs no KeyboardInterrupt handler, so a suite run
    with ``&`` would otherwise see the launcher ignore the signal these tests send."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _first_line(proc: subprocess.Popen) -> str:
    """The first line ``proc`` prints, waiting at most HANG_GUARD seconds (then: "")."""
    import queue
    import threading

    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: lines.put(proc.stdout.readline()), daemon=True).start()  # type: ignore[union-attr]
    try:
        return lines.get(timeout=HANG_GUARD).strip()
    except queue.Empty:
        return ""


def _job_processes(marker: str) -> list[int]:
    """Live processes whose command line mentions ``marker`` (the program's path)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and any(marker.encode() in part for part in cmdline):
            found.append(int(entry))
    return found


def _wait_gone(marker: str) -> list[int]:
    """Wait (bounded) until no process of the job is left; those still there."""
    deadline = time.monotonic() + 30
    while (left := _job_processes(marker)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def _kill_all(marker: str) -> None:
    for pid in _job_processes(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# -- a PE fails outside the main program (F04, F13) ---------------------------------------------
@pytest.mark.mpi
def test_exception_before_start_on_one_pe_ends_job(mpi_job):
    job = mpi_job(
        """
        import os, shoal
        if (os.environ.get("PMI_RANK") or os.environ.get("OMPI_COMM_WORLD_RANK")) == "1":
            raise RuntimeError("input file missing on PE 1")
        def main(args):
            print("main")
        shoal.start(main)
        """
    )
    assert job.returncode == 1, job
    assert "shoal: PE 1: unhandled exception in" in job.stderr and "outside the main program" in job.stderr
    assert 'prog.py", line 4, in <module>' in job.stderr and "RuntimeError: input file missing on PE 1" in job.stderr
    assert "runpy" not in job.stderr, job  # the launch frames are not the program's
    assert _last_line(job.stderr).startswith("shoal run: the job failed (exit code 1): PE 1: unhandled exception")
    assert "main" not in job.stdout


@pytest.mark.mpi
@pytest.mark.parametrize("value,code", [("'usage: prog.py N'", 1), ("3", 3)])
def test_sys_exit_before_start_on_one_pe_ends_job(mpi_job, value, code):
    job = mpi_job(
        f"""
        import os, sys, shoal
        if (os.environ.get("PMI_RANK") or os.environ.get("OMPI_COMM_WORLD_RANK")) == "1":
            sys.exit({value})
        shoal.start(lambda args: print("main"))
        """
    )
    assert job.returncode == code, job
    if code == 1:
        assert "usage: prog.py N\n" in job.stderr, job  # printed, as Python does
    assert "shoal: PE 1: " in job.stderr and f"called sys.exit({value}) before its job ended" in job.stderr, job
    assert f"the job failed (exit code {code}): PE 1:" in _last_line(job.stderr)


@pytest.mark.mpi
def test_exit_code_of_a_finished_job_is_kept_without_a_report(mpi_job):
    job = mpi_job(
        """
        import shoal
        class W(shoal.Chare):
            def stop(self):
                shoal.exit(5)
        def main(args):
            shoal.Group(W)[1].stop()
            shoal.Future().get()
        shoal.start(main)
        """,
        env={"SHOAL_DEADLOCK_TIMEOUT": "600"},
    )
    assert job.returncode == 5, job
    assert "shoal run:" not in job.stderr and "Abort" not in job.stderr, job


def test_program_level_errors_inproc(tmp_path):
    prog = tmp_path / "p.py"
    prog.write_text("import sys\nsys.exit('fatal: config file missing')\n")
    proc = _shoal("run", "--transport", "inproc", str(prog))
    assert proc.returncode == 1 and proc.stderr == "fatal: config file missing\n", proc
    prog.write_text("import shoal\n\ndef main(args):\n    pass\n\n{}['key']\n")
    proc = _shoal("run", "--transport", "inproc", str(prog))
    assert proc.returncode == 1, proc
    assert proc.stderr.startswith("Traceback") and "KeyError: 'key'" in proc.stderr and "runpy" not in proc.stderr


# -- a PE vanishes or crashes (F07) -----------------------------------------------------------
@pytest.mark.mpi
@pytest.mark.parametrize("pes", [2, 3])
def test_pe_calling_os_exit_0_fails_the_job_naming_it(mpi_job, pes):
    job = mpi_job(
        """
        import os, shoal
        class W(shoal.Chare):
            def work(self):
                if shoal.my_pe() == 1:
                    os._exit(0)
                return "ok"
        def main(args):
            print(shoal.Group(W).work(ret=True).get())
            print("main finished")
        shoal.start(main)
        """,
        n=pes,
        env={"SHOAL_DEADLOCK_TIMEOUT": "600"},
    )
    assert job.returncode == 1, job  # on 2 PEs and on 3 alike, whoever ended the others
    assert "main finished" not in job.stdout
    last = _last_line(job.stderr)
    assert "the job failed (exit code 1)" in last and "PE 1 (pid " in last and "ended before the job finished" in last
    assert "os._exit()" in last


@pytest.mark.mpi
@pytest.mark.parametrize("leave", ["os._exit(0)", "sys.exit(0)"])
def test_pe_leaving_before_start_does_not_hang(mpi_job, leave):
    job = mpi_job(
        f"""
        import os, sys, shoal
        if (os.environ.get("PMI_RANK") or os.environ.get("OMPI_COMM_WORLD_RANK")) == "1":
            {leave}
        shoal.start(lambda args: print("main"))
        """
    )
    assert job.returncode == 1, job
    last = _last_line(job.stderr)
    if leave == "os._exit(0)":  # vanished: no record of its end
        assert "PE 1 (pid " in last and "ended before the job finished" in last, job
    else:
        assert ("PE 1 left (exit code 0) before the job started, without starting MPI, while PE 0 waited for it "
                "in MPI's start-up") in last, job


@pytest.mark.mpi
def test_program_without_shoal_runs_on_every_pe(mpi_job):
    job = mpi_job("import os\nrank = os.environ.get('PMI_RANK') or os.environ['OMPI_COMM_WORLD_RANK']\n"
                  "os.write(1, f\"rank {rank}\\n\".encode())\n")
    assert job.returncode == 0 and sorted(job.stdout.split("\n")) == ["", "rank 0", "rank 1"], job
    assert job.stderr == "", job


@pytest.mark.mpi
@pytest.mark.parametrize("how", ["kill", "segfault"])
def test_crashed_pe_is_named_with_its_stack(mpi_job, how):
    die = "os.kill(os.getpid(), signal.SIGKILL)" if how == "kill" else "ctypes.string_at(0)"
    job = mpi_job(
        f"""
        import ctypes, os, signal
        import shoal

        class W(shoal.Chare):
            def die(self):
                {die}

        def main(args):
            shoal.Array(W, 2)[1].die()
            shoal.Future().get()

        shoal.start(main)
        """,
        env={"SHOAL_DEADLOCK_TIMEOUT": "600"},
    )
    assert job.returncode != 0, job
    last = _last_line(job.stderr)
    assert "the job failed" in last and "PE 1 (pid " in last, job
    if how == "segfault":
        assert re.search(r"with Segmentation fault in die \(\S*prog\.py, line 7\)", last), job
        assert "crashed; its Python stack:" in job.stderr and 'prog.py", line 7 in die' in job.stderr


# -- the launcher is signalled or killed (F17) ----------------------------------------------------
_LONG_JOB = """
import shoal, time
class W(shoal.Chare):
    def work(self, i):
        t = time.time()
        while time.time() - t < 0.01:
            pass
        return i
def main(args):
    g = shoal.Group(W)
    g.work(0, ret=True).get()
    print("started", flush=True)
    t = time.time()
    i = 0
    while time.time() - t < 120:
        g.work(i, ret=True).get(); i += 1
    print("finished normally")
shoal.start(main)
"""


@pytest.mark.mpi
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGKILL])
def test_signal_to_launcher_ends_every_process(tmp_path, sig):
    prog = tmp_path / f"long_{sig.name}.py"
    prog.write_text(_LONG_JOB)
    launcher = subprocess.Popen([sys.executable, "-m", "shoal", "run", "-n", "2", str(prog)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=clean_env(), start_new_session=True,
                                preexec_fn=_as_at_a_terminal)
    try:
        assert _first_line(launcher) == "started"
        assert len(_job_processes(str(prog))) >= 3  # mpiexec and the PEs (the launcher names it too)
        os.kill(launcher.pid, sig)
        _, err = launcher.communicate(timeout=HANG_GUARD)
        assert _wait_gone(str(prog)) == []
        if sig == signal.SIGKILL:
            assert launcher.returncode == -signal.SIGKILL
        else:
            assert launcher.returncode == 128 + sig, err
            assert _last_line(err).startswith(f"shoal run: stopped by {sig.name}; the job was ended"), err
            assert "Traceback" not in err and "KeyboardInterrupt" not in err
            assert not list(Path("/tmp").glob(f"shoal-run-{launcher.pid}-*"))  # its job folder is gone
    finally:
        try:
            os.killpg(launcher.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _kill_all(str(prog))
        launcher.wait(HANG_GUARD)


def test_sigint_to_inproc_job_is_one_line(tmp_path):
    prog = tmp_path / "long_inproc.py"
    prog.write_text(_LONG_JOB)
    job = subprocess.Popen([sys.executable, "-m", "shoal", "run", "-n", "2", "--transport", "inproc", str(prog)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env(),
                           start_new_session=True, preexec_fn=_as_at_a_terminal)
    try:
        assert _first_line(job) == "started"
        job.send_signal(signal.SIGINT)
        _, err = job.communicate(timeout=HANG_GUARD)
        assert job.returncode == 130 and err == "shoal run: stopped by SIGINT (KeyboardInterrupt)\n", err
    finally:
        job.kill()
        job.wait(HANG_GUARD)


@pytest.mark.mpi
def test_pes_end_the_job_when_their_launcher_is_gone(tmp_path):
    """The PEs' own watch (the launcher's SIGKILL leaves it no time): a stand-in launcher dies."""
    from shoal.jobwatch import process_start
    from shoal.launcher import find_mpiexec

    prog = tmp_path / "watched.py"
    prog.write_text(_LONG_JOB)
    stand_in = subprocess.Popen(["sleep", "300"])
    folder = tmp_path / "job"
    folder.mkdir()
    env = mpiexec_env(SHOAL_JOB_DIR=str(folder), SHOAL_LAUNCHER=f"{stand_in.pid}:{process_start(stand_in.pid)}")
    job = subprocess.Popen([find_mpiexec(), "-n", "2", sys.executable, "-m", "shoal", str(prog)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    try:
        assert _first_line(job) == "started"
        stand_in.kill()
        stand_in.wait()
        _, err = job.communicate(timeout=HANG_GUARD)
        assert job.returncode != 0
        assert f"its launcher (shoal run, pid {stand_in.pid}) is gone; ending the job" in err, err
        assert _wait_gone(str(prog)) == []
        assert "launcher (shoal run" in (folder / "pe0.fatal").read_text() + (folder / "pe1.fatal").read_text()
    finally:
        stand_in.kill()
        try:
            os.killpg(job.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _kill_all(str(prog))
        job.wait(HANG_GUARD)


# -- the report after mpiexec returns (a pure function of the PEs' records) ------------------------
def _rec(pe: int, **kw):  # -> shoal.jobwatch.PERecord
    from shoal.jobwatch import PERecord

    return PERecord(pe, pid=100 + pe, start="1", **kw)


def test_report_names_the_first_pe_that_failed():
    from shoal.jobreport import summarize

    recs = {0: _rec(0, fatal=(2.0, "unhandled exception in X: KeyError: 'b'")),
            1: _rec(1, fatal=(1.0, "unhandled exception in Y: ValueError: a"))}
    assert summarize(recs, [], 2, 1) == (1, ["the job failed (exit code 1): PE 1: unhandled exception in Y: "
                                            "ValueError: a (PE 0 failed too)"])


def test_report_names_the_pe_that_vanished_first():
    from shoal.jobreport import summarize

    recs = {0: _rec(0), 1: _rec(1), 2: _rec(2, exit_code=0)}
    code, lines = summarize(recs, [[1], [0, 2]], 3, 0)
    assert code == 1 and lines == [
        "the job failed (exit code 1): PE 1 (pid 101) ended before the job finished, with no error from Python "
        "(os._exit(), exit() in C code, or a signal such as SIGKILL); PE 0 ended with the job"]
    code, lines = summarize({0: _rec(0), 1: _rec(1)}, [[0, 1]], 2, 9)  # seen together: both named
    assert code == 1 and "PE 0 (pid 100) and PE 1 (pid 101) ended before the job finished" in lines[-1]


def test_report_shows_a_crashed_pe_with_its_stack():
    from shoal.jobreport import summarize

    import sysconfig

    stdlib = sysconfig.get_paths()["stdlib"]
    fault = ('Fatal Python error: Segmentation fault\n\nCurrent thread 0x1 (most recent call first):\n'
             f'  File "{stdlib}/ctypes/__init__.py", line 519 in string_at\n'
             '  File "/work/prog.py", line 7 in die\n  File "<frozen runpy>", line 88 in _run_code\n'
             'Extension modules: numpy (total: 1)')
    code, lines = summarize({0: _rec(0), 1: _rec(1, fault=fault)}, [[0], [1]], 2, 11)
    assert code == 11 and len(lines) == 2
    assert lines[0].startswith("PE 1 (pid 101) crashed; its Python stack:\n    Fatal Python error: Segmentation fault")
    assert 'File "/work/prog.py", line 7 in die' in lines[0] and "runpy" not in lines[0] and "Extension" not in lines[0]
    assert lines[1].endswith("PE 1 (pid 101) ended before the job finished, with Segmentation fault in die "
                             "(/work/prog.py, line 7); PE 0 ended with the job")


def test_report_explains_mpiexec_failing_to_start_the_pes():
    from shoal.jobreport import summarize

    recs = {3: _rec(3, fatal=(1.0, "unhandled exception in the shoal command: BrokenPipeError: [Errno 32]"))}
    code, lines = summarize(recs, [], 100, 255, command="mpiexec -n 100", cores=2, file_limit=200)
    assert code == 255 and lines == [
        "mpiexec failed (exit code 255) before every PE started (1 of 100 started): mpiexec -n 100 …; 100 PEs on 2 "
        "cores; mpiexec needs about 464 open files (4 per PE), the limit is 200 (ulimit -n)"]
    # Open MPI's prterun exits 186, not 255: PEs that failed only on its broken pipes still point at it
    broken = "unhandled exception in the shoal command: BrokenPipeError: [Errno 32] Broken pipe"
    recs = {pe: _rec(pe, fatal=(1.0 + pe, broken)) for pe in (8, 19)}
    code, lines = summarize(recs, [], 100, 186, command="mpiexec -n 100", file_limit=200)
    assert code == 186 and lines[0].startswith("mpiexec failed (exit code 186) before every PE started (2 of 100")
    eio = "unhandled exception in p.py, outside the main program: OSError: [Errno 5] Input/output error"
    assert summarize({34: _rec(34, fatal=(1.0, eio))}, [], 100, 186)[1][0].startswith("mpiexec failed (exit code 186)")
    recs[19] = _rec(19, fatal=(0.5, "unhandled exception in main: KeyError: 'a'"))  # a real error is still named
    assert summarize(recs, [], 100, 186)[1] == [
        "the job failed (exit code 186): PE 19: unhandled exception in main: KeyError: 'a' (PE 8 failed too)"]


def test_report_is_silent_for_a_job_that_finished():
    from shoal.jobreport import summarize

    recs = {pe: _rec(pe, exit_code=5) for pe in range(3)}
    assert summarize(recs, [[0, 1, 2]], 3, 5) == (5, [])
    assert summarize({}, [], 2, 0) == (0, [])  # PEs that keep no records (no shoal on them)
    assert summarize(recs, [], 3, 15, verdict="PE 1 left early", guarded=True) == (
        1, ["the job failed (exit code 1): PE 1 left early"])


def test_blas_pools_share_the_cores_unless_set(monkeypatch):
    from shoal.launcher import BLAS_THREADS, blas_threads

    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(8)), raising=False)
    assert blas_threads(2, {}) == {name: "4" for name in BLAS_THREADS}
    assert blas_threads(16, {}) == {name: "1" for name in BLAS_THREADS}
    assert blas_threads(2, {"MKL_NUM_THREADS": "3"}) == {}  # the user's choice stands


def test_start_up_imports_only_what_each_process_needs():
    """`shoal run`'s command line leaves the server (asyncio, ssl) alone, and a PE's
    `python -m shoal prog.py` leaves the launcher alone: start-up pays for neither."""
    probe = ("import sys, shoal.commands; shoal.commands._parser(); "
             "print(sorted(m for m in ('asyncio', 'ssl', 'shoal.remote.server', 'shoal.launcher') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.split("\n")[0] == "[]", out
    # a PE of `--compat charm4py` imports the layer, and through it shoal.lowlevel, whose
    # launcher names load only when used
    probe = ("import sys, shoal.compat.charm4py, shoal.lowlevel; "
             "print(sorted(m for m in ('shoal.launcher', 'shoal.launchers', 'shoal.commands') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.split("\n")[0] == "[]", out


#: what a PE of a program without arrays must not import at start-up: NumPy (0.1 s, as long
#: as MPI's own start), the subcommands and argparse, the launcher, and standard modules
#: that cost milliseconds each and that the runtime needs only on rarer paths
_NOT_AT_START_UP = ("numpy", "argparse", "shoal.commands", "shoal.launcher", "dataclasses", "inspect", "pathlib",
                    "subprocess", "hashlib", "tempfile", "shutil", "json", "socket", "asyncio", "random", "typing",
                    "pkgutil")
#: what the launcher of `shoal run -n N prog.py` does without (mpiexec's process is started by shoal.process)
_NOT_IN_THE_LAUNCHER = ("subprocess", "threading", "typing", "re", "enum", "argparse", "shoal.commands",
                        "shoal._runtime", "mpi4py", "numpy")


@pytest.mark.mpi
def test_a_pe_starts_without_numpy_or_modules_it_does_not_use(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(
        "import sys\nimport shoal\n\n"
        "class Probe(shoal.Chare):\n"
        "    def loaded(self, names):\n"
        "        return sorted(n for n in names if n in sys.modules)\n\n"
        "def main(args):\n"
        f"    print(shoal.Group(Probe).loaded({_NOT_AT_START_UP!r}, ret=True).get())\n"
        f"    print(shoal.Array(Probe, (2, 3)).loaded({_NOT_AT_START_UP!r}, ret=True).get())\n\n"
        "shoal.start(main)\n"
    )
    p = _shoal("run", "-n", "2", str(prog), cwd=tmp_path)
    assert p.returncode == 0, p
    assert p.stdout.split("\n")[:2] == ["[[], []]", "[[], [], [], [], [], []]"], p.stdout  # an N-d array of chares needs no NumPy


@pytest.mark.mpi
def test_a_pe_freezes_what_it_imported_and_collects_the_programs_cycles(mpi_job):
    """A PE moves what it imported before the program ran to the collector's permanent
    generation (program.py: no collection, the interpreter's exit included, traverses it
    again); the program's own garbage cycles are still collected, finalizers run."""
    job = mpi_job(
        """
        import gc
        import shoal

        class Node:
            def __del__(self):
                print("finalized on PE", shoal.my_pe(), flush=True)

        class W(shoal.Chare):
            def cycle(self):
                a, b = Node(), Node()
                a.other, b.other = b, a
                del a, b
                return gc.get_freeze_count() > 1000, gc.collect() >= 2

        def main(args):
            print(shoal.Group(W).cycle(ret=True).get())
            shoal.exit()

        shoal.start(main)
        """
    )
    assert job.returncode == 0, job
    assert "[(True, True), (True, True)]" in job.stdout, job
    assert job.stdout.count("finalized on PE") == 4, job


@pytest.mark.mpi
def test_the_launcher_imports_only_what_it_uses(tmp_path):
    """Every import of `shoal run` is on every job's critical path, before mpiexec starts."""
    prog = tmp_path / "prog.py"
    prog.write_text("import shoal\nshoal.start(lambda args: print('ran'))\n")
    launcher_only = (f"import sys\nsys.argv = ['shoal', 'run', '-n', '2', {str(prog)!r}]\n"
                     "import shoal.cli\ncode = shoal.cli.main()\n"
                     f"print(sorted(n for n in {_NOT_IN_THE_LAUNCHER!r} if n in sys.modules))\nsys.exit(code)\n")
    p = subprocess.run([sys.executable, "-c", launcher_only], capture_output=True, text=True, timeout=HANG_GUARD,
                       env=clean_env(), cwd=tmp_path)
    assert p.returncode == 0, p
    assert p.stdout.split() == ["ran", "[]"], p.stdout


def test_a_launcher_of_another_mpi_is_refused_not_run_as_single_pe_jobs(tmp_path):
    """Open MPI's mpirun starting PEs whose mpi4py loaded MPICH (or the reverse, as on a
    machine with both): each process sees a world of one. The job must refuse, naming
    both sizes and the library, not run as several one-PE jobs or crash."""
    prog = tmp_path / "prog.py"
    prog.write_text("import shoal\nshoal.start(lambda args: print('ran on', shoal.num_pes(), 'PEs'))\n")
    p = subprocess.run([sys.executable, "-m", "shoal", str(prog)], capture_output=True, text=True,
                       timeout=HANG_GUARD, env=clean_env(OMPI_COMM_WORLD_SIZE="2"))
    assert p.returncode != 0 and "ran on" not in p.stdout, p
    assert "the launcher started 2 processes (OMPI_COMM_WORLD_SIZE=2), but MPI sees 1" in p.stderr, p.stderr
    assert "MPI4PY_LIBMPI" in p.stderr


@pytest.mark.mpi
def test_an_mpiexec_that_cannot_be_executed_is_named_with_the_reason(tmp_path):
    """SHOAL_MPIEXEC names a script whose #! interpreter is missing: exec fails after fork;
    the launcher says which file and why, and exits 127 (as a shell does)."""
    fake = tmp_path / "mpiexec"
    fake.write_text("#!/nonexistent/interpreter\n")
    fake.chmod(0o755)
    prog = tmp_path / "prog.py"
    prog.write_text("import shoal\nshoal.start(lambda args: print('ran'))\n")
    p = _shoal("run", "-n", "2", str(prog), env=clean_env(SHOAL_MPIEXEC=str(fake)))
    assert p.returncode == 127 and "ran" not in p.stdout, p
    assert _last_line(p.stderr) == (f"shoal run: cannot start {fake}: its interpreter (/nonexistent/interpreter, "
                                    "its #! line) was not found; fix that line or pass --mpiexec"), p.stderr


@pytest.mark.mpi
@pytest.mark.parametrize("launch", [("run", "-n", "2"), ()], ids=["shoal run", "python -m shoal"])
def test_a_program_that_does_not_compile_ends_the_job_naming_the_line(tmp_path, launch):
    prog = tmp_path / "broken.py"
    prog.write_text("import shoal\nx = (\n")
    p = _shoal(*launch, str(prog))
    assert p.returncode == 1, p
    assert f'File "{prog}", line 2' in p.stderr and "SyntaxError: '(' was never closed" in p.stderr, p.stderr


@pytest.mark.mpi
def test_open_mpis_session_directory_is_the_jobs_own(mpi_job):
    """A session directory that a killed mpiexec left in /tmp, named by its pid, made a
    later Open MPI mpiexec given the same pid fail to start (PMIx: "unable to setup a
    rendezvous point"): each job's goes in its own folder, removed with it."""
    # Open MPI's PEs see where their session directory is; MPICH's, the setting as it went
    job = mpi_job("import os\nprint('BASE', os.environ.get('PMIX_SERVER_TMPDIR') or "
                  "os.environ['PRTE_MCA_prte_tmpdir_base'])\n")
    assert job.returncode == 0, job
    bases = {line.split()[1] for line in job.stdout.splitlines() if line.startswith("BASE ")}
    assert len(bases) == 1 and "/shoal-run-" in bases.pop(), job
